"""The CuPy backend on a real GPU: every kernel variant against the numpy backend (bitwise: the kernels
are compiled with --fmad=false; the issue's bar, 1e-13 / 1e-5 relative, is checked as well), on odd
grids that are not multiples of any tile, on sub-regions (halo strips) with everything outside them
untouched, through CUDA-graph batches, and the exact eigenmode through `stencil run`."""

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
RTOL = {"float32": 1e-5, "float64": 1e-13}
SHAPES = [(1000, 777), (33, 65), (5, 3), (1, 1), (67, 1)]  # (ny, nx) interior
BLOCKS = {"naive": [(32, 8), (16, 4)], "tiled": [(32, 8), (16, 4), (64, 2)], "rows": [(32, 3), (128, 8)],
          "vec": [(32, 5), (128, 8), (64, 16)], "expr": [None], "wave": [(32, 128), (64, 5)], "wave2": [(32, 9)],
          "wave2a": [(32, 9), (64, 300)], "chip": [(512, 4), (64, 2)]}
CONFIGS = [(v, b) for v in gk.VARIANTS for b in BLOCKS[v]]


@pytest.fixture(autouse=True)
def _own_tune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))


def gpu(dtype, kernel=None, block=None):
    from solver.backends.cupy_backend import CupyBackend

    return CupyBackend(BackendSettings(name="cupy", kernel=kernel, block=list(block) if block else None), dtype)


def weights(dtype):
    return Weights(0.1, 0.2, 0.25).cast(dtype)  # wx != wy: a swapped axis would show


def field(shape, dtype, seed=0):
    """Random interior and random (non-zero) ghost layers: every read of the stencil matters."""
    return np.random.default_rng(seed).uniform(-1, 1, (shape[0] + 2, shape[1] + 2)).astype(dtype)


def numpy_steps(u, w, n, region):
    be = NumpyBackend(BackendSettings(name="numpy"), u.dtype.name)
    a, b = u.copy(), u.copy()
    a, _ = be.advance(a, b, w, n, region)
    return a


def assert_same(got, want, dtype):
    rel = np.max(np.abs(got.astype(float) - want)) / max(np.max(np.abs(want)), 1e-300)
    assert rel <= RTOL[dtype], rel
    np.testing.assert_array_equal(got, want)  # bitwise: --fmad=false keeps numpy's rounding


@pytest.mark.parametrize("variant,block", CONFIGS, ids=lambda x: "x".join(map(str, x)) if isinstance(x, tuple) else str(x))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_variant_matches_numpy_on_odd_grids(variant, block, dtype):
    w = weights(dtype)
    be = gpu(dtype, variant, block)
    for k, (ny, nx) in enumerate(SHAPES):
        host = field((ny, nx), dtype, k)
        region = (1, ny + 1, 1, nx + 1)
        u, v = be.asarray(host), be.asarray(host)
        be.prepare(u, v, w)
        u, _ = be.advance(u, v, w, 7, region)
        assert_same(be.to_host(u), numpy_steps(host, w, 7, region), dtype)


@pytest.mark.parametrize("variant", gk.VARIANTS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_regions_are_updated_exactly_and_nothing_else(variant, dtype):
    """Halo strips (one row, one column, corners, interior) of a 37 x 29 block: each point inside the
    region equals numpy; every point outside keeps its poison (NaN), so no guard writes too far."""
    ny, nx = 37, 29
    w = weights(dtype)
    host = field((ny, nx), dtype, 3)
    be = gpu(dtype, variant, None if variant == "expr" else gk.DEFAULT_BLOCK[variant])
    u = be.asarray(host)
    for region in [(1, 2, 1, nx + 1), (ny, ny + 1, 1, nx + 1), (2, ny, 1, 2), (2, ny, nx, nx + 1), (2, ny, 2, nx),
                   (5, 6, 7, 8), (3, 30, 4, 27), (1, ny + 1, 13, 14)]:
        poison = np.full_like(host, np.nan)
        out = be.asarray(poison)
        be.step(out, u, w, region)
        got = be.to_host(out)
        r0, r1, c0, c1 = region
        want = poison.copy()
        NumpyBackend(BackendSettings(name="numpy"), dtype).step(want, host, w, region)
        inside = np.zeros(host.shape, bool)
        inside[r0:r1, c0:c1] = True
        np.testing.assert_array_equal(got[inside], want[inside])
        assert np.isnan(got[~inside]).all(), f"{variant} wrote outside {region}"


@pytest.mark.parametrize("n", [0, 1, 2, 3, 31, 32, 33, 67])
def test_graph_batches_equal_single_steps(n):
    """advance() replays 32-step and 2-step CUDA graphs plus a single launch; any n gives numpy's field
    and the (current, previous) pair in the right order."""
    dtype, w = "float64", weights("float64")
    host = field((45, 38), dtype, 5)
    region = (1, 46, 1, 39)
    be = gpu(dtype, "vec")
    u, v = be.asarray(host), be.asarray(host)
    be.prepare(u, v, w)
    cur, prev = be.advance(u, v, w, n, region)
    assert_same(be.to_host(cur), numpy_steps(host, w, n, region), dtype)
    if n:
        assert_same(be.to_host(prev), numpy_steps(host, w, n - 1, region), dtype)
    cur, prev = be.advance(cur, prev, w, n, region)  # the cached graphs again
    assert_same(be.to_host(cur), numpy_steps(host, w, 2 * n, region), dtype)


def test_max_update_reduces_on_the_device_and_flags_nan():
    be = gpu("float64")
    a = field((50, 40), "float64", 1)
    b = a + np.random.default_rng(2).uniform(-1e-3, 1e-3, a.shape)
    region = (1, 51, 1, 41)
    want = np.max(np.abs(a - b)[1:-1, 1:-1])
    assert be.max_update(be.asarray(a), be.asarray(b), region) == want
    a[20, 30] = np.nan
    assert be.max_update(be.asarray(a), be.asarray(b), region) == float("inf")
    a[20, 30] = np.inf
    assert be.max_update(be.asarray(a), be.asarray(b), region) == float("inf")


def test_field_layout_is_pitched_and_aligned():
    be = gpu("float32")
    u = be.asarray(field((33, 65), "float32"))
    assert u.shape == (35, 67)
    assert u.strides[0] % 128 == 0 and u[:, 1:].data.ptr % 128 == 0
    np.testing.assert_array_equal(be.to_host(u), field((33, 65), "float32"))


def test_copy_bandwidth_is_measured():
    gbs = gpu("float32").copy_bandwidth(256 << 20, 3) / 1e9
    assert 50 < gbs < 20000, gbs


# through the CLI --------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", gk.VARIANTS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exact_eigenmode_decay_through_stencil_run(tmp_path, variant, dtype):
    case = write_case(tmp_path / "sine.yaml", grid={"nx": 101, "ny": 67}, initial={"kind": "sine"},
                      backend={"name": "cupy", "kernel": variant}, numerics={"dtype": dtype},
                      run={"steps": 200, "check_every": 50}, output={"vtk": False}, verify=True)
    res = stencil(["run", str(case), "--quiet"], env={"STENCIL_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stdout + res.stderr
    rec = json.loads((tmp_path / "out_sine" / "record.json").read_text())
    c = rec["correctness"]
    assert c["passed"] and c["reference"].startswith("exact") and c["relative_error"] <= float(c["tolerance"])


def test_record_has_gpu_times_and_same_run_copy_bandwidth(tmp_path):
    case = write_case(tmp_path / "hot.yaml", grid={"nx": 300, "ny": 211}, initial={"kind": "hotspot"},
                      boundary={"left": 1.0}, backend={"name": "cupy"}, run={"steps": 120, "check_every": 40},
                      output={"vtk": False, "every": 60, "trace": True}, verify=True)
    res = stencil(["run", str(case), "--quiet"], env={"STENCIL_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "GPU h2d / kernel / d2h" in res.stdout
    rec = json.loads((tmp_path / "out_hot" / "record.json").read_text())
    dev = rec["resources"]["devices"][0]
    assert dev["gpu_name"] and dev["gpu_index"] == 0 and dev["h2d_bytes"] >= 2 * 213 * 302 * 8
    assert dev["h2d_s"] > 0 and dev["d2h_s"] > 0 and dev["d2h_bytes"] >= 3 * 211 * 300 * 8  # 3 snapshots + verify
    assert dev["kernels"]["211x300"]["kernel"] == "chip" and dev["kernels"]["211x300"]["source"] == "default"  # fits on chip
    assert dev["kernels"]["211x300"]["launch"]["on_chip"] and dev["time_tile"] > 1  # steps per launch
    assert rec["correctness"]["passed"] and rec["correctness"]["mismatched_points"] == 0  # bitwise vs numpy
    assert rec["throughput"]["copy_gbs"] > 100 and rec["throughput"]["copy_cached"] is False
    assert rec["timings"]["compute"]["max"] > 0 and {"output", "total", "solve"} <= set(rec["times"])
    trace = json.loads((tmp_path / "out_hot" / "trace.json").read_text())["traceEvents"]
    gpu_tid = next(e["tid"] for e in trace if e["name"] == "thread_name" and e["args"]["name"] == "gpu")
    kernels = [e for e in trace if e.get("ph") == "X" and e["tid"] == gpu_tid]
    assert kernels and all(e["dur"] > 0 for e in kernels)


def test_tune_sweeps_stores_and_runs_use_the_tuned_choice(tmp_path):
    cache = {"STENCIL_CACHE_DIR": str(tmp_path / "cache")}
    case = write_case(tmp_path / "t.yaml", grid={"nx": 700, "ny": 500}, backend={"name": "cupy"},
                      run={"steps": 10}, output={"vtk": False})
    res = stencil(["tune", str(case), "--blocks", "32x4,64x8", "--repeats", "2", "--steps", "4", "--time-tile", "4",
                   "--json", str(tmp_path / "t.json")], env=cache)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "device-to-device copy" in res.stdout and "fastest:" in res.stdout
    out = json.loads((tmp_path / "t.json").read_text())
    assert {r["kernel"] for r in out["rows"]} == set(gk.VARIANTS)
    assert all(r["bitwise_vs_naive"] and r["seconds_per_step"] > 0 for r in out["rows"])
    fastest = min(out["best"].values(), key=lambda r: r["seconds_per_step"])
    stored = json.loads((tmp_path / "cache" / "tune.json").read_text())
    key = f"{out['gpu']}|float64|500x700|{fastest['kernel']}|{fastest['time_tile']}"
    assert stored[key]["block"] == fastest["block"]
    assert {r["time_tile"] for r in out["rows"] if r["kernel"] in gk.TILED} == {4}
    run = stencil(["run", str(case), "--quiet"], env=cache)
    assert run.returncode == 0, run.stderr
    dev = json.loads((tmp_path / "out_t" / "record.json").read_text())["resources"]["devices"][0]
    got = {k: v for k, v in dev["kernels"]["500x700"].items() if k != "launch"}
    assert got == {"kernel": fastest["kernel"], "block": fastest["block"], "time_tile": fastest["time_tile"],
                   "source": "tuned"}
