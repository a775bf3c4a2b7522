"""`physics`: the equation, what the plate is made of (materials, or a diffusivity), its sources and face cooling,
the time step and the scheme."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_serializer, model_validator

from .base import MAX_LENGTH, Section
from .materials import NAME, Alpha
from .regions import Outline, PlateRegion
from .sources import Source
from .units import Length, Temperature, Time, quantity

HeatTransfer = quantity("heat_transfer")


class FaceCooling(Section):
    """Heat lost through the plate's faces (a thin plate or a board cooled by air over its area): a sink
    -faces h (u - ambient) / thickness per unit volume (faces: 2 for both faces, 1 for one)."""

    h: HeatTransfer = Field(ge=0, le=MAX_LENGTH, description="the faces' transfer coefficient (W/(m^2 K))")
    ambient: Temperature = Field(description="the temperature of the air (or fluid) over the faces")
    faces: Literal[1, 2] = Field(2, description="how many faces are cooled: 2 (both) or 1")
    emissivity: float = Field(0.0, ge=0, le=1, description=(
        "the faces' emissivity, 0 to 1: they also radiate faces emissivity sigma (u^4 - surroundings^4) / thickness "
        "per unit volume, temperatures in kelvin (a spacecraft panel, a board in still air); 0: no radiation"))
    surroundings: Temperature | None = Field(None, description=(
        "the temperature the faces radiate to (a level; deep space about 3 K); null: the ambient"))


class Physics(Section):
    equation: Literal["heat", "laplace"] = "heat"
    solver: Literal["jacobi", "multigrid"] = Field("jacobi", description=(
        "laplace: jacobi (one sweep per iteration) or multigrid (cycles with Jacobi sweeps as smoother; the "
        "multigrid section sets them)"))
    material: str | None = Field(None, pattern=NAME, max_length=100, description=(
        "the material form: the plate's material (a name from `materials:` or the built-in library: copper, aluminium, "
        "silicon, steel, fr4, tim, ...); C u_t = div(k grad u) + q in watts. null: the diffusivity form (alpha)"))
    regions: list[PlateRegion] = Field(default_factory=list, max_length=1000, description=(
        "material form: shapes in the plate, later ones winning: {kind: rectangle, lower, upper}, {kind: disk, "
        "center, radius}, {kind: polygon, points}, {kind: mask, path, extent} (an image or array), each one of "
        "material: NAME, held: T (an object held at a temperature) or hole: RIM (insulated, {kind: neumann, flux}, "
        "{kind: convective, h, ambient}, {kind: dirichlet, value}); optional name"))
    outline: Outline | None = Field(None, description=(
        "material form: the plate's own shape where it is not the grid's rectangle (a rectangle, disk, polygon or "
        "mask with a rim condition): everything outside it is a hole"))
    thickness: Length | None = Field(None, gt=0, le=MAX_LENGTH, description=(
        "material form: the plate's thickness: powers in W and W/m^2 and face cooling need it; null: results per unit "
        "thickness"))
    faces: FaceCooling | None = Field(None, description=(
        "material form: cooling from the plate's faces {h, ambient, faces}: -faces h (u - ambient) / thickness per "
        "unit volume; null: insulated faces"))
    alpha: Alpha = Field(1.0, description=(
        "the diffusivity form: a number, or a field {background: A, regions: [{kind: rectangle, lower, upper, value}, "
        "{kind: disk, center, radius, value}]} (later regions win, each covering the grid points inside it) or {kind: "
        "file, path, dataset} (a (ny, nx) array); the flux between two points uses the harmonic mean of their values. "
        "Heat: u_t = div(alpha grad u) + q; laplace: 0 = div(alpha grad u) + q"))
    source: list[Source] = Field(default_factory=list, max_length=1000, description=(
        "heat sources q(x, y), summed: {kind: constant}, {kind: gaussian, center, width, amplitude}, {kind: "
        "rectangle, lower, upper}, {kind: disk, center, radius}, {kind: file, path, dataset, scale, unit, extent}; a "
        "density (value; material form W/m^3, or W/m^2 with thickness; diffusivity form temperature per time) or, in "
        "the material form, a total power (power: '5 W'); each may carry active: [t_start, t_end] (heat) and a name"))
    dt: Time | None = Field(None, ge=1 / MAX_LENGTH, le=MAX_LENGTH, description=(
        "time step; null = safety x the explicit stability limit (explicit), cfl x that limit (implicit schemes)"))
    safety: float = Field(0.9, gt=0, le=1, description="fraction of the stable dt used when dt is null")
    scheme: Literal["explicit", "backward-euler", "crank-nicolson"] = Field("explicit", description=(
        "heat: explicit (FTCS, dt up to the stability limit), backward-euler or crank-nicolson (implicit: each "
        "step one multigrid solve, any dt; crank-nicolson rings on sharp features past about 5x the explicit limit: "
        "validate warns, docs/multigrid.md)"))
    cfl: float = Field(100.0, gt=0, le=MAX_LENGTH, description=(
        "implicit schemes with dt null: dt = cfl x the explicit stability limit"))

    @model_validator(mode="after")
    def _one_form(self) -> Physics:
        """The material form or the diffusivity form, not both; the material form's own fields need it."""
        if self.material is not None:
            if "alpha" in self.model_fields_set:
                raise ValueError("physics.alpha: the plate is given twice (material and alpha); keep physics.material (materials "
                                 "with k and heat capacity) or physics.alpha (a diffusivity)")
            if self.faces is not None and self.thickness is None:
                raise ValueError("physics.faces: face cooling needs the plate's thickness; set physics.thickness")
            if any(t.kind != "file" and getattr(t, "power", None) is not None for t in self.source) \
                    and self.thickness is None:
                k = next(k for k, t in enumerate(self.source) if getattr(t, "power", None) is not None)
                raise ValueError(f"physics.source.{k}.power: a power in watts needs the plate's thickness; set physics.thickness")
            return self
        for key in ("regions", "thickness", "faces", "outline"):
            if key in self.model_fields_set and getattr(self, key):
                raise ValueError(f"physics.{key}: applies to the material form; set physics.material (the plate's material) or "
                                 f"remove {key}")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        """The material form's dump leaves out alpha (its default would read as the plate given twice)."""
        out = handler(self)
        if self.material is not None and isinstance(out, dict):
            out.pop("alpha", None)
        return out

    @property
    def form(self) -> str:
        """'material' (physics.material) or 'alpha' (a diffusivity)."""
        return "material" if self.material is not None else "alpha"
