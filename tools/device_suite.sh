#!/usr/bin/env bash
# tools/device_suite.sh [gpu] [tiling] [chip] [tune] [hybrid] [gpudeep] [mg] [mg35] [physics] [cpu] [deep] [access] [verify] [all]   (no argument: all)
#
# The one script for the GPU machine (run from the repository root, e.g. through the device tool with
# `.whl` carried). It downloads nothing: it installs the carried wheels (.whl/*.whl, from
# tools/device-wheels.sh) into /tmp/site and the project with
# `python3 -m pip install --no-deps --no-build-isolation -e .`, records the machine, runs the chosen
# sections, and prints a short table last.
#   gpu     GPU tests (pytest -m "gpu and not mpi"); device-to-device copy and every kernel variant x
#           block shape at 16384^2 in float32 and float64 (stencil tune); launch gaps at 4096^2 (CUDA
#           graphs vs a launch loop); the cost of --fmad=false; Nsight Compute on tiled and the fastest.
#   tiling  time tiling: at 16384^2, 8192^2 and 4096^2 (TILING_SIZES) in both dtypes (TILING_DTYPES) the
#           tune sweep of vec and wave/wave2 x block (WAVE_BLOCKS) x k (TILES), stored; then at each
#           size and dtype copy, vec and the tiled choice kernel-only and through `stencil run` at 2000
#           steps (medians of 3), sections vs loop; GPU tests of the wave kernels; Nsight Compute on the
#           wave kernel (its limiting unit) and vec.
#   chip    issue 26 (on-chip `chip`, launches fitted to the GPU, `wave2a`'s row prefetch): a chip smoke
#           test; `stencil tune` A/B per size (CHIP_TUNE: SIZE DTYPE KERNELS BLOCKS: the old default block
#           beside the fitted one, wave2 beside wave2a, chip where the field fits; CHIP_TT: the wave time
#           tiles, 8), stored; then
#           `stencil run` at 2400 steps, 3 runs per CHIP_RUNS case with what was stored (x the copy-bound
#           rate, the copy measured in each run; CHIP_RUNS_ARGS: more options, e.g. --check-every 2400; each run writes
#           the first and last step's snapshots, so a run at 16384^2 float64 took about 150 s on 2026-12-01 (three
#           runs filled a 450 s limit): give the large sizes a call of their own); Nsight Compute on one launch of each CHIP_NCU kernel
#           (limiting unit, stall reasons); CHIP_NCU_SRC (e.g. 2048:float64:chip): one launch's stall
#           reasons, whole and by SASS instruction (chip_sass.csv). The GPU tests of the touched files come first (CHIP_TESTS_K
#           picks), then CHIP_PROBE, when set: `tools/gpu_probe.py chip`'s kernel-only timings of its arguments.
#   tune    block sweeps at 4096^2 and 8192^2, both dtypes (what is best differs by size).
#   hybrid  hybrid tests under mpirun (pytest -m "gpu and mpi": 1 rank per GPU, 2 ranks on one GPU,
#           errors); strong scaling 1 -> 2 GPUs at 16384^2 and 32768^2, weak scaling at 16384^2 per
#           GPU; every halo mode and transport at 16384^2, overlap at 32768^2.
#   gpudeep GPU deep halos (issue 15): tests/test_gpu_hybrid.py -k deep (2 and 4 ranks sharing GPU 0,
#           staged; one rank per GPU over every transport when there are two); then 2 ranks sharing
#           GPU 0 at 8192^2 float64, rows, blocking and overlap, staged: time_tile 8 (8-deep halos once
#           every 8 steps) against time_tile 1 (python -m solver.bench.gpu hybrid --time-tiles 8 1: ms/step,
#           halo depth, messages per step); and what a batch of time tiles costs beyond its steps (the
#           fused residual of a check: python -m solver.bench.gpu batches, 16384^2).
#   mgbench multigrid and implicit heat figures (tools/mg_bench.py): the sweeps against the copy rate at
#           8192^2 and 16384^2, the lid to 1e-10 at 4097^2-16384^2 float64, implicit against explicit heat to
#           t = 0.01 at 4096^2, and 1-16 CPU ranks at 4096^2 (not in all; MGBENCH="gpu" or "cpu" for one part);
#           MGBENCH="same": explicit against Crank-Nicolson to t = 0.01 at 4096^2 float64 at the same accuracy
#           (tools/mg_bench.py same, medians of 3).
#   mg      multigrid on the GPU (not part of all: the gpu and hybrid sections run the same tests among the
#           others): pytest -m gpu tests/test_gpu_multigrid.py (the verbs, whole runs bitwise equal to numpy,
#           two ranks sharing GPU 0 under mpirun), one line per test in the short table.
#   mg35    issue 35 (whole multigrid cycles as CUDA graphs, the stop test in one pass; not in all): first the
#           before/after, `stencil run` records alternated between the tree in .bench_base35 (carried: `git archive
#           <commit> solver`, its commit in .bench_base35/COMMIT) and this one, MG35_VARIANTS (base new off: off is
#           this tree with STENCIL_MG_GRAPHS=0) x MG35_REPEATS (3) x MG35_CASES (lid:4095 heat:20 lid:16384:
#           tools/mg_graphs_bench.py: whole solve, ms a cycle / step, x the copy-bound time of a plain cycle's passes,
#           sections, levels; items ITEM:ARG[:REPEATS[:VARIANTS]], also lid32:N (float32); variants also notiles, notail, tailN,
#           tileCxR[xB] and nomarks); with MG35_NCU=1
#           Nsight Compute's time and DRAM bytes of each kernel of a 2-cycle lid at MG35_NCU_N (4095), graph nodes
#           included; then the GPU tests of MG35_TESTS (the multigrid and physics files, -n 8).
#   physics physics as data on the GPU (issues 33, 34; not part of all): the GPU tests of the kernels that read a
#           source term and face coefficients and of whole cases bitwise equal to numpy (tests/test_gpu_physics.py),
#           with the GPU tests of the files the change touched (PHYSICS_TESTS); then, kernel-only at PHYSICS_SIZE
#           (8192) in PHYSICS_DTYPES (float64 float32): python -m solver.bench.gpu physics (vec, the tiled default,
#           wave2 k=8 and the tiled default with STENCIL_WAVE_DPF=4, each plain, with a source, with face fields, with
#           both: x the copy-bound rate counted with the fields' bytes); then the plain case before/after: the tree in
#           .bench_base (carried: `git archive <commit> solver`, its commit in .bench_base/COMMIT) against this one,
#           alternated PHYSICS_ROUNDS (2) times, each a process timing vec and the default tiled kernel at
#           PHYSICS_SIZE float64 (solver.bench.gpu single_gpu: medians of 7): the ratio of the medians.
#           PHYSICS_SWEEP="wave2a:8:0 wave:4:4 ..." (KERNEL:K:DPF) adds a sweep of the tiled kernels on PHYSICS_SWEEP_FORMS
#           (source faces); PHYSICS_BENCH=0 and PHYSICS_ROUNDS=0 leave out the bench and the before/after.
#   physcpu issues 42 and 43 on the CPU cores (not in all): tools/physics_bench.py baseline (the plain case, this tree
#           against .bench_base alternated, PHYSCPU_N 4096, PHYSCPU_THREADS 16) and capacity (PHYSCPU_CAP_N 2048: the
#           heat-capacity field's explicit rates x the copy-bound rate, per step and tiled, and backward-Euler cycles);
#           PHYSCPU_SHAPES: arguments for tools/shapes_bench.py.
#   shapesgpu issue 43 on one GPU (not in all): tools/shapes_bench.py rates --backend cupy at SHAPESGPU_N (2001; 0: none),
#           SHAPESGPU_REPEATS (2); SHAPESGPU_STEADY: sizes for its steady part.
#   gputests the GPU tests (not mpi) of the files in GPUTESTS (default tests/test_gpu_nonlinear.py), -k GPUTESTS_K;
#           not in all.
#   nonlin  issue 45 on one GPU: tools/nonlinear_bench.py stencil NONLIN_N (16384) --backend cupy (Newton's steady
#           k(T) + radiation plate to 1e-10 against the same grid's linear solve), NONLIN_REPEATS (1); NONLIN_CPU: N for
#           the same on the CPU cores under mpirun -n 2 (the issue's 2-core figure) beside it; NONLIN_PROFILE: N for a
#           cProfile of one Newton run on the GPU (the top 45 functions by own and cumulative time); NONLIN_BASE=1: the
#           same bench of the tree in .bench_base (carried: `git archive <commit> solver tools`) right after.
#   nlphases issue 45: tools/nonlinear_phases.py at NLPHASES_N (8192; a list runs each) on the GPU: Newton's phases,
#           each timed between device synchronisations (not in all); NLPHASES_FINE=1: the pieces inside them too.
#   timegpu issue 44 on one GPU: tools/time_bench.py implicit --n TIMEGPU_N (4096: cases/heat_implicit.yaml itself)
#           --backend cupy --tols TIMEGPU_TOLS (5e-4 1e-3) --quick: the fine reference, the shipped 200 backward-Euler
#           steps and adaptive steps, errors at t = 0.1, solves and seconds (not in all).
#   gpumem  issue 45: tools/gpu_memory.py at GPUMEM_N (8192; a list runs each): the live allocations at Newton's
#           peak on the GPU, by the lines that made them (not in all).
#   probe   tools/cpu_placement.sh 16: CPU topology, each rank's uncoupled kernel and copy speed under
#           several placements, and the coupled 16-rank weak run's per-rank compute and wait.
#   cpu     tools/cpu_scaling.py DIR (MPI scaling on the CPU cores; SCALING_ARGS: more of its options).
#   deep    tools/deep_bench.py --parts scaling (issue 14): mpirun -n 1/2/4/8/16, strong 4096^2 and weak 1024^2
#           per rank, default time tile (deep halos) vs time_tile 1, the lockstep floor in each launch,
#           one process x 16 threads tiled; a short table.
# Written: $OUT/suite.log (everything printed), $OUT/summary.txt (the table), $OUT/suite.tar.gz (every
# JSON and log, refreshed after each step). Without $OUT (another machine) they go to /tmp/stencil-out.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECTIONS=" ${*:-all} "
[[ $SECTIONS == *" all "* ]] && SECTIONS=" gpu tiling tune hybrid gpudeep cpu deep "
OUT=${OUT:-/tmp/stencil-out}
W=/tmp/stencil-suite
rm -rf "$W" && mkdir -p "$W/cases" "$OUT"
exec > >(tee -a "$OUT/suite.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export STENCIL_CACHE_DIR=$W/cache
PY=${PY:-python3}
T0=$SECONDS

step() {  # step NAME TIMEOUT_S CMD...: run, log to $W/NAME.log, record status; never stops the suite
  local name=$1 limit=$2 t=$SECONDS rc
  shift 2
  echo "== $name ($(date +%H:%M:%S), limit ${limit}s): $*"
  timeout --kill-after=10 "$limit" "$@" > >(tee "$W/$name.log") 2>&1
  rc=$?
  printf '%-16s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t))" | tee -a "$W/status.txt"
  tar czf "$OUT/suite.tar.gz" -C /tmp stencil-suite 2>/dev/null
  return 0
}

case_file() {  # case_file NAME NX NY: a plain heat case on the GPU, no VTK
  printf 'name: %s\ngrid: {nx: %s, ny: %s}\nbackend: {name: cupy}\noutput: {dir: %s, vtk: false}\n' \
    "$1" "$2" "$3" "$W/out/$1" > "$W/cases/$1.yaml"
  echo "$W/cases/$1.yaml"
}

# install (no network) -------------------------------------------------------------------------------
if [[ -n ${SKIP_INSTALL:-} ]]; then
  :  # a prepared environment (testing this script elsewhere)
elif compgen -G ".whl/*.whl" > /dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if [[ -z ${SKIP_INSTALL:-} ]] && ! $PY -m pip install -q --no-deps --no-build-isolation -e . ; then
  echo "note: editable install failed; running from the source tree"
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
MPIRUN=(mpirun --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE -x PYTHONPATH -x STENCIL_CACHE_DIR -x PYTHONUNBUFFERED)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)

{
  date -u; uname -a; nvidia-smi; nvidia-smi topo -m; mpirun --version | head -1; nvcc --version | tail -1
  $PY -c 'import cupy, sys; print("python", sys.version.split()[0], "cupy", cupy.__version__, "runtime",
cupy.cuda.runtime.runtimeGetVersion(), "driver", cupy.cuda.runtime.driverGetVersion())'
  $PY -c 'from solver.parallel.gpu_exchange import nccl_version; print("nccl", nccl_version())'
  $PY -m solver info
  env | grep -E "^(OMPI|PMIX|PRTE|NCCL)_" | sort
} > "$W/machine.txt" 2>&1
head -c 4000 "$W/machine.txt"
NCCL=$($PY -c 'from solver.parallel.gpu_exchange import nccl_version; print("nccl" if nccl_version() else "")' 2>/dev/null)
NGPU=$($PY -c 'import cupy; print(cupy.cuda.runtime.getDeviceCount())' 2>/dev/null || echo 0)

# sections ---------------------------------------------------------------------------------------------
if [[ $SECTIONS == *" gpu "* ]]; then
  step gpu_tests 200 $PY -m pytest -q -rfEs -p no:cacheprovider -m "gpu and not mpi" --continue-on-collection-errors tests/
  K=$(case_file k16384 16384 16384)
  for dt in float32 float64; do
    step "tune_16384_$dt" 150 $PY -m solver tune "$K" --dtype $dt --repeats 5 --steps 20 --json "$W/tune_16384_$dt.json"
  done
  step launch 120 $PY -m solver.bench.gpu launch --size 4096 --large 16384 --steps 200 --json "$W/launch.json"
  step fmad 120 $PY -m solver.bench.gpu fmad --size 16384 --json "$W/fmad.json"
fi

if [[ $SECTIONS == *" tiling "* ]]; then  # time tiling (issue 15) and the run path (issue 12 item 4)
  for n in ${TILING_SIZES:-16384 8192 4096}; do  # each size tuned (vec; wave, wave2 x WAVE_BLOCKS x TILES), stored for the runs below
    K=$(case_file "k$n" $n $n)
    for dt in ${TILING_DTYPES:-float32 float64}; do
      step "tune_${n}_${dt}_vec" 40 $PY -m solver tune "$K" --dtype $dt --kernel vec --blocks 128x8 --repeats 5 \
        --steps 48 --json "$W/tune_${n}_${dt}_vec.json"
      step "tune_${n}_${dt}_wave" 100 $PY -m solver tune "$K" --dtype $dt --kernel wave --kernel wave2 \
        --blocks ${WAVE_BLOCKS:-32x64,32x128,32x256} $(printf -- '--time-tile %s ' ${TILES:-4 8}) --repeats 5 --steps 48 \
        --json "$W/tune_${n}_${dt}_wave.json"
    done
  done
  step tiling 270 $PY -m solver.bench.gpu tiling --sizes ${TILING_SIZES:-16384 8192 4096} --dtypes ${TILING_DTYPES:-float32 float64} \
    --steps 2000 --repeats 3 --json "$W/tiling.json"
  step wave_tests 150 $PY -m pytest -q -rfEs -p no:cacheprovider tests/test_gpu_wave.py tests/test_gpu_config.py \
    tests/test_gpu_kernels.py -k "${WAVE_TESTS_K:-wave or tune or record or graph or max_update or nvcc}"
  command -v ncu > /dev/null && [[ -z ${SKIP_NCU:-} ]] && step ncu_wave 80 ncu --clock-control none -k "regex:^(wave|march)$" --launch-count 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section MemoryWorkloadAnalysis \
    $PY -m solver.bench.gpu ncu-target --size 4096 --large 16384
fi

if [[ $SECTIONS == *" chip "* ]]; then  # issue 26
  [[ -z ${SKIP_SMOKE:-} ]] && step chip_smoke 60 $PY -m pytest -q -x -p no:cacheprovider tests/test_gpu_chip.py -k "several_launches and float64 and None"
  step chip_tests ${CHIP_TESTS_S:-240} $PY -m pytest -q -rfEs -p no:cacheprovider -n 16 tests/test_gpu_chip.py \
    tests/test_gpu_wave.py tests/test_gpu_kernels.py tests/test_gpu_boundary.py -k "${CHIP_TESTS_K:-chip or wave2a or default or record or tune}"
  [[ -n ${CHIP_PROBE:-} ]] && step probe26 ${CHIP_PROBE_S:-90} $PY tools/gpu_probe.py chip $CHIP_PROBE
  CHIP_TUNE=${CHIP_TUNE-"16384 float64 wave2,wave2a 32x256
16384 float32 wave2,wave2a 32x128
8192 float64 wave2,wave2a 32x128
4096 float64 wave2,wave2a 32x32
2048 float64 wave2,wave2a,chip 32x32,512x4,256x8"}
  while read -r n dt kernels blocks; do
    [[ -z $n ]] && continue
    K=$(case_file "k$n" $n $n)
    step "tune26_${n}_${dt}_${kernels//,/_}" 120 $PY -m solver tune "$K" --dtype $dt $(printf -- '--kernel %s ' ${kernels//,/ }) \
      --blocks $blocks $(printf -- '--time-tile %s ' ${CHIP_TT:-8}) --chip-steps 256 --repeats 5 --steps 48 --json "$W/tune_26_${n}_${dt}_${kernels//,/_}.json"
  done <<< "$CHIP_TUNE"
  step runs26 ${CHIP_RUNS_S:-330} $PY -m solver.bench.gpu runs --cases ${CHIP_RUNS:-16384:float64 15312:float64 16384:float32 15708:float32 \
    8192:float64 4096:float64 2048:float64} --steps 2400 --repeats 3 ${CHIP_RUNS_ARGS:-} --json "$W/runs.json"
  if command -v ncu > /dev/null && [[ -n ${CHIP_NCU_SRC:-} ]]; then  # where chip's warps stall, instruction by instruction
    step ncu26src ${CHIP_NCU_SRC_S:-120} ncu --clock-control none -k "regex:^chip$" --section WarpStateStats --section SourceCounters \
      --metrics "regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$" -f -o "$W/chipsrc" \
      $PY -m solver.bench.gpu ncu-launches --cases $CHIP_NCU_SRC
    [[ -f $W/chipsrc.ncu-rep ]] && ncu -i "$W/chipsrc.ncu-rep" --page details --print-details all > "$W/ncu26src_details.log" 2>&1
    [[ -f $W/chipsrc.ncu-rep ]] && ncu -i "$W/chipsrc.ncu-rep" --page source --csv --print-source sass > "$W/chip_sass.csv" 2>&1
    [[ -f $W/chipsrc.ncu-rep ]] && ncu -i "$W/chipsrc.ncu-rep" --page raw --csv --metrics "regex:stalled" > "$W/ncu26src_stalls.csv" 2>&1
  fi
  command -v ncu > /dev/null && [[ -z ${SKIP_NCU:-} ]] && step ncu26 ${CHIP_NCU_S:-150} ncu --clock-control none -k "regex:^(wave|chip)$" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section MemoryWorkloadAnalysis \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    $PY -m solver.bench.gpu ncu-launches --cases ${CHIP_NCU:-16384:float64:wave2 16384:float64:wave2a 4096:float64:wave2a \
    2048:float64:chip}
fi

if [[ $SECTIONS == *" hybrid "* ]]; then
  step detect_mpi 60 $PY -m pytest -q -p no:cacheprovider tests/test_gpu_config.py -k detection
  step hybrid_tests 240 $PY -m pytest -q -rfEs -p no:cacheprovider -m "gpu and mpi" --continue-on-collection-errors tests/
  TR=(staged $NCCL)
  SIZES=(16384 32768) HALOS=(blocking nonblocking overlap)
  [[ -n ${QUICK:-} ]] && SIZES=(16384) HALOS=(blocking overlap)  # QUICK=1: a shorter check of the same code
  step hybrid_1gpu 90 $PY -m solver.bench.gpu hybrid --sizes "${SIZES[@]}" --kinds strong --repeats 3 \
    --json "$W/hybrid_1.json"
  if (( NGPU >= 2 )); then
    step hybrid_2gpu_16k 150 "${MPIRUN[@]}" -n 2 $PY -m solver.bench.gpu hybrid --sizes 16384 --kinds strong weak \
      --halos "${HALOS[@]}" --transports "${TR[@]}" --repeats 3 --json "$W/hybrid_2_16k.json"
    [[ -z ${QUICK:-}${SKIP_32K:-} ]] && step hybrid_2gpu_32k 100 "${MPIRUN[@]}" -n 2 $PY -m solver.bench.gpu hybrid --sizes 32768 --kinds strong \
      --halos overlap --transports "${TR[@]}" --repeats 3 --json "$W/hybrid_2_32k.json"
  fi
fi

if [[ $SECTIONS == *" gpudeep "* ]]; then  # GPU deep halos (issue 15)
  step gpudeep_tests 300 $PY -m pytest -q -rfEs -p no:cacheprovider tests/test_gpu_hybrid.py -k deep
  step gpudeep_1gpu 120 env CUDA_VISIBLE_DEVICES=0 "${MPIRUN[@]}" -x CUDA_VISIBLE_DEVICES -n 2 $PY -m solver.bench.gpu hybrid \
    --sizes 8192 --dtypes float64 --kinds strong --halos blocking overlap --transports staged --time-tiles 8 1 \
    --repeats 3 --json "$W/hybrid_deep_1gpu.json"
  step batches 90 $PY -m solver.bench.gpu batches --size 16384 --dtypes ${BATCH_DTYPES:-float64 float32} \
    --batch-steps 48 400 --repeats 3 --json "$W/batches.json"
fi

if [[ $SECTIONS == *" gpu "* ]] && command -v ncu > /dev/null && [[ -z ${SKIP_NCU:-} ]]; then  # after hybrid: slowest, least urgent
  step ncu 150 ncu --clock-control none --cache-control none -k "regex:^(tiled|march|naive)$" --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section LaunchStats \
    $PY -m solver.bench.gpu ncu-target --size 4096 --large 16384
fi

if [[ $SECTIONS == *" tune "* ]]; then
  for n in 4096 8192; do
    K=$(case_file "k$n" $n $n)
    for dt in float32 float64; do
      step "tune_${n}_$dt" 120 $PY -m solver tune "$K" --dtype $dt --repeats 5 --steps 20 --json "$W/tune_${n}_$dt.json"
    done
  done
fi

if [[ $SECTIONS == *" mg "* ]]; then  # multigrid (solver/backends/cupy_mg.py, kernels/mg.cu)
  step mg_tests 420 $PY -m pytest -v -rfEs -p no:cacheprovider -m gpu tests/test_gpu_multigrid.py
  grep -a -E "(PASSED|FAILED|ERROR|SKIPPED)" "$W/mg_tests.log" | grep -a "::" | sed -E "s/ +\[ *[0-9]+%\]$//" >> "$W/status.txt"
fi

if [[ $SECTIONS == *" mg35 "* ]]; then  # issue 35: whole cycles as graphs, the stop test in one pass
  if [[ -d .bench_base35/solver ]]; then
    rm -rf /tmp/stencil-base35 && mkdir -p /tmp/stencil-base35 && cp -r .bench_base35/solver /tmp/stencil-base35/
    echo "base tree: $(cat .bench_base35/COMMIT 2>/dev/null)"
  fi
  step mg35_bench ${MG35_BENCH_S:-330} $PY tools/mg_graphs_bench.py --base /tmp/stencil-base35 --out "$W/mg35" \
    --repeats ${MG35_REPEATS:-3} --variants ${MG35_VARIANTS:-base new off} --json "$W/mg35.jsonl" ${MG35_CASES:-lid:4095 heat:20 lid:16384:1}
  sed -n '/^== issue 35/,$p' "$W/mg35_bench.log" > "$W/mg35.txt"
  rm -rf "$W/mg35"  # fields of 4096^2 and 16384^2: not for the archive
  step mg35_tests ${MG35_TESTS_S:-240} $PY -m pytest -q -rfEs -p no:cacheprovider -n 8 -m "gpu and not mpi" \
    ${MG35_TESTS:-tests/test_gpu_multigrid.py tests/test_gpu_physics.py} -k "${MG35_TESTS_K:-not nothing}"
  grep -a -E "(PASSED|FAILED|ERROR)" "$W/mg35_tests.log" | grep -a "::" | head -40 >> "$W/status.txt"
  if [[ -n ${MG35_NCU:-} ]] && command -v ncu > /dev/null; then  # each kernel of the first cycles, graphs' nodes too
    step mg35_ncu ${MG35_NCU_S:-120} ncu --clock-control none --launch-count ${MG35_NCU_COUNT:-200} --csv --print-units base \
      --log-file "$W/mg35_ncu.csv" --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
      $PY -m solver run cases/laplace_multigrid.yaml --backend cupy --steps 2 -o "$W/ncu_run" -q --overwrite \
      --set output.fields=false --set output.vtk=false --set grid.nx=${MG35_NCU_N:-4095} --set grid.ny=${MG35_NCU_N:-4095}
    $PY - "$W/mg35_ncu.csv" > "$W/mg35_ncu.txt" 2>&1 <<'PYEOF'
import csv, sys
from collections import defaultdict
rows = list(csv.DictReader(line for line in open(sys.argv[1]) if line.startswith('"')))
k = defaultdict(dict)
for r in rows:
    k[(int(r["ID"]), r["Kernel Name"], r["Grid Size"], r["Block Size"])][r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
by = defaultdict(lambda: [0, 0.0, 0.0])
for (i, name, grid, block), m in k.items():
    t = by[(name, grid)]
    t[0] += 1; t[1] += m.get("gpu__time_duration.sum", 0); t[2] += m.get("dram__bytes_read.sum", 0) + m.get("dram__bytes_write.sum", 0)
print(f"ncu: {len(k)} kernels; by (name, grid), total time, mean time, DRAM GB/s (the largest 40 by total)")
for (name, grid), (n, ns, b) in sorted(by.items(), key=lambda x: -x[1][1])[:40]:
    print(f"  {name[:28]:28s} {grid:18s} x{n:3d} {ns / 1e3:9.1f} us  {ns / n / 1e3:8.2f} us each  {b / max(ns, 1):7.0f} GB/s")
PYEOF
    cat "$W/mg35_ncu.txt"
  fi
fi

if [[ $SECTIONS == *" physics "* ]]; then  # physics as data (issues 33, 34)
  step physics_tests ${PHYSICS_TESTS_S:-240} $PY -m pytest -q -rfEs -p no:cacheprovider -n 8 -m "gpu and not mpi" \
    ${PHYSICS_TESTS:-tests/test_gpu_physics.py tests/test_gpu_kernels.py tests/test_gpu_wave.py tests/test_gpu_boundary.py \
    tests/test_gpu_multigrid.py} -k "${PHYSICS_TESTS_K:-not nothing}"
  [[ ${PHYSICS_BENCH:-1} != 0 ]] && step physics_bench ${PHYSICS_BENCH_S:-200} $PY -m solver.bench.gpu physics \
    --size ${PHYSICS_SIZE:-8192} --dtypes ${PHYSICS_DTYPES:-float64 float32} --repeats 5 --steps 200 --json "$W/physics.json"
  [[ -n ${PHYSICS_SWEEP:-} ]] && step physics_sweep ${PHYSICS_SWEEP_S:-200} $PY -m solver.bench.gpu physics \
    --size ${PHYSICS_SIZE:-8192} --dtypes ${PHYSICS_DTYPES:-float64 float32} --repeats 5 --steps 200 \
    --configs $PHYSICS_SWEEP --forms ${PHYSICS_SWEEP_FORMS:-source faces} --json "$W/physics_sweep.json"
  if [[ -d .bench_base/solver && ${PHYSICS_ROUNDS:-2} != 0 ]]; then  # the plain case before (the carried tree) and after (this one), alternated
    rm -rf /tmp/stencil-base && mkdir -p /tmp/stencil-base /tmp/stencil-plain && cp -r .bench_base/solver /tmp/stencil-base/
    PLAIN_PY='import json, sys
from solver.bench.gpu import single_gpu, free_device_memory
from solver.backends.cupy_backend import CupyBackend
from solver.bench.gpu import make_case
n = int(sys.argv[1])
be = CupyBackend(make_case(n, n, "float64").backend, "float64")
out = {"copy_gbs": be.copy_bandwidth((n + 2) ** 2 * 8, 5) / 1e9}
del be
for label, kernel in (("vec", "vec"), ("tiled", None)):
    free_device_memory()
    r = single_gpu(n, "float64", kernel=kernel, repeats=7, steps=200)
    out[label] = {k: r[k] for k in ("kernel", "block", "time_tile", "seconds_per_step", "spread")}
print("PLAIN " + json.dumps(out))'
    for round in $(seq ${PHYSICS_ROUNDS:-2}); do
      step "plain_base_$round" 90 env -C /tmp/stencil-plain PYTHONPATH=/tmp/stencil-base${PYTHONPATH:+:$PYTHONPATH} \
        $PY -c "$PLAIN_PY" ${PHYSICS_SIZE:-8192}
      step "plain_new_$round" 90 env -C /tmp/stencil-plain PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} \
        $PY -c "$PLAIN_PY" ${PHYSICS_SIZE:-8192}
    done
    $PY - "$W" "$(cat .bench_base/COMMIT 2>/dev/null)" > "$W/plain.txt" 2>&1 <<'PYEOF'
import json, statistics, sys
from pathlib import Path
w = Path(sys.argv[1])
def rows(tag):
    out = []
    for p in sorted(w.glob(f"plain_{tag}_*.log")):
        out += [json.loads(l.split(" ", 1)[1]) for l in p.read_text().splitlines() if l.startswith("PLAIN ")]
    return out
base, new = rows("base"), rows("new")
for label in ("vec", "tiled"):
    b = statistics.median(r[label]["seconds_per_step"] for r in base)
    n = statistics.median(r[label]["seconds_per_step"] for r in new)
    print(f"plain before/after {label} ({new[0][label]['kernel']} {new[0][label]['block']} k={new[0][label]['time_tile']}): "
          f"before {b * 1e3:.4f} ms/step (base {sys.argv[2][:10]}), after {n * 1e3:.4f}: after/before speed {b / n:.3f} "
          f"(medians of {len(base)}/{len(new)} processes x 7 repeats; copy {statistics.median(r['copy_gbs'] for r in new):.0f} GB/s)")
PYEOF
    cat "$W/plain.txt"
  fi
  grep -a -E "(PASSED|FAILED|ERROR)" "$W/physics_tests.log" | grep -a "::" | head -40 >> "$W/status.txt"
fi

if [[ $SECTIONS == *" physcpu "* ]]; then  # issues 42 and 43 on the machine's CPU cores (quiet, unlike the 2-core VM)
  # the plain case against the carried tree (.bench_base: its own solver, this python), alternated; the heat-capacity
  # field's explicit rates and implicit cycles; shapes against the same grid without them (tools/shapes_bench.py)
  if [[ -d .bench_base/solver ]]; then
    step physcpu_base ${PHYSCPU_BASE_S:-200} $PY tools/physics_bench.py baseline ${PHYSCPU_N:-4096} --against .bench_base \
      --threads ${PHYSCPU_THREADS:-16} --repeats ${PHYSCPU_REPEATS:-5} --steps ${PHYSCPU_STEPS:-200}
  fi
  step physcpu_capacity ${PHYSCPU_CAP_S:-200} $PY tools/physics_bench.py capacity ${PHYSCPU_CAP_N:-2048} \
    --threads ${PHYSCPU_THREADS:-16} --repeats 3 --steps 200
  [[ -f tools/shapes_bench.py && -n ${PHYSCPU_SHAPES:-} ]] && step physcpu_shapes ${PHYSCPU_SHAPES_S:-200} \
    $PY tools/shapes_bench.py $PHYSCPU_SHAPES
fi

if [[ $SECTIONS == *" shapesgpu "* ]]; then  # issue 43 on one GPU: shapes against the same grid without them
  [[ ${SHAPESGPU_N:-2001} != 0 ]] && step shapes_gpu_rates ${SHAPESGPU_S:-150} $PY tools/shapes_bench.py rates \
    --backend cupy --sizes ${SHAPESGPU_N:-2001} --repeats ${SHAPESGPU_REPEATS:-2} --steps 200
  [[ -n ${SHAPESGPU_STEADY:-} ]] && step shapes_gpu_steady ${SHAPESGPU_STEADY_S:-100} $PY tools/shapes_bench.py steady \
    --backend cupy --sizes $SHAPESGPU_STEADY --repeats 1
fi

if [[ $SECTIONS == *" nlphases "* ]]; then  # issue 45: Newton's phases on one GPU, each timed between synchronisations
  for n in ${NLPHASES_N:-8192}; do
    step "nlphases_$n" ${NLPHASES_S:-120} $PY tools/nonlinear_phases.py $n --backend cupy --out /tmp/stencil-nlphases \
      ${NLPHASES_FINE:+--fine}
  done
fi

if [[ $SECTIONS == *" timegpu "* ]]; then  # issue 44: adaptive steps against the shipped fixed ones, one GPU
  step time_gpu ${TIMEGPU_S:-300} $PY tools/time_bench.py implicit --n ${TIMEGPU_N:-4096} --backend cupy \
    --tols ${TIMEGPU_TOLS:-5e-4 1e-3} --repeats 1 --quick --out /tmp/stencil-time
fi

if [[ $SECTIONS == *" gpumem "* ]]; then  # issue 45: what holds the GPU's memory at Newton's peak
  for n in ${GPUMEM_N:-8192}; do
    step "gpumem_$n" ${GPUMEM_S:-150} $PY tools/gpu_memory.py $n --out /tmp/stencil-gpumem
  done
fi

if [[ $SECTIONS == *" gputests "* ]]; then  # GPU tests of chosen files only (GPUTESTS; -k GPUTESTS_K)
  step gpu_tests ${GPUTESTS_S:-300} $PY -m pytest -q -rfEs -p no:cacheprovider -n 8 -m "gpu and not mpi" \
    ${GPUTESTS:-tests/test_gpu_nonlinear.py} -k "${GPUTESTS_K:-not nothing}"
fi

if [[ $SECTIONS == *" nonlin "* ]]; then  # issue 45: Newton against the linear solve, one GPU (and 2 CPU ranks)
  step nonlin_gpu ${NONLIN_S:-200} $PY tools/nonlinear_bench.py stencil ${NONLIN_N:-16384} --backend cupy \
    --repeats ${NONLIN_REPEATS:-1} --out /tmp/stencil-nonlin
  [[ -n ${NONLIN_BASE:-} && -d .bench_base ]] && step nonlin_gpu_base ${NONLIN_S:-200} \
    env PYTHONPATH="$ROOT/.bench_base${PYTHONPATH:+:$PYTHONPATH}" $PY .bench_base/tools/nonlinear_bench.py stencil \
    ${NONLIN_N:-16384} --backend cupy --repeats ${NONLIN_REPEATS:-1} --out /tmp/stencil-nonlin-base
  [[ -n ${NONLIN_PROFILE:-} ]] && step nonlin_profile ${NONLIN_PROFILE_S:-200} $PY tools/nonlinear_bench.py stencil \
    $NONLIN_PROFILE --backend cupy --repeats 1 --out /tmp/stencil-nonlin-prof --profile 45
  [[ -n ${NONLIN_CPU:-} ]] && step nonlin_cpu ${NONLIN_CPU_S:-200} mpirun -n 2 $PY tools/nonlinear_bench.py stencil \
    $NONLIN_CPU --backend numba --repeats 1 --out /tmp/stencil-nonlin-cpu --mpi
fi

if [[ $SECTIONS == *" mgbench "* ]]; then  # multigrid and implicit heat figures (tools/mg_bench.py; issues 22, 23)
  MGB=(env PYTHONPATH="${PYTHONPATH:-}" $PY tools/mg_bench.py --out "$W/mgbench")
  LARGS="--oversubscribe --bind-to none -x PYTHONPATH -x STENCIL_CACHE_DIR$([[ $(id -u) == 0 ]] && echo " --allow-run-as-root")"
  [[ ${MGBENCH:-gpu cpu} == *gpu* ]] && {
    step mg_kernels 60 "${MGB[@]}" kernels 16384 8192 --backend cupy --dtype float64 --repeats 5
    step mg_solve_gpu 150 "${MGB[@]}" solve 4097 8193 16384 --backend cupy --dtype float64 --repeats 3
    step mg_heat_gpu 90 "${MGB[@]}" heat 4096 --backend cupy --dtype float32 --t-end 0.01 --dt 1e-4
  }
  [[ ${MGBENCH:-gpu cpu} == *same* ]] && \
    step mg_same_gpu ${MG_SAME_S:-300} "${MGB[@]}" same 4096 --backend cupy --dtype float64 --t-end 0.01 --repeats 3
  [[ ${MGBENCH:-gpu cpu} == *cpu* ]] && \
    step mg_solve_cpu 200 "${MGB[@]}" solve 4096 --backend numba --ranks 1 2 4 8 16 --repeats 1 --launcher mpirun \
      --launcher-args "$LARGS"
  grep -a -h '^{' "$W"/mg_*.log > "$W/mgbench.jsonl" 2>/dev/null
fi

if [[ $SECTIONS == *" probe "* ]]; then
  step cpu_placement 240 bash tools/cpu_placement.sh 16
fi

if [[ $SECTIONS == *" cpu "* ]]; then
  mkdir -p "$W/cpu"
  step cpu_scaling 300 $PY tools/cpu_scaling.py "$W/cpu" ${SCALING_ARGS:-}
fi

# verify: the merged code in one short call (about 9 minutes): every GPU test (pytest-xdist, 8 workers:
# most of their time is NVRTC compilation and process start), the hybrid tests under mpirun, short
# deep-halo tables on the CPU cores, and the GPU access rung. `tools/device_suite.sh verify`.
if [[ $SECTIONS == *" verify "* ]]; then
  step gpu_tests 210 $PY -m pytest -q -rfEs -p no:cacheprovider -n 8 -m "gpu and not mpi" tests/
  step hybrid_tests 150 $PY -m pytest -q -rfEs -p no:cacheprovider -m "gpu and mpi" tests/
  if [[ -z ${VERIFY_GPU_ONLY:-} ]]; then  # VERIFY_GPU_ONLY=1: the GPU tests alone (CPU tables in their own call)
    mkdir -p "$W/deep"
    step deep_scaling 150 $PY tools/deep_bench.py --parts scaling --dir "$W/deep" --node-threads ${NODE_THREADS:-16} \
      ${DEEP_ARGS:---repeats 3 --strong-steps 60 --weak-steps 120}
    step access_gpu 60 $PY -m solver bench access --backend cupy --repeats 3 --json "$W/access_gpu.json"
  fi
fi

# deep halos on the CPU cores (issue 14) ---------------------------------------------------------------
if [[ $SECTIONS == *" deep "* ]]; then
  mkdir -p "$W/deep"
  step deep_scaling 540 $PY tools/deep_bench.py --parts scaling --dir "$W/deep" --node-threads ${NODE_THREADS:-16} ${DEEP_ARGS:-}
fi

# access (issue 18; `tools/device_suite.sh access`, not part of "all") ---------------------------------
# stencil bench access on the GPU (contiguous / strided / random / rows / cols reads, 4 KiB to >= 4x L2);
# then one 16384^2 float64 run whose record gives upload, kernel and download seconds (docs/answers.md,
# question 6). One summary line each goes to status.txt, so the short table shows them.
if [[ $SECTIONS == *" access "* ]]; then
  step access_gpu 300 $PY -m solver bench access --backend cupy --json "$W/access_gpu.json"
  A=$(case_file transfers 16384 16384)
  step access_transfers 120 $PY -m solver run "$A" --steps 500 --dtype float64 --overwrite --quiet
  $PY - "$W" >> "$W/status.txt" 2>&1 <<'PYEOF'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
try:
    res = json.loads((w / "access_gpu.json").read_text())
    l2 = res["caches"]["gpu"]["l2_bytes"]
    sizes = res["sizes"]["cupy"]
    def at(nbytes):
        got = {(r["pattern"], r["stride"]): r["gbs"] for r in res["results"] if r["bytes"] == nbytes}
        return (f"contiguous {got[('contiguous', 1)]:.0f}, stride 8 {got.get(('strided', 8), 0):.0f}, "
                f"stride 64 {got.get(('strided', 64), 0):.0f}, random {got[('random', 0)]:.0f}")
    inside = max(s for s in sizes if s <= l2 // 2)
    print(f"access {res['caches']['gpu']['name']} L2 {l2 >> 20} MiB: GB/s at {inside >> 20} MiB (in L2) "
          f"{at(inside)}; at {sizes[-1] >> 20} MiB {at(sizes[-1])}")
except Exception as exc:
    print(f"access: no summary ({exc})")
try:
    rec = json.loads((w / "out" / "transfers" / "record.json").read_text())
    dev, t = rec["resources"]["devices"][0], rec["timings"]
    print(f"transfers 16384^2 float64: h2d {dev['h2d_bytes'] / 2**20:.0f} MiB in {dev['h2d_s']:.4f} s, "
          f"d2h {dev['d2h_bytes'] / 2**20:.0f} MiB in {dev['d2h_s']:.4f} s, kernel {t['compute']['max']:.4f} s "
          f"for {rec['run']['steps']} steps")
except Exception as exc:
    print(f"transfers: no summary ({exc})")
PYEOF
  rm -rf "$W/out/transfers"  # 2 GiB of fields: not for the archive
fi

# the short table ------------------------------------------------------------------------------------
{
  echo "== stencil device suite: sections${SECTIONS}on $(hostname), $((SECONDS - T0)) s"
  grep -a -m1 -o "NVIDIA H[0-9A-Za-z ]*" "$W/machine.txt" | head -1
  grep -a -h "^python\|^nccl" "$W/machine.txt" | head -2
  cat "$W/status.txt"
  for f in "$W"/*tests.log "$W"/detect_mpi.log; do [[ -f $f ]] && echo "$(basename "$f" .log): $(grep -E "passed|failed|error" "$f" | tail -1)"; done
  $PY -m solver.bench.gpu table "$W" 2>&1
  [[ -f $W/cpu_placement.log ]] && grep -a -E "^(==|step max|copy GB|ms/step|lockstep)" "$W/cpu_placement.log"
  [[ -f $W/cpu/scaling.md ]] && cat "$W/cpu/scaling.md"
  [[ -f $W/deep/deep.md ]] && { echo "== deep halos (tools/deep_bench.py --parts scaling)"; cat "$W/deep/deep.md"; }
  [[ -f $W/batches.log ]] && grep -a "^batches " "$W/batches.log"
  [[ -f $W/plain.txt ]] && cat "$W/plain.txt"
  [[ -f $W/mg35.txt ]] && cat "$W/mg35.txt"
  [[ -f $W/mg35_ncu.txt ]] && head -30 "$W/mg35_ncu.txt"
  [[ -f $W/mgbench.jsonl ]] && { echo "== multigrid (tools/mg_bench.py)"; cat "$W/mgbench.jsonl"; }
  [[ -f $W/ncu26src_stalls.csv ]] && python3 -c "import csv,sys; r=list(csv.reader(open(sys.argv[1]))); [print('stall', h.replace('smsp__average_warps_issue_stalled_', ''), v) for h, v in zip(r[0], r[-1]) if 'stalled' in h and v not in ('', '0')]" "$W/ncu26src_stalls.csv" 2>&1 | head -40
  [[ -f $W/ncu26.log ]] && grep -a -E "^  [a-z_]+ \(|Duration|DRAM Throughput|Compute \(SM\) Throughput|L2 Cache Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|FP64|stalled|One or More" "$W/ncu26.log" | cut -c1-220 | head -80
  [[ -f $W/ncu_wave.log ]] && grep -a -E "^  [a-z_]+ \(|Duration|DRAM Throughput|Compute \(SM\) Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|One or More" "$W/ncu_wave.log" | head -40
} > "$OUT/summary.txt" 2>&1
tar czf "$OUT/suite.tar.gz" -C /tmp stencil-suite 2>/dev/null
cat "$OUT/summary.txt"
