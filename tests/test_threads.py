"""Threads where the cores are shared (solver.backends.numba_backend): a kernel gives each thread at least
THREAD_POINTS points (a small grid or a coarse multigrid level runs on one thread), the OpenMP pool's idle threads
sleep instead of spinning, and neither changes a result. Timings are measured, not asserted: BENCHMARKS.md,
"First runs and shared cores" (tools/threads_loaded.py)."""

import json
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import ROOT, clean_env, write_case

numba = pytest.importorskip("numba")


def backend(threads: int, points: int | None):
    from solver.backends.numba_backend import NumbaBackend
    from solver.case import BackendSettings

    be = NumbaBackend(BackendSettings(name="numba"), "float64", threads)
    if points is not None:
        be.thread_points = points
    return be


def test_a_kernel_gets_a_thread_per_thread_points_points():
    be = backend(2, 16384)
    for region, threads in (((1, 11, 1, 11), 1), ((1, 129, 1, 129), 1), ((1, 184, 1, 184), 2), ((0, 1000, 0, 1000), 2),
                            ((1, 1, 1, 50), 1)):
        be.fit(region)
        assert be.active == threads == numba.get_num_threads(), (region, threads)
    every = backend(2, 0)
    every.fit((1, 2, 1, 2))
    assert every.active == 2 == numba.get_num_threads()


def test_the_rule_changes_no_result(tmp_path):
    """One multigrid run of a small grid (every level below 2 x THREAD_POINTS: one thread) and with every thread on
    every level: the same field, bit for bit."""
    fields = {}
    for points in ("16384", "0"):
        out = {}
        for name in ("mg", "heat"):
            sections = ({"physics": {"equation": "laplace", "solver": "multigrid"}, "run": {"steps": 8, "tolerance": 1e-30}}
                        if name == "mg" else {"run": {"steps": 30, "check_every": 10}})
            path = write_case(tmp_path / f"threads_{name}_{points}.yaml", grid={"nx": 61, "ny": 45},
                              boundary={"top": 1.0, "left": {"kind": "neumann", "flux": 0.5}},
                              initial={"kind": "random", "seed": 4}, backend={"name": "numba", "threads": 2},
                              output={"dir": str(tmp_path / f"threads_{name}_{points}"), "vtk": False},
                              **sections)
            res = subprocess.run([sys.executable, "-m", "solver", "run", str(path), "-q", "--overwrite"], cwd=ROOT,
                                 capture_output=True, text=True, env=clean_env(STENCIL_THREAD_POINTS=points), timeout=300)
            assert res.returncode == 0, res.stderr
            with h5py.File(tmp_path / f"threads_{name}_{points}" / "fields.h5", "r") as f:
                out[name] = f["u"][-1]
            rec = json.loads((tmp_path / f"threads_{name}_{points}" / "record.json").read_text())
            dev = rec["resources"]["devices"][0]
            assert dev["thread_points"] == int(points) and dev["omp_wait_policy"] == "PASSIVE"
        fields[points] = out
    for name in ("mg", "heat"):
        assert np.array_equal(fields["16384"][name], fields["0"][name]), name


def test_the_wait_policy_a_user_sets_is_kept():
    code = ("import os; from solver.backends.numba_backend import _ensure_thread_pool; _ensure_thread_pool(1); "
            "print(os.environ['OMP_WAIT_POLICY'])")
    for given, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        env = clean_env()
        env.pop("OMP_WAIT_POLICY", None)
        if given:
            env["OMP_WAIT_POLICY"] = given
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
        assert res.returncode == 0 and res.stdout.strip() == expected, res.stderr
