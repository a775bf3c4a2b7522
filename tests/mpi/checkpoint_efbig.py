"""Under mpirun -n N: the file-size limit is hit in the middle of writing the second checkpoint.

Usage: mpirun -n N python tests/mpi/checkpoint_efbig.py OUTDIR
The field is 4 MiB; before the checkpoint of step 4, rank 0 limits its files to 2.5 MiB (RLIMIT_FSIZE,
SIGXFSZ ignored), so the kernel refuses (EFBIG) to give the new checkpoint's temporary file room for its
data, after its skeleton was written and while the other ranks' blocks are on their way. Every rank must
get the same OutputError (exit 5), the checkpoint of step 2 must stay whole and no temporary file may
remain. Prints "ok" from rank 0; asserts otherwise. (tests/test_checkpoint.py also fails a checkpoint
after half of its data is written.)
"""

import resource
import signal
import sys
from pathlib import Path

import h5py
import numpy as np
from common import abort_on_error
from mpi4py import MPI

import solver.io.fields
from solver.case import validate_case
from solver.core.errors import EXIT_IO, OutputError
from solver.io.checkpoint import Checkpoint
from solver.io.fields import gather_field, owned
from solver.io.outputs import Outputs
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
out = Path(sys.argv[1])
NX, NY, LIMIT = 1024, 512, 5 << 19
solver.io.fields.SLAB_BYTES = 16 * NX * 8  # many messages per block
checkpoint, fields_at = Outputs.checkpoint, {}


def limited(self, s):
    fields_at[s.step] = gather_field(self.comm, self.layout.blocks, owned(self.backend, s.u))
    if s.step == 4 and self.comm.rank == 0:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    checkpoint(self, s)


Outputs.checkpoint = limited
with abort_on_error(comm.mpi):
    case = validate_case({"name": "efbig", "grid": {"nx": NX, "ny": NY}, "initial": {"kind": "random", "seed": 1},
                          "boundary": {"left": 1.0}, "run": {"steps": 6, "check_every": 2}, "backend": {"name": "numpy"},
                          "output": {"dir": str(out), "vtk": False, "checkpoint_every": 2}})
    try:
        Run(case, comm, Options(ceiling=False, quiet=True)).execute()
        raise AssertionError("the run went on past a failed checkpoint")
    except OutputError as exc:
        assert exc.exit_code == EXIT_IO and exc.agreed, exc
        message = comm.bcast(str(exc) if exc.report else None, root=0) if comm.rank == 0 else comm.bcast(None)
    if comm.rank == 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        assert f"cannot write {out / 'checkpoint.h5'} (File too large)" in message, message
        assert "(step 2), is intact" in message, message
        cp = Checkpoint.open(out / "checkpoint.h5")
        assert cp.step == 2
        with h5py.File(cp.path, "r") as f:
            assert np.array_equal(f["u"][()], fields_at[2]), "the checkpoint of step 2 changed"
        assert not [p for p in out.iterdir() if ".tmp" in p.name], "a temporary file was left behind"
        print("ok", message)
