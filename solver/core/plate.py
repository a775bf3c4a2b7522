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
from dataclasses import dataclass

import numpy as np

from . import geometry as geo
from .datafile import stamp
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
    return geo.Mask(mask_array(region.path, region.dataset, region.inside, stamp(region.path)), ((x0, y0), (x1, y1)))


@functools.lru_cache(maxsize=16)
def mask_array(path: str, dataset: str | None, inside: str, version) -> np.ndarray:
    """A mask's pixels (solver.core.datafile.read_mask), read once per file version."""
    from .datafile import read_mask

    return read_mask(path, dataset, inside)



@dataclass(frozen=True)
class Roles:
    """The regions by what they do to the operator (plain tuples of (region index, geometry shape, the region))."""

    materials: tuple  # (index, shape, material name): painted in order over the plate's material
    cut: tuple  # (index, shape, rim): holes with an insulated, flux or convective rim (cut cells)
    held: tuple  # (index, shape, region, outside): held objects and fixed-rim holes (Gibou); outside: what is held is
    # the shape's outside (an outline with a fixed rim)
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
            held.append((k, shape_of(r), r, False))
    out = getattr(p, "outline", None)
    outline = (shape_of(out), out.rim) if out is not None else None
    if outline is not None and outline[1].kind == "dirichlet":  # the outside held at the rim's value
        held.append((-1, outline[0], out, True))
        outline = None
    return Roles(tuple(mats), tuple(cut), tuple(held), outline)


def held_value(region, t: float = 0.0) -> float:
    """The temperature a held object or a fixed rim (a hole's, the outline's) holds at time t."""
    rim = getattr(region, "rim", None)
    v = rim.value if rim is not None else region.held if region.held is not None else region.hole.value
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
    full = _remembered(case, ("cells", r0, r1, c0, c1), lambda: _cells(case, r0, r1, c0, c1))
    out = {k: take(v, rows, cols, r0, c0) for k, v in full.items() if k != "rims"}
    out["rims"] = {label: (take(d, rows, cols, r0, c0), take(f, rows, cols, r0, c0))
                   for label, (d, f) in full["rims"].items()}
    return out


MEMO_POINTS = 1 << 22  # blocks up to this many points keep their cells on the case (about 70 MB a block at most)
MEMO_ENTRIES = 6  # blocks' cells and faces along x and y (the ones asked for last are kept)


def _remembered(case, key: tuple, make):
    """make(), kept on the case (its `_memo`: set-up asks for a block's cells a dozen times: the operator, sigmas,
    the balance, the sources' shares, the outputs' blanks; its faces a handful) for the last MEMO_ENTRIES of blocks
    of up to MEMO_POINTS points. What it returns is shared: callers copy before they change it."""
    memo = getattr(case, "_memo", None)
    if memo is None:
        return make()
    key = (case.model_dump_json(include={"grid", "physics", "materials", "units", "boundary"}),) + key  # (a copy
    # of the case shares its memo: tiny_case's warm-up grid)
    if key in memo:
        memo[key] = memo.pop(key)  # (the most recent last: the oldest goes first)
        return memo[key]
    value = make()
    if (key[3] - key[2]) * (key[5] - key[4]) <= MEMO_POINTS:
        while len(memo) >= MEMO_ENTRIES:
            memo.pop(next(iter(memo)))
        memo[key] = value
    return value


def _cells(case, r0, r1, c0, c1) -> dict:
    rl = roles(case)
    table = case.material_table()
    xe, ye = cell_edges(case, c0, c1, "x"), cell_edges(case, r0, r1, "y")
    shape = (r1 - r0, c1 - c0)
    paint = geo.paint([s for _, s, _ in rl.materials], [m for _, _, m in rl.materials], case.physics.material, xe, ye)
    capacity = paint.mean({name: c for name, (_, c) in table.items()})
    volume = np.ones(shape)
    for _, s, _ in rl.cut:
        volume *= geo.cut_cells(s, xe, ye).volume
    if rl.outline is not None:
        volume *= geo.cell_fractions(rl.outline[0], xe, ye)
    held = volume <= 0.0
    value = np.zeros(shape)
    y, x = points(case, r0, r1, "y"), points(case, c0, c1, "x")
    for _, s, region, outside in rl.held:
        covered = inside(s, x, y) ^ outside
        held |= covered
        value[covered] = held_value(region)
    rims = {label: (np.where(held, 0.0, d), np.where(held, 0.0, f))
            for label, (d, f) in _rims(case, rl, r0, r1, c0, c1, xe, ye, x, y).items()}
    diag = sum((d for d, _ in rims.values()), np.zeros(shape))
    rhs = sum((f for _, f in rims.values()), np.zeros(shape))
    return {"volume": volume, "capacity": capacity, "diag": diag, "rhs": rhs, "held": held.astype(np.float64),
            "value": value, "rims": rims}


def label_of(case, index: int) -> str:
    """How the record names a rim: the region's name, or `regions.K`; the outline's `outline`."""
    if index < 0:
        return "outline"
    name = getattr(case.physics.regions[index], "name", None)
    return name or f"regions.{index}"


def _rims(case, rl: Roles, r0, r1, c0, c1, xe, ye, x, y) -> dict:
    """Each rim's (diagonal, source) per point, by label (case units: per unit area and time): a cut rim's flux over
    its length in the cell, a held object's or fixed rim's Gibou links."""
    area = np.outer(np.diff(ye), np.diff(xe))
    per_area = 1.0 / np.where(area > 0, area, 1.0)
    out = {}
    cut = [(label_of(case, k), s, rim) for k, s, rim in rl.cut]
    if rl.outline is not None:
        cut.append(("outline", rl.outline[0], rl.outline[1]))
    k_point = conductivity(case, r0, r1, c0, c1) if rl.held or any(r.kind == "convective" for *_, r in cut) else None
    for label, s, rim in cut:
        length = geo.cut_cells(s, xe, ye).rim_length * per_area
        d, f = np.zeros(area.shape), np.zeros(area.shape)
        if rim.kind == "neumann":
            f += rim.flux * length
        elif rim.kind == "convective":
            h = rim_h(s, rim.h, k_point, x, y, plate_inside=label == "outline")
            d += h * length
            f += h * rim.ambient * length
        out[label] = (d, f)
    if rl.held:
        for entry in rl.held:
            d, f = np.zeros(area.shape), np.zeros(area.shape)
            for axis in "xy":
                gd, gf = gibou(case, entry, x, y, k_point, axis)
                d += gd
                f += gf
            out[label_of(case, entry[0])] = (d, f)
    return out


def rim_h(shape, h: float, k_point: np.ndarray, x: np.ndarray, y: np.ndarray, plate_inside: bool) -> np.ndarray:
    """A convective rim's coefficient as each cut cell's point sees it: h in series with the conduction over the
    point's distance d to the rim, h / (1 + h d / k) (Papac, Gibou and Ratsch's extrapolation of u to the rim: the
    rim's flux at second order; d < 0 for a point beyond the rim, its denominator kept above 1/2)."""
    d = geo.rim_distance(shape, x, y)
    beyond = inside(shape, x, y) ^ plate_inside
    d = np.where(beyond, -d, d)
    return h / np.maximum(1.0 + h * d / k_point, 0.5)


def gibou(case, entry, x: np.ndarray, y: np.ndarray, k_point: np.ndarray, axis: str):
    """(diagonal, source) per point from the links along `axis` that cross one held object's (or fixed rim's) rim:
    k_P / (theta h^2) and k_P T / (theta h^2) at the outside point P (case units: per unit area and time)."""
    h = _axis(case, axis)[0]
    diag, rhs = np.zeros(k_point.shape), np.zeros(k_point.shape)
    if (len(x) if axis == "x" else len(y)) < 2:  # no link along the axis
        return diag, rhs
    _, s, region, outside = entry
    c = geo.crossings(s, x, y, axis)
    held = inside(s, x, y) ^ outside
    T = held_value(region)
    for (near, theta), far in (((_near(axis), c.first), _far(axis)), ((_far(axis), c.last), _near(axis))):
        touch = ~c.cut & held[far]  # the rim meets the link only at the held neighbour (a tangent there): theta = 1
        hit = (c.cut | touch) & ~held[near]
        th = np.maximum(np.where(c.cut, theta, 1.0), THETA_MIN)
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
    east, north = (_remembered(case, ("faces", r0, r1, c0, c1, axis),  # (the operator and the levels ask alike)
                               lambda axis=axis: _faces(case, r0, r1, c0, c1, axis)) for axis in "xy")
    k = conductivity(case, r0, r1, c0, c1)
    ri, ci = rows - r0, cols - c0
    ax = east[np.ix_(ri[:-1], ci[:-1])]
    ay = north[np.ix_(ri[:-1], ci[:-1])]
    wall_x, wall_y = cols[:-1] == cols[1:], rows[:-1] == rows[1:]
    for j in np.flatnonzero(wall_x):
        side = "left" if cols[j] == 0 else "right"
        ax[:, j] = _wall(case, side, r0, r1, k[:, ci[j]])[ri[:-1]]
    for i in np.flatnonzero(wall_y):
        side = "bottom" if rows[i] == 0 else "top"
        ay[i, :] = _wall(case, side, c0, c1, k[ri[i], :])[ci[:-1]]
    return ax, ay


def wall_faces(case, side: str, idx: np.ndarray) -> np.ndarray:
    """The wall faces (conductance, case units) of a side's first points at global indices idx along it, as the
    operator takes them (_wall): the energy balance's side fluxes read the same faces."""
    ny, nx = case.shape
    lo, hi = span(idx)
    first = {"left": 0, "bottom": 0, "right": nx - 1, "top": ny - 1}[side]
    if side in ("left", "right"):
        k = conductivity(case, lo, hi, first, first + 1)[:, 0]
    else:
        k = conductivity(case, first, first + 1, lo, hi)[0, :]
    return _wall(case, side, lo, hi, k)[idx - lo]


def _wall(case, side: str, lo: int, hi: int, k_point: np.ndarray) -> np.ndarray:
    """The faces between a side's first points lo..hi-1 (along it) and their ghosts beyond the wall: a fixed side's
    (its ghost on the wall, a spacing away) the materials along that spacing in series and across the cell in
    parallel, as a face between two points; another kind's the point's own k (its ghost rule speaks of the wall's
    k); either times the open share of the cell's edge on the wall (a hole or the outline meeting the side)."""
    rl = roles(case)
    axis = "x" if side in ("left", "right") else "y"
    other = "y" if axis == "x" else "x"
    _, _, n, length = _axis(case, axis)
    first = 0 if side in ("left", "bottom") else n - 1
    x0 = float(points(case, first, first + 1, axis)[0])
    along = np.array([0.0, x0] if first == 0 else [x0, length])
    out = k_point.astype(np.float64).copy()
    if getattr(case.boundary, side).kind == "dirichlet" and rl.materials:
        table = case.material_table()
        across = points(case, lo, hi, other)
        xs, ys = (along, across) if axis == "x" else (across, along)
        kf = geo.face_conductance([s for _, s, _ in rl.materials], [table[m][0] for _, _, m in rl.materials],
                                  table[case.physics.material][0], xs, ys, axis, cell_edges(case, lo, hi, other))
        out = kf[:, 0] if axis == "x" else kf[0, :]
    items = [(s, False) for _, s, _ in rl.cut] + ([(rl.outline[0], True)] if rl.outline else [])
    if items:
        edges = cell_edges(case, lo, hi, other)
        wall_edges = np.array([0.0, x0]) if first == 0 else np.array([x0, length])
        xe, ye = (wall_edges, edges) if axis == "x" else (edges, wall_edges)
        for s, outline in items:
            cc = geo.cut_cells(s, xe, ye)
            ap = (cc.aperture_x[:, 0 if first == 0 else -1] if axis == "x" else
                  cc.aperture_y[0 if first == 0 else -1, :])
            out = out * ((1.0 - ap) if outline else ap)
    return out


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
    for _, s, _, outside in (rl.held if (len(xs) if axis == "x" else len(ys)) > 1 else ()):
        c = geo.crossings(s, xs, ys, axis)
        held_in = inside(s, xs, ys) ^ outside  # one test of which points are held, along x (a tangent point alike)
        cut = c.cut | held_in[_near(axis)] | held_in[_far(axis)]
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


# what the grid cannot solve -------------------------------------------------------------------------------------
def _links_grid(case, shape, halvings: int):
    """The points of the grid refined `halvings` times (the same origin) that lie within a spacing of the shape's
    box: (xs, ys), or None where the box misses the plate."""
    box = geo.bbox(shape)
    if box is None:
        return None
    out = []
    for axis, lo, hi in (("x", box[0], box[2]), ("y", box[1], box[3])):
        h, o, n, _ = _axis(case, axis)
        h, o, last = h / 2 ** halvings, o * 2 ** halvings, (n - 1) * 2 ** halvings
        j0 = max(int(np.floor(lo / h - o)) - 1, 0)
        j1 = min(int(np.ceil(hi / h - o)) + 1, last)
        if j1 < j0:
            return None
        out.append((np.arange(j0, j1 + 1) + o) * h)
    return out[0], out[1]


def unresolved(case) -> list[tuple]:
    """The holes, held objects and outline the grid does not resolve: (region index or -1 for the outline, a phrase
    saying why, the spacing that resolves it as (dx, dy), or None if 64 times finer does not). Narrower than the
    larger spacing (geometry.thickness: a hole thinner than a cell blocks no face), or seen wrongly by the grid's
    links (geometry.unresolved: a link crossed twice, or a shape no link meets)."""
    rl = roles(case)
    shapes = [(k, s) for k, s, _ in rl.cut] + [(k, s) for k, s, _, _ in rl.held]
    if rl.outline is not None:
        shapes.append((-1, rl.outline[0]))
    h = max(_axis(case, "x")[0], _axis(case, "y")[0])
    out = []
    for k, s in shapes:
        width = geo.thickness(s)
        if width is not None and width < h:
            out.append((k, f"{width:.4g} wide, narrower than the grid's spacing {h:.4g}", (width, width)))
            continue
        grid = _links_grid(case, s, 0)
        where = None if grid is None else geo.unresolved(s, *grid)
        if where is None:
            continue
        need = None
        for m in range(1, 7):
            grid = _links_grid(case, s, m)
            if grid is not None and geo.unresolved(s, *grid) is None:
                need = (_axis(case, "x")[0] / 2 ** m, _axis(case, "y")[0] / 2 ** m)
                break
        out.append((k, f"narrower than the grid resolves near x = {where[0]:.4g}, y = {where[1]:.4g} (a link between "
                       "neighbouring points crosses its rim twice, or none meets it)", need))
    return out


def seam_crossings(case) -> list[tuple[int, str]]:
    """The regions and outline a periodic side's seam does not see as they are: (region index or -1 for the
    outline, the sides). A shape is not repeated across a periodic side. A hole's, held object's or outline's rim
    passes between the first and last points (one inside, the other not, on some row or column): the links across
    the seam do not see it (a held disk across the seam took plain links to held points there: first order, and
    multigrid's cycles diverged at 512^2). A material region covers the plate's first half cell but not its image
    beyond the last point, or the other way: the faces across the seam take the shape as drawn beyond the plate."""
    rl = roles(case)
    b, (ny, nx) = case.boundary, case.shape
    x, y = points(case, 0, nx, "x"), points(case, 0, ny, "y")
    (hx, _, _, lx), (hy, _, _, ly) = _axis(case, "x"), _axis(case, "y")
    sx = x[0] - hx / 4 + np.array([0.0, lx])  # a point of the first half cell and its image a period on
    sy = y[0] - hy / 4 + np.array([0.0, ly])
    rims = [(k, s) for k, s, _ in rl.cut] + [(k, s) for k, s, _, _ in rl.held]
    if rl.outline is not None:
        rims.append((-1, rl.outline[0]))
    out = []
    for k, s in rims:
        if b.left.kind == "periodic" and np.any(np.diff(inside(s, x[[0, -1]], y).astype(np.int8), axis=1)):
            out.append((k, "left and right"))
        elif b.bottom.kind == "periodic" and np.any(np.diff(inside(s, x, y[[0, -1]]).astype(np.int8), axis=0)):
            out.append((k, "bottom and top"))
    for k, s, _ in rl.materials:
        if b.left.kind == "periodic" and np.any(np.diff(inside(s, sx, y).astype(np.int8), axis=1)):
            out.append((k, "left and right"))
        elif b.bottom.kind == "periodic" and np.any(np.diff(inside(s, x, sy).astype(np.int8), axis=0)):
            out.append((k, "bottom and top"))
    return out


def shapes_fix_level(case) -> bool:
    """The material form's shapes or faces that fix a steady state's level: a held object, a fixed or convective
    rim (h > 0), the faces' cooling (h > 0)."""
    p = case.physics
    if getattr(p, "material", None) is None:
        return False
    rims = [r.hole for r in p.regions if getattr(r, "hole", None) is not None]
    rims += [p.outline.rim] if p.outline is not None else []
    return (any(getattr(r, "held", None) is not None for r in p.regions)
            or (p.faces is not None and (p.faces.h > 0 or p.faces.emissivity > 0))
            or any(r.kind == "dirichlet" or r.kind == "convective" and (r.h > 0 or r.emissivity > 0) for r in rims))


def unfixed_piece(case, fixing: tuple) -> tuple[float, float] | None:
    """A steady state's pieces: where the holes, held objects and outline cut the plate into pieces, each needs
    something that fixes its level (a held object or fixed rim, a convective rim, one of the sides `fixing` (names:
    fixed, or convective with h > 0), the faces' cooling); the position of a point of the first piece that has
    none, or None."""
    cooling = getattr(case.physics, "faces", None)
    if cooling is not None and (cooling.h > 0 or cooling.emissivity > 0):  # (radiating faces fix it too)
        return None
    ny, nx = case.shape
    b = case.boundary
    wrap_x, wrap_y = b.left.kind == "periodic", b.bottom.kind == "periodic"
    rows, cols = np.arange(ny), np.arange(nx)
    cl = cells(case, rows, cols)
    active = cl["held"] == 0
    ax, ay = faces(case, np.r_[rows, 0 if wrap_y else ny - 1], np.r_[cols, 0 if wrap_x else nx - 1])
    fixed = active & (cl["diag"] > 0)
    for side, sl in (("left", np.s_[:, 0]), ("right", np.s_[:, -1]), ("bottom", np.s_[0, :]), ("top", np.s_[-1, :])):
        if side in fixing:
            fixed[sl] |= active[sl]
    labels = _pieces(active, ax, ay, wrap_x, wrap_y)
    has = np.zeros(active.size, dtype=bool)
    has[labels[fixed.ravel()]] = True
    bad = active.ravel() & ~has[labels]
    if not bad.any():
        return None
    i, j = divmod(int(np.flatnonzero(bad)[0]), nx)
    return float(points(case, j, j + 1, "x")[0]), float(points(case, i, i + 1, "y")[0])


def _pieces(active: np.ndarray, ax: np.ndarray, ay: np.ndarray, wrap_x: bool, wrap_y: bool) -> np.ndarray:
    """Connected pieces of the active points through faces that conduct: a label per point (flat), by hooking
    and pointer jumping (a few rounds of vectorised passes over the links)."""
    ny, nx = active.shape
    idx = np.arange(ny * nx).reshape(ny, nx)
    links = []
    east = (ax[:, : nx if wrap_x else nx - 1] > 0)
    a, b = idx[:, : east.shape[1]], np.roll(idx, -1, axis=1)[:, : east.shape[1]]
    ok = east & active[:, : east.shape[1]] & np.roll(active, -1, axis=1)[:, : east.shape[1]]
    links.append((a[ok], b[ok]))
    north = (ay[: ny if wrap_y else ny - 1, :] > 0)
    a, b = idx[: north.shape[0], :], np.roll(idx, -1, axis=0)[: north.shape[0], :]
    ok = north & active[: north.shape[0], :] & np.roll(active, -1, axis=0)[: north.shape[0], :]
    links.append((a[ok], b[ok]))
    a = np.concatenate([p for p, _ in links])
    b = np.concatenate([q for _, q in links])
    label = np.arange(ny * nx)
    while True:
        la, lb = label[a], label[b]
        low = np.minimum(la, lb)
        new = label.copy()
        np.minimum.at(new, la, low)
        np.minimum.at(new, lb, low)
        while True:  # pointer jumping: every point to its root
            nxt = new[new]
            if np.array_equal(nxt, new):
                break
            new = nxt
        if np.array_equal(new, label):
            return label
        label = new


def shape_table(case) -> list[dict]:
    """What the grid makes of each region and the outline (for `stencil validate`): label, role, the shape's exact
    area (within the plate) and its area on the grid (a material's or a hole's covered cells, summed exactly; a held
    object's held points' cells), and the smallest cut fraction (a hole's or the outline's open cell volume, a held
    object's Gibou theta; None where nothing is cut)."""
    ny, nx = case.shape
    xe, ye = cell_edges(case, 0, nx, "x"), cell_edges(case, 0, ny, "y")
    area = np.outer(np.diff(ye), np.diff(xe))
    x, y = points(case, 0, nx, "x"), points(case, 0, ny, "y")
    rl = roles(case)
    out = []
    for k, s, _ in rl.materials:
        f = geo.cell_fractions(s, xe, ye)
        out.append(_row(case, k, "material", s, float((f * area).sum()), None))
    for k, s, _ in rl.cut:
        v = geo.cut_cells(s, xe, ye).volume
        cut = (v > 0) & (v < 1)
        out.append(_row(case, k, "hole", s, float(((1 - v) * area).sum()), float(v[cut].min()) if cut.any() else None))
    for entry in rl.held:
        k, s, _, outside = entry
        held = inside(s, x, y) ^ outside
        thetas = []
        for axis in "xy":
            c = geo.crossings(s, x, y, axis)
            for near, t in ((_near(axis), c.first), (_far(axis), c.last)):
                hit = c.cut & ~held[near]  # Gibou's links: from a point outside what is held
                thetas += [float(t[hit].min())] if hit.any() else []
        role = "outline" if k < 0 else "held"  # an outline's held outside: its grid area is the plate's (inside)
        out.append(_row(case, k, role, s, float((np.where(held ^ outside, area, 0.0)).sum()),
                        min(thetas) if thetas else None))
    if rl.outline is not None:
        v = geo.cell_fractions(rl.outline[0], xe, ye)  # the plate is the outline's inside
        cut = (v > 0) & (v < 1)
        out.append(_row(case, -1, "outline", rl.outline[0], float((v * area).sum()),
                        float(v[cut].min()) if cut.any() else None))
    return sorted(out, key=lambda r: (r["label"] == "outline", r["index"]))


def _row(case, k: int, role: str, shape, grid_area: float, fraction) -> dict:
    box = geo.Rectangle(0.0, 0.0, case.grid.lx, case.grid.ly)
    exact = geo.area(shape) if _within(shape, box) else None
    return {"index": k, "label": label_of(case, k), "role": role, "area": exact, "grid_area": grid_area, "fraction": fraction}


def _within(shape, box) -> bool:
    b = geo.bbox(shape)
    return b is not None and b[0] >= box.x0 and b[1] >= box.y0 and b[2] <= box.x1 and b[3] <= box.y1
