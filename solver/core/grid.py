"""Where the points of a field lie: global indices and positions of every element of a padded array.

A field of shape (R, C) whose owned points (a block's rows [r0, r1) and columns [c0, c1)) sit at local
rows [R0, R1) and columns [C0, C1) (one ghost layer: R0 = C0 = 1; deep halos and multigrid fields have
more) holds global row r0 + i - R0 at local row i. Outside the domain an index is wrapped along a periodic
axis and clamped to the first or last point along the others (a ghost point beyond a wall takes the
nearest point's data: coefficient fields extend to the wall that way). Data defined by position (sources,
materials) are evaluated at these indices, so every rank count, halo depth and tile sees the same values.
"""

from __future__ import annotations

import numpy as np

from .boundary import geometry, indices, offsets, periodic_axes


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
