"""Nonlinear cases: a conductivity that depends on temperature (solver.case.materials: a table or a power law) or a
side or rim that radiates (an emissivity), solved by Newton's method (solver.nonlinear); the `newton` section that
tunes it, and the checks such a case needs beyond its fields' own."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Section
from .units import ABSOLUTE_ZERO
from .values import varying_values

SIDES = ("bottom", "top", "left", "right")


class Newton(Section):
    """Newton's method for a nonlinear case (k(T), radiation): each step one linear solve by GMRES on the Jacobian,
    preconditioned by one multigrid cycle (docs/nonlinear.md)."""

    jacobian: Literal["newton", "picard"] = Field("newton", description=(
        "newton: the exact Jacobian, dk/dT terms included (quadratic convergence near the solution); picard: the "
        "faces' conductances at the current field only, dk/dT left out (linear convergence); radiation's 4 eps sigma "
        "u^3 is in both"))
    forcing: float | None = Field(None, gt=0, lt=1, description=(
        "each step's linear solve stops at this relative residual; null: Eisenstat and Walker's choice 2 (loose far "
        "from the solution, tighter near it: superlinear convergence without solving each step exactly)"))
    line_search: Literal["backtracking", "none"] = Field("backtracking", description=(
        "backtracking: halve the step until the residual falls enough (Armijo's test with the forcing term; a cold "
        "start converges); none: full steps"))
    max_linear: int = Field(100, ge=1, le=10000, description="the most GMRES iterations of one step's linear solve")
    restart: int = Field(20, ge=2, le=200, description=(
        "GMRES restarts after this many iterations (each keeps one field of the grid per iteration)"))


def radiating_parts(case) -> list[str]:
    """The fields of the sides and rims that radiate (emissivity > 0), by their place in the case."""
    out = [f"boundary.{side}" for side in SIDES
           if getattr(getattr(case.boundary, side), "emissivity", 0.0) > 0]
    for k, r in enumerate(getattr(case.physics, "regions", None) or []):
        if getattr(getattr(r, "hole", None), "emissivity", 0.0) > 0:
            out.append(f"physics.regions.{k}.hole")
    outline = getattr(case.physics, "outline", None)
    if outline is not None and getattr(outline.rim, "emissivity", 0.0) > 0:
        out.append("physics.outline.rim")
    if getattr(getattr(case.physics, "faces", None), "emissivity", 0.0) > 0:
        out.append("physics.faces")
    return out


def check_nonlinear(case) -> None:
    """Radiation in the material form only; surroundings at or above absolute zero; a nonlinear case's temperature
    levels at or above absolute zero, and a method for it."""
    parts = radiating_parts(case)
    if parts and case.physics.material is None:
        raise ValueError(f"{parts[0]}.emissivity: radiation needs temperatures on an absolute scale and heat in watts, "
                         "which the diffusivity form (physics.alpha) does not have; use the material form (physics."
                         "material, with units.temperature K or degC) or set emissivity: 0")
    scale = case.units.temperature
    zero = ABSOLUTE_ZERO[scale]
    for where, v in _surroundings(case):
        if v < zero:
            raise ValueError(f"{where}: {v:g} {scale} is below absolute zero ({zero:g} {scale}); give a temperature at "
                             "or above it")
    if not case.nonlinear:
        return
    for where, v in _levels(case):
        if v < zero:
            raise ValueError(f"{where}: {v:g} {scale} is below absolute zero ({zero:g} {scale}), which k(T) and "
                             "radiation cannot take; give a temperature at or above it (in a case in K, 20 degC is "
                             "293.15, or write '20 degC')")
    why = "radiation" if parts else "a conductivity that depends on temperature"
    p = case.physics
    if p.equation == "laplace" and p.solver != "multigrid":
        raise ValueError(f"physics.solver: this steady state is nonlinear ({why}) and is solved by Newton's method "
                         "with multigrid; set physics.solver: multigrid")
    for where, v in _timed(case):
        raise ValueError(f"{where}: a table in time in a nonlinear case ({why}) is not supported (Newton's operator "
                         "holds its walls' data fixed); give a number, {along: ...} or {file: ...}")


def explicit_limit(case, linear: float) -> float:
    """The largest explicit step at the temperatures the case's data span ([lo, hi]: its sides', ambients', held
    and initial levels): the linear limit (the materials' reference k) with every face's k at its largest over [lo, hi]
    (k(T) / k_ref at most kappa_max for every law), and each wall's film at its largest slope, h + 4 eps sigma
    (hi + T0)^3, over its conduction length, a rim's over the finest spacing, the faces' radiation over the
    thickness. A bound where the field stays within [lo, hi]; each explicit step checks the field's own limit
    (solver.nonlinear.newton)."""
    from ..core.grid import geometry
    from .units import UnitSystem, kelvin_offset, stefan_boltzmann

    levels = [v for _, v in _levels(case)] + [v for _, v in _surroundings(case)]
    table = case.material_table()
    laws = case.conductivity_laws()
    lo, hi = (min(levels), max(levels)) if levels else (300.0 - kelvin_offset(case.units.temperature),) * 2
    kappa = max([law.largest(lo, hi) / table[name][0] for name, law in laws.items()] + [1.0])
    (dx, dy), _ = geometry(case)
    c0 = min(c for _, c in table.values()) if table else 1.0
    sigma = stefan_boltzmann(UnitSystem(case.units.length, case.units.time, case.units.temperature))
    t3 = (hi + kelvin_offset(case.units.temperature)) ** 3
    walls = 0.0
    for side in SIDES:
        spec = getattr(case.boundary, side)
        if spec.kind == "convective":
            h = max(varying_values(spec.h) or [0.0])
            walls += (h + 4.0 * spec.emissivity * sigma * t3) * 2.0 / (dy if side in ("bottom", "top") else dx)
    for _, rim in _rims(case):
        if rim.kind == "convective" and rim.emissivity > 0:
            walls += (rim.h + 4.0 * rim.emissivity * sigma * t3) * 2.0 / min(dx, dy)
    faces = case.physics.faces
    if faces is not None and faces.emissivity > 0:
        walls += faces.faces * 4.0 * faces.emissivity * sigma * t3 / case.physics.thickness
    return 1.0 / (kappa / linear + walls / c0)


def _timed(case):
    """(field, value) of the side, held and rim values given as tables in time."""
    from .values import in_time

    for side in SIDES:
        for key in ("value", "flux", "h", "ambient"):
            v = getattr(getattr(case.boundary, side), key, None)
            if in_time(v):
                yield f"boundary.{side}.{key}", v
    for k, r in enumerate(case.physics.regions):
        if r.held_in_time:
            yield f"physics.regions.{k}", r
    outline = case.physics.outline
    if outline is not None and in_time(getattr(outline.rim, "value", None)):
        yield "physics.outline.rim.value", outline.rim


def _surroundings(case):
    """(field, value) of every surroundings given."""
    for side in SIDES:
        v = getattr(getattr(case.boundary, side), "surroundings", None)
        if v is not None:
            yield f"boundary.{side}.surroundings", v
    for where, rim in _rims(case):
        if getattr(rim, "surroundings", None) is not None:
            yield f"{where}.surroundings", rim.surroundings
    if getattr(getattr(case.physics, "faces", None), "surroundings", None) is not None:
        yield "physics.faces.surroundings", case.physics.faces.surroundings


def _rims(case):
    for k, r in enumerate(getattr(case.physics, "regions", None) or []):
        if getattr(r, "hole", None) is not None:
            yield f"physics.regions.{k}.hole", r.hole
    outline = getattr(case.physics, "outline", None)
    if outline is not None:
        yield "physics.outline.rim", outline.rim


def _levels(case):
    """(field, value) of every temperature level a nonlinear case gives: the sides', the faces' ambient, the held
    objects' and rims', the initial field's."""
    b = case.boundary
    for side in SIDES:
        spec = getattr(b, side)
        for key in ("value", "ambient"):
            for v in varying_values(getattr(spec, key, None)) if spec.kind in ("dirichlet", "convective") else ():
                yield f"boundary.{side}.{key}", v
    p = case.physics
    if p.faces is not None:
        yield "physics.faces.ambient", p.faces.ambient
    for k, r in enumerate(p.regions):
        for v in varying_values(r.held) if r.held is not None else ():
            yield f"physics.regions.{k}.held", v
    for where, rim in _rims(case):
        for key in ("ambient", "value"):
            for v in varying_values(getattr(rim, key, None)):
                yield f"{where}.{key}", v
    init = case.initial
    for key in ("value", "background", "low", "high"):
        if init.kind in ("constant", "hotspot", "random") and hasattr(init, key):
            yield f"initial.{key}", getattr(init, key)
