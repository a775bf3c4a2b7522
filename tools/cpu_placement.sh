#!/usr/bin/env bash
# Is this machine balanced for P single-threaded ranks? Topology, then `stencil bench balance` (each rank's
# own kernel and copy speed, no messages) under several Open MPI placements, then the coupled weak run
# (1024^2 per rank, rows, overlap) with each rank's compute / wait from timings.csv.
#   tools/cpu_placement.sh [P]        (default 16)
set -uo pipefail
P=${1:-16}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"  # python -m solver from the repository
PY=${PY:-python3}
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1
echo "== topology"
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA|L1d|L2|L3|Hypervisor|Virtualization)" || true
lscpu -e=CPU,CORE,SOCKET,NODE,CACHE 2>/dev/null | head -40
command -v numactl > /dev/null && numactl -H | head -8
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
echo "load: $(cat /proc/loadavg)"
if mpirun --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
  L=(mpirun --oversubscribe -x PYTHONPATH -x STENCIL_CACHE_DIR -x NUMBA_NUM_THREADS -x OMP_NUM_THREADS)
  [[ $(id -u) == 0 ]] && L+=(--allow-run-as-root)
  CORE="--bind-to core --map-by core" NONE="--bind-to none"
else  # MPICH's hydra
  L=(mpirun) CORE="-bind-to core" NONE="-bind-to none"
fi
probe() { echo "== probe: mpirun -n $1 ${*:2}"; "${L[@]}" -n "$1" ${@:2} $PY -m solver bench balance ${PROBE_ARGS:-}; }
for n in 1 2 4 8 "$P" "$P"; do (( n <= P )) && probe "$n" "$CORE"; done
probe "$P" "$NONE"
W=$(mktemp -d /dev/shm/placement-XXXX 2>/dev/null || mktemp -d)
ny=$((1024 * P))
printf 'name: weak\ngrid: {nx: 1024, ny: %s}\ninitial: {kind: hotspot}\nrun: {steps: 400, check_every: 400, warmup: 5}\nbackend: {name: numba, threads: 1, time_tile: 1}\nparallel: {decomposition: rows, halo: overlap}\noutput: {dir: %s/out, vtk: false}\n' "$ny" "$W" > "$W/weak.yaml"
for bind in "$CORE" "$NONE"; do
  for rep in 1 2; do
    echo "== coupled weak ${ny}x1024, rows, overlap: mpirun -n $P $bind (repeat $rep)"
    "${L[@]}" -n "$P" $bind $PY -m solver run "$W/weak.yaml" --overwrite -q > /dev/null || echo "run failed"
    $PY - "$W/out" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1] + "/timings.csv")))
t = json.load(open(sys.argv[1] + "/record.json"))
print(" ".join(f"{r['rank']}:{r['affinity']}:{float(r['compute']) / int(r['steps']) * 1e3:.3f}/{float(r['wait']) / int(r['steps']) * 1e3:.3f}" for r in rows))
tt = t["timings"]
print(f"ms/step {t['throughput']['seconds_per_step'] * 1e3:.3f}  imbalance {tt['load_imbalance']:.2f}  "
      f"wait max {tt['wait_fraction']['max']:.1%} mean {tt['wait_fraction']['mean']:.1%}  comm max {tt['comm_fraction']['max']:.1%}")
PY
  done
done
rm -rf "$W"
