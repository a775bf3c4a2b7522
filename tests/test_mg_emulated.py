"""The CuPy backend's multigrid kernels (solver/backends/kernels/mg.cu, and boundary.cu at depth 2) compiled for
the CPU with g++ and the CUDA shim (tests/cuda_emu/launch.h), launched with the very argument lists the backend
builds (solver/backends/cupy_mg.py's specs), so that their indexing, guards, pitches and rounding are checked on
every machine: each verb bitwise equal to mg_ops.py (the numpy reference) on pitched fields with odd,
non-square regions, random data (signed zeros included) and tables both real and random, in both dtypes; and
whole multigrid runs (V, W, F cycles, every boundary kind) through the backend's verbs, bitwise equal to the
numpy backend's run. Not a GPU: nothing here says anything about NVRTC, streams or speed
(tests/test_gpu_multigrid.py runs the same on the device)."""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import subprocess
import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest

import solver.run
from solver.backends import Backend, cupy_kernels as gk, cupy_mg, mg_ops
from solver.backends.numpy_backend import NumpyBackend
from solver.case import validate_case
from solver.core import boundary
from solver.core.decomp import decompose
from solver.core.physics import Weights
from solver.multigrid.grids import down_tables, up_tables
from solver.multigrid.levels import Settings, hierarchy
from solver.run import Options, run_case

HERE = Path(__file__).parent / "cuda_emu"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ here")
DTYPES = ["float64", "float32"]
MODES = {"mg_max_abs": "warps", "mg_products_max": "warps", "mg_folded_sums": "warps", "mg_residual_max": "warps",
         "mg_vresidual_max": "warps", "mg_sweeps": "blocks", "mg_tail": "blocks",
         "mg_axpy_max": "warps", "nl_apply_at": "warps"}  # warp shuffles, barriers; others: serial (nl_apply_at: nl.cu, test_nonlinear_emulated)
ENTRIES = ("mg_smooth", "mg_residual", "mg_restrict", "mg_prolong", "mg_solve", "mg_max_abs", "mg_clear")
PHYSICS_ENTRIES = ("mg_vsmooth", "mg_vresidual", "mg_axpy", "mg_axpys", "mg_scale", "mg_axpy_max", "mg_xpay", "mg_products_max", "mg_folded_sums",
                   "mg_prolong_op", "mg_restrict_op")  # tests/
# test_physics_emulated.py: coefficient fields and conjugate gradients
NORM_ENTRIES = ("mg_residual_max", "mg_vresidual_max", "mg_sweeps", "mg_tail")  # issue 35: the stop test in one pass,
# tiled sweeps, the coarse tail in one block
C_TYPES = {np.int32: ctypes.c_int32, np.int64: ctypes.c_int64, np.uint64: ctypes.c_uint64,
           np.float32: ctypes.c_float, np.float64: ctypes.c_double}


# the emulator --------------------------------------------------------------------------------------------
class Emulator:
    """The kernels of mg.cu and boundary.cu for one dtype, called as CuPy functions: fn(grid, block, args)."""

    def __init__(self, build: Path, dtype: str):
        self.dtype = dtype
        self.libs = {"mg": _compile(build, "mg", cupy_mg.source(), cupy_mg.options(dtype),
                                   ENTRIES + PHYSICS_ENTRIES + NORM_ENTRIES),
                     "fill": _compile(build, "fill", gk.fill_source(), gk.fill_options(dtype), gk.FILL_ENTRIES)}
        self.calls: dict[str, int] = {}

    def kernel(self, entry: str):
        lib = self.libs["fill" if entry in gk.FILL_ENTRIES else "mg"]
        address = ctypes.c_void_p.in_dll(lib, f"launch_{entry}").value

        def launch(grid, block, args, stream=None):
            assert len(grid) == len(block) == 3 and grid[2] == block[2] == 1, (grid, block)
            assert 0 < block[0] * block[1] <= 1024 and min(grid) >= 1, (grid, block)
            types, values = zip(*map(_c_arg, args))
            proto = ctypes.CFUNCTYPE(None, *[ctypes.c_uint] * 4, *types)
            proto(address)(*grid[:2], *block[:2], *values)
            self.calls[entry] = self.calls.get(entry, 0) + 1

        return launch

    def run(self, spec) -> None:
        if spec is not None:
            entry, grid, block, args = spec
            self.kernel(entry)(grid, block, args)


def _c_arg(x):
    """(ctypes type, value) of one kernel argument as CuPy would pass it: arrays by pointer, numpy scalars by
    their own size (a Python number would reach the kernel as a double or a long long: refused)."""
    if isinstance(x, np.ndarray):
        return ctypes.c_void_p, x.ctypes.data
    if type(x) not in C_TYPES:
        raise TypeError(f"kernel argument {x!r} of type {type(x).__name__}: pass arrays or sized numpy scalars")
    return C_TYPES[type(x)], x


_LIBS: dict = {}


def _compile(build: Path, name: str, source: str, opts, entries) -> ctypes.CDLL:
    defines = tuple(o for o in opts if o.startswith("-D"))
    key = (name, defines)
    if key not in _LIBS:
        tag = f"{name}_{'_'.join(d.split('=')[-1] for d in defines)}"
        src = build / f"{tag}.cu"
        src.write_text(source)
        unit = build / f"{tag}_unit.cpp"
        exports = "".join(f"EMU_EXPORT({e}, {MODES.get(e, 'serial')})\n" for e in entries)
        unit.write_text(f'#include "launch.h"\n#include "{src}"\n{exports}')
        lib = build / f"{tag}.so"
        res = subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-pthread",
                              f"-I{HERE}", *defines, str(unit), "-o", str(lib)], capture_output=True, text=True,
                             timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        _LIBS[key] = ctypes.CDLL(str(lib))
    return _LIBS[key]


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    build = tmp_path_factory.mktemp("mg_emu")
    return {dt: Emulator(build, dt) for dt in DTYPES}


# data ----------------------------------------------------------------------------------------------------
def pitched(host: np.ndarray, aligned: int = 1, wider: int = 0) -> np.ndarray:
    """host's values in CupyBackend.zeros's layout (rows a multiple of 128 bytes apart, column `aligned` on
    128 bytes, spare columns after the last), in host memory: a view whose pitch is not its width. wider:
    128-byte units added to the pitch (fields of one verb with different pitches)."""
    rows, cols = host.shape
    per = 128 // host.itemsize
    off = (-aligned) % per
    off += per if off * host.itemsize < 16 else 0
    pitch = (-(-(off + cols + 4) // per) + wider) * per
    raw = np.full(rows * pitch + per, 7.0, dtype=host.dtype)  # the spare columns hold 7: a write there shows
    shift = (-raw.ctypes.data % 128) // host.itemsize
    view = raw[shift:shift + rows * pitch].reshape(rows, pitch)[:, off:off + cols]
    view[...] = host
    return view


def values(shape, dtype, rng) -> np.ndarray:
    """Random values of both signs and several magnitudes, with exact zeros of both signs."""
    a = rng.uniform(-1, 1, shape) * 10.0 ** rng.integers(-3, 3, shape)
    a[rng.random(shape) < 0.05] = 0.0
    a[rng.random(shape) < 0.05] = -0.0
    r, c = shape[0] // 3, shape[1] // 3
    a[r:r + 5, c:c + 7] = 0.0  # patches of zeros: exact cancellations, whose sign of zero is part of the result
    a[r + 5:r + 9, c + 7:c + 12] = -0.0
    return a.astype(dtype)


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.itemsize == 4 else np.uint64)


def assert_same_bits(got, want, what="") -> None:
    """Bitwise (signed zeros and NaN payloads too), over the whole padded field: nothing outside the region
    may change either."""
    same = bits(got) == bits(want)
    assert same.all(), f"{what}: {(~same).sum()} of {same.size} points differ, first at {np.argwhere(~same)[0]}"


def weights(dtype, rng) -> Weights:
    t = np.dtype(dtype).type
    return Weights(t(rng.uniform(0.1, 0.4)), t(rng.uniform(0.1, 0.3)), t(rng.uniform(0.1, 0.3)))


SHAPE = (29, 43)  # a padded field (DEPTH = 2 ghost layers around 25 x 39 points)
REGIONS = [(2, 27, 2, 41), (3, 20, 5, 38), (2, 3, 2, 41), (9, 27, 40, 41), (2, 27, 2, 2)]  # owned, bands, empty


# the point verbs -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_g", [False, True])
@pytest.mark.parametrize("region", REGIONS, ids=str)
def test_smooth_and_residual_equal_mg_ops_bitwise(emu, dtype, with_g, region):
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {with_g} {region}".encode()))
    u, g, out = (values(SHAPE, dtype, rng) for _ in range(3))
    w, om = weights(dtype, rng), np.dtype(dtype).type(rng.uniform(0.5, 1.5))
    gg = g if with_g else None
    for verb, spec, ref in (("smooth", cupy_mg.smooth_spec, lambda o, gv: mg_ops.smooth(o, u, gv, w, om, region)),
                            ("residual", cupy_mg.residual_spec, lambda o, gv: mg_ops.residual(o, u, gv, w, region))):
        dev_u, dev_g, dev_out = pitched(u, wider=1), pitched(g, wider=3), pitched(out)
        args = (dev_out, dev_u, dev_g if with_g else None, w) + ((om,) if verb == "smooth" else ())
        emu[dtype].run(spec(*args, region))
        want = out.copy()
        ref(want, gg)
        assert_same_bits(dev_out, want, verb)
        assert_same_bits(dev_u, u, f"{verb} input")


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_bitwise_comparison_is_sharp(dtype):
    """The data above tell term orders apart: the same sweep with its terms grouped differently gives other
    bits at many points (so a kernel that reordered them could not pass)."""
    rng = np.random.default_rng(5)
    u = values(SHAPE, dtype, rng)
    w = weights(dtype, rng)
    r0, r1, c0, c1 = REGIONS[0]
    want = np.zeros_like(u)
    mg_ops.smooth(want, u, None, w, None, REGIONS[0])
    other = (w.wc * u[r0:r1, c0:c1] + (w.wx * (u[r0:r1, c0 - 1:c1 - 1] + u[r0:r1, c0 + 1:c1 + 1])
                                       + w.wy * (u[r0 - 1:r1 - 1, c0:c1] + u[r0 + 1:r1 + 1, c0:c1])))
    assert (bits(other) != bits(want[r0:r1, c0:c1])).mean() > 0.05


def restrict_tables(rng, dtype, coarse_shape, fine_shape, taps=4):
    """Random restriction tables: per coarse row/column a start, a count 0..taps and weights (some zero)."""
    out = []
    for n, extent in zip(coarse_shape, fine_shape):
        count = rng.integers(0, taps + 1, n)
        start = rng.integers(0, extent - taps + 1, n)
        w = values((n, taps), dtype, rng)
        out += [start.astype(np.int64), count.astype(np.int64), w]
    ys, yc, yw, xs, xc, xw = out
    return ys, yc, yw, xs, xc, xw


def real_tables(case_data, dtype, level: int):
    """The tables of one level pair of a real hierarchy (one process): variable tap counts at Neumann ends
    and across periodic wraps, semi-coarsened axes (identity, one tap)."""
    c = validate_case(case_data)
    levels = hierarchy(c, Settings(coarsest=16))
    fine, coarse = levels[level], levels[level + 1]
    periodic = boundary.periodic_axes(c)
    fb, cb = (decompose(lev.shape, (1, 1), 0, periodic) for lev in (fine, coarse))
    d, u = down_tables(fb, cb, coarse), up_tables(fb, cb, coarse)
    t = np.dtype(dtype).type
    down = (d.ys, d.yc, d.yw.astype(dtype), d.xs, d.xc, d.xw.astype(dtype), t(d.scale))
    up = (u.ys, u.yw.astype(dtype), u.xs, u.xw.astype(dtype))
    return fine.shape, coarse.shape, down, up


MG_CASE = {"name": "t", "grid": {"nx": 101, "ny": 67}, "physics": {"equation": "laplace", "solver": "multigrid"}}
TABLE_CASES = {  # boundary sides -> (case, level)
    "neumann-periodic": {"left": {"kind": "periodic"}, "right": {"kind": "periodic"},
                         "bottom": {"kind": "neumann", "flux": 0.5}, "top": 1.0},
    "dirichlet-neumann": {"top": 1.0, "bottom": 0.5, "left": {"kind": "neumann", "flux": 0.3}, "right": 0.0},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", *TABLE_CASES])
@pytest.mark.parametrize("level", [0, 1])
def test_restrict_and_prolong_equal_mg_ops_bitwise(emu, dtype, kind, level):
    rng = np.random.default_rng(level + 7 * len(kind))
    if kind == "random":
        fine_n, coarse_n = (31 + 6 * level, 45), (13, 21 + level)
        ys, yc, yw, xs, xc, xw = restrict_tables(rng, dtype, coarse_n, (fine_n[0] + 4, fine_n[1] + 4))
        down = (ys, yc, yw, xs, xc, xw, np.dtype(dtype).type(rng.uniform(1, 5)))
        up = (rng.integers(0, coarse_n[0] + 3, fine_n[0]), values((fine_n[0], 2), dtype, rng),
              rng.integers(0, coarse_n[1] + 3, fine_n[1]), values((fine_n[1], 2), dtype, rng))
    else:
        fine_n, coarse_n, down, up = real_tables({**MG_CASE, "boundary": TABLE_CASES[kind],
                                                  "numerics": {"dtype": dtype}}, dtype, level)
        assert len(set(down[1].tolist() + down[4].tolist())) > 1, "real tables with one tap count only"
    fine = values((fine_n[0] + 4, fine_n[1] + 4), dtype, rng)
    coarse = values((coarse_n[0] + 4, coarse_n[1] + 4), dtype, rng)
    creg = (2, 2 + coarse_n[0], 2, 2 + coarse_n[1])
    freg = (2, 2 + fine_n[0], 2, 2 + fine_n[1])

    dev_gc, dev_r = pitched(coarse, aligned=2), pitched(fine, aligned=2, wider=2)
    emu[dtype].run(cupy_mg.restrict_spec(dev_gc, dev_r, creg, down))
    want = coarse.copy()
    mg_ops.restrict(want, fine, creg, *down)
    assert_same_bits(dev_gc, want, "restrict")

    dev_u, dev_e = pitched(fine, aligned=2), pitched(coarse, aligned=2, wider=2)
    emu[dtype].run(cupy_mg.prolong_spec(dev_u, dev_e, freg, up))
    want = fine.copy()
    mg_ops.prolong(want, coarse, freg, *up)
    assert_same_bits(dev_u, want, "prolong")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("region", [(2, 9, 2, 13), (3, 4, 5, 6), (2, 2, 2, 13)], ids=str)
def test_solve_equals_mg_ops_bitwise(emu, dtype, region):
    rng = np.random.default_rng(3)
    r0, r1, c0, c1 = region
    n = max(r1 - r0, 0) * max(c1 - c0, 0)
    e, r = values((11, 17), dtype, rng), values((11, 17), dtype, rng)
    minv = values((n, n), dtype, rng)
    dev_e, dev_r = pitched(e), pitched(r, wider=1)
    emu[dtype].run(cupy_mg.solve_spec(dev_e, dev_r, minv, region))
    want = e.copy()
    mg_ops.solve(want, r, minv, region)
    assert_same_bits(dev_e, want, "solve")
    assert_same_bits(dev_r, r, "solve input")


# max_abs, clear, fill ------------------------------------------------------------------------------------
def emu_max_abs(emu, a, region) -> float:
    """CupyMultigrid.max_abs's steps: a zeroed word, the reduction, the word read as the field's dtype."""
    word = np.zeros(1, dtype=np.uint32 if a.itemsize == 4 else np.uint64)
    spec = cupy_mg.max_abs_spec(word, pitched(a), region)
    if spec is None:
        return 0.0
    emu.run(spec)
    m = float(word.view(a.dtype)[0])
    return m if np.isfinite(m) else float("inf")


@pytest.mark.parametrize("dtype", DTYPES)
def test_max_abs_equals_mg_ops(emu, dtype):
    rng = np.random.default_rng(11)
    big = values((45, 1100), dtype, rng)  # several blocks across a row (the grid's x extent)
    cases = [(big, (2, 43, 2, 1098)), (big, (5, 6, 700, 1098))]
    a = values(SHAPE, dtype, rng)
    a[4, 7] = -300.0  # the largest magnitude is negative
    cases += [(a, r) for r in REGIONS]
    for inside in (np.nan, -np.inf):
        b = a.copy()
        b[10, 20] = inside
        cases.append((b, REGIONS[0]))
    b = a.copy()
    b[0, 0] = b[28, 42] = np.nan  # outside the region: not seen
    cases += [(b, REGIONS[0]), (np.zeros(SHAPE, dtype), REGIONS[0]), (-np.zeros(SHAPE, dtype), REGIONS[0])]
    for field, region in cases:
        got, want = emu_max_abs(emu[dtype], field, region), mg_ops.max_abs(field, region)
        assert got == want and type(got) is float, (region, got, want)
    assert emu_max_abs(emu[dtype], a, REGIONS[0]) == 300.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_clear_zeroes_the_field_and_nothing_else(emu, dtype):
    a = pitched(values(SHAPE, dtype, np.random.default_rng(1)))
    base = a.base.copy()
    emu[dtype].run(cupy_mg.clear_spec(a))
    assert_same_bits(a, np.zeros(SHAPE, dtype), "clear")
    outside = np.ones(a.base.shape, bool)
    outside[np.unravel_index(_offsets(a), a.base.shape)] = False
    assert_same_bits(a.base[outside], base[outside], "clear outside the view")


def _offsets(view) -> np.ndarray:
    """Flat indices of a pitched view's points in its base array."""
    start = (view.ctypes.data - view.base.ctypes.data) // view.itemsize
    rows, cols = np.indices(view.shape)
    return (start + rows * (view.strides[0] // view.itemsize) + cols).ravel()


FILL_KINDS = {
    "dirichlet": {"left": 0.5, "right": -2.0, "bottom": 1.0, "top": 0.25},
    "neumann": {"left": {"kind": "neumann", "flux": 1.5}, "right": {"kind": "neumann"},
                "bottom": {"kind": "neumann", "flux": -0.5}, "top": {"kind": "neumann", "flux": 0.1}},
    "periodic": {s: {"kind": "periodic"} for s in ("left", "right", "bottom", "top")},
    "mixed": {"left": 2.0, "right": {"kind": "neumann", "flux": 0.75}, "bottom": {"kind": "periodic"},
              "top": {"kind": "periodic"}},
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", list(FILL_KINDS))
def test_fill_at_depth_two_equals_the_host_rules(emu, dtype, kind):
    """boundary.cu through fill_specs (a Fill argument, depth 2, as the multigrid fields have)."""
    c = validate_case({"name": "f", "grid": {"nx": 39, "ny": 25, "lx": 1.3}, "boundary": FILL_KINDS[kind],
                       "numerics": {"dtype": dtype}, "run": {"steps": 1}})
    fill = boundary.make_fill(c, decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c)), 2)
    host = values(SHAPE, dtype, np.random.default_rng(4))
    dev = pitched(host, aligned=2)
    for spec in cupy_mg.fill_specs(dev, fill):
        emu[dtype].run(spec)
    fill.apply(host)
    assert_same_bits(dev, host, f"fill {kind}")


def test_timed_starts_after_the_fill_wait_and_charges_the_level():
    """CupyMultigrid's stream protocol with stand-ins for streams and events: a fill on `edge` first makes edge
    wait for main, then records the start event; the time goes to compute of the level current at enqueue;
    a timed call that launches nothing records no events."""
    from solver.core.timing import Timer

    log = []

    class Fake(cupy_mg.CupyMultigrid):
        main, edge = "main", "edge"
        _edge_used = False

        def __init__(self):
            self.active = self.edge

        def edge_waits_main(self):
            log.append("edge waits main")

        def join(self):
            log.append("main waits edge")

        def _record(self, s):
            log.append(f"event on {s}")
            return len(log)

        def _track(self, charge, section, e0, e1, timer, track):
            log.append(("track", section, e0, e1))
            charge(section, 2.0)

        def _mg_kernel(self, entry):
            return lambda grid, block, args, stream=None: log.append(f"{entry} on {stream}")

    fill = boundary.Fill((boundary.Rule("left", "neumann", 0.5),), "float64", 2)
    be, timer = Fake(), Timer()
    timer.level = 3
    be.timed(timer, lambda: be.fill(np.zeros((9, 8)), fill))
    assert log == ["edge waits main", "event on edge", "fill_sides on edge", "event on edge", ("track", "compute", 2, 4)]
    assert timer.levels[3]["compute"] == 2.0 and be._edge_used
    log.clear()
    be.active = be.main
    be.timed(timer, lambda: be.smooth(np.zeros((9, 8)), np.zeros((9, 8)), None, Weights(1.0, 1.0, 1.0), 1.0,
                                      (2, 2, 2, 6)))
    assert log == []


# whole runs -----------------------------------------------------------------------------------------------
class EmulatedBackend(cupy_mg.CupyMultigrid, NumpyBackend):
    """The numpy backend with CupyMultigrid's verbs, their kernels run by the emulator on pitched host fields
    (the device-facing steps replaced: no streams, no events, host words and tables)."""

    emulator: Emulator = None
    table, get, put, timed = Backend.table, Backend.get, Backend.put, Backend.timed

    def zeros(self, shape, aligned: int = 1):
        return pitched(np.zeros(shape, dtype=self.dtype), aligned)

    def coefficient(self, host, aligned: int = 1):
        return pitched(np.asarray(host, dtype=self.dtype), aligned)

    def _mg_stream(self, after_all: bool = False):
        return None

    def launch(self, out, u, w, region, stream) -> None:
        """The CuPy backend's one-step kernel (the finest level's sweep without a right-hand side): here the
        numpy update it equals bitwise (tests/test_gpu_kernels.py proves that on a GPU)."""
        NumpyBackend.step(self, out, u, w, region)

    def _mg_kernel(self, entry):
        return self.emulator.kernel(entry)

    def _mg_word(self, stream):
        return np.zeros(1, dtype=np.uint32 if self.dtype.itemsize == 4 else np.uint64)

    def _mg_read(self, word, stream) -> float:
        return float(word.view(self.dtype)[0])

    def _mg_zeroed(self, stream, dtype, count: int):
        return np.zeros(count, dtype=dtype)

    def _mg_fetch(self, words, stream) -> np.ndarray:
        return words.copy()

    def _fill_table(self, host):
        return host

    def _mg_address(self, a) -> int:
        return a.ctypes.data

    def _mg_norm_buffers(self):
        if getattr(self, "bufs", None) is None:
            kind = np.uint32 if self.dtype.itemsize == 4 else np.uint64
            self.bufs = (np.zeros(1, kind), np.zeros(1, kind))
        return self.bufs

    def _mg_clear_word(self, word, stream) -> None:
        word.fill(0)

    def _mg_copy_word(self, host, word, stream) -> None:
        np.copyto(host, word)

    def _mg_norm_done(self, stream) -> None:
        pass

    def _mg_norm_read(self) -> float:
        return float(self.bufs[1].view(self.dtype)[0])


RUN_SIDES = {
    "example": TABLE_CASES["dirichlet-neumann"],
    "periodic-x": {"left": {"kind": "periodic"}, "right": {"kind": "periodic"}, "bottom": -1.0, "top": 2.0},
    "neumann-periodic": TABLE_CASES["neumann-periodic"],
    "dirichlet": {"top": 1.0, "bottom": 0.5, "left": 0.0, "right": -1.0},  # (constant ghost rules: tiles and the tail)
}
RUNS = [(d, cyc, "example") for d in DTYPES for cyc in "VWF"] + [
    ("float64", "V", "periodic-x"), ("float32", "W", "neumann-periodic"), ("float64", "F", "neumann-periodic")]


def run_fields(tmp_path, name, dtype, cycle, sides, monkeypatch=None, emulator=None):
    c = validate_case({**MG_CASE, "name": name, "initial": {"kind": "random"}, "boundary": RUN_SIDES[sides],
                       "run": {"steps": 8}, "multigrid": {"coarsest": 16, "cycle": cycle},
                       "numerics": {"dtype": dtype}, "backend": {"name": "numpy"},
                       "output": {"dir": str(tmp_path / name), "vtk": False}})
    if emulator is not None:
        cls = type("Emulated", (EmulatedBackend,), {"emulator": emulator})
        monkeypatch.setattr(solver.run, "backend_class", lambda name, threads=None: cls)
    rec = run_case(c, options=Options(ceiling=False))
    with h5py.File(tmp_path / name / "fields.h5") as f:
        return f["u"][-1], rec["run"]["residuals"]


@pytest.mark.parametrize("dtype,cycle,sides", RUNS, ids=lambda x: str(x))
def test_whole_runs_through_the_backend_verbs_equal_numpy_bitwise(emu, tmp_path, monkeypatch, dtype, cycle, sides):
    want, want_res = run_fields(tmp_path, "numpy", dtype, cycle, sides)
    emulator = emu[dtype]
    emulator.calls.clear()
    got, got_res = run_fields(tmp_path, "emu", dtype, cycle, sides, monkeypatch, emulator)
    assert_same_bits(got, want, "the last snapshot")
    assert got_res == want_res and len(want_res) == 8
    assert want_res[-1][1] < 1e-3 * want_res[0][1], "the cycles did not converge: a weak comparison"
    want_calls = {*ENTRIES, cupy_mg.FILL, "mg_residual_max"} - {"mg_max_abs"}  # (the stop test: one pass)
    # every verb ran as a kernel; mg_max_abs too where the stop rules measured the floor's scale (max |u|)
    assert want_calls <= set(emulator.calls) <= want_calls | {"mg_max_abs"}, emulator.calls


# the stop test in one pass, and whole cycles as graphs (issue 35) -------------------------------------------------
def emu_residual_max(emu, r, u, g, w, region) -> float:
    """CupyMultigrid.residual_max's steps: a zeroed word, the fused pass, the word read as the field's dtype."""
    word = np.zeros(1, dtype=np.uint32 if u.itemsize == 4 else np.uint64)
    spec = cupy_mg.residual_max_spec(word, r, u, g, w, region)
    if spec is None:
        return 0.0
    emu.run(spec)
    m = float(word.view(u.dtype)[0])
    return m if np.isfinite(m) else float("inf")


def face_weights(dtype, rng, sigma, field=False):
    """Faces, and the diagonal's part beside them: a number, or a field (field: an implicit step's capacity)."""
    t = np.dtype(dtype).type
    ax, ay = (rng.uniform(0.05, 0.3, SHAPE).astype(dtype) for _ in range(2))
    sg = rng.uniform(0.5, 2.0, SHAPE).astype(dtype) if field else None
    return Weights(t(0.0), t(0.0), t(0.0), ax=ax, ay=ay, jacobi=True, sigma=t(sigma), sg=sg)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("faces", [False, True])
def test_residual_max_equals_residual_then_max_abs(emu, dtype, faces):
    """mg_residual_max / mg_vresidual_max: the residual's bits where r is given (nothing else written), and its max
    |.| equal to mg_max_abs over them, with r or without; NaN and Inf read as inf."""
    rng = np.random.default_rng(35 + faces)
    for k, region in enumerate(REGIONS + [(2, 27, 2, 41)]):
        u, g, r = (values(SHAPE, dtype, rng) for _ in range(3))
        if k == len(REGIONS):
            u[10, 20] = np.nan
        w = face_weights(dtype, rng, 1.0 if k % 2 else 0.0, field=k == 2) if faces else weights(dtype, rng)
        dev_w = w.with_data(ax=pitched(w.ax, 2, wider=1), ay=pitched(w.ay, 2, wider=1),
                            sg=None if w.sg is None else pitched(w.sg, 2, wider=1)) if faces else w
        for g_on in (False, True):
            gg = g if g_on else None
            want = r.copy()
            (mg_ops.vresidual if faces else mg_ops.residual)(want, u, gg, w, region)
            top = mg_ops.max_abs(want, region)
            dev_u, dev_g, dev_r = pitched(u, 2), pitched(g, 2, wider=3), pitched(r, 2, wider=2)
            got = emu_residual_max(emu[dtype], dev_r, dev_u, dev_g if g_on else None, dev_w, region)
            assert got == top and type(got) is float, (region, g_on, got, top)
            assert_same_bits(dev_r, want, f"residual {region} g={g_on}")
            alone = emu_residual_max(emu[dtype], None, dev_u, dev_g if g_on else None, dev_w, region)
            assert alone == top, (region, g_on, alone, top)
    assert top == float("inf")


@pytest.fixture(scope="module")
def small_tiles(tmp_path_factory):
    """mg_sweeps built with tiles of 7 x 5 points (the backend's: cupy_mg.TILES), so that a 25 x 39 region has many
    tiles, partial ones at its far edges, and every tile's halo reads its neighbours' points."""
    build = tmp_path_factory.mktemp("mg_tiles")
    libs = {}
    for dt in DTYPES:
        opts = tuple(o for o in cupy_mg.options(dt) if not o.startswith(("-DMG_TX", "-DMG_TY"))) + ("-DMG_TX=7",
                                                                                                   "-DMG_TY=5")
        lib = _compile(build, "mg_small", cupy_mg.source(), opts, ("mg_sweeps",))
        libs[dt] = ctypes.c_void_p.in_dll(lib, "launch_mg_sweeps").value
    return libs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tiles", ["backend", "small"])
def test_tiled_sweeps_equal_the_verbs_they_replace(emu, small_tiles, monkeypatch, dtype, tiles):
    """mg_sweeps = (mg_prolong, where it carries one, then) one or two mg_smooth sweeps (the other buffer's ghosts as
    u's: constant rules), then mg_residual of the result into r and its max |.| as mg_residual_max folds it; with and
    without a right-hand side, on the owned region, bands and an empty one; u, r's ghosts and every point outside the
    region untouched."""
    rng = np.random.default_rng(350 + (tiles == "small") + 2 * (dtype == "float32"))
    launch = emu[dtype].kernel("mg_sweeps")
    if tiles == "small":
        monkeypatch.setattr(cupy_mg, "TILES", dict.fromkeys((8, 4), ((7, 5), 4)))
        address = small_tiles[dtype]

        def launch(grid, block, args, stream=None):
            types, vals = zip(*map(_c_arg, args))
            ctypes.CFUNCTYPE(None, *[ctypes.c_uint] * 4, *types)(address)(*grid[:2], *block[:2], *vals)

    for region in REGIONS:
        for n, g_on, tail, corrected in SWEEP_CASES:
            c = SweepsCase(rng, dtype, SHAPE, region, n, g_on, tail, corrected)
            dev_u, dev_out = pitched(c.u, 2, wider=1), pitched(c.out, 2)
            dev_g, dev_r = pitched(c.g, 2, wider=3), pitched(c.r, 2, wider=2)
            word = np.zeros(1, dtype=np.uint32 if dtype == "float32" else np.uint64)
            spec = cupy_mg.sweeps_spec(dev_out, dev_u, dev_g if g_on else None, c.sweeps, region,
                                       dev_r if tail in ("residual", "both") else None, c.w if tail else None,
                                       word if tail in ("max", "both") else None,
                                       (pitched(c.e, 2, wider=2), c.tables) if corrected is True else None,
                                       corrected == "zero")
            if spec is None:
                assert cupy_mg._empty(region)
                continue
            launch(*spec[1:])
            c.check(dev_out, dev_u, dev_r, float(word.view(dtype)[0]) if tail in ("max", "both") else None)


SWEEP_CASES = [  # (sweeps, a right-hand side, tail, a prolongation first / u zero), the cases of every sweeps test
    (1, False, None, False), (2, False, "max", False), (2, True, "residual", False), (1, True, "max", True),
    (2, True, None, False), (2, False, "both", True), (2, True, "residual", True), (2, True, "residual", "zero"),
    (1, False, "max", "zero")]


class SweepsCase:
    """One case of a backend's `sweeps` verb (two sweeps in one pass) on host fields of `shape`: random inputs (the
    layer around the region the same in u and out, as constant ghost rules leave the two buffers; zero where u is
    taken as zeros), a coarse correction e with random prolongation tables, and what the separate verbs of
    mg_ops make of them (prolong, the sweeps, residual): check() compares a backend's results bit for bit."""

    def __init__(self, rng, dtype, shape, region, n, g_on, tail, corrected):
        t = np.dtype(dtype).type
        self.region, self.tail, self.what = region, tail, (region, n, g_on, tail, corrected)
        self.u, self.g, self.r, self.out = (values(shape, dtype, rng) for _ in range(4))
        r0, r1, c0, c1 = region
        coarse = (shape[0] // 2 + 2, shape[1] // 2 + 2)
        self.e = values(coarse, dtype, rng)
        self.tables = (rng.integers(0, coarse[0] - 1, max(r1 - r0, 0)), values((max(r1 - r0, 0), 2), dtype, rng),
                       rng.integers(0, coarse[1] - 1, max(c1 - c0, 0)), values((max(c1 - c0, 0), 2), dtype, rng))
        ring = np.zeros(shape, bool)
        ring[r0 - 1:r1 + 1, c0 - 1:c1 + 1] = True
        ring[r0:r1, c0:c1] = False
        if corrected == "zero":  # a coarse level's first pass: u taken as zeros (a cleared field), not read
            self.u[ring] = 0.0
        self.out[ring] = self.u[ring]
        self.sweeps = [(weights(dtype, rng), t(rng.uniform(0.5, 1.2))) for _ in range(n)]
        self.w = weights(dtype, rng)
        gg = self.g if g_on else None
        a, b = (np.zeros_like(self.u) if corrected == "zero" else self.u.copy()), self.out.copy()
        if corrected is True and not cupy_mg._empty(region):
            mg_ops.prolong(a, self.e, region, *self.tables)
        for sw, om in self.sweeps:
            mg_ops.smooth(b, a, gg, sw, om, region)
            a, b = b, a
        self.want_r = self.r.copy()
        if tail:
            mg_ops.residual(self.want_r, a, gg, self.w, region)
        self.expect = self.out.copy()
        self.expect[r0:r1, c0:c1] = a[r0:r1, c0:c1]  # (the last sweep's field; out's own values elsewhere)

    def check(self, out, u, r, top=None) -> None:
        """out, u and r as the backend left them (host arrays); top: the max it folded (None: not asked for)."""
        assert_same_bits(out, self.expect, f"out {self.what}")
        assert_same_bits(u, self.u, f"u untouched {self.what}")
        kept = self.tail in ("residual", "both", "keep")
        assert_same_bits(r, self.want_r if kept else self.r, f"r {self.what}")
        if top is not None:
            assert top == mg_ops.max_abs(self.want_r, self.region), self.what


class TapingBackend(EmulatedBackend):
    """EmulatedBackend that captures (solver/multigrid/graphs.py takes it as a GPU): mg_capture's launches, the
    stop test's word and copy, and the external events go onto a tape instead of running; a replay runs the tape.
    A fake event's time is the count of kernels run when it is recorded, so each level's compute counts the kernels
    its intervals ran."""

    main = contextlib.nullcontext()  # (the stream: adopt() enters it)
    ran = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tape, self.readied, self.bufs, self.pending = None, 0, None, []

    def mg_captures(self, shape) -> bool:
        return True

    def mg_ready(self, fills, shape, sweeps) -> None:
        self.readied += 1

    def join(self) -> None:
        pass

    def _do(self, fn) -> None:
        (self.tape.append if self.tape is not None else lambda f: f())(fn)

    def _mg_kernel(self, entry):
        kernel = self.emulator.kernel(entry)

        def launch(grid, block, args, stream=None):
            def run():
                kernel(grid, block, args)
                self.ran += 1
            self._do(run)
        return launch

    def launch(self, out, u, w, region, stream) -> None:
        def run():
            NumpyBackend.step(self, out, u, w, region)
            self.ran += 1
        self._do(run)

    def _mg_clear_word(self, word, stream) -> None:
        self._do(lambda: word.fill(0))

    def _mg_copy_word(self, host, word, stream) -> None:
        self._do(lambda: np.copyto(host, word))

    def _mg_begin(self, stream) -> None:
        assert self.tape is None, "a capture inside a capture"
        self.tape = []

    def _mg_end(self, stream):
        tape, self.tape = self.tape, None
        return tape

    def _mg_graph_launch(self, tape, stream) -> None:
        for fn in tape:
            fn()

    def _mg_event(self):
        return [None]

    def _mg_driver_fn(self):
        def record(event, stream):
            self._do(lambda: event.__setitem__(0, self.ran))
        return record

    def _record(self, stream):
        return [self.ran]

    def _track(self, charge, section, e0, e1, timer, track) -> None:
        charge(section, self._mg_elapsed(e0, e1))

    def _mg_elapsed(self, e0, e1) -> float:
        return float(e1[0] - e0[0])


DIRICHLET = RUN_SIDES["dirichlet"]
SHAPES = {"material": "steel", "thickness": 0.002, "faces": {"h": 40.0, "ambient": 0.5},  # shapes (issue 43): held
          # points m = 0, cw = 0, s = T; the rims' terms folded into m, cw and s (solver.core.operator)
          "regions": [{"kind": "disk", "center": [0.55, 0.5], "radius": 0.17, "held": 3.0, "name": "pipe"},
                      {"kind": "disk", "center": [0.22, 0.7], "radius": 0.12,
                       "hole": {"kind": "convective", "h": 400.0, "ambient": -1.0}, "name": "cooled"},
                      {"kind": "polygon", "points": [[0.7, -0.1], [1.1, -0.1], [1.1, 0.3]], "hole": "insulated"},
                      {"kind": "rectangle", "lower": [0.35, 0.85], "upper": [0.6, 1.2],
                       "hole": {"kind": "neumann", "flux": 3000.0}},
                      {"kind": "rectangle", "lower": [0.8, 0.6], "upper": [0.95, 0.8], "material": "copper"}]}
OUTLINE = {"material": "aluminium", "thickness": 0.003,
           "regions": [{"kind": "disk", "center": [0.5, 0.52], "radius": 0.13, "held": 2.0}],
           "outline": {"kind": "polygon", "points": [[-0.05, 0.15], [0.7, 0.03], [0.97, 0.35], [0.97, 0.7],
                                                     [0.75, 0.97], [-0.05, 0.85]],
                       "rim": {"kind": "convective", "h": 300.0, "ambient": -1.0}}}
TAIL_POINTS = 500  # the emulated runs' coarse tail: levels of at most this many points (a few levels above it tiled)
GRAPH_RUNS = {  # name -> (dtype, case sections): every cycle kind, every boundary kind, implicit steps, physics
    "V-example": ("float64", {"multigrid": {"cycle": "V"}, "boundary": RUN_SIDES["example"]}),
    "V-dirichlet": ("float32", {"multigrid": {"cycle": "V"}, "boundary": DIRICHLET}),
    "V-dirichlet-default": ("float64", {"multigrid": {"cycle": "V"}, "boundary": DIRICHLET}),
    "W-dirichlet-1-3": ("float64", {"multigrid": {"cycle": "W", "pre": 1, "post": 3}, "boundary": DIRICHLET,
                                    "grid": {"nx": 51, "ny": 35}}),  # (a W-cycle revisits levels whose start was zero)
    "F-dirichlet-1-2": ("float32", {"multigrid": {"cycle": "F", "pre": 1, "post": 2}, "boundary": DIRICHLET,
                                    "grid": {"nx": 67, "ny": 45}}),  # (odd sweeps: the tail's fields alternate)
    "backward-euler-dirichlet": ("float64", {"physics": {"equation": "heat", "scheme": "backward-euler", "dt": 5e-3},
                                             "boundary": DIRICHLET, "run": {"steps": 3, "tolerance": 1e-9}}),
    "W-periodic": ("float32", {"multigrid": {"cycle": "W"}, "boundary": RUN_SIDES["periodic-x"]}),
    "F-neumann-periodic": ("float64", {"multigrid": {"cycle": "F", "pre": 1, "post": 2},
                                       "boundary": RUN_SIDES["neumann-periodic"]}),
    "backward-euler": ("float64", {"physics": {"equation": "heat", "scheme": "backward-euler", "dt": 2e-3},
                                   "boundary": RUN_SIDES["example"], "run": {"steps": 4, "tolerance": 1e-9}}),
    "crank-nicolson-source": ("float32", {
        "physics": {"equation": "heat", "scheme": "crank-nicolson", "dt": 2e-3,
                    "source": [{"kind": "gaussian", "center": [0.4, 0.6], "width": 0.15, "amplitude": 3.0}]},
        "boundary": {"left": {"kind": "convective", "h": 4.0, "ambient": {"along": [[0, 0.0], [1, 1.0]]}},
                     "right": 0.5, "bottom": {"kind": "neumann", "flux": 0.5}, "top": 1.0},
        "run": {"steps": 4, "tolerance": 1e-5}}),
    "cg-faces-source": ("float64", {
        "physics": {"equation": "laplace", "solver": "multigrid",
                    "source": [{"kind": "gaussian", "center": [0.4, 0.6], "width": 0.15, "amplitude": 3.0}],
                    "alpha": {"background": 1.0, "regions": [{"kind": "rectangle", "lower": [0.5, 0.2],
                                                              "upper": [0.9, 0.7], "value": 0.05}]}},
        "boundary": {"left": {"kind": "convective", "h": 4.0, "ambient": 0.25}, "right": 1.0, "bottom": 0.5,
                     "top": {"kind": "neumann", "flux": 0.5}}}),
    "faces-plain-cycles": ("float32", {
        "physics": {"equation": "laplace", "solver": "multigrid",
                    "alpha": {"background": 1.0, "regions": [{"kind": "rectangle", "lower": [0.5, 0.2],
                                                              "upper": [0.9, 0.7], "value": 0.5}]}},
        "multigrid": {"krylov": "none"}, "boundary": RUN_SIDES["example"]}),
    # shapes (issue 43): held points (faces closed, sg the held diagonal) out of the transfers, rims on the diagonal
    "shapes-faces-cg": ("float64", {"physics": {"equation": "laplace", "solver": "multigrid", **SHAPES},
                                    "boundary": RUN_SIDES["example"]}),
    "shapes-faces-plain-cycles": ("float64", {"physics": {"equation": "laplace", "solver": "multigrid", **SHAPES,
                                                          "faces": None}, "multigrid": {"krylov": "none"},
                                              "boundary": DIRICHLET}),  # (diverged before coefficients._isolated)
    "outline-faces-crank-nicolson": ("float64", {
        "physics": {"equation": "heat", "scheme": "crank-nicolson", "dt": 10.0, **OUTLINE},
        "boundary": RUN_SIDES["example"], "run": {"steps": 3, "tolerance": 1e-9}}),
}


def graph_run(tmp_path, name, spec, cls=None, monkeypatch=None, residual=False):
    dtype, sections = spec
    data = {**MG_CASE, "name": name, "initial": {"kind": "random"}, "run": {"steps": 8}, "numerics": {"dtype": dtype},
            "backend": {"name": "numpy"}, "output": {"dir": str(tmp_path / name), "vtk": False, "residual": residual}}
    for key, value in sections.items():  # (run and multigrid add to the defaults; the others replace them)
        data[key] = {**data.get(key, {}), **value} if key in ("run", "multigrid") else value
    data["multigrid"] = {"coarsest": 16, **data.get("multigrid", {})}
    if cls is not None:
        monkeypatch.setattr(solver.run, "backend_class", lambda name, threads=None: cls)
    run = solver.run.Run(validate_case(data), options=Options(ceiling=False))
    rec = run.execute()
    with h5py.File(tmp_path / name / "fields.h5") as f:
        return f["u"][-1], rec, run


@pytest.mark.parametrize("name", list(GRAPH_RUNS))
def test_graphed_cycles_equal_numpy_bitwise(emu, tmp_path, monkeypatch, name):
    """Whole runs whose cycles are captured once and replayed (solver/multigrid/graphs.py through the backend's
    capture verbs, the tape standing for a CUDA graph): the last snapshot, every residual and every implicit
    step's cycles bitwise numpy's; cycles replayed, few captures, the levels' compute the whole of it."""
    spec = GRAPH_RUNS[name]
    want, want_rec, _ = graph_run(tmp_path, "numpy", spec)
    cls = type("Taping", (TapingBackend,), {"emulator": emu[spec[0]]})
    emu[spec[0]].calls.clear()
    one_by_one = name == "V-dirichlet"
    if one_by_one:  # (every sweep, residual, prolongation and stop test a pass of its own)
        monkeypatch.setenv("STENCIL_MG_TILES", "0")
    monkeypatch.setenv("STENCIL_MG_TAIL", "0" if one_by_one else str(TAIL_POINTS))
    monkeypatch.setattr(cupy_mg, "TAIL_THREADS", 32)  # (a thread for many points of the tail's levels)
    got, rec, run = graph_run(tmp_path, "emu", spec, cls, monkeypatch)
    assert_same_bits(got, want, "the last snapshot")
    assert rec["run"].get("residuals") == want_rec["run"].get("residuals")
    history = lambda r: [h.get("cycles") for h in r["solver"]["history"]]  # noqa: E731
    assert history(rec) == history(want_rec)
    graphs = run.mg.graphs
    assert graphs is not None and run.backend.readied >= 1
    replays = sum(c.replays for c, _ in graphs.graphs.values())
    assert len(graphs.graphs) <= 4 < replays, (len(graphs.graphs), replays)
    levels, tail = run.timer.levels, run.mg.tail
    charged = len(run.mg.grids) if tail is None else tail + 1  # (the tail's time goes to its first level)
    assert len(levels) == charged and all(t["compute"] > 0 for t in levels.values()), levels
    if run.mg.cg is None:  # (conjugate gradients' dot products are charged outside any level)
        assert sum(t["compute"] for t in levels.values()) == pytest.approx(run.timer.seconds["compute"])
    calls = set(emu[spec[0]].calls)
    if "faces" in name and run.mg.cg is None:
        assert {"mg_vresidual_max", "mg_vsmooth", "mg_restrict_op"} <= calls
    if "faces" not in name and "dirichlet" not in name:
        assert "mg_residual_max" in calls, calls
    tiled = "dirichlet" in name and not one_by_one  # sweeps two at a time in one pass: constant ghost rules
    assert ("mg_sweeps" in calls) == tiled, calls
    assert ("mg_tail" in calls) == tiled and (tail is not None) == tiled, (calls, tail)  # (the coarse levels: one block)
    if tiled:  # every sweep above the tail tiled, the prolongation in the first post-sweep's pass (the stop test after a
        # cycle in its last pass; the first one, before any cycle, not); below, the tail's launch only
        assert not calls & {"mg_smooth", "mg_prolong", "mg_solve", "mg_clear"}, calls
        assert 1 <= tail < len(run.mg.grids) - 1 and run.mg.grids[tail].place.level.x.n * run.mg.grids[tail].place.level.y.n <= TAIL_POINTS
        levels, tp = rec["solver"]["levels"], rec["throughput"]  # the record counts the passes made
        assert levels[0]["stop_test"] == "in the last sweep's pass"
        assert tp["tiled_levels"] == sum(lev["passes"] == "two sweeps a pass" for lev in levels) == tail
        assert all(lev["passes"].startswith(f"one launch for levels {tail}-") for lev in levels[tail:])
        w_cycle = rec["solver"].get("cycle", "V") == "W" or name.startswith("W")  # (visits the untiled tail more:
        # the passes made save less of a W cycle's counted bytes, 0.645 measured, than of a V cycle's)
        assert tp["bytes_made_per_cycle"] < (0.7 if w_cycle else 0.6) * tp["bytes_per_cycle"], tp
        assert "passes made" in (tmp_path / "emu" / "record.md").read_text()


@pytest.mark.parametrize("dtype,cycle", [("float64", "W"), ("float32", "F")])
def test_the_coarse_tail_launched_without_graphs_equals_numpy_bitwise(emu, tmp_path, monkeypatch, dtype, cycle):
    """The coarse levels' verbs recorded at first use and run by mg_tail in one block, where cycles are launched
    verb by verb (no capture: EmulatedBackend): W-cycles visit the tail twice after a restriction (from zero, then
    from the first visit's correction), F-cycles with F and V; odd sweeps leave its fields elsewhere each time."""
    spec = (dtype, {"multigrid": {"cycle": cycle, "pre": 1, "post": 2}, "boundary": DIRICHLET})
    want, want_rec, _ = graph_run(tmp_path, "numpy", spec)
    monkeypatch.setenv("STENCIL_MG_TAIL", str(TAIL_POINTS))
    monkeypatch.setattr(cupy_mg, "TAIL_THREADS", 32)
    cls = type("Emulated", (EmulatedBackend,), {"emulator": emu[dtype]})
    emu[dtype].calls.clear()
    got, rec, run = graph_run(tmp_path, "emu", spec, cls, monkeypatch)
    assert_same_bits(got, want, "the last snapshot")
    assert rec["run"]["residuals"] == want_rec["run"]["residuals"]
    assert run.mg.graphs is None and 1 <= run.mg.tail < len(run.mg.grids) - 1
    starts = {(kind, clear) for kind, clear, _ in run.mg._tails}
    assert starts == ({("W", True), ("W", False)} if cycle == "W" else {("F", True), ("V", False), ("V", True)}) \
        or (cycle == "F" and run.mg.tail == 1 and starts == {("F", True), ("V", False)}), starts
    assert len({fields for _, _, fields in run.mg._tails}) >= 2  # (odd sweeps: the fields alternate between places)
    assert emu[dtype].calls["mg_tail"] > 8 and "mg_solve" not in emu[dtype].calls


def test_graphs_keep_the_residual_field_where_it_is_written(emu, tmp_path, monkeypatch):
    """output.residual: the graph's stop test stores the residual (the record's residual field), else it only
    folds its max; and STENCIL_MG_GRAPHS=0 keeps the verb-by-verb path."""
    spec = GRAPH_RUNS["V-example"]
    _, _, numpy_run = graph_run(tmp_path, "numpy", spec, residual=True)
    cls = type("Taping", (TapingBackend,), {"emulator": emu[spec[0]]})
    _, _, kept = graph_run(tmp_path, "kept", spec, cls, monkeypatch, residual=True)
    assert kept.mg.graphs.keep_r and not numpy_run.mg.graphs
    assert_same_bits(kept.residual_field(kept.state), numpy_run.residual_field(numpy_run.state), "residual field")
    monkeypatch.setenv("STENCIL_MG_GRAPHS", "0")
    _, _, plain = graph_run(tmp_path, "plain", spec, cls, monkeypatch)
    assert plain.mg.graphs is None and plain.backend.readied == 0


@pytest.mark.parametrize("sides, t_end, grid", [("dirichlet", 0.0005, {"nx": 51, "ny": 35}),
                                                ("example", 0.02, MG_CASE["grid"])])
def test_adaptive_steps_with_graphs_equal_numpy_bitwise(emu, tmp_path, monkeypatch, sides, t_end, grid):
    """Adaptive TR-BDF2 steps (issue 44) on the emulated GPU with whole cycles as graphs: every new dt retimes the
    multigrid (its weights, inverse, tail programs and graphs made again), the estimate's filter cycle starts from
    its own fields; the last snapshot and every step tried (dt, estimate, cycles) bitwise numpy's. (Constant ghost
    rules: sweeps in tiles and the coarse tail, whose programs are recorded again at every dt; the emulator takes
    a few seconds a step at 101 x 67, hence short runs, and for them 51 x 35: two tiled levels above a tail of
    three, as the larger grid's three above four, in a fifth of the time.)"""
    spec = ("float64", {"physics": {"equation": "heat", "scheme": "backward-euler", "dt": 1e-5, "source": [
        {"kind": "gaussian", "center": [0.4, 0.6], "width": 0.15, "amplitude": 3.0, "active": [t_end / 5, t_end / 2]}]},
        "boundary": RUN_SIDES[sides], "run": {"steps": None, "t_end": t_end, "time_tolerance": 3e-2, "tolerance": 1e-9},
        "grid": grid})
    want, want_rec, _ = graph_run(tmp_path, "numpy", spec)
    cls = type("Taping", (TapingBackend,), {"emulator": emu["float64"]})
    emu["float64"].calls.clear()
    monkeypatch.setenv("STENCIL_MG_TAIL", str(TAIL_POINTS))
    monkeypatch.setattr(cupy_mg, "TAIL_THREADS", 32)
    got, rec, run = graph_run(tmp_path, "emu", spec, cls, monkeypatch)
    assert_same_bits(got, want, "the last snapshot")
    assert rec["run"]["adaptive"]["steps"] == want_rec["run"]["adaptive"]["steps"]
    assert run.mg.graphs is not None and rec["run"]["adaptive"]["accepted"] >= 2
    if sides == "dirichlet":  # (tiled levels and the tail, both retimed: the small grid keeps both)
        assert 2 <= run.mg.tail < len(run.mg.grids) - 1 and {"mg_sweeps", "mg_tail"} <= set(emu["float64"].calls)
