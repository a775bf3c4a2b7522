"""One per-machine JSON cache for measured facts (copy ceilings, tuned GPU kernels), updated atomically.

Directory: STENCIL_CACHE_DIR, else $XDG_CACHE_HOME/stencil, else ~/.cache/stencil. Each file is one
JSON object {key: entry}. `update` re-reads the file, merges the new entries and writes a temporary
file that is then renamed over the old one, so a reader never sees half a file and two writers lose
at most each other's newest entries, never the file. A missing, unreadable or corrupt file reads as
empty; an unwritable directory stores nothing (the facts are measured again next time).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("STENCIL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stencil")
    return Path(root)


def path(name: str) -> Path:
    """The file of one cache, e.g. path('bandwidth') -> ~/.cache/stencil/bandwidth.json."""
    return cache_dir() / f"{name}.json"


def load(name: str) -> dict:
    try:
        data = json.loads(path(name).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def update(name: str, entries: dict) -> bool:
    """Merge `entries` into the cache `name` (temporary file, then rename); False when nothing could be stored."""
    target = path(name)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        data = load(name)
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
