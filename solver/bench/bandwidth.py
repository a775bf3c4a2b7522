"""Ceilings, measured per backend and cached per machine: copy and SAXPY bandwidth for memory-bound
kernels, and the compute peak (solver.bench.peak: `fma` and `mul_add` GFLOP/s per dtype, kinds
"fma-float64", "mul_add-float32", ...) for the roofline's compute roofs.

Bytes counted: what the operation must move, read + written (copy: 2 x itemsize per element, SAXPY
y = a*x + y: 3 x itemsize), the same convention as the stencil's effective bandwidth (2 x itemsize
per update). Under MPI every rank streams at once (bench_stream.concurrent_rate): the ceiling is the
aggregate rate of all ranks together, which is how the stencil uses the machine.

Array sizes: NODE_BYTES (512 MiB) per array per node in host memory, shared by the node's ranks (at
least MIN_BYTES each), or STENCIL_BANDWIDTH_MIB; GPU_BYTES (1 GiB) per array on each GPU.

Cache: bandwidth.json in the one cache directory (solver.core.cache: STENCIL_CACHE_DIR, else
$XDG_CACHE_HOME/stencil, else ~/.cache/stencil), one entry per (host, CPU model, device, backend, kind,
threads per rank, ranks, ranks per node), each with the date it was measured, the machine's
fingerprint (host, CPU model, logical CPUs, memory) and its worker count (ranks x threads). Runs and
sweeps look their ceiling up there and measure it when it is missing, when the fingerprint differs
(another machine under the same name), or when the reading is inconsistent with its neighbours: more
workers slower than fewer on the same machine, backend and kind by more than INCONSISTENT (a reading
taken while the machine was busy). A reading measured again and still inconsistent is kept, marked
`rechecked`. `stencil bench bandwidth --refresh` measures again and replaces the entries. Compute
peaks are cached and checked the same way (their rate is `gflops` instead of `gbs`).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import numpy as np

from ..core import cache
from ..core.cache import mapping, positive, problem, text, whole
from ..core.machine import cpu_model, fingerprint

NODE_BYTES = 512 << 20  # host memory per node for one array, split across its ranks (far beyond caches)
MIN_BYTES = 32 << 20
GPU_BYTES = 1 << 30  # device memory per rank for one array
KINDS = ("copy", "memcpy", "saxpy")
PEAK_KINDS = ("fma", "mul_add")  # compute peaks, as "<kind>-<dtype>" (solver.bench.peak)
CACHE = "bandwidth"
INCONSISTENT = 0.8  # more workers below this fraction of fewer workers' rate: measure again


def cache_path() -> Path:
    return cache.path(CACHE)


def cache_key(backend, comm, kind: str = "copy") -> str:
    _, per_node = comm.node()
    gpu = backend.describe().get("device", "cpu")
    return f"{socket.gethostname()}|{cpu_model()}|{gpu}|{backend.name}|{kind}|threads={backend.threads}|" \
           f"ranks={comm.size}|per_node={per_node}"


MEASURED_AGAIN = "it is measured again"


def entry_problem(key: str, entry) -> str | None:
    """Why a bandwidth.json entry cannot be used (wrong types, a rate that is not a positive number), or None."""
    rate = "gflops" if isinstance(entry, dict) and "gflops" in entry else "gbs"
    count = (whole(1), "a whole number >= 1")
    fields = [(rate, positive, "a number > 0"), (f"per_rank_{rate}", positive, "a number > 0"),
              ("measured", text, "a date"), ("fingerprint", mapping, "a JSON object"),
              ("workers", *count), ("ranks", *count), ("per_node", *count), ("threads", *count)]
    if rate == "gbs":
        fields.append(("bytes_per_rank", whole(0), "a whole number of bytes"))
    return problem(entry, fields)


def read_cache() -> tuple[dict, dict]:
    """(valid entries, {key: why} for the invalid ones: measured again) of bandwidth.json."""
    return cache.read(CACHE, entry_problem, MEASURED_AGAIN)


def load_cache() -> dict:
    return read_cache()[0]


def store(key: str, entry: dict) -> None:
    cache.update(CACHE, {key: entry})  # a read-only home: measured again next time


def rate(entry: dict) -> float:
    """The entry's figure: GB/s for bandwidths, GFLOP/s for compute peaks."""
    return entry["gflops"] if "gflops" in entry else entry["gbs"]


def family(entry: dict) -> tuple:
    """Entries whose rates may be compared: same machine, device, backend, kind and node count."""
    nodes = entry.get("ranks", 1) // max(entry.get("per_node", 1), 1)
    return (json.dumps(entry.get("fingerprint"), sort_keys=True), entry.get("device"), entry.get("backend"), entry.get("kind"), nodes)


def inconsistency(entry: dict, data: dict) -> str | None:
    """Why `entry` looks wrong beside the other cached readings (more workers slower than fewer by more
    than 1 - INCONSISTENT), else None."""
    mine = family(entry)
    for other in data.values():
        if (isinstance(other, dict) and other.get("workers", 0) < entry.get("workers", 0) and family(other) == mine
                and rate(entry) < INCONSISTENT * rate(other)):
            unit = "GFLOP/s" if "gflops" in entry else "GB/s"
            return (f"{rate(entry):.1f} {unit} with {entry['workers']} workers is below {INCONSISTENT:.0%} of "
                    f"{rate(other):.1f} {unit} with {other['workers']} (measured {other['measured'][:16]})")
    return None


def usable(entry: dict | None, data: dict) -> str | None:
    """None when a cached entry can be used, else why it is measured again."""
    if entry is None:
        return "not cached"
    if entry.get("fingerprint") != fingerprint():
        return "cached for another machine fingerprint"
    if entry.get("rechecked"):
        return None
    return inconsistency(entry, data)


def array_bytes(backend, comm) -> int:
    """Bytes of one array on this rank: a share of the node's bytes in host memory, GPU_BYTES on a device.
    STENCIL_BANDWIDTH_MIB overrides the node's bytes (keep it far above the last-level cache)."""
    if backend.on_gpu:
        return GPU_BYTES
    _, per_node = comm.node()
    override = env_mib("STENCIL_BANDWIDTH_MIB") << 20
    return max(override // per_node, 1 << 16) if override else max(NODE_BYTES // per_node, MIN_BYTES)


def env_mib(name: str) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return 0
    if not text.isdigit() or int(text) < 1:
        from ..core.errors import InputError

        raise InputError(f"{name}: {text!r} is not a whole number of MiB; set e.g. {name}=1024 or unset it")
    return int(text)


def measure(backend, comm, kind: str = "copy", nbytes: int | None = None, repeats: int = 5) -> dict:
    """Measure `kind` on `backend` with every rank at once (collective); returns an uncached entry."""
    from .stream import STREAMS, concurrent_rate, make_stream

    base, _, dtype = kind.partition("-")  # "copy", or a compute peak "fma-float64"
    itemsize = np.dtype("float64").itemsize
    nbytes = 0 if base in PEAK_KINDS else nbytes or array_bytes(backend, comm)
    if base in PEAK_KINDS:
        from . import peak

        rate = peak.measure(backend, comm, dtype, base, repeats)
    elif backend.name not in STREAMS:  # a backend without stream kernels: its own copy, rates summed
        comm.barrier()
        total = comm.allsum(backend.copy_bandwidth(nbytes, repeats))
        rate = {"gbs": total / 1e9, "per_rank_gbs": total / 1e9 / comm.size, "method": "backend.copy_bandwidth"}
    else:
        s = make_stream(backend.name, nbytes // itemsize, "float64", backend.threads, backend.local_rank)
        rate = concurrent_rate(comm, getattr(s, kind), s.synchronize, s.nbytes(kind), repeats)
        del s
    _, per_node = comm.node()
    return {**rate, "kind": kind, "bytes_per_rank": nbytes, "dtype": dtype or "float64",
            "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "key": cache_key(backend, comm, kind),
            "fingerprint": fingerprint(), "backend": backend.name, "device": backend.describe().get("device", "cpu"),
            "threads": backend.threads, "ranks": comm.size, "per_node": per_node,
            "workers": comm.size * backend.threads}


def ceiling(backend, comm, kind: str = "copy", refresh: bool = False, repeats: int = 5) -> dict:
    """{'gbs': aggregate GB/s over all ranks, 'cached': bool, 'source': 'cached <date>' or 'measured now', ...}
    from the cache, or measured (again, once, when the cached or new reading is inconsistent); collective."""
    key = cache_key(backend, comm, kind)
    data, invalid = read_cache() if comm.rank == 0 else ({}, {})
    entry = data.get(key)
    why = "refresh asked" if refresh else f"the cached entry is invalid ({invalid[key]})" if key in invalid else None
    why, entry = comm.bcast((why or usable(entry, data), entry) if comm.rank == 0 else None)
    if why is None:
        return {**entry, "cached": True, "source": f"cached {entry['measured'][:16].replace('T', ' ')}"}
    entry = measure(backend, comm, kind, repeats=repeats)
    if comm.bcast(inconsistency(entry, data) if comm.rank == 0 else None):  # measured while the machine was busy?
        entry = measure(backend, comm, kind, repeats=repeats)
        still = comm.bcast(inconsistency(entry, data) if comm.rank == 0 else None)
        entry.update({"rechecked": still} if still else {})  # twice inconsistent: the machine's own shape; kept
    if comm.rank == 0:
        store(key, entry)
    return {**entry, "cached": False, "source": "measured now", "why_measured": why}


def copy_ceiling(backend, comm, refresh: bool = False) -> dict:
    """The ceiling runs compare the stencil with (record.json: throughput.copy_gbs); collective."""
    return ceiling(backend, comm, "copy", refresh)


def compute_ceiling(backend, comm, dtype: str, refresh: bool = False) -> dict:
    """The compute roofs for `dtype` with these ranks and threads (collective): {'fma': entry, 'mul_add': entry}."""
    return {k: ceiling(backend, comm, f"{k}-{dtype}", refresh) for k in PEAK_KINDS}


def bandwidth_bench(names: list[str], threads: list[int], comm, refresh: bool = False, repeats: int = 5) -> dict:
    """`stencil bench bandwidth`: copy and SAXPY for each backend (and thread count for numba), and the
    compute peaks (multiply + add, FMA) in both dtypes."""
    from ..backends import backend_class
    from ..case import BackendSettings
    from ..core.machine import cpu_count

    node_rank, per_node = comm.node()
    _size_numba_pool(names, threads)
    rows, peaks = [], []
    for name in names:
        cls = backend_class(name)
        for t in (threads if name == "numba" else [1]):
            be = cls(BackendSettings(name=name), "float64", t, local_rank=node_rank, local_size=per_node)
            for kind in KINDS:
                entry = ceiling(be, comm, kind, refresh, repeats)
                rows.append({**entry, "backend": name, "threads": be.threads, "kind": kind,
                             "device": be.describe().get("device", "cpu")})
            for dtype in ("float64", "float32"):
                for kind, entry in compute_ceiling(be, comm, dtype, refresh).items():
                    peaks.append({**entry, "backend": name, "threads": be.threads, "kind": kind, "dtype": dtype,
                                  "device": be.describe().get("device", "cpu")})
    return {"host": socket.gethostname(), "cpu": cpu_model(), "cores": cpu_count(), "ranks": comm.size,
            "ranks_per_node": per_node, "repeats": repeats, "cache": str(cache_path()),
            "date": time.strftime("%Y-%m-%d %H:%M"), "results": rows, "peaks": peaks}


def _size_numba_pool(names: list[str], threads: list[int]) -> None:
    """numba fixes its pool size at import: make room for the largest thread count asked for."""
    if "numba" in names:
        from ..backends.numba_backend import _ensure_thread_pool

        _ensure_thread_pool(max(threads))


def print_bandwidth(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"stencil bench bandwidth: {res['ranks']} rank(s) ({res['ranks_per_node']} per node) streaming "
                    f"at once, median of {res['repeats']}; {res['cpu']} ({res['cores']} cores)")
    for col in ("backend", "threads/rank", "device", "kernel", "GB/s (all ranks)", "GB/s per rank", "MiB/array/rank",
                "source"):
        t.add_column(col, justify="right")
    for r in res["results"]:
        t.add_row(r["backend"], str(r["threads"]), str(r["device"]), r["kind"], f"{r['gbs']:.2f}",
                  f"{r['per_rank_gbs']:.2f}", f"{r['bytes_per_rank'] / 2**20:.0f}",
                  r["source"])
    Console(width=140).print(t)
    print(f"bytes: copy 2 x 8 B, SAXPY 3 x 8 B per element (read + written); cache: {res['cache']}")
    p = Table(title="compute peaks: register-only loops of x = x*b + c on every worker at once (solver.bench.peak)")
    for col in ("backend", "threads/rank", "device", "dtype", "kernel", "GFLOP/s (all ranks)", "source"):
        p.add_column(col, justify="right")
    for r in res.get("peaks", []):
        p.add_row(r["backend"], str(r["threads"]), str(r["device"]), r["dtype"], r["kind"].replace("_", " + "),
                  f"{r['gflops']:.1f}", r["source"])
    Console(width=140).print(p)
