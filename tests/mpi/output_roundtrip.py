"""Under mpirun -n N: runs that write VTK and HDF5 output, saving the field in memory at every snapshot.

Usage: mpirun -n N python tests/mpi/output_roundtrip.py OUTROOT LABEL:DECOMPOSITION[:PY:PX] ...
For each run, writes OUTROOT/LABEL (the run's output) and OUTROOT/LABEL-memory/u_STEP.npy (the global field as held
in the ranks' memory when the snapshot was taken, gathered on rank 0 after the snapshot). Blocks travel to
rank 0 in slabs of three rows here (fields.SLAB_BYTES lowered), so slabs with remainders are exercised.
The pytest side (tests/test_output_mpi.py) reads the files back with VTK's and h5py's readers.
"""

import sys
from pathlib import Path

import numpy as np
from common import abort_on_error
from mpi4py import MPI

import solver.io.fields
from solver.case import validate_case
from solver.io.fields import gather_field, owned
from solver.io.outputs import Outputs
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
NX, NY = 37, 23
solver.io.fields.SLAB_BYTES = 3 * NX * 8  # three rows of a full-width block per message

snapshot = Outputs.snapshot


def spy(self, s):
    snapshot(self, s)
    full = gather_field(self.comm, self.layout.blocks, owned(self.backend, s.u))
    if self.comm.rank == 0:
        memory = root / f"{self.layout.case.name}-memory"
        memory.mkdir(parents=True, exist_ok=True)
        np.save(memory / f"u_{s.step}.npy", full)


def run(label: str, decomposition: str, dims: list[int] | None) -> None:
    case = validate_case({
        "name": label, "grid": {"nx": NX, "ny": NY, "lx": 2.0, "ly": 1.5}, "initial": {"kind": "random", "seed": 5},
        "boundary": {"top": 1.0, "left": -2.0}, "run": {"steps": 30, "check_every": 10},
        "backend": {"name": "numpy"}, "output": {"dir": str(root / label), "every": 10, "vtk": True},
        "parallel": {"decomposition": decomposition, "dims": dims}})
    Run(case, comm, Options(ceiling=False, quiet=True)).execute()
    if comm.rank == 0:
        print(f"ok {label} on {comm.size} ranks")


Outputs.snapshot = spy
with abort_on_error(comm.mpi):
    for spec in sys.argv[2:]:
        label, decomposition, *dims = spec.split(":")
        run(label, decomposition, [int(d) for d in dims] or None)
