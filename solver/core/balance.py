"""The energy balance of a run: heat added by the sources, heat through each side, the change of the total.

The total is E = sum(u) dx dy (the field integrated over the points' cells). Summing an explicit step's update
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
from .physics import THETA, spacing

ULPS = 8.0  # rounding per explicit step against sum |u| (as solver.results.verify's conservation check)


class Balance:
    """Accumulates one rank's terms; `result(comm)` reduces them over the ranks (collective)."""

    def __init__(self, case, block, dt: float, first_step: int, plan=None):
        self.case, self.block, self.dt = case, block, dt
        self.plan = plan  # solver.core.events.Plan: each step's length and source weights (None: every step dt)
        (dx, dy) = spacing(case)
        self.cell = dx * dy
        self.c = {side: self._wall(side) for side in SIDES if self._physical(side)}
        self.sides = {side: 0.0 for side in self.c}
        self.source = 0.0
        self.steps = 0
        self.observed = True
        self.first_step = first_step
        self.start = self.end = None
        self.scale = 0.0  # largest sum |u| dx dy seen (the rounding bound's scale)
        self._sums: dict = {}

    def moved(self, block) -> None:
        """A rebalance gave this rank another block (parallel.balance: dynamic): the walls' weights and the
        sources' sums follow it; the terms summed so far stay."""
        self.block, self._sums = block, {}
        self.c = {side: self._wall(side) for side in SIDES if self._physical(side)}
        self.sides = {side: self.sides.get(side, 0.0) for side in self.c}

    # what a rank holds -----------------------------------------------------------------------------------
    def _physical(self, side: str) -> bool:
        return (self.block.neighbours[BLOCK_SIDE[side]] is None
                and getattr(self.case.boundary, side).kind != "periodic")

    def _wall(self, side: str) -> np.ndarray:
        """alpha / h^2 at the side's owned points (alpha: the first points', as a wall face takes)."""
        b, case = self.block, self.case
        (dx, dy) = spacing(case)
        ny, nx = case.shape
        rows, cols = np.arange(*b.rows), np.arange(*b.cols)
        if side in AXIS_SIDES["y"]:
            first = np.array([0 if side == "bottom" else ny - 1])
            return alpha_at(case, first, cols)[0] / dy**2
        first = np.array([0 if side == "left" else nx - 1])
        return alpha_at(case, rows, first)[:, 0] / dx**2

    def total(self, backend, u) -> tuple[float, float]:
        """(sum u, sum |u|) dx dy over the owned points of a one-layer field."""
        part = backend.get(u, (1, u.shape[0] - 1, 1, u.shape[1] - 1)).astype(np.float64)
        return float(part.sum()) * self.cell, float(np.abs(part).sum()) * self.cell

    def fluxes(self, backend, u) -> dict:
        """sum_along c (ghost - first) dx dy per physical side of a one-layer field (per unit time)."""
        return {side: float(np.sum(terms)) * self.cell for side, terms in self.wall_terms(backend, u).items()}

    def wall_terms(self, backend, u, sides=None) -> dict:
        """c (ghost - first) at this rank's points along each physical side (or those of `sides`) of a one-layer
        field, float64 (times dx dy: the heat entering there per unit time; probes sum them exactly)."""
        out = {}
        for side, c in self.c.items():
            if sides is not None and side not in sides:
                continue
            ghost, first = _rows(side, u.shape)
            g = backend.get(u, ghost).astype(np.float64).reshape(-1)
            f = backend.get(u, first).astype(np.float64).reshape(-1)
            out[side] = c * (g - f)
        return out

    def source_rate(self, terms) -> float:
        """sum(q) dx dy over the owned points for weighted terms (solver.core.sources.step_weights)."""
        if terms not in self._sums:
            b = self.block
            q = sources.q_weighted(self.case, terms, np.arange(*b.rows), np.arange(*b.cols)) if terms else np.zeros(1)
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

    def explicit(self, backend, u, step: int) -> None:
        """One explicit step from `step`, u the field at its start (its ghosts at t_n)."""
        dt = self._span(step).dt
        for side, f in self.fluxes(backend, u).items():
            self.sides[side] += dt * f
        self._sources(step, 1)

    def batch(self, step: int, n: int) -> None:
        """n steps from `step` the loop did not see one by one: their sources only."""
        self.observed = False
        self._sources(step, n)

    def implicit(self, before: dict, after: dict, span) -> None:
        """One implicit step `span`: the sides' fluxes of u^n (before) and u^{n+1} (after), weighted by the scheme."""
        theta = THETA[self.case.physics.scheme]
        for side in self.sides:
            self.sides[side] += span.dt * ((1.0 - theta) * before[side] + theta * after[side])
        self._add_source(span)

    def stages(self, fluxes: list, span) -> None:
        """One TR-BDF2 step `span` (solver.multigrid.adaptive): the sides' fluxes of u_n, u_g and u_1 weighted as the
        method integrates f: (w, w, d)."""
        from .trbdf2 import D, W

        for side in self.sides:
            self.sides[side] += span.dt * (W * fluxes[0][side] + W * fluxes[1][side] + D * fluxes[2][side])
        self._add_source(span)

    def _sources(self, step: int, n: int) -> None:
        for k in range(step, step + n):
            self._add_source(self._span(k))

    def _add_source(self, span) -> None:
        self.source += span.dt * self.source_rate(sources.step_weights(self.case, span))
        self.steps += 1

    def finish(self, backend, u) -> None:
        self.end, scale = self.total(backend, u)
        self.scale = max(self.scale, scale)

    def steady(self, backend, u) -> None:
        """Laplace: the rates of the final field (per unit time: dt = 1)."""
        self.sides = self.fluxes(backend, u)
        self.source = self.source_rate(sources.every_weight(self.case))

    # the record ------------------------------------------------------------------------------------------
    def result(self, comm, dtype: str) -> dict:
        """The record's energy section (collective): every term over all ranks."""
        parts = comm.allgather({"sides": self.sides, "source": self.source, "start": self.start, "end": self.end,
                                "scale": self.scale, "observed": self.observed})
        sides = {s: sum(p["sides"].get(s, 0.0) for p in parts) for s in SIDES
                 if any(s in p["sides"] for p in parts)}
        source = sum(p["source"] for p in parts)
        observed = all(p["observed"] for p in parts)
        if self.case.physics.equation == "laplace":
            rest = source + sum(sides.values())
            return {"kind": "steady", "sources": source, "sides": sides, "imbalance": rest,
                    "relative": abs(rest) / max(abs(source) + sum(abs(v) for v in sides.values()), 1e-300),
                    "note": "rates per unit time at the final field; the imbalance is what the residual leaves"}
        start, end = sum(p["start"] for p in parts), sum(p["end"] for p in parts)
        change = end - start
        out = {"kind": self.case.physics.scheme, "initial": start, "final": end, "change": change, "sources": source,
               "steps": self.steps, "sides_observed": observed}
        if observed:
            rest = change - source - sum(sides.values())
            bound = ULPS * float(np.finfo(dtype).eps) * (self.steps + 1) * sum(p["scale"] for p in parts)
            terms = abs(change) + abs(source) + sum(abs(v) for v in sides.values())
            out.update(sides=sides, imbalance=rest, relative=abs(rest) / max(terms, 1e-300), bound=bound,
                       closed=bool(abs(rest) <= bound) if self.case.physics.scheme == "explicit" else None)
        else:
            out.update(sides=None, sides_total=change - source,
                       note="the steps were computed in batches (time tiles or device launches), so each side's "
                            "flux was not seen step by step; sides_total is what the change leaves after the sources")
        return out


def _rows(side: str, shape: tuple[int, int]):
    """(ghost, first) regions of a one-layer field for a side (owned span only)."""
    ny, nx = shape[0] - 2, shape[1] - 2
    if side == "bottom":
        return (0, 1, 1, nx + 1), (1, 2, 1, nx + 1)
    if side == "top":
        return (ny + 1, ny + 2, 1, nx + 1), (ny, ny + 1, 1, nx + 1)
    if side == "left":
        return (1, ny + 1, 0, 1), (1, ny + 1, 1, 2)
    return (1, ny + 1, nx + 1, nx + 2), (1, ny + 1, nx, nx + 1)
