"""Under mpirun -n N: deep halos (backend.time_tile k) equal the one-process per-step run bitwise.

Usage: mpirun -n N python tests/mpi/check_deep.py OUTDIR
One launch checks many configurations: k in {1, 2, 3, 4, 8} x rows and cart x every halo mode (heat,
float64), Laplace with its collective stop, float32, and blocks thinner than k (k is then capped to the
thinnest block on every rank alike). Each run's halo messages per step must be 1/k of the per-step
run's, to within 10% (tiles are cut at the loop's stops: polls on multiples of k, the
last step before a check is a plain one). Written once, independent of comm.size
(N = 1 checks the one-process fused kernel, each configuration once: rows and cart, and the halo modes, are the
same run on one block). Exits non-zero (AssertionError, MPI abort) on a mismatch.
"""

import sys
from pathlib import Path

import numpy as np
from common import make_case, serial
from mpi4py import MPI

from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.parallel.deep import capped_depth
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
GRID = {"nx": 61, "ny": 47, "lx": 2.0}
THIN = {"nx": 3 * comm.size + 2, "ny": 3 * comm.size + 1}  # blocks of 3-4 rows (rows) and columns (cart)
references: dict = {}
per_step_messages: dict = {}
one_process_runs: set = set()  # N = 1: the configurations run (each once, whatever its grid and halo mode)


def case(label, k, **kw):
    data = {"name": label, "grid": GRID, "initial": {"kind": "random", "seed": 5},
            "boundary": {"top": 1.0, "bottom": -0.5, "left": 2.0, "right": 0.25},
            "run": {"steps": 240, "check_every": 240, "warmup": 0}, "backend": {"name": "numba", "threads": 1,
                                                                            "time_tile": k},
            "output": {"dir": str(root / f"{label}-k{k}-n{comm.size}"), "every": 120, "vtk": False}}
    return make_case(data, **kw)


def reference(c):
    """The one-process per-step field (time_tile 1), computed once per physics, grid and dtype."""
    key = (c.physics.equation, c.grid.nx, c.grid.ny, c.numerics.dtype, c.run.steps, c.run.tolerance)
    if key not in references:
        c1 = c.model_copy(deep=True)
        c1.backend.time_tile = 1
        references[key] = serial(c1)[:2] if comm.rank == 0 else None
    return references[key]


def check(label, k, **kw):
    c = case(label, k, **kw)
    if comm.size == 1:  # one block and no halo: the decomposition and halo mode change nothing, each run once
        key = (c.physics.equation, c.grid.nx, c.grid.ny, c.numerics.dtype, c.run.steps, c.run.tolerance,
               c.run.check_every, k)
        if key in one_process_runs:
            return
        one_process_runs.add(key)
    r = Run(c, comm, Options(ceiling=False, quiet=True))
    r.execute()
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    steps = comm.mpi.allgather(r.state.step)
    depth = capped_depth(k, r.blocks) if comm.size > 1 else 1
    assert getattr(r.exchange, "depth", 1) == depth, f"{label}: halo depth {r.exchange.depth}, expected {depth}"
    messages = comm.allsum(r.exchange.sent())
    key = (c.parallel.decomposition, c.grid.nx, c.grid.ny, c.run.steps)
    if depth == 1 and k == 1:
        per_step_messages[key] = messages
    ref = reference(c)
    if comm.rank == 0:
        assert len(set(steps)) == 1, f"{label}: ranks stopped at different steps {steps}"
        assert steps[0] == ref[1], f"{label}: {steps[0]} steps, one process per-step took {ref[1]}"
        diff = int(np.count_nonzero(field != ref[0]))
        assert diff == 0, f"{label} k={k}: {diff} points differ from one process per-step (max {np.abs(field - ref[0]).max()})"
        if c.run.tolerance is not None:
            assert steps[0] < c.run.steps, f"{label}: did not converge, so the collective stop was not tested"
        note = ""
        if key in per_step_messages and comm.size > 1 and c.run.tolerance is None:
            ratio = messages * depth / per_step_messages[key]
            assert 1 <= ratio < 1.1, f"{label} k={k}: {messages} messages, per-step {per_step_messages[key]}"
            note = f", messages x {depth} / per-step = {ratio:.3f}"
        print(f"ok {label} k={k} depth={depth} on {comm.size} ranks ({r.dims[0]}x{r.dims[1]}, {steps[0]} steps{note})",
              flush=True)


def check_periodic_neighbours():
    """Neighbours as the decomposition gives them, periodic in y: ranks in a ring, a rank its own
    neighbour on one process, the same neighbour on both sides on two; every mode, k in {2, 3, 4, 6}:
    the deep tiles equal per-step periodic steps bitwise (DeepTiles directly: the case model has no
    periodic sides yet)."""
    from solver.backends.numba_backend import NumbaBackend
    from solver.case import BackendSettings
    from solver.core.decomp import Block
    from solver.core.loop import LoopState
    from solver.core.physics import Weights
    from solver.core.timing import Timer
    from solver.parallel.deep import DeepTiles
    from solver.parallel.exchange import MODES

    p, r = comm.size, comm.rank
    ny, nx, w = 6 * p, 9, Weights(0.1, 0.2, 0.25)
    g = np.random.default_rng(0).random((ny + 2, nx + 2))
    g[:, 0], g[:, -1] = 1.5, -0.5
    ref, tmp = g.copy(), g.copy()
    for _ in range(12):
        ref[0, 1:-1], ref[-1, 1:-1] = ref[-2, 1:-1], ref[1, 1:-1]
        tmp[1:-1, 1:-1] = w.wc * ref[1:-1, 1:-1] + w.wx * (ref[1:-1, :-2] + ref[1:-1, 2:]) + w.wy * (ref[:-2, 1:-1] + ref[2:, 1:-1])
        ref, tmp = tmp, ref
    r0, r1 = 6 * r, 6 * r + 6
    blk = Block(shape=(ny, nx), dims=(p, 1), coords=(r, 0), rows=(r0, r1), cols=(0, nx),
                south=(r - 1) % p, north=(r + 1) % p, west=None, east=None)

    def fill(b, a, owned):
        a[:, 0], a[:, -1] = 1.5, -0.5

    for mode in MODES:
        for k in (2, 3, 4, 6):
            ex = DeepTiles(MODES[mode], blk, [blk], comm.mpi, NumbaBackend(BackendSettings(name="numba"), "float64", 1),
                           Timer(), k, fill)
            u = g[r0:r1 + 2].copy()
            s = LoopState(*ex.adopt(u, u.copy()))
            for _ in range(12 // k):
                ex.tile(s, k, w, Timer())
            ex.close()
            bad = comm.allsum(int(np.count_nonzero(s.u[1:-1, 1:-1] != ref[r0 + 1:r1 + 1, 1:-1])))
            assert bad == 0, f"periodic {mode} k={k}: {bad} points differ"
    if comm.rank == 0:
        print(f"ok periodic neighbours (a ring of {p}) for every mode, k 2-6", flush=True)


try:
    check_periodic_neighbours()
    for decomposition in ("rows", "cart"):
        for halo in ("blocking", "nonblocking", "overlap"):
            par = {"decomposition": decomposition, "halo": halo}
            for k in (1, 2, 3, 4, 8):
                check(f"heat-{decomposition}-{halo}", k, parallel=par)
            check(f"laplace-{decomposition}-{halo}", 3, parallel=par, physics={"equation": "laplace"},
                  run={"steps": 3000, "tolerance": 2e-2, "check_every": 7})
            check(f"thin-{decomposition}-{halo}", 8, parallel=par, grid=THIN, run={"steps": 60, "check_every": 13})
        check(f"f32-{decomposition}", 4, parallel={"decomposition": decomposition}, numerics={"dtype": "float32"},
              run={"steps": 50, "check_every": 10})
    if comm.rank == 0:
        print(f"ok deep halos on {comm.size} ranks", flush=True)
except Exception:
    import traceback

    traceback.print_exc()
    sys.stdout.flush()
    comm.mpi.Abort(1)
