"""Under mpirun -n N (N >= 2) with STENCIL_SLOW_RANK=1:SECONDS: every kind of data a block carries per row and
per column (a profile along a side, a side file, a table in time, a source and an alpha field) stays bitwise equal
to the one-process run when rows move (parallel.balance: dynamic) and under time tiles with deep halos (the
default numba tile; rows and cart), or the run is refused before it starts.

Usage: STENCIL_SLOW_RANK=1:0.0005 mpirun -n N python tests/mpi/check_side_data.py OUTDIR
Prints one "ok LABEL" line per case; exits non-zero (AssertionError, MPI abort) on the first failure.
"""

import sys
from pathlib import Path

import numpy as np
from common import abort_on_error, make_case, serial
from mpi4py import MPI

from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
NX, NY = 19, 41
PROFILE = {"along": [[0.0, 0.0], [0.5, 3.0], [1.0, -1.0]]}
FILES = {"rows": root / "rows.npy", "cols": root / "cols.npy", "alpha": root / "alpha.npy", "q": root / "q.npy"}
BALANCED = {"decomposition": "rows", "balance": "dynamic", "balance_every": 5}
CASES = {  # label -> (boundary, physics, parallel): all but the last with rows moving
    "dirichlet along left": ({"left": {"kind": "dirichlet", "value": PROFILE}}, {}, BALANCED),
    "dirichlet file right": ({"right": {"kind": "dirichlet", "value": {"file": str(FILES["rows"])}}}, {}, BALANCED),
    "neumann along left": ({"left": {"kind": "neumann", "flux": PROFILE}}, {}, BALANCED),
    "convective file, ambient along": ({"right": {"kind": "convective", "h": {"file": str(FILES["rows"])},
                                                  "ambient": PROFILE}}, {}, BALANCED),
    "dirichlet in time": ({"left": {"kind": "dirichlet", "value": {"time": [[0.0, 0.0], [0.01, 4.0]]}}}, {}, BALANCED),
    "neumann in time": ({"right": {"kind": "neumann", "flux": {"time": [[0.0, 0.0], [0.01, -4.0]]}}}, {}, BALANCED),
    "source and alpha files": ({"left": {"kind": "dirichlet", "value": PROFILE}},
                               {"alpha": {"kind": "file", "path": str(FILES["alpha"])},
                                "source": [{"kind": "file", "path": str(FILES["q"])},
                                           {"kind": "gaussian", "center": [0.5, 0.3], "width": 0.1, "amplitude": 9.0,
                                            "active": [0.0, 0.002]}]}, BALANCED),
    "cart, profiles on every side": ({"left": {"kind": "dirichlet", "value": PROFILE},
                                      "right": {"kind": "dirichlet", "value": {"file": str(FILES["rows"])}},
                                      "bottom": {"kind": "dirichlet", "value": PROFILE},
                                      "top": {"kind": "dirichlet", "value": {"file": str(FILES["cols"])}}},
                                     {}, {"decomposition": "cart"}),
}


def write_files():
    if comm.rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(7)
        np.save(FILES["rows"], rng.uniform(0.5, 2.0, NY))
        np.save(FILES["cols"], rng.uniform(-1.0, 1.0, NX))
        np.save(FILES["alpha"], rng.uniform(0.5, 1.5, (NY, NX)))
        np.save(FILES["q"], rng.uniform(-3.0, 3.0, (NY, NX)))
    comm.barrier()


def check(label, boundary, physics, parallel):
    c = make_case({"name": label.replace(" ", "-").replace(",", ""), "grid": {"nx": NX, "ny": NY},
                   "initial": {"kind": "random", "seed": 2}, "boundary": boundary, "physics": physics,
                   "run": {"steps": 80, "check_every": 20}, "backend": {"name": "numba", "threads": 1},
                   "parallel": parallel,
                   "output": {"dir": str(root / f"{label.replace(' ', '-')}-n{comm.size}"), "vtk": False}})
    r = Run(c, comm, Options(ceiling=False, quiet=True))
    r.execute()
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    moves = r.balancer.summary()["rebalances"] if r.balancer else 0
    depth = getattr(r.loop.ex, "depth", 1)
    if comm.rank == 0:
        ref, _, _ = serial(c)
        diff = int(np.count_nonzero(field != ref))
        assert diff == 0, f"{label}: {diff} points differ from the one-process run (max {np.abs(field - ref).max():g})"
        assert moves >= 1 or parallel is not BALANCED, f"{label}: rows never moved"
        print(f"ok {label}: {moves} rebalances, halo depth {depth}", flush=True)


with abort_on_error(comm.mpi):
    write_files()
    for label, (boundary, physics, parallel) in CASES.items():
        check(label, boundary, physics, parallel)
