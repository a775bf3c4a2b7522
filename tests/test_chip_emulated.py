"""The on-chip kernel `chip` (solver/backends/kernels/chip.cu) compiled for the CPU with g++ and the CUDA
shim (tests/cuda_emu: one thread per lane, every block's threads at once, __syncthreads and the flags
between blocks as real barriers and atomics), so that its tiles, the exchange of edges between warps
and blocks, the ghost ring, the guards and the rounding are checked on every machine: n steps in one
launch are bitwise equal to n numpy steps on odd, non-square grids with random (non-zero) ghost
layers, both dtypes, with tiles split across several blocks in both directions, shared-memory rows or
none, and the fused residual of the last step. Also the launch layout (cupy_kernels.chip_layout)
without any kernel. The GPU itself is tested by tests/test_gpu_chip.py; this says nothing about speed
or about the GPU's memory ordering."""

import ctypes
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wave_emulated import field, library, numpy_steps, pitched

from solver.backends import cupy_kernels as gk
from solver.backends.numpy_backend import NumpyBackend
from solver.case import BackendSettings
from solver.core.physics import Weights

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ here")


def chip_lib(tmp_dir, dtype, nt, rr, rt, v, levels=1, resid=True, allfast=False, wait=True):
    """The kernel compiled as the backend compiles it for a layout: its threads, tile rows, columns a
    thread and levels a pass compiled in (at levels 2 also the residual's pass or not, and only the
    code without the mask where every tile is interior)."""
    defines = [o for o in gk.options("chip", dtype, (nt, rr), rt=rt, v=v, levels=levels, resid=resid,
                                     allfast=allfast) if o.startswith("-D")]
    return library(("chip", dtype, nt, rr, rt, v, levels, resid, allfast), tmp_dir, gk.source("chip"), defines,
                   "driver_chip.cpp", wait)


def chip_build(dtype, block, sms, shape, levels):
    """The layout of a case and the arguments of chip_lib that it compiles in (but resid)."""
    layout = gk.chip_layout(dtype, shape, sms, block, 1 << 30, levels)
    assert layout is not None, "the case fits"
    _, _, threads, rt, _ = layout
    v = gk.chip_columns(block[0])
    allfast = levels == 2 and gk.chip_all_interior(layout, shape, v)
    return layout, (dtype, threads, block[1], rt, v, levels), allfast


def run_chip(tmp_dir, dtype, block, sms, host, steps, resid=True, levels=1, inner=None, w=None):
    """One launch of `steps` steps over the whole interior (levels a pass: 1, v6, or 2, v7); returns
    (out, residual, layout); with inner=(first, every, count) also heat's checks in the launch: (out,
    residual, layout, their values)."""
    ny, nx = host.shape[0] - 2, host.shape[1] - 2
    layout, args, allfast = chip_build(dtype, block, sms, (ny, nx), levels)
    gx, gy, threads, rt, smem = layout
    v = args[4]
    lib = chip_lib(tmp_dir, *args, resid, allfast)
    u = pitched(host)
    out = pitched(np.full_like(host, np.nan))
    rows, cols, nflags = gk.chip_buffer_sizes(layout, v)
    hrow, hcol = np.full(rows, np.nan, dtype), np.full(cols, np.nan, dtype)
    flags = np.zeros(nflags, np.uint32)
    w = w or Weights(0.1, 0.2, 0.25).cast(dtype)
    real = ctypes.c_float if dtype == "float32" else ctypes.c_double
    rbits = (ctypes.c_uint32 if dtype == "float32" else ctypes.c_uint64)(0)
    words = np.dtype(np.uint32 if dtype == "float32" else np.uint64)
    first, every, count = inner or (0, 0, 0)
    checks = np.zeros(max(count, 1), words)
    ptr = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    lib.launch(ptr(out), ptr(u), ctypes.c_longlong(u.strides[0] // u.itemsize), ctypes.c_int(ny), ctypes.c_int(nx),
               ctypes.c_int(rt), ctypes.c_int(steps), ptr(hrow), ptr(hcol), ptr(flags),
               ctypes.byref(rbits) if resid else None, ptr(checks) if inner else None, ctypes.c_int(first),
               ctypes.c_int(every), real(w.wc), real(w.wx), real(w.wy), ctypes.c_uint(gx),
               ctypes.c_uint(gy), ctypes.c_uint(threads), ctypes.c_ulonglong(smem))
    value = np.array([rbits.value], dtype=words).view(dtype)[0]
    if inner:
        return np.array(out), value, layout, checks[:count].view(dtype)
    blocks, nw = gx * gy, threads // 32
    if levels == 2:
        assert (flags[:blocks] == steps // 2 + steps % 2 + 1).all(), "every block ended every pass"
        assert (flags[blocks:] == 0).all()
        return np.array(out), value, layout
    assert (flags[:blocks * nw] == steps + 1).all(), "every warp published every level"
    sides = flags[blocks * nw:].reshape(gy, gx, 2)
    assert (sides[:, 1:, 0] == steps + 1).all() and (sides[:, :-1, 1] == steps + 1).all(), "every column published"
    assert (sides[:, 0, 0] == 0).all() and (sides[:, -1, 1] == 0).all(), "no column flag at a physical side"
    return np.array(out), value, layout


CASES = [  # dtype, (threads at most, rows in registers), multiprocessors, (ny, nx), steps
    # blocks of at most 256 threads: 8 columns a thread (gk.chip_columns)
    ("float64", (64, 2), 6, (37, 300), 6),    # 2 x 3 blocks of 2 warps, 11 shared-memory rows each
    ("float32", (64, 4), 8, (40, 130), 5),    # 8 blocks down, 2 warps each (the last partly past nx)
    ("float64", (64, 2), 6, (5, 3), 3),       # tiles of exactly the register rows: no shared-memory row
    ("float32", (32, 2), 4, (1, 1), 4),       # a tile taller than the grid
    ("float64", (64, 1), 9, (21, 520), 7),    # 3 x 3 blocks: every block has neighbours on some side
    ("float32", (32, 3), 5, (64, 33), 1),     # one step
    ("float64", (32, 1), 8, (8, 128), 5),     # tiles of one row (top row = bottom row), every block without mask
    ("float32", (32, 1), 6, (12, 128), 4),    # tiles of two rows: no interior row
    ("float64", (32, 1), 5, (15, 128), 6),    # three rows: one interior row, the edge rows first
    ("float64", (64, 2), 4, (40, 256), 9),    # ten rows: interior rows before and after the edge rows, no mask
    ("float32", (32, 4), 3, (60, 200), 3),    # two blocks side by side, one row of blocks, 60 rows a tile
    # more threads: 4 columns a thread
    ("float64", (288, 2), 3, (20, 1000), 4),  # 3 blocks down of 256 threads (fitted), the last columns past nx
    ("float32", (320, 4), 4, (30, 1280), 3),  # 4 blocks down of 10 warps, the last partly past ny
]


@needs_gxx
@pytest.mark.parametrize("dtype,block,sms,shape,steps", CASES, ids=str)
def test_chip_equals_n_numpy_steps(tmp_path, dtype, block, sms, shape, steps):
    ny, nx = shape
    host = field(shape, dtype, steps)
    got, res, layout = run_chip(tmp_path, dtype, block, sms, host, steps)
    want, prev = numpy_steps(host, steps, (1, ny + 1, 1, nx + 1), dtype)
    inside = np.zeros(host.shape, bool)
    inside[1:-1, 1:-1] = True
    np.testing.assert_array_equal(got[inside], want[inside], err_msg=f"layout {layout}")
    assert np.isnan(got[~inside]).all(), "stored outside the interior"
    assert res == np.max(np.abs(want - prev)[inside])  # the fused residual of the last step


CASES2 = [  # v7 (two levels a pass): one block across, tiles of 2 rows or more; dtype, block, sms, shape, steps
    ("float64", (64, 2), 6, (37, 128), 6),    # 6 blocks down of one warp (8 columns a thread), the last past ny
    ("float64", (64, 2), 4, (24, 512), 6),    # 4 blocks down of 2 warps, all interior (no mask)
    ("float64", (96, 3), 5, (30, 768), 5),    # 5 x 3 warps, no mask, an odd count: a last single-level pass
    ("float32", (64, 4), 8, (40, 300), 5),    # 2 warps, the second's columns partly past nx (masked code)
    ("float64", (96, 1), 9, (18, 700), 4),    # 9 tiles of two rows (top rows = bottom rows), 3 warps, odd nx
    ("float32", (64, 1), 6, (18, 250), 9),    # tiles of three rows
    ("float64", (64, 2), 6, (5, 3), 3),       # a tile of five rows holding the whole grid, past nx
    ("float32", (32, 2), 4, (2, 1), 4),       # one tile of two rows, one column
    ("float64", (64, 2), 3, (40, 256), 10),   # 3 tiles of 14 rows (12 in shared memory), the last past ny
    ("float32", (32, 4), 3, (60, 200), 1),    # one step only: the single-level pass alone
    ("float64", (288, 2), 3, (20, 1000), 2),  # 3 blocks of 8 warps (4 columns a thread), the last columns past nx
    ("float32", (320, 4), 4, (30, 1280), 8),  # 10 warps, 4 columns a thread, all columns interior
    ("float64", (64, 2), 6, (60, 256), 15),   # 6 tiles of 10 rows, 7 passes (each L2 copy of the rows used often) + 1
    ("float32", (128, 2), 4, (44, 1024), 8),  # 4 tiles of 11 rows, 4 warps, 4 passes
]


@needs_gxx
@pytest.mark.parametrize("dtype,block,sms,shape,steps", CASES2, ids=str)
@pytest.mark.parametrize("resid", [True, False])
def test_chip_two_levels_a_pass_equals_n_numpy_steps(tmp_path, dtype, block, sms, shape, steps, resid):
    ny, nx = shape
    host = field(shape, dtype, steps)
    got, res, layout = run_chip(tmp_path, dtype, block, sms, host, steps, resid, levels=2)
    want, prev = numpy_steps(host, steps, (1, ny + 1, 1, nx + 1), dtype)
    inside = np.zeros(host.shape, bool)
    inside[1:-1, 1:-1] = True
    np.testing.assert_array_equal(got[inside], want[inside], err_msg=f"layout {layout}")
    assert np.isnan(got[~inside]).all(), "stored outside the interior"
    if resid:
        assert res == np.max(np.abs(want - prev)[inside])


INNER = [  # heat's checks in one launch: dtype, block, sms, shape, steps, (first, every, count), levels a pass
    ("float64", (64, 2), 4, (24, 512), 12, (2, 4, 3), 2),   # levels 2, 6, 10 of 12 (no mask)
    ("float32", (64, 4), 8, (40, 300), 11, (4, 2, 4), 2),   # 4, 6, 8, 10 of an odd count (masked code)
    ("float64", (96, 1), 9, (18, 700), 8, (2, 2, 4), 2),    # every pass, the last level too
    ("float32", (64, 4), 8, (40, 300), 9, (9, 2, 1), 2),    # the last level alone, an odd count (masked)
    ("float64", (64, 1), 9, (21, 520), 7, (7, 2, 1), 1),    # v6 (3 x 3 blocks): the last level
    ("float32", (64, 2), 6, (37, 300), 14, (14, 2, 1), 1),  # v6, 2 x 3 blocks
]


@pytest.fixture(scope="module", autouse=True)
def _compiled_in_the_background(tmp_path_factory):
    """Every case's library submitted to the background compilations before the first test (g++ takes most of
    this file's time; test_wave_emulated.library runs them on every core)."""
    if shutil.which("g++") is None:
        return
    tmp = tmp_path_factory.mktemp("chip_libs")
    builds = [(c[:4], 1, True) for c in CASES] + [(c[:4], 2, r) for c in CASES2 for r in (True, False)]
    builds += [(c[:4], c[6], r) for c in INNER for r in (True, False)]
    builds += [(("float64", (64, 2), 4, (12, 70)), levels, True) for levels in (1, 2)]
    for (dtype, block, sms, shape), levels, resid in builds:
        _, args, allfast = chip_build(dtype, block, sms, shape, levels)
        chip_lib(tmp, *args, resid, allfast, wait=False)


def numpy_levels(host, n, dtype, w):
    """The interior of levels 0 .. n of numpy steps with weights w."""
    be = NumpyBackend(BackendSettings(name="numpy"), dtype)
    region = (1, host.shape[0] - 1, 1, host.shape[1] - 1)
    a, b, out = host.copy(), host.copy(), [host[1:-1, 1:-1].copy()]
    with np.errstate(all="ignore"):
        for _ in range(n):
            be.step(b, a, w, region)
            a, b = b, a
            out.append(a[1:-1, 1:-1].copy())
    return out


@needs_gxx
@pytest.mark.parametrize("dtype,block,sms,shape,steps,inner,levels", INNER, ids=str)
@pytest.mark.parametrize("resid", [True, False])
def test_heat_checks_inside_a_launch_flag_the_levels_with_a_nan_or_inf(tmp_path, dtype, block, sms, shape, steps,
                                                                         inner, levels, resid):
    """checks[j] = inf where level first + j * every has a NaN or Inf in the interior, else 0 (core.loop's
    heat checks inside a batch): weights that amplify (5x a step at most) from a field near the largest
    finite value overflow part-way through the launch, so early checks are finite and later ones not,
    exactly where numpy's levels are; the field bitwise, the last level's residual unchanged. In both
    modules (with and without the residual's pass)."""
    w = Weights(1.0, 1.0, 1.0).cast(dtype)
    host = field(shape, dtype, steps) * np.asarray(np.finfo(dtype).max / 5 ** 5, dtype)
    got, res, layout, values = run_chip(tmp_path, dtype, block, sms, host, steps, resid, levels, inner=inner, w=w)
    levels = numpy_levels(host, steps, dtype, w)
    first, every, count = inner
    want = [np.inf if not np.isfinite(levels[first + j * every]).all() else 0.0 for j in range(count)]
    assert list(values) == want, layout
    if count > 1:
        assert want[0] == 0.0 and want[-1] == np.inf, "the case overflows part-way"
    finite = np.isfinite(levels[-1])
    np.testing.assert_array_equal(got[1:-1, 1:-1][finite], levels[-1][finite], err_msg=f"layout {layout}")


def test_all_interior_layouts():
    h200 = dict(sms=132, smem_limit=232448)
    layout = gk.chip_layout("float64", (2048, 2048), block=(512, 4), levels=2, **h200)
    assert layout == (1, 128, 512, 16, 221440) and gk.chip_all_interior(layout, (2048, 2048), 4)
    assert not gk.chip_all_interior(gk.chip_layout("float64", (2001, 2048), block=(512, 4), **h200), (2001, 2048), 4)
    assert "-DCHIP_ALLFAST=1" in gk.options("chip", "float64", (512, 4), levels=2, allfast=True)
    assert not any("CHIP" in o for o in gk.options("chip", "float64", (512, 4)))  # v6: as before


def test_two_levels_by_default_in_both_dtypes(monkeypatch):
    monkeypatch.delenv("STENCIL_CHIP_LEVELS", raising=False)
    assert gk.chip_levels_wanted("float64") == 2 and gk.chip_levels_wanted("float32") == 2
    monkeypatch.setenv("STENCIL_CHIP_LEVELS", "1")
    assert gk.chip_levels_wanted("float64") == 1 and gk.chip_levels_wanted("float32") == 1
    monkeypatch.setenv("STENCIL_CHIP_LEVELS", "2")
    assert gk.chip_levels_wanted("float32") == 2


def test_two_levels_need_one_block_across_and_two_rows():
    assert gk.chip_layout("float64", (21, 520), 9, (64, 1), 1 << 30, levels=2) is None  # 2 blocks across
    assert gk.chip_layout("float64", (8, 128), 8, (32, 1), 1 << 30, levels=2) is None  # tiles of one row
    assert gk.chip_layout("float64", (8, 128), 8, (32, 1), 1 << 30, levels=1) is not None


@needs_gxx
@pytest.mark.parametrize("levels", [1, 2])
def test_chip_residual_flags_nan(tmp_path, levels):
    host = field((12, 70), "float64", 3)
    host[5, 30] = np.nan
    _, res, _ = run_chip(tmp_path, "float64", (64, 2), 4, host, 2, levels=levels)
    assert res == np.inf


@settings(max_examples=300, deadline=None)
@given(dtype=st.sampled_from(["float32", "float64"]), nt=st.sampled_from([32, 64, 256, 512]),
       rr=st.integers(1, 8), sms=st.integers(1, 140), ny=st.integers(1, 5000), nx=st.integers(1, 5000))
def test_chip_layout_covers_the_interior_within_the_limits(dtype, nt, rr, sms, ny, nx):
    limit = 227 * 1024
    layout = gk.chip_layout(dtype, (ny, nx), sms, (nt, rr), limit)
    if layout is None:
        return
    gx, gy, threads, rt, smem = layout
    assert gx * gy <= sms and threads % 32 == 0 and threads <= nt and rt >= rr and smem <= limit
    v = gk.chip_columns(nt)
    assert gx * threads * v >= nx and (gx - 1) * threads * v < nx  # every column, no idle block
    assert gy * rt >= ny and (gy - 1) * rt < ny  # every row, no block past the grid
    assert smem == gk.chip_smem_bytes(dtype, rt, rr, threads, v)


def test_chip_layout_of_the_issue_sizes_on_an_h200():
    """2048^2 float64 (32 MiB) fits the 132 multiprocessors of an H200 (128 blocks of 16 rows, 201 KiB
    of shared memory each); 4096^2 float64 does not, nor does 4096^2 float32."""
    h200 = dict(sms=132, smem_limit=232448)
    block64 = gk.default_block("chip", "float64", (2048, 2048), 132)
    assert gk.chip_layout("float64", (2048, 2048), block=block64, **h200) == (1, 128, 512, 16, 205824)
    assert gk.chip_layout("float64", (4096, 4096), block=block64, **h200) is None
    assert gk.chip_layout("float32", (4096, 4096), block=gk.default_block("chip", "float32", (1, 1), 132), **h200) is None
    # 256 threads of 8 columns a thread: the same strips, 6 rows of 16 in registers
    assert gk.chip_layout("float64", (2048, 2048), block=(256, 6), **h200) == (1, 128, 256, 16, 168960)
