"""Arrays read from files named in a case (initial fields, sources, diffusivity fields, side values): one
reader for all of them, so every one is checked alike and every error names its field and the fix.

A file is a .npy array (memory-mapped: only the part asked for is read) or an HDF5 file with `dataset`.
Values must be real numbers (integer or float) and finite; HDF5 datasets stencil wrote carry checksums,
which h5py checks as it reads. `field` is the case field that names the file ("initial", "physics.alpha",
"physics.source.0", "boundary.top.value"): messages say `<field>.path` and `<field>.dataset` (a side
value's file is its `file` key).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .errors import InputError  # noqa: F401 - re-exported for the readers built on this module


def read(path: str, dataset: str | None, shape: tuple[int, ...], field: str, rows=None, cols=None,
         series: bool = False, path_key: str = "path", default_dataset: str | None = None) -> np.ndarray:
    """The values at global `rows` x `cols` (index arrays or ranges; None: all) of a file holding an array of
    `shape` ((ny, nx), or (n,) for a side: then only `rows` indexes), in float64, checked finite. series: an
    HDF5 dataset of shape (snapshots, ny, nx) (a fields.h5) gives its last snapshot (only the part asked for is
    read). default_dataset: the HDF5 dataset taken when `dataset` is None (a file stencil wrote: /u)."""
    with opened(path, dataset, field, path_key, default_dataset) as (a, name):
        if series and a.ndim == 3 and tuple(a.shape[1:]) == tuple(shape):
            if a.shape[0] == 0:
                raise InputError(f"{field}.dataset: {name} is a series with no snapshot; give a file whose run "
                                 "wrote at least one")
            a = _Last(a)
        if tuple(a.shape) != tuple(shape):
            want = "(ny, nx) = " if len(shape) == 2 else "one value per point of the side: "
            raise InputError(f"{field}.{path_key}: {name} holds an array of shape {tuple(a.shape)} but {want}"
                             f"{tuple(shape)} is needed; match the grid to the file (or the file to the grid)")
        if a.dtype.kind not in "iuf":  # complex would lose its imaginary part; bool, text, objects are no field
            raise InputError(f"{field}.{path_key}: {name} holds {a.dtype} values; it needs real numbers (integer or float)")
        try:
            values = _part(a, rows, cols)
        except OSError as exc:  # HDF5: a checksum (fletcher32) that does not match, a truncated file
            raise InputError(f"{field}.{path_key}: {name} cannot be read ({str(exc).splitlines()[0][:80]}): the file "
                             "is damaged (a checksum mismatch if stencil wrote it); give an intact copy") from None
    return finite(values, name, field, path_key, rows, cols)


class _Last:
    """The last snapshot of a (snapshots, ny, nx) dataset, indexed like a (ny, nx) one: an HDF5 read takes only the
    part asked for."""

    def __init__(self, a):
        self.a, self.shape, self.dtype, self.ndim = a, tuple(a.shape[1:]), a.dtype, 2

    def __getitem__(self, key):
        return self.a[(self.a.shape[0] - 1, *key)]


@contextmanager
def opened(path: str, dataset: str | None, field: str, path_key: str = "path", default_dataset: str | None = None):
    """(the array: a memory map or an open HDF5 dataset, its name for messages)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{field}.{path_key}: file {path} not found; give an existing .npy or .h5 file")
    if p.suffix == ".npy":
        try:
            a = np.load(p, mmap_mode="r")
        except (ValueError, EOFError, OSError) as exc:
            reason = str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__
            raise InputError(f"{field}.{path_key}: {path} is not a readable .npy file ({reason}); save it with "
                             "numpy.save") from None
        yield a, str(path)
        return
    import h5py

    if dataset is None and default_dataset is None:
        raise InputError(f"{field}.dataset: {p} is not a .npy file; name the HDF5 dataset, e.g. dataset: /u")
    try:
        f = h5py.File(p, "r")
    except OSError:
        raise InputError(f"{field}.{path_key}: {p} is neither .npy nor HDF5; give a .npy or .h5 file") from None
    with f:
        if dataset is None:  # a file stencil wrote (fields.h5, checkpoint.h5): its default_dataset
            if default_dataset not in f:
                raise InputError(f"{field}.dataset: {p} has no {default_dataset}; name the HDF5 dataset that holds "
                                 f"the field, one of: {_datasets(f)}")
            dataset = default_dataset
        if dataset not in f or not isinstance(f[dataset], h5py.Dataset):
            raise InputError(f"{field}.dataset: {dataset!r} not found in {p}; datasets there: {_datasets(f)}")
        yield f[dataset], f"{p}:{dataset}"


def _part(a, rows, cols) -> np.ndarray:
    if a.ndim == 1:
        return _pick(a, rows)
    if isinstance(rows, range) and isinstance(cols, range):
        return np.asarray(a[rows.start:rows.stop, cols.start:cols.stop], dtype=np.float64)
    r = np.arange(a.shape[0]) if rows is None else np.asarray(rows)
    c = np.arange(a.shape[1]) if cols is None else np.asarray(cols)
    if len(r) == 0 or len(c) == 0:
        return np.zeros((len(r), len(c)))
    r0, r1, c0, c1 = int(r.min()), int(r.max()) + 1, int(c.min()), int(c.max()) + 1
    box = np.asarray(a[r0:r1, c0:c1], dtype=np.float64)  # HDF5 reads boxes; pick the points from it
    return box[np.ix_(r - r0, c - c0)]


def _pick(a, idx) -> np.ndarray:
    if idx is None:
        return np.asarray(a[:], dtype=np.float64)
    idx = np.asarray(idx)
    if len(idx) == 0:
        return np.zeros(0)
    lo, hi = int(idx.min()), int(idx.max()) + 1
    return np.asarray(a[lo:hi], dtype=np.float64)[idx - lo]


def _datasets(f) -> str:
    names: list[str] = []
    f.visititems(lambda n, o: names.append("/" + n) if hasattr(o, "shape") else None)
    return ", ".join(names) or "none"


def finite(values: np.ndarray, name: str, field: str, path_key: str, rows=None, cols=None) -> np.ndarray:
    """values, when every one is finite; else the error names the first that is not by its place in the file."""
    bad = ~np.isfinite(values)
    if bad.any():
        at = [int(k) for k in np.argwhere(bad)[0]]
        glob = [_global(idx, k) for idx, k in zip((rows, cols), at)]
        where = f"row {glob[0]}, column {glob[1]}" if values.ndim == 2 else f"point {glob[0]} of the side"
        raise InputError(f"{field}.{path_key}: {name} holds {values[tuple(at)]} at {where}; every value must be finite")
    return values


def _global(idx, k: int) -> int:
    """The file's index of the k-th index of `idx` (a range, an index array, or None: all)."""
    return k if idx is None else int(idx[k])


def read_map(path: str, dataset: str | None, field: str) -> np.ndarray:
    """A map with an extent (a power map of tiles): a 2-D array of any shape, rows along y, float64, checked finite."""
    with opened(path, dataset, field) as (a, name):
        if a.ndim != 2 or min(a.shape) < 1:
            raise InputError(f"{field}.path: {name} holds an array of shape {tuple(a.shape)}; a map with extent is 2-D "
                             "(rows along y, columns along x)")
        return finite(np.asarray(a[:], dtype=np.float64), name, field, "path")
