"""`boundary`: one kind per side (dirichlet, neumann, convective, periodic), its values numbers or values that vary
(solver.case.values)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, model_validator

from .base import Section
from .units import NUMBER, quantity
from .values import varying, varying_values

TemperatureValue = varying("temperature")
Temperature = quantity("temperature")


FLUX = {"material": ("heat_flux",), "alpha": ("gradient",)}
H = {"material": ("heat_transfer",), "alpha": ("inverse_length",)}
_VARYING = ("a number, {time: [[t, v], ...]} (linear in time), {along: [[s, v], ...]} (linear along the side, s "
             "in case units) or {file: PATH} (one value per point of the side)")


class Dirichlet(Section):
    """A fixed value on the side; the wall lies one spacing outside the first interior point."""

    kind: Literal["dirichlet"]
    value: TemperatureValue = Field(0.0, description=f"the temperature on this side: {_VARYING}")


class Neumann(Section):
    """A fixed normal derivative; the wall lies half a spacing outside the first interior point."""

    kind: Literal["neumann"]
    flux: varying(by_form=FLUX) = Field(0.0, description=(
        "0 = insulated; flux > 0 lets heat in, flux < 0 draws it out. Material form: the heat flux into the plate "
        "(W/m^2 in SI; du/dn = flux / k at each wall point). Diffusivity form: the outward normal derivative du/dn "
        f"at the wall (the ghost is the first interior point + flux x spacing); {_VARYING}"))


class Convective(Section):
    """Newton cooling (a Robin condition): -du/dn = h (u - ambient) at the wall, half a spacing outside the
    first interior point (as Neumann): the ghost is (u0 (1 - h s/2) + h s ambient) / (1 + h s/2), s the spacing.
    With an emissivity (the material form), the wall also radiates: -k du/dn = h (u - ambient) + emissivity sigma
    (u^4 - surroundings^4), u in kelvin (as Elmer's heat-transfer boundary condition holds both, and COMSOL adds its
    surface-to-ambient radiation to a convective heat flux on the same boundary)."""

    kind: Literal["convective"]
    h: varying(by_form=H) = Field(0.0, description=(
        "the transfer coefficient (>= 0; 0 = insulated, large tends to Dirichlet at ambient). Material form: W/(m^2 K) "
        "in SI, -k du/dn = h (u - ambient) with k the material at each wall point. Diffusivity form: per unit length "
        f"(h over the wall's conductivity); {_VARYING}"))
    ambient: TemperatureValue = Field(0.0, description=f"the temperature the side exchanges heat with; {_VARYING}")
    emissivity: float = Field(0.0, ge=0, le=1, description=(
        "the side's emissivity, 0 to 1 (material form): the wall also radiates emissivity sigma (u^4 - surroundings^4), "
        "temperatures in kelvin; 0: no radiation"))
    surroundings: Temperature | None = Field(None, description=(
        "the temperature the side radiates to (a level, e.g. '20 degC'); null: the ambient"))

    @model_validator(mode="after")
    def _non_negative(self) -> Convective:
        for v in varying_values(self.h):
            if v < 0:
                raise ValueError(f"h: {v:g} is negative; a transfer coefficient is >= 0 (0 = insulated)")
        return self


class Periodic(Section):
    """The side wraps to the opposite one (give both sides of the axis); the period is nx (or ny) points."""

    kind: Literal["periodic"]


SideKind = Annotated[Union[Dirichlet, Neumann, Convective, Periodic], Field(discriminator="kind")]
BOUNDARY_KINDS = {"dirichlet": Dirichlet, "neumann": Neumann, "convective": Convective, "periodic": Periodic}


def _number_is_dirichlet(v: Any) -> Any:
    """`top: 1.5` (a plain number, as in older case files) means {kind: dirichlet, value: 1.5}."""
    if isinstance(v, str) and NUMBER.match(v):  # "80 degC"
        return {"kind": "dirichlet", "value": v}
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"kind": "dirichlet", "value": float(v)}
    return v


Side = Annotated[SideKind, BeforeValidator(_number_is_dirichlet, json_schema_input_type=Union[float, SideKind])]
_SIDE_HELP = ("a number (Dirichlet value), or {kind: dirichlet, value: V}, {kind: neumann, flux: G} "
              "(G = outward du/dn; 0 = insulated), {kind: convective, h: H, ambient: T} (-du/dn = H (u - T)), "
              "{kind: periodic} (on both sides of the axis)")


def _dirichlet(value: float = 0.0) -> Dirichlet:
    return Dirichlet(kind="dirichlet", value=value)


class Boundary(Section):
    """One kind per side, fixed for the run; its value may vary in time or along the side (docs/discretisation.md,
    solver/core/boundary.py)."""

    top: Side = Field(default_factory=_dirichlet, description=f"side y = ly: {_SIDE_HELP}")
    bottom: Side = Field(default_factory=_dirichlet, description=f"side y = 0: {_SIDE_HELP}")
    left: Side = Field(default_factory=_dirichlet, description=f"side x = 0: {_SIDE_HELP}")
    right: Side = Field(default_factory=_dirichlet, description=f"side x = lx: {_SIDE_HELP}")

    @model_validator(mode="after")
    def _periodic_in_pairs(self) -> Boundary:
        for a, b, axis in (("left", "right", "x"), ("bottom", "top", "y")):
            ka, kb = getattr(self, a).kind, getattr(self, b).kind
            if (ka == "periodic") != (kb == "periodic"):
                one, other = (a, b) if ka == "periodic" else (b, a)
                raise ValueError(f"boundary.{other}: boundary.{one} is periodic, so {other} must be too (the period "
                                 f"runs along {axis}); set both to {{kind: periodic}} or neither")
        return self

