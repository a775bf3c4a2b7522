"""What machine and software a run used: for `stencil info` and every experiment record."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

from ..core.machine import cpu_count, cpu_model, memory_bytes

LIBRARIES = ("numpy", "numba", "llvmlite", "h5py", "pydantic", "typer", "rich", "pyyaml", "matplotlib",
             "mpi4py", "pyvista", "vtk", "cupy", "cupy-cuda12x", "cupy-cuda13x")


@functools.cache  # once per process: reading package metadata costs ~40 ms, and a process may run many cases
def versions() -> dict[str, str]:
    return dict(_versions())


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    """Installed versions, read once per process (parsing package metadata took 0.17 s per record)."""
    found = []
    for name in LIBRARIES:
        try:
            found.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(found)


def git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() + ("+dirty" if dirty else "")) if out.returncode == 0 else None


def gpus() -> list[dict]:
    """GPUs CuPy can see (empty without cupy or a GPU); never raises."""
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        out = []
        for i in range(n):
            p = cupy.cuda.runtime.getDeviceProperties(i)
            out.append({"index": i, "name": p["name"].decode(), "memory_gb": round(p["totalGlobalMem"] / 1e9, 1),
                        "compute_capability": f"{p['major']}.{p['minor']}"})
        return out
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device: all mean "no GPU"
        return []


def environment(mpi_library: str | None = None, with_gpus: bool = True) -> dict:
    total, available = memory_bytes()
    from .. import __version__

    return {
        "stencil": __version__,
        "git_commit": git_commit(),
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": cpu_count(),
        "memory_gb": round(total / 1e9, 1) if total else None,
        "memory_available_gb": round(available / 1e9, 1) if available else None,
        "python": sys.version.split()[0],
        "mpi_library": mpi_library,
        "gpus": gpus() if with_gpus else [],
        "libraries": dict(versions()),
    }
