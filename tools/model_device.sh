#!/usr/bin/env bash
# tools/model_device.sh: the scaling model against measurements on the GPU machine (issue 24), one call.
#
# Strong (SIZE^2, default 4096^2) and weak (WEAK^2 per rank, default 1024^2) sweeps of cases/heat_4096.yaml
# (float32, rows, overlap) at RANKS (default 1,2,4,8,16) ranks, one numba thread per rank, ranks bound to
# cores, time tile 1 and the default (deep halos); each sweep measures the model's inputs it lacks under
# the same launcher and writes the prediction beside every point. Then the GPU: its inputs at 4096^2,
# 8192^2 and 16384^2, and one-rank runs at GPU_SIZES (default 4096 6144 8192 12288 16384: 6144 and 12288
# are interpolated). `stencil model --validate` prints the error per point of every sweep.
# Written: $OUT/model_device.log, $OUT/summary.txt (the tables), $OUT/model_device.tar.gz (sweep
# directories without fields, validation JSON), $OUT/model.json (the measured inputs, for --inputs).
# Test elsewhere on small sizes: SKIP_INSTALL=1 SIZE=256 WEAK=128 RANKS=1,2 GPU_SIZES= tools/model_device.sh
set -uo pipefail
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
