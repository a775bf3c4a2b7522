"""The time-tiled `wave` kernel (solver/backends/kernels/wave.cu) compiled for the CPU with g++ and a
small CUDA shim (tests/cuda_emu: one thread per lane, shuffles through a warp barrier), so that its
index arithmetic, apron, guards, region semantics and rounding are checked on every machine:
bitwise equal to k numpy steps on odd, non-square grids with random (non-zero) ghost layers, for
both dtypes, every variant (`wave2a`'s row prefetch ring included: the shim copies at once, so the
ring's slots and the rows it hands out are checked, not the copies' timing) and several block
shapes and depths. The GPU itself is tested by
tests/test_gpu_wave.py; this emulation says nothing about speed."""

import ctypes
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from solver.backends import cupy_kernels as gk
from solver.backends.numpy_backend import NumpyBackend
from solver.case import BackendSettings
from solver.core.physics import Weights

HERE = Path(__file__).parent / "cuda_emu"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ here")
_POOL = ThreadPoolExecutor(os.cpu_count() or 1)
_BUILDS: dict = {}  # key -> (the g++ run's Future, the library's path)
_LIBS: dict = {}


def _gxx(source: str, defines: list[str], driver: str, lib: Path) -> subprocess.CompletedProcess:
    src = lib.with_suffix(".cu")
    src.write_text(source)
    return subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-fPIC", "-shared", "-pthread",
                           f"-I{HERE}", f'-DKERNEL_SOURCE="{src}"', *defines, str(HERE / driver), "-o", str(lib)],
                          capture_output=True, text=True, timeout=300)


def library(key, tmp_dir: Path, source: str, defines: list[str], driver: str, wait: bool = True):
    """A kernel's source with its defines and the emulator's driver as a loaded shared library, compiled once per
    key. The compilations run in the background on every core (a module's fixture submits all its cases' keys
    with wait=False before its first test), so a test waits only for its own."""
    if key not in _BUILDS:
        lib = tmp_dir / f"lib{len(_BUILDS)}.so"
        _BUILDS[key] = (_POOL.submit(_gxx, source, defines, driver, lib), lib)
    if not wait:
        return None
    if key not in _LIBS:
        future, lib = _BUILDS[key]
        res = future.result()
        assert res.returncode == 0, res.stderr[-3000:]
        _LIBS[key] = ctypes.CDLL(str(lib))
    return _LIBS[key]


def kernel_lib(tmp_dir: Path, variant, dtype, block, k, wait=True):
    defines = [o for o in gk.options(variant, dtype, block, k=k) if o.startswith("-D")]
    # segment rows (block[1]) are a launch argument
    return library((variant, dtype, block[0], k), tmp_dir, gk.source(variant), defines, "driver.cpp", wait)


def pitched(host: np.ndarray) -> np.ndarray:
    """The CuPy backend's layout in host memory: column 1 aligned to 128 bytes, rows a multiple of 128
    bytes apart, spare columns after the last (vector loads stay inside the allocation)."""
    rows, cols = host.shape
    per = 128 // host.itemsize
    pitch = -(-(per - 1 + cols + 4) // per) * per
    raw = np.zeros(rows * pitch + 2 * per, dtype=host.dtype)
    shift = (-raw.ctypes.data % 128) // host.itemsize
    base = raw[shift:shift + rows * pitch].reshape(rows, pitch)
    view = base[:, per - 1:per - 1 + cols]
    view[...] = host
    assert view[:, 1:].ctypes.data % 128 == 0
    return view


def run_wave(tmp_dir, variant, dtype, block, k, host, update, store, resid=False):
    """One launch: k steps of `update` (C), stored over `store` (O); returns (out, residual or None)."""
    lib = kernel_lib(tmp_dir, variant, dtype, block, k)
    u = pitched(host)
    out = pitched(np.full_like(host, np.nan))
    w = Weights(0.1, 0.2, 0.25).cast(dtype)
    real = ctypes.c_float if dtype == "float32" else ctypes.c_double
    rbits = (ctypes.c_uint32 if dtype == "float32" else ctypes.c_uint64)(0)
    (gx, gy, _), (bx, _, _) = gk.launch_shape(variant, dtype, block, store, k)
    ptr = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
    lib.launch(ptr(out), ptr(u), ctypes.c_longlong(u.strides[0] // u.itemsize), *map(ctypes.c_int, update),
               *map(ctypes.c_int, store), ctypes.c_int(block[1]), ctypes.byref(rbits) if resid else None, real(w.wc), real(w.wx), real(w.wy),
               ctypes.c_uint(gx), ctypes.c_uint(gy), ctypes.c_uint(bx))
    value = np.array([rbits.value], dtype=np.uint32 if dtype == "float32" else np.uint64).view(dtype)[0]
    return np.array(out), (value if resid else None)


def numpy_steps(host, k, region, dtype):
    be = NumpyBackend(BackendSettings(name="numpy"), dtype)
    w = Weights(0.1, 0.2, 0.25).cast(dtype)
    a, b = host.copy(), host.copy()
    for _ in range(k):
        be.step(b, a, w, region)
        a, b = b, a
    return a, b


def field(shape, dtype, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (shape[0] + 2, shape[1] + 2)).astype(dtype)


CASES = [  # variant, dtype, block, k, (ny, nx)
    ("wave", "float32", (64, 16), 8, (70, 253)),
    ("wave2", "float32", (32, 9), 8, (40, 300)),
    ("wave2", "float64", (96, 11), 5, (33, 130)),
    ("wave", "float64", (32, 64), 16, (100, 41)),
    ("wave", "float32", (32, 3), 1, (9, 5)),
    ("wave2", "float64", (32, 1), 3, (1, 1)),
    ("wave", "float32", (32, 10), 4, (75, 400)),  # many strips and segments inside C: the unguarded path
    ("wave2", "float64", (64, 13), 7, (90, 260)),
    ("wave2a", "float64", (32, 9), 8, (40, 300)),
    ("wave2a", "float32", (64, 13), 5, (75, 400)),
    ("wave2a", "float64", (32, 1), 3, (2, 7)),
]


@pytest.mark.parametrize("variant,dtype,block,k,shape", CASES, ids=lambda x: str(x))
def test_wave_equals_k_numpy_steps(tmp_path, variant, dtype, block, k, shape):
    ny, nx = shape
    host = field(shape, dtype, k)
    region = (1, ny + 1, 1, nx + 1)
    got, res = run_wave(tmp_path, variant, dtype, block, k, host, region, region, resid=True)
    want, prev = numpy_steps(host, k, region, dtype)
    inside = np.zeros(host.shape, bool)
    inside[1:-1, 1:-1] = True
    np.testing.assert_array_equal(got[inside], want[inside])
    assert np.isnan(got[~inside]).all(), "stored outside the region"
    assert res == np.max(np.abs(want - prev)[inside])  # the fused residual: max |level k - level k-1|


def test_wave_deep_ghost_region_equals_steps_on_the_larger_block(tmp_path):
    """Ghost depth k: update a region grown by k rows/columns beyond the stored one (as a rank whose
    neighbours sent k-deep halos would), store only the inner block: equal to k steps of the whole."""
    dtype, k, variant, block = "float64", 5, "wave2", (32, 8)
    ny, nx = 60, 90
    host = field((ny, nx), dtype, 1)
    update = (1, ny + 1, 1, nx + 1)
    store = (1 + k, ny + 1 - k, 1 + k, nx + 1 - k)
    got, _ = run_wave(tmp_path, variant, dtype, block, k, host, update, store)
    want, _ = numpy_steps(host, k, update, dtype)
    r0, r1, c0, c1 = store
    np.testing.assert_array_equal(got[r0:r1, c0:c1], want[r0:r1, c0:c1])
    mask = np.ones(host.shape, bool)
    mask[r0:r1, c0:c1] = False
    assert np.isnan(got[mask]).all()


def test_wave_residual_flags_nan(tmp_path):
    dtype = "float32"
    host = field((20, 140), dtype, 2)
    host[7, 50] = np.nan
    region = (1, 21, 1, 141)
    _, res = run_wave(tmp_path, "wave", dtype, (32, 4), 4, host, region, region, resid=True)
    assert res == np.inf


def deep_field(g, lay, b, valid):
    """A rank's deep-halo field (solver.parallel.deep.DeepLayout) holding the global field g's values on
    `valid` and on the one-cell ring of its fixed (physical) sides, NaN everywhere else (ghosts no
    exchange has filled yet must never reach a stored point)."""
    (r0, r1, c0, c1), (fs, fn, fw, fe) = valid
    dy, dx = b.rows[0] + 1 - lay.owned[0], b.cols[0] + 1 - lay.owned[2]  # deep index + (dy, dx) = g's index
    a0, a1, b0, b1 = r0 - fs, r1 + fn, c0 - fw, c1 + fe
    host = np.full(lay.shape, np.nan, dtype=g.dtype)
    host[a0:a1, b0:b1] = g[a0 + dy:a1 + dy, b0 + dx:b1 + dx]
    return host, (dy, dx)


DEEP_CASES = [  # variant, dtype, block, d, rank of a 3 x 3 process grid (4: neighbours on every side)
    ("wave2", "float64", (32, 8), 5, 4),
    ("wave", "float32", (64, 5), 8, 4),
    ("wave2", "float32", (32, 16), 3, 0),
    ("wave", "float64", (32, 7), 2, 5),
    ("wave2", "float64", (32, 4), 8, 7),
    ("wave2a", "float32", (32, 6), 5, 4),
]


@pytest.fixture(scope="module", autouse=True)
def _compiled_in_the_background(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wave_libs")
    for variant, dtype, block, k in [c[:4] for c in CASES + DEEP_CASES] + [("wave2", "float64", (32, 8), 5),
                                                                         ("wave", "float32", (32, 4), 4)]:
        kernel_lib(tmp, variant, dtype, block, k, wait=False)


@pytest.mark.parametrize("variant,dtype,block,d,rank", DEEP_CASES, ids=lambda x: str(x))
def test_deep_halo_tiles_store_exactly_d_steps_of_the_whole(tmp_path, variant, dtype, block, d, rank):
    """The regions of a GPU deep-halo tile (CupyBackend.tiled: C = tile_region(valid, fixed), O = the
    target): the whole owned block after the exchange; the inner part before it (ghosts not yet
    received: NaN); each frame strip after it. Every stored point equals d numpy steps of the global
    field bitwise, nothing outside O is written."""
    from solver.core.decomp import all_blocks
    from solver.parallel.deep import DeepLayout

    ny, nx = 3 * 23 + 1, 3 * 37 + 2
    g = field((ny, nx), dtype, d)
    want, _ = numpy_steps(g, d, (1, ny + 1, 1, nx + 1), dtype)
    b = all_blocks((ny, nx), (3, 3))[rank]
    lay = DeepLayout(b, 8)
    plans = [(True, [lay.owned]), (False, [lay.inner(d)]), (True, lay.frame(d))]
    for after, targets in plans:
        valid = lay.valid(d, after_exchange=after)
        host, (dy, dx) = deep_field(g, lay, b, valid)
        for target in targets:
            got, _ = run_wave(tmp_path, variant, dtype, block, d, host, gk.tile_region(*valid), target)
            r0, r1, c0, c1 = target
            np.testing.assert_array_equal(got[r0:r1, c0:c1], want[r0 + dy:r1 + dy, c0 + dx:c1 + dx],
                                          err_msg=f"after={after} target={target}")
            mask = np.ones(got.shape, bool)
            mask[r0:r1, c0:c1] = False
            assert np.isnan(got[mask]).all(), f"stored outside {target}"
