"""Under mpirun -n N (any N): multigrid (laplace, and implicit heat steps) equals one numpy process bitwise
for every boundary kind, decomposition, halo mode, cycle and dtype, with levels distributed, shared, and gathered from a copy of a
distributed level; and a run proves itself (--verify: the numpy multigrid, the exact discrete solution).

Usage: mpirun -n N python tests/mpi/check_multigrid.py OUTDIR [BACKEND]
Exits non-zero (AssertionError, MPI abort) on the first failure.
"""

import sys
from pathlib import Path

import numpy as np
from common import abort_on_error, make_case
from mpi4py import MPI

from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "numba"
GPU = {"share_gpus": True} if BACKEND == "cupy" else {}
N, P = {"kind": "neumann"}, {"kind": "periodic"}
CASES = {  # label -> (grid, boundary, multigrid section, dtype)
    "lid": ((101, 67), {"top": 1.0, "bottom": 0.5, "left": {"kind": "neumann", "flux": 0.3}, "right": 0.0},
            {"coarsest": 16}, "float64"),
    "strip": ((96, 77), {"top": 1.0, "bottom": {"kind": "neumann", "flux": -0.2}, "left": P, "right": P},
              {"cycle": "W", "coarsest": 9}, "float32"),
    "mixed": ((64, 81), {"top": P, "bottom": P, "left": 2.0, "right": N}, {"cycle": "F", "pre": 1, "post": 3}, "float64"),
    "tiny": ((9, 7), {"top": 1.0}, {"coarsest": 4}, "float64"),
    "single": ((7, 6), {"top": 1.0, "left": N}, {}, "float64"),  # one level: with ranks, a shared copy solves it
    "euler": ((53, 41), {"top": 1.0, "bottom": {"kind": "neumann", "flux": 0.4}, "left": P, "right": P},
              {"coarsest": 16}, "float64"),  # implicit heat (SCHEMES)
    "cn": ((53, 41), {"top": 1.0, "left": N}, {"cycle": "F"}, "float32"),
}
SCHEMES = {"euler": "backward-euler", "cn": "crank-nicolson"}
GRIDS = {"rows": {"decomposition": "rows"}, "cart": {"decomposition": "cart"}}
_serial: dict = {}


def case(label, backend, tag="", **parallel):
    (nx, ny), boundary, mg, dtype = CASES[label]
    return make_case({"name": label, "grid": {"nx": nx, "ny": ny, "lx": 1.3}, "initial": {"kind": "random", "seed": 4},
                      "boundary": boundary, "multigrid": mg, "numerics": {"dtype": dtype},
                      "physics": ({"equation": "heat", "scheme": SCHEMES[label], "dt": 2e-3} if label in SCHEMES else
                                  {"equation": "laplace", "solver": "multigrid"}),
                      "run": {"steps": 5, **({"tolerance": 1e-5} if dtype == "float32" and label in SCHEMES else {})},
                      "backend": {"name": backend, **({"threads": 1} if backend == "numba" else {})},
                      "parallel": {**parallel, **GPU},
                      "output": {"dir": str(root / f"{label}-{backend}-n{comm.size}-{'-'.join(map(str, parallel.values()))}{tag}"),
                                 "vtk": False}})


def run(c, comm_, verify=False):
    r = Run(c, comm_, Options(ceiling=False, quiet=True, verify=verify))
    return r, r.execute()


def reference(label):
    if label not in _serial:
        r, _ = run(case(label, "numpy"), Comm())
        _serial[label] = r.state.u[1:-1, 1:-1].copy()
    return _serial[label]


def check(label, grid, halo, verify=False):
    c = case(label, BACKEND, "-verify" if verify else "", **GRIDS[grid], halo=halo)
    r, record = run(c, comm, verify)
    if verify:
        assert record["correctness"]["passed"], record["correctness"]
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    shared = [lev["placement"] for lev in record["solver"]["levels"]]
    if label in SCHEMES:
        assert record["solver"]["steps"] == 5 and not record["solver"]["unconverged_steps"], record["solver"]["ended"]
    if comm.rank == 0:
        ref = reference(label)
        diff = int(np.count_nonzero(field != ref))
        assert diff == 0, f"{label}: {diff} points differ from one numpy process (max {np.abs(field - ref).max()})"
        print(f"ok {label}-{grid}-{halo} on {comm.size} ranks ({r.dims[0]}x{r.dims[1]}; levels {shared})", flush=True)


with abort_on_error(comm.mpi):
    for label in CASES:
        for grid in GRIDS:
            for halo in (("blocking", "nonblocking", "overlap") if label == "lid" else ("overlap",)):
                check(label, grid, halo)
    check("lid", "cart", "nonblocking", verify=True)
    check("euler", "rows", "blocking", verify=True)
    if comm.rank == 0:
        print(f"ok multigrid on {comm.size} ranks", flush=True)
