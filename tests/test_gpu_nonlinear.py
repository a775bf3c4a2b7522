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


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_fused_power_law_gives_the_bits_of_cupys_expressions(dtype):
    """solver.backends.cupy_nl.power (one pass) against Law.evaluate's CuPy expressions and the division by k_ref, on
    a view of a padded field (a row pitch other than its width), temperatures in degC from 20 to 900."""
    import cupy as cp

    from solver.backends.cupy_nl import CupyNonlinear
    from solver.core.conductivity import Law

    law, kref = Law("power", k0=148.0, t0=300.0, b=-1.3, offset=273.15), 148.0 * (573.15 / 300.0) ** -1.3
    field = cp.asarray(np.random.default_rng(7).uniform(20.0, 900.0, (67, 131)).astype(dtype))
    u = field[3:-2, 5:-7]
    kap, dkap = CupyNonlinear(cp, dtype).power(u, law, kref)
    k, dk = law.evaluate(u, cp)
    assert cp.array_equal(kap, k / kref) and cp.array_equal(dkap, dk / kref)
    assert kap.dtype == dkap.dtype == np.dtype(dtype)
