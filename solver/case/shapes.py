"""Shapes in the plate (x, y in the case's length unit, numbers or strings with units): what regions of material
and sources cover. Each kind is a mixin of its geometry fields and checks; regions and source terms add what the
shape carries (a material, a diffusivity, a power)."""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import Part
from .units import Length, Point


def check_box(lower: list[float], upper: list[float]) -> None:
    for axis, lo, hi in zip("xy", lower, upper):
        if hi < lo:
            raise ValueError(f"upper: {axis} = {hi:g} is below lower's {lo:g}; give lower <= upper on both axes")


class RectangleShape(Part):
    """The rectangle lower <= (x, y) <= upper."""

    lower: Point = Field(min_length=2, max_length=2, description="[x, y] of the lower left corner")
    upper: Point = Field(min_length=2, max_length=2, description="[x, y] of the upper right corner")

    @model_validator(mode="after")
    def _ordered(self):
        check_box(self.lower, self.upper)
        return self

    @property
    def area(self) -> float:
        return (self.upper[0] - self.lower[0]) * (self.upper[1] - self.lower[1])


class DiskShape(Part):
    """The disk of `radius` around `center`."""

    center: Point = Field(min_length=2, max_length=2, description="[x, y] of the centre")
    radius: Length = Field(gt=0, description="the radius")

    @property
    def area(self) -> float:
        import math

        return math.pi * self.radius ** 2
