"""The ladder's first rungs: every reduction variant against an exactly rounded sum, and the SIMD evidence."""

import json
import math
import platform

import numpy as np
import pytest
from conftest import mpirun, needs_mpi, stencil

from solver.bench import cpu_ladder as k
from solver.bench import reduce as bench_reduce
from solver.bench import vectorize as bench_vectorize
from solver.parallel.comm import Comm


def gpu_reason():
    from solver.backends import registry

    return registry()["cupy"].unavailable()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_cpu_reduction_is_within_the_stated_bound(dtype):
    res = bench_reduce.reduction_bench(200_003, 3_001, 2, dtype, gpu=False, comm=Comm(), repeats=1)
    x = bench_reduce.local_data(200_003, dtype, 0)
    exact = math.fsum(x.astype(np.float64))
    names = [r["variant"] for r in res["results"]]
    assert len(names) == 5 and any("lock" in n for n in names) and any("partials" in n for n in names)
    for r in res["results"]:
        ref = math.fsum(x[:r["n"]].astype(np.float64))  # recomputed here, not taken from the bench
        assert r["reference"] == ref
        assert abs(r["value"] - ref) <= r["n"] * 2.0**-53 * ref, r["variant"]
        assert r["passed"] and r["tolerance"] == r["n"] * 2.0**-53 and r["seconds"] > 0 and r["gbs"] > 0
    assert res["results"][0]["reference"] == exact


def test_partials_add_chunks_in_order():
    """sum_partials = per-chunk left-to-right sums, added in chunk order: bitwise, whatever the threads."""
    x = np.random.default_rng(5).random(10_001)
    for parts in (1, 2, 3, 7):
        chunks = [x[c * x.size // parts:(c + 1) * x.size // parts] for c in range(parts)]
        expected = 0.0
        for ch in chunks:
            s = 0.0
            for v in ch:
                s += v
            expected += s
        assert k.sum_partials(x, parts) == expected
    s = 0.0
    for v in x:
        s += v
    assert k.sum_serial(x) == s


def test_locked_sum_adds_every_element_once():
    x = np.arange(1, 1001, dtype=np.float64)  # integers: every order gives exactly 500500
    for threads in (1, 2, 3):
        assert bench_reduce.locked_sum(x, threads) == 500500.0


def test_a_wrong_sum_fails_the_check():
    v = bench_reduce.Variant("wrong", "cpu", lambda: 0.0, 1000, 8)
    row = bench_reduce.result(v, 1e-3, 1.0 + 1e-9, 1.0, Comm())
    assert not row["passed"] and row["relative_error"] == pytest.approx(1e-9)
    nan = bench_reduce.result(v, 1e-3, float("nan"), 1.0, Comm())
    assert not nan["passed"]


@needs_mpi
def test_reduction_across_ranks_with_reduce_and_allreduce(tmp_path):
    out = tmp_path / "red.json"
    p = mpirun(2, ["bench", "reduction", "--size", "100000", "--lock-size", "2000", "--threads", "1", "--no-gpu",
                   "--repeats", "2", "--json", str(out)])
    assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())
    mpi = [r for r in res["results"] if r["where"] == "mpi"]
    assert {r["variant"].split(" (")[0] for r in mpi} == {"MPI: local sums + Reduce", "MPI: local sums + Allreduce"}
    exact = math.fsum(math.fsum(bench_reduce.local_data(100_000, "float64", rank)) for rank in (0, 1))
    for r in mpi:
        assert r["n"] == 200_000 and r["passed"] and abs(r["value"] - exact) <= r["tolerance"] * exact
    assert all(r["passed"] for r in res["results"]) and "Allreduce" in p.stdout


def test_reduction_rejects_gpu_without_one():
    if gpu_reason() is None:
        pytest.skip("a GPU is here")
    p = stencil(["bench", "reduction", "--gpu", "--size", "1000"])
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--gpu" in p.stderr


# vectorisation evidence --------------------------------------------------------------------------

ASM = """
.LBB0_8:
\tvmovupd\t(%rax,%rsi,8), %zmm1
\tvaddpd\t64(%rax,%rsi,8), %zmm0, %zmm0
\tvmulpd\t%zmm1, %zmm2, %zmm3
\tvfmadd231pd\t%ymm1, %ymm2, %ymm3
\tvaddpd\t%xmm1, %xmm0, %xmm0
\tvaddsd\t%xmm1, %xmm0, %xmm0
\tmulsd\t%xmm1, %xmm0
\tvmulss\t%xmm1, %xmm0, %xmm0
\tvgatherqpd\t(,%zmm18), %zmm19 {%k1}
"""


def test_count_simd_classifies_by_register_width():
    c = bench_vectorize.count_simd(ASM)
    assert c["packed"] == {"zmm": 2, "ymm": 1, "xmm": 1}  # vmovupd is a move, not arithmetic
    assert c["scalar"] == 3 and c["isa"].startswith("AVX-512") and c["gathers"] == 1
    assert bench_vectorize.count_simd("\tvaddsd\t%xmm1, %xmm0, %xmm0\n")["isa"].startswith("scalar")


x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 register names")


@x86
def test_the_kernel_is_vectorised_and_the_switch_really_turns_it_off():
    res = bench_vectorize.vectorize_bench("float64", 1, [24, 48], repeats=1)
    on, off = res["asm_on"], res["asm_off"]
    assert sum(on["packed"].values()) > 0 and "vmulpd" in on["mnemonics"] and on["gathers"] == 0
    assert sum(off["packed"].values()) == 0 and off["scalar"] > 0
    assert [r["n"] for r in res["results"]] == [24, 48]
    for r in res["results"]:
        assert r["seconds_on"] > 0 and r["seconds_off"] > 0 and r["speedup"] == r["seconds_off"] / r["seconds_on"]
        assert r["fits"] == ("L2" if bench_vectorize.cache_bytes(2, 0) else "DRAM")  # DRAM: caches unknown
    assert res["copy_gbs"] > 0 and "SIMD speedup" in bench_vectorize.conclusion(res)


def test_default_sizes_bracket_the_caches():
    small, large = bench_vectorize.default_sizes("float64")
    l2 = bench_vectorize.cache_bytes(2, 512 << 10)
    assert 2 * (small + 2) ** 2 * 8 <= l2 and large >= 4096 and large % 512 == 0


@needs_mpi
def test_bench_balance_gives_every_ranks_speed_and_the_lockstep_wait(tmp_path):
    """`stencil bench balance`: one line per rank, the spreads, the lockstep wait; the
    JSON holds every rank's figures. One process measures itself (nothing to wait for)."""
    args = ["bench", "balance", "--block", "64", "--steps", "10", "--repeats", "2", "--copy-mib", "1"]
    res = mpirun(2, [*args, "--json", str(tmp_path / "b.json")])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("P=2 block 64x64 float64") and [x.split()[0] for x in lines[2:4]] == ["0", "1"]
    assert lines[-1].startswith("lockstep with empty neighbour messages: wait max")
    got = json.loads((tmp_path / "b.json").read_text())
    assert [r["rank"] for r in got["rows"]] == [0, 1] and all(r["step_s"] > 0 and 0 <= r["lockstep_wait"] < 1
                                                              for r in got["rows"])
    one = stencil(args)
    assert one.returncode == 0 and one.stdout.startswith("P=1 block 64x64"), one.stderr


# GPU variants (run on the GPU machine by tools/device_suite.sh) -----------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gpu_reductions_match_the_exact_sum(dtype):
    if gpu_reason():
        pytest.skip(gpu_reason())
    x = bench_reduce.local_data(3_000_017, dtype, 0)  # not a multiple of any block or grid size
    exact = math.fsum(x.astype(np.float64))
    variants = bench_reduce.gpu_variants(x, 0)
    assert [v.name.split(":")[1].split()[0] for v in variants] == ["one", "shared-memory", "cupy.sum"]
    for v in variants:
        for _ in range(2):  # the total is reset before each sum
            s = v.run()
            assert abs(s - exact) <= x.size * 2.0**-53 * exact, (v.name, s, exact)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gpu_saxpy_and_copy_match_the_host_bitwise(dtype):
    if gpu_reason():
        pytest.skip(gpu_reason())
    from solver.bench.stream import SAXPY_A, make_stream

    s = make_stream("cupy", 1_000_003, dtype)
    x, y0 = s.to_host(s.x), s.to_host(s.y)
    s.saxpy()
    s.synchronize()
    a = np.dtype(dtype).type(SAXPY_A)
    np.testing.assert_array_equal(s.to_host(s.y), a * x + y0)
    s.copy()
    s.synchronize()
    np.testing.assert_array_equal(s.to_host(s.y), x)


@pytest.mark.gpu
def test_gpu_bench_reduction_cli_reports_all_three_gpu_variants(tmp_path):
    if gpu_reason():
        pytest.skip(gpu_reason())
    out = tmp_path / "r.json"
    p = stencil(["bench", "reduction", "--size", "4000000", "--lock-size", "1000", "--gpu", "--repeats", "3",
                 "--json", str(out)])
    assert p.returncode == 0, p.stderr
    gpu = [r for r in json.loads(out.read_text())["results"] if r["where"] == "gpu"]
    assert len(gpu) == 3 and all(r["passed"] and r["gbs"] > 0 for r in gpu)
