"""`physics.source`: a list of terms summed into q(x, y); each may carry a window `active: [t_start, t_end]` (on for
t_start <= t < t_end).

In the material form (physics.material) a term is a power density (W/m^3; W/m^2 of the plate's area with
physics.thickness), or a total power over its shape (`power: "5 W"`), deposited by area: each grid point receives the
power of its control volume's overlap with the shape (solver.core.medium), so the total is the stated power on every
grid. In the diffusivity form (physics.alpha) q is a heating rate (temperature per time) taken at the grid points.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, PrivateAttr, ValidationInfo, model_validator
from pydantic.functional_validators import BeforeValidator

from .base import MAX_LENGTH, MAX_PATH, Part
from .materials import NAME
from .shapes import DiskShape, RectangleShape, check_box, check_extent
from .units import Point, Time, Length, convert, form_of, quantity, system_of

__all__ = ["check_box"]


def _density(v: Any, info: ValidationInfo) -> Any:
    """A source density: material form W/m^3 (or W/m^2 over the plate's thickness), diffusivity form a heating rate
    (temperature per time); plain numbers in the case's units (W/m^3 or temperature per time)."""
    if not isinstance(v, str):
        return float(v) if isinstance(v, int) and not isinstance(v, bool) else v
    if form_of(info) != "material":
        return convert(v, ("heating_rate",), system_of(info))[0]
    value, dim = convert(v, ("power_density", "heat_flux"), system_of(info))
    if dim == "heat_flux":
        t = (info.context or {}).get("thickness")
        if not t:
            raise ValueError(f"{v!r} is a power per area: set physics.thickness (the plate's thickness) to turn it into "
                             "a power density, or give W/m^3")
        value /= t
    return value


Density = Annotated[float, BeforeValidator(_density, json_schema_input_type=Union[float, str])]
Power = quantity("power")


class SourceTerm(Part):
    active: list[Time] | None = Field(None, min_length=2, max_length=2, description=(
        "[t_start, t_end]: the term is on for t_start <= t < t_end (heat only); null: always"))
    name: str | None = Field(None, pattern=NAME, max_length=100, description="a name for the record (its power)")

    @model_validator(mode="after")
    def _window(self):
        if self.active is not None and self.active[1] < self.active[0]:
            raise ValueError(f"active: t_end {self.active[1]:g} is before t_start {self.active[0]:g}; give "
                             "[t_start, t_end] with t_end >= t_start")
        return self


class PoweredTerm(SourceTerm):
    """A term whose strength is a density (`value`) or a total power (`power`, material form), not both."""

    power: Power | None = Field(None, description=(
        "material form: the term's total power (W), spread uniformly over its shape as the grid deposits it"))

    @model_validator(mode="after")
    def _once(self, info: ValidationInfo):
        if self.power is not None and form_of(info) != "material":
            raise ValueError("power: a total power needs the material form (physics.material, with heat capacities); "
                             "in the diffusivity form give value, a heating rate")
        if not hasattr(self, "value"):
            return self
        if self.power is not None and self.value is not None:
            raise ValueError("power: the term's strength is given twice (value and power); keep one: value (a "
                             "density) or power (the total)")
        if self.power is None and self.value is None:
            raise ValueError("value: give the term's strength: value (a density) or power (its total, material form)")
        return self


class ConstantSource(PoweredTerm):
    """q = value everywhere (or power spread over the plate)."""

    kind: Literal["constant"]
    value: Density | None = Field(None, description=(
        "the density everywhere: W/m^3 (material form; W/m^2 with physics.thickness), temperature per time (alpha)"))


class GaussianSource(PoweredTerm):
    """q = amplitude exp(-r^2 / (2 width^2)), r the distance from center (or the bell scaled to a total power)."""

    kind: Literal["gaussian"]
    center: Point = Field(min_length=2, max_length=2, description="[x, y] of the peak")
    width: Length = Field(ge=1 / MAX_LENGTH, le=MAX_LENGTH, description="standard deviation of the bell")
    amplitude: Density | None = Field(None, description="q at the peak (a density)")

    @model_validator(mode="after")
    def _strength(self):
        if (self.power is None) == (self.amplitude is None):
            raise ValueError("amplitude: give the bell's strength once: amplitude (its peak density) or power (its "
                             "total, material form)")
        return self


class RectangleSource(PoweredTerm, RectangleShape):
    """q = value inside lower <= (x, y) <= upper (material form: by area; diffusivity form: the points inside)."""

    kind: Literal["rectangle"]
    value: Density | None = Field(None, description="q inside the rectangle (a density)")


class DiskSource(PoweredTerm, DiskShape):
    """q = value inside the disk (material form: by area; diffusivity form: the points inside)."""

    kind: Literal["disk"]
    value: Density | None = Field(None, description="q inside the disk (a density)")


class FileSource(SourceTerm):
    """q read from an array in a file (.npy, or HDF5 with `dataset`), times scale: without `extent` one value per
    grid point, shape (ny, nx); with extent a map of any shape (m, k) whose cells tile that rectangle (a power map
    of 16 x 16 tiles over a die). Material form: each map cell's value is deposited over the cell by area; diffusivity
    form: each grid point inside takes its cell's value, points outside 0."""

    kind: Literal["file"]
    path: str = Field(min_length=1, max_length=MAX_PATH, description="the .npy or HDF5 file, relative to the working directory")
    dataset: str | None = Field(None, max_length=MAX_PATH, description="HDF5 only: the dataset holding the array")
    scale: float = Field(1.0, description="every value of the file is multiplied by this")
    unit: str | None = Field(None, max_length=100, description=(
        "material form: what one value of the file is: a power per map cell or grid point ('W', 'mW'), or a density "
        "('W/mm^3', 'W/m^2' with physics.thickness); null: a density in the case's units"))
    extent: list[Point] | None = Field(None, min_length=2, max_length=2, description=(
        "[[x0, y0], [x1, y1]]: the map's cells tile this rectangle (rows along y from y0, columns along x from x0); "
        "null: the file holds one value per grid point, shape (ny, nx)"))

    _factor: float = PrivateAttr(1.0)
    _power: bool = PrivateAttr(False)

    @model_validator(mode="after")
    def _extent(self) -> FileSource:
        if self.extent is not None:
            check_extent(self.extent)
        return self

    @model_validator(mode="after")
    def _unit(self, info: ValidationInfo) -> FileSource:
        """The file's values' meaning, from `unit`, into `self.per_area` (densities) or `self.per_cell` (powers)."""
        if self.unit is None:
            return self
        if form_of(info) != "material":
            raise ValueError("unit: applies to the material form (physics.material); remove it (the diffusivity form's "
                             "file holds heating rates in the case's units)")
        value, dim = convert(f"1 {self.unit}", ("power", "power_density", "heat_flux"), system_of(info))
        if dim == "heat_flux":
            t = (info.context or {}).get("thickness")
            if not t:
                raise ValueError(f"unit: {self.unit!r} is a power per area: set physics.thickness, or give W/m^3 or W")
            value /= t
        self._factor, self._power = value, dim == "power"
        return self

    @property
    def factor(self) -> float:
        """One value of the file in the case's units (a density, or a power where `powers`), times scale."""
        return self._factor * self.scale

    @property
    def powers(self) -> bool:
        """Whether the values are powers (of each map cell, or of each grid point's control volume), not densities."""
        return self._power


Source = Annotated[Union[ConstantSource, GaussianSource, RectangleSource, DiskSource, FileSource],
                   Field(discriminator="kind")]
SOURCE_KINDS = {"constant": ConstantSource, "gaussian": GaussianSource, "rectangle": RectangleSource,
                "disk": DiskSource, "file": FileSource}
