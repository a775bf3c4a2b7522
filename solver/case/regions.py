"""`physics.regions` and `physics.outline` in the material form: shapes in the plate and what each one is.

A region is a shape (rectangle, disk, polygon, or an image or array mask with an extent), painted in order (later
regions win), and exactly one of:
- `material: NAME`: the shape is of that material (solver.case.materials);
- `held: T`: an object held at a temperature (one number: not yet a table in time): a hot pipe, a heater held at a set
  point; the plate's points inside it take T, and the rim is a fixed temperature at its true place (the symmetric
  Shortley-Weller / Gibou discretisation: solver.core.shapes);
- `hole: RIM`: no material; its rim carries a side condition: insulated, a heat flux, convective, or a fixed
  temperature (a hole held at a temperature is a held object).
`physics.outline` is the plate's own shape where it is not the rectangle of the grid: everything outside it is a
hole whose rim is `outline.rim`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, model_validator

from .base import Part
from .materials import NAME
from .shapes import DiskShape, MaskShape, PolygonShape, RectangleShape
from .units import quantity
from .values import in_time, varying

Temperature = varying("temperature")
HeatFlux = quantity("heat_flux")
HeatTransfer = quantity("heat_transfer")
TemperatureLevel = quantity("temperature")


class InsulatedRim(Part):
    kind: Literal["insulated"]


class FluxRim(Part):
    """A heat flux into the plate through the rim (W/m^2 in SI; > 0 heats the plate)."""

    kind: Literal["neumann"]
    flux: HeatFlux = Field(0.0, description="the heat flux into the plate through the rim (W/m^2; 0 = insulated)")


class ConvectiveRim(Part):
    """Newton cooling at the rim: -k du/dn = h (u - ambient), k the material at the rim; with an emissivity the rim
    also radiates emissivity sigma (u^4 - surroundings^4), u in kelvin."""

    kind: Literal["convective"]
    h: HeatTransfer = Field(ge=0, description="the rim's transfer coefficient (W/(m^2 K))")
    ambient: TemperatureLevel = Field(description="the temperature of the fluid at the rim")
    emissivity: float = Field(0.0, ge=0, le=1, description=(
        "the rim's emissivity, 0 to 1: it also radiates emissivity sigma (u^4 - surroundings^4); 0: no radiation"))
    surroundings: TemperatureLevel | None = Field(None, description=(
        "the temperature the rim radiates to (a level); null: the ambient"))

    @property
    def radiates(self) -> bool:
        return self.emissivity > 0


class FixedRim(Part):
    """A fixed temperature at the rim."""

    kind: Literal["dirichlet"]
    value: Temperature = Field(description="the rim's temperature (a number)")

    @model_validator(mode="after")
    def _number(self):
        if not isinstance(self.value, float):
            raise ValueError(f"value: {_NOT_A_NUMBER}")
        return self


# A held object's or a fixed rim's temperature is one number: the solver's shape terms are built once (a table in time
# would hold its value at t = 0 throughout; one along a side has no meaning on a rim).
_NOT_A_NUMBER = ("a held object's or a fixed rim's temperature is one number (a table in time or along a side is not "
                 "supported: the shape's terms are built once); give a number, e.g. 80 or '80 degC'")


def _rim_shorthand(v: Any) -> Any:
    """`hole: insulated` means {kind: insulated}."""
    return {"kind": v} if isinstance(v, str) else v


Rim = Annotated[Annotated[Union[InsulatedRim, FluxRim, ConvectiveRim, FixedRim], Field(discriminator="kind")],
                BeforeValidator(_rim_shorthand)]
RIM_KINDS = {"insulated": InsulatedRim, "neumann": FluxRim, "convective": ConvectiveRim, "dirichlet": FixedRim}


class Role(Part):
    """What a region is: a material, an object held at a temperature, or a hole (exactly one)."""

    material: str | None = Field(None, pattern=NAME, max_length=100, description="a material of `materials:` or the library")
    held: Temperature | None = Field(None, description="held at this temperature (a number)")
    hole: Rim | None = Field(None, description=(
        "a hole: its rim's condition: insulated, {kind: neumann, flux}, {kind: convective, h, ambient} or {kind: "
        "dirichlet, value}"))
    name: str | None = Field(None, pattern=NAME, max_length=100, description="a name for the record's statistics")

    @model_validator(mode="after")
    def _one_role(self):
        given = [k for k in ("material", "held", "hole") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"{given[1] if len(given) > 1 else 'material'}: a region is one of material: NAME, held: T "
                             f"or hole: RIM ({'; '.join(given) + ' given' if given else 'none given'}); give exactly one")
        if self.held is not None and not isinstance(self.held, float):
            raise ValueError(f"held: {_NOT_A_NUMBER}")
        return self

    @property
    def role(self) -> str:
        return "material" if self.material is not None else "held" if self.held is not None else "hole"

    @property
    def held_in_time(self) -> bool:
        return in_time(self.held) or (self.hole is not None and in_time(getattr(self.hole, "value", None)))


class RegionRectangle(RectangleShape, Role):
    kind: Literal["rectangle"]


class RegionDisk(DiskShape, Role):
    kind: Literal["disk"]


class RegionPolygon(PolygonShape, Role):
    kind: Literal["polygon"]


class RegionMask(MaskShape, Role):
    kind: Literal["mask"]


PlateRegion = Annotated[Union[RegionRectangle, RegionDisk, RegionPolygon, RegionMask], Field(discriminator="kind")]
PLATE_REGION_KINDS = {"rectangle": RegionRectangle, "disk": RegionDisk, "polygon": RegionPolygon, "mask": RegionMask}


class OutlineRim(Part):
    rim: Rim = Field(default_factory=lambda: InsulatedRim(kind="insulated"), description=(
        "the condition on the outline's edge: insulated (the default), {kind: neumann, flux}, {kind: convective, h, "
        "ambient} or {kind: dirichlet, value}"))


class OutlineRectangle(RectangleShape, OutlineRim):
    kind: Literal["rectangle"]


class OutlineDisk(DiskShape, OutlineRim):
    kind: Literal["disk"]


class OutlinePolygon(PolygonShape, OutlineRim):
    kind: Literal["polygon"]


class OutlineMask(MaskShape, OutlineRim):
    kind: Literal["mask"]


Outline = Annotated[Union[OutlineRectangle, OutlineDisk, OutlinePolygon, OutlineMask], Field(discriminator="kind")]
