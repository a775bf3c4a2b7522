"""Heat sources: q(x, y, t) = the sum of physics.source's terms active at t (solver.case).

Each term is a function of position (constant, gaussian, rectangle, file) with a window `active: [t0, t1]`
(on for t0 <= t < t1; none: always on), so between two window edges q is one field. A run keeps the field
of the terms active now and changes it at the steps where the set of active terms changes (`edges`):
the time loop stops there (solver.core.loop), so every batch of steps and every time tile sees one source.

Which t a scheme evaluates q at: explicit steps from t_n use q(t_n); backward Euler q(t_{n+1}); Crank-
Nicolson the mean of q(t_n) and q(t_{n+1}) (second order also across a window edge: the mean is what the
trapezoidal rule integrates). Laplace (steady state) takes every term (windows are refused there).
"""

from __future__ import annotations

import math

import numpy as np

from . import datafile
from .grid import positions


def active(case, t: float) -> tuple[int, ...]:
    """The indices of the terms on at time t."""
    return tuple(k for k, term in enumerate(case.physics.source)
                 if term.active is None or term.active[0] <= t < term.active[1])


def every_term(case) -> tuple[int, ...]:
    return tuple(range(len(case.physics.source)))


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


def step_terms(case, step: int, dt: float) -> tuple[int, ...]:
    """The terms the step from `step` to `step + 1` uses (explicit: those active at its start; backward Euler:
    at its end; Crank-Nicolson: the union, each weighted as step_weights says)."""
    scheme = case.physics.scheme if case.physics.equation == "heat" else None
    if scheme is None:
        return every_term(case)
    at_start, at_end = active(case, step * dt), active(case, (step + 1) * dt)
    if scheme == "explicit":
        return at_start
    if scheme == "backward-euler":
        return at_end
    return tuple(sorted(set(at_start) | set(at_end)))


def step_weights(case, step: int, dt: float) -> tuple[tuple[int, float], ...]:
    """(term, weight) of the step from `step`: 1 each, but Crank-Nicolson's 1/2 for a term on at one end only."""
    if case.physics.equation != "heat" or case.physics.scheme != "crank-nicolson":
        return tuple((k, 1.0) for k in step_terms(case, step, dt))
    a, b = set(active(case, step * dt)), set(active(case, (step + 1) * dt))
    return tuple((k, 1.0 if (k in a and k in b) else 0.5) for k in sorted(a | b))


def q_weighted(case, weighted: tuple[tuple[int, float], ...], rows, cols) -> np.ndarray:
    """sum of weight x term over `weighted`, float64."""
    out = np.zeros((len(rows), len(cols)))
    y, x = positions(case, rows, cols)
    for k, w in weighted:
        part = _term(case, k, rows, cols, x, y)
        out += part if w == 1.0 else w * part
    return out


def edges(case, dt: float, steps: int) -> list[int]:
    """The steps (0 < s < steps) after which the weighted terms of a step change: the loop stops there."""
    if not case.physics.source or case.physics.equation != "heat":
        return []
    times = sorted({t for term in case.physics.source if term.active for t in term.active})
    out = set()
    for t in times:
        s = math.floor(t / dt)  # the step whose interval holds t, and its neighbours, are where the weights may change
        for c in (s - 1, s, s + 1, s + 2):
            if 0 < c < steps and step_weights(case, c, dt) != step_weights(case, c - 1, dt):
                out.add(c)
    return sorted(out)
