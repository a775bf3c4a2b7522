"""timings.h5: the per-rank timing rows of every run segment (a restart appends a segment).

The columns are the per-rank row of solver.core.timing.RANK_COLUMNS (the same as timings.csv), after
the segment's number and steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.timing import RANK_COLUMNS
from .fields import write_skeleton
from .safeio import replaced

TIMING_COLUMNS = (("segment", "i4"), ("first_step", "i8"), ("last_step", "i8"), *RANK_COLUMNS)
TIMING_DTYPE = np.dtype(list(TIMING_COLUMNS))


def timing_table(rows: list[dict], segment: int, first_step: int, last_step: int) -> np.ndarray:
    table = np.zeros(len(rows), dtype=TIMING_DTYPE)
    for i, row in enumerate(rows):
        full = {**row, "segment": segment, "first_step": first_step, "last_step": last_step}
        for name, kind in TIMING_COLUMNS:
            table[name][i] = str(full[name]).encode()[:int(kind[1:])] if kind.startswith("S") else full[name]
    return table


def _as_current(table: np.ndarray) -> np.ndarray:
    """A table read back, in today's columns (a file written before a column existed leaves it zero)."""
    out = np.zeros(len(table), dtype=TIMING_DTYPE)
    for name in table.dtype.names:
        if name in out.dtype.names:
            out[name] = table[name]
    return out


KEY_COLUMNS = ("segment", "first_step", "last_step")  # what appending needs of an earlier table


def read_timings(path: Path) -> np.ndarray:
    """timings.h5:/ranks in today's columns. InputError (exit 2) naming the file when it is not such a
    table: a restart appends to it, and checks it with this reader before anything is written."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            d = f.get("ranks")
            if not isinstance(d, h5py.Dataset) or d.ndim != 1 or not set(KEY_COLUMNS) <= set(d.dtype.names or ()):
                raise ValueError("no /ranks table with segment, first_step and last_step columns")
            table = _as_current(d[()])
    except (OSError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: cannot be read as the timings table a restart appends to "
                         f"({str(exc).splitlines()[0][:80]}); move it away or restart into another --output "
                         "directory") from None
    if len(table) and (table["segment"].min() < 0 or table["first_step"].min() < 0):
        raise InputError(f"{path}: its /ranks table has negative segments or steps: it is damaged; move it away "
                         "or restart into another --output directory")
    return table


def write_timings_table(path: Path, rows: list[dict], first_step: int, last_step: int,
                        keep_before: int | None) -> None:
    """timings.h5:/ranks, one row per rank and run segment (a restart appends a segment).

    keep_before: when appending from a checkpoint at that step, earlier segments that started before it
    are kept; without it the table starts afresh. Written whole to a temporary file, then renamed.
    """
    import h5py

    old = np.zeros(0, dtype=TIMING_DTYPE)
    if keep_before is not None and path.exists():
        old = read_timings(path)
        old = old[old["first_step"] < keep_before]
    segment = int(old["segment"].max()) + 1 if len(old) else 0
    table = np.concatenate([old, timing_table(rows, segment, first_step, last_step)])
    def build(f) -> None:
        d = f.create_dataset("ranks", data=table)
        d.attrs["columns"] = ("segment: 0 for the first run, +1 per restart appended; first_step/last_step: "
                              "steps of that segment; compute, comm, wait, io, other, loop, warmup: seconds "
                              "(see timings.csv and docs/timings.md for the sections); steps: timed steps")

    with replaced(path) as tmp:
        write_skeleton(tmp, build)  # small: built in memory, written by Python
