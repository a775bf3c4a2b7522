"""`grid`: the interior points and the domain's size."""

from __future__ import annotations

from pydantic import Field

from .base import MAX_COUNT, MAX_LENGTH, Section
from .units import Length


class Grid(Section):
    """Interior points; a Dirichlet side sits one spacing outside them, any other half a spacing (solver.core.boundary)."""

    nx: int = Field(ge=3, le=MAX_COUNT, description="interior points along x (columns)")
    ny: int = Field(ge=3, le=MAX_COUNT, description="interior points along y (rows)")
    lx: Length = Field(1.0, ge=1 / MAX_LENGTH, le=MAX_LENGTH, description=(
        "domain length along x; dx = lx/(nx+1) with two Dirichlet sides, lx/nx with two of the other kinds (neumann, "
        "convective, periodic), lx/(nx+1/2) with one of each: their wall lies half a spacing out"))
    ly: Length = Field(1.0, ge=1 / MAX_LENGTH, le=MAX_LENGTH, description=(
        "domain length along y; dy = ly/(ny+1), ly/ny or ly/(ny+1/2) as for lx"))

