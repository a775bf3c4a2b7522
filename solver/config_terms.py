"""Case-file models for the physics that enters as data: side values that vary, heat sources, and the
diffusivity as a field (solver.config uses them in Physics and Boundary; solver.core builds the arrays).

A side value (a Dirichlet `value`, a Neumann `flux`, a convective `h` and `ambient`) is one of
    a number                      constant along the side and in time
    {time: [[t, v], ...]}         a table in time: linear between points, held before the first and after the last
    {along: [[s, v], ...]}        a profile along the side (s in case units: x on bottom/top, y on left/right): linear
                                  between points, held outside them
    {file: PATH, dataset: NAME}   one value per point of the side (.npy, or HDF5 with `dataset`), its length the
                                  points along the side
A source is a list of terms summed into q(x, y); each may carry a window `active: [t_start, t_end]` (on for
t_start <= t < t_end). physics.alpha is a number or a field: {background, regions} (later regions win) or a file.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

MAX_TABLE = 10_000  # points of one table (a case file holds at most MAX_NODES values anyway)
MAX_PATH = 4096


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _pairs(rows: list[list[float]], name: str, what: str) -> list[list[float]]:
    """A table of [key, value] pairs, keys strictly increasing."""
    if not rows:
        raise ValueError(f"{name}: an empty table; give at least one pair [{what}, value]")
    for k, row in enumerate(rows):
        if len(row) != 2:
            raise ValueError(f"{name}: entry {k} has {len(row)} numbers; each entry is a pair [{what}, value]")
    keys = [r[0] for r in rows]
    for k in range(1, len(keys)):
        if keys[k] <= keys[k - 1]:
            raise ValueError(f"{name}: {what} {keys[k]:g} (entry {k}) does not come after {keys[k - 1]:g}; sort the "
                             f"table by {what}, each {what} once")
    return rows


class TimeTable(Part):
    """{time: [[t, v], ...]}: linear in time between the points, held outside them."""

    time: list[list[float]] = Field(max_length=MAX_TABLE, description=(
        "pairs [t, value], t increasing: linear between them, the first value before the first t and the last after"))

    @model_validator(mode="after")
    def _sorted(self) -> TimeTable:
        _pairs(self.time, "time", "t")
        return self


class AlongTable(Part):
    """{along: [[s, v], ...]}: linear along the side between the points, held outside them."""

    along: list[list[float]] = Field(max_length=MAX_TABLE, description=(
        "pairs [s, value], s increasing: s is x on the bottom and top sides, y on the left and right ones (case "
        "units); linear between them, held outside"))

    @model_validator(mode="after")
    def _sorted(self) -> AlongTable:
        _pairs(self.along, "along", "s")
        return self


class SideFile(Part):
    """{file: PATH, dataset: NAME}: one value per point of the side."""

    file: str = Field(min_length=1, max_length=MAX_PATH, description=(
        "a .npy file (or HDF5 with `dataset`) of one value per point of the side: nx values on bottom/top, ny on "
        "left/right, in order of increasing x or y"))
    dataset: str | None = Field(None, max_length=MAX_PATH, description="HDF5 only: the dataset holding the values")


_VARYING_HELP = "a number, {time: [[t, v], ...]}, {along: [[s, v], ...]} or {file: PATH}"
VARYING_TAGS = {"number": None, "time-table": TimeTable, "along-table": AlongTable, "side-file": SideFile}


def _varying_tag(v: Any) -> str | None:
    """Which form a side value takes: the union's tag (error locations drop it: solver.config)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "number"
    if isinstance(v, dict):
        return next((tag for tag, key in (("time-table", "time"), ("along-table", "along"), ("side-file", "file"))
                     if key in v), None)
    return next((tag for tag, model in VARYING_TAGS.items() if model and isinstance(v, model)), None)


Varying = Annotated[Union[Annotated[float, Tag("number")], Annotated[TimeTable, Tag("time-table")],
                          Annotated[AlongTable, Tag("along-table")], Annotated[SideFile, Tag("side-file")]],
                    Discriminator(_varying_tag, custom_error_type="varying_form",
                                  custom_error_message=f"give {_VARYING_HELP}")]


def varying_values(v) -> list[float]:
    """Every number a side value gives directly (a file's values are read and checked later)."""
    if isinstance(v, float):
        return [v]
    if isinstance(v, TimeTable):
        return [r[1] for r in v.time]
    if isinstance(v, AlongTable):
        return [r[1] for r in v.along]
    return []


def in_time(v) -> bool:
    return isinstance(v, TimeTable)


def along_side(v) -> bool:
    return isinstance(v, (AlongTable, SideFile))


# sources ---------------------------------------------------------------------------------------------
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
    width: float = Field(gt=0, description="standard deviation of the bell, case units")
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


# diffusivity fields -------------------------------------------------------------------------------------
POSITIVE = dict(gt=0, le=1e100)


class RectangleRegion(Part):
    """alpha = value on the points with lower <= (x, y) <= upper."""

    kind: Literal["rectangle"]
    lower: list[float] = Field(min_length=2, max_length=2, description="[x, y] of the lower left corner")
    upper: list[float] = Field(min_length=2, max_length=2, description="[x, y] of the upper right corner")
    value: float = Field(**POSITIVE, description="alpha inside the rectangle (> 0)")

    @model_validator(mode="after")
    def _ordered(self) -> RectangleRegion:
        _check_box(self.lower, self.upper)
        return self


class DiskRegion(Part):
    """alpha = value on the points within radius of center."""

    kind: Literal["disk"]
    center: list[float] = Field(min_length=2, max_length=2, description="[x, y] of the centre")
    radius: float = Field(gt=0, description="radius, case units")
    value: float = Field(**POSITIVE, description="alpha inside the disk (> 0)")


Region = Annotated[Union[RectangleRegion, DiskRegion], Field(discriminator="kind")]
REGION_KINDS = {"rectangle": RectangleRegion, "disk": DiskRegion}


class AlphaRegions(Part):
    """alpha = background, then each region in turn on the points it covers (later regions win)."""

    background: float = Field(**POSITIVE, description="alpha outside every region (> 0)")
    regions: list[Region] = Field(default_factory=list, max_length=1000, description=(
        "rectangles and disks, each setting alpha on the grid points it covers; later ones win; parts outside the "
        "domain cover nothing"))


class AlphaFile(Part):
    """alpha read from a (ny, nx) array: .npy, or HDF5 with `dataset`."""

    kind: Literal["file"]
    path: str = Field(min_length=1, max_length=MAX_PATH, description="the .npy or HDF5 file")
    dataset: str | None = Field(None, max_length=MAX_PATH, description="HDF5 only: the dataset holding the (ny, nx) array")


def _alpha_tag(v: Any) -> str | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "number"
    if isinstance(v, dict):
        return "field-file" if v.get("kind") == "file" else "field-regions"
    return "field-file" if isinstance(v, AlphaFile) else "field-regions" if isinstance(v, AlphaRegions) else None


ALPHA_TAGS = ("field-regions", "field-file")
ALPHA_HELP = "a number, {background: A, regions: [...]} or {kind: file, path: P}"
Alpha = Annotated[Union[Annotated[float, Tag("number")], Annotated[AlphaRegions, Tag("field-regions")],
                        Annotated[AlphaFile, Tag("field-file")]],
                  Discriminator(_alpha_tag, custom_error_type="alpha_form", custom_error_message=f"give {ALPHA_HELP}")]
UNION_TAGS = {*VARYING_TAGS, *ALPHA_TAGS}  # tags in error locations that name no field
