"""The tuned CuPy kernel choices `stencil tune` stores and runs with backend.block/kernel null read.

Kept in the one cache module (solver.core.cache, file tune.json beside bandwidth.json), one entry per
GPU model, dtype, interior grid shape, variant and time tile k (the fastest block of that pair). A run
takes the fastest entry matching what its case fixes, for its local grid shape, or else the nearest
measured shape (in number of points) for the same GPU and dtype: what is best at one size need not
be best at another.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from ..core import cache

NAME = "tune"


def tune_path() -> Path:
    return cache.path(NAME)


def tune_key(gpu: str, dtype: str, shape, variant: str, k: int) -> str:
    return f"{gpu}|{dtype}|{shape[0]}x{shape[1]}|{variant}|{k}"


def load_tuned() -> dict:
    """The valid entries of tune.json (an invalid one is said, and the default kernel used instead)."""
    return cache.load(NAME, entry_problem, "the default kernel is used; `stencil tune` measures it again")


def entry_problem(key: str, entry) -> str | None:
    """Why a tune.json entry cannot be used (a key not GPU|dtype|NYxNX|variant|k, wrong types, a kernel,
    block or time tile the GPU backend would refuse), or None."""
    from .cupy_kernels import settings_problem

    parts = key.split("|")
    if len(parts) != 5 or not re.fullmatch(r"[1-9]\d*x[1-9]\d*", parts[2]):
        return "its key is not GPU|dtype|NYxNX|kernel|time tile"
    block = (lambda v: isinstance(v, list) and len(v) == 2 and all(cache.whole(1)(b) for b in v), "[x, y] of whole numbers >= 1")
    why = cache.problem(entry, [("kernel", cache.text, "a kernel name"), ("block", *block),
                                ("time_tile", cache.whole(1), "a whole number >= 1"),
                                ("seconds_per_step", cache.positive, "a number > 0")], optional=("block", "time_tile"))
    return why or settings_problem(entry["kernel"], entry.get("block"), entry.get("time_tile") or 1)


def store_tuned(entries: dict) -> None:
    cache.update(NAME, entries)  # an unwritable cache stores nothing: runs use the defaults


def lookup(gpu: str, dtype: str, shape, variant: str | None = None, k: int | None = None, exact: bool = False,
           skip: tuple = ()):
    """(variant, block, k): the fastest entry stored for this GPU and dtype with this variant and k
    (None: any; never one of `skip`), at `shape` or else (unless `exact`) at the nearest measured
    shape; None if nothing matches."""
    prefix = f"{gpu}|{dtype}|"
    hits = [(key.split("|")[2], v) for key, v in load_tuned().items() if key.startswith(prefix) and key.count("|") == 4
            and (variant is None or v["kernel"] == variant) and (k is None or v.get("time_tile", 1) == k)
            and v["kernel"] not in skip]
    here = f"{shape[0]}x{shape[1]}"
    if exact:
        hits = [(s, v) for s, v in hits if s == here]
    if not hits:
        return None
    points = shape[0] * shape[1]
    near = min({s for s, _ in hits}, key=lambda s: abs(math.log(_points(s) / points)))
    hit = min((v for s, v in hits if s == near), key=lambda v: v.get("seconds_per_step", 0.0))
    return hit["kernel"], tuple(hit["block"]) if hit.get("block") else None, hit.get("time_tile", 1)


def _points(shape: str) -> int:
    ny, nx = shape.split("x")
    return int(ny) * int(nx)
