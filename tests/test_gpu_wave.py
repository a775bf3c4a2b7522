"""The time-tiled kernels (`wave`, `wave2`: k steps per launch) on a real GPU: bitwise equal to k numpy
steps on odd, non-square grids that are not multiples of the tile, both dtypes, random non-zero ghost
layers (Dirichlet sides), every block shape class, several depths; the fused residual; a region with
ghost depth k; advance() with remainders; `stencil run` with the exact eigenmode; and the record's
sections adding up to its loop within 5% (issue 12) while the time tile is in use."""

import json

import numpy as np
import pytest
from conftest import stencil, write_case

from solver.backends import cupy_kernels as gk
from solver.backends import registry
from solver.backends.numpy_backend import NumpyBackend
from solver.case import BackendSettings
from solver.core.physics import Weights

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
SHAPES = [(1000, 777), (33, 65), (5, 3), (1, 1), (67, 1), (130, 257)]
CONFIGS = [("wave", (32, 128), 8), ("wave", (64, 7), 4), ("wave", (96, 1), 3), ("wave2", (32, 128), 8),
           ("wave2", (128, 33), 5), ("wave2", (32, 16), 16), ("wave", (32, 300), 2), ("wave2a", (32, 128), 8),
           ("wave2a", (64, 5), 3), ("wave2a", (256, 1000), 12)]


@pytest.fixture(autouse=True)
def _own_tune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))


def gpu(dtype, kernel=None, block=None, k=None):
    from solver.backends.cupy_backend import CupyBackend

    return CupyBackend(BackendSettings(name="cupy", kernel=kernel, block=list(block) if block else None, time_tile=k),
                       dtype)


def weights(dtype):
    return Weights(0.1, 0.2, 0.25).cast(dtype)


def field(shape, dtype, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (shape[0] + 2, shape[1] + 2)).astype(dtype)


def numpy_steps(u, w, n, region):
    """(after n steps, after n - 1 steps) of the numpy backend."""
    be = NumpyBackend(BackendSettings(name="numpy"), u.dtype.name)
    a, b = u.copy(), u.copy()
    for _ in range(n):
        be.step(b, a, w, region)
        a, b = b, a
    return a, b


@pytest.mark.parametrize("variant,block,k", CONFIGS, ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_one_tile_equals_k_numpy_steps(variant, block, k, dtype):
    w = weights(dtype)
    be = gpu(dtype, variant, block, k)
    for seed, (ny, nx) in enumerate(SHAPES):
        host = field((ny, nx), dtype, seed)
        region = (1, ny + 1, 1, nx + 1)
        poison = host.copy()
        poison[1:-1, 1:-1] = np.nan  # every owned point must be written; the ghosts are the source's
        u, out = be.asarray(host), be.asarray(poison)
        be.tile(out, u, w, k, region, resid=True)
        want, prev = numpy_steps(host, w, k, region)
        np.testing.assert_array_equal(be.to_host(out), want)
        word = float(be._word.get().view(dtype)[0])
        assert word == np.max(np.abs(want - prev)[1:-1, 1:-1])  # the fused residual of the last level


@pytest.mark.parametrize("n", [2, 7, 8, 9, 17, 24, 61])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_advance_with_remainders_and_graphs(n, dtype):
    """advance(n) = n // k tiles + a shorter tile or one step, replayed from a CUDA graph; the pair it
    returns gives max_update = max |step n - step n-1| (the fused residual), twice in a row."""
    w = weights(dtype)
    host = field((203, 150), dtype, n)
    region = (1, 204, 1, 151)
    be = gpu(dtype, "wave2", (32, 64), 8)
    u, v = be.asarray(host), be.asarray(host)
    be.prepare(u, v, w)
    be.plan([n])
    for rep in (1, 2):
        u, v = be.advance(u, v, w, n, region)
        want, prev = numpy_steps(host, w, rep * n, region)
        np.testing.assert_array_equal(be.to_host(u), want)
        assert be.max_update(u, v, region) == np.max(np.abs(want - prev)[1:-1, 1:-1])


def test_ghost_depth_k_region_equals_steps_of_the_larger_block():
    """Update a block grown by k rows and columns (a rank's deep halo), store the inner block only."""
    dtype, k = "float64", 6
    w = weights(dtype)
    ny, nx = 90, 121
    host = field((ny, nx), dtype, 4)
    region, store = (1, ny + 1, 1, nx + 1), (1 + k, ny + 1 - k, 1 + k, nx + 1 - k)
    be = gpu(dtype, "wave", (64, 16), k)
    poison = np.full_like(host, np.nan)
    u, out = be.asarray(host), be.asarray(poison)
    be.tile(out, u, w, k, region, store)
    got, (want, _) = be.to_host(out), numpy_steps(host, w, k, region)
    r0, r1, c0, c1 = store
    np.testing.assert_array_equal(got[r0:r1, c0:c1], want[r0:r1, c0:c1])
    outside = np.ones(host.shape, bool)
    outside[r0:r1, c0:c1] = False
    assert np.isnan(got[outside]).all()


@pytest.mark.parametrize("rank,k,d", [(4, 8, 8), (4, 8, 3), (0, 5, 5), (5, 16, 7), (7, 3, 2)])
@pytest.mark.parametrize("variant,dtype", [("wave2", "float64"), ("wave", "float32"), ("wave2", "float32")])
def test_deep_halo_tiles_on_fields_aligned_at_the_owned_block(variant, dtype, rank, k, d):
    """CupyBackend.tiled on a rank's deep-halo fields (solver.parallel.deep's layout, a 3 x 3 process
    grid, allocated with the owned block's first column aligned): the whole owned block after the
    exchange, the inner part before it (ghosts not received yet: NaN), each frame strip after it, equal
    to d numpy steps of the global field bitwise; nothing else written."""
    from solver.core.decomp import all_blocks
    from solver.parallel.deep import DeepLayout

    w = weights(dtype)
    ny, nx = 3 * 29 + 2, 3 * 41 + 1
    g = field((ny, nx), dtype, rank + k)
    want, _ = numpy_steps(g, w, d, (1, ny + 1, 1, nx + 1))
    b = all_blocks((ny, nx), (3, 3))[rank]
    lay = DeepLayout(b, k)
    be = gpu(dtype, variant, (32, 16), k)
    dy, dx = b.rows[0] + 1 - lay.owned[0], b.cols[0] + 1 - lay.owned[2]  # deep index + (dy, dx) = g's
    for after, targets in ((True, [lay.owned]), (False, [lay.inner(d)]), (True, lay.frame(d))):
        valid = lay.valid(d, after_exchange=after)
        (r0, r1, c0, c1), (fs, fn, fw, fe) = valid
        host = np.full(lay.shape, np.nan, dtype=dtype)
        a0, a1, b0, b1 = r0 - fs, r1 + fn, c0 - fw, c1 + fe  # valid points and the physical ghosts
        host[a0:a1, b0:b1] = g[a0 + dy:a1 + dy, b0 + dx:b1 + dx]
        u, out = be.zeros(lay.shape, aligned=lay.owned[2]), be.zeros(lay.shape, aligned=lay.owned[2])
        assert u[:, lay.owned[2]:].data.ptr % 128 == 0
        be.copy2d(u, host, "h2d", be.main)
        be.copy2d(out, np.full_like(host, np.nan), "h2d", be.main)
        be._shape = b.padded
        for target in targets:
            be.tiled(out, u, w, d, target, *valid)
        got = be.to_host(out)
        for t0, t1, s0, s1 in targets:
            np.testing.assert_array_equal(got[t0:t1, s0:s1], want[t0 + dy:t1 + dy, s0 + dx:s1 + dx])
            got[t0:t1, s0:s1] = np.nan
        assert np.isnan(got).all(), f"stored outside {targets}"


def test_nan_in_a_tile_is_caught_by_the_check():
    dtype = "float32"
    host = field((40, 300), dtype, 9)
    host[20, 200] = np.nan
    region = (1, 41, 1, 301)
    be = gpu(dtype, "wave", (32, 8), 4)
    u, v = be.asarray(host), be.asarray(host)
    u, v = be.advance(u, v, weights(dtype), 8, region)
    assert be.max_update(u, v, region) == float("inf")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exact_eigenmode_through_stencil_run_with_time_tiles(tmp_path, dtype):
    """Checks every 30 steps (not a multiple of k = 8: remainder tiles), verify against the exact mode and
    bitwise against numpy (mismatched_points 0)."""
    case = write_case(tmp_path / "sine.yaml", grid={"nx": 301, "ny": 203}, initial={"kind": "sine"},
                      backend={"name": "cupy", "kernel": "wave2", "time_tile": 8}, numerics={"dtype": dtype},
                      run={"steps": 250, "check_every": 30}, output={"vtk": False, "every": 100}, verify=True)
    res = stencil(["run", str(case), "--quiet"], env={"STENCIL_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stdout + res.stderr
    rec = json.loads((tmp_path / "out_sine" / "record.json").read_text())
    c = rec["correctness"]
    assert c["passed"] and c["reference"].startswith("exact") and c["relative_error"] <= float(c["tolerance"])
    dev = rec["resources"]["devices"][0]
    assert dev["kernels"]["203x301"]["kernel"] == "wave2" and dev["kernels"]["203x301"]["time_tile"] == 8


def test_default_choice_is_time_tiled_and_sections_add_up_to_the_loop(tmp_path):
    """Nothing tuned: the default is the tiled kernel; the record's sections (GPU compute by events, the
    host's waits for the GPU charged nowhere) add up to the loop within 5%."""
    case = write_case(tmp_path / "big.yaml", grid={"nx": 4096, "ny": 4096}, backend={"name": "cupy"},
                      numerics={"dtype": "float32"}, run={"steps": 800, "check_every": 200}, output={"vtk": False})
    res = stencil(["run", str(case), "--quiet"], env={"STENCIL_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stdout + res.stderr
    rec = json.loads((tmp_path / "out_big" / "record.json").read_text())
    t = rec["timings"]
    total = sum(t[s]["max"] for s in ("compute", "comm", "wait", "io", "other"))
    assert abs(total / t["loop"]["max"] - 1) <= 0.05, (total, t["loop"]["max"], t)
    choice = rec["resources"]["devices"][0]["kernels"]["4096x4096"]
    assert (choice["kernel"], choice["time_tile"], choice["source"]) == (gk.DEFAULT_VARIANT, gk.DEFAULT_TILE, "default")
    assert rec["resources"]["devices"][0]["time_tile"] == gk.DEFAULT_TILE  # the record's bottleneck rule reads it


def test_time_tile_one_keeps_single_steps(tmp_path):
    be = gpu("float64", None, None, 1)
    assert be.choice((52, 42))[:3] == (gk.DEFAULT_STEP_VARIANT, gk.DEFAULT_BLOCK[gk.DEFAULT_STEP_VARIANT], 1)
