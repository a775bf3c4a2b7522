"""How an iteration ends, decided from measured figures: the stop rules of multigrid (laplace runs and each
implicit heat step) and the words the record and the errors use for each ending.

A residual history that has stopped halving (STALL_CHECKS checks in a row without halving the best before
them) ends the iteration only for a reason the figures show:

- "floor": the residual is within FLOOR_ULPS of the dtype's rounding floor, eps x the largest value the
  residual is computed from (max |u| with the boundary values, plus max |g|). Measured on the lid, a random
  field with a fixed flux and a periodic case at 31^2 to 1023^2 in both dtypes: multigrid's residual settles
  at 2 to 6 eps x that scale (tests/test_hostile3.py), so FLOOR_ULPS = 64 leaves a margin of ten.
- "diverged": the last residual is more than DIVERGED times the best, or grew at each of the last checks: the
  cycle amplifies the error.
- "stalled": no new best in STALL_CHECKS checks, far above the floor: the cycles no longer reduce it.

A residual that still falls, however slowly, is not stopped: it runs to its bound (run.steps, or
multigrid.max_cycles for an implicit step), and the record calls a fall slower than SLOW per cycle slow.
"""

from __future__ import annotations

import numpy as np

STALL_CHECKS = 3  # checks in a row that do not halve the best residual before them: the rules below are asked
FLOOR_ULPS = 64.0  # "at the floor": residual <= FLOOR_ULPS x eps x the scale of the values it is computed from
DIVERGED = 10.0  # "diverged": the last residual above DIVERGED x the best so far
SLOW = 0.5  # a multigrid cycle that leaves more than this of the residual is slow (a working one leaves 0.1-0.2)
ENDINGS = ("floor", "diverged", "stalled", "line_search")  # stop rules besides the tolerance (and "signal", which
# pauses a run); line_search: Newton's line search found no step that lowers the residual (solver.nonlinear)


def rounding_floor(dtype, scale: float) -> float:
    """The residual a field of this dtype cannot get below, for values up to `scale` (max |u| and |g|)."""
    return FLOOR_ULPS * float(np.finfo(dtype).eps) * scale


def stalled(history: list[float]) -> bool:
    """STALL_CHECKS checks in a row without halving the best before them (the rules of `ending` apply)."""
    return (len(history) > STALL_CHECKS
            and min(history[-STALL_CHECKS:]) > 0.5 * min(history[:-STALL_CHECKS]))


def ending(history: list[float], floor) -> str | None:
    """Why a history that has `stalled` ends: "floor", "diverged", "stalled"; None while it still falls (keep
    going). `floor`: a function giving the rounding floor now (a collective reduction: asked only here)."""
    if not stalled(history):
        return None
    best, recent = min(history[:-STALL_CHECKS]), history[-STALL_CHECKS:]
    if recent[-1] <= floor():
        return "floor"
    last = history[-STALL_CHECKS - 1:]
    if recent[-1] > DIVERGED * best or all(b > a for a, b in zip(last, last[1:])):
        return "diverged"
    return "stalled" if min(recent) >= best else None


def overflow_fix(case) -> str:
    """What to do when NaN or Inf appears in the field, for the case's equation and method."""
    values = "check the initial and boundary values (sums of neighbours must fit numerics.dtype)"
    if case.physics.equation == "laplace":
        return values + (" and multigrid.smoother and omega" if case.physics.solver == "multigrid" else "")
    if case.physics.scheme != "explicit":
        return values + " and that physics.dt keeps the implicit operator in the dtype's range"
    return "reduce physics.dt or check the initial and boundary values"
