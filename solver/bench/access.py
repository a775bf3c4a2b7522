"""`stencil bench access`: read bandwidth by access order and array size, with the caches marked.

Patterns (each reads every element of an array of 8-byte integers exactly once per pass, so every pattern moves
the same bytes per pass and only the order differs; kernels: access_cpu.py, kernels/access.cu):
- contiguous: element after element (on the CPU a SIMD loop, on the GPU coalesced warps);
- strided s (elements): 0, s, 2s, ... then 1, 1+s, ...: a new cache line per read once s x 8 >= 64 B;
- random: the order of a random permutation made before timing (reading the index array is an
  extra contiguous stream of 4 bytes per element, not counted);
- rows / cols: a 2-D C-ordered array of the same bytes read row after row (unit stride) or column
  after column (stride = row length).

Sizes: powers of two from a few KiB to the first one at least 4x the last-level cache (CPU: L3 from
/sys/devices/system/cpu/cpu0/cache; GPU: L2 from the device attributes). Threads (numba): each reads
its own equal slice in the pattern's order; the cache marks are then the capacity those threads have
(a private cache times the threads, a shared one once per sharing group).

Method: data are int64 values 0..255 (8 bytes, as float64; integer adds are one cycle and may be
reordered, so the sum never limits the reads), and each timed call must return exactly passes x sum(x)
(checked: a skipped or repeated element would show; the sum also keeps the loads from being removed).
Per size, each pattern is first called until one call of `passes` passes lasts at least MIN_SECONDS
(those calls are the warm-up: compilation, page faults, caches filled); then `repeats` rounds time
every pattern once each, round-robin (a slow spell of a shared machine lands on all patterns alike).
Rate = bytes per pass / (median seconds per call / passes). GPU calls are timed with CUDA events.

Clocks (CPU): every call is timed by the wall clock and by the process's CPU time divided by the
threads; `clock` picks the one the rates use (default wall). On a machine shared with other jobs the
wall clock measures the scheduler (in the run of BENCHMARKS.md, on the 2-core development VM busy with
other jobs, the calls got 29-100% of a core: the `cpu_share` of each row). CPU time counts the cycles
the loop ran, stalls on memory included, so `--clock cpu` estimates the rate the loop has when it runs; every row keeps both rates and
the CPU share (CPU time / wall time) so the reader can judge. Other jobs still evict the caches.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

MIN_SECONDS = 0.02
DEFAULT_STRIDES = (2, 4, 8, 16, 64, 512)
MIN_BYTES, MAX_BYTES = 4 << 10, 8 << 30  # at most 2**30 elements: int32 indices
SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@dataclass
class Pattern:
    name: str  # contiguous | strided | random | rows | cols
    stride: int  # elements between consecutive reads of one thread (0: random)
    run: Callable[[int], tuple[float, int]]  # passes -> (seconds, sum)


# sizes -----------------------------------------------------------------------------------------

def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.I)
    if not m:
        from ..core.errors import InputError

        raise InputError(f"--sizes: {text!r} is not a size; write bytes with K, M or G, e.g. 4K,64K,1M or 4K-256M")
    return int(m.group(1)) * SUFFIX[m.group(2).upper()]


def parse_sizes(text: str) -> list[int]:
    """"4K,64K,1M" (each listed) or "4K-256M" (every power of two between); each a power of two >= 4 KiB."""
    from ..core.errors import InputError

    if "-" in text:
        lo, hi = (parse_size(t) for t in text.split("-", 1))
        sizes = [1 << k for k in range(max(lo, 1).bit_length() - 1, hi.bit_length()) if lo <= 1 << k <= hi]
    else:
        sizes = [parse_size(t) for t in text.split(",") if t.strip()]
    bad = [s for s in sizes if s < MIN_BYTES or s & (s - 1) or s > MAX_BYTES]
    if not sizes or bad:
        raise InputError(f"--sizes: {text!r}: give powers of two from 4K to 8G (e.g. 4K,64K,1M or 4K-256M)")
    return sorted(set(sizes))


def default_sizes(last_level_bytes: int) -> list[int]:
    """4 KiB up to the first power of two at least 4x the last-level cache (at least 64 MiB)."""
    top = max(4 * last_level_bytes, 64 << 20)
    return [1 << k for k in range(MIN_BYTES.bit_length() - 1, (top - 1).bit_length() + 1)]


def human(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            v = nbytes / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{nbytes:.0f} B"


def check_options(backends: list[str] | None, clock: str) -> list[str]:
    """The backends to measure (default: numba, and cupy where it works); a one-line error for a bad choice."""
    from ..backends import registry
    from ..core.errors import InputError

    if clock not in ("wall", "cpu"):
        raise InputError(f"--clock: {clock!r} is not a clock; use wall or cpu")
    names = backends or ["numba"] + (["cupy"] if registry()["cupy"].unavailable() is None else [])
    for name in names:
        if name not in ("numba", "cupy"):
            raise InputError(f"--backend: {name!r} is not measured here; use numba or cupy")
        reason = registry()[name].unavailable()
        if reason:
            raise InputError(f"--backend {name}: {reason}")
    return names


# caches ----------------------------------------------------------------------------------------

def cpu_marks(caches: list[dict], threads: int) -> list[dict]:
    """The capacity each cache level offers `threads` threads on distinct cores: a private cache once per
    thread, a shared one once per group of threads sharing it (labels such as "L2 2x1.25 MiB")."""
    marks = []
    for c in caches:
        copies = math.ceil(threads / c["shared_by"]) if c["shared_by"] > 1 else threads
        label = f"L{c['level']} " + (f"{copies}x" if copies > 1 else "") + human(c["bytes"])
        marks.append({"label": label, "level": c["level"], "bytes": c["bytes"] * copies})
    return marks


def gpu_caches(device: int = 0) -> dict:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(device)
    attrs = cupy.cuda.Device(device).attributes
    return {"name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "l2_bytes": int(attrs["L2CacheSize"]), "sms": int(attrs["MultiProcessorCount"])}


def fits_in(nbytes: int, marks: list[dict]) -> str:
    return next((m["label"].split()[0] for m in marks if nbytes <= m["bytes"]), "memory")


# measuring -------------------------------------------------------------------------------------

def autorange(p: Pattern, min_seconds: float) -> int:
    """Passes per call so that one call lasts at least `min_seconds` (these calls also warm up)."""
    p.run(1)
    passes = 1
    while True:
        dt, _ = p.run(passes)
        if dt >= min_seconds:
            return passes
        passes *= max(2, min(1000, math.ceil(1.2 * min_seconds / max(dt, 1e-9))))


def measure_size(patterns: list[Pattern], nbytes: int, ref: int, repeats: int, min_seconds: float,
                 clock: str = "wall", threads: int = 1) -> list[dict]:
    """Every pattern at one array size: autorange each, then `repeats` round-robin rounds. Each call is timed
    by the wall clock and by the process's CPU time (per thread); `clock` says which one the rate uses."""
    passes = [autorange(p, min_seconds) for p in patterns]
    wall: list[list[float]] = [[] for _ in patterns]
    cpu: list[list[float]] = [[] for _ in patterns]
    exact = [True] * len(patterns)
    for _ in range(repeats):
        for k, p in enumerate(patterns):
            c = time.process_time()
            dt, value = p.run(passes[k])
            cpu[k].append((time.process_time() - c) / threads / passes[k])
            wall[k].append(dt / passes[k])
            exact[k] &= value == passes[k] * ref
    return [row(p, nbytes, passes[k], wall[k], cpu[k], exact[k], clock) for k, p in enumerate(patterns)]


def row(p: Pattern, nbytes: int, passes: int, wall: list[float], cpu: list[float], exact: bool, clock: str) -> dict:
    times = cpu if clock == "cpu" else wall
    med = statistics.median(times)
    return {"pattern": p.name, "stride": p.stride, "bytes": nbytes, "passes": passes, "clock": clock,
            "seconds_per_pass": med, "gbs": _rate(nbytes, med),
            "gbs_spread": [_rate(nbytes, max(times)), _rate(nbytes, min(times))],
            "gbs_wall": _rate(nbytes, statistics.median(wall)), "gbs_cpu": _rate(nbytes, statistics.median(cpu)),
            "cpu_share": statistics.median(c / w for c, w in zip(cpu, wall)), "sum_exact": exact}


def _rate(nbytes: int, seconds: float) -> float | None:
    return nbytes / seconds / 1e9 if seconds > 0 else None


def data(n: int, seed: int = 0) -> tuple[np.ndarray, int]:
    """n int64 values 0..255 and their sum."""
    x = np.random.default_rng(seed).integers(0, 256, n, dtype=np.int64)
    return x, int(x.sum())


def shape_2d(n: int) -> tuple[int, int]:
    """(rows, cols) with rows x cols = n (a power of two) and cols >= rows: the 2-D view of the same bytes."""
    cols = 1 << -(-(n.bit_length() - 1) // 2)
    return n // cols, cols


# backends --------------------------------------------------------------------------------------

def cpu_patterns(x: np.ndarray, threads: int, strides: list[int]) -> list[Pattern]:
    from . import access_cpu as k

    def timed(fn, *args):
        def run(passes: int) -> tuple[float, int]:
            t = time.perf_counter()
            v = fn(*args, passes)
            return time.perf_counter() - t, int(v)
        return run

    index = k.slice_permutation(x.size, threads)
    a = x.reshape(shape_2d(x.size))
    slice_len = x.size // threads
    pats = [Pattern("contiguous", 1, timed(k.contiguous, x, threads))]
    pats += [Pattern("strided", s, timed(k.strided, x, s, threads)) for s in strides if s < slice_len]
    return pats + [Pattern("random", 0, timed(k.gather, x, index, threads)),
                   Pattern("rows", 1, timed(k.rows, a, threads)),
                   Pattern("cols", a.shape[1], timed(k.cols, a, threads))]


def run_backend(backend: str, sizes: list[int], threads: int, strides: list[int], repeats: int, min_seconds: float,
                clock: str, say: Callable[[str], None]) -> list[dict]:
    rows = []
    for nbytes in sizes:
        x, ref = data(nbytes // 8)
        if backend == "cupy":
            from .access_gpu import gpu_patterns

            patterns = [Pattern(*t) for t in gpu_patterns(x, strides, shape_2d(x.size)[1])]
        else:
            patterns = cpu_patterns(x, threads, strides)
        got = measure_size(patterns, nbytes, ref, repeats, min_seconds, clock if backend == "numba" else "wall",
                           threads if backend == "numba" else 1)
        for r in got:
            r.update(backend=backend, threads=threads if backend == "numba" else None)
        say(f"{backend} {human(nbytes):>8}: " + ", ".join(f"{label(r)} {r['gbs']:.1f}" for r in got) + " GB/s")
        rows += got
    return rows


def label(r: dict) -> str:
    return f"stride {r['stride']}" if r["pattern"] == "strided" else r["pattern"]


def access_bench(backends: list[str], threads: int, sizes: list[int] | None, strides: list[int], repeats: int,
                 min_seconds: float = MIN_SECONDS, clock: str = "wall", say: Callable[[str], None] = print) -> dict:
    from ..core.machine import cpu_caches, cpu_count, cpu_model

    caches = cpu_caches()
    res = {"bench": "access", "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()) + " UTC", "cpu": cpu_model(),
           "cores": cpu_count(), "threads": threads, "repeats": repeats, "min_seconds": min_seconds,
           "strides": strides, "element_bytes": 8, "clock": clock, "caches": {"cpu": caches}, "marks": {}, "sizes": {},
           "results": [], "load_average": {"start": _load()}}
    for b in backends:
        if b == "cupy":
            res["caches"]["gpu"] = gpu_caches()
            marks = [{"label": f"L2 {human(res['caches']['gpu']['l2_bytes'])}", "level": 2,
                      "bytes": res["caches"]["gpu"]["l2_bytes"]}]
        else:
            _numba_threads(threads)
            marks = cpu_marks(caches, threads)
        last = max((m["bytes"] for m in marks), default=32 << 20)
        res["marks"][b] = marks
        res["sizes"][b] = sizes or default_sizes(last)
        res["results"] += run_backend(b, res["sizes"][b], threads, strides, repeats, min_seconds, clock, say)
    res["load_average"]["end"] = _load()
    return res


def _load() -> float | None:
    """The 1-minute load average (how busy a shared machine was), where the OS gives it."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _numba_threads(threads: int) -> None:
    from ..backends.numba_backend import _ensure_thread_pool

    _ensure_thread_pool(threads)
    import numba

    numba.set_num_threads(threads)


# output ----------------------------------------------------------------------------------------

def columns(res: dict, backend: str) -> list[str]:
    """Pattern labels in a fixed order: contiguous, strides ascending, random, rows, cols."""
    order = {"contiguous": 0, "strided": 1, "random": 2, "rows": 3, "cols": 4}
    got = {(order[r["pattern"]], r["stride"] if r["pattern"] == "strided" else 0): label(r)
           for r in res["results"] if r["backend"] == backend}
    return [got[k] for k in sorted(got)]


def print_access(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=180)
    for b, marks in res["marks"].items():
        who = f"{res['threads']} numba thread(s)" if b == "numba" else res["caches"]["gpu"]["name"]
        t = Table(title=f"stencil bench access, {b} ({who}): read GB/s (useful bytes: 8 per element), median of "
                        f"{res['repeats']}; caches {', '.join(m['label'] for m in marks)}; {res['date']}")
        cols = columns(res, b)
        for c in ("array", "fits in", *cols):
            t.add_column(c, justify="right")
        for nbytes in res["sizes"][b]:
            got = {label(r): r for r in res["results"] if r["backend"] == b and r["bytes"] == nbytes}
            t.add_row(human(nbytes), fits_in(nbytes, marks),
                      *(f"{got[c]['gbs']:.2f}" + ("" if got[c]["sum_exact"] else " WRONG SUM") if c in got else "-"
                        for c in cols))
        con.print(t)
    load = res.get("load_average", {})
    shares = [r["cpu_share"] for r in res["results"] if r["backend"] == "numba"]
    print(f"clock: {res['clock']}; load average (1 min) at start {load.get('start')}, at end {load.get('end')} on "
          f"{res['cores']} cores" + (f"; CPU share of the numba calls (CPU time / wall time per thread) "
                                    f"{min(shares):.0%}-{max(shares):.0%}" if shares else ""))
    print("random: the index array adds 4 bytes per element of contiguous reads (not counted); cols: stride = row "
          "length of the 2-D view (rows x cols = the same bytes).")


def wrong_sums(res: dict) -> list[str]:
    return [f"{r['backend']} {label(r)} at {human(r['bytes'])}" for r in res["results"] if not r["sum_exact"]]
