"""Under mpirun -n N: every halo mode and decomposition equals the one-process run bitwise.

Usage: mpirun -n N python tests/mpi/check_equal.py OUTDIR
Grids that divide evenly by no rank count; heat and laplace (with a collective stop); numba and numpy.
Exits non-zero (via an AssertionError and MPI abort) on the first mismatch.
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


def case(label, **kw):
    return make_case({"name": label, "grid": {"nx": 101, "ny": 67, "lx": 2.0}, "initial": {"kind": "random", "seed": 11},
                      "boundary": {"top": 1.0, "bottom": -0.5, "left": 2.0, "right": 0.25},
                      "run": {"steps": 37, "check_every": 9}, "backend": {"name": "numba", "threads": 1},
                      "output": {"dir": str(root / f"{label}-n{comm.size}"), "every": 20}}, **kw)


def check(label, **kw):
    c = case(label, **kw)
    r = Run(c, comm, Options(ceiling=False, quiet=True))
    r.execute()
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    steps = comm.mpi.allgather(r.state.step)
    assert len(set(steps)) == 1, f"{label}: ranks stopped at different steps {steps}"
    if comm.rank == 0:
        ref, ref_steps, _ = serial(c)
        assert steps[0] == ref_steps, f"{label}: {steps[0]} steps, one process took {ref_steps}"
        diff = int(np.count_nonzero(field != ref))
        assert diff == 0, f"{label}: {diff} points differ from the one-process run (max {np.abs(field - ref).max()})"
        if c.run.tolerance is not None:
            assert steps[0] < c.run.steps, f"{label}: did not converge, so the collective stop was not tested"
        print(f"ok {label} on {comm.size} ranks ({r.dims[0]}x{r.dims[1]}, {steps[0]} steps)", flush=True)


with abort_on_error(comm.mpi):
    for decomposition in ("rows", "cart"):
        for halo in ("blocking", "nonblocking", "overlap"):
            par = {"decomposition": decomposition, "halo": halo}
            check(f"heat-{decomposition}-{halo}", parallel=par)
            check(f"laplace-{decomposition}-{halo}", parallel=par, physics={"equation": "laplace"},
                  run={"steps": 4000, "tolerance": 2e-2, "check_every": 7})
    check("heat-numpy-overlap", backend={"name": "numpy"})
    check("heat-f32-cart", parallel={"decomposition": "cart", "halo": "overlap"}, numerics={"dtype": "float32"})
