"""Side values that vary: a Dirichlet value, a Neumann flux, a convective h and ambient, as a number, a table
in time, a profile along the side or a file of one value per point (solver.case), evaluated at a
time and at the points of a side.

Positions along a side: x (case units) of the columns on the bottom and top sides, y of the rows on the left
and right ones; a file gives the value of each point in order (nx values on bottom/top, ny on left/right).
A table in time is linear between its points and held before the first and after the last (numpy.interp);
so is a profile along the side. Beyond the domain (ghost corners, a deep ghost layer's ends) a point takes
the value of the nearest point of the side (solver.core.grid clamps the index).
"""

from __future__ import annotations

import numpy as np

from . import datafile
from .errors import InputError

Y_SIDES = ("bottom", "top")  # rows: their points run along x


def value_at(spec, side: str, key: str, t: float, along: np.ndarray, s: np.ndarray, n: int) -> float | np.ndarray:
    """The side value `key` of `spec` (a side of case.boundary) at time t: a number when it does not vary along
    the side, else an array over the global point indices `along` of the side's n points (columns on y sides,
    rows on x sides), which lie at positions s (case units)."""
    v = getattr(spec, key)
    if isinstance(v, float):
        return v
    if hasattr(v, "time"):
        table = np.asarray(v.time, dtype=np.float64)
        return float(np.interp(t, table[:, 0], table[:, 1]))
    if hasattr(v, "along"):
        table = np.asarray(v.along, dtype=np.float64)
        return np.interp(s, table[:, 0], table[:, 1])
    values = datafile.read(v.file, v.dataset, (n,), f"boundary.{side}.{key}", along, path_key="file")
    if key == "h" and (values < 0).any():
        raise InputError(f"boundary.{side}.h.file: {v.file} holds {values.min():g}; a transfer coefficient "
                                  "is >= 0 (0 = insulated)")
    return values


def varies_in_time(case) -> bool:
    """Some side value is a table in time: ghost values change every step (time tiles cannot keep them)."""
    return any(hasattr(getattr(getattr(case.boundary, s), k, None), "time") for s in ("bottom", "top", "left", "right")
               for k in ("value", "flux", "h", "ambient"))


def varies_along(case) -> bool:
    return any(hasattr(v, "along") or hasattr(v, "file") for s in ("bottom", "top", "left", "right")
               for k in ("value", "flux", "h", "ambient") if (v := getattr(getattr(case.boundary, s), k, None)) is not None)


def convective_terms(h, ambient, spacing: float):
    """(gain a, value b) of a convective ghost g = a u0 + b: (g - u0) / s = -h ((g + u0) / 2 - ambient) with s
    the spacing (the wall half a spacing out) gives a = (1 - h s / 2) / (1 + h s / 2), b = h s ambient / (1 + h s / 2).
    Arrays or numbers, float64."""
    hs = np.multiply(h, spacing)
    den = 1.0 + 0.5 * hs
    a, b = (1.0 - 0.5 * hs) / den, hs * np.asarray(ambient, dtype=np.float64) / den
    return (float(a) if np.ndim(a) == 0 else a), (float(b) if np.ndim(b) == 0 else b)


def at_positions(spec, side: str, key: str, t: float, s: np.ndarray, grid_s: np.ndarray) -> float | np.ndarray:
    """A side value at positions `s` along the side (case units): multigrid's coarse levels, whose points lie
    elsewhere than the grid's, grid_s (the side's n grid points). A file's values (one per grid point) are
    interpolated linearly between points."""
    v = getattr(spec, key)
    if isinstance(v, float) or hasattr(v, "time") or hasattr(v, "along"):
        return value_at(spec, side, key, t, np.arange(0), s, len(grid_s))
    n = len(grid_s)
    return np.interp(s, grid_s, value_at(spec, side, key, t, np.arange(n), grid_s, n))


def per_conductivity(case, side: str, key: str) -> bool:
    """Whether `key` of a side is divided by the wall's conductivity (the material form's h in W/(m^2 K) and flux
    in W/m^2: -k du/dn = h (u - ambient), k du/dn = flux, k the material at each wall point)."""
    return getattr(case.physics, "material", None) is not None and key in ("h", "flux")


def wall_conductivity(case, side: str, along: np.ndarray) -> np.ndarray:
    """k (case units) at the side's first interior points `along` (columns on y sides, rows on x sides): the wall
    face's conductivity, as the faces take the first point's (solver.core.materials)."""
    from .medium import conductivity_at, medium

    ny, nx = case.shape
    first = np.array([0 if side in ("bottom", "left") else (ny - 1 if side in Y_SIDES else nx - 1)])
    if side in Y_SIDES:
        a = conductivity_at(case, first, along)[0]
    else:
        a = conductivity_at(case, along, first)[:, 0]
    return a * medium(case).c0


def wall_conductivity_at(case, side: str, s: np.ndarray, grid_s: np.ndarray) -> np.ndarray:
    """k at positions s along a side (multigrid's coarse levels), linear between the side's grid points."""
    return np.interp(s, grid_s, wall_conductivity(case, side, np.arange(len(grid_s))))
