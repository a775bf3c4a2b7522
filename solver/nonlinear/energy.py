"""The energy balance of a nonlinear run: the terms of solver.core.balance, with the walls' and rims' rates taken from
the nonlinear operator (a Dirichlet wall's conduction through faces whose k follows the field; a film's loss, its
radiated part apart) instead of the linear ghost rules."""

from __future__ import annotations

from ..core.balance import Balance


class NonlinearBalance(Balance):
    def __init__(self, case, block, dt: float, first_step: int, operator, padded, plan=None):
        """operator: solver.nonlinear.operator.Operator; padded(): the finest level's padded field the loop's
        one-layer view belongs to (its walls' ghosts filled: by the last residual's fill, or after an explicit step's
        update: Newton.explicit_step); plan: as Balance's."""
        super().__init__(case, block, dt, first_step, plan)
        self.op, self.padded = operator, padded
        self.radiated: dict = {}

    def fluxes(self, backend, u, rims: bool = True) -> dict:
        """Per physical side, the heat into the plate per unit time; the faces' and each rim's; the radiated parts."""
        rates = self.op.rates(self.padded())
        out = {side: rates["sides"].get(side, 0.0) * self.cell for side in self.c}
        if self.has_faces:  # convection (beta) and radiation
            out["faces"] = self.face_rate(backend, u) + rates["radiated"].get("faces", 0.0) * self.cell
        if self.rim_terms is not None:
            out["rims"] = {label: rates["rims"].get(label, 0.0) * self.cell for label in self.rim_terms}
        self.radiated = {label: v * self.cell for label, v in rates["radiated"].items()}
        return out

    def explicit(self, backend, u, step: int, after=None) -> None:
        """One explicit step from `step`: every wall's and rim's rate at its start (the step evaluates them there)."""
        dt = self._span(step).dt
        rates = self.fluxes(backend, u)
        for side in self.sides:
            self.sides[side] += dt * rates[side]
        self.faces += dt * rates.get("faces", 0.0)
        for label, rate in rates.get("rims", {}).items():
            self.rims[label] += dt * rate
        self._sources(step, 1)

    @property
    def has_faces(self) -> bool:
        return self.med.beta > 0 or self.op.face_e > 0

    def result(self, comm, dtype: str) -> dict:
        out = super().result(comm, dtype)
        parts = comm.allgather(self.radiated)
        labels = sorted({k for p in parts for k in p})
        if labels:
            out["radiated"] = {k: sum(p.get(k, 0.0) for p in parts) for k in labels}
            out["radiated_note"] = "heat the radiating sides and rims put in per unit time (negative: given off), " \
                                   "part of their rates above"
        return out
