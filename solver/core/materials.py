"""The diffusivity as a field: alpha at the grid's points, and the face coefficients the kernels read.

physics.alpha (solver.case): a number, {background, regions} (rectangles and disks, later ones
winning, each covering the grid points inside it, edges included) or a file of shape (ny, nx). In the material
form (physics.material) alpha is the normalised conductivity a = k / C0 (solver.core.medium), each point taking its
own material's.

The flux between neighbours i and i+1 (spacing h) is a_face (u[i+1] - u[i]) / h with a_face the harmonic
mean 2 a_i a_{i+1} / (a_i + a_{i+1}): each point's material reaches half-way to its neighbours, and the
flux is continuous across the interface (a 1-D layered steady state is then exactly linear in each layer).
A wall's face takes the first point's alpha (solver.core.grid: indices beyond a wall are clamped).

Face fields, on a field's padded layout: ax[i, j] is the face between (i, j) and (i, j + 1) (its east face),
ay[i, j] the face between (i, j) and (i + 1, j) (its north face): point (i, j) reads ax[i, j - 1], ax[i, j],
ay[i - 1, j], ay[i, j]. Each face is computed once from global data, so the two points that share it read
the same number (the flux leaves one and enters the other exactly).
"""

from __future__ import annotations

import functools

import numpy as np

from . import datafile
from .grid import positions, whole
from .medium import covers_points


def alpha_at(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """alpha (float64) at global rows x cols (indices within the grid): a = k / C0 in the material form."""
    if getattr(case.physics, "material", None) is not None:
        from .medium import conductivity_at

        return conductivity_at(case, rows, cols)
    a = case.physics.alpha
    if isinstance(a, float):
        return np.full((len(rows), len(cols)), a)
    if getattr(a, "kind", None) == "file":
        return datafile.read(a.path, a.dataset, case.shape, "physics.alpha", rows, cols)
    y, x = positions(case, rows, cols)
    out = np.full((len(rows), len(cols)), a.background)
    for r in a.regions:
        out[covers_points(r, x, y)] = r.value
    return out


def harmonic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """2 a b / (a + b), elementwise, float64."""
    return 2.0 * a * b / (a + b)


def faces(case, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ax, ay) for a field whose elements lie at global rows x cols (wrapped or clamped: solver.core.grid),
    each of that shape: the face east of (and north of) every element. `rows`, `cols` must continue by one
    beyond their last element (the caller gives one more index along each axis). The material form's faces take
    the materials along and across them at their true place (solver.core.plate)."""
    if getattr(case.physics, "material", None) is not None:
        from .medium import medium
        from .plate import faces as plate_faces

        c0 = medium(case).c0
        ax, ay = plate_faces(case, rows, cols)
        return ax / c0, ay / c0
    a = alpha_at(case, rows, cols)
    return harmonic(a[:-1, :-1], a[:-1, 1:]), harmonic(a[:-1, :-1], a[1:, :-1])


def alpha_range(case) -> tuple[float, float]:
    """(smallest, largest) alpha on the grid's points (a number: itself twice): the explicit stability limit uses
    the largest, the record's contrast both. A file is read once (cached); regions that cover no point do not count."""
    if getattr(case.physics, "material", None) is not None:
        return _material_range(case)
    a = case.physics.alpha
    if isinstance(a, float):
        return a, a
    if getattr(a, "kind", None) == "file":
        return _file_minmax(tuple(case.shape), a.path, a.dataset, datafile.stamp(a.path))
    rows, cols = whole(case)
    y, x = positions(case, rows, cols)
    present = [a.background] + [r.value for r in a.regions if _covers_any(r, x, y)]
    return float(min(present)), float(max(present))


def alpha_max(case) -> float:
    """The largest alpha on the grid's points (alpha_range)."""
    return alpha_range(case)[1]


def _covers_any(shape, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether a region covers any grid point (checked row band by row band: no whole-grid array)."""
    step = max(1, (1 << 22) // max(len(x), 1))
    return any(covers_points(shape, x, y[k:k + step]).any() for k in range(0, len(y), step))


def _file_stats(shape, path: str, dataset) -> tuple[float, float]:
    lo, hi = np.inf, -np.inf
    step = max(1, (1 << 22) // max(shape[1], 1))
    for r in range(0, shape[0], step):
        part = datafile.read(path, dataset, shape, "physics.alpha", range(r, min(r + step, shape[0])), range(shape[1]))
        lo, hi = min(lo, float(part.min(initial=np.inf))), max(hi, float(part.max(initial=-np.inf)))
    return lo, hi


@functools.lru_cache(maxsize=8)
def _file_minmax(shape, path: str, dataset, version) -> tuple[float, float]:
    from .errors import InputError

    lo, hi = _file_stats(shape, path, dataset)
    if lo <= 0:
        raise InputError(f"physics.alpha.path: {path} holds {lo:g}; every diffusivity must be > 0 (a material's alpha)")
    return lo, hi



def _material_range(case) -> tuple[float, float]:
    """(smallest, largest) a = k / C0 over the plate's material and the regions that hold a grid point."""
    table, p = case.material_table(), case.physics
    c0 = table[p.material][1]
    rows, cols = whole(case)
    y, x = positions(case, rows, cols)
    present = [table[p.material][0]] + [table[r.material][0] for r in p.regions
                                        if getattr(r, "material", None) is not None and _covers_any(r, x, y)]
    return float(min(present)) / c0, float(max(present)) / c0


def capacity_limit(case) -> float:
    """The largest explicit step where the heat capacity varies: every point's centre weight 1 - dt (the sum of its
    four faces' a / h^2 + beta) / c stays >= 0 (solver.core.operator), computed exactly over the grid in row bands."""
    from .boundary import geometry
    from .grid import window
    from .medium import capacity_at, medium

    (dx, dy), _ = geometry(case)
    beta = medium(case).beta
    ny, nx = case.shape
    step = max(1, (1 << 21) // max(nx, 1))
    worst = 0.0
    for r in range(0, ny, step):
        block = _Band(r, min(r + step, ny), nx)
        rows, cols = window(case, block, (block.ny + 3, nx + 3), (1, 1))
        fx, fy = faces(case, rows, cols)
        total = ((fx[1:-1, :-2] + fx[1:-1, 1:-1]) / dx**2 + (fy[:-2, 1:-1] + fy[1:-1, 1:-1]) / dy**2)[:block.ny, :nx]
        c = capacity_at(case, rows[1:block.ny + 1], cols[1:nx + 1])
        worst = max(worst, float(np.max((total + beta) / c)))
    return 1.0 / worst


class _Band:
    """Rows [r0, r1) of the whole grid, as a block (window's rows and cols)."""

    def __init__(self, r0: int, r1: int, nx: int):
        self.rows, self.cols, self.ny = (r0, r1), (0, nx), r1 - r0
