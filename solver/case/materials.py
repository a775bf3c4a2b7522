"""`physics.alpha`: the diffusivity, a number or a field ({background, regions}: later regions win; or a file)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, model_validator

from .base import MAX_LENGTH, MAX_PATH, Part
from .sources import _check_box

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
    radius: float = Field(ge=1 / MAX_LENGTH, le=MAX_LENGTH, description="radius, case units")
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
