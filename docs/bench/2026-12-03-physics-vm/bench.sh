#!/usr/bin/env bash
# quiet-VM benchmarks of issues 33/34; outputs to docs/bench/2026-12-03-physics-vm
set -u
cd "$(dirname "$0")/../../.."   # the repository root
BASE=${BASE:?a checkout of 3256bcf (git archive 3256bcf | tar -x -C BASE) with .venv linked to this one's}
D=docs/bench/2026-12-03-physics-vm
PY=.venv/bin/python
export PATH=$PWD/.venv/bin:$PATH
{ date -u; uname -a; lscpu | grep -E "Model name|^CPU\(s\)|L3"; git log --oneline -1; } > $D/machine.txt
t() { echo "== $1 $(date -u +%H:%M:%S)"; }
t baseline; $PY tools/physics_bench.py baseline 4096 --against "$BASE" --repeats 5 --steps 200 2>&1 | tee $D/baseline.txt
t forms; $PY tools/physics_bench.py forms 4096 --repeats 7 2>&1 | tee $D/forms.txt
t rates; $PY tools/physics_bench.py rates 4096 --repeats 3 --steps 200 2>&1 | tee $D/rates.txt
t steady; $PY tools/physics_bench.py steady 1023 4095 --ranks 2 --repeats 3 2>&1 | tee $D/steady.txt
export PETSC_DIR=/usr/lib/petscdir/petsc3.18/x86_64-linux-gnu-real
P="/usr/bin/mpirun --allow-run-as-root --oversubscribe -n 2 /usr/bin/python3 tools/petsc_peer.py"
for c in lid two-material checker; do for pc in mg boomeramg; do t "petsc $c 1023 $pc"; $P $c 1023 --pc $pc --repeats 3 2>&1 | tail -1 | tee -a $D/petsc.txt; done; done
for c in two-material checker lid; do t "petsc $c 4095 mg"; $P $c 4095 --pc mg --repeats 1 2>&1 | tail -1 | tee -a $D/petsc.txt; done
t "petsc two-material 4095 boomeramg"; $P two-material 4095 --pc boomeramg --repeats 1 2>&1 | tail -1 | tee -a $D/petsc.txt
t done
