"""Moving owned blocks to rank 0 one at a time, and fields.h5 (the global field, any rank count).

Rank 0 never holds more than its own block plus one other rank's block: blocks arrive rank by
rank and are written (or compared) before the next is received.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .decomp import Block

BLOCK_TAG = 7001


def owned(backend, u) -> np.ndarray:
    """The owned part of a padded device array, as a contiguous host array."""
    return np.ascontiguousarray(backend.to_host(u[1:-1, 1:-1]))


def for_each_block(comm, blocks: list[Block], mine: np.ndarray, fn) -> None:
    """Collective: on rank 0 call fn(block, data) for every rank's block in rank order."""
    if comm.rank != 0:
        comm.mpi.Send(np.ascontiguousarray(mine), dest=0, tag=BLOCK_TAG)
        return
    fn(blocks[0], mine)
    for b in blocks[1:]:
        buf = np.empty((b.ny, b.nx), dtype=mine.dtype)
        comm.mpi.Recv(buf, source=b.rank, tag=BLOCK_TAG)
        fn(b, buf)


def gather_field(comm, blocks: list[Block], mine: np.ndarray) -> np.ndarray | None:
    """The whole field on rank 0 (tests and small runs only; output streams instead)."""
    ny, nx = blocks[0].shape
    full = np.empty((ny, nx), dtype=mine.dtype) if comm.rank == 0 else None

    def put(b: Block, data: np.ndarray) -> None:
        full[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = data

    for_each_block(comm, blocks, mine, put)
    return full


class FieldFile:
    """fields.h5: /u (snapshots, ny, nx) in the case dtype, /step, /time; written by rank 0."""

    def __init__(self, path: Path, case, spacing: tuple[float, float], resolved_yaml: str):
        import h5py

        ny, nx = case.shape
        dtype = np.dtype(case.numerics.dtype)
        rows = max(1, min(ny, (1 << 20) // (nx * dtype.itemsize)))  # about 1 MiB chunks
        self.f = h5py.File(path, "w")
        self.u = self.f.create_dataset("u", shape=(0, ny, nx), maxshape=(None, ny, nx), dtype=dtype,
                                       chunks=(1, rows, nx))
        self.step = self.f.create_dataset("step", shape=(0,), maxshape=(None,), dtype="i8")
        self.time = self.f.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8")
        dx, dy = spacing
        attrs = {"dx": dx, "dy": dy, "origin": [dx, dy], "lx": case.grid.lx, "ly": case.grid.ly,
                 "units": "length: case units (lx, ly); time: case units (laplace: iterations); u: case units",
                 "dtype": dtype.name, "layout": "u[snapshot, row i at y=(i+1)*dy, column j at x=(j+1)*dx]",
                 "boundary": "excluded: interior points only", "case": resolved_yaml}
        self.f.attrs.update(attrs)
        self.u.attrs["axes"] = "snapshot, y, x"

    def append(self, step: int, time: float) -> int:
        k = self.u.shape[0]
        self.u.resize(k + 1, axis=0)
        self.step.resize(k + 1, axis=0)
        self.time.resize(k + 1, axis=0)
        self.step[k], self.time[k] = step, time
        return k

    def put(self, k: int, b: Block, data: np.ndarray) -> None:
        self.u[k, b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = data

    def close(self) -> None:
        self.f.close()
