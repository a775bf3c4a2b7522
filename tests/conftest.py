"""Shared test helpers: real `mpirun` processes, the CLI as a user runs it, small cases.

MPI tests start a real launcher (the `mpich` package's mpirun in .venv, or the system's Open MPI)
and real processes; nothing about MPI is mocked. Rank counts above the core count oversubscribe.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

# Copy-bandwidth ceilings measured during the tests go to a cache of their own, not the user's.
# Under pytest-xdist (`make test`: -n), each worker process has its own.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
os.environ.setdefault("STENCIL_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp"))
                                               / f"stencil-test-cache-{os.getuid()}{'-' + _WORKER if _WORKER else ''}"))
# Every numba thread for every kernel, however small the grid: the tests' grids are small (a run gives a kernel one
# thread per THREAD_POINTS points, so they would run on one), and results must be bitwise the same on any thread
# count. tests/test_threads.py tests the rule itself.
os.environ.setdefault("STENCIL_THREAD_POINTS", "0")
MPI_SCRIPTS = Path(__file__).resolve().parent / "mpi"


@functools.lru_cache
def mpirun_command() -> list[str] | None:
    """STENCIL_MPIRUN if set (a launcher with its flags, e.g. "/usr/bin/mpirun.mpich": it must be the MPI that
    mpi4py and h5py were built with), else the launcher beside this Python (the venv's mpich), then PATH;
    None if there is none."""
    chosen = shlex.split(os.environ.get("STENCIL_MPIRUN", ""))
    if chosen and not shutil.which(chosen[0]):
        raise pytest.UsageError(f"STENCIL_MPIRUN: {chosen[0]} is not an executable; give the mpirun of the MPI "
                                "that mpi4py (and a parallel h5py) were built with, or unset it")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None
    if chosen:
        return [shutil.which(chosen[0]), *chosen[1:]]
    for cand in (Path(sys.executable).parent / "mpirun", shutil.which("mpirun"), shutil.which("mpiexec")):
        if cand and Path(cand).exists():
            exe = str(cand)
            break
    else:
        return None
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    flags = []
    if "Open MPI" in version or "OpenRTE" in version:
        flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return [exe, *flags]


needs_mpi = pytest.mark.skipif(mpirun_command() is None, reason="no mpirun with mpi4py here")


def _launcher_state(name: str) -> bool:
    """Variables a launcher sets in the processes it starts; Open MPI configuration a machine sets for every
    mpirun (OMPI_MCA_plm_rsh_agent where there is no ssh, OMPI_ALLOW_RUN_AS_ROOT...) is kept."""
    if name.startswith("OMPI_ALLOW") or (name.startswith("OMPI_MCA_")
                                         and not name.startswith(("OMPI_MCA_orte", "OMPI_MCA_ess", "OMPI_MCA_pmix"))):
        return False
    return name.startswith(("OMPI_", "PMI", "PMIX", "HYDRA", "MPI_LOCAL"))


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not _launcher_state(k)}
    env.update({k: str(v) for k, v in extra.items()})
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Oversubscribed ranks (6 on 2 cores) must yield the core while they wait instead of spinning (MPICH).
    env.setdefault("MPIR_CVAR_POLLS_BEFORE_YIELD", "10")
    env.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    return env


def mpirun(n: int, args: list[str], timeout: float = 180, env: dict | None = None, python_args=("-m", "solver")):
    """Run `mpirun -n N python -m solver ARGS` (or a script) and return the CompletedProcess."""
    cmd = [*mpirun_command(), "-n", str(n), sys.executable, *python_args, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=clean_env(**(env or {})),
                          cwd=ROOT)


def mpi_script(n: int, script: str, *args: str, timeout: float = 180, env: dict | None = None):
    """Run tests/mpi/SCRIPT under mpirun -n N; the script asserts and exits non-zero on failure."""
    return mpirun(n, [str(a) for a in args], timeout=timeout, env=env, python_args=(str(MPI_SCRIPTS / script),))


def stencil(args: list[str], timeout: float = 180, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in a fresh process, as a user types it (no MPI launcher)."""
    return subprocess.run([sys.executable, "-m", "solver", *args], capture_output=True, text=True, timeout=timeout,
                          env=clean_env(**(env or {})), cwd=ROOT)


def write_case(path: Path, **sections) -> Path:
    """A small case file: defaults for a 23 x 17 heat run with output under path's folder."""
    data = {"name": path.stem, "grid": {"nx": 23, "ny": 17}, "run": {"steps": 20, "check_every": 5},
            "backend": {"name": "numpy"}, "output": {"dir": str(path.parent / f"out_{path.stem}")}}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def case_file(tmp_path):
    return functools.partial(lambda name, **kw: write_case(tmp_path / f"{name}.yaml", **kw))
