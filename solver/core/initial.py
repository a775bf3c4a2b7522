"""Initial fields, built block by block from global indices: any rank count gives the same field."""

from __future__ import annotations


import numpy as np

from . import datafile
from .decomp import Block
from .boundary import offsets
from .physics import eigenmode, spacing


def initial_block(case, block: Block) -> np.ndarray:
    """The owned (ny_local, nx_local) part of the initial field, in the case's dtype."""
    init = case.initial
    rows, cols = range(*block.rows), range(*block.cols)
    shape = (block.ny, block.nx)
    if init.kind == "sine":
        u = eigenmode(case, rows, cols, init.value)
    elif init.kind == "constant":
        u = np.full(shape, init.value)
    elif init.kind == "hotspot":
        u = _hotspot(case, rows, cols)
    elif init.kind == "random":
        u = _random(case, rows, cols).reshape(shape)
    else:
        outside = outside_plate(case)
        u = np.ascontiguousarray(read_field_file(init.path, init.dataset, case.shape, rows, cols,
                                                 None if outside is None else outside(rows, cols)),
                                 dtype=case.numerics.dtype)
        name = init.path if init.path.endswith(".npy") else f"{init.path}:{init.dataset or '/u'}"
        return datafile.finite(u, name, "initial", "path", rows, cols)  # also after the cast: 1e300 is inf in float32
    return np.ascontiguousarray(u, dtype=case.numerics.dtype)


def _random(case, rows: range, cols: range) -> np.ndarray:
    """Row k of cells (cell x cell points each) draws its values from the seed and k alone, so any block of
    any rank count cuts the same field; cell 1 gives every point its own value."""
    init, c = case.initial, case.initial.cell
    per_row = -(-case.grid.nx // c)
    values = {k: np.random.default_rng([init.seed, k]).uniform(init.low, init.high, per_row)
              for k in range(rows.start // c, (rows.stop - 1) // c + 1)} if len(rows) else {}
    j = np.arange(cols.start, cols.stop) // c
    return np.stack([values[i // c][j] for i in rows]) if len(rows) else np.empty((0, len(cols)))


def _hotspot(case, rows: range, cols: range) -> np.ndarray:
    init = case.initial
    (dx, dy), (ox, oy) = spacing(case), offsets(case)
    y = (np.arange(rows.start, rows.stop) + oy) * dy
    x = (np.arange(cols.start, cols.stop) + ox) * dx
    inside = (x[None, :] - init.center[0]) ** 2 + (y[:, None] - init.center[1]) ** 2 <= init.radius**2
    return np.where(inside, init.value, init.background)


def read_field_file(path: str, dataset: str | None, shape: tuple[int, int], rows: range, cols: range,
                    blank=None) -> np.ndarray:
    """This block of a (ny, nx) array from .npy (memory-mapped) or HDF5 (a fields.h5's /u: its last snapshot),
    checked by the one reader of case files (core.datafile); blank: the block's points outside the plate (NaN
    there reads as 0)."""
    return datafile.read(path, dataset, shape, "initial", rows, cols, series=True, default_dataset="/u", blank=blank)




def outside_plate(case):
    """(rows, cols) -> which of those points lie outside the plate (solver.core.plate.blanked), or None where the
    case has no holes, held objects or outline: an initial field may hold NaN there (a fields.h5 of such a case)."""
    from .medium import medium

    if not medium(case).shapes:
        return None
    from .plate import blanked

    def at(rows, cols):
        out = blanked(case, np.asarray(rows), np.asarray(cols))
        return np.zeros((len(rows), len(cols)), dtype=bool) if out is None else out

    return at
