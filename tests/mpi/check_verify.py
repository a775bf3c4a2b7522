"""Under mpirun -n N: --verify's distributed numpy reference agrees bitwise with a cart-decomposed, deep-halo,
periodic run (its rows meet the run's blocks across ranks), and finds one wrong value on the last rank.

Usage: mpirun -n N python tests/mpi/check_verify.py OUTDIR
"""

import sys
from pathlib import Path

from common import abort_on_error, make_case
from mpi4py import MPI

from solver.parallel.comm import Comm
from solver.results.verify import verify
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
BASE = {"name": "v", "grid": {"nx": 45, "ny": 38}, "initial": {"kind": "random", "seed": 11},
        "boundary": {"top": {"kind": "periodic"}, "bottom": {"kind": "periodic"}, "left": 3.0, "right": 1.0},
        "run": {"steps": 24, "check_every": 8}, "backend": {"name": "numba", "threads": 1},
        "parallel": {"decomposition": "cart"}, "output": {"dir": str(root / f"v{comm.size}"), "vtk": False}}

with abort_on_error(comm.mpi):
    run = Run(make_case(BASE), comm, Options(ceiling=False, quiet=True, verify=True))
    c = run.execute()["correctness"]
    assert c["passed"] and c["mismatched_points"] == 0 and c["tolerance"] == 0.0, c
    assert c["reference"].startswith(f"numpy reference on {comm.size} rank(s)"), c
    if comm.rank == comm.size - 1:
        run.state.u[1, 1] += 1.0  # one owned point of one rank
    bad = verify(run.layout, comm, run.backend, run.state.u, run.state.step)
    assert not bad["passed"] and bad["mismatched_points"] == 1 and bad["max_abs_error"] > 0.5, bad
    if comm.rank == 0:
        print(f"verify ok on {comm.size} rank(s): dims {run.layout.dims}")
