"""Nonlinear heat on a GPU (solver/nonlinear on the CuPy backend): Newton's method with the GPU's multigrid as the
preconditioner, its residual, Jacobian and walls as CuPy array expressions, against the numpy backend: the same
iterations to the same tolerance and fields equal to a few ulps (CuPy's power and its reductions may differ from
numpy's in the last bit, so the bitwise claim is the CPU's: tests/test_nonlinear.py). Skipped without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from test_nonlinear import every_term

from solver.backends import registry
from solver.parallel.comm import Comm
from solver.run import Options, Run

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
RTOL = {"float64": 1e-11, "float32": 2e-5}


@pytest.fixture(autouse=True)
def _own_tune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))


def case(tmp_path, name, backend, dtype="float64", **physics):
    return every_term(tmp_path, name, backend, dtype, **physics)


def run(c):
    r = Run(c, Comm(), Options(ceiling=False, quiet=True))
    rec = r.execute()
    g = r.mg.grids[0]
    return r.backend.get(g.u, g.owned).astype(np.float64), rec


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_newton_on_the_gpu_matches_numpy(tmp_path, dtype):
    u_cpu, rec_cpu = run(case(tmp_path, "steady", "numpy", dtype))
    u_gpu, rec_gpu = run(case(tmp_path, "steady", "cupy", dtype))
    assert rec_gpu["solver"]["converged"], rec_gpu["solver"]["ended"]
    assert abs(len(rec_gpu["solver"]["newton"]["iterations"]) - len(rec_cpu["solver"]["newton"]["iterations"])) <= 1
    assert np.abs(u_gpu - u_cpu).max() <= RTOL[dtype] * np.abs(u_cpu).max()
    assert rec_gpu["energy"]["holds"], rec_gpu["energy"]
    assert set(rec_gpu["energy"]["radiated"]) == {"top", "faces", "regions.1"}


def test_newton_time_steps_on_the_gpu_match_numpy(tmp_path):
    heat = {"equation": "heat", "scheme": "crank-nicolson", "dt": 0.05}
    u_cpu, _ = run(case(tmp_path, "steps", "numpy", **heat))
    u_gpu, rec = run(case(tmp_path, "steps", "cupy", **heat))
    assert not rec["solver"]["unconverged_steps"], rec["solver"]["ended"]
    assert np.abs(u_gpu - u_cpu).max() <= 1e-10 * np.abs(u_cpu).max()
