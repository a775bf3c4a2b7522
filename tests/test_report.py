"""Reports: a real strong sweep and a real traced 2-rank run, their figures checked as objects and as PNGs."""

import json
import shlex

import numpy as np
import pytest
from conftest import mpirun, mpirun_command, needs_mpi, stencil, write_case

from solver.results import report


@pytest.fixture(scope="module")
def strong(tmp_path_factory):
    """`stencil sweep strong` of a tiny verified case at 1 and 2 ranks, then `stencil report`."""
    tmp = tmp_path_factory.mktemp("strong")
    env = {"STENCIL_CACHE_DIR": str(tmp_path_factory.getbasetemp() / "stencil-cache"), "STENCIL_BANDWIDTH_MIB": "64"}
    case = write_case(tmp / "strong.yaml", grid={"nx": 40, "ny": 24}, run={"steps": 60, "check_every": 20},
                      backend={"name": "numba"}, verify=True)
    exe, *flags = mpirun_command()
    out = tmp / "sweep"
    p = stencil(["sweep", "strong", str(case), "--ranks", "1,2", "-o", str(out), "--launcher", exe,
                 "--launcher-args", shlex.join(flags)], env=env)
    assert p.returncode == 0, p.stderr
    r = stencil(["report", str(out)], env=env)
    assert r.returncode == 0, r.stderr
    return out


def png_ok(path):
    """A valid PNG: the signature, and matplotlib's own reader decodes it to a non-blank RGBA image."""
    import matplotlib.image

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 300 and np.ptp(img[..., :3]) > 0
    return img


def labelled(ax):
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel() and (ax.get_legend() or ax.figure.legends)
    assert "(" in ax.get_ylabel()  # units or a definition in brackets


@needs_mpi
def test_sweep_csv_matches_the_records(strong):
    import csv

    rows = list(csv.DictReader(open(strong / "sweep.csv")))
    assert [(r["ranks"], r["local_ny"], r["local_nx"]) for r in rows] == [("1", "24", "40"), ("2", "12", "40")]
    for r in rows:
        rec = json.loads((strong / r["record"]).read_text())
        assert float(r["seconds_per_step"]) == rec["throughput"]["seconds_per_step"]
        assert float(r["mlups"]) == rec["throughput"]["mlups"]
        assert float(r["copy_gbs"]) == rec["throughput"]["copy_gbs"]
        assert float(r["fraction_of_copy"]) == rec["throughput"]["fraction_of_copy"]
        assert float(r["wait_fraction"]) == rec["timings"]["wait_fraction"]["max"]
        assert rec["resources"]["ranks"] == int(r["ranks"]) and rec["case"]["grid"] == {"nx": 40, "ny": 24, "lx": 1.0, "ly": 1.0}


@needs_mpi
def test_sweep_figures_have_the_expected_series(strong):
    res = report.load_sweep(strong)
    scaling = report.fig_scaling(res)
    a, b = scaling.axes
    assert [len(ax.get_lines()) for ax in (a, b)] == [2, 2]  # measured + ideal on each
    assert list(a.get_lines()[1].get_ydata()) == [1, 2] and list(b.get_lines()[1].get_ydata()) == [1.0, 1.0]
    np.testing.assert_allclose(a.get_lines()[0].get_ydata(), [r["speedup"] for r in res["rows"]])
    for ax in (a, b):
        labelled(ax)
    for fig in (scaling, report.fig_breakdown(res), report.fig_bandwidth(res)):
        assert not outside_canvas(fig), outside_canvas(fig)

    (ax,) = report.fig_breakdown(res).axes
    labelled(ax)
    assert len(ax.containers) == 5 and all(len(c) == 2 for c in ax.containers)  # 5 sections x 2 points
    heights = np.sum([[bar.get_height() for bar in c] for c in ax.containers], axis=0)
    for h, r in zip(heights, res["rows"]):  # the stack is the mean loop time per step
        loop = np.mean([t["loop"] / t["steps"] for t in r["_timings"]]) * 1e3
        assert h == pytest.approx(loop, rel=0.05)

    bw = report.fig_bandwidth(res)
    left, roof = bw.axes
    labelled(left)
    labelled(roof)
    assert len(left.get_lines()) == 2  # achieved + ceiling
    np.testing.assert_allclose(left.get_lines()[1].get_ydata(), [r["copy_gbs"] for r in res["rows"]])
    ceilings = len({r["copy_gbs"] for r in res["rows"]})
    tps = [r["_record"]["throughput"] for r in res["rows"]]
    peaks = {k: sorted({tp[f"peak_{k}_gflops"] for tp in tps}) for k in ("mul_add", "fma")}
    roofs = sum(min(len(p), 2) for p in peaks.values())
    assert len(roof.get_lines()) == min(ceilings, 2) + roofs + len(tps) + 1  # memory and compute roofs, a point each, the marker
    drawn = [line.get_ydata()[0] for line in roof.get_lines() if "compute roof" in line.get_label()]
    assert sorted(drawn) == sorted(p for v in peaks.values() for p in {v[0], v[-1]})  # the records' measured peaks
    labels = [line.get_label() for line in roof.get_lines() if "roof" in line.get_label()]
    assert labels and all(" at 1 rank(s): " in t or " at 2 rank(s): " in t for t in labels), labels  # whose roof
    assert len(set(labels)) == len(labels)  # no two entries alike


def test_the_model_figure_is_titled_by_what_it_plots():
    """Milliseconds per step, measured and predicted: the title says so (not a ratio)."""
    rows = [{"status": "ok", "ranks": n, "seconds_per_step": 1e-3 * n, "predicted_seconds_per_step": 1.1e-3 * n,
             **{f"predicted_{p}": 2.5e-4 * n for p in report.MODEL_PARTS}} for n in (1, 2)]
    a, b = report.fig_model({"kind": "strong", "rows": rows}).axes
    assert a.get_ylabel() == "ms per step" and "over" not in a.get_title() and "predicted" in a.get_title()
    np.testing.assert_allclose(a.get_lines()[1].get_ydata(), [1.0, 2.0])


@needs_mpi
def test_sweep_report_files(strong):
    for name in ("scaling.png", "breakdown.png", "bandwidth.png"):
        png_ok(strong / name)
    md = (strong / "report.md").read_text()
    for section in ("## Problem", "## Hardware and software", "## Serial baseline", "## Parallel design",
                    "## Correctness evidence", "## Benchmark method", "## Charts", "## Bottleneck analysis",
                    "## Limitations and next steps"):
        assert section in md
    assert md.count("| PASS |") == 2 and "](scaling.png)" in md and "1 rank(s) x 1 thread(s) on 24 x 40" in md


@needs_mpi
def test_run_report_with_a_trace(tmp_path):
    case = write_case(tmp_path / "tr.yaml", grid={"nx": 30, "ny": 20}, run={"steps": 30, "check_every": 10},
                      backend={"name": "numpy"}, output={"dir": str(tmp_path / "run"), "trace": True})
    p = mpirun(2, ["run", str(case), "-q"], env={"STENCIL_CACHE_DIR": str(tmp_path / "c"), "STENCIL_BANDWIDTH_MIB": "8"})
    assert p.returncode == 0, p.stderr
    run = tmp_path / "run"
    (ax,) = report.fig_ranks(report.load_timings(run)).axes
    labelled(ax)
    assert len(ax.containers) == 5 and all(len(c) == 2 for c in ax.containers)  # 5 sections x 2 ranks
    trace = json.loads((run / "trace.json").read_text())
    (tl,) = report.fig_timeline(trace).axes
    for fig in (report.fig_ranks(report.load_timings(run)), report.fig_timeline(trace),
                report.fig_run_bandwidth(json.loads((run / "record.json").read_text()))):
        assert not outside_canvas(fig), outside_canvas(fig)
    assert tl.get_title().startswith("Per-rank timeline") and tl.get_xlabel().endswith("(ms)")
    assert {int(t) for t in tl.get_yticks()} == {0, 1}
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    first = min(e["args"]["step"] for e in events)
    sections = {e["name"] for e in events if e["args"]["step"] < first + report.TIMELINE_STEPS}
    assert first >= 1 and {"compute", "comm", "wait"} <= sections  # the warm-up step is not in the trace
    assert {t.get_text() for t in tl.get_legend().get_texts()} == sections
    assert len(tl.collections) >= 2 * 2  # at least compute and one halo section on each rank
    bars, roof = report.fig_run_bandwidth(json.loads((run / "record.json").read_text())).axes
    rec = json.loads((run / "record.json").read_text())
    assert rec["throughput"]["peak_mul_add_gflops"] > 0 and rec["throughput"]["peak_fma_gflops"] > 0
    assert len(bars.patches) == 2 and len(roof.get_lines()) == 5  # memory roof, two compute roofs, point, marker
    out = tmp_path / "rep"
    r = stencil(["report", str(run), "-o", str(out)])
    assert r.returncode == 0, r.stderr
    for name in ("ranks.png", "bandwidth.png", "timeline.png"):
        png_ok(out / name)
    md = (out / "report.md").read_text()
    assert "(one run)" in md and "](timeline.png)" in md and "## Limitations and next steps" in md


def test_report_on_a_directory_without_results(tmp_path):
    p = stencil(["report", str(tmp_path)])
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "neither a sweep" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_bar_chart_legends_sit_beside_the_bars_not_on_them():
    """ranks.png and breakdown.png: the legend's box does not overlap the axes that hold the bars."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from solver.results import report

    rows = [{"rank": r, "compute": 1.0 + r, "comm": 0.2, "wait": 0.3, "io": 0.1, "other": 0.05, "loop": 1.7 + r,
             "steps": 10} for r in range(4)]
    res = {"kind": "strong", "rows": [{"status": "ok", "ranks": n, "threads": 1, "_timings": rows} for n in (1, 2)]}
    for fig in (report.fig_ranks(rows), report.fig_breakdown(res)):
        FigureCanvasAgg(fig).draw()
        renderer = fig.canvas.get_renderer()
        (ax,) = fig.axes
        box = ax.get_window_extent(renderer)
        for legend in [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]:
            lb = legend.get_window_extent(renderer)
            assert lb.x0 >= box.x1 or lb.x1 <= box.x0 or lb.y0 >= box.y1 or lb.y1 <= box.y0, (lb, box)


def outside_canvas(fig) -> list[str]:
    """Titles, axis labels and legends drawn (Agg, the figure's default size) that do not lie whole inside
    the canvas, or a legend that covers an axes title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    canvas = fig.bbox
    items = [("suptitle", fig._suptitle)] if fig._suptitle else []
    for k, ax in enumerate(fig.axes):
        items += [(f"axes {k} title", ax.title), (f"axes {k} xlabel", ax.xaxis.label),
                  (f"axes {k} ylabel", ax.yaxis.label)]
        items += [(f"axes {k} legend", ax.get_legend())] if ax.get_legend() else []
    items += [(f"figure legend {k}", leg) for k, leg in enumerate(fig.legends)]
    bad = []
    for name, artist in items:
        if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
            continue
        b = artist.get_window_extent(r)
        if b.x0 < canvas.x0 - 1 or b.y0 < canvas.y0 - 1 or b.x1 > canvas.x1 + 1 or b.y1 > canvas.y1 + 1:
            bad.append(f"{name} {b.bounds} outside the canvas {canvas.bounds}")
    titles = [ax.title.get_window_extent(r) for ax in fig.axes if ax.get_title()]
    for name, artist in items:
        if "legend" in name:
            lb = artist.get_window_extent(r)
            bad += [f"{name} covers an axes title" for t in titles if lb.overlaps(t)]
    return bad


def test_every_bench_figure_keeps_its_title_and_legend_inside_the_canvas():
    """The figures of `stencil report` on the benchmark results kept in docs/bench (real JSON), at their
    default size."""
    from conftest import ROOT

    found = {}
    for d in ("docs/bench/2026-12-01-xeon2", "docs/bench/2026-11-30-h200-cpu16"):
        found.update(report.load_bench_results(ROOT / d))
    figs, _ = report.bench_report(found)
    assert {"allreduce.png"} < set(figs) and any(n.startswith("access") for n in figs), list(figs)
    assert any(res["bench"] == "mpi_scaling" for res in found.values())
    for name, fig in figs.items():
        assert not outside_canvas(fig), (name, outside_canvas(fig))


def test_bar_charts_keep_title_and_legend_inside_the_canvas():
    rows = [{"rank": r, "compute": 1.0 + r, "comm": 0.2, "wait": 0.3, "io": 0.1, "other": 0.05, "loop": 1.7 + r,
             "steps": 10} for r in range(4)]
    tp = {"flops_per_update": 7, "bytes_per_update": 16, "gflops": 10.0, "copy_gbs": 20.0, "peak_mul_add_gflops": 200.0,
          "peak_fma_gflops": 400.0, "effective_gbs": 18.0, "seconds_per_step": 1e-3, "mlups": 1000.0}
    weak = ("weak scaling: every rank owns nx x ny = 4096 x 4096 points; the global grid is (px*4096) x (py*4096) "
            "with (py, px) the most nearly square pair, py >= px (cart decomposition); lx, ly grow with it so dx, "
            "dy and dt stay fixed")
    res = {"kind": "weak", "case_name": "heat_4096", "growth": weak, "date": "2026-12-01 12:00",
           "machine": {"cpu": "AMD EPYC 9B14 96-Core Processor", "cores_usable": 2},
           "rows": [{"status": "ok", "ranks": n, "threads": 1, "_timings": rows, "speedup": 0.9 * n,
                     "efficiency": 0.9, "effective_gbs": 18.0 * n, "copy_gbs": 20.0 * n, "_record": {"throughput": tp}}
                    for n in (1, 2)]}
    run = {"throughput": tp, "resources": {"ranks": 2}}
    first = np.kron(np.arange(64.0).reshape(8, 8), np.ones((64, 64)))
    views = {"first": first, "last": first[::-1], "steps": (0, 2000), "times": (0.0, 2.68e-5),
             "extent": (0.0, 1.0, 0.0, 1.0)}
    for fig in (report.fig_ranks(rows), report.fig_breakdown(res), report.fig_scaling(res), report.fig_bandwidth(res),
                report.fig_run_bandwidth(run), report.fig_fields(views, "heat_4096")):
        assert not outside_canvas(fig), outside_canvas(fig)
