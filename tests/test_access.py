"""`stencil bench access` in its smoke form (small sizes, about a second) and its figure in `stencil report`.

Structure and sanity only: every pattern at every size, positive finite rates, the bytes counted, every
element read exactly once (the exact sum), the caches in the JSON, the PNG read back. No assertion about
which pattern is faster: that is a measurement (BENCHMARKS.md), not a test.
"""

import json
import math

import numpy as np
import pytest
from conftest import mpirun, needs_mpi, stencil

from solver.bench import access
from solver.core.errors import InputError
from solver.core.machine import cpu_caches

SIZES = [4 << 10, 64 << 10, 1 << 20]
STRIDES = [2, 8, 64]


@pytest.fixture(scope="module")
def smoke():
    return access.access_bench(["numba"], 2, SIZES, STRIDES, repeats=2, min_seconds=0.002, say=lambda _: None)


def test_every_pattern_at_every_size_has_a_positive_finite_rate(smoke):
    expected = {"contiguous", "stride 2", "stride 8", "stride 64", "random", "rows", "cols"}
    for nbytes in SIZES:
        got = {access.label(r): r for r in smoke["results"] if r["bytes"] == nbytes}
        assert set(got) == expected, nbytes
        for r in got.values():
            assert math.isfinite(r["gbs"]) and r["gbs"] > 0 and r["passes"] >= 1
            assert r["gbs"] == pytest.approx(nbytes / r["seconds_per_pass"] / 1e9)  # bytes per pass = the array
            lo, hi = r["gbs_spread"]
            assert lo <= r["gbs"] <= hi
            assert r["sum_exact"], access.label(r)  # every element read exactly once per pass
    assert len(smoke["results"]) == len(SIZES) * len(expected)


def test_json_has_the_cache_sizes(smoke, tmp_path):
    out = tmp_path / "access.json"
    p = stencil(["bench", "access", "--sizes", "4K,64K", "--strides", "2,16", "--threads", "1", "--repeats", "1",
                 "--min-time", "0.001", "--json", str(out)])
    assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())
    assert res["bench"] == "access" and res["sizes"]["numba"] == [4 << 10, 64 << 10]
    caches = cpu_caches()
    assert res["caches"]["cpu"] == caches
    if caches:  # Linux with sysfs: every level marked, with its capacity for one thread
        assert [m["bytes"] for m in res["marks"]["numba"]] == [c["bytes"] for c in caches]
        assert all(m["label"].startswith(f"L{c['level']} ") for m, c in zip(res["marks"]["numba"], caches))
    assert "contiguous" in p.stdout and "L1" in p.stdout


def test_report_draws_the_png_with_the_caches(smoke, tmp_path):
    import matplotlib.image

    from solver.results.report import fig_access, make_report

    (tmp_path / "access_smoke.json").write_text(json.dumps(smoke))
    make_report(tmp_path)
    png = matplotlib.image.imread(tmp_path / "access_smoke.png")
    assert png.ndim == 3 and png.shape[0] > 200 and png.shape[1] > 400 and png[..., :3].std() > 0.05
    assert "access_smoke.png" in (tmp_path / "report.md").read_text()
    fig = fig_access(smoke, "numba")
    left, right = fig.axes
    assert len(left.get_lines()) - len(smoke["marks"]["numba"]) == 1 + len(STRIDES) + 1  # + one line per cache
    assert len(right.get_lines()) - len(smoke["marks"]["numba"]) == 2
    labels = {t.get_text() for t in left.texts}
    assert labels == {m["label"] for m in smoke["marks"]["numba"]}


def test_a_pattern_that_misses_an_element_is_caught():
    x, ref = access.data(1000)
    honest = access.Pattern("contiguous", 1, lambda passes: (1e-3, passes * int(x.sum())))
    broken = access.Pattern("strided", 2, lambda passes: (1e-3, passes * int(x[1:].sum())))
    rows = access.measure_size([honest, broken], x.nbytes, ref, repeats=2, min_seconds=1e-4)
    assert [r["sum_exact"] for r in rows] == [True, False]


@pytest.mark.parametrize("threads", [1, 3])
def test_kernels_read_every_element_once(threads):
    from solver.bench import access_cpu as k

    x, ref = access.data(1 << 12)
    x[::7] += 1000  # distinct weights: a skipped or repeated element changes the sum
    ref = int(x.sum())
    a = x.reshape(access.shape_2d(x.size))
    assert a.shape == (64, 64)
    index = k.slice_permutation(x.size, threads)
    cuts = [t * x.size // threads for t in range(threads + 1)]
    for lo, hi in zip(cuts[:-1], cuts[1:]):  # a permutation of each thread's own slice
        assert np.array_equal(np.sort(index[lo:hi]), np.arange(lo, hi))
    assert k.contiguous(x, threads, 3) == 3 * ref
    for s in (2, 5, 64, 1000):  # strides that do not divide the slices too
        assert k.strided(x, s, threads, 2) == 2 * ref, s
    assert k.gather(x, index, threads, 2) == 2 * ref
    assert k.rows(a, threads, 2) == k.cols(a, threads, 2) == 2 * ref


def test_scalar_kernels_have_no_gathers_and_contiguous_is_simd():
    """strided/gather/cols are compiled with the vectorisers off (access_cpu docstring); contiguous is SIMD."""
    import re

    from numba import njit

    from solver.bench import access_cpu as k

    for name, fn in k.SCALAR_SOURCES.items():
        asm = "\n".join(k.scalar(fn, cache=False).inspect_asm().values())
        assert not re.search(r"^\s*v?p?gather", asm, re.M), name
        assert not re.search(r"^\s*v?padd[bwdq]\s", asm, re.M), name
    fresh = njit(parallel=True)(k.contiguous.py_func)
    x, ref = access.data(4096)
    assert fresh(x, 1, 1) == ref
    asm = "\n".join(fresh.inspect_asm().values())
    assert re.search(r"^\s*v?paddq\s", asm, re.M), "the contiguous sum is not vectorised"


def test_sizes_strides_and_marks():
    assert access.parse_sizes("4K-64K") == [4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10]
    assert access.parse_sizes("1M,4K") == [4 << 10, 1 << 20]
    for bad in ("3K", "2K", "4K,x", "16G", ""):
        with pytest.raises(InputError, match="--sizes"):
            access.parse_sizes(bad)
    sizes = access.default_sizes(48 << 20)
    assert sizes[0] == 4 << 10 and sizes[-1] == 256 << 20 and sizes[-2] < 4 * (48 << 20) <= sizes[-1]
    caches = [{"level": 1, "type": "Data", "bytes": 48 << 10, "shared_by": 1, "line_bytes": 64},
              {"level": 3, "type": "Unified", "bytes": 32 << 20, "shared_by": 8, "line_bytes": 64}]
    marks = access.cpu_marks(caches, 4)
    assert [m["bytes"] for m in marks] == [4 * (48 << 10), 32 << 20]  # private x threads, shared once
    assert [m["label"] for m in marks] == ["L1 4x48 KiB", "L3 32 MiB"]


def test_cpu_caches_from_a_sysfs_tree(tmp_path):
    def index(k, level, kind, size, shared):
        d = tmp_path / f"index{k}"
        d.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared),
                           ("coherency_line_size", "64")):
            (d / name).write_text(f"{text}\n")

    index(0, 1, "Data", "48K", "0")
    index(1, 1, "Instruction", "32K", "0")
    index(2, 2, "Unified", "1280K", "0")
    index(3, 3, "Unified", "49152K", "0-1,4")
    got = cpu_caches(tmp_path)
    assert [(c["level"], c["bytes"], c["shared_by"]) for c in got] == [(1, 48 << 10, 1), (2, 1280 << 10, 1),
                                                                      (3, 48 << 20, 3)]


def test_bad_sizes_are_one_line_exit_2():
    p = stencil(["bench", "access", "--sizes", "3K"])
    assert p.returncode == 2 and "--sizes" in p.stderr and "Traceback" not in p.stderr
    p = stencil(["bench", "access", "--backend", "numpy"])
    assert p.returncode == 2 and "--backend" in p.stderr


@needs_mpi
def test_allreduce_by_message_size_and_its_figure(tmp_path):
    import matplotlib.image

    from solver.results.report import make_report

    for n in (1, 2):
        p = mpirun(n, ["bench", "reduction", "--size", "20000", "--lock-size", "1000", "--threads", "1", "--no-gpu",
                       "--repeats", "1", "--json", str(tmp_path / f"reduction_{n}.json")])
        assert p.returncode == 0, p.stderr
        res = json.loads((tmp_path / f"reduction_{n}.json").read_text())
        rows = res["allreduce_by_size"]
        assert res["ranks"] == n and [r["bytes"] for r in rows] == [8 * e for e in (1, 8, 64, 512, 4096, 32768,
                                                                                    262144, 2097152)]
        assert all(r["passed"] and r["seconds"] > 0 for r in rows)
    make_report(tmp_path)
    assert matplotlib.image.imread(tmp_path / "allreduce.png").shape[0] > 200


def _gpu_reason():
    from solver.backends import registry

    return registry()["cupy"].unavailable()


@pytest.mark.gpu
@pytest.mark.skipif(_gpu_reason() is not None, reason="no cupy GPU here")
def test_gpu_patterns_read_every_element_once():
    res = access.access_bench(["cupy"], 1, [4 << 10, 1 << 20, 16 << 20], [2, 32], repeats=2, min_seconds=0.002,
                              say=lambda _: None)
    assert res["caches"]["gpu"]["l2_bytes"] > 0 and res["marks"]["cupy"][0]["label"].startswith("L2 ")
    assert len(res["results"]) == 3 * 6  # contiguous, 2 strides, random, rows, cols
    for r in res["results"]:
        assert r["sum_exact"] and math.isfinite(r["gbs"]) and r["gbs"] > 0, access.label(r)


def test_report_draws_mpi_scaling_rows(tmp_path):
    """tools/cpu_scaling.py JSON lines in a results directory: the scaling figure docs/answers.md uses."""
    import shutil

    import matplotlib.image
    from conftest import ROOT

    from solver.results.report import fig_mpi_scaling, load_scaling_rows, make_report

    src = ROOT / "docs" / "bench" / "2026-11-30-h200x2-cpu" / "scaling_a.jsonl"
    shutil.copy(src, tmp_path / "scaling_a.jsonl")
    (tmp_path / "notes.jsonl").write_text('{"other": 1}\n')  # not scaling rows: ignored
    make_report(tmp_path)
    assert matplotlib.image.imread(tmp_path / "scaling_a.png").shape[1] > 600
    assert not (tmp_path / "notes.png").exists()
    rows = load_scaling_rows(src)
    strong, weak, bandwidth = fig_mpi_scaling(rows, "test").axes
    combos = {(r["decomposition"], r["halo"]) for r in rows if r["scaling"] == "strong"}
    drawn = {c for c in combos if c[1] in ("blocking", "overlap")}
    assert len(strong.get_lines()) == 1 + len(drawn)  # ideal + one per decomposition and halo shown
