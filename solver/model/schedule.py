"""The steps of a run as the solver takes them: batches between stops, and time tiles inside batches.

Mirrors solver.core.loop (stops at check_every, the poll period, output and checkpoints, balance and the
end of the warm-up), solver.parallel.deep.DeepTiles.advance (several ranks with a deep halo: a batch
of n steps is ceil(n' / k) tiles as equal as possible, n' = n - 1 when a check follows, which takes a
plain last step) and NumbaBackend.advance (one process: tiles of k, one shorter tile, plain steps).
tests/test_model.py checks the messages per step this gives against the solver's own record.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.loop import POLL_EVERY, SERIAL_POLL_EVERY, poll_period
from .problem import Problem


@dataclass(frozen=True)
class Batch:
    start: int  # first step
    depths: tuple[int, ...]  # one entry per exchange period: k >= 2 a time tile, 1 a plain step
    check: bool  # the convergence / NaN check (a collective) at its end
    balance: bool  # a dynamic-balance stop at its end
    warm: bool  # inside the warm-up (not timed)


def poll_every(problem: Problem, tile: int, serial: bool) -> int:
    poll = poll_period(SERIAL_POLL_EVERY if serial else POLL_EVERY, problem.steps, problem.lines)
    return -(-poll // tile) * tile


def batches(problem: Problem, k: int, serial: bool, balance: bool, steps: int | None = None) -> list[Batch]:
    """The run's batches up to `steps` (default: all), each cut into tiles of up to k steps."""
    end = steps or problem.steps
    periods = [problem.check_every, poll_every(problem, k, serial), problem.output_every, problem.checkpoint_every,
               problem.balance_every if balance else None]
    out, step = [], 0
    while step < end:
        warm = step < problem.warmup
        stops = [end] + [(step // p + 1) * p for p in periods if p] + ([problem.warmup] if warm else [])
        stops += [1] if step < 1 and problem.equation == "laplace" else []  # Jacobi checks its first step (r0)
        n = min(stops) - step
        check = (step + n) % problem.check_every == 0 or step + n == end or (step + n == 1 and problem.equation == "laplace")
        cut = serial_depths if serial else deep_depths
        out.append(Batch(step, tuple(cut(n, k, check)), check,
                         balance and (step + n) % problem.balance_every == 0 and step + n != end, warm))
        step += n
    return out


def deep_depths(n: int, k: int, previous: bool) -> list[int]:
    """DeepTiles.advance: ceil(m / k) tiles as equal as possible (m = n, less a plain last step)."""
    if k <= 1:
        return [1] * n
    plain = 1 if previous else 0
    m = n - plain
    tiles = -(-m // k) if m > 0 else 0
    return [(i + 1) * m // tiles - i * m // tiles for i in range(tiles)] + [1] * plain


def serial_depths(n: int, k: int, previous: bool) -> list[int]:
    """NumbaBackend.advance: tiles of k, a shorter one (when it is 2 or more), then plain steps."""
    m = n - previous if (k > 1 and n > 1) else 0
    tiles = [k] * (m // k) + ([m % k] if m % k > 1 else [])
    return tiles + [1] * (n - sum(tiles))


def messages_per_step(problem: Problem, k: int, sides: int, steps: int | None = None) -> float:
    """Halo messages one rank with `sides` neighbours sends per step (the record's messages_per_step / ranks
    for such a rank); a grid's deep exchange is two phases, still one message per side."""
    runs = batches(problem, k, serial=False, balance=False, steps=steps)
    return sides * sum(len(b.depths) for b in runs) / (steps or problem.steps)
