#!/usr/bin/env bash
# The ladder and the sweeps on one machine, in one go (about 5 minutes on 32 cores + a GPU):
#   tools/ladder.sh OUTDIR [CASE]
# 1. bandwidth: copy + SAXPY on numpy, numba (1, 2, 4, ... all cores threads), cupy if present; then
#    numba with 1 thread per rank under mpirun at 2, 4, ... ranks (every rank streaming at once);
# 2. reduction: every variant, GPU ones when cupy sees a GPU; across 4 ranks with Reduce/Allreduce;
# 3. vectorize: SIMD evidence and the loop vectoriser on/off at a cache-resident and a memory-bound size;
# 3b. access: contiguous / strided / random / row / column reads from 4 KiB to 4x the last cache, and
#    the figures of the bench JSON (`stencil report OUTDIR -o OUTDIR/figures`);
# 4. sweeps of CASE (default: a 4096^2 sine heat case, verified): threads (one process), strong ranks
#    (one thread each), then `stencil report` for each; CPU sweeps use numba.
# Everything goes under OUTDIR (JSON, logs, sweep directories with report.md and PNGs); each step's
# failure is logged and the script goes on. Uses a private bandwidth cache under OUTDIR.
set -uo pipefail
out=${1:?usage: tools/ladder.sh OUTDIR [CASE]}
case_file=${2:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
PY=${PY:-python3}
export STENCIL_CACHE_DIR=$out/cache PYTHONUNBUFFERED=1
cores=$($PY -c 'import os; print(len(os.sched_getaffinity(0)))')
powers() { local s=1 n=2; while (( n < $1 )); do s+=",$n"; n=$((n * 2)); done; (( $1 > 1 )) && s+=",$1"; echo "$s"; }
if mpirun --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
  launch=(mpirun --oversubscribe --bind-to core --map-by core)  # local ranks inherit the environment
  [[ $(id -u) == 0 ]] && launch+=(--allow-run-as-root)
else
  launch=(mpirun -bind-to core)
fi
step() {  # step NAME CMD...: run, log, never stop the script
  local name=$1 t=$SECONDS
  shift
  echo "== $name: $*"
  "$@" > >(tee "$out/$name.log") 2>&1
  echo "$name rc=$? $((SECONDS - t))s" | tee -a "$out/status.txt"
}

if [[ -z $case_file ]]; then
  case_file=$out/sine4096.yaml
  printf '%s\n' "name: sine4096" "grid: {nx: 4096, ny: 4096}" "initial: {kind: sine}" \
    "run: {steps: 200, check_every: 100, warmup: 5}" "backend: {name: numba}" \
    "output: {dir: $out/runs/sine4096, vtk: false}" "verify: true" > "$case_file"
fi

step bandwidth $PY -m solver bench bandwidth --threads "$(powers "$cores")" --json "$out/bandwidth.json"
for n in $(powers "$cores" | tr , ' '); do
  (( n > 1 )) && NUMBA_NUM_THREADS=1 step "bandwidth_mpi_$n" "${launch[@]}" -n "$n" \
    $PY -m solver bench bandwidth -b numba --threads 1 --json "$out/bandwidth_mpi_$n.json"
done
step reduction $PY -m solver bench reduction --json "$out/reduction.json"
step reduction_mpi "${launch[@]}" -n 4 $PY -m solver bench reduction --threads 1 --no-gpu \
  --size 16777216 --json "$out/reduction_mpi.json"
step vectorize $PY -m solver bench vectorize --json "$out/vectorize.json"
step access $PY -m solver bench access --json "$out/access.json"  # read GB/s by order and size, caches marked
step report_bench $PY -m solver report "$out" -o "$out/figures"     # access.png, allreduce.png (reduction_mpi)
step sweep_threads $PY -m solver sweep threads "$case_file" --threads "$(powers "$cores")" --repeats 3 \
  -o "$out/threads" --overwrite
step sweep_strong $PY -m solver sweep strong "$case_file" --ranks "$(powers "$cores")" --repeats 3 \
  --launcher mpirun --launcher-args "${launch[*]:1}" -o "$out/strong" --overwrite
step report_threads $PY -m solver report "$out/threads"
step report_strong $PY -m solver report "$out/strong"
cat "$out/status.txt"
