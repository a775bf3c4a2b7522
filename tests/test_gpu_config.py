"""GPU backend pieces that need no GPU: case validation, launch geometry, the tune cache, CUDA-aware
detection under a real mpirun, trace tracks, and the CUDA sources compiled by a real nvcc where one exists.
Without cupy or a GPU, asking for the backend is a one-line error with exit 2 and nothing written."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import mpi_script, needs_mpi, stencil, write_case
from hypothesis import given, settings
from hypothesis import strategies as st

from solver.backends import cupy_kernels as gk
from solver.backends import registry
from solver.results.record import chrome_trace, placement

NO_GPU = registry()["cupy"].unavailable()


def one_line_error(res, *needles):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr + res.stdout, res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


BAD = {
    "unknown kernel": ({"kernel": "fastest"}, ["backend.kernel", "unknown kernel 'fastest'", "naive, tiled, rows, vec, expr"]),
    "block without kernel": ({"block": [32, 8]}, ["backend.block", "give backend.kernel too"]),
    "vec block not a warp multiple": ({"kernel": "vec", "block": [48, 8]}, ["backend.block", "multiple of 32"]),
    "too many rows per thread": ({"kernel": "rows", "block": [128, 64]}, ["backend.block", "at most 32"]),
    "too many threads": ({"kernel": "tiled", "block": [64, 32]}, ["backend.block", "2048 threads", "more than 1024"]),
    "block on expr": ({"kernel": "expr", "block": [32, 8]}, ["backend.block", "compiled kernels only"]),
    "zero block": ({"kernel": "naive", "block": [0, 8]}, ["backend.block", ">= 1"]),
    "wave block not a warp multiple": ({"kernel": "wave", "block": [40, 8]}, ["backend.block", "multiple of 32"]),
    "time tile on a one-step kernel": ({"kernel": "vec", "time_tile": 4}, ["backend.time_tile", "one step per launch"]),
    "time tile too deep": ({"kernel": "wave2", "time_tile": 17}, ["backend.time_tile", "1 to 16"]),
    "time tile too deep, kernel null": ({"time_tile": 20}, ["backend.time_tile", "1 to 16"]),
    "wave2a block too wide": ({"kernel": "wave2a", "block": [512, 64]}, ["backend.block", "up to 256"]),
    "chip rows in registers": ({"kernel": "chip", "block": [512, 40]}, ["backend.block", "rows each thread holds"]),
    "chip zero steps": ({"kernel": "chip", "time_tile": 0}, ["backend.time_tile"]),
}


@pytest.mark.parametrize("label", BAD)
def test_bad_kernel_settings_are_one_line_errors(tmp_path, label):
    backend, needles = BAD[label]
    case = write_case(tmp_path / "bad.yaml", backend={"name": "cupy", **backend})
    one_line_error(stencil(["validate", str(case)]), str(case), *needles)


def test_transport_needs_the_gpu_backend(tmp_path):
    case = write_case(tmp_path / "t.yaml", parallel={"transport": "nccl"})
    one_line_error(stencil(["validate", str(case)]), "parallel.transport", "backend cupy only")


def test_valid_gpu_settings_pass_validation(tmp_path):
    case = write_case(tmp_path / "ok.yaml", backend={"name": "cupy", "kernel": "vec", "block": [128, 16]},
                      parallel={"transport": "staged", "share_gpus": True})
    res = stencil(["validate", str(case)])
    assert res.returncode == 0, res.stderr
    if NO_GPU:
        assert "not available on this machine" in res.stdout


@pytest.mark.skipif(NO_GPU is None, reason="cupy and a GPU are here")
def test_without_gpu_the_backend_is_listed_unavailable_and_refused(tmp_path):
    res = stencil(["backends"])
    assert res.returncode == 0 and "cupy" in res.stdout
    row = next(line for line in res.stdout.splitlines() if "cupy" in line)
    assert "no" in row
    case = write_case(tmp_path / "g.yaml")
    out = tmp_path / "out_g"
    one_line_error(stencil(["run", str(case), "--backend", "cupy"]), "backend.name", "cupy", "not available here")
    assert not out.exists()
    one_line_error(stencil(["tune", str(case)]), "backend.name", "not available here")


def test_tune_rejects_unknown_kernels_and_blocks(tmp_path):
    case = write_case(tmp_path / "t.yaml")
    one_line_error(stencil(["tune", str(case), "--kernel", "warp9"]), "--kernel", "warp9")
    one_line_error(stencil(["tune", str(case), "--blocks", "32by8"]), "--blocks", "32x8")


# launch geometry: every point of any region is covered by exactly the threads that store it ---------

def covered_columns(variant, dtype, block, region):
    k = 8 if variant in gk.TILED else 1
    (gx, _, _), (tx, _, _) = gk.launch_shape(variant, dtype, block, region, k)
    r0, r1, c0, c1 = region
    if variant in gk.TILED:  # wave.cu: strip s stores [xb + A*V + s*WOUT, + WOUT); each warp is a strip
        xb, wout, _ = gk.wave_strips(variant, dtype, k, region)
        first = xb + gk.apron(variant, dtype, k) * gk.lanes(variant, dtype)
        assert first <= c0 and (first - 1) % (16 // np.dtype(dtype).itemsize) == 0  # 16-byte aligned stores
        starts = [first + s * wout for s in range(gx * tx // 32)]
        return {j for x in starts for j in range(x, x + wout) if c0 <= j < c1}, None
    if variant in ("rows", "vec"):
        v = gk.lanes(variant, dtype)
        starts = [1 + ((c0 - 1) // v + t) * v for t in range(gx * tx)]
        return {j + m for j in starts for m in range(v) if c0 <= j + m < c1}, max(starts)
    return {c0 + t for t in range(gx * tx) if c0 + t < c1}, None


@settings(max_examples=300, deadline=None)
@given(variant=st.sampled_from([v for v in gk.COMPILED if v not in gk.ON_CHIP]), dtype=st.sampled_from(["float32", "float64"]),
       block=st.sampled_from([(32, 1), (32, 8), (64, 4), (128, 16)]), nx=st.integers(1, 700),
       a=st.integers(0, 700), b=st.integers(0, 700), ny=st.integers(1, 90))
def test_launch_shape_covers_every_column_and_row(variant, dtype, block, nx, a, b, ny):
    c0, c1 = sorted((1 + a % nx, 1 + b % nx))
    c1 += 1
    region = (1, ny + 1, c0, c1)
    cols, last_start = covered_columns(variant, dtype, block, region)
    assert cols == set(range(c0, c1))
    if last_start is not None:  # no thread group starts more than one warp's groups past the region
        assert last_start <= c1 - 1 + block[0] * gk.lanes(variant, dtype)
    grid, _ = gk.launch_shape(variant, dtype, block, region)
    by = block[1]
    assert grid[1] * by >= ny or grid[1] == gk.MAX_GRID_Y  # the kernels stride over further row tiles


def test_default_tiled_block_fits_its_segment_rows_to_the_grid():
    """Nothing tuned: a tiled variant's segment rows are the most of WAVE_ROWS whose warps fill the GPU
    DEFAULT_WAVES times over; on 132 SMs that is what `stencil tune` found best for wave2 k = 8
    (BENCHMARKS.md: 32 rows at 4096^2, 64 / 128 at 8192^2 in float32 / float64, 128 at 16384^2) and
    wave2a (issue 26: better than one wave of long segments at 8192^2 and 16384^2)."""
    best = {(4096, "float32"): 32, (4096, "float64"): 32, (8192, "float32"): 64, (8192, "float64"): 128,
            (16384, "float32"): 128, (16384, "float64"): 128}
    for (n, dtype), rows in best.items():
        assert gk.default_block("wave2", dtype, (n, n), 132) == (32, rows), (n, dtype)
        assert gk.default_block("wave2a", dtype, (n, n), 132) == (32, rows), (n, dtype)
    assert gk.default_block("wave2", "float64", (40, 50), 132) == (32, gk.WAVE_ROWS[-1])  # tiny: the fewest
    assert gk.default_block("wave2", "float64", (16384, 16384), 2000) == (32, gk.WAVE_ROWS[-1])  # a bigger GPU
    assert gk.default_block("wave2", "float64", (8192, 8192), 132, warps_per_sm=16) == (32, 64)  # more slots
    assert gk.default_block("vec", "float64", (4096, 4096), 132) == gk.DEFAULT_BLOCK["vec"]  # one-step kernels
    assert gk.default_block("chip", "float64", (4096, 4096), 132) == (512, gk.CHIP_ROWS[8])
    for n in (1, 7, 300, 5000):
        for dtype in ("float32", "float64"):
            block = gk.default_block("wave", dtype, (n, 2 * n), 132)
            assert block[1] in gk.WAVE_ROWS and gk.block_problem("wave", block) is None


def test_launch_facts_count_warps_against_warp_slots():
    facts = gk.launch_facts("wave2a", "float64", (32, 32), (4096, 4096), 8, 132, 8)
    assert facts == {"warps": 37 * 128, "slots": 1056, "warps_per_sm": 8, "waves": 37 * 128 / 1056, "segment_rows": 32,
                     "strips": 37}


def test_kernel_options_inject_dtype_block_and_no_fma():
    opts = gk.options("vec", "float32", (128, 16))
    assert "--fmad=false" in opts and "-DREAL=float" in opts and "-DBX=128" in opts and "-DBY=16" in opts
    assert "-DV=4" in opts and "-DV=2" in gk.options("vec", "float64", (128, 16))
    assert "-DV=1" in gk.options("rows", "float32", (128, 16))


def _nvcc(variant: str, dtype: str, out: Path) -> subprocess.CompletedProcess:
    out.mkdir()
    src = out / "k.cu"
    src.write_text(gk.source(variant))
    k = gk.DEFAULT_TILE if variant in gk.TILED else 1
    defines = [o for o in gk.options(variant, dtype, gk.DEFAULT_BLOCK[variant], k=k) if o.startswith("-D")]
    return subprocess.run(["nvcc", "-arch=sm_90", "--fmad=false", "-cubin", "-Xptxas", "-v", *defines, str(src),
                           "-o", str(out / "k.cubin")], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def nvcc_runs(tmp_path_factory):
    """Every variant x dtype compiled by nvcc, on every core at once (each compilation takes a second or two)."""
    from concurrent.futures import ThreadPoolExecutor

    tmp = tmp_path_factory.mktemp("nvcc")
    jobs = [(v, d) for v in gk.COMPILED for d in ("float32", "float64")]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return dict(zip(jobs, pool.map(lambda job: _nvcc(*job, tmp / f"{job[0]}-{job[1]}"), jobs)))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc here")
@pytest.mark.parametrize("variant", gk.COMPILED)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_sources_compile_with_nvcc_without_spills(nvcc_runs, variant, dtype):
    """The same source and defines NVRTC gets, through a real nvcc for sm_90: no errors, no local memory."""
    res = nvcc_runs[variant, dtype]
    assert res.returncode == 0, res.stderr
    assert "0 bytes spill stores" in res.stderr and "error" not in res.stderr.lower()


# the tune cache ---------------------------------------------------------------------------------

def test_tune_cache_lookup_exact_then_nearest(tmp_path, monkeypatch):
    """The fastest entry matching what the case fixes (variant, k), at the shape or the nearest one."""
    from solver.backends import tuned as tune

    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path))
    assert tune.lookup("GPU X", "float32", (100, 100)) is None

    def entry(kernel, block, k, s):
        return {"kernel": kernel, "block": block, "time_tile": k, "seconds_per_step": s}

    tune.store_tuned({tune.tune_key("GPU X", "float32", (4096, 4096), "vec", 1): entry("vec", [128, 8], 1, 3e-5),
                      tune.tune_key("GPU X", "float32", (4096, 4096), "wave2", 8): entry("wave2", [32, 64], 8, 1e-5),
                      tune.tune_key("GPU X", "float32", (16384, 16384), "rows", 1): entry("rows", [256, 16], 1, 6e-4),
                      tune.tune_key("GPU X", "float32", (16384, 16384), "wave", 4): entry("wave", [32, 128], 4, 3e-4),
                      tune.tune_key("GPU X", "float32", (16384, 16384), "wave", 8): entry("wave", [64, 256], 8, 2e-4)})
    assert tune.lookup("GPU X", "float32", (4096, 4096)) == ("wave2", (32, 64), 8)
    assert tune.lookup("GPU X", "float32", (4096, 4096), None, 1) == ("vec", (128, 8), 1)  # time_tile: 1
    assert tune.lookup("GPU X", "float32", (12000, 12000)) == ("wave", (64, 256), 8)  # nearest in points
    assert tune.lookup("GPU X", "float32", (12000, 12000), "wave", 4) == ("wave", (32, 128), 4)
    assert tune.lookup("GPU X", "float32", (3000, 2000), "rows") == ("rows", (256, 16), 1)  # nearest with rows
    assert tune.lookup("GPU X", "float32", (50, 50), "wave", 12) is None
    assert tune.lookup("GPU X", "float64", (4096, 4096)) is None
    assert tune.lookup("GPU Y", "float32", (4096, 4096)) is None
    assert json.loads((tmp_path / "tune.json").read_text())


def test_parse_blocks():
    from solver.bench.tune import parse_blocks
    from solver.core.errors import InputError

    assert parse_blocks("32x8, 128X16") == [(32, 8), (128, 16)]
    assert parse_blocks(None) is None
    for bad in ("32", "32x", "0x8", "axb"):
        with pytest.raises(InputError):
            parse_blocks(bad)


# record pieces ----------------------------------------------------------------------------------

def test_trace_puts_gpu_events_on_their_own_threads():
    rows = [{"rank": r, "host": "h", "events": [("comm", 0.0, 1e-3, 0), ("compute", 0.0, 2e-3, 0, "gpu"),
                                                ("halo", 1e-4, 3e-4, 0, "halo")]} for r in (0, 1)]
    ev = chrome_trace(rows)["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    assert names == {(0, 1): "gpu", (0, 2): "halo", (1, 1): "gpu", (1, 2): "halo"}
    tids = {(e["pid"], e["name"]): e["tid"] for e in ev if e["ph"] == "X"}
    assert tids[(0, "comm")] == 0 and tids[(0, "compute")] == 1 and tids[(1, "halo")] == 2


def test_placement_lists_host_affinity_gpu_and_transport():
    row = {"rank": 1, "host": "n1", "affinity": "8-15", "transport": "nccl", "halo_gpu": 0.1, "gpu_wait": 0.0,
           "device": {"gpu_index": 1, "gpu_name": "NVIDIA H200", "pci_bus_id": "0000:1b:00"}}
    assert placement(row) == {"rank": 1, "host": "n1", "affinity": "8-15", "gpu_index": 1, "gpu_name": "NVIDIA H200",
                              "pci_bus_id": "0000:1b:00", "transport": "nccl", "halo_gpu": 0.1, "gpu_wait": 0.0}
    assert placement({"rank": 0, "host": "n0", "affinity": "0", "device": {"device": "cpu"}}) == \
        {"rank": 0, "host": "n0", "affinity": "0"}


@needs_mpi
def test_cuda_aware_detection_asks_the_real_mpi_library():
    res = mpi_script(1, "gpu_detect.py")
    assert res.returncode == 0, res.stdout + res.stderr
    found = json.loads(res.stdout.strip().splitlines()[-1])
    assert found["library"].startswith("/") and "libmpi" in found["library"]
    assert found["cuda_aware"] in (True, False)  # MPICH and Open MPI both answer the query
