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


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("ab", [True, False])
@pytest.mark.parametrize("uniform", [False, True])
def test_apply_at_gives_the_bits_of_faces_then_apply(dtype, ab, uniform):
    """cupy_nl.apply_at (Newton's Jacobian products with no faces' arrays) against faces() then apply() under NVRTC:
    the same bits, on pitched fields with an odd owned block, the reference faces as fields or (uniform) as two numbers
    (tests/test_nonlinear_emulated.py holds the same under g++, and whole solves through it against numpy)."""
    import cupy as cp

    from solver.backends.cupy_nl import CupyNonlinear

    rng = np.random.default_rng(5 + ab)
    n, m, r0, c0 = 45, 77, 2, 3
    pad = lambda shape: cp.asarray(rng.uniform(0.5, 2.0, shape).astype(dtype))  # noqa: E731
    u, v, ax, ay = (pad((n + 4, m + 5)) for _ in range(4))
    kap, dkap, diag = pad((n + 2, m + 2)), pad((n + 2, m + 2)), pad((n, m))
    east = [pad((n, m + 1)) for _ in range(3)]
    north = [pad((n + 1, m)) for _ in range(3)]
    faces = [east[0], *((east[1], east[2]) if ab else (None, None)), north[0], *((north[1], north[2]) if ab else (None, None))]
    if uniform:
        ax[...], ay[...] = 0.37, 1.9
    ref = (float(ax[0, 0]), float(ay[0, 0])) if uniform else (ax, ay)
    nl = CupyNonlinear(cp, np.dtype(dtype))
    nl.faces(*faces, kap, dkap, u, ax, ay, r0, c0)
    want, got = cp.zeros_like(u), cp.zeros_like(u)
    nl.apply(want, v, *faces, diag, r0, c0)
    nl.apply_at(got, v, u, kap, dkap, *ref, diag, r0, c0, ab)
    assert cp.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    assert float(cp.abs(got).max()) > 0


def _films(cp, dtype, radiates: bool, laws: int):
    """A film of 700 points on a random padded field (every point's data drawn), its power laws (codes 0..laws: 0 is
    constant k), on the device."""
    from solver.core.conductivity import Law
    from solver.nonlinear.films import Film

    rng = np.random.default_rng(11 + laws + 2 * radiates)
    n = 700
    field = rng.uniform(20.0, 900.0, (40, 50))
    rows, cols = rng.integers(1, 39, n), rng.integers(1, 49, n)
    law_list = [Law("power", k0=148.0, t0=300.0, b=-1.3, offset=273.15),
                Law("power", k0=30.0, t0=350.0, b=0.4, offset=273.15)][:laws]
    kref = [law.reference() for law in law_list]
    host = Film("top", rows, cols, rng.uniform(0.5, 2.0, n), rng.uniform(0.01, 0.1, n), rng.uniform(1.0, 50.0, n),
                rng.integers(0, laws + 1, n), rng.uniform(1.0, 40.0, n), rng.uniform(0.0, 60.0, n),
                0.8 * 5.67e-8 if radiates else 0.0, (rng.uniform(-20.0, 30.0, n) + 273.15) ** 4, 273.15)
    return host, cp.asarray(field.astype(dtype)), law_list, kref


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("radiates", [True, False])
@pytest.mark.parametrize("laws", [0, 1, 2])
def test_the_film_kernel_gives_the_bits_of_cupys_expressions(dtype, radiates, laws):
    """solver.backends.cupy_nl.film (a thread a point) against films.wall_flux's CuPy expressions with the operator's
    kappa (Law.evaluate by each point's code, divided by k_ref): Q, dQ/du (Newton's and Picard's) and the radiated part
    bitwise, points of constant k (code 0) among them."""
    import cupy as cp

    from solver.backends.cupy_nl import CupyNonlinear
    from solver.nonlinear import films

    host, u, law_list, kref = _films(cp, dtype, radiates, laws)
    f = host.on(type("B", (), {"xp": cp})(), dtype)

    def at(t):
        kap, dkap = cp.ones(t.shape, dtype=dtype), cp.zeros(t.shape, dtype=dtype)
        for m, (law, kr) in enumerate(zip(law_list, kref)):
            k, dk = law.evaluate(t, cp)
            kap, dkap = cp.where(f.code == m + 1, k / kr, kap), cp.where(f.code == m + 1, dk / kr, dkap)
        return kap, dkap

    params = tuple((law.offset, law.t0, law.b, law.k0, kr) for law, kr in zip(law_list, kref))
    for jacobian in (True, False):
        got = CupyNonlinear(cp, dtype).film(f, u, params, jacobian, films.MAX_WALL_ITERATIONS)
        want = films.wall_flux(f, u[f.rows, f.cols], at if laws else None, cp, jacobian)
        assert (got[2] is None) == (want[2] is None) == (not radiates)
        for g, w in zip(got, want):
            if w is not None:
                assert g.dtype == w.dtype == np.dtype(dtype)
                assert cp.array_equal(g, w), float(cp.max(cp.abs(g - w)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_lowest_and_moved_reductions_equal_numba_nls(dtype):
    """cupy_nl.lowest (the least free point of a block of a padded field) and cupy_nl.moved (the levels' diagonal's
    largest relative change), each one CuPy reduction kernel, against numba_nl's passes: the same value, NaN where a
    value is NaN, inf for no free point."""
    import cupy as cp

    from solver.backends import numba_nl
    from solver.backends.cupy_nl import CupyNonlinear

    rng = np.random.default_rng(3)
    nl = CupyNonlinear(cp, dtype)
    u = rng.uniform(-50.0, 900.0, (40, 70)).astype(dtype)
    free = rng.random((33, 61)) > 0.3
    assert nl.lowest(cp.asarray(u), cp.asarray(free), 3, 4) == numba_nl.lowest(u, free, 3, 4)
    assert nl.lowest(cp.asarray(u), cp.asarray(np.zeros_like(free)), 3, 4) == float("inf")
    new, old = rng.uniform(0.1, 5.0, (2, 300, 200))
    assert nl.moved(cp.asarray(new), cp.asarray(old), 1e-300) == numba_nl.moved(new, old, 1e-300)
    u[10, 10], new[7, 9] = np.nan, np.nan
    assert np.isnan(nl.lowest(cp.asarray(u), cp.asarray(np.ones_like(free)), 3, 4))
    assert np.isnan(nl.moved(cp.asarray(new), cp.asarray(old), 1e-300))
