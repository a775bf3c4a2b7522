"""Physics as data on the CuPy backend's kernels, compiled for the CPU with g++ and the CUDA shim (tests/cuda_emu) and
launched with the argument lists the backend builds (cupy_kernels.step_launch and tile_launch, cupy_mg's specs):
every kernel that reads a source term or face coefficients, bitwise equal to the numpy reference on pitched fields,
odd non-square regions and random data, in both dtypes:
- the one-step variants (naive, tiled, rows, vec) in each form (a source with the constant weights, the flux form,
  the Jacobi form; with and without a source), on fields aligned as the run's and as multigrid's two-layer fields
  (the vector kernel then starts one column further on);
- the time-tiled wave, wave2 and wave2a: one launch equals k numpy steps with the same data, fused residual
  included, also on a deep-halo region;
- kernels/boundary.cu's fill_rules (convective sides, values and gains along a side) at depths 1 to 3;
- kernels/mg.cu's vsmooth, vresidual, axpy, xpay and the dot products' two passes;
and whole runs equal to the numpy backend's: explicit heat and Jacobi through the emulated vec kernel and fill
(sources with a window, a convective side, side values in time and along a side, alpha a field), multigrid with
conjugate gradients and implicit steps through the emulated multigrid verbs. Not a GPU: nothing here says anything
about NVRTC, streams or speed (tests/test_gpu_physics.py runs the same on the device)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import h5py
import numpy as np
import pytest
from test_mg_emulated import (DTYPES, OUTLINE, REGIONS, SHAPE, SHAPES, EmulatedBackend, Emulator, _c_arg,
                              assert_same_bits, bits, pitched, values)

import solver.run
from solver.backends import cupy_kernels as gk
from solver.backends import cupy_mg, mg_ops
from solver.backends.numpy_backend import NumpyBackend
from solver.case import validate_case
from solver.core import boundary
from solver.core.boundary import Fill, Rule
from solver.core.decomp import decompose
from solver.core.physics import FIELDS, Weights, update
from solver.multigrid.dot import boundaries
from solver.run import Options, run_case

HERE = Path(__file__).parent / "cuda_emu"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ here")
FORMS = {"source": (1, 0, 0), "flux+source": (1, 1, 0), "flux": (0, 1, 0), "jacobi+source": (1, 2, 0), "jacobi": (0, 2, 0),
         "flux+capacity": (0, 1, 1), "flux+source+capacity+centre": (1, 1, 3),
         "jacobi+source+diagonal": (1, 2, 2)}  # (SRC, FORM, CAP): kernels/common.cu (Jacobi's CAP 2: the field sg)
STEP_BLOCK = (32, 4)  # naive, tiled: 32 x 4 threads; rows, vec: 32 threads of 4 rows (short bands where rows % 4)
STEP_LIBS = ([(d, f) for d in DTYPES for f in ("flux+source", "jacobi+source", "source")]  # naive + tiled + vec
             + [("float64", "flux+source+capacity+centre"), ("float32", "flux+capacity"),
                ("float64", "jacobi+source+diagonal")])
ROWS_LIBS = [("float64", "flux+source"), ("float32", "jacobi")]
WAVE_LIBS = [  # variant, dtype, threads a block, k, form
    ("wave", "float32", 32, 4, "source"),
    ("wave2", "float64", 64, 5, "flux+source"),
    ("wave2a", "float32", 32, 3, "jacobi+source"),
    ("wave2a", "float64", 32, 8, "flux"),
    ("wave2a", "float64", 32, 4, "flux+source+capacity+centre"),
    ("wave2a", "float64", 32, 4, "jacobi+source+diagonal"),
    ("wave", "float32", 32, 3, "flux+capacity"),
]


# building --------------------------------------------------------------------------------------------------
def _kernel_text(*files) -> str:
    root = resources.files("solver.backends") / "kernels"
    return "\n".join((root / f).read_text() for f in ("common.cu", *files))


def _step_unit(dtype, form):
    """naive, tiled and march (vec) in one unit: they share common.cu and the block's BX and BY."""
    opts = gk.options("vec", dtype, STEP_BLOCK, data=FORMS[form])
    return (f"step_{form}", _kernel_text("naive.cu", "tiled.cu", "march.cu"), opts,
            ("naive", "tiled", "march"))


def _rows_unit(dtype, form):
    return f"rows_{form}", _kernel_text("march.cu"), gk.options("rows", dtype, STEP_BLOCK, data=FORMS[form]), ("march",)


def _wave_unit(variant, dtype, bx, k, form):
    return (f"{variant}_k{k}_{form}", gk.source(variant), gk.options(variant, dtype, (bx, 0), k=k, data=FORMS[form]),
            ("wave",))


MODES = {"naive": "serial", "tiled": "blocks", "march": "warps", "wave": "warps"}


class Lib:
    """A compiled unit's kernels, launched as CuPy launches them: lib(entry)(grid, block, args)."""

    def __init__(self, cdll):
        self.cdll = cdll

    def __call__(self, entry):
        address = ctypes.c_void_p.in_dll(self.cdll, f"launch_{entry}").value

        def launch(grid, block, args, stream=None):
            types, vals = zip(*map(_c_arg, args))
            ctypes.CFUNCTYPE(None, *[ctypes.c_uint] * 4, *types)(address)(*grid[:2], *block[:2], *vals)

        return launch


_LIBS: dict = {}
FLAGS = ("-std=c++20", "-O1", "-ffp-contract=off", "-fPIC", "-pthread")


def _headers(build: Path) -> None:
    """The shim's headers in `build`, launch.h precompiled there (most of a unit's compile time is the C++ headers
    it includes: the units below then define their macros after it, so one precompiled header serves them all)."""
    for h in ("launch.h", "shim.h"):
        shutil.copy(HERE / h, build / h)
    subprocess.run(["g++", *FLAGS, "-x", "c++-header", str(build / "launch.h"), "-o", str(build / "launch.h.gch")],
                   capture_output=True, timeout=300)  # without it (a failure) each unit parses the headers itself


def _build(build, unit) -> Lib:
    """One translation unit: launch.h, the kernels' defines and source, an EMU_EXPORT per kernel in its mode."""
    name, text, opts, entries = unit
    defines = tuple(o for o in opts if o.startswith("-D"))
    key = (name, defines)
    if key not in _LIBS:
        tag = f"{name}_{'_'.join(d.split('=')[-1] for d in defines)}".replace("+", "_")
        src = build / f"{tag}.cu"
        src.write_text(text)
        unit_cpp = build / f"{tag}_unit.cpp"
        macros = "".join("#define {} {}\n".format(*d[2:].split("=", 1)) for d in defines)
        exports = "".join(f"EMU_EXPORT({e}, {MODES[e]})\n" for e in entries)
        unit_cpp.write_text(f'#include "launch.h"\n{macros}#include "{src}"\n{exports}')
        lib = build / f"{tag}.so"
        res = subprocess.run(["g++", *FLAGS, "-shared", f"-I{build}", str(unit_cpp), "-o", str(lib)],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        _LIBS[key] = Lib(ctypes.CDLL(str(lib)))
    return _LIBS[key]


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    """Every unit, built two at a time (g++ takes most of this file's time)."""
    build = tmp_path_factory.mktemp("physics_emu")
    units = {("step", d, f): _step_unit(d, f) for d, f in STEP_LIBS}
    units.update({("rows", d, f): _rows_unit(d, f) for d, f in ROWS_LIBS})
    units.update({("wave", *w): _wave_unit(*w) for w in WAVE_LIBS})
    _headers(build)
    with ThreadPoolExecutor(2) as pool:
        built = dict(zip(units, pool.map(lambda u: _build(build, u), units.values())))
    return built


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    build = tmp_path_factory.mktemp("mg_emu")
    return {dt: Emulator(build, dt) for dt in DTYPES}


# data --------------------------------------------------------------------------------------------------------
def data_weights(shape, dtype, form, rng, w=None):
    """(host weights: numpy fields, for the reference; their values, for device copies) of one form: a source of
    random values, faces in [0.05, 0.3] (a diagonal that never vanishes), random scalars."""
    src, kind, cap = FORMS[form]
    t = np.dtype(dtype).type
    w = w or Weights(t(rng.uniform(0.2, 0.6)), t(rng.uniform(0.1, 0.2)), t(rng.uniform(0.1, 0.2)))
    fields = {}
    if src:
        fields["s"] = values(shape, dtype, rng)
    if kind:
        fields["ax"], fields["ay"] = (rng.uniform(0.05, 0.3, shape).astype(dtype) for _ in range(2))
    if cap & 1:  # a heat capacity field's multiplier 1 / c
        fields["m"] = rng.uniform(0.3, 2.0, shape).astype(dtype)
    if cap & 2 and kind == 2:  # the Jacobi form's diagonal beside the faces (shapes: held points, rims)
        fields["sg"] = rng.uniform(0.5, 3.0, shape).astype(dtype)
    elif cap & 2:  # and the centre weight 1 - dt beta / c
        fields["cw"] = rng.uniform(0.5, 1.0, shape).astype(dtype)
    return w.with_data(**fields, jacobi=kind == 2, sigma=t(rng.choice([0.0, 1.0, 1.7]) if kind == 2 else 0.0))


def on_pitch(w, aligned=1):
    """w with its fields in the device layout (u's pitch and alignment: CupyBackend.coefficient)."""
    return w.with_data(**{k: pitched(getattr(w, k), aligned) for k in FIELDS if getattr(w, k) is not None})


PAD = (27, 49)  # a padded field: 25 x 47 points
STEP_REGIONS = [(1, 26, 1, 48), (1, 4, 1, 48), (3, 20, 5, 41), (2, 25, 47, 48), (7, 8, 9, 10), (1, 26, 2, 3)]


# one-step kernels ----------------------------------------------------------------------------------------------
def run_step(lib, variant, dtype, host_u, out0, w, region, aligned=1):
    u, out = pitched(host_u, aligned), pitched(out0, aligned)
    dev_w = on_pitch(w, aligned)
    entry = gk.ENTRY[variant]
    lib(entry)(*gk.step_launch(variant, dtype, STEP_BLOCK, out, u, dev_w, region))
    assert_same_bits(u, host_u, f"{variant} input")
    return out


ONE_STEP = [("step", *x) for x in STEP_LIBS] + [("rows", *x) for x in ROWS_LIBS]


@pytest.mark.parametrize("unit,dtype,form", ONE_STEP, ids=["-".join(x) for x in ONE_STEP])
def test_one_step_kernels_with_data_equal_numpy_bitwise(libs, unit, dtype, form):
    """naive, tiled and vec (rows in its own units) read the source and faces as solver.core.physics.update does,
    on every region, the whole padded field compared (nothing outside the region written)."""
    variants = ("rows",) if unit == "rows" else ("naive", "tiled", "vec")
    lib = libs[(unit, dtype, form)]
    rng = np.random.default_rng(len(form) + len(dtype))
    for region in STEP_REGIONS:
        u, out0 = values(PAD, dtype, rng), values(PAD, dtype, rng)
        w = data_weights(PAD, dtype, form, rng).cast(dtype)
        want = out0.copy()
        update(want, u, w, region)
        for variant in variants:
            got = run_step(lib, variant, dtype, u, out0, w, region)
            assert_same_bits(got, want, f"{variant} {form} {region}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_vec_on_two_layer_fields_starts_where_loads_align(libs, dtype):
    """Multigrid's two-layer fields (column 2 aligned): step_launch passes them from column 2, region shifted; the
    bits are those of the update on the unshifted fields (an implicit step's right-hand side)."""
    lib = libs[("step", dtype, "flux+source")]
    rng = np.random.default_rng(9)
    shape = (PAD[0] + 2, PAD[1] + 2)
    for region in [(2, 27, 2, 49), (3, 9, 2, 30), (2, 27, 48, 49)]:
        u, out0 = values(shape, dtype, rng), values(shape, dtype, rng)
        w = data_weights(shape, dtype, "flux+source", rng).cast(dtype)
        want = out0.copy()
        update(want, u, w, region)
        assert gk.misaligned(pitched(u, 2)) > 0
        got = run_step(lib, "vec", dtype, u, out0, w, region, aligned=2)
        assert_same_bits(got, want, f"vec two-layer {region}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_data_comparison_is_sharp(dtype):
    """The data tell the forms' term orders apart: the flux form regrouped, or the source added before the
    neighbours, gives other bits at many points (a kernel that reordered them could not pass)."""
    rng = np.random.default_rng(4)
    u = values(PAD, dtype, rng)
    w = data_weights(PAD, dtype, "flux+source", rng).cast(dtype)
    r0, r1, c0, c1 = STEP_REGIONS[0]
    want = np.zeros_like(u)
    update(want, u, w, STEP_REGIONS[0])
    c = u[r0:r1, c0:c1]
    e, west = u[r0:r1, c0 + 1:c1 + 1], u[r0:r1, c0 - 1:c1 - 1]
    n, s = u[r0 + 1:r1 + 1, c0:c1], u[r0 - 1:r1 - 1, c0:c1]
    ae, aw = w.ax[r0:r1, c0:c1], w.ax[r0:r1, c0 - 1:c1 - 1]
    an, as_ = w.ay[r0:r1, c0:c1], w.ay[r0 - 1:r1 - 1, c0:c1]
    other = (c + w.s[r0:r1, c0:c1]) + ((ae * (e - c) - aw * (c - west)) + (an * (n - c) - as_ * (c - s)))
    assert (bits(other) != bits(want[r0:r1, c0:c1])).mean() > 0.05


# time tiles ----------------------------------------------------------------------------------------------------
def numpy_steps(host, w, k, region):
    a, b = host.copy(), host.copy()
    for _ in range(k):
        update(b, a, w, region)
        a, b = b, a
    return a, b


def run_tile(lib, variant, dtype, bx, rows, k, host, w, region, store, resid=False):
    u, out = pitched(host), pitched(np.full_like(host, np.nan))
    word = np.zeros(1, dtype=np.uint32 if dtype == "float32" else np.uint64)
    lib("wave")(*gk.tile_launch(variant, dtype, (bx, rows), out, u, on_pitch(w), k, region, store,
                                word if resid else np.uint64(0)))
    return np.array(out), word.view(dtype)[0]


@pytest.mark.parametrize("variant,dtype,bx,k,form", WAVE_LIBS, ids=str)
def test_time_tiles_with_data_equal_k_numpy_steps(libs, variant, dtype, bx, k, form):
    """One launch = k steps of the update with the data (read at every level), stored over the region only; the
    fused residual is max |level k - level k-1|. Two segment heights: segments inside C (the unguarded path)
    and at its edges."""
    lib = libs[("wave", variant, dtype, bx, k, form)]
    rng = np.random.default_rng(k)
    for ny, nx, rows in ((37, 203, 9), (70, 130, 40)):
        host = values((ny + 2, nx + 2), dtype, rng)
        w = data_weights(host.shape, dtype, form, rng).cast(dtype)
        region = (1, ny + 1, 1, nx + 1)
        got, res = run_tile(lib, variant, dtype, bx, rows, k, host, w, region, region, resid=True)
        want, prev = numpy_steps(host, w, k, region)
        inside = np.zeros(host.shape, bool)
        inside[1:-1, 1:-1] = True
        assert_same_bits(got[inside], want[inside], f"{variant} {form} k={k} {ny}x{nx}")
        assert np.isnan(got[~inside]).all(), "stored outside the region"
        assert res == np.max(np.abs(want - prev)[inside])


def test_time_tile_with_data_on_a_deep_halo_region(libs):
    """C grown by k beyond the stored block (k-deep halos): the stored points equal k steps of the whole."""
    variant, dtype, bx, k, form = WAVE_LIBS[1]
    lib = libs[("wave", variant, dtype, bx, k, form)]
    rng = np.random.default_rng(3)
    ny, nx = 44, 93
    host = values((ny + 2, nx + 2), dtype, rng)
    w = data_weights(host.shape, dtype, form, rng).cast(dtype)
    update_region = (1, ny + 1, 1, nx + 1)
    store = (1 + k, ny + 1 - k, 1 + k, nx + 1 - k)
    got, _ = run_tile(lib, variant, dtype, bx, 8, k, host, w, update_region, store)
    want, _ = numpy_steps(host, w, k, update_region)
    r0, r1, c0, c1 = store
    assert_same_bits(got[r0:r1, c0:c1], want[r0:r1, c0:c1], "deep region")
    mask = np.ones(host.shape, bool)
    mask[r0:r1, c0:c1] = False
    assert np.isnan(got[mask]).all()


def held_weights(shape, rng):
    """Weights of the capacity form with held points as shapes make them (solver.core.operator._point_implicit): a
    fifth of the points with m = 0, cw = 0 and s = their value; (weights, held mask, values)."""
    dtype, form = "float64", "flux+source+capacity+centre"
    w = data_weights(shape, dtype, form, rng)
    held, value = rng.random(shape) < 0.2, rng.uniform(-2.0, 2.0, shape)
    w = w.with_data(m=np.where(held, 0.0, w.m), cw=np.where(held, 0.0, w.cw), s=np.where(held, value, w.s))
    return w.cast(dtype), held, value


def test_held_points_keep_their_value_in_every_kernel(libs):
    """One step of naive, tiled and vec, and a wave2a tile of 4 steps, with held points: there the value exactly
    (0 u + 0 (...) + T, whatever u and its neighbours hold), elsewhere the bits of numpy's update."""
    rng = np.random.default_rng(43)
    lib = libs[("step", "float64", "flux+source+capacity+centre")]
    for region in STEP_REGIONS:
        u, out0 = values(PAD, "float64", rng), values(PAD, "float64", rng)
        w, held, value = held_weights(PAD, rng)
        want = out0.copy()
        update(want, u, w, region)
        r0, r1, c0, c1 = region
        inside = np.zeros(PAD, bool)
        inside[r0:r1, c0:c1] = True
        assert np.array_equal(want[held & inside], value[held & inside])
        for variant in ("naive", "tiled", "vec"):
            assert_same_bits(run_step(lib, variant, "float64", u, out0, w, region), want, f"{variant} held {region}")
    variant, dtype, bx, k, form = WAVE_LIBS[4]
    lib = libs[("wave", variant, dtype, bx, k, form)]
    host = values((39, 205), dtype, rng)
    w, held, value = held_weights(host.shape, rng)
    region = (1, 38, 1, 204)
    got, _ = run_tile(lib, variant, dtype, bx, 9, k, host, w, region, region)
    want, _ = numpy_steps(host, w, k, region)
    inside = np.zeros(host.shape, bool)
    inside[1:-1, 1:-1] = True
    assert_same_bits(got[inside], want[inside], "wave2a held")
    assert np.array_equal(got[held & inside], value[held & inside])


# boundary fill -------------------------------------------------------------------------------------------------
def fills(depth, ny, nx, rng):
    """Fills with every new rule: convective (numbers, arrays), Dirichlet and Neumann values along a side."""
    along = {"bottom": nx + 2 * depth, "top": nx + 2 * depth, "left": ny + 2 * depth, "right": ny + 2 * depth}
    arr = lambda side, lo=-1.0, hi=1.0: rng.uniform(lo, hi, along[side])  # noqa: E731
    neumann = arr("top")
    neumann[::5] = 0.0  # a zero flux adds nothing (the mirror itself, as Fill.apply)
    return [
        (Rule("bottom", "convective", arr("bottom"), arr("bottom", 0.2, 0.9)), Rule("top", "neumann", neumann),
         Rule("left", "dirichlet", arr("left")), Rule("right", "convective", 0.37, 0.81)),
        (Rule("bottom", "dirichlet", 0.25), Rule("top", "convective", 1.5, arr("top", 0.5, 1.0)),
         Rule("left", "periodic"), Rule("right", "periodic")),
        (Rule("left", "convective", arr("left"), 0.6), Rule("right", "neumann", 0.125)),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_rules_equal_the_host_rules(emu, dtype):
    """boundary.cu's fill_rules through fill_specs at depths 1-3 on pitched fields; Fill.apply the reference."""
    rng = np.random.default_rng(8)
    ny, nx = 9, 13
    for depth in (1, 2, 3):
        for rules in fills(depth, ny, nx, rng):
            fill = Fill(rules, dtype, depth)
            assert gk.fill_entry(fill) == "fill_rules"
            host = values((ny + 2 * depth, nx + 2 * depth), dtype, rng)
            dev = pitched(host, aligned=depth)
            for spec in cupy_mg.fill_specs(dev, fill):
                emu[dtype].run(spec)
            fill.apply(host)
            assert_same_bits(dev, host, f"fill depth {depth} {[r.kind for r in rules]}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_fill_of_a_case_with_sides_that_vary(emu, dtype):
    """make_fill at a time: a convective side with h along the side, Dirichlet in time, Neumann along."""
    c = validate_case({"name": "f", "grid": {"nx": 21, "ny": 15}, "boundary": SIDES, "physics": {"equation": "heat"},
                       "numerics": {"dtype": dtype}, "run": {"steps": 1}})
    block = decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c))
    for depth, t in ((1, 0.0), (2, 4e-4)):
        fill = boundary.make_fill(c, block, depth, t=t)
        host = values((15 + 2 * depth, 21 + 2 * depth), dtype, np.random.default_rng(depth))
        dev = pitched(host, aligned=depth)
        for spec in cupy_mg.fill_specs(dev, fill):
            emu[dtype].run(spec)
        fill.apply(host)
        assert_same_bits(dev, host, f"case fill depth {depth}")


# multigrid verbs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_g", [False, True])
@pytest.mark.parametrize("sigma_field", [False, True])
def test_vsmooth_and_vresidual_equal_mg_ops_bitwise(emu, dtype, with_g, sigma_field):
    """With sigma a number, or the field sg (an implicit step's heat capacity that varies)."""
    rng = np.random.default_rng(5 + with_g + 2 * sigma_field)
    for region in REGIONS:
        u, g, out = (values(SHAPE, dtype, rng) for _ in range(3))
        w = data_weights(SHAPE, dtype, "jacobi", rng).cast(dtype)
        if sigma_field:
            w = w.with_data(sg=rng.uniform(0.5, 3.0, SHAPE).astype(dtype))
        om = np.dtype(dtype).type(rng.uniform(0.5, 1.2))
        dev_w = w.with_data(ax=pitched(w.ax, 2, wider=1), ay=pitched(w.ay, 2, wider=1),
                            sg=None if w.sg is None else pitched(w.sg, 2, wider=1))
        gg = g if with_g else None
        for verb, spec, ref in (("vsmooth", cupy_mg.vsmooth_spec, lambda o: mg_ops.vsmooth(o, u, gg, w, om, region)),
                                ("vresidual", cupy_mg.vresidual_spec, lambda o: mg_ops.vresidual(o, u, gg, w, region))):
            dev_u, dev_g, dev_out = pitched(u, 2), pitched(g, 2, wider=3), pitched(out, 2, wider=2)
            args = (dev_out, dev_u, dev_g if with_g else None, dev_w) + ((om,) if verb == "vsmooth" else ())
            emu[dtype].run(spec(*args, region))
            want = out.copy()
            ref(want)
            assert_same_bits(dev_out, want, f"{verb} {region}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_axpy_xpay_and_the_dot_passes_equal_mg_ops(emu, dtype):
    rng = np.random.default_rng(12)
    t = np.dtype(dtype).type
    for region in REGIONS:
        y, x = values(SHAPE, dtype, rng), values(SHAPE, dtype, rng)
        a = t(rng.uniform(-2, 2))
        for verb, spec, ref in (("axpy", cupy_mg.axpy_spec, mg_ops.axpy), ("xpay", cupy_mg.xpay_spec, mg_ops.xpay)):
            dev_y, dev_x = pitched(y, 2), pitched(x, 2, wider=1)
            emu[dtype].run(spec(dev_y, a, dev_x, region) if verb == "axpy" else spec(dev_y, dev_x, a, region))
            want = y.copy()
            ref(want, a, x, region) if verb == "axpy" else ref(want, x, a, region)
            assert_same_bits(dev_y, want, f"{verb} {region}")
        big = values((45, 1100), dtype, rng)  # several blocks across a row
        for aa, bb, reg in ((y, x, region), (big, big[::-1].copy(), (2, 43, 2, 1098))):
            got_max = emu_products_max(emu[dtype], aa, bb, reg)
            assert got_max == mg_ops.products_max(aa, bb, reg)
            if got_max:
                s1, s2 = boundaries(got_max, (reg[1] - reg[0]) * (reg[3] - reg[2]))
                assert emu_folded_sums(emu[dtype], aa, bb, reg, s1, s2) == mg_ops.folded_sums(aa, bb, reg, s1, s2)
    y[10, 20] = np.nan
    assert emu_products_max(emu[dtype], y, x, REGIONS[0]) == np.inf == mg_ops.products_max(y, x, REGIONS[0])


@pytest.mark.parametrize("dtype", DTYPES)
def test_scale_axpy_max_and_axpys_equal_the_verbs_they_fuse(emu, dtype):
    """mg_scale (Backend.scale: a clear and an axpy), mg_axpy_max (an axpy and max_abs) and mg_axpys (up to four
    axpys in order: GMRES's update), each one pass on a GPU
    (GMRES's basis vectors and its last Gram-Schmidt update, Newton's copy into one field): the base verbs' bits,
    signed zeros included, and NaN's max as inf (the base verbs: mg_ops's clear, axpy and max_abs)."""
    rng = np.random.default_rng(13)
    t = np.dtype(dtype).type
    for region in (*REGIONS, (0, SHAPE[0], 0, SHAPE[1]), (5, 5, 3, 9)):
        y, x = values(SHAPE, dtype, rng), values(SHAPE, dtype, rng)
        x[3, 4], x[6, 7] = -0.0, 0.0
        for a in (t(rng.uniform(-2, 2)), t(-1.0), t(0.0)):
            dev_y, dev_x = pitched(y, 2), pitched(x, 2, wider=1)
            emu[dtype].run(cupy_mg.scale_spec(dev_y, a, dev_x, region))
            want = np.zeros_like(y)
            mg_ops.axpy(want, a, x, region)
            assert_same_bits(dev_y, want, f"scale {region} {a}")
            dev_y = pitched(y, 2)
            word = np.zeros(1, dtype=np.uint32 if t(0).itemsize == 4 else np.uint64)
            spec = cupy_mg.axpy_max_spec(word, dev_y, a, dev_x, region)
            want = y.copy()
            mg_ops.axpy(want, a, x, region)
            want_max = mg_ops.max_abs(want, region)
            if spec is None:
                assert want_max == 0.0
                continue
            emu[dtype].run(spec)
            assert_same_bits(dev_y, want, f"axpy_max {region} {a}")
            assert float(word.view(dtype)[0]) == want_max
    for count in (1, 3, 4):  # axpys: count terms in one pass, the axpys' bits in order
        xs = [pitched(values(SHAPE, dtype, rng), 2, wider=k % 2) for k in range(count)]
        coefs = [t(rng.uniform(-2, 2)) for _ in range(count)]
        for region in REGIONS:
            dev_y, want = pitched(y, 2), y.copy()
            emu[dtype].run(cupy_mg.axpys_spec(dev_y, coefs, xs, region))
            for a, x_k in zip(coefs, xs):
                mg_ops.axpy(want, a, np.array(x_k), region)
            assert_same_bits(dev_y, want, f"axpys {count} {region}")
    y[10, 20] = np.nan
    word = np.zeros(1, dtype=np.uint32 if t(0).itemsize == 4 else np.uint64)
    emu[dtype].run(cupy_mg.axpy_max_spec(word, pitched(y, 2), t(1.0), pitched(x, 2, wider=1), REGIONS[0]))
    assert not np.isfinite(float(word.view(dtype)[0]))


def emu_products_max(emu, a, b, region) -> float:
    word = np.zeros(1, dtype=np.uint64)
    spec = cupy_mg.products_max_spec(word, pitched(a), pitched(b, wider=1), region)
    if spec is None:
        return 0.0
    emu.run(spec)
    m = float(word.view(np.float64)[0])
    return m if np.isfinite(m) else float("inf")


def emu_folded_sums(emu, a, b, region, s1, s2):
    sums = np.zeros(2)
    emu.run(cupy_mg.folded_sums_spec(sums, pitched(a), pitched(b, wider=1), region, s1, s2))
    return float(sums[0]), float(sums[1])


def op_transfers(dtype, seed=21):
    """Data of the transfers that follow the coefficients: (fine, coarse, fine region, coarse region, restriction's
    tables less the weights, prolongation's less the weights, the four weight fields). Windows of 1-3 points from
    2k (a few empty), each fine point's targets the coarse points whose windows hold it (some dropped: -1)."""
    rng = np.random.default_rng(seed)
    fine_shape, coarse_shape = (35, 49), (17, 23)
    creg, freg = (2, 15, 2, 21), (2, 33, 2, 47)
    nc, nf = creg[1] - creg[0], creg[3] - creg[2]
    origin = (5, 9)
    ys, yc = 2 * np.arange(nc), rng.choice([0, 1, 2, 3, 3, 3], nc)
    xs, xc = 2 * np.arange(nf), rng.choice([0, 1, 2, 3, 3, 3], nf)
    ty = np.stack([np.arange(fine_shape[0]) // 2, np.arange(fine_shape[0]) // 2 - 1]) + creg[0] + origin[0]
    tx = np.stack([np.arange(fine_shape[1]) // 2, np.arange(fine_shape[1]) // 2 - 1]) + creg[2] + origin[1]
    ty[rng.random(ty.shape) < 0.15] = -1
    down = (ys, yc, xs, xc, ty, tx, origin, np.dtype(dtype).type(0.37))
    up = (rng.integers(0, coarse_shape[0] - 1, freg[1] - freg[0]), rng.integers(0, coarse_shape[1] - 1, freg[3] - freg[2]))
    ws = [values(fine_shape, dtype, rng) for _ in range(4)]
    return values(fine_shape, dtype, rng), values(coarse_shape, dtype, rng), freg, creg, down, up, ws


@pytest.mark.parametrize("dtype", DTYPES)
def test_operator_dependent_transfers_equal_mg_ops_bitwise(emu, dtype):
    """mg.cu's mg_restrict_op and mg_prolong_op (solver.multigrid.opdep's per-point weights), coarse and fine fields
    and the weights each of their own pitch."""
    fine, coarse, freg, creg, down, up, ws = op_transfers(dtype)
    dev_ws = [pitched(a, 2, wider=1) for a in ws]
    dev_gc = pitched(coarse, 2)
    emu[dtype].run(cupy_mg.restrict_op_spec(dev_gc, pitched(fine, 2, wider=2), creg, (*down, *dev_ws)))
    want = coarse.copy()
    mg_ops.restrict_op(want, fine, creg, *down, *ws)
    assert_same_bits(dev_gc, want, "restrict_op")
    assert (want[creg[0]:creg[1], creg[2]:creg[3]] != coarse[creg[0]:creg[1], creg[2]:creg[3]]).mean() > 0.5
    dev_u = pitched(fine, 2)
    emu[dtype].run(cupy_mg.prolong_op_spec(dev_u, pitched(coarse, 2, wider=1), freg, (*up, *dev_ws)))
    want = fine.copy()
    mg_ops.prolong_op(want, coarse, freg, *up, *ws)
    assert_same_bits(dev_u, want, "prolong_op")


# whole runs ------------------------------------------------------------------------------------------------------
SIDES = {"left": {"kind": "convective", "h": {"along": [[0, 2.0], [1, 8.0]]}, "ambient": 0.5},
         "right": {"kind": "dirichlet", "value": {"time": [[0, 0], [0.001, 1.0]]}},
         "bottom": {"kind": "neumann", "flux": {"along": [[0, -1.0], [1, 1.0]]}},
         "top": 1.0}
STEADY_SIDES = {"left": {"kind": "convective", "h": 4.0, "ambient": {"along": [[0, 0.0], [1, 1.0]]}},
                "right": {"kind": "dirichlet", "value": {"along": [[0, 1.0], [1, -1.0]]}}, "bottom": 0.5,
                "top": {"kind": "neumann", "flux": 0.5}}
SOURCE = [{"kind": "gaussian", "center": [0.4, 0.6], "width": 0.15, "amplitude": 3.0},
          {"kind": "rectangle", "lower": [0.1, 0.1], "upper": [0.3, 0.5], "value": -2.0, "active": [1e-4, 3e-4]}]
ALPHA = {"background": 1.0, "regions": [{"kind": "rectangle", "lower": [0.5, 0.2], "upper": [0.9, 0.7], "value": 0.05}]}
MATERIAL = {"material": "steel", "thickness": 0.002, "faces": {"h": 40.0, "ambient": 0.5},  # SI: capacities differ
            "regions": [{"kind": "rectangle", "lower": [0.53, 0.21], "upper": [0.87, 0.69], "material": "copper"},
                        {"kind": "disk", "center": [0.3, 0.6], "radius": 0.17, "material": "glass"}],
            "source": [{"kind": "disk", "center": [0.4, 0.6], "radius": 0.13, "power": 900.0},
                       {"kind": "rectangle", "lower": [0.1, 0.1], "upper": [0.3, 0.5], "power": -300.0,
                        "active": [1e-4, 3e-4]}]}
MATERIAL_SIDES = {**SIDES, "left": {"kind": "convective", "h": 400.0, "ambient": 1.0},
                  "top": {"kind": "neumann", "flux": 2000.0}}
RUNS = {  # name -> (dtype, physics, boundary, extra sections), the kernels' data form
    "heat-flux": ("float64", {"equation": "heat", "source": SOURCE, "alpha": ALPHA}, SIDES, {}),
    "heat-source": ("float32", {"equation": "heat", "source": SOURCE}, SIDES, {}),
    "jacobi-faces": ("float32", {"equation": "laplace", "solver": "jacobi", "source": SOURCE[:1], "alpha": ALPHA},
                     STEADY_SIDES, {}),
    "heat-capacity": ("float64", {"equation": "heat", **MATERIAL, "dt": 0.02}, MATERIAL_SIDES, {}),
    "heat-shapes": ("float64", {"equation": "heat", **SHAPES}, MATERIAL_SIDES, {}),
    "jacobi-shapes": ("float64", {"equation": "laplace", "solver": "jacobi", **SHAPES},
                      {"left": 0.0, "right": 1.0, "bottom": 0.5, "top": -1.0}, {}),  # sigma a field (sg)
}
MG_RUNS = {
    "cg-faces": ("float64", {"equation": "laplace", "solver": "multigrid", "source": SOURCE[:1], "alpha": ALPHA},
                 STEADY_SIDES, {"multigrid": {"coarsest": 16}}),
    "backward-euler": ("float32", {"equation": "heat", "scheme": "backward-euler", "dt": 2e-3, "source": SOURCE},
                       SIDES, {"multigrid": {"coarsest": 16}}),
    "crank-nicolson-faces": ("float64", {"equation": "heat", "scheme": "crank-nicolson", "dt": 2e-3, "source": SOURCE,
                                         "alpha": ALPHA}, SIDES, {"multigrid": {"coarsest": 16}}),
    "backward-euler-capacity": ("float64", {"equation": "heat", "scheme": "backward-euler", "dt": 5.0, **MATERIAL},
                                MATERIAL_SIDES, {"multigrid": {"coarsest": 16}}),
    "backward-euler-shapes": ("float64", {"equation": "heat", "scheme": "backward-euler", "dt": 30.0, **SHAPES},
                              MATERIAL_SIDES, {"multigrid": {"coarsest": 16}}),
    "crank-nicolson-outline": ("float64", {"equation": "heat", "scheme": "crank-nicolson", "dt": 10.0, **OUTLINE},
                               MATERIAL_SIDES, {"multigrid": {"coarsest": 16}}),
    "cg-shapes": ("float64", {"equation": "laplace", "solver": "multigrid", **SHAPES},
                  {**STEADY_SIDES, "left": MATERIAL_SIDES["left"], "top": MATERIAL_SIDES["top"]},
                  {"multigrid": {"coarsest": 16}}),
}


class EmulatedSteps(NumpyBackend):
    """The numpy backend whose steps run the emulated `vec` kernel (cupy_kernels.step_launch) and whose fills run
    boundary.cu (fill_specs), on fields in the device layout (coefficient() as the CuPy backend's)."""

    libs: dict = None
    fill_emu = None

    def zeros(self, shape, aligned: int = 1):
        return pitched(np.zeros(shape, dtype=self.dtype), aligned)

    def asarray(self, host):
        return pitched(np.asarray(host, dtype=self.dtype)) if np.ndim(host) == 2 else super().asarray(host)

    def coefficient(self, host, aligned: int = 1):
        return pitched(np.asarray(host, dtype=self.dtype), aligned)

    def step(self, out, u, w, region) -> None:
        r0, r1, c0, c1 = region
        if r1 > r0 and c1 > c0:
            lib = self.libs[("step", self.dtype.name, next(f for f, d in FORMS.items() if d == gk.data_of(w)))]
            lib("march")(*gk.step_launch("vec", self.dtype, STEP_BLOCK, out, u, w, region))

    def fill_boundary(self, u, timer=None) -> None:
        if self.refills:
            for spec in cupy_mg.fill_specs(u, self.boundary):
                self.fill_emu.run(spec)


def run_fields(tmp_path, name, spec, monkeypatch=None, cls=None):
    dtype, physics, sides, extra = spec
    c = validate_case({"name": name, "grid": {"nx": 41, "ny": 29}, "physics": physics, "boundary": sides,
                       "initial": {"kind": "random"}, "run": {"steps": 8}, "numerics": {"dtype": dtype},
                       "backend": {"name": "numpy"}, "output": {"dir": str(tmp_path / name), "vtk": False}, **extra})
    if cls is not None:
        monkeypatch.setattr(solver.run, "backend_class", lambda name, threads=None: cls)
    rec = run_case(c, options=Options(ceiling=False))
    with h5py.File(tmp_path / name / "fields.h5") as f:
        return f["u"][-1], rec


@pytest.mark.parametrize("name", list(RUNS))
def test_explicit_runs_through_the_emulated_kernels_equal_numpy_bitwise(libs, emu, tmp_path, monkeypatch, name):
    spec = RUNS[name]
    want, _ = run_fields(tmp_path, "numpy", spec)
    cls = type("Emulated", (EmulatedSteps,), {"libs": libs, "fill_emu": emu[spec[0]]})
    got, rec = run_fields(tmp_path, "emu", spec, monkeypatch, cls)
    assert_same_bits(got, want, "the last snapshot")
    assert_plate(want, "shapes" in name)


def assert_plate(u, shaped: bool) -> None:
    """A last snapshot worth comparing: finite and not flat on the plate; with shapes, blanks (NaN: holes, held
    points) beside it."""
    plate = ~np.isnan(u)
    assert np.isfinite(u[plate]).all() and np.ptp(u[plate]) > 0
    assert plate.all() != shaped, "shapes blank the points that are not plate"


@pytest.mark.parametrize("name", list(MG_RUNS))
def test_multigrid_runs_through_the_emulated_verbs_equal_numpy_bitwise(emu, tmp_path, monkeypatch, name):
    spec = MG_RUNS[name]
    want, want_rec = run_fields(tmp_path, "numpy", spec)
    emulator = emu[spec[0]]
    emulator.calls.clear()
    cls = type("Emulated", (EmulatedBackend,), {"emulator": emulator})
    got, rec = run_fields(tmp_path, "emu", spec, monkeypatch, cls)
    assert_same_bits(got, want, "the last snapshot")
    assert rec["run"].get("residuals") == want_rec["run"].get("residuals")
    used = set(emulator.calls)
    assert "fill_rules" in used, used
    if "faces" in name:
        assert {"mg_vsmooth", "mg_vresidual", "mg_restrict_op", "mg_prolong_op"} <= used, used
    if name in ("cg-faces", "cg-shapes"):
        assert {"mg_axpy", "mg_xpay", "mg_products_max", "mg_folded_sums"} <= used, used
    if "shapes" in name or "outline" in name:  # held points out of the transfers (opdep), sigma a field (sg)
        assert {"mg_vsmooth", "mg_vresidual", "mg_restrict_op", "mg_prolong_op"} <= used, used
    assert_plate(want, "shapes" in name or "outline" in name)
