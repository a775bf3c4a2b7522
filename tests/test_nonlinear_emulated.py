"""The nonlinear operator's CUDA sweeps (solver/backends/kernels/nl.cu, driven by solver/backends/cupy_nl.py) compiled
for the CPU with g++ and the CUDA shim (tests/cuda_emu), launched with the argument lists cupy_nl builds: each sweep
bitwise equal to solver/backends/numba_nl.py's (which tests/test_nonlinear.py holds equal to the operator's numpy
expressions) on pitched fields, an odd owned block inside the padding, random data, in every variant the operator
calls (kappa or not, the linearised sinks or not, the Jacobian's A and B terms or not). float64 only: numba's kernels
take Python's 2.0 as a double where numpy and CUDA keep float32. Not a GPU: nothing here says anything about NVRTC,
streams or speed (tests/test_gpu_nonlinear.py runs whole Newton solves on the device)."""

from __future__ import annotations

import itertools
import shutil
from importlib import resources

import numpy as np
import pytest
from test_mg_emulated import Emulator, _compile, assert_same_bits, pitched

from solver.backends import cupy_nl, numba_nl

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ here")
ENTRIES = ("nl_residual", "nl_faces", "nl_apply", "nl_apply_at", "nl_diagonal", "nl_quotient", "nl_trial", "nl_divide", "nl_power",
           "nl_across_rows", "nl_across_cols", "nl_film")
N, M, R0, C0 = 13, 37, 2, 3  # an owned block that is no multiple of the 32 x 8 blocks, inside a padded field
PADDED = (N + 4, M + 5)


class Emulated(cupy_nl.CupyNonlinear):
    """cupy_nl's launches on the emulated kernels (numpy arrays in place of CuPy's)."""

    def __init__(self, build):
        super().__init__(np, np.float64)
        self.build, self.calls = build, {}  # launches by kernel

    def _fn(self, entry, kap=False, dlin=False, ab=False):
        source = (resources.files("solver.backends") / "kernels" / "nl.cu").read_text()
        opts = ("-DREAL=double", f"-DNL_KAP={int(kap)}", f"-DNL_DLIN={int(dlin)}", f"-DNL_AB={int(ab)}",
                f"-DNL_ROWS={cupy_nl.APPLY_ROWS}")
        lib = _compile(self.build, "nl", source, opts, ENTRIES)
        emu = Emulator.__new__(Emulator)
        emu.libs, emu.calls = {"mg": lib}, self.calls
        return emu.kernel(entry)

    @staticmethod
    def to_host(dev, out) -> None:
        out[...] = dev

    def lowest(self, u, free, r0, c0):
        """(CuPy's reduction kernel there: its numpy expression here; on a GPU, tests/test_gpu_nonlinear.py)"""
        n, m = free.shape
        return float(np.min(np.where(free, u[r0:r0 + n, c0:c0 + m], np.inf))) if n and m else float("inf")


@pytest.fixture(scope="module")
def nl(tmp_path_factory):
    return Emulated(tmp_path_factory.mktemp("nl_emu"))


def field(rng, shape, lo=0.5, hi=2.0):
    return pitched(rng.uniform(lo, hi, shape))


def twins(rng, shape):
    """Two equal pitched fields of random values (one for each side of a comparison)."""
    a = field(rng, shape)
    return a, pitched(np.array(a))


@pytest.mark.parametrize("kap, dlin, ab, uniform", [(1, 1, 1, 0), (1, 0, 0, 0), (0, 1, 0, 0), (1, 1, 0, 0), (1, 1, 1, 1),
                                                    (0, 1, 0, 1)])  # (uniform: variants already compiled)
def test_each_sweep_equals_numba_nl_bitwise(nl, kap, dlin, ab, uniform):
    """uniform: the reference faces hold one value along each axis; cupy_nl's sweeps take them as two numbers (numba's
    read the fields)."""
    rng = np.random.default_rng(kap * 4 + dlin * 2 + ab + 8 * uniform)
    u, ax, ay = (field(rng, PADDED) for _ in range(3))
    if uniform:
        ax[...], ay[...] = 0.37, 1.9
    ref = (ax[0, 0], ay[0, 0]) if uniform else (ax, ay)
    box = (N + 2, M + 2)
    kp, dk = (field(rng, box), field(rng, box)) if kap else (None, None)
    g0, s0 = field(rng, (N, M)), field(rng, (N, M))
    dl = field(rng, (N, M)) if dlin else None
    got, want = twins(rng, PADDED)
    nl.residual(got, u, kp, *ref, g0, s0, dl, R0, C0)
    numba_nl.residual(want, u, kp, ax, ay, g0, s0, dl, R0, C0)
    assert_same_bits(got, want, "residual")
    free = rng.random((N, M)) > 0.3
    d = [field(rng, (N, M)) for _ in range(4)]
    nl.diagonal(d[0], d[1], s0, dl, kp, free)
    numba_nl.diagonal(d[2], d[3], s0, dl, kp, free)
    assert_same_bits(d[0], d[2], "diagonal")
    assert_same_bits(d[1], d[3], "scale")
    if not kap:
        return
    east = [twins(rng, (N, M + 1)) for _ in range(3)]
    north = [twins(rng, (N + 1, M)) for _ in range(3)]
    pick = lambda k: [east[0][k], *((east[1][k], east[2][k]) if ab else (None, None)),  # noqa: E731
                      north[0][k], *((north[1][k], north[2][k]) if ab else (None, None))]
    nl.faces(*pick(0), kp, dk, u, *ref, R0, C0)
    numba_nl.faces(*pick(1), kp, dk, u, ax, ay, R0, C0)
    for a, b in zip(pick(0), pick(1)):
        if a is not None:
            assert_same_bits(a, b, "faces")
    got, want = twins(rng, PADDED)
    diag = field(rng, (N, M))
    nl.apply(got, u, *pick(0), diag, R0, C0)
    numba_nl.apply(want, u, *pick(1), diag, R0, C0)
    assert_same_bits(got, want, "apply")
    if ab:  # (apply_at: with the Jacobian's terms; tests below compare it with faces then apply too)
        got = pitched(np.array(want))
        got[R0:R0 + N, C0:C0 + M] = np.nan  # (what apply_at writes)
        nl.apply_at(got, u, u, kp, dk, *ref, diag, R0, C0, True)
        assert_same_bits(got, want, "apply_at")


@pytest.mark.parametrize("ab", [1, 0])
def test_apply_at_equals_faces_then_apply_bitwise(nl, ab):
    """nl_apply_at (a GPU's Newton steps: no faces' arrays) makes each face as nl_faces does, then nl_apply's terms:
    the same bits as the two sweeps, with the Jacobian's A and B terms and without, u and v apart."""
    rng = np.random.default_rng(40 + ab)
    u, v, ax, ay = (field(rng, PADDED) for _ in range(4))
    box = (N + 2, M + 2)
    kp, dk = field(rng, box), field(rng, box)
    east = [field(rng, (N, M + 1)) for _ in range(3)]
    north = [field(rng, (N + 1, M)) for _ in range(3)]
    faces = [east[0], *((east[1], east[2]) if ab else (None, None)), north[0], *((north[1], north[2]) if ab else (None, None))]
    nl.faces(*faces, kp, dk, u, ax, ay, R0, C0)
    diag = field(rng, (N, M))
    got, want = twins(rng, PADDED)
    nl.apply(want, v, *faces, diag, R0, C0)
    nl.apply_at(got, v, u, kp, dk, ax, ay, diag, R0, C0, bool(ab))
    assert_same_bits(got, want, "apply_at")
    assert not np.array_equal(got, pitched(np.zeros(PADDED))), "nothing written"


def test_quotient_trial_lowest_and_divide_equal_numba_nl_bitwise(nl):
    rng = np.random.default_rng(7)
    a, b = field(rng, (N, M), -1.0, 1.0), field(rng, (N, M))
    a[1, 2], a[3, 4] = np.nan, -0.0
    got, want = np.zeros((N, M)), np.zeros((N, M))
    nl.quotient(got, a, b)
    numba_nl.quotient(want, a, b)
    assert_same_bits(got, want, "quotient")
    free = rng.random((N, M)) > 0.3
    x, v = field(rng, PADDED), field(rng, PADDED, -1.0, 1.0)
    got, want = twins(rng, PADDED)
    lo = nl.trial(got, x, 0.37, v, free, R0, C0)
    assert lo == numba_nl.trial(want, x, 0.37, v, free, R0, C0)
    assert_same_bits(got, want, "trial")
    assert nl.lowest(got, free, R0, C0) == numba_nl.lowest(want, free, R0, C0) == lo
    k = field(rng, (N, M))
    got, want = twins(rng, PADDED)
    nl.divide(got, x, k, R0, C0)
    numba_nl.divide(want, x, k, R0, C0)
    assert_same_bits(got, want, "divide")


def test_power_law_equals_the_laws_numpy_expressions_bitwise(nl):
    """nl_power (kappa and kappa' of one power law in one pass) on a view of a padded field against Law.evaluate's
    terms and the division by k_ref, with the host libm's pow (math.pow) as the emulated kernel has it: numpy's own
    power may take a vectorised pow of other last bits (a GPU's kernel against CuPy's power: test_gpu_nonlinear)."""
    import math

    from solver.core.conductivity import Law

    law, kref = Law("power", k0=148.0, t0=300.0, b=-1.3, offset=273.15), 91.5
    u = field(np.random.default_rng(3), PADDED, 20.0, 900.0)[1:-2, 2:-1]
    kap, dkap = nl.power(u, law, kref)
    theta = u + law.offset
    k = law.k0 * np.vectorize(math.pow)(theta / law.t0, law.b)
    assert_same_bits(kap, k / kref, "kappa")
    assert_same_bits(dkap, ((law.b * k) / theta) / kref, "kappa'")


class _LibmPow(np.ndarray):
    """An array whose ** is the host libm's pow a value at a time (math.pow), as the emulated kernel's pow is."""

    def __pow__(self, e):
        import math

        return np.vectorize(math.pow, otypes=[np.float64])(np.asarray(self), e)


@pytest.mark.parametrize("radiates, laws", [(True, 2), (True, 0), (False, 1), (False, 0)])
def test_film_equals_the_films_numpy_expressions_bitwise(nl, radiates, laws):
    """nl_film (a film's wall temperatures and losses, a thread a point) against solver.nonlinear.films.wall_flux's
    numpy expressions, with each point's power law by its code (0: constant k) and libm's pow on both sides: Q,
    dQ/du (Newton's and Picard's) and the radiated part."""
    import math

    from solver.core.conductivity import Law
    from solver.nonlinear import films

    rng = np.random.default_rng(5 + laws)
    n, u = 300, field(rng, PADDED, 20.0, 900.0)
    law_list = [Law("power", k0=148.0, t0=300.0, b=-1.3, offset=273.15),
                Law("power", k0=30.0, t0=350.0, b=0.4, offset=273.15)][:laws]
    kref = [91.5, 33.0][:laws]
    ts4 = ((rng.uniform(-20.0, 30.0, n) + 273.15) ** 4).view(_LibmPow)
    f = films.Film("top", rng.integers(0, PADDED[0], n), rng.integers(0, PADDED[1], n), rng.uniform(0.5, 2.0, n),
                   rng.uniform(0.01, 0.1, n), rng.uniform(1.0, 50.0, n), rng.integers(0, laws + 1, n),
                   rng.uniform(1.0, 40.0, n), rng.uniform(0.0, 60.0, n), 0.8 * 5.67e-8 if radiates else 0.0, ts4,
                   273.15)
    power = np.vectorize(math.pow, otypes=[np.float64])

    def at(t):
        kap, dkap = np.ones(t.shape), np.zeros(t.shape)
        for m, (law, kr) in enumerate(zip(law_list, kref)):
            theta = t + law.offset
            k = law.k0 * power(theta / law.t0, law.b)
            kap = np.where(f.code == m + 1, k / kr, kap)
            dkap = np.where(f.code == m + 1, ((law.b * k) / theta) / kr, dkap)
        return kap, dkap

    params = tuple((law.offset, law.t0, law.b, law.k0, kr) for law, kr in zip(law_list, kref))
    for jacobian in (True, False):
        got = nl.film(f, u, params, jacobian, films.MAX_WALL_ITERATIONS)
        want = films.wall_flux(f, u[f.rows, f.cols], at if laws else None, np, jacobian)
        assert (got[2] is None) == (want[2] is None) == (not radiates)
        for name, g, w in zip(("Q", "dQ/du", "radiated"), got, want):
            if w is not None:
                assert_same_bits(np.asarray(g), np.asarray(w), name)


def test_every_variant_compiles(nl):
    """The variants the operator may ask for, each a translation unit of its own (its macros)."""
    for kap, dlin, ab in itertools.product((0, 1), repeat=3):
        assert nl._fn("nl_residual", bool(kap), bool(dlin), bool(ab)) is not None


def test_across_equals_the_hosts_coarsening_bitwise(nl):
    """The levels' diagonal coarsened by the device's kernels (nl_across_rows, nl_across_cols) equals
    solver.multigrid.coefficients._across's host pass, along both axes, on real level pairs."""
    from solver.case import validate_case
    from solver.multigrid import coefficients
    from solver.multigrid.levels import Settings, hierarchy

    case = validate_case({"name": "c", "grid": {"nx": 77, "ny": 61}, "physics": {"equation": "laplace"}})
    levels = hierarchy(case, Settings())
    rng = np.random.default_rng(3)
    a = rng.uniform(0.1, 5.0, (levels[0].y.n, levels[0].x.n))
    for fine, coarse in zip(levels, levels[1:]):
        rows = coefficients._across(a, fine.y, coarse.y)
        assert_same_bits(coefficients._across(a, fine.y, coarse.y, device=nl), rows, "rows")
        both = coefficients._across(rows, fine.x, coarse.x, axis=1)
        assert_same_bits(coefficients._across(rows, fine.x, coarse.x, axis=1, device=nl), both, "columns")
        a = both


def test_newton_with_the_levels_diagonal_on_the_device_equals_the_hosts_bitwise(nl, tmp_path, monkeypatch):
    """A whole Newton solve of every nonlinear term (tests/test_nonlinear.py's plate: shapes, so held levels too) with
    the rebuild on the 'device' (solver.nonlinear.newton.device_kernels: quotient_device, across, the gathers and
    the lag's test on the kernels' arrays) equals the host's run: the field and every iteration's figures."""
    from test_nonlinear import every_term

    from solver.nonlinear import newton
    from solver.parallel.comm import Comm
    from solver.run import Options, Run

    def run(name):
        r = Run(every_term(tmp_path, name, "numpy"), Comm(), Options(ceiling=False, quiet=True))
        rec = r.execute()
        return np.array(r.mg.grids[0].u), rec["solver"]["newton"]["iterations"]

    u_host, log_host = run("host")
    monkeypatch.setattr(newton, "device_kernels", lambda backend, comm, owned: nl)
    before = dict(nl.calls)
    u_dev, log_dev = run("device")
    launched = {k: v - before.get(k, 0) for k, v in nl.calls.items()}
    assert launched.get("nl_quotient", 0) >= len(log_dev) and launched.get("nl_across_rows", 0) > 0, launched
    assert_same_bits(u_dev, u_host, "field")
    assert log_dev == log_host


def test_newtons_preconditioner_cycles_are_graph_replays_and_numpys_bits(tmp_path, monkeypatch):
    """A steady Newton solve (tests/test_nonlinear.py's radiating k(T) slab, 63 x 47) on the taping backend of
    tests/test_mg_emulated.py (its graph capture and replay on the host, the multigrid's kernels emulated; the operator's
    numpy expressions: STENCIL_CUPY_NL=0): GMRES hands the preconditioner a different basis vector each iteration, and a
    graph is keyed by the fields a cycle starts from, so Newton copies each into one field first. Before that, 8 of the
    13 cycles (the warm-up's included) were captures; now at most 4. R and Rt swap at each accepted step, so the
    warm-up captures a cycle from each: the solve's own cycles are all replays of graphs made at set-up (one was
    captured inside the solve before). The field is the numpy backend's bit for bit."""
    import solver.run
    from solver.backends import cupy_mg
    from solver.parallel.comm import Comm
    from test_mg_emulated import Emulator, TapingBackend
    from test_nonlinear import case, run

    steady = dict(grid={"nx": 63, "ny": 47, "lx": 0.1, "ly": 0.075})
    want, want_rec = run(case(tmp_path, "numpy", **steady))
    monkeypatch.setenv("STENCIL_CUPY_NL", "0")
    monkeypatch.setattr(cupy_mg, "TAIL_THREADS", 32)
    (tmp_path / "emu").mkdir()
    taping = type("Taping", (TapingBackend,), {"emulator": Emulator(tmp_path / "emu", "float64")})
    monkeypatch.setattr(solver.run, "backend_class", lambda name, threads=None: taping)
    r = solver.run.Run(case(tmp_path, "taped", **steady), Comm(), solver.run.Options(ceiling=False, quiet=True))
    r.setup()
    graphs = r.mg.mg.graphs
    assert graphs is not None and graphs.failed is None
    made = set(graphs.graphs)
    r.setup = lambda: None
    rec = r.execute()
    assert_same_bits(r.backend.get(r.mg.grids[0].u, r.mg.grids[0].owned).astype(np.float64), want, "the field")
    assert rec["solver"]["newton"]["cycles"] == want_rec["solver"]["newton"]["cycles"] == 12
    assert graphs.failed is None and set(graphs.graphs) == made, "a graph captured inside the solve"
    replays = sum(captured.replays for captured, _ in graphs.graphs.values())
    assert len(made) <= 4 and replays == 14, (len(made), replays)


def test_a_newton_solve_through_the_kernels_equals_numpys_bitwise(nl, tmp_path, monkeypatch):
    """A whole steady Newton solve (tests/test_nonlinear.py's radiating slab, 40 x 9, k(T) a power law) with the operator's sweeps
    the emulated kernels (the numpy backend handing out cupy_nl's driver: the GPU's path, apply_at's faces made where
    they are needed included) equals the numpy backend's own array expressions: the field and every iteration."""
    from test_nonlinear import case, run

    from solver.backends.numpy_backend import NumpyBackend

    steady = dict(grid={"nx": 40, "ny": 9, "lx": 0.1, "ly": 0.0225},
                  materials={"plate": {"k": {"k0": 20.0, "T0": 300.0, "b": -1.3}, "C": 3e6}})
    want, want_rec = run(case(tmp_path, "numpy", **steady))
    monkeypatch.setattr(NumpyBackend, "nonlinear_kernels", lambda self, region: nl)
    before = dict(nl.calls)
    got, rec = run(case(tmp_path, "kernels", **steady))
    launched = {k: v - before.get(k, 0) for k, v in nl.calls.items()}
    assert launched.get("nl_apply_at", 0) >= rec["solver"]["newton"]["linear_iterations"] > 0, launched
    assert launched.get("nl_faces", 0) == launched.get("nl_apply", 0) == 0, launched
    assert_same_bits(got, want, "the field")
    assert rec["solver"]["newton"]["iterations"] == want_rec["solver"]["newton"]["iterations"]
