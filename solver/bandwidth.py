"""The ceiling a memory-bound stencil is measured against: STREAM-like copy bandwidth, cached per machine.

Bytes counted: read + written (2 x itemsize per element), the same convention as the stencil's
effective bandwidth (2 x itemsize per update). Under MPI every rank copies at once and the rates
add up, so the ceiling matches the way the stencil uses the machine.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from .info import cpu_model

NODE_BYTES = 512 << 20  # bytes per node for the copy test, split across its ranks (far beyond caches)
MIN_BYTES = 32 << 20


def cache_path() -> Path:
    root = os.environ.get("STENCIL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "stencil")
    return Path(root) / "bandwidth.json"


def cache_key(backend, comm, kind: str = "copy") -> str:
    _, per_node = comm.node()
    gpu = backend.describe().get("device", "cpu")
    return f"{socket.gethostname()}|{cpu_model()}|{gpu}|{backend.name}|{kind}|threads={backend.threads}|" \
           f"ranks={comm.size}|per_node={per_node}"


def load_cache() -> dict:
    try:
        return json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}


def store(key: str, entry: dict) -> None:
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = load_cache()
        data[key] = entry
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass  # a read-only home: measure again next time


def copy_ceiling(backend, comm, refresh: bool = False) -> dict:
    """{'gbs': total copy GB/s over all ranks, 'cached': bool, ...}; collective."""
    key = cache_key(backend, comm)
    entry = comm.bcast(load_cache().get(key) if comm.rank == 0 else None)
    if entry is not None and not refresh:
        return {**entry, "cached": True}
    _, per_node = comm.node()
    nbytes = max(NODE_BYTES // per_node, MIN_BYTES)
    comm.barrier()
    mine = backend.copy_bandwidth(nbytes)
    total = comm.allsum(mine)
    entry = {"gbs": total / 1e9, "per_rank_gbs": total / 1e9 / comm.size, "bytes_per_rank": nbytes,
             "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "key": key}
    if comm.rank == 0:
        store(key, entry)
    return {**entry, "cached": False}
