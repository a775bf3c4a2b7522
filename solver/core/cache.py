"""One per-machine JSON cache for measured facts (copy ceilings, tuned kernels and tiles), updated atomically.

Directory: STENCIL_CACHE_DIR, else $XDG_CACHE_HOME/stencil, else ~/.cache/stencil. Each file is one
JSON object {key: entry}. `update` re-reads the file, merges the new entries and writes a temporary
file that is then renamed over the old one, so a reader never sees half a file and two writers lose
at most each other's newest entries, never the file. An unwritable directory stores nothing (the facts
are measured again next time).

Reading is validated: `read` takes the check of the file's entries ((key, entry) -> why it cannot be
used, or None; built from `fields` and the tests below) and returns the entries that pass and why each
other one did not. A missing file reads as empty; an unreadable or corrupt file, and every entry that
fails its check, is said once per process on stderr with what happens instead (measured again, or the
default used), so a hand-edited or damaged cache is neither trusted nor silently ignored.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Check = Callable[[str, Any], "str | None"]
_SAID: set[tuple[str, str]] = set()  # (file, key) already reported by this process


def cache_dir() -> Path:
    root = os.environ.get("STENCIL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stencil")
    return Path(root)


def path(name: str) -> Path:
    """The file of one cache, e.g. path('bandwidth') -> ~/.cache/stencil/bandwidth.json."""
    return cache_dir() / f"{name}.json"


def _raw(name: str) -> tuple[dict, str | None]:
    """(the file's object, why it could not be read: None when it was, or is absent)."""
    from .errors import InputError
    from .readers import read_json

    p = path(name)
    if not os.path.lexists(p):
        return {}, None
    try:
        data = read_json(p, None, "")
    except InputError as exc:  # '<path>: <why>; ' (solver.core.readers): the why
        return {}, f"cannot be read ({str(exc).removeprefix(f'{p}: ').removesuffix('; ')[:80]})"
    return (data, None) if isinstance(data, dict) else ({}, "is not a JSON object")


def read(name: str, check: Check, instead: str) -> tuple[dict, dict]:
    """(the entries of cache `name` that pass `check`, {key: why} for those that do not). Each rejection,
    and a file that cannot be read, is said once per process: `instead` is what happens instead."""
    data, broken = _raw(name)
    if broken:
        _say(name, "", f"note: cache {path(name)} {broken}; ignored: {instead}")
    good, bad = {}, {}
    for key, entry in data.items():
        why = check(key, entry)
        if why is None:
            good[key] = entry
        else:
            bad[key] = why
            _say(name, key, f"note: cache {path(name)}: entry {key!r} is invalid ({why}); {instead}")
    return good, bad


def load(name: str, check: Check, instead: str) -> dict:
    """The valid entries of cache `name` (see read)."""
    return read(name, check, instead)[0]


def _say(name: str, key: str, text: str) -> None:
    if (name, key) not in _SAID:
        _SAID.add((name, key))
        print(text, file=sys.stderr, flush=True)


def update(name: str, entries: dict) -> bool:
    """Merge `entries` into the cache `name` (temporary file, then rename); False when nothing could be stored.
    Entries already there are kept as they are (an invalid one is rejected again when read)."""
    target = path(name)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        data, _ = _raw(name)
        data.update(entries)
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(target)
        return True
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False


# checking entries ------------------------------------------------------------------------------------

Field = tuple[str, Callable[[Any], bool], str]  # (key, test, what the value must be)


def problem(entry, fields: list[Field], optional: tuple[str, ...] = ()) -> str | None:
    """Why `entry` is not an object with each of `fields` passing its test (keys in `optional` may be
    absent or null), or None."""
    if not isinstance(entry, dict):
        return f"{_show(entry)} is not a JSON object"
    for key, test, want in fields:
        if key not in entry or (entry[key] is None and key in optional):
            if key in optional:
                continue
            return f"{key} is missing"
        if not test(entry[key]):
            return f"{key} is {_show(entry[key])}, not {want}"
    return None


def _show(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def whole(least: int = 0, most: int | None = None) -> Callable[[Any], bool]:
    """A test: an integer (not a bool) in [least, most]."""
    return lambda v: (isinstance(v, int) and not isinstance(v, bool) and v >= least
                      and (most is None or v <= most))


def positive(v) -> bool:
    """A finite number > 0 (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def text(v) -> bool:
    return isinstance(v, str)


def mapping(v) -> bool:
    return isinstance(v, dict)
