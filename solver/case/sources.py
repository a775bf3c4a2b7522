"""`physics.source`: a list of terms summed into q(x, y); each may carry a window `active: [t_start, t_end]` (on for
t_start <= t < t_end)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from .base import MAX_LENGTH, MAX_PATH, Part


class SourceTerm(Part):
    active: list[float] | None = Field(None, min_length=2, max_length=2, description=(
        "[t_start, t_end]: the term is on for t_start <= t < t_end (heat only); null: always"))

    @model_validator(mode="after")
    def _window(self):
        if self.active is not None and self.active[1] < self.active[0]:
            raise ValueError(f"active: t_end {self.active[1]:g} is before t_start {self.active[0]:g}; give "
                             "[t_start, t_end] with t_end >= t_start")
        return self


class ConstantSource(SourceTerm):
    """q = value everywhere."""

    kind: Literal["constant"]
    value: float = Field(description="heat per unit area and time (units of u per time)")


class GaussianSource(SourceTerm):
    """q = amplitude exp(-r^2 / (2 width^2)), r the distance from center."""

    kind: Literal["gaussian"]
    center: list[float] = Field(min_length=2, max_length=2, description="[x, y] of the peak, case units")
    width: float = Field(ge=1 / MAX_LENGTH, le=MAX_LENGTH, description="standard deviation of the bell, case units")
    amplitude: float = Field(description="q at the peak")


class RectangleSource(SourceTerm):
    """q = value on the points with lower <= (x, y) <= upper."""

    kind: Literal["rectangle"]
    lower: list[float] = Field(min_length=2, max_length=2, description="[x, y] of the lower left corner")
    upper: list[float] = Field(min_length=2, max_length=2, description="[x, y] of the upper right corner")
    value: float = Field(description="q inside the rectangle")

    @model_validator(mode="after")
    def _ordered(self) -> RectangleSource:
        _check_box(self.lower, self.upper)
        return self


class FileSource(SourceTerm):
    """q read from an array in a file (.npy, or HDF5 with `dataset`), times scale: without `extent` one value per
    grid point, shape (ny, nx); with extent a map of any shape (m, k) whose cells tile that rectangle (a power map
    of 16 x 16 tiles over a die): each grid point inside takes its cell's value, points outside 0."""

    kind: Literal["file"]
    path: str = Field(min_length=1, max_length=MAX_PATH, description="the .npy or HDF5 file, relative to the working directory")
    dataset: str | None = Field(None, max_length=MAX_PATH, description="HDF5 only: the dataset holding the array")
    scale: float = Field(1.0, description="every value of the file is multiplied by this")
    extent: list[list[float]] | None = Field(None, min_length=2, max_length=2, description=(
        "[[x0, y0], [x1, y1]]: the map's cells tile this rectangle (rows along y from y0, columns along x from x0); "
        "null: the file holds one value per grid point, shape (ny, nx)"))

    @model_validator(mode="after")
    def _extent(self) -> FileSource:
        if self.extent is not None:
            if any(len(p) != 2 for p in self.extent):
                raise ValueError("extent: give [[x0, y0], [x1, y1]], two corners of two numbers each")
            for axis, lo, hi in zip("xy", self.extent[0], self.extent[1]):
                if hi <= lo:
                    raise ValueError(f"extent: {axis}1 = {hi:g} is not above {axis}0 = {lo:g}; give [[x0, y0], [x1, y1]] "
                                     "with x1 > x0 and y1 > y0")
        return self


Source = Annotated[Union[ConstantSource, GaussianSource, RectangleSource, FileSource], Field(discriminator="kind")]
SOURCE_KINDS = {"constant": ConstantSource, "gaussian": GaussianSource, "rectangle": RectangleSource, "file": FileSource}


def _check_box(lower: list[float], upper: list[float]) -> None:
    for axis, lo, hi in zip("xy", lower, upper):
        if hi < lo:
            raise ValueError(f"upper: {axis} = {hi:g} is below lower's {lo:g}; give lower <= upper on both axes")
