"""The machine this process runs on: its cores (as the launcher set them), memory and CPU model.

Read with no side effects and no third-party imports, so every layer may use it.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _affinity_now() -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return frozenset(range(os.cpu_count() or 1))


# The cores the launcher gave this process, read once at import: an OpenMP runtime started later (numba's
# omp layer with OMP_PROC_BIND) narrows the affinity of the main thread to one core.
_START_CORES = _affinity_now()


def cpu_cores() -> set[int]:
    """The cores this process may run on, as the launcher set them."""
    return set(_START_CORES)


def cpu_count() -> int:
    """How many cores this process may run on (affinity-aware)."""
    return len(_START_CORES)


def affinity() -> str:
    """This process's cores as the launcher set them (read at import), as ranges: "0-3,8"."""
    return _ranges(sorted(cpu_cores()))


def _ranges(cores: list[int]) -> str:
    parts, start = [], None
    for i, c in enumerate(cores):
        if start is None:
            start = c
        if i + 1 == len(cores) or cores[i + 1] != c + 1:
            parts.append(f"{start}" if start == c else f"{start}-{c}")
            start = None
    return ",".join(parts)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> tuple[int | None, int | None]:
    """(total, available) physical memory in bytes, from /proc/meminfo where it exists."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        kb = lambda key: int(info[key].split()[0]) * 1024 if key in info else None  # noqa: E731
        return kb("MemTotal"), kb("MemAvailable")
    except OSError:
        return None, None


CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


def _size_bytes(text: str) -> int:
    """sysfs cache size ("48K", "1280K", "32M" or a plain number of bytes) in bytes."""
    text = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def cpu_caches(root: Path = CACHE_DIR) -> list[dict]:
    """cpu0's data and unified caches from sysfs, innermost first: level, type, bytes, the number of CPUs
    sharing one instance, and the line size; [] where sysfs does not say (not Linux, a container hiding it)."""
    caches = []
    for d in sorted(root.glob("index*")):
        try:
            kind = (d / "type").read_text().strip()
            if kind == "Instruction":
                continue
            shared = (d / "shared_cpu_list").read_text().strip()
            caches.append({"level": int((d / "level").read_text()), "type": kind,
                           "bytes": _size_bytes((d / "size").read_text()),
                           "shared_by": len(_parse_ranges(shared)) if shared else 1,
                           "line_bytes": int((d / "coherency_line_size").read_text())})
        except (OSError, ValueError):
            continue
    return sorted(caches, key=lambda c: c["level"])


def _parse_ranges(text: str) -> list[int]:
    """"0-3,8" -> [0, 1, 2, 3, 8] (the inverse of _ranges)."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out
