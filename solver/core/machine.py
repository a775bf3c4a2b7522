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


def fingerprint() -> dict:
    """What identifies this machine for cached measurements: host, CPU model, logical CPUs, memory (GiB)."""
    total, _ = memory_bytes()
    return {"host": platform.node(), "cpu": cpu_model(), "cpus": os.cpu_count() or 1,
            "memory_gib": round(total / 2**30) if total else None}


def parse_cpulist(text: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the kernel's cpulist format, and affinity()'s)."""
    cores: set[int] = set()
    for part in filter(None, str(text).strip().split(",")):
        a, _, b = part.partition("-")
        if a.strip().isdigit():
            cores.update(range(int(a), int(b or a) + 1))
    return cores


SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")


def numa_nodes(cores: set[int], root: Path = SYS_NODE) -> list[int]:
    """The NUMA nodes (from /sys) holding any of `cores`; [] where /sys does not say."""
    found = []
    for node in sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            if parse_cpulist((node / "cpulist").read_text()) & cores:
                found.append(int(node.name[4:]))
        except (OSError, ValueError):
            continue
    return found


def numa_text() -> str:
    """This process's NUMA node(s) as ranges ("0", "0-1"), or "" where /sys does not say."""
    return _ranges(numa_nodes(cpu_cores()))


def last_level_cache_bytes(cores: set[int] | None = None, root: Path = SYS_CPU) -> int | None:
    """Bytes of the last-level cache serving `cores` (default: this process's): the size of the highest
    cache level times the number of distinct instances of it among the cores; None where /sys does not say."""
    level, seen = 0, {}
    for c in sorted(cores if cores is not None else cpu_cores()):
        for index in (root / f"cpu{c}" / "cache").glob("index[0-9]*"):
            try:
                lv = int((index / "level").read_text())
                if (index / "type").read_text().strip() == "Instruction":
                    continue
                size = _size_bytes((index / "size").read_text())
                shared = (index / "shared_cpu_list").read_text().strip()
            except (OSError, ValueError):
                continue
            if lv > level:
                level, seen = lv, {}
            if lv == level:
                seen[shared] = size
    return sum(seen.values()) or None


def _size_bytes(text: str) -> int:
    """sysfs cache size ("48K", "1280K", "32M" or a plain number of bytes) in bytes."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")


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
                           "shared_by": len(parse_cpulist(shared)) if shared else 1,
                           "line_bytes": int((d / "coherency_line_size").read_text())})
        except (OSError, ValueError):
            continue
    return sorted(caches, key=lambda c: c["level"])
