"""Per-rank speed under a launch, with no halo exchange: is the machine itself balanced?

    mpirun -n P python tools/cpu_probe.py [--block 1024] [--steps 200] [--repeats 5] [--copy-mib 64]

Every rank runs the numba step kernel (one thread, the kernel MPI runs use) on its own block, and then a
STREAM-like copy, all ranks at once (a barrier before each repeat), with no messages between them. It
prints one line per rank (the CPUs it may run on, the CPU it ran on last, ms/step, copy GB/s: medians of
the repeats) and the spread (max / mean) of each. Equal blocks that compute at unequal speeds here, with
nothing coupling them, will show up as `wait` in a coupled run: the placement or the machine is uneven,
not the messages. The last line gives the copy bandwidth two ways: the sum of the ranks' own rates, and
the bulk-synchronous rate (all bytes over the slowest rank's time), which is what equal blocks can reach.
Then a lockstep loop: the kernel, then an empty message to and from each row neighbour every step. The
share of time blocked there is the wait a coupled run with equal blocks pays on these cores for any
halo schedule: it comes from unequal and varying core speed, not from moving data.
"""

import argparse
import time

import numpy as np
from mpi4py import MPI

from solver.backends.numba_backend import NumbaBackend
from solver.config import BackendSettings
from solver.core.machine import affinity


def last_cpu() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def lockstep(world, be, ny: int, nx: int, steps: int, k: int = 1) -> tuple[float, float]:
    """(share of the time blocked, compute seconds per step) of this rank in a lockstep loop: the step
    kernel on an ny x nx block, each step followed by an empty message to and from both row neighbours
    (the coupling of a row decomposition, with no data). The time blocked there is the wait that equal
    blocks on these cores cannot avoid, whatever the halo exchange does. Collective. With k > 1 the
    kernel is the time-tiled one, k steps per sweep, and the messages follow each sweep: the coupling of
    deep halos, for a kernel whose speed depends on the core more than on the shared cache."""
    u = np.random.default_rng(world.rank).random((ny + 2, nx + 2))
    out = u.copy()
    wc, wx, wy = 0.5, 0.125, 0.125
    if k > 1:
        cb = be.column_blocks(nx, k)
        kernel = lambda o, a: be.k.fused(o, a, wc, wx, wy, k, 1, cb)  # noqa: E731
        steps = max(1, steps // k)
    else:
        kernel = lambda o, a: be.k.step(o, a, wc, wx, wy, 1, ny + 1, 1, nx + 1)  # noqa: E731
    kernel(out, u)
    empty = np.empty(0)
    up = world.rank + 1 if world.rank + 1 < world.size else MPI.PROC_NULL
    down = world.rank - 1 if world.rank > 0 else MPI.PROC_NULL
    world.Barrier()
    busy = blocked = 0.0
    t0 = time.perf_counter()
    for _ in range(steps):
        t = time.perf_counter()
        kernel(out, u)
        t1 = time.perf_counter()
        world.Sendrecv(empty, dest=up, recvbuf=empty, source=down)
        world.Sendrecv(empty, dest=down, recvbuf=empty, source=up)
        t2 = time.perf_counter()
        busy, blocked = busy + t1 - t, blocked + t2 - t1
        out, u = u, out
    return blocked / (time.perf_counter() - t0), busy / (steps * k)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--block", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--copy-mib", type=int, default=64)
    args = ap.parse_args()
    world = MPI.COMM_WORLD
    be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
    n = args.block
    u = np.random.default_rng(world.rank).random((n + 2, n + 2))
    out = u.copy()
    wc, wx, wy = 0.5, 0.125, 0.125
    be.k.step(out, u, wc, wx, wy, 1, n + 1, 1, n + 1)
    a = np.random.default_rng(0).random(args.copy_mib << 17)
    b = np.empty_like(a)
    be.k.copy(b, a, 1.0)
    step_t, copy_t = [], []
    for _ in range(args.repeats):
        world.Barrier()
        t = time.perf_counter()
        for _ in range(args.steps // 2):
            be.k.step(out, u, wc, wx, wy, 1, n + 1, 1, n + 1)
            be.k.step(u, out, wc, wx, wy, 1, n + 1, 1, n + 1)
        step_t.append((time.perf_counter() - t) / (2 * (args.steps // 2)))
        world.Barrier()
        t = time.perf_counter()
        be.k.copy(b, a, 1.0)
        copy_t.append(time.perf_counter() - t)
    lock = lockstep(world, be, n, n, args.steps)
    cpus = affinity()
    mine = (world.rank, cpus, last_cpu(), float(np.median(step_t)), 2 * a.nbytes / float(np.median(copy_t)),
            copy_t, lock)
    rows = world.gather(mine, root=0)
    if world.rank:
        return
    print(f"P={world.size} block {n}x{n} float64, {args.steps} steps x {args.repeats} repeats, copy {args.copy_mib} MiB")
    print("rank  cpus          ran-on  ms/step  copy GB/s  lockstep: ms/step  wait")
    for r, c, last, st, cg, _, (lw, lc) in rows:
        print(f"{r:4d}  {c:12s}  {last:6d}  {st * 1e3:7.3f}  {cg / 1e9:9.2f}  {lc * 1e3:17.3f}  {lw:5.1%}")
    st = np.array([r[3] for r in rows])
    cg = np.array([r[4] for r in rows])
    per_repeat = np.array([r[5] for r in rows])  # ranks x repeats
    sync = np.median(len(rows) * 2 * a.nbytes / per_repeat.max(axis=0)) / 1e9
    print(f"step max/mean {st.max() / st.mean():.2f}  (slowest rank {int(st.argmax())}); "
          f"copy min/mean {cg.min() / cg.mean():.2f}; stencil GB/s {16 * n * n * len(rows) / st.max() / 1e9:.1f} "
          f"(bulk-synchronous) {16 * n * n * (1 / st).sum() / 1e9:.1f} (sum)")
    print(f"copy GB/s: sum of rank rates {cg.sum() / 1e9:.1f}, bulk-synchronous {sync:.1f}")
    waits = np.array([r[6][0] for r in rows])
    print(f"lockstep with empty neighbour messages: wait max {waits.max():.1%} mean {waits.mean():.1%}")


if __name__ == "__main__":
    main()
