"""What the plate is made of, in one of two forms:

- the material form: `physics.material` (the plate) and `physics.regions` (shapes of other materials, later ones
  winning), materials named from the case's `materials:` table or the built-in library (solver.case.library), each
  with a conductivity k and a heat capacity (rho and c_p, or C = rho c_p). The equation is then
  C u_t = div(k grad u) + q in watts; the geometry is deposited by area (solver.core.medium).
- the diffusivity form: `physics.alpha`, a number or a field ({background, regions}: later regions win, each
  covering the grid points inside it; or a file): u_t = div(alpha grad u) + q, q in temperature per time.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, model_validator

from .base import MAX_PATH, Part
from .shapes import DiskShape, RectangleShape
from .units import quantity

POSITIVE = dict(gt=0, le=1e100)
Diffusivity = quantity("diffusivity")
Conductivity = quantity("conductivity")
Density = quantity("density")
SpecificHeat = quantity("specific_heat")
HeatCapacity = quantity("heat_capacity")
NAME = r"^[A-Za-z][A-Za-z0-9_.+-]*$"


# the diffusivity form ------------------------------------------------------------------------------------
class RectangleRegion(RectangleShape):
    """alpha = value on the points with lower <= (x, y) <= upper."""

    kind: Literal["rectangle"]
    value: Diffusivity = Field(**POSITIVE, description="alpha inside the rectangle (> 0)")


class DiskRegion(DiskShape):
    """alpha = value on the points within radius of center."""

    kind: Literal["disk"]
    value: Diffusivity = Field(**POSITIVE, description="alpha inside the disk (> 0)")


Region = Annotated[Union[RectangleRegion, DiskRegion], Field(discriminator="kind")]
REGION_KINDS = {"rectangle": RectangleRegion, "disk": DiskRegion}


class AlphaRegions(Part):
    """alpha = background, then each region in turn on the points it covers (later regions win)."""

    background: Diffusivity = Field(**POSITIVE, description="alpha outside every region (> 0)")
    regions: list[Region] = Field(default_factory=list, max_length=1000, description=(
        "rectangles and disks, each setting alpha on the grid points it covers; later ones win; parts outside the "
        "domain cover nothing"))


class AlphaFile(Part):
    """alpha read from a (ny, nx) array: .npy, or HDF5 with `dataset`."""

    kind: Literal["file"]
    path: str = Field(min_length=1, max_length=MAX_PATH, description="the .npy or HDF5 file")
    dataset: str | None = Field(None, max_length=MAX_PATH, description="HDF5 only: the dataset holding the (ny, nx) array")


def _alpha_tag(v: Any) -> str | None:
    if isinstance(v, (int, float, str)) and not isinstance(v, bool):
        return "number"
    if isinstance(v, dict):
        return "field-file" if v.get("kind") == "file" else "field-regions"
    return "field-file" if isinstance(v, AlphaFile) else "field-regions" if isinstance(v, AlphaRegions) else None


ALPHA_TAGS = ("field-regions", "field-file")
ALPHA_HELP = "a number, {background: A, regions: [...]} or {kind: file, path: P}"
Alpha = Annotated[Union[Annotated[Diffusivity, Tag("number")], Annotated[AlphaRegions, Tag("field-regions")],
                        Annotated[AlphaFile, Tag("field-file")]],
                  Discriminator(_alpha_tag, custom_error_type="alpha_form", custom_error_message=f"give {ALPHA_HELP}")]


# the material form --------------------------------------------------------------------------------------
class Material(Part):
    """A solid: its conductivity and its heat capacity, as rho and c_p or as C = rho c_p."""

    k: Conductivity = Field(**POSITIVE, description="thermal conductivity (W/(m K) in SI)")
    rho: Density | None = Field(None, **POSITIVE, description="density (kg/m^3 in SI)")
    c_p: SpecificHeat | None = Field(None, **POSITIVE, description="specific heat capacity (J/(kg K))")
    C: HeatCapacity | None = Field(None, **POSITIVE, description=(
        "volumetric heat capacity rho c_p (J/(m^3 K)), instead of rho and c_p"))
    note: str | None = Field(None, max_length=1000, description="where the values come from (shown in the record)")

    @model_validator(mode="after")
    def _capacity(self) -> Material:
        pair = (self.rho is not None, self.c_p is not None)
        if self.C is not None and any(pair):
            raise ValueError("C: give the heat capacity once: either C (= rho c_p) or rho and c_p; remove one")
        if self.C is None and pair != (True, True):
            missing = "c_p" if pair[0] else "rho"
            raise ValueError(f"{missing}: a material needs its heat capacity: rho and c_p, or C = rho c_p")
        if not math.isfinite(self.capacity) or self.capacity <= 0:
            raise ValueError(f"rho: rho x c_p = {self.capacity:g} is not a positive finite heat capacity")
        return self

    @property
    def capacity(self) -> float:
        """C = rho c_p (case units)."""
        return self.C if self.C is not None else self.rho * self.c_p


def library_material(name: str) -> Material | None:
    """A built-in material (solver.case.library) in SI, or None."""
    from .library import LIBRARY

    if name not in LIBRARY:
        return None
    k, rho, c_p, note = LIBRARY[name]
    return Material(k=k, rho=rho, c_p=c_p, note=note)
