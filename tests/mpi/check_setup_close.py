"""Under mpirun -n N: a set-up step that fails after the halo exchanger exists (here: opening the output files,
on the last rank) ends every rank with the same InputError and leaves no MPI request behind (MPICH would print
"freeing inactive persistent request" for each at the end). Prints "ok" per halo mode.

Usage: mpirun -n N python tests/mpi/check_setup_close.py OUTDIR
"""

import sys
from pathlib import Path

from common import make_case
from mpi4py import MPI

from solver.core.errors import InputError
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])


class FailsToOpen(Run):
    def _open_outputs(self):
        if self.comm.rank == self.comm.size - 1:
            raise InputError("output.dir: cannot open the output files (this test's failure)")
        return super()._open_outputs()


for halo in ("blocking", "nonblocking", "overlap"):
    c = make_case({"name": halo, "grid": {"nx": 12, "ny": 16}, "run": {"steps": 4}, "backend": {"name": "numpy"},
                   "parallel": {"halo": halo}, "output": {"dir": str(root / halo), "vtk": False}})
    try:
        FailsToOpen(c, comm, Options(ceiling=False, quiet=True)).execute()
    except InputError as exc:
        assert "this test's failure" in str(exc), exc
        if comm.rank == 0:
            print(f"ok {halo}", flush=True)
