"""The same heat update in Devito (a stencil DSL that generates C with OpenMP and MPI), for comparisons.

    python tools/devito_heat.py [--size 4096] [--steps 100] [--repeats 1] [--dtype float64]
    DEVITO_MPI=overlap mpirun -n 2 python tools/devito_heat.py ...   # Devito's MPI, halo mode overlap

    u_new = 0.1 u + 0.225 (u[x-1] + u[x+1]) + 0.225 (u[y-1] + u[y+1])   on the size x size interior

(the weights of `stencil bench`, heat at 0.9 of the stable step), Dirichlet boundary rows/columns kept
fixed (Eq on grid.interior). Devito's own temporal blocking is not in its releases (its time-tiling
pull requests were not merged), so this is its spatially blocked, vectorised and (with MPI) halo-
overlapped code. Threads: OMP_NUM_THREADS (DEVITO_LANGUAGE=openmp is set here). Prints one line per
repeat on rank 0: `devito SECONDS_PER_STEP`, timed between barriers after a warm-up apply (JIT).
"""

import argparse
import os
import time

os.environ.setdefault("DEVITO_LANGUAGE", "openmp")
os.environ.setdefault("DEVITO_LOGGING", "ERROR")

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--dtype", default="float64")
    a = ap.parse_args()
    from devito import Eq, Grid, Operator, TimeFunction

    dtype = np.dtype(a.dtype).type
    grid = Grid(shape=(a.size + 2, a.size + 2), extent=(1.0, 1.0), dtype=dtype)
    u = TimeFunction(name="u", grid=grid, space_order=2)
    x, y = grid.dimensions
    wc, wx, wy = dtype(0.1), dtype(0.225), dtype(0.225)
    expr = wc * u + wx * (u.subs(x, x - x.spacing) + u.subs(x, x + x.spacing)) \
        + wy * (u.subs(y, y - y.spacing) + u.subs(y, y + y.spacing))
    op = Operator([Eq(u.forward, expr, subdomain=grid.interior)])
    rng = np.random.default_rng(1)
    u.data[0] = rng.random((a.size + 2, a.size + 2)).astype(dtype)  # global indexing: each rank takes its part
    u.data[1] = u.data[0]
    comm = grid.distributor.comm if grid.distributor.is_parallel else None
    op.apply(time_m=0, time_M=1)  # JIT compile and first touch
    for _ in range(a.repeats):
        if comm is not None:
            comm.Barrier()
        t = time.perf_counter()
        op.apply(time_m=0, time_M=a.steps - 1)
        if comm is not None:
            comm.Barrier()
        dt = (time.perf_counter() - t) / a.steps
        if comm is None or comm.Get_rank() == 0:
            print(f"devito {dt:.6e}", flush=True)


if __name__ == "__main__":
    main()
