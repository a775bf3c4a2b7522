"""The energy balance of a run: heat added by the sources, heat through each side and the faces, the change of the total.

The total is E = C0 depth sum(c u) dx dy (the heat content: the field times each cell's heat capacity, integrated over
the points' cells and the plate's thickness; solver.core.medium: c = C / C0, depth the thickness or 1; in the
diffusivity form C0 = c = depth = 1, E = sum(u) dx dy). Every term below carries the same factor C0 depth, so the
material form's balance is in the case's units of energy and power (J and W in SI). Summing an explicit step's update
over every point, the flux between two neighbours leaves one and enters the other (solver.core.physics: the
same face weight and difference, once with each sign), so only the walls and the sources remain:

    E(n+1) - E(n) = dt sum(q) dx dy + sum over sides of sum_along c (ghost - first) dx dy

with c the wall face's weight: alpha dt / h^2 (alpha a field: the first point's, which a wall face takes),
ghost and first the side's ghost layer and first owned points at t_n. In exact arithmetic this holds to the
last bit; in floating point each step rounds every point once, so the balance closes to a few ulps of
sum |u| a step (the record's `bound`). Implicit steps take the walls' fluxes at t_{n+1} (backward Euler) or
half at each end (Crank-Nicolson), and leave what each solve's residual leaves (closes to the solves'
tolerance). Laplace (a steady state): the rates sum(q) dx dy + the sides' fluxes (c = alpha / h^2) are what
the final residual leaves: zero for an exact solution.

Observed sides: the walls' terms need each step's field next to them. Where the loop computes steps one at a
time it reads them (two rows per side, each step); where it hands a batch to a backend (time tiles, GPU
launches) it does not see the steps in between, so the sides' part is what the balance leaves over the batch
(`sides_observed: false`: the record says which). Sources are known without the field: their sum over every
step is always exact.
"""

from __future__ import annotations

import numpy as np

from . import sources
from .boundary import AXIS_SIDES, BLOCK_SIDE, SIDES
from .materials import alpha_at
from .medium import capacity_at, medium
from .physics import THETA, spacing

ULPS = 8.0  # rounding per explicit step against sum |u| (as solver.results.verify's conservation check)


def _wall_faces(case, side: str, idx: np.ndarray) -> np.ndarray:
    from .plate import wall_faces

    return wall_faces(case, side, idx)


def _near_rim(d: np.ndarray, f: np.ndarray) -> tuple:
    """A rim's diagonal and source over the box of the owned points where either is non-zero: (box (i0, i1, j0, j1)
    in owned indices, d, f there), or (None, None, None) where the rim reaches none of them."""
    reach = (d != 0) | (f != 0)
    if not reach.any():
        return None, None, None
    rows, cols = np.flatnonzero(reach.any(axis=1)), np.flatnonzero(reach.any(axis=0))
    i0, i1, j0, j1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    return (i0, i1, j0, j1), d[i0:i1, j0:j1], f[i0:i1, j0:j1]


class Balance:
    """Accumulates one rank's terms; `result(comm)` reduces them over the ranks (collective)."""

    def __init__(self, case, block, dt: float, first_step: int, plan=None):
        self.case, self.block, self.dt = case, block, dt
        self.plan = plan  # solver.core.events.Plan: each step's length and source weights (None: every step dt)
        (dx, dy) = spacing(case)
        self.med = medium(case)
        self.cell = dx * dy * self.med.c0 * self.med.depth  # what a sum over points is multiplied by
        self._shapes()
        self.capacity = self._capacity()
        self.faces = 0.0  # the faces' sink's heat (beta > 0)
        self.rims = {label: 0.0 for label in self.rim_terms or {}}  # the heat each rim (a hole's, a held object's,
        # the outline's: solver.core.plate) puts in
        self.c = {side: self._wall(side) for side in SIDES if self._physical(side)}
        self.sides = {side: 0.0 for side in self.c}
        self.source = 0.0
        self.steps = 0
        self.observed = True
        self.final_known = False  # steady() has read the final field's rates (finish() then reuses them)
        self.first_step = first_step
        self.start = self.end = None
        self.scale = 0.0  # largest sum |u| dx dy seen (the rounding bound's scale)
        self._sums: dict = {}

    def moved(self, block) -> None:
        """A rebalance gave this rank another block (parallel.balance: dynamic): the walls' weights and the
        sources' sums follow it; the terms summed so far stay."""
        self.block, self._sums = block, {}
        self._shapes()
        self.capacity = self._capacity()
        self.c = {side: self._wall(side) for side in SIDES if self._physical(side)}
        self.sides = {side: self.sides.get(side, 0.0) for side in self.c}

    @property
    def has_faces(self) -> bool:
        """The faces exchange heat (the record then has their term)."""
        return self.med.beta > 0

    # what a rank holds -----------------------------------------------------------------------------------
    def _physical(self, side: str) -> bool:
        return (self.block.neighbours[BLOCK_SIDE[side]] is None
                and getattr(self.case.boundary, side).kind != "periodic")

    def _wall(self, side: str) -> np.ndarray:
        """The wall faces over h^2 at the side's owned points (alpha: the first points', as a wall face takes; the
        material form: the faces the operator takes, solver.core.plate.wall_faces, over C0)."""
        b, case = self.block, self.case
        (dx, dy) = spacing(case)
        ny, nx = case.shape
        rows, cols = np.arange(*b.rows), np.arange(*b.cols)
        material = self.med.form == "material"
        if side in AXIS_SIDES["y"]:
            first = np.array([0 if side == "bottom" else ny - 1])
            a = _wall_faces(case, side, cols) / self.med.c0 if material else alpha_at(case, first, cols)[0]
            c = a / dy**2
            return c if self.active is None else c * self.active[0 if side == "bottom" else -1, :]
        first = np.array([0 if side == "left" else nx - 1])
        a = _wall_faces(case, side, rows) / self.med.c0 if material else alpha_at(case, rows, first)[:, 0]
        c = a / dx**2
        return c if self.active is None else c * self.active[:, 0 if side == "left" else -1]

    def _shapes(self) -> None:
        """The plate's shapes on the owned points (solver.core.operator.shape_terms): which points are plate (active:
        not held, not in a hole) and the rims' diagonal and source there; without shapes every point is active."""
        b = self.block
        self.active, self.rim_terms = None, None
        if self.med.shapes:
            from .plate import cells

            cl = cells(self.case, np.arange(*b.rows), np.arange(*b.cols))
            self.active = cl["held"] == 0
            c0 = self.med.c0
            self.rim_terms = {label: _near_rim(d / c0, f / c0) for label, (d, f) in cl["rims"].items()}

    def _owned(self, backend, u) -> np.ndarray:
        """The owned points of a one-layer field, float64 (read in place where the field is: no copy), zero where they
        are not plate. (A copy cost 10 ms a step at 2048^2: the faces' sum, taken every step where the loop sees steps
        one by one, was most of an explicit step in the material form.)"""
        part = np.asarray(backend.get(u, (1, u.shape[0] - 1, 1, u.shape[1] - 1)), dtype=np.float64)
        return part if self.active is None else np.where(self.active, part, 0.0)

    def _capacity(self):
        """c over the block's owned points where it varies (None: 1); zero where they are not plate."""
        if not self.med.capacity_field:
            return None
        b = self.block
        c = capacity_at(self.case, np.arange(*b.rows), np.arange(*b.cols))
        return c if self.active is None else np.where(self.active, c, 0.0)

    def total(self, backend, u) -> tuple[float, float]:
        """(sum c u, sum |c u|) dx dy (times C0 depth) over the owned points of a one-layer field."""
        part = self._owned(backend, u)
        if self.capacity is not None:
            part = self.capacity * part
        return float(part.sum()) * self.cell, float(np.abs(part).sum()) * self.cell

    def face_rate(self, backend, u) -> float:
        """The heat the faces take in per unit time: beta sum(T_b - u) dx dy (times C0 depth); 0 without a sink."""
        if self.med.beta == 0:
            return 0.0
        part = self._owned(backend, u)
        points = part.size if self.active is None else int(self.active.sum())
        return self.med.beta * (self.med.ambient * points - float(np.sum(part))) * self.cell

    def rim_rates(self, backend, u) -> dict:
        """The heat each rim puts in per unit time: sum(f - d u) dx dy (times C0 depth), by label; read over the
        box of the points each rim reaches (_near_rim: d and f are zero elsewhere, held points included)."""
        out = {}
        for label, (box, d, f) in (self.rim_terms or {}).items():
            if box is None:
                out[label] = 0.0
                continue
            i0, i1, j0, j1 = box
            part = backend.get(u, (1 + i0, 1 + i1, 1 + j0, 1 + j1)).astype(np.float64)
            out[label] = float(np.sum(f - d * part)) * self.cell
        return out

    def fluxes(self, backend, u, rims: bool = True) -> dict:
        """sum_along c (ghost - first) dx dy per physical side of a one-layer field (per unit time), with the
        faces' ("faces") and the rims' ("rims": by label) heat flows where the case has them."""
        out = {side: float(np.sum(terms)) * self.cell for side, terms in self.wall_terms(backend, u).items()}
        if self.med.beta > 0:
            out["faces"] = self.face_rate(backend, u)
        if self.rim_terms is not None and rims:
            out["rims"] = self.rim_rates(backend, u)
        return out

    def wall_terms(self, backend, u, sides=None) -> dict:
        """c (ghost - first) at this rank's points along each physical side (or those of `sides`) of a one-layer
        field, float64 (times dx dy: the heat entering there per unit time; probes sum them exactly)."""
        out = {}
        for side in self.c:
            if sides is not None and side not in sides:
                continue
            ghost, first = wall_lines(side, u.shape)
            out[side] = self.terms(side, backend.get(u, ghost), backend.get(u, first))
        return out

    def terms(self, side: str, ghost, first, out=None) -> np.ndarray:
        """wall_terms' c (ghost - first) along one side from its ghost and first lines (host arrays, any shape); with
        `out` ([line, point], float64), first holds several first lines ([line, point], any strides), the ghost line
        the same for each, and the terms go to out."""
        g = np.asarray(ghost, dtype=np.float64).reshape(-1)  # (float64 lines as they are: no copy)
        if out is None:
            return self.c[side] * (g - np.asarray(first, dtype=np.float64).reshape(-1))
        np.subtract(g, first, out=out)
        return np.multiply(self.c[side], out, out=out)

    def source_rate(self, terms) -> float:
        """sum(q) dx dy over the owned points for weighted terms (solver.core.sources.step_weights)."""
        if terms not in self._sums:
            b = self.block
            q = sources.q_weighted(self.case, terms, np.arange(*b.rows), np.arange(*b.cols)) if terms else np.zeros(1)
            if terms and self.active is not None:
                q = np.where(self.active, q, 0.0)
            self._sums[terms] = float(q.sum()) * self.cell
        return self._sums[terms]

    # the steps ------------------------------------------------------------------------------------------
    def begin(self, backend, u) -> None:
        self.start, self.scale = self.total(backend, u)

    def _span(self, step: int):
        """The step from `step` (its length and times)."""
        if self.plan is not None:
            return self.plan.span(step)
        from .events import Span

        return Span(step, step * self.dt, (step + 1) * self.dt, self.dt)

    def explicit(self, backend, u, step: int, after=None) -> None:
        """One explicit step from `step`, u the field at its start (its ghosts at t_n)."""
        dt = self._span(step).dt
        rates = self.fluxes(backend, u, rims=False)
        for side in self.sides:
            self.sides[side] += dt * rates[side]
        self.faces += dt * rates.get("faces", 0.0)
        if self.rim_terms is not None:  # taken implicitly at each point (solver.core.operator): at the step's end
            for label, rate in self.rim_rates(backend, u if after is None else after).items():
                self.rims[label] += dt * rate
        self._sources(step, 1)

    def batch(self, step: int, n: int) -> None:
        """n steps from `step` the loop did not see one by one: their sources only."""
        self.observed = False
        self._sources(step, n)

    def implicit(self, before: dict, after: dict, span) -> None:
        """One implicit step `span`: the sides' (faces', rims') fluxes of u^n (before) and u^{n+1} (after), weighted
        by the scheme."""
        theta = THETA[self.case.physics.scheme]
        self._weigh([before, after], [1.0 - theta, theta], span.dt)
        self._add_source(span)

    def stages(self, fluxes: list, span) -> None:
        """One TR-BDF2 step `span` (solver.multigrid.adaptive): the fluxes of u_n, u_g and u_1 weighted as the
        method integrates f: (w, w, d)."""
        from .trbdf2 import D, W

        self._weigh(fluxes, [W, W, D], span.dt)
        self._add_source(span)

    def _weigh(self, rates: list, weights: list, dt: float) -> None:
        """Adds dt sum_k weights[k] rates[k] to every side, the faces and every rim."""
        for side in self.sides:
            self.sides[side] += dt * sum(w * r[side] for w, r in zip(weights, rates))
        self.faces += dt * sum(w * r.get("faces", 0.0) for w, r in zip(weights, rates))
        for label in self.rims:
            self.rims[label] += dt * sum(w * r["rims"][label] for w, r in zip(weights, rates))

    def _sources(self, step: int, n: int) -> None:
        for k in range(step, step + n):
            self._add_source(self._span(k))

    def _add_source(self, span) -> None:
        self.source += span.dt * self.source_rate(sources.step_weights(self.case, span))
        self.steps += 1

    def finish(self, backend, u) -> None:
        self.end, scale = self.total(backend, u)
        self.scale = max(self.scale, scale)
        if not self.final_known:
            self.final = self.fluxes(backend, u)  # the rates at the final field (the answers' heat flows)

    def steady(self, backend, u) -> None:
        """Laplace: the rates of the final field (per unit time: dt = 1), which are also finish()'s."""
        self.sides = self.fluxes(backend, u)
        self.final, self.final_known = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.sides.items()}, True
        self.faces = self.sides.pop("faces", 0.0)
        self.rims = self.sides.pop("rims", {})
        self.source = self.source_rate(sources.every_weight(self.case))

    # the record ------------------------------------------------------------------------------------------
    def result(self, comm, dtype: str) -> dict:
        """The record's energy section (collective): every term over all ranks."""
        parts = comm.allgather({"sides": self.sides, "source": self.source, "start": self.start, "end": self.end,
                                "scale": self.scale, "observed": self.observed, "faces": self.faces, "rims": self.rims,
                                "final": getattr(self, "final", {})})
        final = {k: sum(p["final"].get(k, 0.0) for p in parts) for k in (*SIDES, "faces")
                 if any(k in p["final"] for p in parts)}
        for label in (parts[0]["final"].get("rims") or {}):
            final[f"rim {label}"] = sum(p["final"]["rims"][label] for p in parts)
        sides = {s: sum(p["sides"].get(s, 0.0) for p in parts) for s in SIDES
                 if any(s in p["sides"] for p in parts)}
        source = sum(p["source"] for p in parts)
        observed = all(p["observed"] for p in parts)
        faces = sum(p["faces"] for p in parts) if self.has_faces else None
        rims = {k: sum(p["rims"].get(k, 0.0) for p in parts) for k in parts[0]["rims"]} if self.med.shapes else None
        walls = sum(sides.values()) + (faces or 0.0) + sum((rims or {}).values())
        if self.case.physics.equation == "laplace":
            rest = source + walls
            out = {"kind": "steady", "sources": source, "sides": sides, "imbalance": rest,
                   "relative": abs(rest) / max(abs(source) + sum(abs(v) for v in sides.values()) + abs(faces or 0.0),
                                               1e-300),
                   "note": "rates per unit time at the final field; the imbalance is what the residual leaves"}
            out["final_rates"] = final
            out["relative"] = abs(rest) / max(abs(source) + sum(abs(v) for v in sides.values()) + abs(faces or 0.0)
                                              + sum(abs(v) for v in (rims or {}).values()), 1e-300)
            return {**out, **({} if faces is None else {"faces": faces}), **({} if rims is None else {"rims": rims})}
        start, end = sum(p["start"] for p in parts), sum(p["end"] for p in parts)
        change = end - start
        out = {"kind": self.case.physics.scheme, "initial": start, "final": end, "change": change, "sources": source,
               "steps": self.steps, "sides_observed": observed, "final_rates": final}
        if observed:
            rest = change - source - walls
            bound = ULPS * float(np.finfo(dtype).eps) * (self.steps + 1) * sum(p["scale"] for p in parts)
            terms = (abs(change) + abs(source) + sum(abs(v) for v in sides.values()) + abs(faces or 0.0)
                     + sum(abs(v) for v in (rims or {}).values()))
            out.update(sides=sides, imbalance=rest, relative=abs(rest) / max(terms, 1e-300), bound=bound,
                       closed=bool(abs(rest) <= bound) if self.case.physics.scheme == "explicit" else None)
            if faces is not None:
                out["faces"] = faces
            if rims is not None:
                out["rims"] = rims
        else:
            out.update(sides=None, sides_total=change - source, **({} if faces is None else {"faces": None}),
                       note="the steps were computed in batches (time tiles or device launches), so each side's "
                            "flux was not seen step by step; sides_total is what the change leaves after the sources")
        return out


def wall_lines(side: str, shape: tuple[int, int]):
    """(ghost, first) regions of a one-layer field for a side (owned span only)."""
    ny, nx = shape[0] - 2, shape[1] - 2
    if side == "bottom":
        return (0, 1, 1, nx + 1), (1, 2, 1, nx + 1)
    if side == "top":
        return (ny + 1, ny + 2, 1, nx + 1), (ny, ny + 1, 1, nx + 1)
    if side == "left":
        return (1, ny + 1, 0, 1), (1, ny + 1, 1, 2)
    return (1, ny + 1, nx + 1, nx + 2), (1, ny + 1, nx, nx + 1)
