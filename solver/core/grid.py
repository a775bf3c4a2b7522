"""Where the points of a field lie: the grid's spacing and origin from its side kinds, and global indices and
positions of every element of a padded array.

Along an axis of n points and length L: the wall lies one spacing outside the first (last) point on a Dirichlet side
and half a spacing outside on a Neumann or convective side; a periodic axis has a period of n points (n spacings). So
h = L / (n - 1 + o_lo + o_hi) with o = 1 (Dirichlet) or 1/2 (the others), and point j lies at (o_lo + j) h
(solver.core.boundary: what each kind does at its wall).

A field of shape (R, C) whose owned points (a block's rows [r0, r1) and columns [c0, c1)) sit at local
rows [R0, R1) and columns [C0, C1) (one ghost layer: R0 = C0 = 1; deep halos and multigrid fields have
more) holds global row r0 + i - R0 at local row i. Outside the domain an index is wrapped along a periodic
axis and clamped to the first or last point along the others (a ghost point beyond a wall takes the
nearest point's data: coefficient fields extend to the wall that way). Data defined by position (sources,
materials) are evaluated at these indices, so every rank count, halo depth and tile sees the same values.
"""

from __future__ import annotations

import numpy as np

SIDES = ("bottom", "top", "left", "right")  # fill order: y sides, then x sides
AXIS_SIDES = {"x": ("left", "right"), "y": ("bottom", "top")}
OFFSET = {"dirichlet": 1.0, "neumann": 0.5, "periodic": 0.5, "convective": 0.5}  # wall distance of the first point, in spacings


def kinds(case) -> dict[str, str]:
    return {side: getattr(case.boundary, side).kind for side in SIDES}


def periodic_axes(case) -> tuple[bool, bool]:
    """(y periodic, x periodic), in the (py, px) order of the process grid."""
    k = kinds(case)
    return k["bottom"] == "periodic", k["left"] == "periodic"


def spans(kinds_lo_hi: tuple[str, str], n: int) -> float:
    """Domain length along an axis of n points, in spacings: n - 1 + o_lo + o_hi."""
    return n - 1 + OFFSET[kinds_lo_hi[0]] + OFFSET[kinds_lo_hi[1]]


def axis_spacing(lo: str, hi: str, n: int, length: float) -> tuple[float, float]:
    """(h, position of point 0) along one axis with side kinds lo, hi."""
    h = length / spans((lo, hi), n)
    return h, OFFSET[lo] * h


def offsets(case) -> tuple[float, float]:
    """(ox, oy): point j lies at (j + o) h (1 next to a Dirichlet wall, 1/2 otherwise)."""
    k = kinds(case)
    return OFFSET[k["left"]], OFFSET[k["bottom"]]


def geometry(case) -> tuple[tuple[float, float], tuple[float, float]]:
    """((dx, dy), (x0, y0)): the spacing, and the position of the first interior point (the origin of output)."""
    k, g = kinds(case), case.grid
    dx, x0 = axis_spacing(k["left"], k["right"], g.nx, g.lx)
    dy, y0 = axis_spacing(k["bottom"], k["top"], g.ny, g.ly)
    return (dx, dy), (x0, y0)


def indices(start: int, origin: int, length: int, n: int, periodic: bool) -> np.ndarray:
    """Global indices of `length` consecutive local elements along an axis of n points, local `origin` holding
    global `start`: wrapped along a periodic axis, clamped to the first or last point beyond a wall."""
    g = start - origin + np.arange(length)
    return np.mod(g, n) if periodic else np.clip(g, 0, n - 1)





def window(case, block, shape: tuple[int, int], owned: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(global rows, global columns) of every element of a (R, C) field whose owned block starts at local
    (R0, C0) = owned (wrapped or clamped beyond the domain: module docstring)."""
    py, px = periodic_axes(case)
    ny, nx = case.shape
    return (indices(block.rows[0], owned[0], shape[0], ny, py), indices(block.cols[0], owned[1], shape[1], nx, px))


def positions(case, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(y of each row, x of each column) of global indices: point j lies at (j + o) h (solver.core.boundary)."""
    (dx, dy), _ = geometry(case)
    ox, oy = offsets(case)
    return (rows + oy) * dy, (cols + ox) * dx


def whole(case) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the whole interior field."""
    ny, nx = case.shape
    return np.arange(ny), np.arange(nx)


def take(array, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """array[rows][:, cols] for a numpy array, a memory map or an HDF5 dataset (read as the bounding box of
    the indices, then picked), in float64."""
    if len(rows) == 0 or len(cols) == 0:
        return np.zeros((len(rows), len(cols)))
    r0, r1, c0, c1 = int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1
    box = np.asarray(array[r0:r1, c0:c1], dtype=np.float64)
    return box[np.ix_(rows - r0, cols - c0)]
