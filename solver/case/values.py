"""Side values that vary (solver.case.boundary uses them for a Dirichlet `value`, a Neumann `flux`, a convective
`h` and `ambient`): one of
    a number                      constant along the side and in time
    {time: [[t, v], ...]}         a table in time: linear between points, held before the first and after the last
    {along: [[s, v], ...]}        a profile along the side (s in case units: x on bottom/top, y on left/right): linear
                                  between points, held outside them
    {file: PATH, dataset: NAME}   one value per point of the side (.npy, or HDF5 with `dataset`), its length the
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag, ValidationInfo, model_validator

from .base import MAX_PATH, MAX_TABLE, Part, _pairs
from .units import _number, form_of, other_dims


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
    """Which form a side value takes: the union's tag (error locations drop it: solver.case)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "number"
    if isinstance(v, dict):
        return next((tag for tag, key in (("time-table", "time"), ("along-table", "along"), ("side-file", "file"))
                     if key in v), None)
    return next((tag for tag, model in VARYING_TAGS.items() if model and isinstance(v, model)), None)


_Varying = Annotated[Union[Annotated[float, Tag("number")], Annotated[TimeTable, Tag("time-table")],
                           Annotated[AlongTable, Tag("along-table")], Annotated[SideFile, Tag("side-file")]],
                     Discriminator(_varying_tag, custom_error_type="varying_form",
                                   custom_error_message=f"give {_VARYING_HELP}")]


def varying(*dims: str, by_form: dict | None = None):
    """A side value of dimension dims (or by the case's form, solver.case.units): a number or a string with its unit,
    or a table whose entries are (the keys: times or lengths; the values: dims)."""

    def pre(v: Any, info: ValidationInfo) -> Any:
        choice = by_form.get(form_of(info), dims) if by_form else dims
        other = other_dims(by_form, info)
        if isinstance(v, str):
            return _number(v, choice, info, other)
        if not isinstance(v, dict):
            return v
        out = dict(v)
        for key, key_dim in (("time", "time"), ("along", "length")):
            if isinstance(out.get(key), list):
                out[key] = [[_number(x, (key_dim,) if i == 0 else choice, info, () if i == 0 else other) for i, x in enumerate(row)]
                            if isinstance(row, list) else row for row in out[key]]
        return out

    return Annotated[_Varying, BeforeValidator(pre, json_schema_input_type=Union[float, str, TimeTable, AlongTable,
                                                                                  SideFile])]


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

