#!/usr/bin/env bash
# What a launcher does with SIGTERM and SIGUSR1, and whether `stencil run` checkpoints under it.
# Not part of `make test` (it sleeps and needs a machine with another MPI); run it from the project root:
#   bash tests/mpi/output_signals_check.sh [mpirun and its flags]
# Prints, for each signal: the exit code of mpirun, the last lines of its stderr, the checkpoint's step,
# and whether a restart from it completes. (Under Open MPI give the interpreter's full path in PYTHON
# and add -x PYTHONPATH: its mpirun puts /usr/bin first in the ranks' PATH.)
set -u
MPIRUN=${*:-mpirun}
PY=${PYTHON:-python3}
work=$(mktemp -d)
cat > "$work/sig.py" <<'PYEOF'
import signal, sys, time
from mpi4py import MPI
r = MPI.COMM_WORLD.Get_rank()
def h(s, f):
    print(f"rank {r} got signal {s}; finishing for 3 s", flush=True)
    time.sleep(3.0)
    print(f"rank {r} finished cleanly", flush=True)
    sys.exit(75)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
    signal.signal(s, h)
print(f"rank {r} ready", flush=True)
time.sleep(20)
PYEOF
cat > "$work/case.yaml" <<YEOF
name: sig
grid: {nx: 512, ny: 512}
initial: {kind: random, seed: 1}
run: {steps: 1000000, check_every: 100}
backend: {name: numpy}
output: {dir: $work/out, every: 1000, vtk: false}
YEOF
finish() {  # wait up to 30 s for mpirun to end; a launcher that did not pass the signal on is killed
  for _ in $(seq 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$1" 2>/dev/null; then kill -KILL "$1"; wait "$1"; echo "mpirun still running 30 s later: killed"
  else wait "$1"; echo "mpirun exit code: $?"; fi
}
for sig in TERM USR1; do
  echo "== raw mpi4py ranks, SIG$sig to mpirun"
  $MPIRUN -n 3 $PY "$work/sig.py" & pid=$!
  sleep 6; kill -$sig $pid; finish $pid
  echo "== stencil run, SIG$sig to mpirun"
  rm -rf "$work/out"
  $MPIRUN -n 3 $PY -m solver run "$work/case.yaml" -q 2> "$work/err" & pid=$!
  sleep 12; kill -$sig $pid; finish $pid; tail -n 3 "$work/err"
  step=$($PY -c "import h5py; print(h5py.File('$work/out/checkpoint.h5')['/'].attrs['step'])" 2>/dev/null || echo none)
  echo "checkpoint step: $step"
  if [ "$step" != none ]; then
    $MPIRUN -n 2 $PY -m solver run "$work/case.yaml" -q --restart "$work/out" --steps $((step + 50)) > /dev/null 2> "$work/err2"
    echo "restart on 2 ranks to step $((step + 50)): exit code $?"; tail -n 2 "$work/err2"
  fi
done
rm -rf "$work"
