#!/usr/bin/env bash
# MPI scaling on this machine's CPU cores: strong (4096^2) and weak (1024^2 per rank), ranks 1..16,
# every halo mode, rows and cart; one numba thread per rank, ranks bound to cores (BIND="..." replaces
# the placement options, e.g. BIND="--bind-to none").
#   tools/cpu_scaling.sh OUTDIR [RANKS...]        (default ranks: 1 2 4 8 16)
# Writes OUTDIR/scaling.jsonl and OUTDIR/scaling.md and prints the tables.
set -euo pipefail
out=${1:?usage: tools/cpu_scaling.sh OUTDIR [RANKS...]}
shift || true
ranks=${*:-1 2 4 8 16}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/tools/launcher.sh"
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1
for p in $ranks; do
  "${launch[@]}" -n "$p" python3 "$here/tools/mpi_scaling.py" --out "$out/scaling.jsonl" ${SCALING_ARGS:-}
done
python3 "$here/tools/scaling_table.py" "$out/scaling.jsonl" | tee "$out/scaling.md"
