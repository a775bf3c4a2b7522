"""Heat sources: q(x, y, t) = the sum of physics.source's terms active at t (solver.case).

Each term is a function of position (constant, gaussian, rectangle, file) with a window `active: [t0, t1]`
(on for t0 <= t < t1; none: always on), so between two window edges q is one field.

Which q a step uses (`step_weights`, the same for every scheme): the exact integral of the terms over the
step divided by its length, so each term weighs the fraction of the step it is on (1 inside its window, 0
outside, the covered fraction for the step a window edge falls in). Window edges compare with the step's
boundaries to their rounding (solver.core.events.close): a window opening at 0.05 with dt = 0.05 / 19 is on
from step 19 exactly. The delivered energy is then the window's to rounding, and every scheme keeps its order
across a window's edges (explicit and backward Euler 1, Crank-Nicolson 2: the trapezoidal rule of a q that
is constant between the edges is its exact mean). A run's weights change only at the steps next to an edge
(solver.core.events.Plan.changes: the loop stops there); adaptive steps land on the edges, so their weights
are 0 or 1. Laplace (steady state) takes every term (windows are refused there).
"""

from __future__ import annotations

import numpy as np

from . import datafile
from .grid import positions


def active(case, t: float) -> tuple[int, ...]:
    """The indices of the terms on at time t."""
    return tuple(k for k, term in enumerate(case.physics.source)
                 if term.active is None or term.active[0] <= t < term.active[1])


def every_term(case) -> tuple[int, ...]:
    return tuple(range(len(case.physics.source)))


def every_weight(case) -> tuple[tuple[int, float], ...]:
    """(term, 1) for every term (laplace: no time, every term on)."""
    return tuple((k, 1.0) for k in every_term(case))


def q_at(case, terms: tuple[int, ...], rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """q (float64) at global rows x cols from the terms `terms` (indices into physics.source), summed in order."""
    out = np.zeros((len(rows), len(cols)))
    y, x = positions(case, rows, cols)
    for k in terms:
        out += _term(case, k, rows, cols, x, y)
    return out


def _term(case, k: int, rows, cols, x, y) -> np.ndarray:
    """Term k at the points: the material form's deposited power density over C0 (solver.core.medium), the diffusivity
    form's heating rate at the points."""
    if getattr(case.physics, "material", None) is not None:
        from .medium import deposit, medium

        return deposit(case, k, rows, cols, x, y) / medium(case).c0
    t = case.physics.source[k]
    if t.kind == "constant":
        return np.full((len(rows), len(cols)), t.value)
    if t.kind == "gaussian":
        r2 = (x[None, :] - t.center[0]) ** 2 + (y[:, None] - t.center[1]) ** 2
        return t.amplitude * np.exp(-r2 / (2.0 * t.width ** 2))
    if t.kind in ("rectangle", "disk"):
        from .medium import covers_points

        return np.where(covers_points(t, x, y), t.value, 0.0)
    if t.extent is None:
        return t.scale * datafile.read(t.path, t.dataset, case.shape, f"physics.source.{k}", rows, cols)
    return t.scale * mapped(t, f"physics.source.{k}", x, y)


def mapped(t, field: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A map of any shape whose cells tile t.extent, at points (y rows, x columns): each point takes the value of
    the cell it lies in (a point on a cell edge: the cell above it; on the rectangle's far edges: the last cell);
    0 outside the rectangle."""
    values = datafile.read_map(t.path, t.dataset, field)
    (x0, y0), (x1, y1) = t.extent
    m, k = values.shape
    ci = np.floor((x - x0) / (x1 - x0) * k).astype(np.int64)
    ri = np.floor((y - y0) / (y1 - y0) * m).astype(np.int64)
    inside_x = (x >= x0) & (x <= x1)
    inside_y = (y >= y0) & (y <= y1)
    out = values[np.clip(ri, 0, m - 1)][:, np.clip(ci, 0, k - 1)]
    return np.where(inside_y[:, None] & inside_x[None, :], out, 0.0)


def step_weights(case, span) -> tuple[tuple[int, float], ...]:
    """(term, weight) of the step `span` (solver.core.events.Span): each term's share of the step, the fraction of
    [t0, t1] its window covers (module docstring); terms with no share are left out. Laplace: every term, 1."""
    if case.physics.equation != "heat":
        return every_weight(case)
    out = []
    for k, term in enumerate(case.physics.source):
        w = 1.0 if term.active is None else covered(term.active, span.t0, span.t1)
        if w > 0.0:
            out.append((k, w))
    return tuple(out)


def covered(window, t0: float, t1: float) -> float:
    """The fraction of [t0, t1] that the window [a, b) covers, window edges within rounding of t0 or t1 taken as
    on them: exactly 1 or 0 for a step wholly inside or outside."""
    from .clock import close

    a, b = (t0 if close(e, t0) else t1 if close(e, t1) else e for e in window)
    lo, hi = max(a, t0), min(b, t1)
    if hi <= lo:
        return 0.0
    if lo == t0 and hi == t1:
        return 1.0
    return (hi - lo) / (t1 - t0)


def q_weighted(case, weighted: tuple[tuple[int, float], ...], rows, cols) -> np.ndarray:
    """sum of weight x term over `weighted`, float64."""
    out = np.zeros((len(rows), len(cols)))
    y, x = positions(case, rows, cols)
    for k, w in weighted:
        part = _term(case, k, rows, cols, x, y)
        out += part if w == 1.0 else w * part
    return out
