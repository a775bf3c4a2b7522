"""A restart into the directory of the run it continues: the files there that it continues, checked.

Rank 0 reads every file the run will append to or continue from during set-up's checks, before
anything is written, with the same reader that reads it later; a damaged one is refused (exit 2)
naming the file and the fix, and nothing changes. The checkpoint itself is read and checked by every
rank before this (solver.io.checkpoint.Checkpoint.open).

- fields.h5: the snapshot series appended to (fields.check_appendable: shape, dtype, checksums, steps);
- u.pvd: the VTK series listing continued, when the run writes VTK (vtk.read_pvd);
- timings.h5: the earlier segments kept (timings.read_timings).
(That `vtk` is a folder is checked for every run that writes VTK, fresh or continued: vtk.check_folder.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import vtk
from .fields import check_appendable
from .timings import read_timings


def check_continued(d: Path, case, writer: str, vtk_on: bool) -> None:
    """Rank 0, read-only: InputError (exit 2) unless every file the appending run continues in `d` reads."""
    if (d / "fields.h5").exists():
        check_appendable(d / "fields.h5", case.shape, np.dtype(case.numerics.dtype), writer)
    if vtk_on and (d / vtk.PVD).exists():
        vtk.read_pvd(d / vtk.PVD)
    if (d / "timings.h5").exists():
        read_timings(d / "timings.h5")
