"""`stencil bench balance`: is the machine itself balanced? Per-rank speed under a launch, with no halo exchange.

    mpirun -n P stencil bench balance [--block 1024] [--steps 200] [--repeats 5] [--copy-mib 64]

Every rank runs the numba step kernel (one thread, the kernel MPI runs use) on its own block, and then a
STREAM-like copy, all ranks at once (a barrier before each repeat), with no messages between them. It
prints one line per rank (the CPUs it may run on, the CPU it ran on last, ms/step, copy GB/s: medians of
the repeats) and the spread (max / mean) of each. Equal blocks that compute at unequal speeds here, with
nothing coupling them, will show up as `wait` in a coupled run: the placement or the machine is uneven,
not the messages. The copy bandwidth is given two ways: the sum of the ranks' own rates, and the
bulk-synchronous rate (all bytes over the slowest rank's time), which is what equal blocks can reach.
Then a lockstep loop: the kernel, then an empty message to and from each row neighbour every step. The
share of time blocked there is the wait a coupled run with equal blocks pays on these cores for any
halo schedule: it comes from unequal and varying core speed, not from moving data. One process (no
launcher) measures its own speed, with nothing to wait for.
"""

from __future__ import annotations

import time

import numpy as np

W = (0.5, 0.125, 0.125)  # wc, wx, wy: a stable heat step (the values do not change the time)


def last_cpu() -> int:
    """The CPU this process ran on last (/proc/self/stat, field 39)."""
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def lockstep(world, be, ny: int, nx: int, steps: int, k: int = 1) -> tuple[float, float]:
    """(share of the time blocked, compute seconds per step) of this rank in a lockstep loop: the step
    kernel on an ny x nx block, each step followed by an empty message to and from both row neighbours
    (the coupling of a row decomposition, with no data). The time blocked there is the wait that equal
    blocks on these cores cannot avoid, whatever the halo exchange does. Collective over the mpi4py
    communicator `world` (None: one process). With k > 1 the kernel is the time-tiled one, k steps per
    sweep, and the messages follow each sweep: the coupling of deep halos."""
    u = np.random.default_rng(world.rank if world else 0).random((ny + 2, nx + 2))
    out = u.copy()
    if k > 1:
        cb = be.column_blocks(nx, k)
        kernel = lambda o, a: be.k.fused(o, a, *W, k, 1, cb)  # noqa: E731
        steps = max(1, steps // k)
    else:
        kernel = lambda o, a: be.k.step(o, a, *W, 1, ny + 1, 1, nx + 1)  # noqa: E731
    kernel(out, u)
    couple = _neighbours(world)
    if world:
        world.Barrier()
    busy = blocked = 0.0
    t0 = time.perf_counter()
    for _ in range(steps):
        t = time.perf_counter()
        kernel(out, u)
        t1 = time.perf_counter()
        couple()
        t2 = time.perf_counter()
        busy, blocked = busy + t1 - t, blocked + t2 - t1
        out, u = u, out
    return blocked / (time.perf_counter() - t0), busy / (steps * k)


def _neighbours(world):
    """An empty message to and from each row neighbour (nothing with one process)."""
    if world is None:
        return lambda: None
    from mpi4py import MPI

    empty = np.empty(0)
    up = world.rank + 1 if world.rank + 1 < world.size else MPI.PROC_NULL
    down = world.rank - 1 if world.rank > 0 else MPI.PROC_NULL

    def couple() -> None:
        world.Sendrecv(empty, dest=up, recvbuf=empty, source=down)
        world.Sendrecv(empty, dest=down, recvbuf=empty, source=up)

    return couple


def balance_bench(world, block: int = 1024, steps: int = 200, repeats: int = 5, copy_mib: int = 64) -> dict | None:
    """Every rank's uncoupled kernel and copy speed, then the lockstep wait (collective); the rows on rank 0."""
    from ..backends.numba_backend import NumbaBackend
    from ..case import BackendSettings
    from ..core.machine import affinity

    be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
    n = block
    u = np.random.default_rng(world.rank if world else 0).random((n + 2, n + 2))
    out = u.copy()
    be.k.step(out, u, *W, 1, n + 1, 1, n + 1)
    a = np.random.default_rng(0).random(copy_mib << 17)
    b = np.empty_like(a)
    be.k.copy(b, a, 1.0)
    barrier = world.Barrier if world else (lambda: None)
    step_t, copy_t = [], []
    for _ in range(repeats):
        barrier()
        t = time.perf_counter()
        for _ in range(steps // 2):
            be.k.step(out, u, *W, 1, n + 1, 1, n + 1)
            be.k.step(u, out, *W, 1, n + 1, 1, n + 1)
        step_t.append((time.perf_counter() - t) / (2 * (steps // 2)))
        barrier()
        t = time.perf_counter()
        be.k.copy(b, a, 1.0)
        copy_t.append(time.perf_counter() - t)
    wait, locked = lockstep(world, be, n, n, steps)
    mine = {"rank": world.rank if world else 0, "cpus": affinity(), "ran_on": last_cpu(),
            "step_s": float(np.median(step_t)), "copy_gbs": 2 * a.nbytes / float(np.median(copy_t)) / 1e9,
            "copy_s": copy_t, "lockstep_wait": wait, "lockstep_step_s": locked}
    rows = world.gather(mine, root=0) if world else [mine]
    if rows is None:
        return None
    return {"ranks": len(rows), "block": n, "steps": steps, "repeats": repeats, "copy_bytes": 2 * a.nbytes,
            "rows": rows}


def report_lines(res: dict) -> list[str]:
    rows, n = res["rows"], res["block"]
    out = [f"P={res['ranks']} block {n}x{n} float64, {res['steps']} steps x {res['repeats']} repeats, "
           f"copy {res['copy_bytes'] // 2 >> 20} MiB",
           "rank  cpus          ran-on  ms/step  copy GB/s  lockstep: ms/step  wait"]
    out += [f"{r['rank']:4d}  {r['cpus']:12s}  {r['ran_on']:6d}  {r['step_s'] * 1e3:7.3f}  {r['copy_gbs']:9.2f}  "
            f"{r['lockstep_step_s'] * 1e3:17.3f}  {r['lockstep_wait']:5.1%}" for r in rows]
    st = np.array([r["step_s"] for r in rows])
    cg = np.array([r["copy_gbs"] for r in rows])
    per_repeat = np.array([r["copy_s"] for r in rows])  # ranks x repeats
    sync = np.median(len(rows) * res["copy_bytes"] / per_repeat.max(axis=0)) / 1e9
    waits = np.array([r["lockstep_wait"] for r in rows])
    out += [f"step max/mean {st.max() / st.mean():.2f}  (slowest rank {int(st.argmax())}); copy min/mean "
            f"{cg.min() / cg.mean():.2f}; stencil GB/s {16 * n * n * len(rows) / st.max() / 1e9:.1f} "
            f"(bulk-synchronous) {16 * n * n * (1 / st).sum() / 1e9:.1f} (sum)",
            f"copy GB/s: sum of rank rates {cg.sum():.1f}, bulk-synchronous {sync:.1f}",
            f"lockstep with empty neighbour messages: wait max {waits.max():.1%} mean {waits.mean():.1%}"]
    return out
