"""`initial`: the initial field (heat) or first iterate (laplace), chosen by `kind`."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from ..core.boundary import wave_numbers
from .base import MAX_COUNT, MAX_LENGTH, MAX_VALUE_CHARS, Section
from .units import Length, Point, Temperature, TemperatureDifference


class Sine(Section):
    """A discrete eigenmode of the update for the case's boundary kinds: an exact solution is known.

    Along an axis with Dirichlet sides sin(pi k (j+1)/(n+1)), Neumann sides cos(pi k (j+1/2)/n), periodic
    cos(2 pi k (j+1/2)/n), Dirichlet on one side and Neumann on the other sin(pi (k-1/2) (j+1)/(n+1/2))
    (mirrored for Neumann-Dirichlet). Exact with zero Dirichlet values and zero fluxes."""

    kind: Literal["sine"]
    value: TemperatureDifference = Field(1.0, description="amplitude (a temperature difference)")
    k: list[int] = Field(default_factory=lambda: [1, 1], min_length=2, max_length=2, description=(
        "wave numbers [kx, ky]: 1 to n along an axis with a Dirichlet side, 0 to n - 1 between Neumann sides, "
        "0 to (n - 1) // 2 along a periodic axis (n the points along that axis)"))


def _check_wave_number(k: int, axis: str, n: int, lo: str, hi: str) -> None:
    """initial.k along one axis: a wave number whose mode exists on the axis's n points and its side kinds."""
    allowed = wave_numbers(lo, hi, n)
    if k in allowed:
        return
    sides = {("dirichlet", "dirichlet"): "Dirichlet sides", ("neumann", "neumann"): "Neumann sides",
             ("periodic", "periodic"): "periodic sides"}.get((lo, hi), "a Dirichlet and a Neumann side")
    why = (" (higher ones repeat lower modes or vanish)" if k > allowed[-1] else
           " (a Dirichlet side admits no constant mode)" if k == 0 else "")
    raise ValueError(f"initial.k: k{axis} = {k} but the {axis} axis ({sides}, n{axis} = {n} points) has modes "
                     f"k{axis} = {allowed[0]} to {allowed[-1]}{why}; use a k{axis} in that range")


class Hotspot(Section):
    """`value` inside a disc of `radius` around `center` = [x, y] (physical units), `background` outside."""

    kind: Literal["hotspot"]
    value: Temperature = 100.0
    radius: Length = Field(0.1, ge=1 / MAX_LENGTH, le=MAX_LENGTH)
    center: Point = Field(default_factory=lambda: [0.5, 0.5], min_length=2, max_length=2)
    background: Temperature = 0.0


class Constant(Section):
    kind: Literal["constant"]
    value: Temperature = 0.0


class Random(Section):
    """Uniform in [low, high); the same field for any rank count (rows of cells are seeded by global index)."""

    kind: Literal["random"]
    seed: int = Field(0, ge=0, le=2**64 - 1, description="numpy's random seed (with the global row index)")
    low: Temperature = 0.0
    high: Temperature = 1.0
    cell: int = Field(1, ge=1, le=MAX_COUNT, description=(
        "side of the square cells (cell x cell points, from the first point) that share one random value: a "
        "mosaic whose edges diffuse; 1 = a value per point"))


class FromFile(Section):
    """A .npy file, or an HDF5 file's `dataset` (default /u: a fields.h5 gives its last snapshot), shape (ny, nx)."""

    kind: Literal["file"]
    path: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    dataset: str | None = Field(None, max_length=MAX_VALUE_CHARS)


Initial = Annotated[Union[Sine, Hotspot, Constant, Random, FromFile], Field(discriminator="kind")]

