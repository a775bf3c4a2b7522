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

from pydantic import Discriminator, Field, Tag, ValidationInfo, model_validator

from .base import MAX_PATH, MAX_TABLE, Part
from .shapes import DiskShape, RectangleShape
from .units import ABSOLUTE_ZERO, kelvin_offset, pair, quantity, system_of

POSITIVE = dict(gt=0, le=1e100)
Diffusivity = quantity("diffusivity")
Conductivity = quantity("conductivity")
Density = quantity("density")
SpecificHeat = quantity("specific_heat")
HeatCapacity = quantity("heat_capacity")
TemperatureLevel = quantity("temperature")
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
class PowerLaw(Part):
    """k = k0 (T / T0)^b, T and T0 absolute (kelvin; a case in degC converts)."""

    k0: Conductivity = Field(**POSITIVE, description="k at T0 (W/(m K) in SI)")
    T0: TemperatureLevel = Field(description="the reference temperature of k0, a level above absolute zero ('300 K')")
    b: float = Field(ge=-10, le=10, description="the exponent (silicon near room temperature: about -1.3)")


def _k_tag(v: Any) -> str | None:
    if isinstance(v, (int, float, str)) and not isinstance(v, bool):
        return "number"
    if isinstance(v, list):
        return "table"
    if isinstance(v, (dict, PowerLaw)):
        return "power"
    return None


K_HELP = "a number, a table [[T, k], ...] (linear in T between its points) or {k0, T0, b} (k0 (T / T0)^b)"
ConductivityLaw = Annotated[Union[
    Annotated[Conductivity, Tag("number")],
    Annotated[list[pair("temperature", "conductivity")], Field(max_length=MAX_TABLE), Tag("table")],
    Annotated[PowerLaw, Tag("power")]],
    Discriminator(_k_tag, custom_error_type="k_form", custom_error_message=f"give {K_HELP}")]


class Material(Part):
    """A solid: its conductivity (a number, or k(T): a table or a power law) and its heat capacity, as rho and c_p
    or as C = rho c_p."""

    k: ConductivityLaw = Field(description=(
        "thermal conductivity (W/(m K) in SI): a number; a table [[T, k], ...] of temperature levels in increasing "
        "order, linear between them and held beyond the ends; or {k0, T0, b}: k0 (T / T0)^b with T absolute. A k that "
        "depends on T makes the problem nonlinear (Newton's method: docs/nonlinear.md)"))
    rho: Density | None = Field(None, **POSITIVE, description="density (kg/m^3 in SI)")
    c_p: SpecificHeat | None = Field(None, **POSITIVE, description="specific heat capacity (J/(kg K))")
    C: HeatCapacity | None = Field(None, **POSITIVE, description=(
        "volumetric heat capacity rho c_p (J/(m^3 K)), instead of rho and c_p"))
    note: str | None = Field(None, max_length=1000, description="where the values come from (shown in the record)")

    @model_validator(mode="after")
    def _conductivity(self, info: ValidationInfo) -> Material:
        """k > 0 (a number: checked by its field); a table sorted, k > 0 and at or above absolute zero; T0 above it."""
        scale = system_of(info).temperature
        zero = ABSOLUTE_ZERO[scale]
        if isinstance(self.k, float) and not 0 < self.k <= 1e100:
            raise ValueError(f"k: {self.k:g} is not a conductivity; give k > 0")
        if isinstance(self.k, PowerLaw) and self.k.T0 <= zero:
            raise ValueError(f"k: T0 = {self.k.T0:g} {scale} is not above absolute zero ({zero:g} {scale}); give the "
                             "temperature at which k0 holds, e.g. T0: '300 K'")
        if isinstance(self.k, list):
            _k_table(self.k, zero, scale)
        return self

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

    def law(self, scale: str):
        """k(T) as plain data (solver.core.conductivity.Law) for a case of temperature unit `scale`, or None for a
        constant k."""
        from ..core.conductivity import Law

        offset = kelvin_offset(scale)
        if isinstance(self.k, PowerLaw):
            return Law("power", k0=self.k.k0, t0=self.k.T0 + offset, b=self.k.b, offset=offset)
        if isinstance(self.k, list):
            return Law("table", tuple(r[0] for r in self.k), tuple(r[1] for r in self.k), offset=offset)
        return None

    def reference_k(self, scale: str) -> float:
        """The k the faces' geometry is computed with: the number itself, or k(T) at 300 K (solver.core.conductivity)."""
        law = self.law(scale)
        return self.k if law is None else law.reference()


def _k_table(rows: list, zero: float, scale: str) -> None:
    """A k table: pairs [T, k], at least two, T increasing and not below absolute zero, every k > 0."""
    if len(rows) < 2:
        raise ValueError("k: a table needs at least two points [T, k] (one point is a constant: give k as a number)")
    for n, row in enumerate(rows):
        if len(row) != 2:
            raise ValueError(f"k: entry {n} has {len(row)} numbers; each entry is a pair [T, k]")
        if row[0] < zero:
            raise ValueError(f"k: T = {row[0]:g} {scale} (entry {n}) is below absolute zero ({zero:g} {scale}); give "
                             "temperatures at or above it")
        if not 0 < row[1] <= 1e100:
            raise ValueError(f"k: k = {row[1]:g} (entry {n}) is not a conductivity; every k in the table must be > 0")
        if n and row[0] <= rows[n - 1][0]:
            raise ValueError(f"k: T = {row[0]:g} (entry {n}) does not come after {rows[n - 1][0]:g}; sort the table "
                             "by temperature, each temperature once")


def library_material(name: str) -> Material | None:
    """A built-in material (solver.case.library) in SI, or None."""
    from .library import LIBRARY

    if name not in LIBRARY:
        return None
    k, rho, c_p, note = LIBRARY[name]
    return Material(k=k, rho=rho, c_p=c_p, note=note)
