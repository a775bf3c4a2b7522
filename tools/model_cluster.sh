#!/usr/bin/env bash
# tools/model_cluster.sh OUTDIR [RATE...]: the scaling model against sweeps across two emulated nodes (issue 24).
#
# For each link RATE (default: 1gbit 10gbit; tbf on every veth of tools/cluster.sh), strong sweeps of a strip
# (NY x NX, default 512 x 16384 float64: 128 KiB halo rows, so the link shows) at 2 ranks (one per node) and
# 4 ranks (two per node), halo modes nonblocking (messages exposed) and overlap (hidden behind the interior),
# time tile 1 and the default (deep halos), REPEATS runs per point (default 3, the median kept). Each rate's
# first sweep measures the model's inputs on the nodes (the link by ping-pong between them); every sweep
# writes its predictions; `stencil model --validate` prints the errors; OUTDIR/summary.txt has them all.
# Root; builds the cluster under the prefix stnm and removes it at the end (also on failure or Ctrl-C).
set -uo pipefail
OUT=${1:?usage: tools/model_cluster.sh OUTDIR [RATE...]}
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
