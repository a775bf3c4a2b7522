"""Every text input file a command reads, read one way: a regular file of bounded size, UTF-8 text, parsed as
JSON or YAML (safely), before any value in it is used; the caller then checks what it uses against its spec.
Anything else is one InputError line naming the option or field that gave the file, the file, what is wrong
and the fix (exit 2), never a traceback.

Case files (solver.case.read_yaml) add their own limits on nesting, aliases and values; arrays named in a
case (.npy, HDF5) have their own one reader, solver.core.datafile; checkpoints solver.io.checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import InputError

MAX_INPUT_BYTES = 64 << 20  # sweep.json, records, calibrations: kilobytes to a few megabytes; this is far beyond


def where(what: str | None, path) -> str:
    """The start of an error line: 'OPTION: FILE' (or just FILE)."""
    return f"{what}: {path}" if what else str(path)


def read_bytes(path, what: str | None, fix: str, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or InputError '<what>: <path>: <problem>; <fix>'."""
    p, head = Path(path), where(what, path)
    problem = not_a_file(p)
    if problem:
        raise InputError(f"{head}: {problem}; {fix}")
    try:
        with p.open("rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{head}: cannot be read ({exc.strerror or exc}); {fix}") from None
    if len(raw) > limit:
        raise InputError(f"{head}: larger than {limit >> 20} MiB, far more than such a file holds; {fix}")
    return raw


def not_a_file(p: Path) -> str | None:
    """What `p` is when it is not a regular file (None: it is one), in words for an error: 'is a directory', 'is a
    FIFO (a named pipe)', 'is a character device (...)' (a link is followed: a link to /dev/zero is a device),
    'is a link to ..., which does not exist', 'not found'. Never opens it (a FIFO would block)."""
    import os
    import stat

    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        if p.is_symlink():
            return f"is a link to {os.readlink(p)}, which does not exist"
        return "not found"
    except OSError as exc:
        return f"cannot be looked at ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    link = f" (a link to {os.path.realpath(p)})" if p.is_symlink() else ""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (a named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return f"is {name}{link}, not a regular file"
    return f"is not a regular file{link}"


def read_text(path, what: str | None, fix: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The file as UTF-8 text (a binary file is refused, not decoded into garbage)."""
    raw = read_bytes(path, what, fix, limit)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where(what, path)}: not a text file (byte {exc.start} is not UTF-8); {fix}") from None
    if "\x00" in text:
        raise InputError(f"{where(what, path)}: not a text file (it holds NUL bytes); {fix}")
    return text


def read_json(path, what: str | None, fix: str, limit: int = MAX_INPUT_BYTES):
    """The file's JSON value (any type: the caller checks it against its spec)."""
    text = read_text(path, what, fix, limit)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where(what, path)}: not JSON ({_first_line(exc)}); {fix}") from None
    except RecursionError:
        raise InputError(f"{where(what, path)}: nested too deeply to be such a file; {fix}") from None


def read_yaml(path, what: str | None, fix: str, limit: int = 1 << 20):
    """The file's YAML value, read with the safe loader (no Python objects); small files only (1 MiB)."""
    import yaml

    text = read_text(path, what, fix, limit)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark else ""
        raise InputError(f"{where(what, path)}:{at} not YAML ({getattr(exc, 'problem', None) or _first_line(exc)}); "
                         f"{fix}") from None
    except RecursionError:
        raise InputError(f"{where(what, path)}: nested too deeply to be such a file; {fix}") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:80]
