"""Under mpirun -n 3: rank 0's memory while it writes a snapshot and a checkpoint of a large field.

Usage: mpirun -n 3 python tests/mpi/output_memory.py OUTDIR
Prints one JSON line from rank 0: the full field's bytes, rank 0's block bytes, the slab size, and for
each write the rise of rank 0's peak resident memory (VmHWM reset through /proc/self/clear_refs,
minus VmRSS before) and the peak of memory traced by tracemalloc (numpy arrays included).
Nothing is asserted here; tests/test_output_mpi.py compares the figures with the field size.
"""

import json
import sys
import tracemalloc

from common import abort_on_error
from mpi4py import MPI

from solver.case import validate_case
from solver.core.loop import LoopState
from solver.io.fields import SLAB_BYTES
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
NX, NY = 2048, 1536


def status_kib(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def measure(fn) -> dict:
    """Rank 0: peak RSS rise and traced peak while fn runs (every rank runs fn)."""
    comm.barrier()
    out = {}
    if comm.rank == 0:
        try:
            open("/proc/self/clear_refs", "w").write("5")  # reset VmHWM to the current RSS
            out["hwm_reset"] = True
        except OSError:
            out["hwm_reset"] = False
        rss0 = status_kib("VmRSS")
        tracemalloc.start()
    fn()
    if comm.rank == 0:
        out["traced_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out["rss_rise"] = (status_kib("VmHWM") - rss0) * 1024
    return out


with abort_on_error(comm.mpi):
    case = validate_case({"name": "mem", "grid": {"nx": NX, "ny": NY}, "initial": {"kind": "constant", "value": 1.0},
                          "run": {"steps": 1}, "backend": {"name": "numpy"},
                          "output": {"dir": sys.argv[1], "vtk": False, "checkpoint_every": 1}})
    run = Run(case, comm, Options(ceiling=False, quiet=True))
    run.setup()
    state = LoopState(run.u, run.u_new)
    run.outputs.snapshot(state)  # the first write opens HDF5 structures; measure the next ones
    state.step = 1
    result = {"snapshot": measure(lambda: run.outputs.snapshot(state)),
              "checkpoint": measure(lambda: run.outputs.checkpoint(state))}
    run.outputs.close()
    run.exchange.close()
    if comm.rank == 0:
        b = run.blocks[0]
        print(json.dumps({"full_bytes": NX * NY * 8, "block_bytes": b.nx * b.ny * 8, "slab_bytes": SLAB_BYTES,
                          **result}))
