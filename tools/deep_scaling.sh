#!/usr/bin/env bash
# Deep halos on this machine's CPU cores (issue 14): strong 4096^2 and weak 1024^2 per rank, ranks
# 1 2 4 8 16, the default time tile (deep halos) beside time_tile 1, each launch also measuring the
# no-data lockstep floor (tools/cpu_probe.py); then one process x NODE_THREADS threads tiled (the
# figure `mpirun -n 8/16` should reach 0.9x of). One numba thread per rank, ranks bound to cores.
#   tools/deep_scaling.sh OUTDIR [RANKS...]        (default ranks: 1 2 4 8 16; NODE_THREADS=16)
# DEEP_ARGS go to every launch (e.g. "--repeats 3 --strong-steps 200 --weak-steps 1000"), NODE_ARGS to the
# one-process run only (e.g. "--weak-steps 4000": a 1024^2 step takes 0.15 ms on 16 threads).
# Writes OUTDIR/deep.jsonl and OUTDIR/deep.md and prints the tables.
set -euo pipefail
out=${1:?usage: tools/deep_scaling.sh OUTDIR [RANKS...]}
shift || true
ranks=${*:-1 2 4 8 16}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/tools/launcher.sh"
for p in $ranks; do
  NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 "${launch[@]}" -n "$p" python3 "$here/tools/deep_scaling.py" \
    --out "$out/deep.jsonl" ${DEEP_ARGS:-}
done
python3 "$here/tools/deep_scaling.py" --out "$out/deep.jsonl" --threads "${NODE_THREADS:-16}" ${DEEP_ARGS:-} ${NODE_ARGS:-}
python3 "$here/tools/deep_scaling.py" --table "$out/deep.jsonl" | tee "$out/deep.md"
