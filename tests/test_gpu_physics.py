"""Physics as data on a real GPU (issues 33, 34 and 43): the CuPy backend's kernels read a source term and face
coefficients (flux and Jacobi forms) bitwise as numpy does (--fmad=false): every one-step variant and the
time-tiled ones on pitched device fields, vec on multigrid's two-layer fields, the convective fill and values
along a side, the multigrid verbs with coefficient fields and the dot products' passes; and whole cases on cupy
equal to numpy bit for bit: explicit heat with a source (a window), a convective side, side values in time and
along a side and alpha a field (steps one by one, CUDA graphs with the fill, time tiles, `chip`'s fallback said in
the record), Jacobi with faces, multigrid (plain cycles and conjugate gradients) and implicit steps (backward Euler,
Crank-Nicolson); with shapes too (held points in every kernel, a held pipe, holes' rims and an outline in explicit
steps, graphs, time tiles, Jacobi, multigrid plain and CG, implicit steps). Skipped without a GPU
(tests/test_physics_emulated.py checks the kernels on the CPU)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from test_mg_emulated import REGIONS, SHAPE, assert_same_bits, values
from test_physics_emulated import (ALPHA, MATERIAL, MATERIAL_SIDES, MG_RUNS, PAD, RUNS, SHAPES, SOURCE, STEADY_SIDES,
                                   STEP_REGIONS, assert_plate, data_weights, fills, held_weights, numpy_steps,
                                   op_transfers)

from solver.backends import cupy_kernels as gk
from solver.backends import mg_ops, registry
from solver.case import BackendSettings, validate_case
from solver.core.boundary import Fill
from solver.core.physics import update
from solver.multigrid.dot import boundaries
from solver.run import Options, run_case

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
DTYPES = ["float64", "float32"]
STEP_FORMS = ["source", "flux+source", "jacobi", "flux+source+capacity+centre", "flux+capacity"]


@pytest.fixture(autouse=True)
def _own_tune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))


def gpu(dtype, kernel=None, block=None, time_tile=None):
    from solver.backends.cupy_backend import CupyBackend

    return CupyBackend(BackendSettings(name="cupy", kernel=kernel, block=list(block) if block else None,
                                       time_tile=time_tile), dtype)


def on_device(be, w, aligned=1):
    from solver.core.physics import FIELDS

    return w.with_data(**{k: be.coefficient(getattr(w, k), aligned) for k in FIELDS if getattr(w, k) is not None})


def put(be, host, aligned=1):
    a = be.zeros(host.shape, aligned)
    be.put(a, (0, host.shape[0], 0, host.shape[1]), host)
    return a


# kernels ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["naive", "tiled", "rows", "vec", "expr"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_one_step_variants_read_the_data_as_numpy(variant, dtype):
    rng = np.random.default_rng(len(variant))
    be = gpu(dtype, variant, None if variant == "expr" else gk.DEFAULT_BLOCK[variant])
    for form in STEP_FORMS:
        for region in STEP_REGIONS:
            u, out0 = values(PAD, dtype, rng), values(PAD, dtype, rng)
            w = data_weights(PAD, dtype, form, rng).cast(dtype)
            dev_out = put(be, out0)
            be.step(dev_out, put(be, u), on_device(be, w), region)
            want = out0.copy()
            update(want, u, w, region)
            assert_same_bits(be.to_host(dev_out), want, f"{variant} {form} {region}")


def test_held_points_keep_their_value_on_the_device():
    """Shapes' held points (m = 0, cw = 0, s = T: solver.core.operator._point_implicit) in every one-step variant and
    a wave2a tile of 4: T there exactly, numpy's bits everywhere (tests/test_physics_emulated.py: the same on g++)."""
    rng = np.random.default_rng(43)
    for variant in ("naive", "tiled", "rows", "vec", "expr"):
        be = gpu("float64", variant, None if variant == "expr" else gk.DEFAULT_BLOCK[variant])
        for region in STEP_REGIONS:
            u, out0 = values(PAD, "float64", rng), values(PAD, "float64", rng)
            w, held, value = held_weights(PAD, rng)
            dev_out = put(be, out0)
            be.step(dev_out, put(be, u), on_device(be, w), region)
            want = out0.copy()
            update(want, u, w, region)
            assert_same_bits(be.to_host(dev_out), want, f"{variant} held {region}")
    be = gpu("float64", "wave2a", (32, 24), 4)
    host = values((97 + 2, 211 + 2), "float64", rng)
    w, held, value = held_weights(host.shape, rng)
    region = (1, 98, 1, 212)
    cur, _ = be.advance(be.asarray(host), be.asarray(host), on_device(be, w), 4, region, True)
    want, _ = numpy_steps(host, w, 4, region)
    assert_same_bits(be.to_host(cur), want, "wave2a held")
    inside = np.zeros(host.shape, bool)
    inside[1:-1, 1:-1] = True
    assert np.array_equal(be.to_host(cur)[held & inside], value[held & inside])


@pytest.mark.parametrize("dtype", DTYPES)
def test_vec_on_two_layer_fields(dtype):
    """An implicit step's right-hand side: the one-step kernel on multigrid's fields (column 2 aligned)."""
    rng = np.random.default_rng(2)
    be = gpu(dtype, "vec", (128, 8))
    shape = (PAD[0] + 2, PAD[1] + 2)
    for region in [(2, 27, 2, 49), (3, 9, 2, 30)]:
        u, out0 = values(shape, dtype, rng), values(shape, dtype, rng)
        w = data_weights(shape, dtype, "flux+source", rng).cast(dtype)
        dev_out = put(be, out0, 2)
        be.step(dev_out, put(be, u, 2), on_device(be, w, 2), region)
        want = out0.copy()
        update(want, u, w, region)
        assert_same_bits(be.to_host(dev_out), want, f"two-layer {region}")


@pytest.mark.parametrize("variant", gk.TILED)
@pytest.mark.parametrize("dtype", DTYPES)
def test_time_tiles_read_the_data_at_every_level(variant, dtype):
    """One launch of k steps equals k numpy steps with the data; its fused residual the last step's max update."""
    rng = np.random.default_rng(7)
    for form, k, (ny, nx) in (("source", 8, (300, 517)), ("flux+source", 5, (131, 77)), ("jacobi", 3, (64, 1031)),
                              ("flux+source+capacity+centre", 6, (97, 211))):
        be = gpu(dtype, variant, (32, 24), k)
        host = values((ny + 2, nx + 2), dtype, rng)
        w = data_weights(host.shape, dtype, form, rng).cast(dtype)
        region = (1, ny + 1, 1, nx + 1)
        u, v = be.asarray(host), be.asarray(host)
        cur, other = be.advance(u, v, on_device(be, w), k, region, True)  # one tile, its residual folded
        want, prev = numpy_steps(host, w, k, region)
        assert_same_bits(be.to_host(cur), want, f"{variant} {form} k={k}")
        r0, r1, c0, c1 = region
        assert be.max_update(cur, other, region) == np.max(np.abs(want - prev)[r0:r1, c0:c1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_rules_on_the_device(dtype):
    rng = np.random.default_rng(5)
    be = gpu(dtype)
    for depth in (1, 2):
        for rules in fills(depth, 9, 13, rng):
            fill = Fill(rules, dtype, depth)
            host = values((9 + 2 * depth, 13 + 2 * depth), dtype, rng)
            dev = put(be, host, depth)
            be.fill(dev, fill)  # multigrid's verb
            if depth == 1:
                be.boundary = fill
                other = put(be, host)
                be.fill_boundary(other)  # the run's
                fill.apply(host)
                assert_same_bits(be.to_host(other), host, "fill_boundary")
            else:
                fill.apply(host)
            assert_same_bits(be.to_host(dev), host, f"fill depth {depth}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_multigrid_verbs_with_fields_and_the_dot_passes(dtype):
    be, rng = gpu(dtype), np.random.default_rng(3)
    t = np.dtype(dtype).type
    for k, region in enumerate(REGIONS):
        u, g, out, y = (values(SHAPE, dtype, rng) for _ in range(4))
        w = data_weights(SHAPE, dtype, "jacobi", rng).cast(dtype)
        if k % 2:  # sigma a field (an implicit step's heat capacity that varies)
            w = w.with_data(sg=rng.uniform(0.5, 3.0, SHAPE).astype(dtype))
        dev_w = on_device(be, w, 2)
        om = t(0.8)
        for gg in (None, g):
            dev = put(be, out, 2)
            be.smooth(dev, put(be, u, 2), None if gg is None else put(be, gg, 2), dev_w, om, region)
            want = out.copy()
            mg_ops.vsmooth(want, u, gg, w, om, region)
            assert_same_bits(be.to_host(dev), want, f"vsmooth {region}")
            dev = put(be, out, 2)
            be.residual(dev, put(be, u, 2), None if gg is None else put(be, gg, 2), dev_w, region)
            want = out.copy()
            mg_ops.vresidual(want, u, gg, w, region)
            assert_same_bits(be.to_host(dev), want, f"vresidual {region}")
        dev = put(be, y, 2)
        be.axpy(dev, t(0.3), put(be, u, 2), region)
        be.xpay(dev, put(be, g, 2), t(-1.7), region)
        want = y.copy()
        mg_ops.axpy(want, t(0.3), u, region)
        mg_ops.xpay(want, g, t(-1.7), region)
        assert_same_bits(be.to_host(dev), want, f"axpy, xpay {region}")
        dev = put(be, y, 2)  # scale, axpy_max, axpys: one pass each (mg_scale, mg_axpy_max, mg_axpys), the base verbs
        be.scale(dev, t(-0.7), put(be, u, 2), region)
        want = np.zeros_like(y)
        mg_ops.axpy(want, t(-0.7), u, region)
        assert_same_bits(be.to_host(dev), want, f"scale {region}")
        top = be.axpy_max(dev, t(0.3), put(be, g, 2), region)
        mg_ops.axpy(want, t(0.3), g, region)
        assert_same_bits(be.to_host(dev), want, f"axpy_max {region}")
        assert top == mg_ops.max_abs(want, region)
        xs, coefs = [put(be, a, 2) for a in (u, g, out, y, u)], [t(0.3), t(-1.1), t(2.5), t(0.7), t(-0.2)]
        be.axpys(dev, coefs, xs, region)  # (two launches: four terms, then one)
        for a, x_k in zip(coefs, (u, g, out, y, u)):
            mg_ops.axpy(want, a, x_k, region)
        assert_same_bits(be.to_host(dev), want, f"axpys {region}")
        largest = be.products_max(put(be, u, 2), put(be, g, 2), region)
        assert largest == mg_ops.products_max(u, g, region)
        if largest:
            s1, s2 = boundaries(largest, 1 << 20)
            assert be.folded_sums(put(be, u, 2), put(be, g, 2), region, s1, s2) == mg_ops.folded_sums(u, g, region, s1, s2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_operator_dependent_transfers_on_the_device(dtype):
    be = gpu(dtype)
    fine, coarse, freg, creg, down, up, ws = op_transfers(dtype)
    dev_ws = [be.coefficient(a, 2) for a in ws]
    tables = lambda t: tuple(be.table(a) if isinstance(a, np.ndarray) else a for a in t)  # noqa: E731
    gc = put(be, coarse, 2)
    be.restrict_op(gc, put(be, fine, 2), creg, (*tables(down), *dev_ws))
    want = coarse.copy()
    mg_ops.restrict_op(want, fine, creg, *down, *ws)
    assert_same_bits(be.to_host(gc), want, "restrict_op")
    u = put(be, fine, 2)
    be.prolong_op(u, put(be, coarse, 2), freg, (*tables(up), *dev_ws))
    want = fine.copy()
    mg_ops.prolong_op(want, coarse, freg, *up, *ws)
    assert_same_bits(be.to_host(u), want, "prolong_op")


# whole cases --------------------------------------------------------------------------------------------------
CONSTANT_SIDES = {"left": 0.0, "right": 1.0, "bottom": 0.5, "top": -1.0}  # ghosts constant: time tiles
GPU_RUNS = {  # name -> (dtype, physics, boundary, backend settings, steps)
    "heat-sides-vary": (*RUNS["heat-flux"][:3], {}, 24),
    "heat-source-graphs": ("float32", {"equation": "heat", "source": SOURCE},
                           {**STEADY_SIDES, "right": {"kind": "convective", "h": 2.0, "ambient": -1.0}}, {}, 40),
    "heat-tiles-chip": ("float64", {"equation": "heat", "source": SOURCE, "alpha": ALPHA}, CONSTANT_SIDES, {}, 40),
    "heat-tiles-wave2": ("float32", {"equation": "heat", "source": SOURCE, "alpha": ALPHA}, CONSTANT_SIDES,
                         {"kernel": "wave2", "time_tile": 4}, 40),
    "heat-source-wave": ("float64", {"equation": "heat", "source": SOURCE}, CONSTANT_SIDES,
                         {"kernel": "wave", "time_tile": 8}, 40),
    "jacobi-faces": (*RUNS["jacobi-faces"][:3], {}, 30),
    "jacobi-faces-tiles": ("float64", {"equation": "laplace", "solver": "jacobi", "source": SOURCE[:1],
                                       "alpha": ALPHA}, CONSTANT_SIDES, {"kernel": "wave2a", "time_tile": 8}, 40),
    "multigrid-source-convective": ("float64", {"equation": "laplace", "solver": "multigrid", "source": SOURCE[:1]},
                                    STEADY_SIDES, {}, 8),
    "heat-capacity-graphs": (*RUNS["heat-capacity"][:3], {}, 30),
    "heat-capacity-tiles": ("float64", {"equation": "heat", **MATERIAL, "dt": 0.02}, CONSTANT_SIDES,
                            {"kernel": "wave2a", "time_tile": 6}, 36),
    "steady-materials": ("float64", {"equation": "laplace", "solver": "multigrid", **MATERIAL,
                                     "source": MATERIAL["source"][:1]},
                         {**STEADY_SIDES, "left": MATERIAL_SIDES["left"], "top": MATERIAL_SIDES["top"]}, {}, 8),
    # shapes (issue 43): held points (m = 0, cw = 0, s = T), the rims' terms folded into the capacity's fields
    "heat-shapes-graphs": (*RUNS["heat-shapes"][:3], {}, 30),
    "heat-shapes-tiles": ("float64", {"equation": "heat", **SHAPES}, CONSTANT_SIDES,
                          {"kernel": "wave2a", "time_tile": 6}, 36),
    "jacobi-shapes": ("float64", {"equation": "laplace", "solver": "jacobi", **SHAPES}, CONSTANT_SIDES, {}, 40),
    "multigrid-shapes-plain-cycles": ("float64", {"equation": "laplace", "solver": "multigrid", **SHAPES},
                                      CONSTANT_SIDES, {"multigrid": {"krylov": "none"}}, 8),
    **{name: (*spec[:3], {}, 8) for name, spec in MG_RUNS.items()},
}


def run_fields(tmp_path, name, spec, backend):
    dtype, physics, sides, settings, steps = spec
    extra = {"multigrid": {"coarsest": 16}} if physics.get("solver") == "multigrid" or "scheme" in physics else {}
    if "multigrid" in settings:  # (the case's multigrid section, not the backend's)
        extra["multigrid"].update(settings["multigrid"])
        settings = {k: v for k, v in settings.items() if k != "multigrid"}
    c = validate_case({"name": name, "grid": {"nx": 83, "ny": 61}, "physics": physics, "boundary": sides,
                       "initial": {"kind": "random"}, "run": {"steps": steps}, "numerics": {"dtype": dtype},
                       "backend": {"name": backend, **(settings if backend == "cupy" else {})},
                       "output": {"dir": str(tmp_path / name), "vtk": False}, **extra})
    rec = run_case(c, options=Options(ceiling=False))
    with h5py.File(tmp_path / name / "fields.h5") as f:
        return f["u"][-1], rec


TRACED = ("step", "smooth", "residual", "restrict", "restrict_op", "prolong", "prolong_op", "solve", "clear", "fill",
          "axpy", "xpay", "products_max", "folded_sums", "max_abs")


def traced(cls, log: list):
    """cls with each verb of TRACED logged: (verb, its result, or a host copy of the field it wrote)."""
    def wrap(name):
        def verb(self, *args):
            out = getattr(cls, name)(self, *args)
            if out is None and hasattr(args[0], "shape"):
                self.synchronize()
                out = np.array(self.to_host(args[0]))
            log.append((name, out))
            return out if name in ("products_max", "folded_sums", "max_abs") else None
        return verb
    return type(f"Traced{cls.__name__}", (cls,), {n: wrap(n) for n in TRACED if hasattr(cls, n)})


def first_difference(want: list, got: list) -> str | None:
    """The first verb whose result differs between two traces (None: the same bits throughout)."""
    for k, ((a, x), (b, y)) in enumerate(zip(want, got)):
        if a != b:
            return f"call {k}: {a} on numpy, {b} on the GPU"
        same = np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8)) if np.ndim(x) else x == y
        if not same:
            diff = np.max(np.abs(np.asarray(x, float) - np.asarray(y, float))) if np.ndim(x) else abs(x - y)
            return f"call {k} ({a}): results differ (max |diff| {diff:.3g}); verbs before it: {[v for v, _ in want[max(0, k - 6):k]]}"
    return None if len(want) == len(got) else f"{len(want)} calls on numpy, {len(got)} on the GPU"


@pytest.mark.parametrize("name", list(GPU_RUNS))
def test_whole_cases_on_the_gpu_equal_numpy_bitwise(tmp_path, name, monkeypatch):
    """Bitwise equal fields and residuals; where they differ, the first verb whose result differs is named (both
    runs again with every multigrid and step verb traced)."""
    spec = GPU_RUNS[name]
    want, want_rec = run_fields(tmp_path, "numpy", spec, "numpy")
    got, rec = run_fields(tmp_path, "cupy", spec, "cupy")
    if not np.array_equal(want.view(np.uint8), got.view(np.uint8)):
        import solver.run
        from solver.backends import backend_class

        logs = {}
        for backend in ("numpy", "cupy"):
            logs[backend] = []
            cls = traced(backend_class(backend), logs[backend])
            monkeypatch.setattr(solver.run, "backend_class", lambda name, threads=None, cls=cls: cls)
            run_fields(tmp_path, f"trace-{backend}", (*spec[:4], 2), backend)
        pytest.fail(f"{name}: the fields differ; {first_difference(logs['numpy'], logs['cupy'])}")
    assert_plate(want, "shapes" in name or "outline" in name)
    assert rec["run"].get("residuals") == want_rec["run"].get("residuals")
    kernels = rec["resources"]["devices"][0]["kernels"]
    entry = next(iter(kernels.values()))
    tiles = [p for p in entry.get("with_data", []) if p["time_tile"] > 1]
    if name == "heat-tiles-chip" and entry["kernel"] == "chip":  # the field fits on chip: chip's fallback, said
        (path,) = tiles
        assert path["kernel"] == gk.DEFAULT_VARIANT and path["fallback"] == gk.DATA_FALLBACK["chip"], entry
        assert "face coefficients (flux form)" in path["reads"] and "source" in path["reads"]
    if name in ("heat-tiles-wave2", "heat-source-wave", "jacobi-faces-tiles", "heat-shapes-tiles"):
        assert tiles and all(p["fallback"] is None for p in entry["with_data"]), entry
