"""The medium: what the equation's coefficients are, as plain data from the case (no backend, no MPI).

Every case solves, in the case's units (solver.case.units: converted once at validation),

    C u_t = div(k grad u) - b (u - T_b) + q

with C the volumetric heat capacity, k the conductivity, b the faces' sink (face cooling: b = faces h / thickness)
and T_b their ambient, q the power density. The diffusivity form (physics.alpha) is the same equation with C = 1,
k = alpha and q a heating rate. Everything below the case model works with it divided by a reference capacity C0
(the plate's own C; 1 in the diffusivity form):

    c u_t = div(a grad u) - beta (u - T_b) + s,    c = C / C0, a = k / C0, beta = b / C0, s = q / C0

so that a plate of one heat capacity (c = 1 everywhere, the usual case) runs exactly the kernels of a diffusivity
a = k / C0, and only materials of different heat capacities add a capacity field c (solver.core.operator).

Geometry (the material form): a grid point's control volume is its cell, [x - dx/2, x + dx/2] x [y - dy/2, y + dy/2]
clipped to the domain (with a Dirichlet side the strip half a spacing wide along the wall belongs to the wall). Its
capacity is the area-weighted mean of the materials in it (regions painted in order, later ones winning: exact where
one region's boundary cuts a cell; where several do, each region's cover is taken as independent of the earlier
ones: solver.core.geometry.paint), and a source's power is its overlap with the shape (so a shape's total power is
its stated power on every grid). A point's conductivity is its own material's, at its centre (faces then take
harmonic means: solver.core.materials). The diffusivity form keeps its points: regions and sources cover the grid
points inside them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .grid import geometry, positions


@dataclass(frozen=True)
class Medium:
    """The equation's scalars (case units, normalised by C0 where said)."""

    form: str  # "material" or "alpha"
    c0: float  # the reference heat capacity (the plate's C; 1 in the diffusivity form)
    thickness: float | None  # the plate's thickness (material form), or None (results per unit thickness)
    conductivity_field: bool  # a varies in space
    capacity_field: bool  # c varies in space
    beta: float = 0.0  # the faces' sink b / C0 (0: insulated faces)
    ambient: float = 0.0  # T_b
    shapes: bool = False  # holes, held objects or an outline (solver.core.plate): rims' terms and held points

    @property
    def fields(self) -> bool:
        """Whether the update reads coefficient fields (faces, and capacities where c varies)."""
        return self.conductivity_field or self.capacity_field

    @property
    def depth(self) -> float:
        """What a density times an area is multiplied by to give a power (the thickness; 1 per unit thickness)."""
        return self.thickness or 1.0


def medium(case) -> Medium:
    p = case.physics
    if getattr(p, "material", None) is None:
        return Medium("alpha", 1.0, None, not isinstance(p.alpha, float), False)
    from .plate import is_plain

    table = case.material_table()
    k0, c0 = table[p.material]
    used = [table[r.material] for r in p.regions if getattr(r, "material", None) is not None]
    beta, ambient = 0.0, 0.0
    if p.faces is not None:
        beta = p.faces.faces * p.faces.h / (p.thickness * c0)
        ambient = p.faces.ambient
    shaped = not is_plain(case)  # holes, held objects or an outline: fields of faces, cells and the rims' terms
    return Medium("material", c0, p.thickness, shaped or any(k != k0 for k, _ in used),
                  shaped or any(c != c0 for _, c in used), beta, ambient, shaped)


# the material form's fields -----------------------------------------------------------------------------------
def cell_edges(case, rows: np.ndarray, cols: np.ndarray):
    """((y_lo, y_hi) of each row's cell, (x_lo, x_hi) of each column's cell): a spacing around each point, clipped
    to the domain."""
    (dx, dy), _ = geometry(case)
    y, x = positions(case, rows, cols)
    g = case.grid
    return ((np.maximum(y - dy / 2, 0.0), np.minimum(y + dy / 2, g.ly)),
            (np.maximum(x - dx / 2, 0.0), np.minimum(x + dx / 2, g.lx)))


def shape_of(region):
    """The plain geometry of a case region or source term (solver.core.geometry's shapes)."""
    from .plate import shape_of as plain

    return plain(region)


def fractions(case, shape, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The fraction of each point's cell (global rows x cols) that `shape` covers, float64 (len(rows), len(cols)):
    exact (solver.core.geometry), on the contiguous range the indices span."""
    from .geometry import cell_fractions
    from .plate import cell_edges as edges, span, take

    r0, r1 = span(rows)
    c0, c1 = span(cols)
    full = cell_fractions(shape, edges(case, c0, c1, "x"), edges(case, r0, r1, "y"))
    return take(full, rows, cols, r0, c0)


def conductivity_at(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """a = k / C0 at the points (each point's own material, at its centre; later regions win)."""
    from .plate import conductivity_at as k_at

    return k_at(case, rows, cols) / medium(case).c0


def covers_points(shape, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which points of the (y, x) grid a shape covers (edges included): (len(y), len(x)) bools."""
    if shape.kind in ("polygon", "mask"):
        from .plate import inside, shape_of as plain

        return inside(plain(shape), x, y)
    if shape.kind == "rectangle":
        return (((x >= shape.lower[0]) & (x <= shape.upper[0]))[None, :]
                & ((y >= shape.lower[1]) & (y <= shape.upper[1]))[:, None])
    return (x[None, :] - shape.center[0]) ** 2 + (y[:, None] - shape.center[1]) ** 2 <= shape.radius ** 2


def capacity_at(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """c = C / C0 of the points' cells: the area-weighted mean of the materials in each (regions painted in order,
    solver.core.plate), times the cell's open volume where holes cut it (at least plate.V_MIN of a cell)."""
    from .plate import V_MIN, cells

    cl = cells(case, rows, cols)
    c = cl["capacity"] / medium(case).c0
    return np.where(cl["volume"] < 1.0, c * np.maximum(cl["volume"], V_MIN), c)


def cell_areas(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    (y0, y1), (x0, x1) = cell_edges(case, rows, cols)
    return np.outer(y1 - y0, x1 - x0)


# sources, deposited (material form) ----------------------------------------------------------------------------
def deposit(case, k: int, rows: np.ndarray, cols: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Term k's power density at the points' cells (case units, not normalised): its density over its shape by area, or
    its total power spread over the part of its shape the grid's cells hold."""
    t = case.physics.source[k]
    share = plate_share(case, rows, cols)
    if t.kind == "file":
        return share * _file_density(case, k, t, rows, cols)
    if t.kind == "gaussian":
        bell = np.exp(-((x[None, :] - t.center[0]) ** 2 + (y[:, None] - t.center[1]) ** 2) / (2.0 * t.width ** 2))
        return (t.amplitude if t.power is None else t.power / _bell_power(case, t)) * bell * share
    if t.kind == "constant":
        f = np.ones((len(rows), len(cols)))
    else:
        f = fractions(case, shape_of(t), rows, cols)
    return (t.value if t.power is None else t.power / deposited_volume(case, k)) * f * share


def plate_share(case, rows: np.ndarray, cols: np.ndarray):
    """The share of each point's cell that is plate (solver.core.plate: its open volume; 0 where the point is held
    or inactive), or 1 without holes, held objects or an outline: a source puts power only where there is plate (a
    `power` is spread over its shape's part on the plate)."""
    if not medium(case).shapes:
        return 1.0
    from .plate import cells

    c = cells(case, rows, cols)
    return np.where(c["held"] > 0, 0.0, c["volume"])


def deposited_volume(case, k: int) -> float:
    """The volume (area x depth) of term k's shape that the grid's cells hold on the plate: what its total power is
    spread over."""
    t = case.physics.source[k]
    if t.kind == "constant":
        return _box_sum(case, _term_box(case, t), lambda rows, cols, x, y: plate_share(case, rows, cols)
                        * cell_areas(case, rows, cols)) * medium(case).depth
    return covered_area(case, shape_of(t), plate=True) * medium(case).depth


def covered_area(case, shape, plate: bool = False) -> float:
    """The area of `shape` that the grid's cells hold (the cells its bounding box meets, in row bands); plate: only
    its part on the plate (plate_share)."""
    return _box_sum(case, bounds(shape), lambda rows, cols, x, y: fractions(case, shape, rows, cols)
                    * cell_areas(case, rows, cols) * (plate_share(case, rows, cols) if plate else 1.0))


def bounds(shape) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a geometry shape (solver.core.geometry.bbox), or an empty box."""
    from .geometry import bbox

    box = bbox(shape)
    return box if box is not None else (0.0, 0.0, -1.0, -1.0)


def _bell_power(case, t) -> float:
    """The power of a unit-amplitude bell as the grid deposits it (point values x cell volumes), over 40 widths
    around its centre (beyond, exp(-800) is nothing)."""
    def part(rows, cols, x, y):
        r2 = (x[None, :] - t.center[0]) ** 2 + (y[:, None] - t.center[1]) ** 2
        return np.exp(-r2 / (2.0 * t.width ** 2)) * cell_areas(case, rows, cols) * plate_share(case, rows, cols)

    reach = 40.0 * t.width
    box = (t.center[0] - reach, t.center[1] - reach, t.center[0] + reach, t.center[1] + reach)
    return _box_sum(case, box, part) * medium(case).depth


def _whole(case):
    ny, nx = case.shape
    return np.arange(ny), np.arange(nx)


def _box_sum(case, box, part) -> float:
    """sum of part(rows, cols, x, y) over the points whose cells meet box (x0, y0, x1, y1), in row bands."""
    rows_all, cols_all = _whole(case)
    (y0, y1), (x0, x1) = cell_edges(case, rows_all, cols_all)
    cols = cols_all[(x1 >= box[0]) & (x0 <= box[2])]
    rows_in = rows_all[(y1 >= box[1]) & (y0 <= box[3])]
    if not len(cols) or not len(rows_in):
        return 0.0
    step = max(1, (1 << 22) // max(len(cols), 1))
    total = 0.0
    for r in range(0, len(rows_in), step):
        rows = rows_in[r:r + step]
        y, x = positions(case, rows, cols)
        total += float(np.sum(part(rows, cols, x, y)))
    return total


def _file_density(case, k: int, t, rows, cols) -> np.ndarray:
    """A file's values as densities at the cells: one per grid point (a power: over the point's cell volume), or a
    map over `extent` whose cells are deposited by their overlaps with the grid's cells."""
    from . import datafile

    field = f"physics.source.{k}"
    depth = medium(case).depth
    if t.extent is None:
        v = t.factor * datafile.read(t.path, t.dataset, case.shape, field, rows, cols)
        return v / (cell_areas(case, rows, cols) * depth) if t.powers else v
    values = datafile.read_map(t.path, t.dataset, field)
    (mx0, my0), (mx1, my1) = t.extent
    m, n = values.shape
    xe, ye = np.linspace(mx0, mx1, n + 1), np.linspace(my0, my1, m + 1)
    density = t.factor * values
    if t.powers:
        density = density / (np.outer(np.diff(ye), np.diff(xe)) * depth)
    (y0, y1), (x0, x1) = cell_edges(case, rows, cols)
    oy, ox = _overlaps(y0, y1, ye), _overlaps(x0, x1, xe)  # (cells, map cells) lengths shared
    return (oy @ density @ ox.T) / np.outer(y1 - y0, x1 - x0)


def _overlaps(lo: np.ndarray, hi: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The length each cell [lo, hi] shares with each interval [edges[i], edges[i + 1]]: (cells, intervals)."""
    return np.clip(np.minimum(hi[:, None], edges[None, 1:]) - np.maximum(lo[:, None], edges[None, :-1]), 0.0, None)


def source_power(case, k: int) -> float:
    """Term k's power as the grid deposits it (case units: W in SI; per unit thickness without physics.thickness)."""
    def part(rows, cols, x, y):
        return deposit(case, k, rows, cols, x, y) * cell_areas(case, rows, cols)

    t = case.physics.source[k]
    box = _term_box(case, t)
    return _box_sum(case, box, part) * medium(case).depth


def _term_box(case, t) -> tuple[float, float, float, float]:
    """Where a term can put power (its shape's bounds; the whole plate for constants, files without extent)."""
    g = case.grid
    whole = (-1.0, -1.0, g.lx + 1.0, g.ly + 1.0)
    if t.kind in ("rectangle", "disk"):
        return bounds(shape_of(t))
    if t.kind == "gaussian":
        reach = 40.0 * t.width
        return (t.center[0] - reach, t.center[1] - reach, t.center[0] + reach, t.center[1] + reach)
    if t.kind == "file" and t.extent is not None:
        (x0, y0), (x1, y1) = t.extent
        return (x0, y0, x1, y1)
    return whole


def stated_power(term) -> float | None:
    """The power a term states (`power`), or None."""
    value = getattr(term, "power", None)
    return None if value is None or not math.isfinite(value) else value


def heat_units(case) -> dict | None:
    """The units of heat and heat flow (the energy balance's terms, heat-flow probes): J and W in the material form
    (per unit thickness without physics.thickness), None in the diffusivity form (temperature x area, and per time)."""
    if getattr(case.physics, "material", None) is None:
        return None
    per = "" if case.physics.thickness else f" per {case.units.length} of thickness"
    power = "W" if case.units.time == "s" else f"J/{case.units.time}"
    return {"energy": "J" + per, "power": power + per}
