"""The GPU's compute-peak loop (solver.bench.peak.GpuPeak) on a real GPU: it computes the recurrence it
counts (multiply then add, rounded twice, with --fmad=false), and the record of a GPU run carries both
measured roofs. Skipped without cupy and a GPU."""

import json

import numpy as np
import pytest
from conftest import stencil, write_case

from solver.backends import registry
from solver.case import BackendSettings

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mul_add_loop_computes_the_counted_recurrence(dtype):
    from solver.backends.cupy_backend import CupyBackend
    from solver.bench import peak

    be = CupyBackend(BackendSettings(name="cupy"), dtype)
    p = peak.GpuPeak(be, dtype, "mul_add", iterations=29)
    t = np.dtype(dtype).type
    b, c = t(0.75), t(0.1)
    p.kernel((p.blocks,), (peak.GPU_THREADS,), (p.out, np.int32(29), b, c), stream=p.stream)
    p.synchronize()
    got = p.out.get()
    for thread in (0, 1, 37, peak.GPU_THREADS - 1):
        s = t(0)
        for j in range(peak.GPU_CHAINS):
            x = t(thread + j + 1) / t(1024)
            for _ in range(29):
                x = t(x * b) + c
            s = s + x
        assert got[thread] == s and got[peak.GPU_THREADS + thread] == s  # every block computes the same
    assert p.flops == p.blocks * peak.GPU_THREADS * 2 * peak.GPU_CHAINS * 29  # one multiply and one add per chain and step


def test_gpu_run_records_both_compute_roofs(tmp_path):
    case = write_case(tmp_path / "g.yaml", grid={"nx": 512, "ny": 512}, backend={"name": "cupy"},
                      run={"steps": 40, "check_every": 20}, output={"vtk": False})
    res = stencil(["run", str(case), "--quiet"], env={"STENCIL_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    tp = json.loads((tmp_path / "out_g" / "record.json").read_text())["throughput"]
    assert tp["peak_fma_gflops"] > tp["peak_mul_add_gflops"] > 0  # fused: one instruction for two flops
    assert tp["fraction_of_peak"] == pytest.approx(tp["gflops"] / tp["peak_mul_add_gflops"])
    assert tp["peak_mul_add_source"] == "measured now"  # GPU ceilings are measured in every run
