"""Under mpirun -n N with STENCIL_SLOW_RANK=1:SECONDS: parallel.balance dynamic moves rows away from
the slowed rank, and every result stays bitwise equal to the one-process run.

Usage: STENCIL_SLOW_RANK=1:0.0002 mpirun -n N python tests/mpi/check_balance.py OUTDIR
Every halo mode, heat and laplace (collective stop), numba and numpy, float64 and float32; the
snapshots (fields.h5), the checkpoint written after rows moved, and the final field are compared.
Exits non-zero (AssertionError, then MPI abort) on the first failure.
"""

import sys
from pathlib import Path

import h5py
import numpy as np
from common import abort_on_error, make_case, serial
from mpi4py import MPI

from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])


def case(label, **kw):
    return make_case({"name": label, "grid": {"nx": 41, "ny": 67}, "initial": {"kind": "random", "seed": 5},
                      "boundary": {"top": 1.0, "bottom": -0.5, "left": 2.0, "right": 0.25},
                      "run": {"steps": 60, "check_every": 10}, "backend": {"name": "numba", "threads": 1},
                      "parallel": {"decomposition": "rows", "balance": "dynamic", "balance_every": 5},
                      "output": {"dir": str(root / f"{label}-n{comm.size}"), "every": 20, "checkpoint_every": 40}},
                     **kw)


def check(label, **kw):
    c = case(label, **kw)
    r = Run(c, comm, Options(ceiling=False, quiet=True))
    r.execute()
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    bal = r.balancer.summary()
    rows = comm.mpi.allgather(r.block.ny)
    if comm.rank == 0:
        equal = c.grid.ny / comm.size
        assert bal["rebalances"] >= 1, f"{label}: rows never moved ({bal})"
        assert rows[1] < equal and sum(rows) == c.grid.ny, f"{label}: the slowed rank 1 kept {rows} rows"
        ref, ref_steps, ref_dir = serial(c)
        assert r.state.step == ref_steps, f"{label}: {r.state.step} steps, one process took {ref_steps}"
        diff = int(np.count_nonzero(field != ref))
        assert diff == 0, f"{label}: {diff} points differ from the one-process run"
        with h5py.File(Path(c.output.dir) / "fields.h5") as a, h5py.File(ref_dir / "fields.h5") as b:
            assert np.array_equal(a["u"][()], b["u"][()]), f"{label}: snapshots differ"
        if c.output.checkpoint_every:  # written at step 40, then again where the loop ended: moved blocks
            with h5py.File(Path(c.output.dir) / "checkpoint.h5") as f:
                assert f.attrs["step"] == r.state.step and np.array_equal(f["u"][()], ref), f"{label}: checkpoint"
        print(f"ok {label} on {comm.size} ranks, {bal['rebalances']} rebalances, rows {rows}", flush=True)


with abort_on_error(comm.mpi):
    for halo in ("blocking", "nonblocking", "overlap"):
        check(f"balance-heat-{halo}", parallel={"halo": halo})
    check("balance-laplace", physics={"equation": "laplace"},
          run={"steps": 4000, "tolerance": 2e-2, "check_every": 7}, output={"checkpoint_every": None})
    check("balance-numpy-f32", backend={"name": "numpy"}, numerics={"dtype": "float32"})
    check("balance-periodic-neumann", parallel={"halo": "overlap"},  # the wrap moves with the first and last rows
          boundary={"top": {"kind": "periodic"}, "bottom": {"kind": "periodic"}, "left": {"kind": "neumann"},
                    "right": {"kind": "neumann", "flux": 1.5}})
