"""Where a probe reads the field (solver.io.probes samples it; solver.core.inputs checks it before a run): a point
probe's bilinear stencil over the plate's grid points, a region probe's points on the plate's material."""

from __future__ import annotations

import math

import numpy as np

from .boundary import offsets
from .clock import close
from .grid import positions
from .medium import covers_points as covered
from .physics import spacing


def stencil(case, at) -> list[tuple[int, int, float]]:
    """The grid points (global row, column: -1 and n are ghost layers) and weights of a point probe's bilinear
    value, in a fixed order; a coordinate within rounding of a grid line takes that line alone. Points off the
    plate's material (a hole, a held object, outside the outline: solver.core.plate.blanked) are left out and the
    others' weights scaled to sum to 1 (empty where none is left: validation refuses such a probe)."""
    pts = _bilinear(case, at)
    off = [_off_plate(case, i, j) for i, j, _ in pts]
    if not any(off):
        return pts
    kept = [p for p, o in zip(pts, off) if not o]
    total = sum(w for *_, w in kept)
    return [(i, j, w / total) for i, j, w in kept]


def _off_plate(case, i: int, j: int) -> bool:
    """Whether grid point (i, j) (a ghost index: the nearest point) is off the plate's material."""
    from .plate import blanked

    ny, nx = case.shape
    mask = blanked(case, np.array([min(max(i, 0), ny - 1)]), np.array([min(max(j, 0), nx - 1)]))
    return mask is not None and bool(mask[0, 0])


def region_mask(case, region, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Which of the points rows x cols a region probe reads: inside the region and on the plate's material."""
    from .plate import blanked

    y, x = positions(case, rows, cols)
    mask = covered(region, x, y)
    off = blanked(case, rows, cols)
    return mask if off is None else mask & ~off


def _bilinear(case, at) -> list[tuple[int, int, float]]:
    (dx, dy) = spacing(case)
    ox, oy = offsets(case)
    per_axis = []
    for coord, h, o in ((at[1], dy, oy), (at[0], dx, ox)):
        f = coord / h - o
        k = round(f)
        if close(f, k) or abs(f - k) < 1e-12:
            per_axis.append([(k, 1.0)])
        else:
            k0 = math.floor(f)
            a = f - k0
            per_axis.append([(k0, 1.0 - a), (k0 + 1, a)])
    return [(i, j, wi * wj) for i, wi in per_axis[0] for j, wj in per_axis[1]]

