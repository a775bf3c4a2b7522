"""Boundary kinds per side: the wall geometry they imply, their eigenmodes, and the fill of ghost layers.

Sides: bottom (y = 0, the block's south), top (y = ly, north), left (x = 0, west), right (x = lx, east).

Geometry along an axis of n points and length L: the wall lies one spacing outside the first (last)
point on a Dirichlet side and half a spacing outside on a Neumann side; a periodic axis has a period
of n points (n spacings). So h = L / (n - 1 + o_lo + o_hi) with o = 1 (Dirichlet) or 1/2 (Neumann,
periodic), and point j lies at (o_lo + j) h. All-Dirichlet gives h = L/(n+1) and x_j = (j+1) h, as before.

Ghost layers (depth d, layer m = 0 next to the owned points, m = d-1 outermost):
- dirichlet: the value V;
- neumann:   the owned point m inside the wall, plus (2m+1) G h: the mirror image about the wall with
             du/dn = G outward, so for d = 1 ghost = first point + G h;
- convective: a u_m + b with a = (1 - H h/2) / (1 + H h/2), b = H h T / (1 + H h/2) (solver.core.sides):
             -du/dn = H (u - T) at the wall half a spacing out, the wall value the mean of ghost and first
             point; deeper layers (read by no update) apply the same gain to the point m inside;
- periodic:  the owned point n places further on (the interior row or column next to the opposite side).
A rule's value (and gain) is a number, or an array along the side's padded length where the side's data
vary along it (profiles, files); rules are built for a time t where they vary in time (make_fill).
With zero flux and periodic sides the plain sum of u is conserved exactly in exact arithmetic.

Fill order: the y sides (ghost rows, the full padded width), then the x sides (ghost columns, the full
padded height): a corner holds the x side's rule applied to the y side's ghost row (Dirichlet x side:
its value). The 5-point update never reads corners; deep halos do (fill after the exchange for them).

Which sides a block fills: the physical ones, where it has no neighbour (solver.core.decomp): every
non-periodic domain edge, and a periodic edge when one rank spans the whole axis (it is its own
neighbour: the wrap is a local copy, no MPI message). With several ranks along a periodic axis the halo
exchange fills those ghosts from the wrapped neighbour like any other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .grid import (AXIS_SIDES, OFFSET, SIDES, axis_spacing, geometry, indices, kinds, offsets,  # noqa: F401
                   periodic_axes, spans)

BLOCK_SIDE = {"bottom": "south", "top": "north", "left": "west", "right": "east"}
CODES = {"dirichlet": 1, "neumann": 2, "periodic": 3, "convective": 4}  # as the fill kernels know them (kernels/boundary.cu)


def conserving(case) -> bool:
    """Only Neumann sides of constant flux and periodic ones, no source: heat changes the sum of u only by the
    fixed fluxes (exactly, in exact arithmetic: solver.results.verify's check; the record's energy balance
    covers every case)."""
    from .medium import medium

    sides = [getattr(case.boundary, s) for s in SIDES]
    med = medium(case)
    plain = med.form == "alpha" or (not med.capacity_field and all(getattr(s, "flux", 0.0) == 0.0 for s in sides))
    return (not case.physics.source and all(s.kind in ("neumann", "periodic") for s in sides) and med.beta == 0
            and all(isinstance(getattr(s, "flux", 0.0), float) for s in sides) and plain)


def homogeneous(case) -> bool:
    """Zero Dirichlet values and zero fluxes, no convective side: the eigenmodes of solver.core.physics are exact
    solutions (with no source and one alpha: solver.core.exact.exact_solution_available)."""
    b = case.boundary
    return all(getattr(getattr(b, s), "value", 0.0) == 0.0 and getattr(getattr(b, s), "flux", 0.0) == 0.0
               and getattr(b, s).kind != "convective" for s in SIDES)


def raw_kinds(data: dict, axis: str) -> tuple[str, str]:
    """(lo, hi) kinds of an axis from an unvalidated case mapping (a number or no entry is Dirichlet)."""
    sides = (data.get("boundary") or {})
    return tuple(s.get("kind", "dirichlet") if isinstance(s := sides.get(name), dict) else "dirichlet"
                 for name in AXIS_SIDES[axis])


def axis_mode(lo: str, hi: str, n: int, k: int, index: np.ndarray) -> tuple[np.ndarray, float]:
    """(the discrete eigenmode with wave number k at points `index`, its angle theta): the 1-D sum of the
    two neighbours of every point, ghosts filled by the rules above, is 2 cos(theta) times the mode."""
    j = index.astype(np.float64)
    if lo == hi == "dirichlet":
        return np.sin(np.pi * k * (j + 1) / (n + 1)), math.pi * k / (n + 1)
    if lo == hi == "neumann":
        return np.cos(np.pi * k * (j + 0.5) / n), math.pi * k / n
    if lo == hi == "periodic":
        return np.cos(2 * np.pi * k * (j + 0.5) / n), 2 * math.pi * k / n
    theta = math.pi * (k - 0.5) / (n + 0.5)  # one Dirichlet side (the mode vanishes on its ghost), one Neumann
    return (np.sin(theta * (j + 1)) if lo == "dirichlet" else np.sin(theta * (n - j))), theta


def wave_numbers(lo: str, hi: str, n: int) -> range:
    """The wave numbers k of axis_mode that give distinct modes, none zero at every point, on n points:
    1..n with a Dirichlet side, 0..n-1 between Neumann sides, 0..(n-1)//2 on a periodic axis (its
    cosines: k and n - k are the same mode, and k = n/2 vanishes at every point)."""
    if lo == hi == "periodic":
        return range(0, (n - 1) // 2 + 1)
    if lo == hi == "neumann":
        return range(0, n)
    return range(1, n + 1)


def angle_range(lo: str, hi: str, n: int) -> tuple[float, float]:
    """(smallest, largest) angle theta over every discrete mode of the axis (a periodic axis's sines included)."""
    ks, none = wave_numbers(lo, hi, n), np.arange(0)
    top = n // 2 if lo == hi == "periodic" else ks[-1]
    return axis_mode(lo, hi, n, ks[0], none)[1], axis_mode(lo, hi, n, top, none)[1]


@dataclass(frozen=True, eq=False)
class Rule:
    side: str  # bottom, top, left, right
    kind: str
    value: float | np.ndarray = 0.0  # dirichlet: V; neumann: G h (layer m adds (2m+1) G h); convective: b; periodic: unused
    gain: float | np.ndarray = 1.0  # convective: a (ghost = a u + b)

    @property
    def code(self) -> int:
        return CODES[self.kind]

    def added(self, m: int):
        return (2 * m + 1) * self.value

    @property
    def along(self) -> bool:
        """Its value or gain varies along the side (an array)."""
        return np.ndim(self.value) > 0 or np.ndim(self.gain) > 0


@dataclass(frozen=True, eq=False)
class Fill:
    """The ghost-layer rules of one block's physical sides, in fill order; depth = ghost layers of its arrays;
    timed: the rules hold values at one time of data that vary in time (refill after every step even where
    every side is Dirichlet)."""

    rules: tuple[Rule, ...]
    dtype: str
    depth: int = 1
    timed: bool = False

    @property
    def constant(self) -> bool:
        """Only Dirichlet sides (or none) with values fixed in time: the ghosts never change, nothing to refill."""
        return all(r.kind == "dirichlet" for r in self.rules) and not self.timed

    def rule(self, side: str) -> Rule | None:
        return next((r for r in self.rules if r.side == side), None)

    def apply(self, u) -> None:
        """Fill the ghost layers of the physical sides of a host array `u` in place (array slices: row
        copies contiguous, column copies strided). The numba and GPU backends run kernels with the same
        rules, order and rounding (backends/numba_fill.py, backends/kernels/boundary.cu)."""
        d, t = self.depth, np.dtype(self.dtype).type
        ny, nx = u.shape[0] - 2 * d, u.shape[1] - 2 * d
        for r in self.rules:
            for m in range(d):
                ghost, inside, across = _layer(r.side, m, d, ny, nx)
                if r.kind == "dirichlet":
                    u[ghost] = r.value
                elif r.kind == "periodic":
                    u[ghost] = u[across]
                elif r.kind == "convective":
                    u[ghost] = _cast(r.gain, t) * u[inside] + _cast(r.value, t)
                elif np.ndim(r.value) == 0 and t(r.added(m)) == 0:
                    u[ghost] = u[inside]
                elif np.ndim(r.value) == 0:
                    np.add(u[inside], t(r.added(m)), out=u[ghost])
                else:
                    a = _cast(r.added(m), t)
                    u[ghost] = np.where(a == 0, u[inside], u[inside] + a)

    def tables(self, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(codes, values, gains) for kernels filling a field of `shape`: codes per side in SIDES order, 0 (no rule:
        a neighbour fills it) or CODES[kind]; values and gains (4, L) per point along each side's padded length
        (L the longer one), in float64 (kernels round as apply() does)."""
        longest = max(shape)
        codes, values, gains = np.zeros(4, dtype=np.int32), np.zeros((4, longest)), np.ones((4, longest))
        for r in self.rules:
            k = SIDES.index(r.side)
            codes[k] = r.code
            values[k, :np.size(r.value)] = r.value
            gains[k, :np.size(r.gain)] = r.gain
            if np.ndim(r.value) == 0:
                values[k] = r.value
            if np.ndim(r.gain) == 0:
                gains[k] = r.gain
        return codes, values, gains


def _cast(v, t):
    """A number or array rounded to the field's type."""
    return t(v) if np.ndim(v) == 0 else np.asarray(v, dtype=t)


def _layer(side: str, m: int, d: int, ny: int, nx: int):
    """(ghost, mirror, wrapped) index tuples for layer m of `side` (rows span the full width, columns the height)."""
    every = slice(None)
    if side == "bottom":
        return (d - 1 - m, every), (d + m, every), (d - 1 - m + ny, every)
    if side == "top":
        return (d + ny + m, every), (d + ny - 1 - m, every), (d + m, every)
    if side == "left":
        return (every, d - 1 - m), (every, d + m), (every, d - 1 - m + nx)
    return (every, d + nx + m), (every, d + nx - 1 - m), (every, d + m)


def make_fill(case, block, depth: int = 1, t: float = 0.0, frame=None) -> Fill:
    """The rules for the sides of `block` where it has no neighbour (see the module docstring), at time t, for a
    field of `frame` = (shape, owned): its shape (R, C) and the local (R0, C0) of its first owned point (None: the
    padded block, `depth` ghost layers on every side; a deep-halo field has more towards its neighbours). Values
    that vary along a side are given at every element along the field's ghost row or column, by the global index
    each element stands for (solver.core.grid.window's rule), so deep halos and moved blocks read the same data."""
    from .sides import varies_in_time

    rules = []
    if frame is None:
        frame = ((block.ny + 2 * depth, block.nx + 2 * depth), (depth, depth))
    for side in SIDES:
        if block.neighbours[BLOCK_SIDE[side]] is not None:
            continue
        spec = getattr(case.boundary, side)
        rules.append(side_rule(case, block, side, spec, frame, t))
        n = block.ny if side in AXIS_SIDES["y"] else block.nx
        if spec.kind != "dirichlet" and depth > n:
            raise ValueError(f"ghost depth {depth} on the {side} side exceeds the block's {n} points across it "
                             "(a mirror or a wrap reads that many owned points)")
    return Fill(tuple(rules), case.numerics.dtype, depth, timed=varies_in_time(case))


def along_positions(case, side: str, index: np.ndarray) -> np.ndarray:
    """Positions (case units) of points `index` along a side: x on the bottom and top sides, y on the others
    ((j + o) h, as solver.core.grid.positions)."""
    (dx, dy), _ = geometry(case)
    ox, oy = offsets(case)
    return (index + ox) * dx if side in AXIS_SIDES["y"] else (index + oy) * dy


def side_rule(case, block, side: str, spec, frame, t: float) -> Rule:
    """One side's rule for `block` on a field of `frame` = (shape, owned) (make_fill) at time t: values per element
    along the field's side where the side's data vary along it."""
    from .sides import convective_terms, value_at

    (dx, dy), _ = geometry(case)
    h = dy if side in AXIS_SIDES["y"] else dx
    if spec.kind == "periodic":
        return Rule(side, "periodic")
    along_y = side in AXIS_SIDES["y"]  # a ghost row: its points run along x
    (shape, owned), axis = frame, 1 if along_y else 0
    start, n = (block.cols[0], case.grid.nx) if along_y else (block.rows[0], case.grid.ny)
    along = indices(start, owned[axis], shape[axis], n, periodic_axes(case)[axis])
    at = lambda key: _per_wall(case, side, key, along, value_at(spec, side, key, t, along,  # noqa: E731
                                                              along_positions(case, side, along), n))
    if spec.kind == "dirichlet":
        return Rule(side, "dirichlet", at("value"))
    if spec.kind == "neumann":
        return Rule(side, "neumann", at("flux") * h)
    gain, value = convective_terms(at("h"), at("ambient"), h)
    return Rule(side, "convective", value, gain)


def _per_wall(case, side: str, key: str, along: np.ndarray, value):
    """The material form's h and flux over the wall's conductivity at each point (solver.core.sides)."""
    from .sides import per_conductivity, wall_conductivity

    if not per_conductivity(case, side, key):
        return value
    k = wall_conductivity(case, side, along)
    out = value / k
    return float(out[0]) if np.ndim(value) == 0 and np.all(k == k[0]) else out


def homogeneous_fill(fill: Fill, gains=None) -> Fill:
    """The same kinds with zero values (the error's boundary data: multigrid's coarse levels and residuals);
    gains: per side, the convective gains to use instead (a coarse level's spacing)."""
    rules = tuple(Rule(r.side, r.kind, 0.0, (gains or {}).get(r.side, r.gain)) for r in fill.rules)
    return Fill(rules, fill.dtype, fill.depth)


def constant_ghosts(case, blocks) -> bool:
    """No rank's physical ghost layers change between steps (every physical side of every block is
    Dirichlet): what time tiles need, which keep those layers fixed. Decided from the whole block list,
    so every rank takes the same choice (a deep-halo exchange must have the same depth on both ends)."""
    from .sides import varies_in_time

    return not varies_in_time(case) and all(getattr(case.boundary, side).kind == "dirichlet" for b in blocks
                                            for side in SIDES if b.neighbours[BLOCK_SIDE[side]] is None)


def fingerprint(case) -> dict:
    """boundary.<side> as a checkpoint records it: the number for a constant Dirichlet value (as before kinds
    existed), else the side's whole mapping."""
    out = {}
    for side in SIDES:
        spec = getattr(case.boundary, side)
        plain = spec.kind == "dirichlet" and isinstance(spec.value, float)
        out[f"boundary.{side}"] = spec.value if plain else spec.model_dump(mode="json")
    return out


def flux_per_step(case, w) -> float:
    """Exact change of sum(u) per heat step through the Neumann sides: wx ny h (G_left + G_right) + wy nx h (...)."""
    (dx, dy), _ = geometry(case)
    b, g = case.boundary, case.grid
    flux = {s: getattr(getattr(b, s), "flux", 0.0) for s in SIDES}
    return w.wx * g.ny * dx * (flux["left"] + flux["right"]) + w.wy * g.nx * dy * (flux["bottom"] + flux["top"])
