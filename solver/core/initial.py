"""Initial fields, built block by block from global indices: any rank count gives the same field."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .decomp import Block
from .errors import InputError
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
        u = np.ascontiguousarray(read_field_file(init.path, init.dataset, case.shape, rows, cols),
                                 dtype=case.numerics.dtype)
        name = init.path if init.path.endswith(".npy") else f"{init.path}:{init.dataset or '/u'}"
        return _finite(u, name, rows, cols)  # also after the cast: 1e300 is inf in float32
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


def read_field_file(path: str, dataset: str | None, shape: tuple[int, int], rows: range, cols: range) -> np.ndarray:
    """Read only this block of a (ny, nx) array from .npy (memory-mapped) or HDF5, and check it: real
    numbers, and (HDF5 datasets stencil wrote) their checksums; initial_block checks that they are finite."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"initial.path: file {path} not found; give an existing .npy or .h5 file")
    if p.suffix == ".npy":
        try:
            a = np.load(p, mmap_mode="r")
        except (ValueError, EOFError, OSError) as exc:
            reason = str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__
            raise InputError(f"initial.path: {path} is not a readable .npy file ({reason}); save it with numpy.save") from None
        return _check_and_slice(a, path, shape, rows, cols)
    return _read_h5(p, dataset, shape, rows, cols)


def _read_h5(p: Path, dataset: str | None, shape, rows: range, cols: range) -> np.ndarray:
    import h5py

    try:
        f = h5py.File(p, "r")
    except OSError:
        raise InputError(f"initial.path: {p} is neither .npy nor HDF5; give a .npy or .h5 file") from None
    with f:
        if dataset is None:  # the field of a file stencil wrote: fields.h5's /u (its last snapshot), checkpoint.h5's
            if "u" not in f:
                raise InputError(f"initial.dataset: {p} has no /u; name the HDF5 dataset that holds the field, one "
                                 f"of: {_datasets(f)}")
            dataset = "/u"
        if dataset not in f or not isinstance(f[dataset], h5py.Dataset):
            raise InputError(f"initial.dataset: {dataset!r} not found in {p}; datasets there: {_datasets(f)}")
        d = f[dataset]
        try:
            if d.ndim == 3 and d.shape[1:] == shape:  # a fields.h5 time series: take the last snapshot
                if d.shape[0] == 0:
                    raise InputError(f"initial.dataset: {p}:{dataset} is a series with no snapshot; give a file "
                                     "whose run wrote at least one")
                _check_dtype(d.dtype, f"{p}:{dataset}")
                return d[-1, rows.start:rows.stop, cols.start:cols.stop]
            return _check_and_slice(d, f"{p}:{dataset}", shape, rows, cols)
        except OSError as exc:  # HDF5: a checksum (fletcher32) that does not match, a truncated file
            raise InputError(f"initial.path: {p}:{dataset} cannot be read ({str(exc).splitlines()[0][:80]}): the file "
                             "is damaged (a checksum mismatch if stencil wrote it); give an intact copy") from None


def _datasets(f) -> str:
    names: list[str] = []
    f.visititems(lambda n, o: names.append("/" + n) if hasattr(o, "shape") else None)
    return ", ".join(names) or "none"


def _check_dtype(dtype, name: str) -> None:
    if dtype.kind not in "iuf":  # complex would lose its imaginary part; bool, text, objects are no field
        raise InputError(f"initial.path: {name} holds {dtype} values; it needs real numbers (integer or float)")


def _check_and_slice(a, name: str, shape, rows: range, cols: range) -> np.ndarray:
    if tuple(a.shape) != tuple(shape):
        raise InputError(f"initial.path: {name} holds an array of shape {tuple(a.shape)} but the grid needs "
                         f"(ny, nx) = {tuple(shape)}; match grid.nx/ny to the file")
    _check_dtype(a.dtype, name)
    return np.asarray(a[rows.start:rows.stop, cols.start:cols.stop])


def _finite(block: np.ndarray, name: str, rows: range, cols: range) -> np.ndarray:
    bad = ~np.isfinite(block)
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        raise InputError(f"initial.path: {name} holds {block[i, j]} at row {rows.start + i}, column {cols.start + j}; "
                         "every value must be finite")
    return block
