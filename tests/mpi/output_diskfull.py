"""Run the stencil CLI with every file this process writes limited to LIMIT bytes: a full disk, for real.

Usage: mpirun -n N python tests/mpi/output_diskfull.py LIMIT STENCIL-ARGS...
RLIMIT_FSIZE makes the kernel refuse any write past LIMIT bytes of a file with EFBIG (with SIGXFSZ
ignored), exactly where a full disk refuses with ENOSPC: in the middle of whatever is being written.
MPI is initialised before the limit is set (its shared-memory segments are files too).
"""

import resource
import signal
import sys

from mpi4py import MPI  # noqa: F401 - initialise MPI first: its shared-memory files must not be limited

limit = int(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sys.argv = ["stencil", *sys.argv[2:]]

from solver.cli import main  # noqa: E402

main()
