"""Validation errors as one line each: the field, what is wrong, the fix."""

from __future__ import annotations

import difflib

from pydantic import BaseModel, ValidationError

from .base import OPTION_FIELDS, QUOTE_CHARS, quote
from .boundary import BOUNDARY_KINDS, _SIDE_HELP
from .initial import Constant, FromFile, Hotspot, Random, Sine
from .materials import ALPHA_TAGS, REGION_KINDS
from .values import VARYING_TAGS
from .model import Case
from .probes import PROBE_KINDS, DiskShape, RectangleShape
from .regions import PLATE_REGION_KINDS, RIM_KINDS
from .sources import SOURCE_KINDS

UNION_TAGS = {*VARYING_TAGS, *ALPHA_TAGS}  # tags in error locations that name no field


def format_errors(exc: ValidationError, source: str, options: dict) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc, message = _field_path(err["loc"]), _message(err)
        head, sep, rest = message.partition(": ")
        if err["type"] == "value_error" and sep and " " not in head and head.startswith(loc):
            loc, message = head, rest  # cross-field checks name their field themselves
        elif err["type"] == "value_error" and sep and " " not in head and "." not in head and loc:
            loc, message = f"{loc}.{head}", rest  # a section's check names its field within the section
        option = _option_for(loc, options)
        where = f"{option} (field {loc})" if option else (loc or "case")
        if err["type"] == "extra_forbidden":
            message = _unknown_field(loc, _union_tag(err["loc"]))
        lines.append(f"{source}: {where}: {message}")
    return lines


def _field_path(loc: tuple) -> str:
    parts = [str(p) if len(str(p)) <= QUOTE_CHARS else quote(str(p)) for p in loc]
    return ".".join(p for k, p in enumerate(parts) if not _is_tag(parts, k))


def _is_tag(parts: list[str], k: int) -> bool:
    """Whether location part k is the tag a union chose (a kind, or a form of a side value or of alpha)."""
    p, before = parts[k], parts[:k]
    if p in UNION_TAGS:
        return True
    if before == ["initial"] and p in _INITIAL_KINDS:
        return True
    if len(before) == 2 and before[0] == "boundary" and p in BOUNDARY_KINDS:
        return True
    if len(before) == 3 and before[:2] == ["physics", "source"] and p in SOURCE_KINDS:
        return True
    if before[:1] == ["physics"] and before[-1:] in (["hole"], ["rim"]) and p in RIM_KINDS:
        return True
    if (before[:2] == ["physics", "regions"] and len(before) == 3 or before == ["physics", "outline"]) and \
            p in PLATE_REGION_KINDS:
        return True
    if _probe_tag(before, p):
        return True
    return len(before) >= 4 and before[-2] == "regions" and before[0] == "physics" and p in REGION_KINDS


def _probe_tag(before: list[str], p: str) -> bool:
    """output.probes.<n>.<kind>... and a region's output.probes.<n>.<kind>.region.<shape>..."""
    if before[:2] != ["output", "probes"]:
        return False
    return (len(before) == 3 and p in PROBE_KINDS) or (len(before) == 5 and before[-1] == "region"
                                                       and p in ("rectangle", "disk"))


def _union_tag(loc: tuple) -> str | None:
    """The kind a discriminated union chose, from an error location (initial.<kind>..., boundary.<side>.<kind>...,
    physics.source.<n>.<kind>...), for naming the fields of that kind."""
    parts = [str(p) for p in loc]
    if parts[0] == "initial" and len(parts) > 2:
        return parts[1]
    if parts[0] == "boundary" and len(parts) > 3:
        return parts[2]
    if parts[:2] == ["physics", "source"] and len(parts) > 4:
        return parts[3]
    for k in range(2, len(parts) - 2):
        if parts[k] in ("hole", "rim") and parts[k + 1] in RIM_KINDS and parts[:1] == ["physics"]:
            return parts[k + 1]
    if parts[:2] == ["physics", "regions"] and len(parts) > 4 and parts[3] in PLATE_REGION_KINDS:
        return parts[3]
    if parts[:2] == ["physics", "outline"] and len(parts) > 3 and parts[2] in PLATE_REGION_KINDS:
        return parts[2]
    return None


def _kinds_at(loc: tuple) -> set[str]:
    parts = [str(p) for p in loc]
    if parts[:1] == ["boundary"]:
        return set(BOUNDARY_KINDS)
    if parts[:2] == ["physics", "source"]:
        return set(SOURCE_KINDS)
    if parts[:1] == ["physics"] and ("hole" in parts or "rim" in parts):
        return set(RIM_KINDS)
    if parts[:2] == ["physics", "regions"] and len(parts) <= 4 or parts[:2] == ["physics", "outline"]:
        return set(PLATE_REGION_KINDS)
    if parts[:1] == ["physics"] and "regions" in parts:
        return set(REGION_KINDS)
    return _INITIAL_KINDS


def _option_for(loc: str, options: dict) -> str | None:
    """The command-line option that gave the field at `loc` its value: an option that sets it, unless an override
    after it (a --set of the field or of its section) set it again."""
    later = list(options)
    for option, (section, key) in OPTION_FIELDS.items():
        field = f"{section}.{key}"
        if options.get(option) is not None and loc == field:
            after = later[later.index(option) + 1:]
            if not any(isinstance(k, str) and (k == field or field.startswith(f"{k}.")) for k in after):
                return option
    return None


def _message(err: dict) -> str:
    kind, msg, got = err["type"], err["msg"], err.get("input")
    if kind == "missing":
        return "required field is missing; add it (see `stencil schema` or cases/quickstart.yaml)"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    kinds = ", ".join(sorted(_kinds_at(err["loc"])))
    if kind == "union_tag_invalid":
        return f"unknown kind {quote(err['ctx'].get('tag'))}; use one of {kinds}"
    if kind == "union_tag_not_found":
        return f"needs a 'kind'; use one of {kinds}"
    if kind == "model_attributes_type" and err["loc"][:1] == ("boundary",):
        return f"give {_SIDE_HELP}"
    fix = _FIXES.get(kind, "")
    ctx = err.get("ctx") or {}
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        op, limit = bounds[kind], next(iter(ctx.values()), "")
        limit = f"{limit:g}" if isinstance(limit, float) else limit
        msg, fix = f"{msg.rsplit(' ', 1)[0]} {limit}", f"use a value {op} {limit}"
    elif kind == "literal_error":
        fix = f"use {ctx.get('expected', 'one of the listed values')}"
    elif kind in ("too_short", "too_long"):
        fix = f"give exactly {ctx.get('min_length', ctx.get('max_length'))} values, e.g. [2, 2]"
    shown = "" if isinstance(got, (dict, list)) else f" (got {quote(got)})"
    return f"{msg}{shown}{'; ' + fix if fix else ''}"


_FIXES = {
    "int_type": "give a whole number",
    "float_type": "give a number",
    "bool_type": "use true or false",
    "string_type": "give a text value",
    "list_type": "give a list, e.g. [0.5, 0.5]",
    "model_type": "give a mapping of fields (see `stencil schema`)",
    "model_attributes_type": "give a mapping of fields (see `stencil schema`)",
    "string_pattern_mismatch": "use letters, digits, '_', '-', '.' or '+'",
}


def _known_fields() -> dict[str, list[str]]:
    known = {"": list(Case.model_fields)}
    for name, info in Case.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            known[name] = list(ann.model_fields)
    known["initial"] = sorted({f for m in (Sine, Hotspot, Constant, Random, FromFile) for f in m.model_fields})
    return known


_INITIAL_MODELS = {"sine": Sine, "hotspot": Hotspot, "constant": Constant, "random": Random, "file": FromFile}
_INITIAL_KINDS = set(_INITIAL_MODELS)
_KNOWN = _known_fields()


def _unknown_field(loc: str, kind: str | None = None) -> str:
    """'unknown field' with the closest known name; for initial, the fields of the kind in use."""
    section, _, name = loc.rpartition(".")
    known = _KNOWN.get(section, [])
    own_models = BOUNDARY_KINDS if section.startswith("boundary.") else SOURCE_KINDS if section.startswith(
        "physics.source.") else RIM_KINDS if section.endswith((".hole", ".rim")) else PLATE_REGION_KINDS if \
        section.startswith(("physics.regions.", "physics.outline")) else {}
    if kind in own_models:
        own = list(own_models[kind].model_fields)
        close = difflib.get_close_matches(name, own, n=1)
        return f"unknown field '{name}' for kind {kind}; " + (f"did you mean '{close[0]}'?" if close else
                                                               f"fields of {kind}: {', '.join(own)}")
    if kind in _INITIAL_MODELS:
        own = list(_INITIAL_MODELS[kind].model_fields)
        if name in known:
            others = sorted(k for k, m in _INITIAL_MODELS.items() if name in m.model_fields)
            return f"'{name}' does not apply to kind {kind} (it belongs to {', '.join(others)}); fields of {kind}: " \
                   f"{', '.join(own)}"
        known = own
    if not known and section.startswith("output.probes."):  # a probe's or its region's fields
        known = sorted({f for m in (*PROBE_KINDS.values(), RectangleShape, DiskShape) for f in m.model_fields})
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean '{close[0]}'?" if close else (f"known fields: {', '.join(known)}" if known else
                                                         "see docs/case_file.md for the fields")
    return f"unknown field '{name}'; {hint}"


