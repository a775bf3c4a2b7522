"""`output.probes`: named samples of the field over time (solver.io.probes samples and writes them).

    {name, kind: point, at: [x, y]}                          u at a point: bilinear between the four grid points
                                                             around it (a point on a grid point: that point's value)
    {name, kind: max | min | mean, region: SHAPE}            over the grid points inside a rectangle or disk
    {name, kind: heat_flow, side: bottom | top | left | right}  heat entering through that side per unit time
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from .base import MAX_LENGTH, Part
from .units import Length, Point

NAME = dict(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$", max_length=64)


class RectangleShape(Part):
    """The grid points with lower <= (x, y) <= upper."""

    kind: Literal["rectangle"]
    lower: Point = Field(min_length=2, max_length=2, description="[x, y] of the lower left corner")
    upper: Point = Field(min_length=2, max_length=2, description="[x, y] of the upper right corner")

    @model_validator(mode="after")
    def _ordered(self) -> RectangleShape:
        for axis, lo, hi in zip("xy", self.lower, self.upper):
            if hi < lo:
                raise ValueError(f"upper: {axis} = {hi:g} is below lower's {lo:g}; give lower <= upper on both axes")
        return self


class DiskShape(Part):
    """The grid points within radius of center."""

    kind: Literal["disk"]
    center: Point = Field(min_length=2, max_length=2, description="[x, y] of the centre")
    radius: Length = Field(gt=0, le=MAX_LENGTH, description="radius, case units")


Shape = Annotated[Union[RectangleShape, DiskShape], Field(discriminator="kind")]


class PointProbe(Part):
    """u at a point, bilinear between the grid points around it."""

    name: str = Field(**NAME, description="the probe's column in probes.csv and variable in probes.h5")
    kind: Literal["point"]
    at: Point = Field(min_length=2, max_length=2, description="[x, y], case units, inside the plate")


class RegionProbe(Part):
    """The largest, smallest or mean value of u over the grid points of a rectangle or disk."""

    name: str = Field(**NAME, description="the probe's column in probes.csv and variable in probes.h5")
    kind: Literal["max", "min", "mean"]
    region: Shape = Field(description="{kind: rectangle, lower, upper} or {kind: disk, center, radius}")


class SideProbe(Part):
    """The heat entering through one side per unit time (solver.core.balance's wall flux; negative: leaving)."""

    name: str = Field(**NAME, description="the probe's column in probes.csv and variable in probes.h5")
    kind: Literal["heat_flow"]
    side: Literal["bottom", "top", "left", "right"]


Probe = Annotated[Union[PointProbe, RegionProbe, SideProbe], Field(discriminator="kind")]
PROBE_KINDS = {"point": PointProbe, "max": RegionProbe, "min": RegionProbe, "mean": RegionProbe,
               "heat_flow": SideProbe}
