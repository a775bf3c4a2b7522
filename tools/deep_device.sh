#!/usr/bin/env bash
# Issue 14's measurements on the GPU machine's 16 CPU cores in one call (about 3 minutes), from the
# repository root with the project importable (PYTHONPATH):
#   OUT=DIR bash tools/deep_device.sh
# 1. compiles the numba kernels once (numba caches them), so that the ranks do not all compile at once;
# 2. tools/deep_bench.py --parts tiles: one process x 16 threads, the kernel alone at 1024^2, 2048^2 and
#    4096^2, per-step against k = 2..8 (the default-tile rule's data); then 1 thread at 1024^2 and 4096^2;
# 3. tools/deep_scaling.sh: mpirun -n 1 2 4 8 16 (a core each) and one process x 16 threads, strong 4096^2
#    (160 steps) and weak 1024^2 per rank (600 steps; 4000 for the one-process run), the default time
#    tile beside time_tile 1, 3 round-robin repeats, 20 warm-up steps; comm + wait against the per-step
#    and the tiled lockstep floors of the same launch, compute max/min over ranks, wait per site;
# 4. mpirun -n 2 again with the stop vote at polls blocking, as it was (tools/deep_scaling.py --blocking-poll):
#    an A/B of the nonblocking vote (DIR/ab.txt).
# Writes DIR/deep.jsonl, deep.md, deep_scaling.log, ab.txt, tiles.txt, machine.txt; prints the tables.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/deep-device}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 STENCIL_CACHE_DIR=${STENCIL_CACHE_DIR:-/tmp/deep-cache}
{ date -u; nproc; lscpu | grep -E "Model name|MHz|L2|L3"; mpirun --version | head -1; python3 -c "import numba; print('numba', numba.__version__)"; } > "$out/machine.txt" 2>&1
t0=$SECONDS
python3 - <<'PY'
from types import SimpleNamespace
import numpy as np
from solver.backends.numba_backend import NumbaBackend
from solver.config import BackendSettings
be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
u = np.zeros((8, 8))
be.prepare(u, u.copy(), SimpleNamespace(wc=0.5, wx=0.125, wy=0.125))
import numba; print("compiled; threading layer", numba.threading_layer())
PY
echo "compile: $((SECONDS - t0)) s"
python3 tools/deep_bench.py --parts tiles --threads "${NODE_THREADS:-16}" --sizes ${TILE_SIZES:-1024 2048 4096} --repeats 3 2>&1 | tee "$out/tiles.txt"
python3 tools/deep_bench.py --parts tiles --threads 1 --sizes ${TILE_SIZES_1:-1024 4096} --repeats 3 2>&1 | tee -a "$out/tiles.txt"
echo "tiles: $((SECONDS - t0)) s"
args=${DEEP_ARGS:-"--repeats 3 --strong-steps 160 --weak-steps 600"}
DEEP_ARGS=$args NODE_ARGS=${NODE_ARGS:-"--weak-steps 4000"} bash tools/deep_scaling.sh "$out" ${RANKS:-1 2 4 8 16} > "$out/deep_scaling.log" 2>&1
echo "deep_scaling: $((SECONDS - t0)) s"
cat "$out/deep.md"
source tools/launcher.sh
for p in ${AB_RANKS:-2}; do  # the same launch with the stop vote blocking, as before: an A/B of the nonblocking one
  NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 "${launch[@]}" -n "$p" python3 tools/deep_scaling.py --out "$out/ab.jsonl" \
    --variants default --blocking-poll $args 2>&1 | tee -a "$out/ab.txt" | grep "^P="
done
echo "a/b: $((SECONDS - t0)) s"
echo "total: $((SECONDS - t0)) s"
