#!/usr/bin/env bash
# tools/model_validation.sh device | cluster OUTDIR [RATE...]: the scaling model (solver/model, `stencil model`)
# against sweeps measured where it predicts them (issue 24; BENCHMARKS.md, "The scaling model against
# measurements"; docs/scaling_model.md, "Validation"). Two settings, one job:
#
# device: the scaling model against measurements on the GPU machine (issue 24), one call.
#
# Strong (SIZE^2, default 4096^2) and weak (WEAK^2 per rank, default 1024^2) sweeps of cases/heat_4096.yaml
# (float32, rows, overlap) at RANKS (default 1,2,4,8,16) ranks, one numba thread per rank, ranks bound to
# cores, time tile 1 and the default (deep halos); each sweep measures the model's inputs it lacks under
# the same launcher and writes the prediction beside every point. Then the GPU: its inputs at 4096^2,
# 8192^2 and 16384^2, and one-rank runs at GPU_SIZES (default 4096 6144 8192 12288 16384: 6144 and 12288
# are interpolated). `stencil model --validate` prints the error per point of every sweep.
# Written: $OUT/model_device.log, $OUT/summary.txt (the tables), $OUT/model_device.tar.gz (sweep
# directories without fields, validation JSON), $OUT/model.json (the measured inputs, for --inputs).
# Test elsewhere on small sizes: SKIP_INSTALL=1 SIZE=256 WEAK=128 RANKS=1,2 GPU_SIZES= tools/model_validation.sh device
#
# cluster OUTDIR [RATE...]: the scaling model against sweeps across two emulated nodes (issue 24).
#
# For each link RATE (default: 1gbit 10gbit; tbf on every veth of tools/cluster.sh), strong sweeps of a strip
# (NY x NX, default 512 x 16384 float64: 128 KiB halo rows, so the link shows) at 2 ranks (one per node) and
# 4 ranks (two per node), halo modes nonblocking (messages exposed) and overlap (hidden behind the interior),
# time tile 1 and the default (deep halos), REPEATS runs per point (default 3, the median kept). Each rate's
# first sweep measures the model's inputs on the nodes (the link by ping-pong between them); every sweep
# writes its predictions; `stencil model --validate` prints the errors; OUTDIR/summary.txt has them all.
# Root; builds the cluster under the prefix stnm and removes it at the end (also on failure or Ctrl-C).
set -uo pipefail

device() {
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/stencil-model-out}
W=/tmp/stencil-model
rm -rf "$W" && mkdir -p "$W/cases" "$OUT"
exec > >(tee -a "$OUT/model_device.log") 2>&1
export PYTHONUNBUFFERED=1 NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 STENCIL_CACHE_DIR=$W/cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
SIZE=${SIZE:-4096} WEAK=${WEAK:-1024} RANKS=${RANKS:-1,2,4,8,16}
GPU_SIZES=${GPU_SIZES-4096 6144 8192 12288 16384} GPU_INPUTS=${GPU_INPUTS-4096,8192,16384}
STRONG_STEPS=${STRONG_STEPS:-200} WEAK_STEPS=${WEAK_STEPS:-500} GPU_STEPS=${GPU_STEPS:-1000}
T0=$SECONDS

step() {  # step NAME LIMIT CMD...: run it, log it, never stop the script
  local name=$1 limit=$2 t=$SECONDS rc
  shift 2
  echo "== $name ($(date -u +%H:%M:%S), limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" > "$W/$name.log" 2>&1
  rc=$?
  tail -n 4 "$W/$name.log"
  printf '%-16s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - t))" | tee -a "$W/status.txt"
}

if [[ -z ${SKIP_INSTALL:-} ]]; then
  if compgen -G ".whl/*.whl" > /dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  $PY -m pip install -q --no-deps --no-build-isolation -e . || export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
STENCIL=("$PY" -m solver)
if mpirun --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
  LA="--bind-to core --map-by core -x PYTHONPATH -x STENCIL_CACHE_DIR -x NUMBA_NUM_THREADS -x OMP_NUM_THREADS -x PYTHONUNBUFFERED"
  [[ $(id -u) == 0 ]] && LA+=" --allow-run-as-root --oversubscribe"
else
  LA="-bind-to core"
fi
LAUNCH=(--launcher mpirun --launcher-args "$LA")
{ date -u; nproc; lscpu | grep -E "Model name|^CPU\(s\)|L2|L3"; mpirun --version | head -1; nvidia-smi -L; } > "$W/machine.txt" 2>&1
cat "$W/machine.txt"

case_file() {  # case_file NAME N BACKEND: heat_4096.yaml at N^2, no VTK, snapshots first and last only
  sed -e "s/^name: .*/name: $1/" -e "s/^grid: .*/grid:     {nx: $2, ny: $2, lx: 1.0, ly: 1.0}/" \
      -e "s/^backend: .*/backend:  {name: $3, threads: null}/" \
      -e "s|^output: .*|output:   {dir: $W/out/$1, every: null, vtk: false, checkpoint_every: null, trace: false}|" \
      cases/heat_4096.yaml > "$W/cases/$1.yaml"
  echo "$W/cases/$1.yaml"
}

STRONG=$(case_file strong "$SIZE" numba)
WEAKC=$(case_file weak "$WEAK" numba)
for tt in 1 default; do
  opt=(); [[ $tt == 1 ]] && opt=(--time-tile 1)
  step "strong_tt$tt" 150 "${STENCIL[@]}" sweep strong "$STRONG" --ranks "$RANKS" --steps "$STRONG_STEPS" --no-verify \
    "${opt[@]}" -o "$W/strong_tt$tt" --overwrite "${LAUNCH[@]}"
  step "weak_tt$tt" 120 "${STENCIL[@]}" sweep weak "$WEAKC" --ranks "$RANKS" --steps "$WEAK_STEPS" --no-verify \
    "${opt[@]}" -o "$W/weak_tt$tt" --overwrite "${LAUNCH[@]}"
done
if [[ -n $GPU_SIZES ]]; then
  G=$(case_file gpu_inputs 4096 cupy)
  step gpu_inputs 90 "${STENCIL[@]}" bench model "$G" --ranks 2 --gpu "$GPU_INPUTS" "${LAUNCH[@]}"
  for n in $GPU_SIZES; do
    C=$(case_file "gpu_$n" "$n" cupy)
    step "gpu_$n" 60 "${STENCIL[@]}" sweep strong "$C" --ranks 1 --steps "$GPU_STEPS" --no-verify -o "$W/gpu_$n" \
      --overwrite "${LAUNCH[@]}"
  done
fi

{
  echo "== stencil model on $(hostname): $((SECONDS - T0)) s"
  cat "$W/status.txt"
  for d in "$W"/strong_tt* "$W"/weak_tt* "$W"/gpu_[0-9]*; do
    [[ -f $d/sweep.json ]] && "${STENCIL[@]}" model --validate "$d" --json "$d/validate.json"
  done
  "$PY" - "$W" <<'PYEOF'
import json, sys
from pathlib import Path
import numpy as np
w = Path(sys.argv[1])
for group, pattern in (("CPU (strong + weak, both time tiles)", ["strong_tt*", "weak_tt*"]), ("GPU", ["gpu_[0-9]*"])):
    errs = [r["model_error"] for p in pattern for d in sorted(w.glob(p)) if (d / "validate.json").exists()
            for r in json.loads((d / "validate.json").read_text())["rows"]]
    if errs:
        a = np.abs(errs)
        print(f"{group}: {len(a)} points, median |error| {np.median(a):.1%}, largest {a.max():.1%}")
PYEOF
} > "$OUT/summary.txt" 2>&1
cp "$STENCIL_CACHE_DIR/model.json" "$OUT/model.json" 2>/dev/null
tar czf "$OUT/model_device.tar.gz" --exclude='*.h5' --exclude='*.xdmf' -C "$W" . 2>/dev/null
cat "$OUT/summary.txt"
}

cluster() {
OUT=${1:?usage: tools/model_validation.sh cluster OUTDIR [RATE...]}
shift
RATES=${*:-1gbit 10gbit}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
PY=${PY:-$ROOT/.venv/bin/python}
export STENCIL_CLUSTER=${STENCIL_CLUSTER:-stnm} STENCIL_CLUSTER_NET=${STENCIL_CLUSTER_NET:-10.78.0}
export STENCIL_CLUSTER_MPIEXEC=${STENCIL_CLUSTER_MPIEXEC:-$(dirname "$PY")/mpiexec}
export PYTHONUNBUFFERED=1 NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1
export MPIR_CVAR_POLLS_BEFORE_YIELD=10 MPIR_CVAR_ENABLE_HEAVY_YIELD=1  # two ranks share a node's core: yield while waiting
NY=${NY:-512} NX=${NX:-16384} STEPS=${STEPS:-200} REPEATS=${REPEATS:-3}
mkdir -p "$OUT"
trap '"$HERE/cluster.sh" down' EXIT
trap 'exit 130' INT TERM
cat > "$OUT/strip.yaml" <<EOF
name: strip
grid: {nx: $NX, ny: $NY, lx: $((NX / NY)).0, ly: 1.0}
initial: {kind: random, seed: 7, low: 1.0, high: 2.0}
boundary: {top: 2.0, bottom: 1.0, left: 1.0, right: 1.0}
run: {steps: $STEPS, check_every: 100}
numerics: {dtype: float64}
backend: {name: numba, threads: 1}
parallel: {decomposition: rows, halo: overlap}
output: {dir: $OUT/out, every: null, vtk: false}
EOF
for rate in $RATES; do
  "$HERE/cluster.sh" down
  "$HERE/cluster.sh" up 2 "$rate" || exit 1
  for halo in nonblocking overlap; do
    for tt in 1 default; do
      opt=(); [[ $tt == 1 ]] && opt=(--time-tile 1)
      d="$OUT/$rate-$halo-tt$tt"
      echo "== $d ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
      "$PY" -m solver sweep strong "$OUT/strip.yaml" --ranks 2,4 --halo "$halo" "${opt[@]}" --repeats "$REPEATS" \
        --no-verify --launcher "$HERE/cluster.sh" -o "$d" --overwrite | tail -n 3
      "$PY" -m solver model --validate "$d" --json "$d/validate.json"
    done
  done
done
"$PY" - "$OUT" <<'PYEOF' | tee "$OUT/summary.txt"
import json, sys
from pathlib import Path
import numpy as np
rows = []
for f in sorted(Path(sys.argv[1]).glob("*/validate.json")):
    for r in json.loads(f.read_text())["rows"]:
        rows.append((f.parent.name, r))
        print(f"{f.parent.name:28s} {r['ranks']} ranks: measured {r['seconds_per_step'] * 1e3:8.3f} ms, predicted "
              f"{r['predicted_seconds_per_step'] * 1e3:8.3f} ms, error {r['model_error']:+.1%}")
a = np.abs([r["model_error"] for _, r in rows])
print(f"all {len(a)} points: median |error| {np.median(a):.1%}, largest {a.max():.1%}")
PYEOF
}

mode=${1:?usage: tools/model_validation.sh device | cluster OUTDIR [RATE...]}
shift
case $mode in
  device) device "$@" ;;
  cluster) cluster "$@" ;;
  *) echo "usage: tools/model_validation.sh device | cluster OUTDIR [RATE...]" >&2; exit 2 ;;
esac
