"""Measuring the model's inputs: solver.bench.model_probe under an MPI launcher, once per machine.

The probe reads the cache itself (rank 0 of the launch: the key names the host its ranks run on, so the
nodes of an emulated cluster have entries of their own) and measures only what is missing; this module
builds its command line, runs it, and returns the entry it left in the cache.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..core.errors import InputError, StencilError
from .inputs import Inputs

TIMEOUT = 900.0


def launcher(name: str | None = None, args: str = "") -> list[str]:
    """The launcher command: `name` (a path, or a name on PATH), else the mpirun beside this Python (the
    venv's MPICH), else mpirun on PATH; Open MPI as root gets --allow-run-as-root and --oversubscribe."""
    name = name or "mpirun"
    beside = Path(sys.executable).parent / name
    exe = str(beside) if "/" not in name and beside.exists() else shutil.which(name)
    if exe is None:
        raise InputError(f"--launcher: {name!r} is not on PATH; install MPI (pip install -e .[mpi]) or give the path "
                         "of mpirun / mpiexec")
    extra = shlex.split(args)
    version = _version(exe)
    if ("Open MPI" in version or "OpenRTE" in version) and os.geteuid() == 0:
        extra += [f for f in ("--allow-run-as-root", "--oversubscribe") if f not in extra]
    return [exe, *extra]


def _version(exe: str) -> str:
    try:
        return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def measure(command: list[str], ranks: int, dtype: str, halo: str, shapes=(), tiles=(1,), occupancies=(),
            gpu_shapes=(), refresh: bool = False, messages: str = "auto", say=None, points=()) -> Inputs:
    """Run the probe with `ranks` ranks under the launcher `command`; the merged cache entry it returns."""
    with tempfile.TemporaryDirectory(prefix="stencil-model-") as tmp:
        out = Path(tmp) / "probe.json"
        argv = [*command[:1], "-n", str(ranks), *command[1:], sys.executable, "-m", "solver.bench.model_probe",
                "--json", str(out), "--dtype", dtype, "--halo", halo, "--messages", messages,
                "--shapes", _shapes(shapes), "--tiles", ",".join(map(str, tiles)),
                "--occupancies", ",".join(map(str, occupancies)), "--gpu-shapes", _shapes(gpu_shapes),
                "--points", ",".join(f"{o}:{ny}x{nx}:{k}:{pat}" for o, ny, nx, k, pat in points),
                "--write-dir", tmp, *(["--refresh"] if refresh else [])]
        if say:
            say(f"measuring the model's inputs: {shlex.join(argv[:4 + len(command) - 1])} ... model_probe "
                f"({len(points) or len(shapes)} kernel point(s) or block shape(s), GPU sizes {len(gpu_shapes)})")
        env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env=env)
        except subprocess.TimeoutExpired:
            raise StencilError(f"the model's probe ran past {TIMEOUT:.0f} s: {shlex.join(argv)}") from None
        if proc.returncode or not out.exists():
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            raise StencilError(f"the model's probe failed (exit {proc.returncode}): {tail}; command: {shlex.join(argv)}")
        res = json.loads(out.read_text())
    now = res["measured_now"]
    what = ", ".join(f"{v} {k} point(s)" if not isinstance(v, bool) else k for k, v in now.items() if v) or "nothing"
    return Inputs(res["entry"], f"measured now: {what}; the rest cached")


def _shapes(shapes) -> str:
    return ",".join(f"{ny}x{nx}" for ny, nx in shapes)
