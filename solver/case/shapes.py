"""Shapes in the plate (x, y in the case's length unit, numbers or strings with units): what regions of material
and sources cover. Each kind is a mixin of its geometry fields and checks; regions and source terms add what the
shape carries (a material, a diffusivity, a power)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .base import MAX_LENGTH, Part
from .units import Length, Point


def check_extent(extent: list[list[float]]) -> None:
    """[[x0, y0], [x1, y1]] with x1 > x0 and y1 > y0 (a map's or a mask's rectangle), or ValueError."""
    if any(len(p) != 2 for p in extent):
        raise ValueError("extent: give [[x0, y0], [x1, y1]], two corners of two numbers each")
    for axis, lo, hi in zip("xy", extent[0], extent[1]):
        if hi <= lo:
            raise ValueError(f"extent: {axis}1 = {hi:g} is not above {axis}0 = {lo:g}; give [[x0, y0], [x1, y1]] "
                             "with x1 > x0 and y1 > y0")


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
    radius: Length = Field(ge=1 / MAX_LENGTH, le=MAX_LENGTH, description="the radius")

    @property
    def area(self) -> float:
        import math

        return math.pi * self.radius ** 2


class PolygonShape(Part):
    """A simple polygon through `points` (either orientation, convex or not; the last point joins the first)."""

    points: list[Point] = Field(min_length=3, max_length=10_000, description="[[x, y], ...]: the polygon's corners")

    @model_validator(mode="after")
    def _simple(self):
        from ..core.geometry import Polygon, problem

        for k, p in enumerate(self.points):
            if len(p) != 2:
                raise ValueError(f"points: point {k} has {len(p)} numbers; each point is [x, y]")
        why = problem(Polygon(tuple(tuple(p) for p in self.points)))
        if why:
            raise ValueError(f"points: {why}")
        return self

    @property
    def area(self) -> float:
        from ..core.geometry import Polygon, area

        return area(Polygon(tuple(tuple(p) for p in self.points)))


class MaskShape(Part):
    """The pixels of an image or an array that lie inside, stretched over `extent`: a board outline or a heat sink
    drawn in any tool (a PNG: dark pixels inside, row 0 at the top, as drawn), or a .npy / HDF5 array (non-zero
    inside, row 0 along y0, as power maps)."""

    path: str = Field(min_length=1, max_length=4096, description="a .png image, a .npy file or an HDF5 file")
    dataset: str | None = Field(None, max_length=4096, description="HDF5 only: the dataset holding the array")
    extent: list[Point] = Field(min_length=2, max_length=2, description=(
        "[[x0, y0], [x1, y1]]: the rectangle the image's pixels tile"))
    inside: Literal["dark", "light"] = Field("dark", description="an image's pixels inside: dark (the default) or light")

    @model_validator(mode="after")
    def _extent(self):
        check_extent(self.extent)
        return self
