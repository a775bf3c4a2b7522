"""Under mpirun -n N: after one exchange, every ghost facing a neighbour holds that neighbour's rank id
and every ghost on a physical edge still holds its sentinel. Rows and cart, every halo mode."""


import numpy as np
from common import abort_on_error
from mpi4py import MPI

from solver.backends.numpy_backend import NumpyBackend
from solver.case import BackendSettings
from solver.core.decomp import all_blocks, choose_dims
from solver.core.timing import Timer
from solver.parallel.exchange import make_exchange, strips

comm = MPI.COMM_WORLD
SENTINEL = -7.0
with abort_on_error(comm):
    for shape in ((13, 11), (7, 29)):
        for decomposition in ("rows", "cart"):
            if decomposition == "rows" and comm.size > shape[0]:
                continue
            dims = choose_dims(comm.size, shape, decomposition)
            block = all_blocks(shape, dims)[comm.rank]
            for mode in ("blocking", "nonblocking", "overlap"):
                be = NumpyBackend(BackendSettings(name="numpy"), "float64")
                u = np.full(block.padded, SENTINEL)
                u[1:-1, 1:-1] = comm.rank
                ex = make_exchange(mode, block, comm, be, Timer())
                ex.finish(ex.start(u))
                ex.close()
                for side, (_, ghost) in strips(block).items():
                    r0, r1, c0, c1 = ghost
                    n = block.neighbours[side]
                    want = SENTINEL if n is None else n
                    got = u[r0:r1, c0:c1]
                    assert np.all(got == want), f"{mode} {decomposition} {dims} rank {comm.rank} {side}: {got} != {want}"
                assert np.all(u[1:-1, 1:-1] == comm.rank), "owned points changed"
                assert u[0, 0] == u[0, -1] == u[-1, 0] == u[-1, -1] == SENTINEL, "corners are not exchanged"
    if comm.rank == 0:
        print(f"ok halos on {comm.size} ranks")
