"""Arrays read from files named in a case (initial fields, sources, diffusivity fields, side values): one
reader for all of them, so every one is checked alike and every error names its field and the fix.

A file is a .npy array (memory-mapped: only the part asked for is read) or an HDF5 file with `dataset`.
Values must be real numbers (integer or float) and finite; HDF5 datasets stencil wrote carry checksums,
which h5py checks as it reads. `field` is the case field that names the file ("initial", "physics.alpha",
"physics.source.0", "boundary.top.value"): messages say `<field>.path` and `<field>.dataset` (a side
value's file is its `file` key).

`named(case)` is the one list of the files a case names: a run's fingerprint hashes them (solver.io.checkpoint),
--overwrite protects them (solver.run), and `check(case)` reads each whole before a run starts or `validate`
answers (solver.core.inputs), so a file a run would refuse half-way (a source whose window opens late) is refused
before anything is written.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError  # noqa: F401 - re-exported for the readers built on this module


def read(path: str, dataset: str | None, shape: tuple[int, ...], field: str, rows=None, cols=None,
         series: bool = False, path_key: str = "path", default_dataset: str | None = None, blank=None) -> np.ndarray:
    """The values at global `rows` x `cols` (index arrays or ranges; None: all) of a file holding an array of
    `shape` ((ny, nx), or (n,) for a side: then only `rows` indexes), in float64, checked finite. series: an
    HDF5 dataset of shape (snapshots, ny, nx) (a fields.h5) gives its last snapshot (only the part asked for is
    read). default_dataset: the HDF5 dataset taken when `dataset` is None (a file stencil wrote: /u). blank: where
    the values may be NaN (a bool array of the part: points outside the plate, as a fields.h5 of a case with holes
    writes them), read as 0."""
    with opened(path, dataset, field, path_key, default_dataset) as (a, name):
        if series and not isinstance(a, np.ndarray) and a.ndim == 3 and tuple(a.shape[1:]) == tuple(shape):
            if a.shape[0] == 0:
                raise InputError(f"{field}.dataset: {name} is a series with no snapshot; give a file whose run "
                                 "wrote at least one")
            a = _Last(a)
        if tuple(a.shape) != tuple(shape):  # (a .npy is one array: a series is an HDF5 file's only)
            want = "(ny, nx) = " if len(shape) == 2 else "one value per point of the side: "
            raise InputError(f"{field}.{path_key}: {name} holds an array of shape {tuple(a.shape)} but {want}"
                             f"{tuple(shape)} is needed; match the grid to the file (or the file to the grid)")
        try:
            values = _part(a, rows, cols)
        except OSError as exc:  # HDF5: a checksum (fletcher32) that does not match, a truncated file
            raise InputError(f"{field}.{path_key}: {name} cannot be read ({str(exc).splitlines()[0][:80]}): the file "
                             "is damaged (a checksum mismatch if stencil wrote it); give an intact copy") from None
    if blank is not None:
        values = np.where(blank & np.isnan(values), 0.0, values)
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
    what = not_a_file(p)
    if what:
        raise InputError(f"{field}.{path_key}: {'file ' * (what == 'not found')}{path} {what}; give a .npy or .h5 file")
    if p.suffix == ".npy":
        try:
            a = np.load(p, mmap_mode="r")
        except (ValueError, EOFError, OSError) as exc:
            reason = str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__
            raise InputError(f"{field}.{path_key}: {path} is not a readable .npy file ({reason}); save it with "
                             "numpy.save") from None
        yield real(a, str(path), field, path_key), str(path)
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
        yield real(f[dataset], f"{p}:{dataset}", field, path_key), f"{p}:{dataset}"


KINDS = {"c": "complex numbers", "U": "text", "S": "text (bytes)", "O": "text or objects", "V": "records (a compound "
         "or structured type)", "b": "booleans", "M": "dates", "m": "time spans"}


def real(a, name: str, field: str, path_key: str):
    """`a` when its values are real numbers (integer or float): a complex array would lose its imaginary part, text
    would be parsed into numbers, records and booleans are no field; else the error says what it holds."""
    kind = a.dtype.kind
    if kind not in "iuf":
        raise InputError(f"{field}.{path_key}: {name} holds {KINDS.get(kind, 'values')} ({a.dtype}), not real numbers; "
                         "give an array of integers or floats (numpy.save of a float64 array)")
    return a


def not_a_file(p: Path) -> str | None:
    """What `p` is when it is not a regular file one can read an array from (None: it is one): not found, a
    directory, a FIFO, a device (a link to /dev/zero), a socket, a link to nothing."""
    from .readers import not_a_file as what

    return what(p)


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


@dataclass(frozen=True)
class Named:
    """A data file a case names. field: the case field ("physics.source.0"), key: the one that holds the path
    ("path"; a side value's "file"); shape: what the array must be (None: any 2-D map: a source with extent);
    series: an HDF5 series (snapshots, ny, nx) gives its last snapshot (an initial field from a fields.h5); image: a
    PNG mask."""

    field: str
    key: str
    path: str
    dataset: str | None
    shape: tuple[int, ...] | None
    series: bool = False
    image: bool = False  # a PNG (a mask drawn in a tool): read as an image (solver.core.plate), not as numbers
    blank: object = None  # (rows, cols) -> where the values may be NaN (an initial field outside the plate), or None

    @property
    def name(self) -> str:
        """The field and key as a case file writes them ("boundary.left.h.file")."""
        return f"{self.field}.{self.key}"


def named(case) -> list[Named]:
    """Every data file the case names, in the order a case file lists them (the initial field, alpha, the sources,
    the sides). A restart reads the checkpoint instead of the initial field, but its file is named all the same."""
    shape, out = tuple(case.shape), []
    init, alpha = case.initial, case.physics.alpha
    if init.kind == "file":
        out.append(Named("initial", "path", init.path, init.dataset, shape, series=True))
    if getattr(alpha, "kind", None) == "file":
        out.append(Named("physics.alpha", "path", alpha.path, alpha.dataset, shape))
    for k, term in enumerate(case.physics.source):
        if term.kind == "file":
            out.append(Named(f"physics.source.{k}", "path", term.path, term.dataset,
                             shape if term.extent is None else None))
    shapes = [(f"physics.regions.{k}", r) for k, r in enumerate(getattr(case.physics, "regions", None) or [])]
    if getattr(case.physics, "outline", None) is not None:
        shapes.append(("physics.outline", case.physics.outline))
    for field, r in shapes:
        if r.kind == "mask":
            out.append(Named(field, "path", r.path, r.dataset, None, image=r.path.lower().endswith(".png")))
    for side in ("bottom", "top", "left", "right"):
        spec = getattr(case.boundary, side)
        n = case.grid.nx if side in ("bottom", "top") else case.grid.ny
        for key in ("value", "flux", "h", "ambient"):
            v = getattr(spec, key, None)
            if hasattr(v, "file"):
                out.append(Named(f"boundary.{side}.{key}", "file", v.file, v.dataset, (n,)))
    return out


BAND = 1 << 22  # values read at once when a file is checked whole (32 MiB of float64)


def extremes(f: Named) -> tuple[float, float]:
    """(smallest, largest) value of a named file, read whole in bands of rows (every value checked real, finite,
    and the array of its shape, as every read of it is)."""
    if f.image:  # a mask drawn as an image: read (and refused if it is no image) as the solver reads it
        read_mask(f.path, f.dataset, "dark")
        return 0.0, 1.0
    if f.shape is None:  # a map with extent: any 2-D shape
        with opened(f.path, f.dataset, f.field) as (a, name):
            if a.ndim != 2 or min(a.shape) < 1:
                raise InputError(f"{f.name}: {name} holds an array of shape {tuple(a.shape)}; a map with extent is "
                                 "2-D (rows along y, columns along x)")
            shape = tuple(a.shape)
    else:
        shape = f.shape
    lo, hi = np.inf, -np.inf
    rows = max(1, BAND // shape[1]) if len(shape) == 2 else shape[0]
    for r in range(0, shape[0], rows):
        band = range(r, min(r + rows, shape[0]))
        cols = range(shape[1]) if len(shape) == 2 else None
        part = read(f.path, f.dataset, shape, f.field, band, cols, series=f.series, path_key=f.key,
                    default_dataset="/u" if f.series else None, blank=f.blank(band, cols) if f.blank else None)
        lo, hi = min(lo, float(part.min(initial=np.inf))), max(hi, float(part.max(initial=-np.inf)))
    return lo, hi


def read_mask(path: str, dataset: str | None, inside: str = "dark") -> np.ndarray:
    """A mask's pixels as 0/1 (uint8), row 0 along y0: a PNG's dark (or light) pixels, its rows drawn from the top and
    so flipped, transparent pixels outside; or a .npy / HDF5 array's non-zero values."""
    if path.lower().endswith(".png"):
        from matplotlib import image

        try:
            img = np.asarray(image.imread(path), dtype=np.float64)
        except (OSError, ValueError, SyntaxError) as exc:
            raise InputError(f"mask: {path} cannot be read as a PNG image ({str(exc)[:80]}); give a PNG, .npy or HDF5 "
                             "file") from None
        grey = img[..., :3].mean(axis=-1) if img.ndim == 3 else img
        if img.ndim == 3 and img.shape[-1] == 4:
            grey = np.where(img[..., 3] > 0.5, grey, 1.0 if inside == "dark" else 0.0)
        bits = grey < 0.5 if inside == "dark" else grey >= 0.5
        return bits[::-1].astype(np.uint8)
    return (read_map(path, dataset, "mask") != 0).astype(np.uint8)


def stamp(path: str):
    """(modification time, size) of a file, or None where it cannot be read: a cache key that changes when the
    file does (caches of what a file holds, read once per version)."""
    import os

    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size)
    except OSError:
        return None

