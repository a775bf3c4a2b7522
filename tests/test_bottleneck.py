"""The record's one-line bottleneck: one rule per regime, each from constructed rank rows (no run)."""

import json

import pytest

from solver.results import record

LOOP = 1.0


def row(rank=0, host="h", affinity="0", threads=1, compute=0.8, comm=0.05, wait=0.05, other=0.1, io=0.0,
        points=4096 * 4096, steps=100, time_tile=1, device=None):
    return {"rank": rank, "host": host, "affinity": affinity, "threads": threads, "points": points, "steps": steps,
            "compute": compute, "comm": comm, "wait": wait, "io": io, "other": other,
            "loop": compute + comm + wait + io + other, "updates": points * steps,
            "device": device or {"device": "cpu", "time_tile": time_tile}}


def line(rows, frac=0.85, step=1e-2, dtype="float64", on_gpu=False):
    tp = {"seconds_per_step": step, "fraction_of_copy": frac, "copy_gbs": 20.0}
    if frac is None:
        tp = {"seconds_per_step": step}
    return record.bottleneck(tp, record.section_stats(rows), rows, dtype, on_gpu)


def ranks(n, **kw):
    return [row(rank=r, affinity=str(r), **kw) for r in range(n)]


def percentages(text):
    import re

    return [int(p) for p in re.findall(r"(\d+)%", text)]


def test_no_timed_steps():
    assert record.bottleneck(None, {}, [], "float64").startswith("no timed steps")


def test_memory_bandwidth_between_0_7_and_1_1_of_copy():
    assert line([row()], frac=0.85).startswith("memory bandwidth: 85%")
    assert line([row()], frac=1.1).startswith("memory bandwidth")


def test_kernel_efficiency_below_0_7():
    assert line([row()], frac=0.4).startswith("kernel efficiency: 40%")


def test_above_copy_with_time_tiling_says_tiling():
    text = line([row(time_tile=4)], frac=1.6)
    assert text.startswith("data reused from cache: 160%") and "time tiling: 4 steps" in text
    assert "memory bandwidth" not in text


def test_above_copy_small_working_set_says_it_fits_in_the_last_level_cache(monkeypatch):
    monkeypatch.setattr(record, "last_level_cache_bytes", lambda cores=None: 32 << 20)
    text = line([row(points=256 * 128)], frac=2.61)
    assert text.startswith("data reused from cache: 261%") and "fits in the last-level cache (32 MiB)" in text


def test_above_copy_large_working_set_points_at_the_ceiling(monkeypatch):
    monkeypatch.setattr(record, "last_level_cache_bytes", lambda cores=None: 32 << 20)
    text = line([row()], frac=1.3)
    assert "does not fit in the last-level cache" in text and "--refresh" in text


def test_comm_and_wait_are_taken_per_rank_then_the_largest():
    """Rank 0 spends 60% in comm, rank 1 60% in wait: the sum of the two maxima (120%) is no rank's."""
    rows = [row(rank=0, affinity="0", compute=0.3, comm=0.6, wait=0.0, other=0.1),
            row(rank=1, affinity="1", compute=0.3, comm=0.0, wait=0.6, other=0.1)]
    text = line(rows)
    assert text.startswith("communication: comm + wait take up to 60% of the loop (rank 0: comm 60%, wait 0%)")
    assert max(percentages(text)) <= 100


def test_comm_below_a_quarter_is_not_the_bottleneck():
    assert line(ranks(2, comm=0.1, wait=0.1, compute=0.7, other=0.1)).startswith("memory bandwidth")


def test_no_percentage_above_100_even_with_inconsistent_sections():
    rows = [row(rank=0, compute=0.1, comm=0.9, wait=0.9, other=0.0)]  # sections over the loop: clock noise
    rows[0]["loop"] = 1.0
    rows.append(row(rank=1, affinity="1"))
    assert max(percentages(line(rows))) <= 100


def test_oversubscription_comes_first():
    rows = [row(rank=r, affinity="0-1", threads=2, comm=0.5) for r in range(4)]
    assert line(rows).startswith("oversubscription: 4 rank(s) with 8 thread(s) in all on 2 core(s) of h")


def test_imbalance():
    rows = [row(rank=0, affinity="0", compute=1.0), row(rank=1, affinity="1", compute=0.5)]
    assert line(rows).startswith("load imbalance: the slowest rank computes 1.33x the mean")


def test_per_step_overhead_short_steps_or_large_other():
    assert line([row()], frac=0.3, step=2e-5).startswith("per-step overhead: 0.020 ms per step")
    assert line([row(compute=0.4, other=0.5)], frac=0.5).startswith("per-step overhead")


def test_gpu_launch_gaps():
    gpu = {"device": "H200", "gpu_index": 0}
    text = line([row(compute=0.4, other=0.5, device=gpu)], frac=0.5, on_gpu=True)
    assert text.startswith("GPU launch gaps: the kernels (CUDA events) run 40% of the loop")
    assert line([row(device=gpu)], frac=0.95, on_gpu=True).startswith("memory bandwidth")


def test_gpu_host_sections_overlapping_the_kernels_are_not_overhead():
    """The issue's H200 run at 8000 steps: compute 4.12 s (events), other 4.34 s, loop 5.30 s, io 0.96 s."""
    gpu = {"device": "H200", "gpu_index": 0}
    r = row(compute=4.12, comm=0.0, wait=0.0, other=4.34, io=0.96, device=gpu)
    r["loop"] = 5.30
    assert line([r], frac=0.94, step=5.4e-4, dtype="float32", on_gpu=True).startswith("memory bandwidth: 94%")


def test_compute_bound_above_half_the_multiply_add_peak():
    rows = [row(time_tile=8)]
    tp = {"seconds_per_step": 1e-2, "fraction_of_copy": 6.0, "copy_gbs": 20.0, "fraction_of_peak": 0.62,
          "peak_mul_add_gflops": 40.0, "peak_fma_gflops": 80.0, "flops_per_update": 7}
    text = record.bottleneck(tp, record.section_stats(rows), rows, "float64", False)
    assert text.startswith("arithmetic: 62% of the measured multiply + add peak (40.0 GFLOP/s"), text
    tp["fraction_of_peak"] = 0.3  # below half: the cache-reuse rule names the regime
    assert record.bottleneck(tp, record.section_stats(rows), rows, "float64", False).startswith("data reused from cache")


def test_unknown_without_a_ceiling():
    assert line([row()], frac=None).startswith("unknown")


@pytest.mark.parametrize("frac", [0.2, 0.8, 1.5, 3.0])
def test_every_sentence_stays_at_or_below_100_percent_of_the_loop(frac):
    rows = [row(rank=0, comm=0.7, wait=0.2, compute=0.1, other=0.0), row(rank=1, affinity="1")]
    text = line(rows, frac=frac)
    assert "of the loop" in text and max(p for p in percentages(text)) <= 100


# real runs ----------------------------------------------------------------------------------------

def test_a_real_oversubscribed_run_names_oversubscription(tmp_path):
    from conftest import mpirun, write_case

    from solver.core.machine import cpu_count

    case = write_case(tmp_path / "o.yaml", grid={"nx": 64, "ny": 48}, backend={"name": "numba"}, run={"steps": 50})
    res = mpirun(2, ["run", str(case), "-q", "--threads", str(cpu_count())]) if _mpi() else None
    if res is None:
        pytest.skip("no mpirun with mpi4py here")
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "out_o" / "record.json").read_text())
    assert rec["bottleneck"].startswith(f"oversubscription: 2 rank(s) with {2 * cpu_count()} thread(s) in all")


def test_a_real_two_rank_run_takes_comm_plus_wait_per_rank(tmp_path):
    """The issue's case (mpirun -n 2 --balance dynamic): the comm + wait figure is one rank's, from timings.csv."""
    import csv

    from conftest import mpirun, write_case

    if not _mpi():
        pytest.skip("no mpirun with mpi4py here")
    case = write_case(tmp_path / "c.yaml", grid={"nx": 256, "ny": 128}, backend={"name": "numba", "threads": 1},
                      run={"steps": 400, "check_every": 10})
    res = mpirun(2, ["run", str(case), "-q", "--balance", "dynamic"])
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out_c"
    rec = json.loads((out / "record.json").read_text())
    rows = list(csv.DictReader(open(out / "timings.csv")))
    per_rank = [(float(r["comm"]) + float(r["wait"])) / (float(r["loop"]) - float(r["io"])) for r in rows]
    cw = rec["timings"]["comm_wait_fraction"]
    assert cw["max"] == pytest.approx(min(max(per_rank), 1.0)) and cw["max"] <= 1.0
    assert cw["max"] <= rec["timings"]["comm_fraction"]["max"] + rec["timings"]["wait_fraction"]["max"] + 1e-12
    assert max(percentages(rec["bottleneck"].split("copy")[0]), default=0) <= 100
    if rec["bottleneck"].startswith("communication"):
        assert f"up to {cw['max']:.0%} of the loop (rank {cw['rank']}:" in rec["bottleneck"]


def _mpi() -> bool:
    from conftest import mpirun_command

    return mpirun_command() is not None


def gpu_row(launch, time_tile):
    device = {"device": "H200", "gpu_index": 0, "time_tile": time_tile,
              "kernels": {"4096x4096": {"kernel": "wave2", "block": [32, 147], "time_tile": time_tile, "launch": launch}}}
    return row(compute=0.95, other=0.05, comm=0.0, wait=0.0, device=device)


def test_gpu_time_tiles_name_warps_against_slots_and_the_l2_not_dram():
    """4096^2 float64 with wave2 k = 8 at 2.8x the copy-bound rate: a pass moves 35% of the copy rate,
    so the line names the launch (warps against warp slots) and the L2, never memory bandwidth."""
    launch = {"warps": 1036, "slots": 1056, "warps_per_sm": 8, "waves": 1036 / 1056, "segment_rows": 147, "strips": 37,
              "registers": 250, "field_bytes": 4096 * 4096 * 8, "l2_bytes": 60 << 20, "sms": 132}
    text = line([gpu_row(launch, 8)], frac=2.8, on_gpu=True)
    assert text.startswith("latency at low occupancy: 1036 warps launched for 1056 warp slots (8 per multiprocessor "
                           "at 250 registers a thread; 0.98 waves)"), text
    assert "a pass of 8 steps moves 35% of the copy bandwidth" in text and "the fields (256 MiB) are 4.3x the 60 MiB L2" in text
    assert "memory bandwidth" not in text
    small = dict(launch, field_bytes=2048 * 2048 * 4)
    assert "both fields (32 MiB) fit in the 60 MiB L2" in line([gpu_row(small, 8)], frac=2.0, on_gpu=True)
    assert line([gpu_row(launch, 2)], frac=1.8, on_gpu=True).startswith("data reused from cache")  # 90% a pass: DRAM


def test_gpu_on_chip_names_the_chip_not_memory():
    launch = {"on_chip": True, "blocks": 128, "threads": 512, "tile_rows": 16, "shared_bytes": 204800, "sms": 132,
              "field_bytes": 2048 * 2048 * 8, "l2_bytes": 60 << 20}
    text = line([gpu_row(launch, 256)], frac=4.2, on_gpu=True)
    assert text.startswith("on chip: the field (32 MiB) stays in the registers and shared memory of 128 blocks "
                           "(512 threads, 16 rows each; 132 multiprocessors) for up to 256 steps per launch"), text
    assert "memory bandwidth" not in text


# The regimes a user meets, each with the advice it must give and the advice it must never give. `tp` adds to
# line()'s throughput; a GPU row is on_gpu. One place lists them, so a new rule is checked against all.
REGIMES = {
    "one rank, memory-bound 4096^2": (dict(rows=[row()], frac=0.85), "memory bandwidth: 85%", ["rank"]),
    "one rank, below the copy rate on a large grid": (dict(rows=[row()], frac=0.4), "kernel efficiency: 40%",
                                                      ["fewer ranks"]),
    "one rank, multigrid coarse levels": (dict(rows=[row()], frac=0.3, tp={"level_shares": [0.3, 0.4, 0.3]}),
                                          "multigrid coarse levels", ["fewer ranks"]),
    "tiny grid 64^2, one rank: per-step overhead": (
        dict(rows=[row(points=64 * 64)], frac=0.02, step=3e-4), "per-step overhead: 0.300 ms per step (at the copy "
        "rate its data would move in 6.0 us)", ["better kernel", "SIMD", "more threads", "fewer ranks"]),
    "tiny grid 64^2 on two ranks": (dict(rows=ranks(2, points=32 * 64), frac=0.05, step=2e-4), "per-step overhead",
                                    ["better kernel", "SIMD"]),
    "in cache: the working set fits in the last-level cache": (
        dict(rows=[row(points=256 * 256)], frac=2.4), "data reused from cache: 240%", ["kernel", "fewer ranks"]),
    "in cache: time tiles": (dict(rows=[row(time_tile=8)], frac=2.9), "data reused from cache: 290%",
                             ["fewer ranks", "better kernel"]),
    "launch-bound GPU": (dict(rows=[row(compute=0.3, other=0.6, device={"device": "gpu", "time_tile": 1})],
                              frac=0.2, on_gpu=True), "GPU launch gaps: the kernels (CUDA events) run 30%",
                         ["fewer ranks", "better kernel"]),
    "comm-bound, 8 ranks": (dict(rows=ranks(8, compute=0.5, comm=0.2, wait=0.2, other=0.1), frac=0.5),
                            "communication: comm + wait take up to 40%", ["better kernel"]),
    "GPU multigrid, sweeps two a pass, below the copy rate": (
        dict(rows=[row(device={"device": "gpu", "time_tile": 1})], frac=1.1, on_gpu=True,
             tp={"fraction_of_copy_made": 0.45, "tiled_levels": 8}),
        "kernel efficiency: the passes the cycle makes (sweeps two a pass on 8 level(s), the residual, the "
        "prolongation and the stop test inside them) move 45% of the copy bandwidth (20.0 GB/s); the cycle takes "
        "0.91x the copy-bound time of a plain cycle's passes", ["L2", "cache", "fewer ranks"]),
    "GPU multigrid, sweeps two a pass, at the copy rate": (
        dict(rows=[row(device={"device": "gpu", "time_tile": 1})], frac=2.0, on_gpu=True,
             tp={"fraction_of_copy_made": 0.85, "tiled_levels": 3}),
        "memory bandwidth: the passes the cycle makes", ["L2", "cache", "better kernel"]),
    "GPU multigrid, sweeps two a pass, levels in L2": (
        dict(rows=[row(device={"device": "gpu", "time_tile": 1})], frac=3.0, on_gpu=True,
             tp={"fraction_of_copy_made": 1.4, "tiled_levels": 3}),
        "data reused from cache: the passes the cycle makes", ["better kernel", "fewer ranks"]),
    "oversubscribed: 4 ranks x 2 threads on 4 cores": (
        dict(rows=[row(rank=r, affinity="0-3", threads=2) for r in range(4)], frac=0.5),
        "oversubscription: 4 rank(s) with 8 thread(s) in all on 4 core(s)", ["better kernel"]),
}


@pytest.mark.parametrize("regime", list(REGIMES))
def test_each_regime_gets_its_sentence_and_never_the_wrong_advice(regime, monkeypatch):
    monkeypatch.setattr(record, "last_level_cache_bytes", lambda cores=None: 32 << 20)
    spec, start, never = REGIMES[regime]
    spec = dict(spec)
    extra, rows = spec.pop("tp", {}), spec.pop("rows")
    tp = {"seconds_per_step": spec.get("step", 1e-2), "fraction_of_copy": spec["frac"], "copy_gbs": 20.0, **extra}
    text = record.bottleneck(tp, record.section_stats(rows), rows, "float64", spec.get("on_gpu", False))
    assert text.startswith(start), text
    for words in never:
        assert words not in text, (words, text)
    if len(rows) == 1:
        assert "ranks help" not in text and "fewer ranks" not in text


@pytest.mark.parametrize("frac", [0.02, 0.3, 0.6, 0.9, 1.05, 1.5, 3.0])
@pytest.mark.parametrize("step", [1e-5, 3e-4, 1e-2])
def test_a_one_rank_run_is_never_told_to_use_fewer_ranks(frac, step, monkeypatch):
    monkeypatch.setattr(record, "last_level_cache_bytes", lambda cores=None: 32 << 20)
    for extra in ({}, {"level_shares": [0.2, 0.5, 0.3]}):
        tp = {"seconds_per_step": step, "fraction_of_copy": frac, "copy_gbs": 20.0, **extra}
        text = record.bottleneck(tp, record.section_stats([row()]), [row()], "float64", False)
        assert "fewer ranks" not in text and "ranks help" not in text, text
