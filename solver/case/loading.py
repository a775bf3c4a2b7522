"""From YAML (a file, a checkpoint's saved case, `--set` options, the API's overrides) to a validated Case."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.errors import InputError
from .base import OPTION_FIELDS, MAX_CASE_BYTES, MAX_DEPTH, MAX_NODES, MAX_VALUE_CHARS, QUOTE_CHARS, quote
from .errors import format_errors
from .model import Case



def read_yaml(path: str | Path) -> dict:
    """The raw mapping of a case file, or an InputError that names the file and the line.

    Refused before any value is built: files over MAX_CASE_BYTES, nesting deeper than MAX_DEPTH, keys or
    values over MAX_VALUE_CHARS characters, aliases that expand past MAX_NODES, duplicate keys.
    """
    import yaml

    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a case file; give a .yaml file")
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: is not a regular file (a device or a pipe); give a .yaml case file")
    if not path.is_file():
        raise InputError(f"{path}: case file not found; check the path")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CASE_BYTES + 1)
        if len(raw) > MAX_CASE_BYTES:
            raise InputError(f"{path}: larger than {MAX_CASE_BYTES >> 20} MiB; a case file is a short YAML mapping "
                             "(see cases/quickstart.yaml)")
        text = raw.decode("utf-8")
        _check_events(path, text)
        data = yaml.load(text, Loader=_case_loader())  # noqa: S506 - a SafeLoader subclass
    except OSError as exc:
        raise InputError(f"{path}: cannot read the case file ({exc.strerror}); check its permissions") from None
    except yaml.YAMLError as exc:
        if type(exc).__name__ == "DuplicateKey":
            raise InputError(f"{path}:{_where(exc)}: {exc.problem}") from None
        raise InputError(f"{path}:{_where(exc)}: YAML syntax error: {_problem(exc)}; fix the YAML at that line") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file; give a YAML case file") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a case file must be a YAML mapping with a 'grid' section (see cases/quickstart.yaml)")
    return data


def _where(exc) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _problem(exc) -> str:
    text = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= QUOTE_CHARS * 2 else text[:QUOTE_CHARS * 2] + "..."


def _check_events(path: Path, text: str) -> None:
    """One pass over the YAML events (iterative: no recursion, whatever the nesting).

    Anchors and aliases (`&a`, `*a`: what yaml.safe_dump writes for a mapping used twice) are accepted with
    their expansion bounded: each alias counts its anchor's whole subtree (aliases inside it expanded), and
    depth counts through aliases too, so a document whose aliases would add more than MAX_NODES nodes or nest
    past MAX_DEPTH levels (a "billion laughs") is refused before anything is built. Nodes written out are
    bounded by the file's size (MAX_CASE_BYTES): 1000 windowed sources are a case file, not an expansion."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    open_nodes: list[list] = []  # per open mapping or sequence: [anchor, nodes inside, height below it]
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) of its subtree
    added = 0  # nodes the aliases add to the document
    for ev in yaml.parse(text, Loader=loader):
        line = f" line {ev.start_mark.line + 1}" if ev.start_mark else ""
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            open_nodes.append([ev.anchor, 1, 1])
            if len(open_nodes) > MAX_DEPTH:
                raise InputError(f"{path}:{line}: nested more than {MAX_DEPTH} levels deep; a case file nests "
                                 "sections a few levels deep (see cases/quickstart.yaml)")
            continue
        if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, nodes, height = open_nodes.pop()
        elif isinstance(ev, yaml.AliasEvent):
            if ev.anchor not in sizes:
                raise InputError(f"{path}:{line}: alias *{ev.anchor} refers to no complete node before it (an "
                                 "undefined anchor, or one that contains the alias: a cycle); write the values out")
            anchor, (nodes, height) = None, sizes[ev.anchor]
            added += nodes
            if len(open_nodes) + height > MAX_DEPTH:
                raise InputError(f"{path}:{line}: alias *{ev.anchor} nests the document more than {MAX_DEPTH} "
                                 "levels deep; write the values out")
        elif isinstance(ev, yaml.ScalarEvent):
            if len(ev.value) > MAX_VALUE_CHARS:
                raise InputError(f"{path}:{line}: a value of {len(ev.value)} characters (at most {MAX_VALUE_CHARS}); "
                                 f"it starts {quote(ev.value[:QUOTE_CHARS])}")
            anchor, nodes, height = ev.anchor, 1, 0
        else:
            continue
        if anchor:
            sizes[anchor] = (nodes, height)
        if open_nodes:
            open_nodes[-1][1] += nodes
            open_nodes[-1][2] = max(open_nodes[-1][2], height + 1)
        if added > MAX_NODES:
            raise InputError(f"{path}:{line}: the aliases (*) add more than {MAX_NODES} nodes to this document; a case "
                             "file repeats a section or two: write the values out")


@functools.lru_cache(maxsize=1)
def _case_loader():
    import yaml
    from yaml.constructor import ConstructorError

    class DuplicateKey(ConstructorError):
        pass

    class CaseLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        """A SafeLoader that refuses a key given twice in one mapping (YAML would keep the last silently)."""

        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # the base class reports an unhashable key
                if key in seen:
                    raise DuplicateKey(None, None, f"key {quote(key)} is given twice in one mapping (first on line "
                                       f"{seen[key] + 1}); keep one of them", key_node.start_mark)
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep)

    _yaml12_numbers(CaseLoader)
    return CaseLoader


def dump_yaml(data) -> str:
    """A case mapping as YAML that _case_loader reads back to the same values: a string that YAML 1.2 would
    read as a number (`0o64`, `1e5`) is quoted (yaml.safe_dump quotes by YAML 1.1's rules only)."""
    import yaml

    return yaml.dump(data, Dumper=_case_dumper(), sort_keys=False)


@functools.lru_cache(maxsize=1)
def _case_dumper():
    import yaml

    class CaseDumper(yaml.SafeDumper):
        pass

    _yaml12_numbers(CaseDumper)
    CaseDumper.yaml_implicit_resolvers = {  # and quote what YAML 1.1 would read as a number too (older readers)
        first: rules + [r for r in yaml.SafeDumper.yaml_implicit_resolvers.get(first, []) if r not in rules]
        for first, rules in {**yaml.SafeDumper.yaml_implicit_resolvers, **CaseDumper.yaml_implicit_resolvers}.items()}
    return CaseDumper


def load_yaml(text: str):
    """YAML text read as a case file is (YAML 1.2 numbers, the safe loader): a checkpoint's saved case."""
    import yaml

    return yaml.load(text, Loader=_case_loader())  # noqa: S506 - a SafeLoader subclass


INT, FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
YAML12 = ((INT, r"^[-+]?[0-9]+$|^0o[0-7]+$|^0x[0-9a-fA-F]+$"),  # YAML 1.2's core schema, ints first
          (FLOAT, r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"))


def _yaml12_numbers(loader) -> None:
    """Numbers as YAML 1.2's core schema reads them, in case files and --set alike: `064` is 64 and `0o64` octal
    52 (YAML 1.1, PyYAML's default, reads `064` as octal 52), `1e-5` a float (1.1: the string '1e-5'); 1.1's
    binary `0b1`, sexagesimal `1:30` and digits with underscores `1_000` are no numbers in 1.2 (strings)."""
    loader.yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in rules if tag not in (INT, FLOAT)]
                                      for first, rules in loader.yaml_implicit_resolvers.items()}
    for tag, pattern in YAML12:
        loader.add_implicit_resolver(tag, re.compile(pattern), list("-+0123456789." if tag == FLOAT else "-+0123456789"))

    def integer(constructor, node):
        text = constructor.construct_scalar(node)
        base = {"0o": 8, "0x": 16}.get(text[:2], 10)
        return int(text[2:] if base != 10 else text, base)

    def number(constructor, node):
        text = constructor.construct_scalar(node).lower()
        if text.lstrip("+-") == ".inf":
            return float("-inf") if text.startswith("-") else float("inf")
        return float("nan") if text == ".nan" else float(text)

    if hasattr(loader, "add_constructor"):  # (a dumper takes the resolvers only)
        loader.add_constructor(INT, integer)
        loader.add_constructor(FLOAT, number)




def load_case(path: str | Path, overrides: dict[str, Any] | None = None) -> Case:
    """Read, apply overrides, validate. Errors are InputError lines.

    overrides: field paths (`{"physics.alpha": 0.5}`, any field, None included: `{"physics.dt": None}`) or
    CLI options (`{"--steps": 10}`; None there means "not given")."""
    path = Path(path)
    data = read_yaml(path)
    data.setdefault("name", path.stem)
    return case_from_data(data, str(path), overrides)


def case_from_data(data: dict, source: str, overrides: dict[str, Any] | None = None) -> Case:
    """A case mapping (a file's, or a checkpoint's saved case) with overrides applied (see load_case), validated."""
    if overrides is not None and not isinstance(overrides, dict):
        raise InputError(f"{source}: overrides: {quote(overrides)} is not a mapping; give field paths and values, e.g. "
                         "{'physics.alpha': 0.5}")
    for name, value in (overrides or {}).items():
        if isinstance(name, str) and name.startswith("--"):
            if name not in OPTION_FIELDS:
                raise InputError(f"{source}: {name}: not an option that sets a case field; use one of "
                                 f"{', '.join(OPTION_FIELDS)}, or a field path such as 'physics.alpha'")
            if value is None:
                continue
            name = ".".join(OPTION_FIELDS[name])
        set_field(data, name, value, source)
    return validate_case(data, source=source, options=overrides)


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """--set PATH=VALUE options as overrides: the value read as YAML (a number, true, null, [1, 2], {kind: ...})."""
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        path, eq, text = item.partition("=")
        if not eq or not path.strip():
            raise InputError(f"--set: {quote(item)} is not PATH=VALUE; e.g. --set physics.alpha=0.5 or --set "
                             "physics.source.0.amplitude=5")
        try:
            out[path.strip()] = yaml.load(text, Loader=_case_loader()) if text.strip() else None  # noqa: S506 - SafeLoader
        except yaml.YAMLError as exc:
            raise InputError(f"--set: {path.strip()}: {quote(text)} is not a YAML value ({_problem(exc)}); e.g. 0.5, "
                             "[0.5, 0.5] or {kind: constant, value: 1}") from None
    return out


def set_field(data: dict, path: str, value: Any, source: str = "case") -> None:
    """data[a][b] = value for path 'a.b' (missing sections are made); a number picks an entry of a list
    ('physics.source.0.value'); validation judges the field itself."""
    keys = path.split(".") if isinstance(path, str) else []
    if not keys or not all(keys):
        raise InputError(f"{source}: {path!r}: a field path is names joined by dots, e.g. 'physics.alpha' or "
                         "'physics.source.0.value'")
    node = data
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        if isinstance(node, list):
            if not node:
                raise InputError(f"{source}: {path}: {'.'.join(keys[:depth])} is an empty list, so it has no entry "
                                 f"{key}; give the whole list instead, e.g. {'.'.join(keys[:depth])}=[{{...}}]")
            if not key.isdigit() or int(key) >= len(node):
                raise InputError(f"{source}: {path}: {'.'.join(keys[:depth])} is a list of {len(node)} entries; pick "
                                 f"one by its index, 0 to {len(node) - 1} (e.g. {'.'.join(keys[:depth])}.0)")
            key = int(key)
            if last:
                node[key] = value
            else:
                node = node[key]
            continue
        if not isinstance(node, dict):
            raise InputError(f"{source}: {path}: {'.'.join(keys[:depth])} is a value, not a section; give a path to "
                             "a field, e.g. 'physics.alpha'")
        if last:
            node[key] = value
        else:
            node = node.setdefault(key, {})


def validate_case(data: dict, source: str = "case", options: dict | None = None) -> Case:
    try:
        return Case.model_validate(data, context=context_of(data))
    except ValidationError as exc:
        raise InputError("\n".join(format_errors(exc, source, options or {}))) from None




def context_of(data) -> dict:
    """What the units' validators need before the model is built (solver.case.units): the case's unit system, its
    form (the material form where physics.material is given) and the plate's thickness in the case's units."""
    from .units import convert, raw_system

    system = raw_system(data)
    physics = data.get("physics") if isinstance(data, dict) else None
    physics = physics if isinstance(physics, dict) else {}
    thickness = physics.get("thickness")
    if isinstance(thickness, str):
        try:
            thickness = convert(thickness, ("length",), system)[0]
        except ValueError:
            thickness = None  # the model's own validation names the field
    ok = isinstance(thickness, (int, float)) and not isinstance(thickness, bool) and thickness > 0
    return {"system": system, "form": "material" if physics.get("material") is not None else "alpha",
            "thickness": float(thickness) if ok else None}
