"""The tuned CuPy kernel choices `stencil tune` stores and runs with backend.block/kernel null read.

Kept in the one cache module (solver.core.cache, file tune.json beside bandwidth.json), keyed by GPU
model, dtype and interior grid shape (and the variant, for the fastest block of each variant). A run
uses the entry for its local grid shape, or the entry nearest in number of points for the same GPU
and dtype: what is best at one size need not be best at another.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..core import cache

NAME = "tune"


def tune_path() -> Path:
    return cache.path(NAME)


def tune_key(gpu: str, dtype: str, shape, variant: str | None = None) -> str:
    return f"{gpu}|{dtype}|{shape[0]}x{shape[1]}" + (f"|{variant}" if variant else "")


def load_tuned() -> dict:
    return cache.load(NAME)


def store_tuned(entries: dict) -> None:
    cache.update(NAME, entries)  # an unwritable cache stores nothing: runs use the defaults


def lookup(gpu: str, dtype: str, shape, variant: str | None = None):
    """(variant, block) stored for this GPU/dtype at `shape`, else at the nearest size; None if none."""
    data = load_tuned()
    hit = data.get(tune_key(gpu, dtype, shape, variant))
    if hit is None:
        prefix, points = f"{gpu}|{dtype}|", shape[0] * shape[1]
        same = [(k, v) for k, v in data.items() if k.startswith(prefix) and (k.count("|") == 3) == (variant is not None)
                and (variant is None or k.endswith(f"|{variant}"))]
        if not same:
            return None
        hit = min(same, key=lambda kv: abs(math.log(_points(kv[0]) / points)))[1]
    block = tuple(hit["block"]) if hit.get("block") else None
    return hit["kernel"], block


def _points(key: str) -> int:
    ny, nx = key.split("|")[2].split("x")
    return int(ny) * int(nx)
