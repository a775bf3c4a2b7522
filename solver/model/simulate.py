"""Ranks stepping in lockstep with their neighbours: a discrete-event simulation, every rank at once.

Each rank has a clock. Per exchange period (a plain step, or a time tile of d steps):
- it posts its receives and sends (half of the exchange's CPU cost, `comm`), at post = t + comm / 2;
- a neighbour's message arrives at max(its post, this rank's t) + the message time (inside a node:
  the measured ping-pong; between nodes: the network, its bandwidth shared by the messages that leave
  the node at once);
- overlap: the rank computes the part that needs no ghost (inner), then waits for the last arrival,
  then takes the other half of the exchange cost and computes the rest (frame); the other modes wait
  first and compute everything after;
- its compute time is the measured mean for its block and d, times this rank's next factor: the
  per-tile speeds measured on the same occupancy of the same node, replayed in order from a random start
  (so slow cores stay slow, and bursts stay bursts, as they were measured).
On a GPU with overlap the inner part runs on the device while the host stages and sends, so the
exchange's cost hides behind it (solver.parallel.gpu_exchange); the receive side's staging follows the
last arrival. At a check every rank adds the local reduction, then all wait for the last one plus one MPI_Allreduce.
With dynamic balance, at each balance stop the rows are split again in proportion to the speeds each
rank showed since the last one (smoothed as solver.parallel.balance does). Waiting is what is left:
time blocked for messages and for the slowest rank at a collective.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SMOOTHING = 0.5  # solver.parallel.balance.SMOOTHING


@dataclass
class Side:
    nb: np.ndarray  # neighbour rank per rank, -1 where none
    message: dict  # depth -> seconds per rank (its message on this side)


@dataclass
class Ranks:
    """Per-rank costs, all arrays of length P (seconds)."""

    tile: dict  # depth -> mean compute seconds of a tile of that depth (whole block)
    inner: dict  # depth -> share of the tile's compute that needs no ghost (overlap)
    factors: dict  # depth -> (P, T) speed factors, mean 1 over the measured ranks
    comm: dict  # depth -> CPU seconds of one exchange (all sides)
    check: np.ndarray  # the local reduction of a check
    sides: list[Side]
    allreduce: float
    overlap: bool
    rows: np.ndarray | None = None  # owned rows (dynamic balance), else None
    device: bool = False  # compute runs on a GPU, asynchronously: with overlap the host's exchange hides behind it


@dataclass
class Totals:
    compute: np.ndarray
    halo: np.ndarray
    wait: np.ndarray
    collective: np.ndarray
    t: np.ndarray
    parts_at_warm: dict = field(default_factory=dict)


def simulate(ranks: Ranks, batches, rng: np.random.Generator) -> dict:
    """Run the schedule; returns per-rank timed seconds and parts (after the warm-up)."""
    p = len(ranks.check)
    z = lambda: np.zeros(p)  # noqa: E731
    tot = Totals(z(), z(), z(), z(), z())
    pos = {d: rng.integers(0, f.shape[1], p) for d, f in ranks.factors.items()}
    share = np.ones(p)
    window = z()
    warm = None
    for b in batches:
        if warm is None and not b.warm:
            warm = _snapshot(tot)
        for d in b.depths:
            c = _compute(ranks, d, pos, share)
            window += c
            _period(ranks, tot, d, c)
        if b.check:
            _check(ranks, tot)
        if b.balance and ranks.rows is not None:
            share = _rebalance(share, window, ranks.rows)
            window = z()
    warm = warm or _snapshot(Totals(z(), z(), z(), z(), z()))
    return {k: getattr(tot, k) - warm[k] for k in ("t", "compute", "halo", "wait", "collective")}


def _snapshot(tot: Totals) -> dict:
    return {k: getattr(tot, k).copy() for k in ("t", "compute", "halo", "wait", "collective")}


def _compute(ranks: Ranks, d: int, pos: dict, share: np.ndarray) -> np.ndarray:
    f = ranks.factors[d]
    i = pos[d] % f.shape[1]
    pos[d] += 1
    return ranks.tile[d] * share * f[np.arange(len(i)), i]


def _period(ranks: Ranks, tot: Totals, d: int, c: np.ndarray) -> None:
    t = tot.t
    half = ranks.comm[d] / 2
    post = t + half
    arrive = post.copy()
    for s in ranks.sides:
        has = s.nb >= 0
        if has.any():
            src = np.where(has, s.nb, 0)
            when = np.maximum(post[src], t) + s.message[d]
            arrive = np.where(has, np.maximum(arrive, when), arrive)
    inner = c * ranks.inner[d] if ranks.overlap else 0.0
    tot.halo += 2 * half
    tot.compute += c
    if ranks.device and ranks.overlap:  # the GPU computes the inner part while the host stages and sends
        ready = np.maximum(t + inner, arrive + half)
        tot.wait += ready - np.maximum(t + inner, post + half)
        tot.t = ready + (c - inner)
        return
    ready = np.maximum(post + inner, arrive)
    tot.wait += ready - (post + inner)
    tot.t = ready + half + (c - inner)


def _check(ranks: Ranks, tot: Totals) -> None:
    local = tot.t + ranks.check
    done = local.max() + ranks.allreduce
    tot.collective += ranks.check + ranks.allreduce
    tot.wait += done - local - ranks.allreduce
    tot.t = np.full_like(tot.t, done)


def _rebalance(share: np.ndarray, window: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """New row shares in proportion to the speeds of the last window (rows per second), smoothed."""
    speed = share / np.maximum(window, 1e-300)
    target = speed / speed.mean()
    new = SMOOTHING * target + (1 - SMOOTHING) * share
    return new / new.mean()
