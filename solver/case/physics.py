"""`physics`: the equation, its coefficients and sources, the time step and the scheme."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import MAX_LENGTH, Section
from .materials import Alpha
from .sources import Source


class Physics(Section):
    equation: Literal["heat", "laplace"] = "heat"
    solver: Literal["jacobi", "multigrid"] = Field("jacobi", description=(
        "laplace: jacobi (one sweep per iteration) or multigrid (cycles with Jacobi sweeps as smoother; the "
        "multigrid section sets them)"))
    alpha: Alpha = Field(1.0, description=(
        "diffusivity: a number, or a field {background: A, regions: [{kind: rectangle, lower, upper, value}, {kind: "
        "disk, center, radius, value}]} (later regions win) or {kind: file, path, dataset} (a (ny, nx) array); the "
        "flux between two points uses the harmonic mean of their values. Heat: u_t = div(alpha grad u) + q; laplace: "
        "0 = div(alpha grad u) + q"))
    source: list[Source] = Field(default_factory=list, max_length=1000, description=(
        "heat sources q(x, y), summed: {kind: constant, value}, {kind: gaussian, center, width, amplitude}, {kind: "
        "rectangle, lower, upper, value}, {kind: file, path, dataset, scale}; each may carry active: [t_start, t_end] "
        "(heat). Units: u per unit time (heat), so laplace solves 0 = div(alpha grad u) + q"))
    dt: float | None = Field(None, ge=1 / MAX_LENGTH, le=MAX_LENGTH, description=(
        "time step; null = safety x the explicit stability limit (explicit), cfl x that limit (implicit schemes)"))
    safety: float = Field(0.9, gt=0, le=1, description="fraction of the stable dt used when dt is null")
    scheme: Literal["explicit", "backward-euler", "crank-nicolson"] = Field("explicit", description=(
        "heat: explicit (FTCS, dt up to the stability limit), backward-euler or crank-nicolson (implicit: each "
        "step one multigrid solve, any dt; crank-nicolson rings on sharp features past about 5x the explicit limit: "
        "validate warns, docs/multigrid.md)"))
    cfl: float = Field(100.0, gt=0, le=MAX_LENGTH, description=(
        "implicit schemes with dt null: dt = cfl x the explicit stability limit"))

