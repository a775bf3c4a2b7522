"""Dynamic row balancing (`parallel.balance: dynamic`, rows decomposition, CPU backends).

Equal blocks finish together only on cores that run at equal speed. On a shared or virtualised node
they do not: on the GPU machine's 32 vCPUs, 16 ranks with no messages at all computed their equal
blocks at speeds up to 1.6x apart, and which ranks were slow changed from one run to the next
(`stencil bench balance`; BENCHMARKS.md). In a coupled run the fast ranks then wait for the slow ones at
every halo exchange, whatever the halo mode.

Every `parallel.balance_every` steps each rank's speed is measured as rows computed per second of its
own `compute` section since the last check (so messages and waits do not count), the speeds are shared
(MPI_Allgather) and smoothed over windows (SMOOTHING), and when the compute time they predict for the
current rows is more than THRESHOLD above the mean on some rank, the rows are split again in
proportion to the speeds (each rank keeps at least MIN_ROWS, none counts more than MAX_SHARE x the
median speed). The rows move in one MPI_Alltoallv of whole padded rows into the other of two field
buffers kept for the purpose (RowMover), whose ghost layers on physical sides are then filled by the
rules of the new block at the step's time (`fill`); the layout takes the new blocks, and the loop rebuilds
the halo exchanger and everything else a block carries per row (solver.run.Run.block_data: side profiles,
side files and tables in time, source and face fields, the energy balance's walls); the time this takes is
charged to `comm` and reported as `move_seconds`. Arithmetic is unchanged (each point is still computed by
the same expression from the same neighbours and the same data), so results are bitwise equal to a run with
static blocks; only who computes which row changes.

Pure functions (`split_by_speed`, `transfers`) are plain data, testable without MPI.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..core.decomp import Block

THRESHOLD = 0.05  # rebalance when max / mean compute time over the window exceeds 1 + THRESHOLD
MIN_ROWS = 2  # rows a rank keeps at least (overlap needs an interior row between two edge rows)
MAX_SHARE = 2.0  # a rank's speed counts at most this many times the median (bounds its block and memory)
SMOOTHING = 0.5  # weight of the newest window in the speeds (the rest: earlier windows), against noise


def split_by_speed(ny: int, speeds: list[float], min_rows: int = MIN_ROWS) -> list[tuple[int, int]]:
    """[r0, r1) per rank, contiguous over ny rows, sizes in proportion to `speeds`, each >= min_rows."""
    p = len(speeds)
    min_rows = min(min_rows, ny // p)
    total = float(sum(speeds))
    bounds = [0]
    acc = 0.0
    for s in speeds[:-1]:
        acc += s
        bounds.append(int(round(ny * acc / total)))
    bounds.append(ny)
    for k in range(1, p):  # forward: room for min_rows below each bound
        bounds[k] = max(bounds[k], bounds[k - 1] + min_rows)
    for k in range(p - 1, 0, -1):  # backward: room above
        bounds[k] = min(bounds[k], bounds[k + 1] - min_rows)
    return [(bounds[k], bounds[k + 1]) for k in range(p)]


def transfers(old: list[tuple[int, int]], new: list[tuple[int, int]], rank: int):
    """(send, recv): per other rank, the global rows [a, b) this rank sends it / receives from it
    (empty ranges where nothing moves); the rows it keeps appear as a transfer to itself."""
    mine_old, mine_new = old[rank], new[rank]

    def overlap(x, y):
        a, b = max(x[0], y[0]), min(x[1], y[1])
        return (a, b) if a < b else (a, a)

    return [overlap(mine_old, n) for n in new], [overlap(o, mine_new) for o in old]


def blocks_with_rows(blocks: list[Block], rows: list[tuple[int, int]]) -> list[Block]:
    return [replace(b, rows=r) for b, r in zip(blocks, rows)]


class Balancer:
    """Measures, decides and moves rows at the loop's stops. layout: the one owner of the blocks (it
    takes the new ones); mpi: the communicator; timers: (timed, warm-up) whose compute sections give
    the speed; fill(block, u, step): the ghost layer of a one-layer field of `block` on its physical sides,
    by the boundary rules at `step` (solver.run.Run.fill_edges)."""

    def __init__(self, layout, mpi, timers, every: int, fill):
        self.layout, self.mpi, self.timers, self.every, self.fill = layout, mpi, timers, every, fill
        self.mover = RowMover(layout.case.numerics.dtype)
        self.last = 0.0  # this rank's compute seconds (warm-up and timed) at the last check
        self.count = 0  # rebalances done
        self.history: list[dict] = []
        self.speeds = None  # smoothed rows per compute second, per rank
        self.seconds = 0.0  # spent moving rows (charged to comm)

    def due(self, step: int) -> bool:
        return step % self.every == 0

    def maybe(self, state, timer) -> bool:
        """Collective. True when the rows moved (state.u / u_new and layout.block are new)."""
        lay = self.layout
        compute = sum(t.seconds["compute"] for t in self.timers)
        seconds, self.last = compute - self.last, compute
        t = time.perf_counter()
        shared = self.mpi.allgather((lay.block.ny, seconds))
        t = timer.add("wait", t)
        rows = np.array([r for r, _ in shared], dtype=float)
        secs = np.array([max(s, 1e-9) for _, s in shared])
        speeds = rows / secs  # rows per compute second, this window
        self.speeds = speeds if self.speeds is None else SMOOTHING * speeds + (1 - SMOOTHING) * self.speeds
        predicted = rows / self.speeds  # compute time per window with the current rows at the smoothed speeds
        if predicted.max() / predicted.mean() <= 1 + THRESHOLD:
            return False
        old = [b.rows for b in lay.blocks]
        capped = np.minimum(self.speeds, MAX_SHARE * np.median(self.speeds))  # bounds a block (and memory)
        new = split_by_speed(lay.case.grid.ny, list(capped))
        if new == old:
            return False
        blocks = blocks_with_rows(lay.blocks, new)
        edges = lambda b, u: self.fill(b, u, state.step)  # noqa: E731
        state.u, state.u_new = self.mover.move(self.mpi, edges, state.u, old, blocks[lay.rank], new)
        lay.move(blocks)
        end = timer.add("comm", t)
        self.seconds += end - t
        self.count += 1
        self.history.append({"step": state.step, "imbalance": float(predicted.max() / predicted.mean()),
                             "rows": [b - a for a, b in new]})
        return True

    def summary(self) -> dict:
        return {"mode": "dynamic", "every": self.every, "threshold": THRESHOLD, "rebalances": self.count,
                "move_seconds": self.seconds,
                "history": self.history[-20:]}


class RowMover:
    """Two field buffers kept between moves and grown only when a block outgrows them (fresh memory
    costs page faults: about as much as the stencil steps between two checks)."""

    def __init__(self, dtype: str):
        self.dtype = dtype
        self.flat: list[np.ndarray] = []

    def move(self, mpi, fill, u: np.ndarray, old: list[tuple[int, int]], block: Block, new: list[tuple[int, int]]):
        """(u, u_new) for `block`: its owned rows gathered from the old blocks (collective), the ghost layers on
        physical edges by fill(block, array); u_new is the other buffer (the next step writes every owned point
        of it)."""
        size = block.padded[0] * block.padded[1]
        if not self.flat or self.flat[0].size < size:  # two buffers, with room to grow
            self.flat = [np.empty(int(size * 1.25), dtype=self.dtype) for _ in range(2)]
        a, b = self.flat
        spare, other = (b, a) if np.shares_memory(a, u) else (a, b)  # never write where u lives
        out = spare[:size].reshape(block.padded)
        move_rows(mpi, u, old, new, out)
        previous = other[:size].reshape(block.padded)
        return fill(block, out), fill(block, previous)


def move_rows(comm, u: np.ndarray, old: list[tuple[int, int]], new: list[tuple[int, int]], out: np.ndarray) -> None:
    """Fill the owned rows of `out` (new block, padded) from the owned rows of `u` (old block, padded)
    across ranks: one MPI_Alltoallv of whole padded rows (ghost columns included: a global row's ghosts are the
    same on every rank; the mover's fill sets them again by the new block's rules)."""
    rank, width = comm.Get_rank(), u.shape[1]
    send, recv = transfers(old, new, rank)
    (o0, _), (n0, _) = old[rank], new[rank]
    scount = [(b - a) * width for a, b in send]
    sdisp = [(a - o0) * width for a, _ in send]
    rcount = [(b - a) * width for a, b in recv]
    rdisp = [(a - n0) * width for a, _ in recv]
    sbuf = u[1:-1].reshape(-1)
    rbuf = out[1:-1].reshape(-1)
    comm.Alltoallv([sbuf, (scount, [max(d, 0) for d in sdisp])], [rbuf, (rcount, [max(d, 0) for d in rdisp])])
