"""Moving owned blocks to rank 0 in bounded slabs, and fields.h5 (the global field, any rank count).

Rank 0 never holds another rank's whole block: blocks arrive rank by rank in row slabs of at most
SLAB_BYTES (at least one row) through one receive buffer allocated per call, and each slab is written
(or compared) before the next is received. So writing a snapshot from any number of ranks needs, on
rank 0, its own block plus one slab, whatever the size of the global field.

fields.h5 (created by rank 0, appended in place and flushed after every snapshot; the one output file
not written then renamed, since rewriting a growing series at every snapshot would cost time quadratic
in the number of snapshots). Before each append rank 0 reserves the snapshot's bytes plus 1/32 of them
plus RESERVE_SLACK beyond HDF5's end of file (safeio.reserve), so a full disk is found before HDF5 writes anything and
the file stays readable with every earlier snapshot. Not covered: the process killed (SIGKILL, node
failure) in the middle of an append; SIGTERM/SIGINT are handled between steps and never interrupt one.
    /u     (snapshots, ny, nx) case dtype, chunks (1, rows of about 1 MiB, nx), shuffle + gzip (see compression)
    /step  (snapshots,) int64      /time (snapshots,) float64 (step * dt; laplace: dt = 1)
    /x (nx,) and /y (ny,) float64: the points' coordinates
    attributes: dx, dy, origin [x0, y0], lx, ly, units, dtype, layout, boundary, boundary_sides, case (resolved YAML),
    writer (how the run that last wrote to the file wrote it: see hdf5_writer)
Only interior points are stored: u[k, i, j] lies at x = origin[0] + j*dx, y = origin[1] + i*dy (origin
= (dx, dy) with Dirichlet sides, half a spacing next to Neumann and periodic sides: solver.core.boundary);
boundary_sides (JSON) gives each side's kind and value or flux.
The layout is netCDF-4 / CF as well (cf_layout): /time, /y and /x are HDF5 dimension scales attached to /u's
axes (and /time to /step's), each variable has its long_name (and units where the case names them) and /u a
_FillValue (NaN: what a point outside the domain would hold), so that netCDF readers (xarray with
engine="h5netcdf", ParaView's NetCDF reader, ncview, Panoply) open the file with its coordinates; files written
before this layout lack /x, /y and the scales, and the solver's own readers read both.
The three datasets are allocated early (each resize allocates the new snapshot's chunks), which parallel
HDF5 needs to extend them collectively (ParallelFieldFile); the streaming path writes the same bytes.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..core.decomp import Block
from ..core.errors import InputError
from .safeio import WriteFailed, replaced, reserve, writing

RESERVE_SLACK = 64 << 10  # + 1/32 of a snapshot: room for HDF5's own metadata growth (chunk index) in one append
SLAB_BYTES = 4 << 20  # the most rank 0 receives from another rank at once


def hdf5_writer(comm) -> str:
    """How this run writes fields.h5 and checkpoint.h5 (the same on every rank; no communication).

    "serial": one process. "mpio": parallel HDF5 (several ranks, h5py built with MPI): every rank writes
    its own block into the file, collectively. "streamed": several ranks without parallel HDF5 (or with
    STENCIL_HDF5_MPIO=0): blocks go to rank 0 in bounded slabs (for_each_block) and rank 0 writes them.
    """
    if comm.size == 1:
        return "serial"
    if os.environ.get("STENCIL_HDF5_MPIO", "1") != "0":
        import h5py

        if h5py.get_config().mpi:
            return "mpio"
    return "streamed"


def early_allocation():
    """A dataset-creation property list that allocates chunks when a dataset is created or extended: a
    dataset that parallel HDF5 extends must be (chunks allocated later by the ranks that touch them would
    leave the ranks with different file layouts)."""
    import h5py

    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    return dcpl


def owned(backend, u) -> np.ndarray:
    """The owned part of a padded device array, as a contiguous host array."""
    return np.ascontiguousarray(backend.to_host(u[1:-1, 1:-1]))


def slabs(b: Block, itemsize: int, limit: int | None = None) -> list[Block]:
    """Block b cut into row slabs of at most `limit` bytes (default SLAB_BYTES; at least one row each)."""
    rows = max(1, (limit or SLAB_BYTES) // max(1, b.nx * itemsize))
    r0, r1 = b.rows
    return [replace(b, rows=(r, min(r + rows, r1))) for r in range(r0, r1, rows)]


def for_each_block(comm, blocks: list[Block], mine: np.ndarray, fn, limit: int | None = None) -> None:
    """Collective: on rank 0 call fn(part, data) for every rank's block in rank order.

    Rank 0's own block comes whole; other ranks' blocks come in row slabs (`part` is the Block of the
    slab: its rows/cols are global). `data` is a reused buffer: fn must copy what it keeps. If fn raises,
    the remaining slabs are still received (no rank is left blocked in Send) and the first exception
    is raised at the end. fn None: rank 0 receives and discards (so the other ranks never wait).
    """
    if comm.rank != 0:
        b = blocks[comm.rank]
        for part in slabs(b, mine.itemsize, limit):
            comm.send_block(mine[part.rows[0] - b.rows[0]:part.rows[1] - b.rows[0]], 0)
        return
    errors: list[Exception] = []

    def call(part: Block, data: np.ndarray) -> None:
        if fn is not None and not errors:
            try:
                fn(part, data)
            except Exception as exc:  # noqa: BLE001 - re-raised below, after every slab has arrived
                errors.append(exc)

    call(blocks[0], mine)
    parts = [p for b in blocks[1:] for p in slabs(b, mine.itemsize, limit)]
    buf = np.empty(max((p.ny * p.nx for p in parts), default=0), dtype=mine.dtype)
    for p in parts:
        data = buf[:p.ny * p.nx].reshape(p.ny, p.nx)
        comm.recv_block(data, p.rank)
        call(p, data)
    if errors:
        raise errors[0]


def gather_field(comm, blocks: list[Block], mine: np.ndarray) -> np.ndarray | None:
    """The whole field on rank 0 (tests and small runs only; output streams instead)."""
    ny, nx = blocks[0].shape
    full = np.empty((ny, nx), dtype=mine.dtype) if comm.rank == 0 else None

    def put(b: Block, data: np.ndarray) -> None:
        full[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = data

    for_each_block(comm, blocks, mine, put)
    return full


def write_skeleton(path: Path, build) -> None:
    """Create the HDF5 file `path` with the structure (datasets, attributes) that build(f) makes.

    The file is built in memory and written by Python, so a full disk is a plain OSError here; HDF5
    itself only ever writes into space reserved beforehand (safeio.reserve). This matters: when one of
    HDF5's own writes fails, its library state is left broken (h5py then crashes the process when it
    cleans up), so the solver never lets HDF5 be the one to find out that the disk is full.
    """
    import io

    import h5py

    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        build(f)
    path.write_bytes(buf.getvalue())


def allocated_early(dataset) -> bool:
    import h5py

    return dataset.id.get_create_plist().get_alloc_time() == h5py.h5d.ALLOC_TIME_EARLY


def compression(writer: str) -> dict:
    """fields.h5's /u filters beside the checksum: byte shuffle + gzip level 1 (lossless; smooth fields keep
    half to two thirds of their bytes, uniform regions almost none, at about 0.1 s per 4 MB on one core).
    Not with parallel HDF5 ("mpio"), whose collective writes into compressed chunks were not tested here."""
    return {} if writer == "mpio" else {"compression": "gzip", "compression_opts": 1, "shuffle": True}


def chunk_rows(nx: int, itemsize: int) -> int:
    return max(1, (1 << 20) // (nx * itemsize))  # about 1 MiB chunks


def check_appendable(path: Path, shape: tuple[int, int], dtype, writer: str) -> None:
    """InputError unless `path` is a fields.h5 a restart can append to: readable, a (snapshots, ny, nx)
    series of this case's dtype, its step and time lists intact (checksums verified). Read-only: a
    restart checks this before it writes anything."""
    import h5py

    fix = "move it away or restart into another --output directory"
    try:
        with h5py.File(path, "r") as f:
            u = f.get("u")
            if not isinstance(u, h5py.Dataset) or u.shape[1:] != tuple(shape) or u.dtype != dtype:
                raise InputError(f"--restart: {path} does not hold a {tuple(shape)} {np.dtype(dtype)} /u series for "
                                 f"this case; {fix}")
            names = ("u", "step", "time")
            if any(not isinstance(f.get(n), h5py.Dataset) or f[n].shape[0] != u.shape[0] for n in names[1:]):
                raise InputError(f"--restart: {path} has no /step and /time of /u's length; {fix}")
            steps = f["step"][()]  # read: verifies the checksums
            f["time"][()]  # noqa: B018 - read to verify the checksums
            if len(steps) and (steps.dtype.kind not in "iu" or steps[0] < 0 or (np.diff(steps) <= 0).any()):
                raise InputError(f"--restart: {path} has a /step list that is not increasing from 0 or more: it is "
                                 f"damaged; {fix}")
            if writer == "mpio" and not all(allocated_early(f[name]) for name in names):
                raise InputError(f"--restart: {path} was written by an older stencil whose datasets parallel HDF5 "
                                 "cannot extend; continue with STENCIL_HDF5_MPIO=0 set (rank 0 writes it) or restart "
                                 "into another --output directory")
    except OSError as exc:
        raise InputError(f"--restart: {path} cannot be opened to append to it ({str(exc).splitlines()[0][:80]}); "
                         f"{fix}") from None


class FieldFile:
    """fields.h5 on rank 0: created new, or (resume_step given) continued after that step.

    writer: hdf5_writer's answer for this run, stored as the file's `writer` attribute.
    """

    def __init__(self, path: Path, case, spacing: tuple[float, float], resolved_yaml: str,
                 resume_step: int | None = None, writer: str = "serial"):
        import h5py

        self.path, self.writer, self.spacing = Path(path), writer, tuple(map(float, spacing))
        self.origin = _origin(case)
        self.shape, self.dtype = case.shape, np.dtype(case.numerics.dtype)
        with writing(self.path):
            if resume_step is not None and self.path.exists():
                self.f = self._reopen(h5py, resume_step, resolved_yaml)
            else:
                with replaced(self.path) as tmp:
                    write_skeleton(tmp, lambda f: self._create(f, case, spacing, resolved_yaml))
                self.f = h5py.File(self.path, "r+")
        self.u, self.step, self.time = self.f["u"], self.f["step"], self.f["time"]

    def _create(self, f, case, spacing, resolved_yaml: str) -> None:
        ny, nx = self.shape
        f.create_dataset("u", shape=(0, ny, nx), maxshape=(None, ny, nx), dtype=self.dtype, fletcher32=True,
                         chunks=(1, min(ny, chunk_rows(nx, self.dtype.itemsize)), nx), dcpl=fill_nan(early_allocation(), self.dtype),
                         **compression(self.writer))
        f.create_dataset("step", shape=(0,), maxshape=(None,), dtype="i8", dcpl=early_allocation(), fletcher32=True)
        f.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8", dcpl=early_allocation(), fletcher32=True)
        dx, dy = spacing
        f.attrs.update({
            "dx": dx, "dy": dy, "origin": list(self.origin), "lx": case.grid.lx, "ly": case.grid.ly,
            "units": "length: case units (lx, ly); time: case units (laplace: iterations); u: case units",
            "dtype": self.dtype.name, "layout": "u[snapshot, row i at y=origin[1]+i*dy, column j at x=origin[0]+j*dx]",
            "boundary": "excluded: interior points only; kinds in boundary_sides", "case": resolved_yaml,
            "boundary_sides": _boundary_json(case), "writer": self.writer})
        f["u"].attrs["axes"] = "snapshot, y, x"
        cf_layout(f, case, self.origin, (dx, dy))

    def _reopen(self, h5py, resume_step: int, resolved_yaml: str):
        """Open an existing fields.h5 to append; drop snapshots taken after `resume_step`."""
        check_appendable(self.path, self.shape, self.dtype, self.writer)
        f = h5py.File(self.path, "r+")
        reserve(self.path, f.id.get_filesize() + len(resolved_yaml) + RESERVE_SLACK)
        keep = int(np.count_nonzero(f["step"][()] <= resume_step))
        for name in ("u", "step", "time"):
            f[name].resize(keep, axis=0)
        f.attrs["case"], f.attrs["writer"] = resolved_yaml, self.writer
        f.flush()
        return f

    @property
    def steps(self) -> list[int]:
        return [int(s) for s in self.step[()]]

    @property
    def times(self) -> list[float]:
        return [float(t) for t in self.time[()]]

    def append(self, step: int, time: float) -> int:
        """Add a snapshot slot; its values come from put(). On failure the series is cut back."""
        k = self.u.shape[0]
        ny, nx = self.shape
        with writing(self.path):
            nbytes = ny * nx * self.dtype.itemsize
            reserve(self.path, self.f.id.get_filesize() + nbytes + nbytes // 32 + RESERVE_SLACK)
            try:
                for d in (self.u, self.step, self.time):
                    d.resize(k + 1, axis=0)
                self.step[k], self.time[k] = step, time
            except (OSError, RuntimeError):
                self.rollback(k)
                raise
        return k

    def put(self, k: int, b: Block, data: np.ndarray) -> None:
        with writing(self.path):
            self.u[k, b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = data

    def commit(self) -> None:
        with writing(self.path):
            self.f.flush()

    def rollback(self, k: int) -> None:
        """Forget snapshots from k on (after a failed write), as far as the file still allows."""
        try:
            for d in (self.u, self.step, self.time):
                d.resize(k, axis=0)
            self.f.flush()
        except Exception:  # noqa: BLE001 - the write error being reported matters more
            pass

    def close(self) -> None:
        """Close, then give back the space reserved beyond HDF5's end of file: HDF5 truncates a file to
        its own end when it closes one opened read-write (it did not when it created the file)."""
        import h5py

        try:
            self.f.close()
            h5py.File(self.path, "r+").close()
        except Exception:  # noqa: BLE001 - closing after a failed write may fail again; already reported
            pass


class ParallelFieldFile:
    """fields.h5 written by every rank with parallel HDF5 (hdf5_writer "mpio"); the layout is FieldFile's.

    Set-up, on rank 0 alone (no communication: it runs inside the set-up's agree()): a FieldFile creates
    the file, or cuts its series back after the checkpoint's step when appending, as on the other paths,
    and is closed. The first snapshot opens the file on every rank (driver "mpio", collective).
    Each snapshot is collective, every rank making the same HDF5 calls in the same order:
      1. rank 0 reserves room for the snapshot on disk (safeio.reserve) and tells every rank whether it could;
      2. /u, /step and /time grow by one (datasets allocated early: the new chunks are allocated here);
      3. every rank writes step and time (the same values), then its own block of /u as a hyperslab,
         in one collective write;
      4. the file is flushed (HDF5 then cuts the file back to its end: the unused reservation goes).
    Rank 0 keeps the steps and times for the listings (fields.xdmf), so it never reads the open file alone.
    Not covered: an HDF5 call failing on some ranks only (the reservation rules out a full disk) would
    leave the others waiting inside MPI-IO until the launcher ends the job.
    """

    writer = "mpio"

    def __init__(self, path: Path, case, spacing: tuple[float, float], resolved_yaml: str, comm,
                 resume_step: int | None = None):
        self.path, self.comm, self.f = Path(path), comm, None
        self.spacing, self.origin = tuple(map(float, spacing)), _origin(case)
        self.shape, self.dtype = case.shape, np.dtype(case.numerics.dtype)
        self.steps: list[int] = []  # rank 0: what the file holds
        self.times: list[float] = []
        if comm.rank == 0:
            first = FieldFile(path, case, spacing, resolved_yaml, resume_step, writer=self.writer)
            self.steps, self.times = first.steps, first.times
            first.close()

    def write(self, step: int, time: float, block: Block, data: np.ndarray) -> None:
        """Collective: append the snapshot of `step`; `data` is this rank's owned block."""
        import h5py

        if self.f is None:
            with writing(self.path):
                self.f = h5py.File(self.path, "r+", driver="mpio", comm=self.comm.mpi)
        if not self._reserved():
            return  # rank 0 raised; collective() reports its error on every rank
        u, steps, times = self.f["u"], self.f["step"], self.f["time"]
        k = u.shape[0]
        (r0, r1), (c0, c1) = block.rows, block.cols
        with writing(self.path):
            for d in (u, steps, times):
                d.resize(k + 1, axis=0)
            with steps.collective:
                steps[k] = step
            with times.collective:
                times[k] = time
            with u.collective:
                u[k, r0:r1, c0:c1] = data
            self.f.flush()
        if self.comm.rank == 0:
            self.steps.append(int(step))
            self.times.append(float(time))

    def _reserved(self) -> bool:
        """Rank 0 makes room for one more snapshot; False on the other ranks when it could not (rank 0 raises)."""
        err = None
        if self.comm.rank == 0:
            nbytes = math.prod(self.shape) * self.dtype.itemsize
            try:
                reserve(self.path, self.path.stat().st_size + nbytes + nbytes // 32 + RESERVE_SLACK)
            except OSError as exc:
                err = WriteFailed(self.path, exc)
        if self.comm.bcast(err is not None):
            if err is not None:
                raise err
            return False
        return True

    def close(self) -> None:
        """Collective: every rank holds this object and closes it, also after an agreed error."""
        if self.f is not None:
            try:
                self.f.close()
            except Exception:  # noqa: BLE001 - closing after a failed write may fail again; already reported
                pass
            self.f = None


def fill_nan(dcpl, dtype):
    """The dataset-creation list `dcpl` with NaN as the fill value (the value /u's _FillValue names)."""
    dcpl.set_fill_value(np.array(np.nan, dtype=dtype))
    return dcpl


def case_units(case) -> dict[str, str]:
    """The unit names the case gives for length, time and temperature (its `units` section where the case model has
    one), else none: plain numbers are then in the case's own units, which the file cannot name."""
    system = getattr(case, "units", None)
    if getattr(case.physics, "material", None) is None and "units" not in case.model_fields_set:
        return {}  # the diffusivity form without a units section: numbers in the case's own units
    return {k: str(getattr(system, k)) for k in ("length", "time", "temperature") if getattr(system, k, None)}


def cf_layout(f, case, origin: tuple[float, float], spacing: tuple[float, float]) -> None:
    """netCDF-4 / CF conventions over fields.h5's datasets (module docstring): the coordinates /x and /y, the
    dimension scales time, y and x attached to /u (and time to /step), long names, units where known, /u's
    _FillValue (NaN, the dataset's fill value). Called on the file being created, before any snapshot. The CF
    attributes are fixed-length ASCII strings (netCDF's NC_CHAR: readers built on netCDF-C, ParaView's among them,
    read text attributes only in that form)."""
    units = case_units(case)
    ny, nx = case.shape
    heat = case.physics.equation == "heat"
    text(f, Conventions="CF-1.8", title=f"stencil: {case.name}",
         source="stencil (solver.io.fields), a 5-point finite-difference heat solver")
    for name, n, o, h, axis in (("x", nx, origin[0], spacing[0], "X"), ("y", ny, origin[1], spacing[1], "Y")):
        d = f.create_dataset(name, data=o + h * np.arange(n, dtype=np.float64))
        d.make_scale(name)
        text(d, long_name=f"{name} of the grid points (interior points; the sides lie beyond)", axis=axis,
             **({"units": units["length"]} if "length" in units else {}))
    t = f["time"]
    t.make_scale("time")
    if heat:
        text(t, long_name="time", axis="T", standard_name="time", **({"units": units["time"]} if "time" in units else {}))
    else:
        text(t, long_name="iteration of the steady solve (laplace: no time; time = step)", units="1", axis="T")
    f["step"].dims[0].attach_scale(t)
    text(f["step"], long_name="step (laplace: Jacobi iteration or multigrid cycle) counted from the run's start")
    u = f["u"]
    for k, scale in enumerate((t, f["y"], f["x"])):
        u.dims[k].attach_scale(scale)
    u.attrs["_FillValue"] = np.array(np.nan, dtype=u.dtype)
    text(u, long_name="u, the solved field (temperature)",
         **({"units": units["temperature"]} if "temperature" in units else {}))


def text(obj, **attrs: str) -> None:
    """Text attributes as fixed-length ASCII strings (netCDF NC_CHAR), which every netCDF reader reads as text."""
    for key, value in attrs.items():
        obj.attrs[key] = np.bytes_(value.encode("ascii", "replace"))


def _origin(case) -> tuple[float, float]:
    from ..core.physics import origin

    return tuple(map(float, origin(case)))


def _boundary_json(case) -> str:
    import json

    return json.dumps(case.boundary.model_dump(mode="json"))
