"""Crank-Nicolson's ringing: where a case asks for it, and what `stencil validate` and `stencil run` say.

Crank-Nicolson multiplies a mode of eigenvalue lambda by (1 - z/2) / (1 + z/2) a step, z = dt alpha lambda. The
sharpest mode of the 5-point operator has z = 2 r, r = dt over the explicit stability limit, so its multiplier is
(1 - r) / (1 + r): negative past the limit and near -1 far past it. A smooth field has no such mode to speak of
and Crank-Nicolson keeps its second order; a field with a step (a hot disc, cells of a mosaic, a level that differs
from a Dirichlet side's value) holds them all, and they flip sign each step instead of decaying: the field rings,
overshooting what it started from and what the sides hold (a violation of the maximum principle the heat equation
keeps). Measured (2-core VM, 2026-12-05; 63^2 and 127^2, zero Dirichlet sides, 20 steps, the largest overshoot
beyond the initial field's and the sides' range, over the range): none up to r = 5 for every field; from r = 6 a
level against its sides 4.1% and mosaic cells of 8 points 2.1-3.9%, at r = 10 25% and 13-24%, at r = 100 82% and
65%; a smooth sine mode none up to r = 1000. Backward Euler keeps the maximum principle at every dt.
"""

from __future__ import annotations

import numpy as np

ONSET = 5.0  # dt over the explicit limit from which Crank-Nicolson's overshoots on a step were measured (above)
SHARP = 0.1  # a difference between neighbouring points above this fraction of the field's range is a sharp feature
SLAB_ROWS = 256  # rows of the initial field built at a time (the field is never whole in memory)


def sharpest_jump(case) -> float:
    """The largest difference between neighbouring points of the initial field, or between a Dirichlet side's value
    (a number) and the points next to it, over the range of the field and those values (0 where it is uniform)."""
    from .boundary import AXIS_SIDES
    from .decomp import Block
    from .initial import initial_block

    ny, nx = case.shape
    sides = {s: getattr(case.boundary, s) for s in (*AXIS_SIDES["x"], *AXIS_SIDES["y"])}
    walls = {s: float(v.value) for s, v in sides.items() if v.kind == "dirichlet" and isinstance(v.value, float)}
    lo = hi = None
    jump, above = 0.0, None
    for r0 in range(0, ny, SLAB_ROWS):
        block = Block(case.shape, (1, 1), (0, 0), (r0, min(r0 + SLAB_ROWS, ny)), (0, nx), None, None, None, None)
        u = initial_block(case, block).astype(np.float64)
        if above is not None:
            u = np.vstack([above, u])
        jump = max(jump, _largest(np.abs(np.diff(u, axis=0))), _largest(np.abs(np.diff(u, axis=1))))
        for side, value in walls.items():
            edge = {"left": u[:, 0], "right": u[:, -1], "bottom": u[0] if r0 == 0 else None,
                    "top": u[-1] if r0 + SLAB_ROWS >= ny else None}[side]
            if edge is not None:
                jump = max(jump, _largest(np.abs(edge - value)))
        lo = min(float(u.min()), lo) if lo is not None else float(u.min())
        hi = max(float(u.max()), hi) if hi is not None else float(u.max())
        above = u[-1:]
    lo, hi = min([lo, *walls.values()]), max([hi, *walls.values()])
    return jump / (hi - lo) if hi > lo else 0.0


def _largest(a: np.ndarray) -> float:
    return float(a.max()) if a.size else 0.0


def warning(case) -> str | None:
    """What validate and run say where Crank-Nicolson meets a dt past ONSET x the explicit limit on a field with a
    sharp feature (sharpest_jump above SHARP), naming backward Euler; None otherwise (the field is built only then)."""
    from .physics import stable_dt, time_step

    if case.physics.equation != "heat" or case.physics.scheme != "crank-nicolson":
        return None
    dt, limit = time_step(case), stable_dt(case)
    r = dt / limit
    if r <= ONSET:
        return None
    jump = sharpest_jump(case)
    if jump <= SHARP:
        return None
    return (f"warning: physics.scheme: crank-nicolson at dt = {dt:.4g}, {r:.3g} x the explicit stability limit "
            f"{limit:.4g}, on an initial field with sharp features (neighbouring points differ by up to {jump:.0%} of "
            f"its range): Crank-Nicolson multiplies its sharpest modes by (1 - r)/(1 + r) = {(1 - r) / (1 + r):.3f} a "
            "step, so they ring instead of smoothing (overshoots of 2-4% of the range measured at 6x the limit, "
            "13-25% at 10x, 65-82% at 100x); use physics.scheme: backward-euler (first order in time, no overshoot "
            f"at any dt) or physics.dt at most {ONSET:g} x the limit ({ONSET * limit:.4g})")
