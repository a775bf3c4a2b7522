"""Moving owned blocks to rank 0 in bounded slabs, and fields.h5 (the global field, any rank count).

Rank 0 never holds another rank's whole block: blocks arrive rank by rank in row slabs of at most
SLAB_BYTES (at least one row) through one receive buffer allocated per call, and each slab is written
(or compared) before the next is received. So writing a snapshot from any number of ranks needs, on
rank 0, its own block plus one slab, whatever the size of the global field.

fields.h5 (created by rank 0, appended in place and flushed after every snapshot):
    /u     (snapshots, ny, nx) case dtype, chunks (1, rows of about 1 MiB, nx)
    /step  (snapshots,) int64      /time (snapshots,) float64 (step * dt; laplace: dt = 1)
    attributes: dx, dy, origin [x, y] = [dx, dy], lx, ly, units, dtype, layout, boundary, case (resolved YAML)
Only interior points are stored: u[k, i, j] lies at x = (j+1)*dx, y = (i+1)*dy.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from .decomp import Block
from .errors import InputError
from .safeio import writing

BLOCK_TAG = 7001
SLAB_BYTES = 4 << 20  # the most rank 0 receives from another rank at once


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
            comm.mpi.Send(mine[part.rows[0] - b.rows[0]:part.rows[1] - b.rows[0]], dest=0, tag=BLOCK_TAG)
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
        comm.mpi.Recv(data, source=p.rank, tag=BLOCK_TAG)
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


def chunk_rows(nx: int, itemsize: int) -> int:
    return max(1, (1 << 20) // (nx * itemsize))  # about 1 MiB chunks


class FieldFile:
    """fields.h5 on rank 0: created new, or (resume_step given) continued after that step."""

    def __init__(self, path: Path, case, spacing: tuple[float, float], resolved_yaml: str,
                 resume_step: int | None = None):
        import h5py

        self.path = Path(path)
        self.shape, self.dtype = case.shape, np.dtype(case.numerics.dtype)
        with writing(self.path):
            if resume_step is not None and self.path.exists():
                self.f = self._reopen(h5py, resume_step)
            else:
                self.f = h5py.File(self.path, "w")
                self._create(case, spacing)
            self.f.attrs["case"] = resolved_yaml
            self.f.flush()
        self.u, self.step, self.time = self.f["u"], self.f["step"], self.f["time"]

    def _create(self, case, spacing) -> None:
        ny, nx = self.shape
        self.f.create_dataset("u", shape=(0, ny, nx), maxshape=(None, ny, nx), dtype=self.dtype,
                              chunks=(1, min(ny, chunk_rows(nx, self.dtype.itemsize)), nx))
        self.f.create_dataset("step", shape=(0,), maxshape=(None,), dtype="i8")
        self.f.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8")
        dx, dy = spacing
        self.f.attrs.update({
            "dx": dx, "dy": dy, "origin": [dx, dy], "lx": case.grid.lx, "ly": case.grid.ly,
            "units": "length: case units (lx, ly); time: case units (laplace: iterations); u: case units",
            "dtype": self.dtype.name, "layout": "u[snapshot, row i at y=(i+1)*dy, column j at x=(j+1)*dx]",
            "boundary": "excluded: interior points only"})
        self.f["u"].attrs["axes"] = "snapshot, y, x"

    def _reopen(self, h5py, resume_step: int):
        """Open an existing fields.h5 to append; drop snapshots taken after `resume_step`."""
        try:
            f = h5py.File(self.path, "r+")
        except OSError as exc:
            raise InputError(f"--restart: {self.path} cannot be opened to append to it ({exc}); move it away or "
                             "restart into another --output directory") from None
        u = f.get("u")
        if u is None or u.shape[1:] != self.shape or u.dtype != self.dtype:
            f.close()
            raise InputError(f"--restart: {self.path} does not hold a {self.shape} {self.dtype} /u series for this "
                             "case; move it away or restart into another --output directory")
        keep = int(np.count_nonzero(f["step"][()] <= resume_step))
        for name in ("u", "step", "time"):
            f[name].resize(keep, axis=0)
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
        with writing(self.path):
            try:
                for d in (self.u, self.step, self.time):
                    d.resize(k + 1, axis=0)
                self.step[k], self.time[k] = step, time
            except OSError:
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
        try:
            self.f.close()
        except Exception:  # noqa: BLE001 - closing after a failed write may fail again; already reported
            pass
