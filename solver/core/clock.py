"""Time's two plain pieces, below everything that reads time (solver.core.events plans the steps with them,
solver.core.sources weighs a step's terms with them): when two times are the same, and one step's span."""

from __future__ import annotations

from dataclasses import dataclass

ULPS = 8  # times within this many units of their last place of each other are the same time


def close(a: float, b: float) -> bool:
    """a and b are the same time to rounding (ULPS units of the last place of the larger)."""
    return abs(a - b) <= ULPS * 2.220446049250313e-16 * max(abs(a), abs(b))


@dataclass(frozen=True)
class Span:
    """The step from `step` to `step + 1`: from t0 to t1, of length dt (the case's dt for a whole step, t1 - t0
    for a shortened one)."""

    step: int
    t0: float
    t1: float
    dt: float
