"""Per-rank speed under a launch, with no halo exchange: is the machine itself balanced?

    mpirun -n P python tools/cpu_probe.py [--block 1024] [--steps 200] [--repeats 5] [--copy-mib 64]

Every rank runs the numba step kernel (one thread, the kernel MPI runs use) on its own block, and then a
STREAM-like copy, all ranks at once (a barrier before each repeat), with no messages between them. It
prints one line per rank (the CPUs it may run on, the CPU it ran on last, ms/step, copy GB/s: medians of
the repeats) and the spread (max / mean) of each. Equal blocks that compute at unequal speeds here, with
nothing coupling them, will show up as `wait` in a coupled run: the placement or the machine is uneven,
not the messages. The last line gives the copy bandwidth two ways: the sum of the ranks' own rates, and
the bulk-synchronous rate (all bytes over the slowest rank's time), which is what equal blocks can reach.
"""

import argparse
import os
import time

import numpy as np
from mpi4py import MPI

from solver.backends.numba_backend import NumbaBackend
from solver.config import BackendSettings


def last_cpu() -> int:
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


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
    cpus = sorted(os.sched_getaffinity(0))
    mine = (world.rank, cpus, last_cpu(), float(np.median(step_t)), 2 * a.nbytes / float(np.median(copy_t)),
            copy_t)
    rows = world.gather(mine, root=0)
    if world.rank:
        return
    span = (lambda c: f"{c[0]}-{c[-1]}" if c == list(range(c[0], c[-1] + 1)) and len(c) > 1 else
            ",".join(map(str, c)))
    print(f"P={world.size} block {n}x{n} float64, {args.steps} steps x {args.repeats} repeats, copy {args.copy_mib} MiB")
    print("rank  cpus          ran-on  ms/step  copy GB/s")
    for r, c, last, st, cg, _ in rows:
        print(f"{r:4d}  {span(c):12s}  {last:6d}  {st * 1e3:7.3f}  {cg / 1e9:9.2f}")
    st = np.array([r[3] for r in rows])
    cg = np.array([r[4] for r in rows])
    per_repeat = np.array([r[5] for r in rows])  # ranks x repeats
    sync = np.median(len(rows) * 2 * a.nbytes / per_repeat.max(axis=0)) / 1e9
    print(f"step max/mean {st.max() / st.mean():.2f}  (slowest rank {int(st.argmax())}); "
          f"copy min/mean {cg.min() / cg.mean():.2f}; stencil GB/s {16 * n * n * len(rows) / st.max() / 1e9:.1f} "
          f"(bulk-synchronous) {16 * n * n * (1 / st).sum() / 1e9:.1f} (sum)")
    print(f"copy GB/s: sum of rank rates {cg.sum() / 1e9:.1f}, bulk-synchronous {sync:.1f}")


if __name__ == "__main__":
    main()
