"""Streaming kernels (copy, SAXPY) on every CPU backend, the concurrent timer, and the per-machine cache."""

import json

import numpy as np
import pytest
from conftest import mpirun, needs_mpi, stencil

from solver.backends.numba_backend import NumbaBackend
from solver.backends.numpy_backend import NumpyBackend
from solver.bench import bandwidth
from solver.bench import stream as bench_stream
from solver.case import BackendSettings
from solver.parallel.comm import Comm


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache file and small arrays (4 MiB per rank), so the measurements are quick."""
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(bandwidth, "NODE_BYTES", 4 << 20)
    monkeypatch.setattr(bandwidth, "MIN_BYTES", 1 << 20)
    return tmp_path / "cache" / "bandwidth.json"


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_copy_and_saxpy_give_the_exact_result(backend, dtype):
    s = bench_stream.make_stream(backend, 10_007, dtype, threads=2)
    x, y0 = s.to_host(s.x).copy(), s.to_host(s.y).copy()
    assert x.dtype == dtype and np.all(x != y0)
    s.saxpy()
    s.synchronize()
    a = np.dtype(dtype).type(bench_stream.SAXPY_A)
    np.testing.assert_array_equal(s.to_host(s.y), a * x + y0)  # a = 0.5: a*x is exact, one rounding in the add
    s.saxpy()
    np.testing.assert_array_equal(s.to_host(s.y), a * x + (a * x + y0))
    s.copy()
    s.synchronize()
    np.testing.assert_array_equal(s.to_host(s.y), x)


def test_bytes_counted_per_element():
    s = bench_stream.make_stream("numpy", 1000, "float32")
    assert s.nbytes("copy") == 2 * 4 * 1000 and s.nbytes("saxpy") == 3 * 4 * 1000


def test_concurrent_rate_is_bytes_over_the_median_time():
    import time

    calls = []

    def fn():
        calls.append(1)
        time.sleep(0.005)

    r = bench_stream.concurrent_rate(Comm(), fn, lambda: None, nbytes=10**9, repeats=3)
    # each call sleeps >= 5 ms, so the rate cannot exceed 1e9 B / 5 ms = 200 GB/s; the warm-up sized the
    # repeats to >= 20 ms (1 call if the warm-up call alone took that long on a loaded machine)
    assert 0 < r["gbs"] <= 200 and r["inner"] >= 1
    assert len(calls) == 1 + 3 * r["inner"]
    assert r["seconds"] >= 0.005 and r["spread_gbs"][0] <= r["gbs"] <= r["spread_gbs"][1]


def test_cache_is_used_then_refreshed(cache, monkeypatch):
    measured = []
    real = bandwidth.measure

    def spy(*a, **kw):
        measured.append(a[2] if len(a) > 2 else kw.get("kind"))
        return real(*a, **kw)

    monkeypatch.setattr(bandwidth, "measure", spy)
    be = NumpyBackend(BackendSettings(name="numpy"), "float64")
    first = bandwidth.ceiling(be, Comm(), "saxpy", repeats=2)
    assert not first["cached"] and first["gbs"] > 0 and measured == ["saxpy"]
    stored = json.loads(cache.read_text())
    assert stored[first["key"]]["gbs"] == first["gbs"] and "|numpy|saxpy|threads=1|ranks=1|" in first["key"]
    again = bandwidth.ceiling(be, Comm(), "saxpy", repeats=2)
    assert again["cached"] and again["gbs"] == first["gbs"] and measured == ["saxpy"]
    fresh = bandwidth.ceiling(be, Comm(), "saxpy", refresh=True, repeats=2)
    assert not fresh["cached"] and measured == ["saxpy", "saxpy"]
    assert json.loads(cache.read_text())[first["key"]]["measured"] == fresh["measured"]


def test_entries_carry_date_fingerprint_and_workers(cache):
    from solver.core.machine import fingerprint

    be = NumbaBackend(BackendSettings(name="numba"), "float64", 2)
    first = bandwidth.ceiling(be, Comm(), "copy", repeats=2)
    assert first["source"] == "measured now" and first["why_measured"] == "not cached"
    stored = json.loads(cache.read_text())[first["key"]]
    assert stored["fingerprint"] == fingerprint() and stored["workers"] == 2 and stored["measured"][:2] == "20"
    again = bandwidth.ceiling(be, Comm(), "copy", repeats=2)
    assert again["cached"] and again["source"] == "cached " + stored["measured"][:16].replace("T", " ")


def test_an_entry_of_another_machine_is_measured_again(cache):
    be = NumpyBackend(BackendSettings(name="numpy"), "float64")
    first = bandwidth.ceiling(be, Comm(), "copy", repeats=2)
    data = json.loads(cache.read_text())
    data[first["key"]]["fingerprint"] = {**data[first["key"]]["fingerprint"], "cpus": 999}
    cache.write_text(json.dumps(data))
    again = bandwidth.ceiling(be, Comm(), "copy", repeats=2)
    assert not again["cached"] and "fingerprint" in again["why_measured"]


def test_more_workers_slower_than_fewer_is_measured_again(cache, monkeypatch):
    """A 2-thread reading far below the 1-thread one (taken on a busy machine) is not trusted: measured
    again; a new reading still inconsistent is kept, marked rechecked, and then used."""
    one = NumbaBackend(BackendSettings(name="numba"), "float64", 1)
    two = NumbaBackend(BackendSettings(name="numba"), "float64", 2)
    e1 = bandwidth.ceiling(one, Comm(), "copy", repeats=2)
    e2 = bandwidth.ceiling(two, Comm(), "copy", repeats=2)
    data = json.loads(cache.read_text())
    data[e2["key"]]["gbs"] = 0.25 * e1["gbs"]  # the busy-machine reading
    data[e2["key"]].pop("rechecked", None)  # (this machine may really have been busy when e2 was measured)
    cache.write_text(json.dumps(data))
    reason = bandwidth.usable(data[e2["key"]], data)
    assert reason and "with 2 workers is below 80% of" in reason
    measured = []
    real = bandwidth.measure

    def slow(*a, **kw):  # the machine stays busy: every new 2-thread reading is low too
        measured.append(1)
        out = real(*a, **kw)
        return {**out, "gbs": 0.25 * e1["gbs"]}

    monkeypatch.setattr(bandwidth, "measure", slow)
    again = bandwidth.ceiling(two, Comm(), "copy", repeats=2)
    assert not again["cached"] and "below 80%" in again["why_measured"] and len(measured) == 2
    assert again["rechecked"]
    third = bandwidth.ceiling(two, Comm(), "copy", repeats=2)
    assert third["cached"] and len(measured) == 2  # rechecked: kept, not measured on every run


def test_runs_read_the_entry_the_bench_wrote(cache):
    """copy_ceiling (what run.py calls) and `bench bandwidth` share one key per backend/threads/ranks."""
    res = bandwidth.bandwidth_bench(["numba"], [1], Comm(), repeats=2)
    copy = next(r for r in res["results"] if r["kind"] == "copy")
    be = NumbaBackend(BackendSettings(name="numba"), "float64", 1)
    ceiling = bandwidth.copy_ceiling(be, Comm())
    assert ceiling["cached"] and ceiling["gbs"] == copy["gbs"]
    assert {r["kind"] for r in res["results"]} == {"copy", "memcpy", "saxpy"}


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_both_copies_copy_exactly(backend):
    """copy (ordinary stores: a multiply by 1.0) and memcpy leave b equal to a, bit for bit."""
    s = bench_stream.make_stream(backend, 4099)
    s.x[:3] = [-0.0, float("inf"), 5e-324]
    for kind in ("copy", "memcpy"):
        s.y[:] = 7.0
        getattr(s, kind)()
        assert np.array_equal(s.y.view(np.int64), s.x.view(np.int64)), kind


@needs_mpi
def test_bench_bandwidth_under_mpi_streams_on_every_rank_and_caches(tmp_path):
    env = {"STENCIL_CACHE_DIR": str(tmp_path / "c"), "STENCIL_BANDWIDTH_MIB": "32"}  # small, to be quick
    out = tmp_path / "bw.json"
    args = ["bench", "bandwidth", "-b", "numpy", "--repeats", "2", "--json", str(out)]
    p = mpirun(2, args, env=env)
    assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())
    assert res["ranks"] == 2 and all(not r["cached"] for r in res["results"])
    for r in res["results"]:
        assert "ranks=2|per_node=2" in r["key"] and r["gbs"] == pytest.approx(2 * r["per_rank_gbs"])
        assert r["bytes_per_rank"] == 16 << 20
    again = mpirun(2, args, env=env)
    assert again.returncode == 0, again.stderr
    assert all(r["cached"] for r in json.loads(out.read_text())["results"])
    assert "cached 20" in again.stdout


def test_bench_bandwidth_rejects_bad_thread_lists():
    p = stencil(["bench", "bandwidth", "--threads", "2,x"])
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--threads" in p.stderr


# compute peaks (solver.bench.peak) ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_multiply_add_loop_computes_what_it_counts(dtype):
    """The compiled loop is the recurrence x = x*b + c rounded twice per step (numpy's order), n times."""
    from solver.bench import peak

    fn, width = peak.cpu_function(dtype, "mul_add")
    t = np.dtype(dtype).type
    b, c, n = t(0.75), t(0.1), 37
    chains = []
    for j in range(peak.CHAINS):  # chain j starts at (j + 1) / 1024; lane 0 is returned, summed over the chains
        x = t((j + 1) / 1024)
        for _ in range(n):
            x = t(x * b) + c
        chains.append(x)
    total = chains[0]
    for x in chains[1:]:  # summed one after another
        total = total + x
    assert width >= 2 and t(fn(n, b, c)) == total
    assert peak.flops_per_call("mul_add", width, peak.CHAINS, n) == 2 * width * peak.CHAINS * n


def test_fma_loop_uses_fused_instructions_and_mul_add_does_not():
    from solver.bench import peak

    fused, plain = peak.loop_ir("float64", "fma", 8), peak.loop_ir("float64", "mul_add", 8)
    assert fused.count("@llvm.fma.v8f64(<8 x double> %x") == peak.CHAINS and "fmul" not in fused
    assert plain.count("fmul <8 x double>") == peak.CHAINS and plain.count("@llvm.fma") == 0


def test_compute_ceiling_is_measured_once_then_cached_with_its_date(cache):
    be = NumbaBackend(BackendSettings(name="numba"), "float64", 1)
    first = bandwidth.compute_ceiling(be, Comm.world(), "float32")
    assert set(first) == {"fma", "mul_add"} and all(e["source"] == "measured now" for e in first.values())
    assert all(e["gflops"] > 0 and e["dtype"] == "float32" and e["measured"] for e in first.values())
    again = bandwidth.compute_ceiling(be, Comm.world(), "float32")
    assert all(e["source"].startswith("cached 20") and e["gflops"] == first[k]["gflops"] for k, e in again.items())
    stored = json.loads(cache.read_text())
    assert {e["kind"] for e in stored.values()} == {"fma-float32", "mul_add-float32"}


def test_the_run_table_says_when_a_cached_ceiling_was_measured(tmp_path):
    """The first run measures the copy ceiling (`measured in this run`); the second reads the cache and says
    when it was measured, and that it was not in this run."""
    from conftest import write_case

    from solver.results.record import when

    assert when("cached 2026-12-01 06:36").startswith("measured 2026-12-01 06:36 and cached, not in this run")
    assert when("measured now") == "measured in this run"
    case = write_case(tmp_path / "c.yaml", output={"vtk": False})
    env = {"STENCIL_CACHE_DIR": str(tmp_path / "cache"), "STENCIL_BANDWIDTH_MIB": "16", "COLUMNS": "300"}
    first = stencil(["run", str(case), "-q"], env=env)
    again = stencil(["run", str(case), "-q", "--overwrite"], env=env)
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert "measured in this run" in first.stdout and "not in this run" not in first.stdout
    assert "and cached, not in this run" in " ".join(again.stdout.split())
