"""Walls that exchange heat with the outside through a film: convective sides (with or without radiation) and
radiating rims of holes and the outline, as plain data per point, and the heat each point loses through them.

A film's point P lies a distance delta from its wall (a side: half a spacing, where the wall lies for a convective
side: solver.core.grid; a rim: the point's distance to it, solver.core.geometry.rim_distance). The wall temperature
x balances the conduction from P, at the conductivity of the half-link's middle temperature, with what the wall gives
off:

    g(x) = (a kappa(m) / delta) (u - x) - h (x - T_a) - e ((x + T0)^4 - T_s^4) = 0,    m = (u + x) / 2

(a = k_ref / C0, kappa = k / k_ref: solver.core.conductivity; e = emissivity sigma; T0 the case's zero in kelvin).
kappa at the middle is exact for a table within one of its intervals (k linear there: the Kirchhoff transform's
mean) and second order for any smooth k. The point loses Q = h (x - T_a) + e (...) per unit area of wall, times the
wall's length per unit area of its cell (w: 1 / spacing on a side, the rim's length in the cell over the cell's area on
a rim). With one conductivity and no radiation, x has a closed form and Q = h c / (h + c) (u - T_a), c = a / delta: on
a side exactly the convective ghost rule's flux (solver.core.sides.convective_terms). Otherwise g is solved at each
point by Newton's method safeguarded by bisection inside the bracket [min(u, T_a, T_s), max(u, T_a, T_s)] (g is
decreasing there, >= 0 at its low end and <= 0 at its high end), each point stopping where its step no longer changes
it: the same iterations whatever else the rank holds, so the same bits on every rank count. dQ/du (the Jacobian)
follows by implicit differentiation:

    dQ/du = q' c_u / (q' + c_x),   q' = h + 4 e (x + T0)^3,   c_u = (a / delta)(kappa(m) + (u - x) kappa'(m) / 2),
                                                              c_x = (a / delta)(kappa(m) - (u - x) kappa'(m) / 2)

(Picard: kappa' left out). Every coefficient is normalised by the reference heat capacity C0 as the operator is
(solver.core.medium).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import plate
from ..core.boundary import AXIS_SIDES, BLOCK_SIDE, SIDES
from ..core.conductivity import law_index
from ..core.sides import value_at, wall_conductivity

DELTA_MIN = 1e-3  # a rim film's conduction length is at least this fraction of the larger spacing (a point on or
# beyond the rim: the wall's temperature is all but the point's)
MAX_WALL_ITERATIONS = 60  # the quartic's Newton iterations at most (monotone and quadratic: 5 to 8 from above)


@dataclass(frozen=True, eq=False)
class Film:
    """One wall's film on one rank: the points it touches (rows, cols: indices of the finest level's padded layout)
    and per point its weight w (wall length per cell area), conduction length delta, the point's reference
    conductivity a (k_ref / C0) and k(T) law code, h, T_a, e (normalised), T_s^4 (kelvin^4) and the kelvin offset.
    Arrays are 1-D on the host (float64; `on` moves them to a device in the field's dtype)."""

    label: str  # a side's name, or a rim's label
    rows: np.ndarray
    cols: np.ndarray
    w: np.ndarray
    delta: np.ndarray
    a: np.ndarray
    code: np.ndarray
    h: np.ndarray
    ta: np.ndarray
    e: float
    ts4: np.ndarray
    offset: float

    @property
    def radiates(self) -> bool:
        return self.e > 0

    def on(self, backend, dtype) -> Film:
        """The film with its arrays on the backend's device (index arrays int64, values in dtype; backend None: on the
        host)."""
        xp = np if backend is None else _xp(backend)
        f = {k: xp.asarray(np.ascontiguousarray(getattr(self, k), dtype=np.int64)) for k in ("rows", "cols", "code")}
        v = {k: xp.asarray(np.ascontiguousarray(getattr(self, k), dtype=dtype)) for k in ("w", "delta", "a", "h", "ta",
                                                                                         "ts4")}
        return Film(self.label, f["rows"], f["cols"], v["w"], v["delta"], v["a"], f["code"], v["h"], v["ta"], self.e,
                    v["ts4"], self.offset)


def _xp(backend):
    return backend.xp if hasattr(backend, "xp") else (__import__("cupy") if backend.on_gpu else np)


def side_films(case, block, owned, c0: float, sigma: float, offset: float, t: float = 0.0) -> list[Film]:
    """The films of this block's convective sides (where it has no neighbour), in SIDES order. owned: (R0, R1, C0, C1)
    of the padded layout; c0: the reference capacity; sigma: Stefan-Boltzmann in the case's units."""
    from ..core.boundary import along_positions
    from ..core.grid import geometry

    (dx, dy), _ = geometry(case)
    r0, r1, q0, q1 = owned
    out = []
    for side in SIDES:
        spec = getattr(case.boundary, side)
        if block.neighbours[BLOCK_SIDE[side]] is not None or spec.kind != "convective":
            continue
        on_y = side in AXIS_SIDES["y"]  # a row of points along x
        along = np.arange(*block.cols) if on_y else np.arange(*block.rows)
        n = case.grid.nx if on_y else case.grid.ny
        s = along_positions(case, side, along)
        h, ta = (np.broadcast_to(np.asarray(value_at(spec, side, key, t, along, s, n), dtype=np.float64), along.shape)
                 for key in ("h", "ambient"))
        ts = ta if spec.surroundings is None else np.full(along.shape, spec.surroundings)
        spacing = dy if on_y else dx
        first = {"bottom": r0, "top": r1 - 1, "left": q0, "right": q1 - 1}[side]
        rows = np.full(along.shape, first) if on_y else np.arange(r0, r1)
        cols = np.arange(q0, q1) if on_y else np.full(along.shape, first)
        g_first = np.array([0 if side in ("bottom", "left") else (case.grid.ny - 1 if on_y else case.grid.nx - 1)])
        grows, gcols = (g_first, along) if on_y else (along, g_first)
        code = law_index(case, grows, gcols).reshape(-1)
        active = _active(case, grows, gcols).reshape(-1)
        a = wall_conductivity(case, side, along) / c0
        out.append(_film(side, rows, cols, active / spacing, np.full(along.shape, spacing / 2), a, code, h / c0, ta,
                         spec.emissivity * sigma / c0, ts, offset))
    return out


def rim_films(case, block, owned, c0: float, sigma: float, offset: float) -> list[Film]:
    """The films of the radiating rims (holes' and the outline's convective rims with an emissivity) on this block's
    owned points, in the order solver.core.plate lists the rims."""
    rl = plate.roles(case)
    cut = [(plate.label_of(case, k), s, rim) for k, s, rim in rl.cut]
    if rl.outline is not None:
        cut.append(("outline", rl.outline[0], rl.outline[1]))
    cut = [(label, s, rim) for label, s, rim in cut if rim.kind == "convective" and rim.emissivity > 0]
    if not cut:
        return []
    from ..core.geometry import cut_cells

    rows_g, cols_g = np.arange(*block.rows), np.arange(*block.cols)
    xe, ye = plate.cell_edges(case, *block.cols, "x"), plate.cell_edges(case, *block.rows, "y")
    x, y = plate.points(case, *block.cols, "x"), plate.points(case, *block.rows, "y")
    area = np.outer(np.diff(ye), np.diff(xe))
    per_area = 1.0 / np.where(area > 0, area, 1.0)
    active = _active(case, rows_g, cols_g)
    a = plate.conductivity_at(case, rows_g, cols_g) / c0
    code = law_index(case, rows_g, cols_g)
    h_max = max(plate._axis(case, "x")[0], plate._axis(case, "y")[0])
    out = []
    for label, s, rim in cut:
        w = cut_cells(s, xe, ye).rim_length * per_area * active
        d = plate.geo.rim_distance(s, x, y)
        beyond = plate.inside(s, x, y) ^ (label == "outline")
        delta = np.maximum(np.where(beyond, -d, d), DELTA_MIN * h_max)
        i, j = np.nonzero(w > 0)
        ts = rim.ambient if rim.surroundings is None else rim.surroundings
        ones = np.ones(len(i))
        out.append(_film(label, i + owned[0], j + owned[2], w[i, j], delta[i, j], a[i, j], code[i, j], rim.h / c0 * ones,
                         rim.ambient * ones, rim.emissivity * sigma / c0, ts * ones, offset))
    return out


def _film(label, rows, cols, w, delta, a, code, h, ta, e, ts, offset) -> Film:
    keep = np.asarray(w) > 0
    pick = lambda v: np.asarray(v, dtype=np.float64)[keep]  # noqa: E731
    return Film(label, np.asarray(rows)[keep], np.asarray(cols)[keep], pick(w), pick(delta), pick(a),
                np.asarray(code)[keep], pick(h), pick(ta), float(e), (pick(ts) + offset) ** 4, float(offset))


def _active(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """1 where a point is plate (not held, not in a hole), 0 elsewhere (float64)."""
    if plate.is_plain(case):
        return np.ones((len(rows), len(cols)))
    return 1.0 - plate.cells(case, rows, cols)["held"]


def wall_flux(f: Film, u, kappa_at, xp, jacobian: bool = True):
    """(Q, dQ/du, the radiated part of Q or None) at the film's points (module docstring). u: the points'
    temperatures (1-D, the field's dtype); kappa_at(t): (kappa, kappa') of the points' laws at temperatures t, or None
    where every point's k is constant. jacobian False: kappa' left out (Picard)."""
    if kappa_at is None and not f.radiates:
        c = f.a / f.delta
        s = f.h + c
        hc = f.h * c / s
        return hc * (u - f.ta), hc, None
    x = wall_temperature(f, u, kappa_at, xp)
    theta = x + f.offset
    t3 = theta * theta * theta
    rad = f.e * (t3 * theta - f.ts4) if f.radiates else None
    q = f.h * (x - f.ta) if rad is None else f.h * (x - f.ta) + rad
    qw = f.h + 4.0 * f.e * t3 if f.radiates else f.h
    cu, cx = _conductances(f, u, x, kappa_at, jacobian)
    return q, qw * cu / (qw + cx), rad


def _conductances(f: Film, u, x, kappa_at, jacobian: bool):
    """(c_u, c_x) of the module docstring at the wall temperature x."""
    scale = f.a / f.delta
    if kappa_at is None:
        return scale, scale
    kap, dkap = kappa_at(0.5 * (u + x))
    if not jacobian:
        c = scale * kap
        return c, c
    half = 0.5 * (u - x) * dkap
    return scale * (kap + half), scale * (kap - half)


def wall_temperature(f: Film, u, kappa_at, xp):
    """x at each point: g(x) = 0 (module docstring) by Newton's method inside a shrinking bracket, a step that would
    leave it replaced by bisection; each point frozen once its step stops changing it."""
    eps = 4.0 * float(np.finfo(u.dtype).eps)
    ts = f.ts4 ** 0.25 - f.offset if f.radiates else f.ta
    lo = xp.minimum(xp.minimum(u, f.ta), ts)
    hi = xp.maximum(xp.maximum(u, f.ta), ts)
    x = hi
    done = xp.zeros(u.shape, dtype=bool)
    for _ in range(MAX_WALL_ITERATIONS):
        theta = x + f.offset
        t3 = theta * theta * theta
        cu, cx = _conductances(f, u, x, kappa_at, True)
        c = cu if kappa_at is None else f.a / f.delta * kappa_at(0.5 * (u + x))[0]
        g = c * (u - x) - f.h * (x - f.ta) - f.e * (t3 * theta - f.ts4)
        lo = xp.where(g > 0, x, lo)
        hi = xp.where(g <= 0, x, hi)
        new = x + g / (cx + f.h + 4.0 * f.e * t3)
        new = xp.where((new > lo) & (new < hi), new, 0.5 * (lo + hi))
        new = xp.where(done, x, new)
        done = done | (xp.abs(new - x) <= eps * xp.abs(new)) | (hi - lo <= eps * xp.abs(hi)) | ~xp.isfinite(new)
        x = new
        if bool(done.all()):
            break
    return x
