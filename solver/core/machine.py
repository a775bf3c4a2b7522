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
