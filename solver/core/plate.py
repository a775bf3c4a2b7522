"""The plate on the grid (the material form): what each grid point's cell and each face between two points hold, from
the regions' true geometry (solver.core.geometry), as plain arrays for the operator (solver.core.operator).

Regions (solver.case.regions) are painted in order and are each a material, an object held at a temperature, or a
hole; `physics.outline` makes everything outside it a hole. How each enters the 5-point operator:

- Materials: a face between two points takes the conductance of the materials along it in series and across it in
  parallel (geometry.face_conductance: a thin layer keeps its thickness on every grid); a cell's heat capacity is the
  area-weighted mean of its materials (geometry.paint).
- Holes with an insulated, flux or convective rim, and the outline: cut cells (Johansen and Colella; Ng, Min and
  Gibou's symmetric 5-point finite volumes): a cell keeps its open volume fraction V, a face its open aperture A
  (its conductance times A), and the rim inside the cell, of length L, carries its flux: a heat flux g adds g L / A_c
  to the cell (A_c its area), a convective rim h (T - u) L / A_c (a diagonal h L / A_c and a source h T L / A_c).
  A cell wholly in a hole is inactive: no face, no update (blanked in the output).
- Held objects and holes with a fixed rim: the symmetric Shortley-Weller / Gibou discretisation (Gibou, Fedkiw,
  Cheng and Kang 2002): a link from an outside point P across the rim, which it meets at a fraction theta of the
  spacing, loses its face and gives P a diagonal k_P / (theta h^2) and a source k_P T / (theta h^2) (the rim's
  value by linear extrapolation); points inside are held at T. theta is bounded below by THETA_MIN (a point that
  close to the rim is all but held: Gibou's own choice, h^2 / 100 ... ; here a fixed fraction).

Indices: functions take global rows and columns (clamped or wrapped beyond the walls: solver.core.grid.window) and
compute on the contiguous range they span, so every block and layout sees the whole grid's values (the geometry is
evaluated cell by cell and face by face).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np

from . import geometry as geo
from .grid import geometry as spacing_and_origin
from .grid import offsets

THETA_MIN = 1e-3  # Gibou's theta below this is taken as this (the point's diagonal 1000 times a face's: all but held)
V_MIN = 0.5  # a cut cell's heat capacity counts at least half a cell: its explicit step stays that of an open cell


def shape_of(region):
    """The plain geometry (solver.core.geometry) of a case region, source term or outline."""
    kind = region.kind
    if kind == "rectangle":
        return geo.Rectangle(region.lower[0], region.lower[1], region.upper[0], region.upper[1])
    if kind == "disk":
        return geo.Disk(region.center[0], region.center[1], region.radius)
    if kind == "polygon":
        return geo.Polygon(tuple(tuple(p) for p in region.points))
    (x0, y0), (x1, y1) = region.extent
    return geo.Mask(mask_array(region.path, region.dataset, region.inside, _stamp(region.path)), ((x0, y0), (x1, y1)))


@functools.lru_cache(maxsize=16)
def mask_array(path: str, dataset: str | None, inside: str, stamp) -> np.ndarray:
    """A mask's pixels, row 0 along y0: a PNG's dark (or light) pixels (its rows drawn from the top, so flipped), or a
    .npy / HDF5 array's non-zero values."""
    from . import datafile

    if path.lower().endswith(".png"):
        from matplotlib import image

        try:
            img = np.asarray(image.imread(path), dtype=np.float64)
        except (OSError, ValueError, SyntaxError) as exc:
            raise datafile.InputError(f"mask: {path} cannot be read as a PNG image ({exc}); give a PNG, .npy or HDF5 "
                                      "file") from None
        grey = img[..., :3].mean(axis=-1) if img.ndim == 3 else img
        if img.ndim == 3 and img.shape[-1] == 4:  # transparent pixels are background
            grey = np.where(img[..., 3] > 0.5, grey, 1.0 if inside == "dark" else 0.0)
        bits = grey < 0.5 if inside == "dark" else grey >= 0.5
        return bits[::-1].astype(np.uint8)
    return (datafile.read_map(path, dataset, "mask") != 0).astype(np.uint8)


def _stamp(path: str):
    try:
        st = os.stat(path)
        return (st.st_mtime_ns, st.st_size)
    except OSError:
        return None


@dataclass(frozen=True)
class Roles:
    """The regions by what they do to the operator (plain tuples of (region index, geometry shape, the region))."""

    materials: tuple  # (index, shape, material name): painted in order over the plate's material
    cut: tuple  # (index, shape, rim): holes with an insulated, flux or convective rim (cut cells)
    held: tuple  # (index, shape, temperature at t = 0, region): held objects and fixed-rim holes (Gibou)
    outline: object  # (shape, rim) or None


def roles(case) -> Roles:
    p = case.physics
    mats, cut, held = [], [], []
    for k, r in enumerate(getattr(p, "regions", None) or []):
        role = getattr(r, "role", "material")
        if role == "material":
            mats.append((k, shape_of(r), r.material))
        elif role == "hole" and r.hole.kind != "dirichlet":
            cut.append((k, shape_of(r), r.hole))
        else:
            held.append((k, shape_of(r), r))
    out = getattr(p, "outline", None)
    outline = (shape_of(out), out.rim) if out is not None else None
    if outline is not None and outline[1].kind == "dirichlet":
        raise ValueError("an outline with a fixed rim is a held object around the plate; give the outline an "
                         "insulated, flux or convective rim")
    return Roles(tuple(mats), tuple(cut), tuple(held), outline)


def held_value(region, t: float = 0.0) -> float:
    """The temperature a held object or a fixed rim holds at time t."""
    v = region.held if region.held is not None else region.hole.value
    if isinstance(v, float):
        return v
    table = np.asarray(v.time, dtype=np.float64)
    return float(np.interp(t, table[:, 0], table[:, 1]))


def is_plain(case) -> bool:
    """The material form with nothing but materials (no hole, held object or outline)."""
    r = roles(case)
    return not (r.cut or r.held or r.outline)


# grids of the ranges indices span -------------------------------------------------------------------------------
def _axis(case, axis: str):
    """(h, o, n, length) along an axis."""
    (dx, dy), _ = spacing_and_origin(case)
    ox, oy = offsets(case)
    g = case.grid
    return (dx, ox, g.nx, g.lx) if axis == "x" else (dy, oy, g.ny, g.ly)


def span(idx: np.ndarray) -> tuple[int, int]:
    return int(np.min(idx)), int(np.max(idx)) + 1


def points(case, lo: int, hi: int, axis: str) -> np.ndarray:
    """Positions of points lo .. hi - 1 along an axis (beyond the grid: where they would lie)."""
    h, o, _, _ = _axis(case, axis)
    return (np.arange(lo, hi) + o) * h


def cell_edges(case, lo: int, hi: int, axis: str) -> np.ndarray:
    """The hi - lo + 1 edges of the cells of points lo .. hi - 1: half way between points, clipped to the plate."""
    h, o, _, length = _axis(case, axis)
    e = (np.arange(lo, hi + 1) + o - 0.5) * h
    return np.clip(e, 0.0, length)


def take(full: np.ndarray, rows: np.ndarray, cols: np.ndarray, r0: int, c0: int) -> np.ndarray:
    return full[np.ix_(rows - r0, cols - c0)]


def inside(shape, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which points (y[i], x[j]) lie in the closed shape: (len(y), len(x)) bools (any lengths: a single column is
    padded for geometry.crossings, which wants two)."""
    xx = x if len(x) > 1 else np.array([x[0], x[0] + 1.0])
    return geo.crossings(shape, xx, y, "x").inside[:, :len(x)]


# cells ----------------------------------------------------------------------------------------------------------
def _range(idx: np.ndarray, n: int) -> tuple[int, int]:
    """The contiguous range the indices span, one more on each side within the grid (a link from the range's edge
    points reaches their neighbours)."""
    lo, hi = span(idx)
    return max(lo - 1, 0), min(hi + 1, n)


def cells(case, rows: np.ndarray, cols: np.ndarray) -> dict:
    """The cells of the points rows x cols: volume (open fraction; 1 with no hole), rim diagonal and source
    (per unit area and time, case units: not divided by C0), the capacity (C, area-weighted), held (1 where the point
    is held or inactive) and its value; every array (len(rows), len(cols)), float64."""
    ny, nx = case.shape
    r0, r1 = _range(rows, ny)
    c0, c1 = _range(cols, nx)
    full = _cells(case, r0, r1, c0, c1)
    return {k: take(v, rows, cols, r0, c0) for k, v in full.items()}


def _cells(case, r0, r1, c0, c1) -> dict:
    rl = roles(case)
    table = case.material_table()
    xe, ye = cell_edges(case, c0, c1, "x"), cell_edges(case, r0, r1, "y")
    shape = (r1 - r0, c1 - c0)
    area = np.outer(np.diff(ye), np.diff(xe))
    area_safe = np.where(area > 0, area, 1.0)
    paint = geo.paint([s for _, s, _ in rl.materials], [m for _, _, m in rl.materials], case.physics.material, xe, ye)
    capacity = paint.mean({name: c for name, (_, c) in table.items()})
    volume = np.ones(shape)
    diag, rhs = np.zeros(shape), np.zeros(shape)
    for _, s, rim in rl.cut:
        cc = geo.cut_cells(s, xe, ye)
        volume *= cc.volume
        _rim(rim, cc.rim_length / area_safe, diag, rhs)
    if rl.outline is not None:
        s, rim = rl.outline
        cc = geo.cut_cells(s, xe, ye)
        volume *= 1.0 - cc.volume
        _rim(rim, cc.rim_length / area_safe, diag, rhs)
    held = volume <= 0.0
    value = np.zeros(shape)
    y, x = points(case, r0, r1, "y"), points(case, c0, c1, "x")
    for _, s, region in rl.held:
        covered = inside(s, x, y)
        held |= covered
        value[covered] = held_value(region)
    if rl.held:
        k_point = conductivity(case, r0, r1, c0, c1)
        for axis in "xy":
            gd, gr = gibou(case, rl, x, y, k_point, axis)
            diag += gd
            rhs += gr
    return {"volume": volume, "capacity": capacity, "diag": np.where(held, 0.0, diag),
            "rhs": np.where(held, 0.0, rhs), "held": held.astype(np.float64), "value": value}


def _rim(rim, length_per_area: np.ndarray, diag: np.ndarray, rhs: np.ndarray) -> None:
    """A cut rim's flux per unit area: a heat flux g L / A; a convective rim h (T - u) L / A."""
    if rim.kind == "neumann":
        rhs += rim.flux * length_per_area
    elif rim.kind == "convective":
        diag += rim.h * length_per_area
        rhs += rim.h * rim.ambient * length_per_area


def gibou(case, rl: Roles, x: np.ndarray, y: np.ndarray, k_point: np.ndarray, axis: str):
    """(diagonal, source) per point from the links along `axis` that cross a held object's or fixed rim's rim:
    k_P / (theta h^2) and k_P T / (theta h^2) at the outside point P (case units: per unit area and time)."""
    h = _axis(case, axis)[0]
    diag, rhs = np.zeros(k_point.shape), np.zeros(k_point.shape)
    if (len(x) if axis == "x" else len(y)) < 2:  # no link along the axis
        return diag, rhs
    lo, hi = _near(axis), _far(axis)
    for _, s, region in rl.held:
        c = geo.crossings(s, x, y, axis)
        T = held_value(region)
        for near, theta in ((lo, c.first), (hi, c.last)):
            hit = c.cut & ~c.inside[near]
            th = np.maximum(np.where(hit, theta, 1.0), THETA_MIN)
            w = np.where(hit, k_point[near] / (th * h * h), 0.0)
            diag[near] += w
            rhs[near] += w * T
    return diag, rhs


def conductivity(case, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    """k at the points r0..r1 x c0..c1 (each point's own material, at its centre; later regions win), case units."""
    table, p = case.material_table(), case.physics
    y, x = points(case, r0, r1, "y"), points(case, c0, c1, "x")
    out = np.full((r1 - r0, c1 - c0), table[p.material][0])
    for _, s, name in roles(case).materials:
        out[inside(s, x, y)] = table[name][0]
    return out


def conductivity_at(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    r0, r1 = span(rows)
    c0, c1 = span(cols)
    return take(conductivity(case, r0, r1, c0, c1), rows, cols, r0, c0)


# faces ----------------------------------------------------------------------------------------------------------
def faces(case, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ax, ay) for a field whose elements lie at global rows x cols, which continue by one beyond their last element
    (solver.core.materials.faces' contract): ax[i, j] the face between elements (i, j) and (i, j + 1), ay[i, j]
    between (i, j) and (i + 1, j), each (len(rows) - 1, len(cols) - 1). A face: the materials in series along it and
    in parallel across it, times its open aperture, zero where a held object's rim cuts it; where an index repeats
    (clamped beyond a wall) the wall's face, which takes the point's own k."""
    ny, nx = case.shape
    r0, r1 = _range(rows, ny)
    c0, c1 = _range(cols, nx)
    east, north = _faces(case, r0, r1, c0, c1, "x"), _faces(case, r0, r1, c0, c1, "y")
    k = conductivity(case, r0, r1, c0, c1)
    ri, ci = rows - r0, cols - c0
    ax = east[np.ix_(ri[:-1], ci[:-1])]
    ay = north[np.ix_(ri[:-1], ci[:-1])]
    wall_x, wall_y = cols[:-1] == cols[1:], rows[:-1] == rows[1:]
    ax[:, wall_x] = k[np.ix_(ri[:-1], ci[:-1][wall_x])]
    ay[wall_y, :] = k[np.ix_(ri[:-1][wall_y], ci[:-1])]
    return ax, ay


def _faces(case, r0, r1, c0, c1, axis: str) -> np.ndarray:
    """The faces east (north) of the points r0..r1 x c0..c1, computed over one more column (row) where it exists
    (periodic: the wrapped image); the last point's face beyond a wall is the wall's (its own k)."""
    rl = roles(case)
    table = case.material_table()
    _, _, n, _ = _axis(case, axis)
    periodic = (case.boundary.left.kind if axis == "x" else case.boundary.bottom.kind) == "periodic"
    hi = c1 if axis == "x" else r1
    reach = hi + 1 if periodic or hi < n else hi
    cr1, rr1 = (reach, r1) if axis == "x" else (c1, reach)
    xs, ys = points(case, c0, cr1, "x"), points(case, r0, rr1, "y")
    across = cell_edges(case, r0, r1, "y") if axis == "x" else cell_edges(case, c0, c1, "x")
    k = conductivity(case, r0, r1, c0, c1)
    out = k.copy()  # the wall's face (no point beyond): the point's own k
    if (len(xs) if axis == "x" else len(ys)) > 1:
        kf = geo.face_conductance([s for _, s, _ in rl.materials], [table[m][0] for _, _, m in rl.materials],
                                  table[case.physics.material][0], xs, ys, axis, across)
        if axis == "x":
            out[:, :kf.shape[1]] = kf
        else:
            out[:kf.shape[0], :] = kf
    if rl.cut or rl.outline is not None:
        out *= _apertures(case, rl, r0, r1, c0, c1, axis)
    for _, s, _ in (rl.held if (len(xs) if axis == "x" else len(ys)) > 1 else ()):
        c = geo.crossings(s, xs, ys, axis)
        cut = c.cut | c.inside[_near(axis)] | c.inside[_far(axis)]
        if axis == "x":
            out[:, :cut.shape[1]][cut] = 0.0
        else:
            out[:cut.shape[0], :][cut] = 0.0
    return out


def _near(axis):
    return (slice(None), slice(None, -1)) if axis == "x" else (slice(None, -1), slice(None))


def _far(axis):
    return (slice(None), slice(1, None)) if axis == "x" else (slice(1, None), slice(None))


def _apertures(case, rl: Roles, r0, r1, c0, c1, axis: str) -> np.ndarray:
    """The open fraction of the face east (north) of each point (the cell face half way to its neighbour): the cut
    cells' apertures of the holes and the outline, multiplied; 1 at a wall."""
    ny, nx = case.shape
    xe, ye = cell_edges(case, c0, c1, "x"), cell_edges(case, r0, r1, "y")
    out = np.ones((r1 - r0, c1 - c0))
    items = [(s, False) for _, s, _ in rl.cut] + ([(rl.outline[0], True)] if rl.outline else [])
    for s, outline in items:
        cc = geo.cut_cells(s, xe, ye)
        ap = cc.aperture_x[:, 1:] if axis == "x" else cc.aperture_y[1:, :]  # the east (north) edge of each cell
        out *= (1.0 - ap) if outline else ap
    return out


def blanked(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray | None:
    """Which points lie outside the plate's material (in a hole, a held object or outside the outline): a bool array,
    or None where there are none (the output blanks them)."""
    if getattr(case.physics, "material", None) is None or is_plain(case):
        return None
    return cells(case, rows, cols)["held"] > 0
