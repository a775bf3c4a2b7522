"""Quantities with units at the edge of the case model: every dimensional number of a case is a plain number in the
case's unit system or a string with its unit ("25 W/(m^2 K)", "40 mm", "80 degC"), converted once, at validation, to
a plain float in the case's unit system. Nothing below the case model sees a unit.

The case's unit system (`units:`): a length, a time and a temperature unit (SI unless given: m, s, K), joules for
energy and kilograms for mass; every other unit is their coherent combination, e.g. with `units: {length: mm}` a
conductivity is in W/(mm K) and a power density in W/mm^3. Temperatures are levels in the case's temperature unit
(K or degC: "80 degC" in a K case is 353.15); a temperature inside a compound unit is a difference (K and delta_degC
are the same size), so a plain number's meaning never depends on an offset.

Which dimension a field takes can depend on the case's form (`physics.material`: the material form, in watts; or
`physics.alpha`: a diffusivity, where sources heat in temperature per time): pint (the standard Python units
library, imported only when a case has strings or a `units:` section) parses and converts; a value of the wrong
dimension, or an unknown unit, is refused naming the field, the dimension expected and the one given.

Validation context (solver.case.loading passes it to Case.model_validate): {"system": UnitSystem, "form": "material"
or "alpha", "thickness": the plate's thickness in case units or None}.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Union

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator

from .base import Section

NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
TEMPERATURE_UNITS = ("K", "degC")  # the case's temperature unit: a level scale with or without an offset

# dimension name -> (pint dimensionality, the case unit as a template of {L} length, {T} time units, in words)
DIMENSIONS = {
    "length": ("[length]", "{L}", "a length"),
    "time": ("[time]", "{T}", "a time"),
    "temperature": ("[temperature]", None, "a temperature"),
    "temperature_difference": ("[temperature]", "K", "a temperature difference"),
    "diffusivity": ("[length]**2/[time]", "{L}**2/{T}", "a diffusivity (length^2/time)"),
    "conductivity": ("[power]/[length]/[temperature]", "J/({T}*{L}*K)", "a thermal conductivity (W/(m K))"),
    "density": ("[mass]/[length]**3", "kg/{L}**3", "a density (kg/m^3)"),
    "specific_heat": ("[energy]/[mass]/[temperature]", "J/(kg*K)", "a specific heat capacity (J/(kg K))"),
    "heat_capacity": ("[energy]/[length]**3/[temperature]", "J/({L}**3*K)", "a volumetric heat capacity (J/(m^3 K))"),
    "heat_transfer": ("[power]/[length]**2/[temperature]", "J/({T}*{L}**2*K)", "a heat transfer coefficient (W/(m^2 K))"),
    "inverse_length": ("1/[length]", "1/{L}", "a transfer coefficient per unit length (1/m)"),
    "power": ("[power]", "J/{T}", "a power (W)"),
    "power_density": ("[power]/[length]**3", "J/({T}*{L}**3)", "a power density (W/m^3)"),
    "heat_flux": ("[power]/[length]**2", "J/({T}*{L}**2)", "a heat flux or power per area (W/m^2)"),
    "heating_rate": ("[temperature]/[time]", "K/{T}", "a heating rate (temperature per time)"),
    "gradient": ("[temperature]/[length]", "K/{L}", "a temperature gradient (K/m)"),
    "radiation": ("[power]/[length]**2/[temperature]**4", "J/({T}*{L}**2*K**4)", "a radiation constant (W/(m^2 K^4))"),
}
STEFAN_BOLTZMANN = 5.670374419e-8  # W/(m^2 K^4): exact in the 2019 SI (CODATA 2018)
ABSOLUTE_ZERO = {"K": 0.0, "degC": -273.15}  # the lowest temperature level of each scale, in its own unit


@functools.lru_cache(maxsize=1)
def registry():
    """pint's UnitRegistry (one per process; imported on first use)."""
    import pint

    return pint.UnitRegistry()


@dataclass(frozen=True)
class UnitSystem:
    """The case's units: plain numbers are in these; strings are converted to them."""

    length: str = "m"
    time: str = "s"
    temperature: str = "K"

    def unit(self, dim: str) -> str:
        if dim == "temperature":
            return self.temperature
        return DIMENSIONS[dim][1].format(L=self.length, T=self.time)

    @property
    def si(self) -> bool:
        return (self.length, self.time, self.temperature) == ("m", "s", "K")

    def factor(self, dim: str, target: str) -> float:
        """How many `target` units one case unit of `dim` is (display: case units to W, J, W/(m K), ...)."""
        if dim == "temperature":
            raise ValueError("a temperature level converts with an offset; use to_display")
        q = registry().Quantity(1.0, self.unit(dim))
        return float(q.to(target).magnitude)


SI = UnitSystem()


def parse(text: str):
    """A pint Quantity from 'number unit' text ('80 degC', '25 W/(m^2 K)', '5'); ValueError with a readable reason."""
    m = NUMBER.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a number with a unit; write e.g. '40 mm', '25 W/(m^2 K)' or '80 degC'")
    number, unit = float(m.group(1)), m.group(2) or "dimensionless"
    try:
        return registry().Quantity(number, unit)
    except Exception as exc:  # pint's UndefinedUnitError, parse errors (TokenError, DefinitionSyntaxError, ...)
        name = type(exc).__name__
        why = f"unknown unit ({exc})" if name == "UndefinedUnitError" else f"cannot read the unit {unit!r}"
        raise ValueError(f"{text!r}: {why}; write e.g. '40 mm', 'W/(m^2 K)', 'degC'") from None


def convert(text: str, dims: tuple[str, ...], system: UnitSystem) -> tuple[float, str]:
    """(the value in the case's units, the dimension it had) for text of one of `dims` (the first that matches)."""
    q = parse(text)
    reg = registry()
    for dim in dims:
        pattern = DIMENSIONS[dim][0]
        if q.dimensionality != reg.get_dimensionality(pattern):
            continue
        if dim == "temperature_difference" and not q._ok_for_muldiv():
            raise ValueError(f"{text!r} is a temperature level, but this is a temperature difference; write it in K or "
                             "delta_degC (e.g. '5 K')")
        try:
            value = float(q.to(system.unit(dim)).magnitude)
        except Exception as exc:  # an offset unit inside a compound one, a failed conversion
            raise ValueError(f"{text!r} cannot be converted to {system.unit(dim)} ({exc}); write e.g. W/(m^2 K) rather "
                             "than degC inside a compound unit") from None
        if not math.isfinite(value):
            raise ValueError(f"{text!r} is {value} in {system.unit(dim)}; give a finite value")
        return value, dim
    wanted = " or ".join(DIMENSIONS[d][2] for d in dims)
    given = "a plain number" if q.dimensionless else f"{q.units:~} ({q.dimensionality})"
    raise ValueError(f"{text!r} is {given}, but this field is {wanted}; give it in matching units")


def system_of(info: ValidationInfo | None) -> UnitSystem:
    ctx = info.context if info is not None else None
    return (ctx or {}).get("system", SI)


def form_of(info: ValidationInfo | None) -> str:
    ctx = info.context if info is not None else None
    return (ctx or {}).get("form", "alpha")


def _number(v: Any, dims: tuple[str, ...], info: ValidationInfo | None, other: tuple[str, ...] = ()) -> Any:
    """A plain number stays as it is (the case's units); a string is converted; anything else is left for the
    field's own type check (strict: a bool or a list is refused with the usual message). other: the dimensions the
    other form takes (a hint when the text has one of them)."""
    if isinstance(v, str):
        try:
            return convert(v, dims, system_of(info))[0]
        except ValueError as exc:
            if other and _fits(v, other):
                form = "the material form (set physics.material)" if form_of(info) != "material" else \
                    "the diffusivity form (physics.alpha)"
                raise ValueError(f"{v!r} is {DIMENSIONS[other[0]][2]}, which needs {form}; here this field is "
                                 f"{DIMENSIONS[dims[0]][2]}") from None
            raise exc
    return float(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _fits(text: str, dims: tuple[str, ...]) -> bool:
    try:
        convert(text, dims, SI)
        return True
    except ValueError:
        return False


def other_dims(by_form: dict | None, info: ValidationInfo | None) -> tuple[str, ...]:
    if not by_form:
        return ()
    return tuple(d for form, dims in by_form.items() if form != form_of(info) for d in dims)


def quantity(*dims: str, by_form: dict | None = None):
    """A float field of dimension dims[0] (or one of dims), given as a number or a string with its unit. by_form:
    the dimensions by the case's form instead ({"material": (...), "alpha": (...)})."""

    def check(v: Any, info: ValidationInfo) -> Any:
        choice = by_form.get(form_of(info), dims) if by_form else dims
        return _number(v, choice, info, other_dims(by_form, info))

    return Annotated[float, BeforeValidator(check, json_schema_input_type=Union[float, str])]


def pair(first: str, second: str | None = None, by_form: dict | None = None):
    """A [key, value] table entry: each a number or a string with its unit."""

    def check(v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, list):
            return v
        second_dims = by_form.get(form_of(info), (second,)) if by_form else (second,)
        out = list(v)
        if out:
            out[0] = _number(out[0], (first,), info)
        if len(out) > 1 and second_dims[0] is not None:
            out[1] = _number(out[1], second_dims, info)
        return out

    return Annotated[list[float], BeforeValidator(check, json_schema_input_type=list[Union[float, str]])]


def point():
    """[x, y]: two lengths, each a number or a string with its unit."""

    def check(v: Any, info: ValidationInfo) -> Any:
        if not isinstance(v, list):
            return v
        return [_number(x, ("length",), info) for x in v]

    return Annotated[list[float], BeforeValidator(check, json_schema_input_type=list[Union[float, str]])]


Length = quantity("length")
Time = quantity("time")
Temperature = quantity("temperature")
TemperatureDifference = quantity("temperature_difference")
Point = point()


class Units(Section):
    """The case's unit system: plain numbers are in it, and results are reported in it."""

    length: str = Field("m", max_length=40, description="the length unit of plain numbers (m, mm, cm, um, in, ...)")
    time: str = Field("s", max_length=40, description="the time unit of plain numbers (s, ms, min, h, ...)")
    temperature: str = Field("K", description="K or degC: plain temperatures are levels in this unit")

    @field_validator("length", "time")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        check_unit(v, info.field_name)
        return v

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, v: str) -> str:
        if v not in TEMPERATURE_UNITS:
            raise ValueError(f"{v!r} is not a temperature scale here; use K or degC")
        return v

    def system(self) -> UnitSystem:
        return UnitSystem(self.length, self.time, self.temperature)


def check_unit(text: str, dim: str) -> None:
    """A unit name of the given base dimension (length or time), or ValueError."""
    reg = registry()
    try:
        unit = reg.Unit(text)
    except Exception:
        raise ValueError(f"unknown unit {text!r}; give a {dim} unit such as {'mm' if dim == 'length' else 's'}") from None
    if reg.Quantity(1.0, unit).dimensionality != reg.get_dimensionality(DIMENSIONS[dim][0]):
        raise ValueError(f"{text!r} is not a {dim} unit; give a {dim} unit such as {'mm' if dim == 'length' else 's'}")


def raw_system(data: dict) -> UnitSystem:
    """The unit system from a case mapping before validation (for the context); SI where it is absent or wrong
    (the model's own validation reports a wrong `units:` section)."""
    u = data.get("units") if isinstance(data, dict) else None
    if not isinstance(u, dict):
        return SI
    try:
        return Units.model_validate(u).system()
    except Exception:
        return SI


def stefan_boltzmann(system: UnitSystem) -> float:
    """The Stefan-Boltzmann constant in the case's units (W/(m^2 K^4) in SI; a degC case's kelvin are the same size)."""
    if system.si or (system.length, system.time) == ("m", "s"):
        return STEFAN_BOLTZMANN
    return float(registry().Quantity(STEFAN_BOLTZMANN, "W/(m**2*K**4)").to(system.unit("radiation")).magnitude)


def kelvin_offset(temperature_unit: str) -> float:
    """What turns a temperature level of the case's scale into kelvin: T_K = T + offset (0 for K, 273.15 for degC)."""
    return 0.0 - ABSOLUTE_ZERO[temperature_unit]


def to_si(value: float, dim: str, system: UnitSystem) -> float:
    """A value of the case's units in SI (W, J, W/(m K), ...): for records and messages."""
    if system.si:
        return value
    unit = DIMENSIONS[dim][1].format(L="m", T="s") if dim != "temperature" else "K"
    return float(registry().Quantity(value, system.unit(dim)).to(unit).magnitude)


def to_case(value_si: float, dim: str, info: ValidationInfo | None) -> float:
    """An SI value (the material library's) in the case's units."""
    system = system_of(info)
    if system.si:
        return value_si
    unit = DIMENSIONS[dim][1].format(L="m", T="s")
    return float(registry().Quantity(value_si, unit).to(system.unit(dim)).magnitude)
