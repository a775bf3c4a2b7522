"""`stencil report DIR`: PNG charts and report.md for a sweep (sweep.json), a run (record.json), or a directory
of benchmark results (`stencil bench access` / `bench reduction` JSON files).

Sweep charts: scaling.png (speedup against ideal, efficiency), breakdown.png (compute / comm / wait /
other per step for each point, mean over ranks), bandwidth.png (achieved effective bandwidth against
the copy ceiling, and a roofline view: attainable GFLOP/s = ceiling x arithmetic intensity, under the
compute roofs measured with the same ranks and threads: multiply + add and fused multiply-add peaks).
Run charts: ranks.png (sections per rank), bandwidth.png, timeline.png (per-rank trace, when the run
wrote trace.json). Benchmark results: <stem>.png per `bench access` JSON (GB/s by array size per access
pattern, the caches drawn as labelled vertical lines), allreduce.png from the `bench reduction` JSONs run
under MPI (MPI_Allreduce time by message size, a line per rank count), <stem>.png per tools/cpu_scaling.py
JSON-lines file (speedup and bandwidth against ranks). Figures
are built as matplotlib Figure objects (no pyplot state, Agg canvas) so tests can count their series; every axis has a label with units, every chart a title and a legend.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from .maps import has_maps, maps, outlines
from .figure import new_figure
from .probes import CAPTION as PROBES_CAPTION, probe_figures

SECTION_COLOURS = {"compute": "tab:blue", "comm": "tab:orange", "wait": "tab:red", "io": "tab:purple",
                   "other": "tab:gray"}
TIMELINE_STEPS = 8
TITLES = {"strong": "Strong", "weak": "Weak", "threads": "Thread"}  # steps shown in the timeline (the first timed ones)


# loading: every input read is checked against what the report uses, before any figure is drawn -------

def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _pair(v) -> bool:
    return isinstance(v, list) and len(v) == 2


ANY = (lambda v: True, "anything")
NUM = (_number, "a finite number")
INT = (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number")
TEXT = (lambda v: isinstance(v, str), "text")
LIST = (lambda v: isinstance(v, list), "a list")
OBJECT = (lambda v: isinstance(v, dict), "an object")
PAIR = (_pair, "a list of two")
TEXTS = (lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v), "a list of texts")
NAMED = (lambda v: isinstance(v, list) and all(isinstance(g, dict) and "name" in g for g in v), "a list of objects with a name")
VERDICT = (lambda c: isinstance(c, dict) and (c.get("passed") is None or (isinstance(c["passed"], bool) and _number(
    c.get("relative_error")) and _number(c.get("tolerance")))), "an object with passed, relative_error and tolerance")


class Optional_:
    """A spec whose value may be absent or null."""

    def __init__(self, spec):
        self.spec = spec


THROUGHPUT = {"effective_gbs": NUM, "seconds_per_step": NUM, "mlups": NUM,  # the rest: not in multigrid records
              **{k: Optional_(NUM) for k in ("gflops", "flops_per_update", "bytes_per_update", "copy_gbs",
                                             "fraction_of_copy", "peak_mul_add_gflops", "peak_fma_gflops")}}
RECORD = {  # what the report reads of a record.json
    "input": {"name": ANY, "equation": TEXT, "nx": INT, "ny": INT, "dtype": ANY, "initial": ANY,
              "weights": {"wc": NUM, "wx": NUM, "wy": NUM}},
    "run": {"steps": INT}, "stencil": {"backend": ANY}, "bottleneck": ANY, "correctness": VERDICT,
    "environment": {**{k: ANY for k in ("host", "cpu", "cores", "cores_usable", "memory_gb", "os", "python",
                                        "mpi_library", "stencil", "git_commit")}, "libraries": OBJECT,
                    "gpus": Optional_(NAMED)},
    "resources": {"threads_per_rank": ANY, "decomposition": ANY, "dims": PAIR, "ranks": INT, "halo": ANY,
                  "halo_schedule": ANY},
    "timings": {"comm_fraction": {"max": NUM}, "wait_fraction": {"max": NUM}, "comm_wait_fraction": {"max": NUM},
                "load_imbalance": NUM},
    "throughput": Optional_(THROUGHPUT),
}
POINT = {  # an ok row of sweep.json
    "record": TEXT, "ranks": INT, "threads": INT, "workers": INT, "global_ny": ANY, "global_nx": ANY,
    "speedup": NUM, "efficiency": NUM, "effective_gbs": NUM, "seconds_per_step": NUM, "mlups": NUM,
    "comm_fraction": NUM, "wait_fraction": NUM, "bottleneck": ANY,
    **{k: Optional_(NUM) for k in ("copy_gbs", "fraction_of_copy", "time_min", "time_max", "comm_wait_fraction",
                                   "load_imbalance")}, "repeats_ok": Optional_(INT)}
SWEEP = {"kind": (lambda v: v in TITLES, f"one of {', '.join(TITLES)}"), "case_name": ANY, "growth": ANY,
         "machine": {"cpu": ANY, "cores_usable": ANY}, "date": ANY, "launcher": Optional_(ANY), "command": ANY,
         "repeats": Optional_(INT), "notes": TEXTS,
         "rows": (lambda v: isinstance(v, list) and all(isinstance(r, dict) and isinstance(r.get("status"), str)
                                                       for r in v), "a list of objects with a status")}
TRACE = {"traceEvents": (lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v), "a list of objects")}
EVENT = {"ph": ANY, "name": ANY, "pid": INT, "ts": NUM, "dur": NUM, "args": {"step": INT}}  # each "X" event
PATTERNS = ("contiguous", "strided", "random", "rows", "cols")
ACCESS_ROW = (lambda r: isinstance(r, dict) and r.get("pattern") in PATTERNS and isinstance(r.get("backend"), str)
              and _number(r.get("bytes")) and _number(r.get("gbs")) and r["bytes"] > 0 and r["gbs"] > 0
              and (r["pattern"] != "strided" or isinstance(r.get("stride"), int)),
              "an object with backend, pattern (and stride), bytes and gbs")
MARKS = (lambda v: isinstance(v, dict) and all(isinstance(m, list) and all(
    isinstance(x, dict) and _number(x.get("bytes")) and "label" in x for x in m) for m in v.values()),
    "per backend, a list of caches with bytes and label")
SIZES = (lambda v: isinstance(v, dict) and all(isinstance(m, list) and all(_number(x) and x > 0 for x in m)
                                                for m in v.values()), "per backend, a list of sizes")
ACCESS = {"results": (lambda v: isinstance(v, list) and all(ACCESS_ROW[0](r) for r in v), f"a list of {ACCESS_ROW[1]}"),
          "marks": MARKS, "sizes": SIZES, "cpu": ANY, "date": ANY, "repeats": ANY, "threads": ANY,
          "caches": Optional_(OBJECT)}
ALLREDUCE = {"ranks": INT, "cpu": ANY, "date": ANY,
             "allreduce_by_size": (lambda v: isinstance(v, list) and v != [] and all(
                 isinstance(r, dict) and _number(r.get("bytes")) and _number(r.get("seconds")) and r["bytes"] > 0
                 and r["seconds"] > 0 for r in v), "a list of objects with bytes and seconds > 0")}
SCALING_ROW = {k: TEXT for k in ("scaling", "decomposition", "halo")} | {
    "ranks": INT, "seconds_per_step": NUM, "gbs": NUM, "copy_gbs": NUM, "nx": ANY, "ny": ANY,
    "memcpy_gbs": Optional_(NUM)}
TIMING_COLUMNS = ("rank", "compute", "comm", "wait", "io", "other", "loop", "steps")  # numbers in timings.csv
NUMERIC_COLUMNS = (*TIMING_COLUMNS, "warmup", "points")


def shape_problem(data, spec, where: str = "") -> str | None:
    """Where `data` differs from `spec` (an object of specs, a (test, what) pair, or Optional_), or None."""
    if isinstance(spec, Optional_):
        return None if data is None else shape_problem(data, spec.spec, where)
    if isinstance(spec, dict):
        if not isinstance(data, dict):
            return f"{where or 'the file'} is not an object"
        for key, sub in spec.items():
            name = f"{where}.{key}" if where else key
            if key not in data and not isinstance(sub, Optional_):
                return f"{name} is missing"
            problem = shape_problem(data.get(key), sub, name)
            if problem:
                return problem
        return None
    test, what = spec
    return None if test(data) else f"{where} is {_quote(data)}, not {what}"


def _quote(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def load_json(path: Path, spec=None, again: str = "run the sweep or the case again"):
    """A JSON file the report reads (solver.core.readers), checked against `spec`: InputError naming the file and
    the key otherwise."""
    from ..core.readers import read_json

    data = read_json(path, None, again)
    problem = shape_problem(data, spec) if spec is not None else None
    if problem:
        raise InputError(f"{path}: {problem}; it is damaged or not stencil's: {again}")
    return data


def load_record(path: Path, again: str = "run the case again") -> dict:
    rec = load_json(path, RECORD, again)
    tp = rec.get("throughput") or {}
    if "flops_per_update" in tp and not all(_number(tp.get(k)) for k in ("gflops", "bytes_per_update")):
        raise InputError(f"{path}: throughput has flops_per_update without gflops and bytes_per_update (the roofline "
                         f"needs all three); it is damaged or not stencil's: {again}")
    return rec


def load_trace(path: Path) -> dict:
    trace = load_json(path, TRACE, "run the case again with output.trace: true")
    for i, e in enumerate(e for e in trace["traceEvents"] if e.get("ph") == "X"):
        problem = shape_problem(e, EVENT, f"traceEvents[{i}]")
        if problem:
            raise InputError(f"{path}: {problem}; it is damaged or not stencil's: run the case again")
    if not any(e.get("ph") == "X" for e in trace["traceEvents"]):
        raise InputError(f"{path}: no timed sections (events with ph X); run the case again with output.trace: true")
    return trace


def load_timings(run_dir: Path, again: str = "run the case again") -> list[dict]:
    """timings.csv as numbers: one dict per rank; InputError naming the line and column of a bad value."""
    path = run_dir / "timings.csv"
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read it ({str(exc).splitlines()[0][:80]}); {again}") from None
    if not rows:
        raise InputError(f"{path}: holds no rank rows; {again}")
    out = []
    for i, r in enumerate(rows, start=2):  # line 1 is the header
        row = dict(r)
        for k in NUMERIC_COLUMNS:
            if k not in TIMING_COLUMNS and not r.get(k):
                continue
            try:
                row[k] = float(r.get(k))
                ok = math.isfinite(row[k]) and row[k] >= 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise InputError(f"{path}: line {i}, column {k}: {r.get(k)!r} is not a number >= 0; {again}")
        out.append(row)
    return out


def load_sweep(d: Path) -> dict:
    """sweep.json with each successful row's record and timings attached (every file checked)."""
    res = load_json(d / "sweep.json", SWEEP)
    for i, r in enumerate(r for r in res["rows"] if r["status"] == "ok"):
        problem = shape_problem(r, POINT, f"rows[{i}]")
        if problem:
            raise InputError(f"{d / 'sweep.json'}: {problem}; it is damaged or not stencil's: run the sweep again")
        rel = Path(r["record"])
        if rel.is_absolute() or ".." in rel.parts:
            raise InputError(f"{d / 'sweep.json'}: rows[{i}].record {r['record']!r} is not a path inside {d}; "
                             "run the sweep again")
        r["_record"] = load_record(d / rel, "run the sweep again")
        r["_timings"] = load_timings(d / rel.parent, "run the sweep again")
    return res


def ok_rows(res: dict) -> list[dict]:
    return [r for r in res["rows"] if r["status"] == "ok"]


def count_of(r: dict, kind: str) -> int:
    """The swept number: threads for a threads sweep, ranks otherwise."""
    return r["threads"] if kind == "threads" else r["ranks"]


def axis_name(kind: str) -> str:
    return "numba threads (one process)" if kind == "threads" else "MPI ranks"


# figures: sweep --------------------------------------------------------------------------------

def _log2_axis(ax, counts: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.minorticks_off()


def fig_scaling(res: dict):
    """Speedup against ideal (left) and parallel efficiency against 1 (right)."""
    rows, kind = ok_rows(res), res["kind"]
    n = [count_of(r, kind) for r in rows]
    fig, (a, b) = new_figure(2, 5.2)
    label = "scaled speedup n*T(n0)/T(n)" if kind == "weak" else "speedup n0*T(n0)/T(n)"
    a.plot(n, [r["speedup"] for r in rows], "o-", label="measured")
    a.plot(n, n, "k--", label="ideal (= n)")
    a.set(title=f"{TITLES[kind]} scaling: speedup", xlabel=axis_name(kind), ylabel=f"{label} (x)")
    b.plot(n, [r["efficiency"] for r in rows], "o-", label="measured")
    b.plot(n, [1.0] * len(n), "k--", label="ideal (100%)")
    b.set(title="Parallel efficiency", xlabel=axis_name(kind), ylabel="efficiency = speedup / n (fraction)",
          ylim=(0, max(1.1, max(r["efficiency"] for r in rows) * 1.1)))
    for ax in (a, b):
        _log2_axis(ax, n)
        ax.grid(alpha=0.3)
        ax.legend()
    m = res["machine"]
    suptitle(fig, f"{res['case_name']}: {res['growth']}\n{m['cpu']} ({m['cores_usable']} cores), {res['date']}")
    return fig


def suptitle(fig, text: str, fontsize: float = 8) -> None:
    """A figure title wrapped to the figure's width (a long sweep description ran off both edges)."""
    import textwrap

    width = int(fig.get_figwidth() * 72 / (fontsize * 0.62))
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in text.split("\n")), fontsize=fontsize)
MODEL_PARTS = ("compute", "halo", "waiting", "collective")


def fig_model(res: dict):
    """Measured time per step (points) over the scaling model's prediction (line), and the predicted parts."""
    rows = [r for r in ok_rows(res) if r.get("predicted_seconds_per_step") is not None]
    kind = res["kind"]
    n = [count_of(r, kind) for r in rows]
    fig, (a, b) = new_figure(2, 5.2)
    a.plot(n, [r["predicted_seconds_per_step"] * 1e3 for r in rows], "-", label="predicted (stencil model)")
    a.plot(n, [r["seconds_per_step"] * 1e3 for r in rows], "o", label="measured")
    a.set(title="Time per step: measured (points) and predicted (line)", xlabel=axis_name(kind), ylabel="ms per step")
    bottom = [0.0] * len(rows)
    for part in MODEL_PARTS:
        v = [r[f"predicted_{part}"] * 1e3 for r in rows]
        b.bar([str(x) for x in n], v, bottom=bottom, label=f"predicted {part}")
        bottom = [x + y for x, y in zip(bottom, v)]
    b.plot([str(x) for x in n], [r["seconds_per_step"] * 1e3 for r in rows], "ko", label="measured (whole step)")
    b.set(title="Predicted parts", xlabel=axis_name(kind), ylabel="ms per step")
    _log2_axis(a, n)
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def model_lines(res: dict) -> list[str]:
    rows = [r for r in ok_rows(res) if r.get("predicted_seconds_per_step") is not None]
    if not rows:
        return []
    lines = ["## Model", "", "The scaling model's prediction beside each point (docs/scaling_model.md):", "",
             "| n | measured ms | predicted ms | error | compute | halo | waiting | collective |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {count_of(r, res['kind'])} | {r['seconds_per_step'] * 1e3:.4g} | {r['predicted_seconds_per_step'] * 1e3:.4g} | "
              f"{r['model_error']:+.1%} | " + " | ".join(f"{r[f'predicted_{p}'] * 1e3:.3g}" for p in MODEL_PARTS) + " |"
              for r in rows]
    return lines + [""] + [f"- {n}" for n in res.get("model") or []] + [""]


def per_step(timings: list[dict], section: str) -> float:
    """Mean over ranks of a section's seconds per timed step, in ms."""
    return float(np.mean([t[section] / max(t["steps"], 1) for t in timings])) * 1e3


def fig_breakdown(res: dict):
    """Stacked bars: compute / comm / wait / io / other per step for each point, mean over ranks."""
    rows, kind = ok_rows(res), res["kind"]
    labels = [str(count_of(r, kind)) for r in rows]
    fig, (ax,) = new_figure()
    bottom = np.zeros(len(rows))
    for s in SECTION_COLOURS:
        v = np.array([per_step(r["_timings"], s) for r in rows])
        label = "io (snapshots, not in the time per step)" if s == "io" else s
        ax.bar(labels, v, bottom=bottom, label=label, color=SECTION_COLOURS[s])
        bottom += v
    ax.set(title="Where a step's time goes (mean over ranks)", xlabel=axis_name(kind), ylabel="time per step (ms)")
    fig.legend(loc="outside lower center", ncols=3, fontsize=8)  # below the axes: inside it covered the bars, beside them it squeezed the axes until the title was cut
    ax.grid(axis="y", alpha=0.3)
    return fig


def fig_bandwidth(res: dict):
    """Left: effective GB/s and the copy ceiling against n. Right: roofline view at the kernel's intensity."""
    rows, kind = ok_rows(res), res["kind"]
    n = [count_of(r, kind) for r in rows]
    fig, (a, b) = new_figure(2, 5.2)
    a.plot(n, [r["effective_gbs"] for r in rows], "o-", label="stencil effective bandwidth")
    if all(r.get("copy_gbs") for r in rows):
        a.plot(n, [r["copy_gbs"] for r in rows], "s--", label="copy ceiling (same ranks/threads)")
    a.set(title="Achieved bandwidth against the ceiling", xlabel=axis_name(kind), ylabel="bandwidth (GB/s)")
    _log2_axis(a, n)
    a.grid(alpha=0.3)
    a.legend()
    roofline(b, [(f"{count_of(r, kind)}", r["_record"]["throughput"]) for r in rows],
             "thread(s)" if kind == "threads" else "rank(s)")
    return fig


def roofline(ax, points: list[tuple[str, dict]], unit: str = "rank(s)") -> None:
    """Memory roofs (copy ceiling x intensity) for the smallest and largest ceiling, the compute roofs
    measured with the same ranks and threads (solver.bench.peak: multiply + add, as the stencil is
    compiled, and fused multiply-add), and the achieved points. `points`: (count, throughput) per run, the
    count in `unit` (ranks or threads): each roof's legend entry names the count it was measured at."""
    points = [(label, tp) for label, tp in points if tp and "flops_per_update" in tp]
    tps = [tp for _, tp in points]
    if not tps:  # multigrid: its levels and verbs have no single intensity (docs/multigrid.md)
        ax.text(0.5, 0.5, "no roofline: a multigrid cycle mixes\nkernels of different intensity\n(record.md: "
                "time per level)", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    ai = tps[0]["flops_per_update"] / tps[0]["bytes_per_update"]
    x = np.logspace(-2, 2, 50)
    for label, c in _extremes(points, "copy_gbs"):
        ax.plot(x, c * x, "--", label=f"memory roof at {label} {unit}: copy {c:.1f} GB/s")
    for kind, style, name in (("mul_add", "-", "multiply + add"), ("fma", ":", "FMA")):
        ends = _extremes(points, f"peak_{kind}_gflops")
        for (label, p), colour in zip(ends, ("tab:red", "lightcoral")):
            ax.axhline(p, ls=style, color=colour, lw=1.2, label=f"compute roof at {label} {unit}: {name} {p:.0f} GFLOP/s")
    for (label, tp), marker in zip(points, "o^sDv<>ph*" * len(points)):
        ax.plot([ai], [tp["gflops"]], marker, color="tab:green", label=f"stencil at {label} {unit}: {tp['gflops']:.3g} GFLOP/s")
    ax.axvline(ai, color="gray", lw=0.8)
    ax.set(xscale="log", yscale="log", title=f"Roofline view: {ai:.3g} flop/byte",
           xlabel="arithmetic intensity (flop/byte)", ylabel="performance (GFLOP/s)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


def _extremes(points: list[tuple[str, dict]], key: str) -> list[tuple[str, float]]:
    """(count, value) of the smallest and the largest `key` among the points' throughputs (one pair if equal)."""
    found = [(label, tp[key]) for label, tp in points if tp.get(key)]
    if not found:
        return []
    lo, hi = min(found, key=lambda f: f[1]), max(found, key=lambda f: f[1])
    return [hi, lo] if lo[1] != hi[1] else [hi]


# figures: one run ------------------------------------------------------------------------------

def fig_ranks(timings: list[dict]):
    """Stacked bars per rank: seconds of the timed loop in each section."""
    fig, (ax,) = new_figure()
    labels = [str(int(t["rank"])) for t in timings]
    bottom = np.zeros(len(timings))
    for s in ("compute", "comm", "wait", "io", "other"):
        v = np.array([t[s] for t in timings])
        ax.bar(labels, v, bottom=bottom, label=s, color=SECTION_COLOURS[s])
        bottom += v
    ax.plot(labels, [t["loop"] for t in timings], "k_", markersize=20, label="loop wall time")
    ax.set(title="Time per rank in the timed loop", xlabel="rank", ylabel="time (s)")
    fig.legend(loc="outside lower center", ncols=3, fontsize=8)  # below the axes: inside it covered the bars, beside them it squeezed the axes until the title was cut
    ax.grid(axis="y", alpha=0.3)
    return fig


def fig_run_bandwidth(rec: dict):
    """Bars: the stencil's effective bandwidth and the copy ceiling; and the roofline view."""
    tp = rec["throughput"]
    fig, (a, b) = new_figure(2, 5.2)
    names, values = ["stencil (effective)"], [tp["effective_gbs"]]
    if tp.get("copy_gbs"):
        names.append("copy ceiling")
        values.append(tp["copy_gbs"])
    a.bar(names, values, color=["tab:blue", "tab:gray"][:len(values)], label=names)
    a.set(title="Achieved bandwidth against the ceiling", xlabel="measurement", ylabel="bandwidth (GB/s)")
    a.legend()
    roofline(b, [(str(rec["resources"]["ranks"]), tp)])
    return fig


def fig_timeline(trace: dict, steps: int = TIMELINE_STEPS):
    """Per-rank timeline of the first `steps` timed steps: one bar per traced section interval."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    first = min(e["args"]["step"] for e in events)
    shown = [e for e in events if e["args"]["step"] < first + steps]
    ranks = sorted({e["pid"] for e in shown})
    fig, (ax,) = new_figure(1, 9.0)
    t0 = min(e["ts"] for e in shown)
    for sec, colour in SECTION_COLOURS.items():
        labelled = False
        for rk in ranks:
            bars = [((e["ts"] - t0) / 1e3, e["dur"] / 1e3) for e in shown if e["pid"] == rk and e["name"] == sec]
            if bars:
                ax.broken_barh(bars, (rk - 0.4, 0.8), color=colour, label=None if labelled else sec)
                labelled = True
    ax.set(title=f"Per-rank timeline, steps {first}-{first + steps - 1}", xlabel=f"time since step {first} began (ms)",
           ylabel="rank", yticks=ranks)
    ax.legend(loc="upper right", fontsize=8)
    return fig


# figures: the field ---------------------------------------------------------------------------------

VIEW_PIXELS = 256  # a "full view": the whole field in this many pixels a side (a window, a thumbnail)
VISIBLE = 0.05  # a pixel changes visibly when it moves by more than this fraction of the first snapshot's range


def full_view(u: np.ndarray, pixels: int = VIEW_PIXELS) -> np.ndarray:
    """The field as a full view shows it: the mean of each of pixels x pixels blocks (ragged edges dropped), of the
    plate's points (NaN: outside the plate, solver.io.outputs.blank; a block wholly outside stays NaN)."""
    by, bx = max(1, u.shape[0] // pixels), max(1, u.shape[1] // pixels)
    ny, nx = u.shape[0] // by * by, u.shape[1] // bx * bx
    blocks = u[:ny, :nx].astype(np.float64).reshape(ny // by, by, nx // bx, bx)
    if not np.isnan(blocks).any():
        return blocks.mean(axis=(1, 3))
    count = np.sum(~np.isnan(blocks), axis=(1, 3))
    total = np.nansum(blocks, axis=(1, 3))
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def visible_change(first: np.ndarray, last: np.ndarray) -> float:
    """The fraction of a full view's pixels that differ between two snapshots by more than VISIBLE of the
    first one's range (0 when nothing moves, about 1 when the whole picture changes)."""
    a, b = full_view(first), full_view(last)
    plate = ~(np.isnan(a) | np.isnan(b))
    if not plate.any():
        return 0.0
    span = float(a[plate].max() - a[plate].min()) or 1.0
    return float(np.mean(np.abs(b - a)[plate] > VISIBLE * span))


def read_views(path: Path) -> dict:
    """The first and last snapshots of a fields.h5 at full view, with their steps, times and extent."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            u, steps, times = f["u"], f["step"][()], f["time"][()]
            if u.ndim != 3 or u.shape[0] == 0 or len(steps) != u.shape[0] or len(times) != u.shape[0]:
                raise InputError(f"{path}: holds no snapshot series (/u, /step, /time); run the case again")
            stride = max(1, max(u.shape[1:]) // 1024)  # at most about 1024 points a side are read for the picture
            first, last = u[0, ::stride, ::stride], u[-1, ::stride, ::stride]
            dx, dy, (x0, y0) = float(f.attrs["dx"]), float(f.attrs["dy"]), f.attrs["origin"]
            extent = (x0, x0 + (u.shape[2] - 1) * dx, y0, y0 + (u.shape[1] - 1) * dy)
            span = extremes(u, (float(x0), float(y0)), (dx, dy))
    except (OSError, KeyError, ValueError, TypeError) as exc:  # not HDF5, a dataset missing, a checksum
        raise InputError(f"{path}: cannot be read ({str(exc).splitlines()[0][:80]}); run the case again") from None
    return {"first": first, "last": last, "steps": (int(steps[0]), int(steps[-1])),
            "times": (float(times[0]), float(times[-1])), "extent": extent, "extremes": span}


def extremes(u, origin: tuple[float, float], spacing: tuple[float, float], rows: int = 256) -> dict:
    """The last snapshot's smallest and largest value with the (x, y) of their first point, and its mean, read
    `rows` rows at a time (every point, not the picture's sample)."""
    lo = hi = None
    total, k = 0.0, u.shape[0] - 1
    for r0 in range(0, u.shape[1], rows):
        part = np.asarray(u[k, r0:r0 + rows, :], dtype=np.float64)
        total += float(part.sum())
        for fn, best, pick in ((np.argmin, lo, min), (np.argmax, hi, max)):
            i, j = np.unravel_index(fn(part), part.shape)
            found = (float(part[i, j]), origin[0] + j * spacing[0], origin[1] + (r0 + i) * spacing[1])
            chosen = found if best is None else pick(best, found, key=lambda v: v[0])
            if fn is np.argmin:
                lo = chosen
            else:
                hi = chosen
    return {"min": lo, "max": hi, "mean": total / (u.shape[1] * u.shape[2])}


def steady_unit(rec: dict) -> str | None:
    """What a steady solve's iterations are called ("cycles" of multigrid, "iterations" of Jacobi or conjugate
    gradients), or None for heat (its snapshots are at times)."""
    sol = rec.get("solver") or {}
    if rec["input"]["equation"] == "heat":
        return None
    return "cycles" if sol.get("method") == "multigrid" and sol.get("krylov") != "cg" else "iterations"


def fig_fields(views: dict, name: str, steady: str | None = None, shapes: tuple = (), units: tuple = ()):
    """The first and the last snapshot side by side, one colour scale (y up, as in ParaView); steady: the unit of a
    steady solve's iterations ("cycles", "iterations"), whose snapshots are labelled by it instead of a time; the
    plate's shapes' outlines drawn over them (solver.results.maps.outlines), its holes blank; units: (length,
    temperature) of the material form (else case units)."""
    L, T = units or ("case units", "case units")
    fig, axes = panel_grid(2, aspect_of(views["extent"]), ncols=2)
    shown = ("last",) if steady else ("first", "last")  # a steady solve's initial field is a guess: the scale is the
    # solution's (the guess saturates)
    lo = float(min(np.nanmin(views[k]) for k in shown))
    hi = float(max(np.nanmax(views[k]) for k in shown))
    for ax, key, k in zip(axes, ("first", "last"), (0, 1)):
        im = ax.imshow(full_view(views[key], 512), origin="lower", extent=views["extent"], vmin=lo, vmax=hi,
                       cmap="inferno", interpolation="nearest")
        n = views["steps"][k]
        if steady is None:
            title = f"step {n} (t = {views['times'][k]:.3g})"
        else:
            title = "initial field" if k == 0 else f"steady solution after {n} {steady}"
        ax.set(title=title, xlabel=f"x ({L})", ylabel=f"y ({L})")
        draw_outlines(ax, shapes)
    bar = fig.colorbar(im, ax=axes, label=f"u ({T})")
    change = visible_change(views["first"], views["last"])
    what = "initial field and steady solution" if steady else "first and last snapshot"
    suptitle(fig, f"{name}: {what}; {change:.0%} of a {VIEW_PIXELS}-pixel view changes by more "
                  f"than {VISIBLE:.0%} of the range", fontsize=9)
    fit_colorbars(fig, [(list(axes), bar)])
    return fig


def draw_outlines(ax, shapes) -> None:
    """The shapes' rims over a picture, in grey (seen on the colour map and on a hole's blank alike;
    solver.results.maps.outlines: (kind, data) per shape)."""
    from matplotlib.patches import Circle, Polygon as Patch

    for kind, data in shapes:
        if kind == "disk":
            ax.add_patch(Circle(data[:2], data[2], fill=False, color="0.55", lw=0.9))
        elif kind == "polygon":
            ax.add_patch(Patch(data, closed=True, fill=False, color="0.55", lw=0.9))
        else:
            bits, (x0, y0, x1, y1) = data
            ax.contour(np.linspace(x0, x1, bits.shape[1]), np.linspace(y0, y1, bits.shape[0]), bits, levels=[0.5],
                       colors="0.55", linewidths=0.9)


def energy_terms(e: dict) -> tuple[list[tuple[str, float]], str, str]:
    """The energy balance's terms as (label, value) bars, their unit and the figure's title: a steady state's rates
    (sources and each side: they sum to the left-over), or a run's totals (sources and each side over the run, then
    their sum's counterpart, the change of E), with the faces' and each rim's where the plate has them. The unit is
    the record's (`units`: W and J in the material form), else the case's: E = sum(u) dx dy."""
    steady = e["kind"] == "steady"
    units = e.get("units") or {}
    unit = units.get("power" if steady else "energy") or (
        "u x area per unit time (case units)" if steady else "u x area (case units)")
    bars = [("sources", e["sources"])]
    if e.get("sides"):
        bars += [(f"side {side}", v) for side, v in e["sides"].items()]
    elif e.get("sides_total") is not None:
        bars.append(("sides (together)", e["sides_total"]))
    if e.get("faces"):
        bars.append(("faces", e["faces"]))
    bars += [(f"rim {label}", v) for label, v in (e.get("rims") or {}).items()]
    if steady:
        bars.append(("left over", e["imbalance"]))
        return bars, unit, "Steady rates: sources + sides = left over"
    bars.append(("change of E", e["change"]))
    return bars, unit, "Over the run: change of E = sources + sides"


def fig_energy(e: dict, name: str):
    """Horizontal bars of the energy balance's terms (energy_terms): gains right, losses left, the total's bar
    apart in grey."""
    bars, unit, title = energy_terms(e)
    fig, (ax,) = new_figure(1, 7.0)
    labels = [label for label, _ in bars]
    values = [v for _, v in bars]
    colours = ["tab:gray" if label in ("change of E", "left over") else ("tab:red" if v >= 0 else "tab:blue")
               for label, v in bars]
    from matplotlib.patches import Patch

    bars_drawn = ax.barh(labels, values, color=colours)
    ax.bar_label(bars_drawn, labels=[f"{v:+.3g}" for v in values], fontsize=7, padding=2)
    ax.axvline(0, color="k", lw=0.8)
    ax.invert_yaxis()
    ax.margins(x=0.15)  # room for the values at the bars' ends
    ax.set(title=title, xlabel=f"{'rate' if e['kind'] == 'steady' else 'energy'} ({unit})",
           ylabel="term (record.json: energy)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=[Patch(color="tab:red", label="heat in"), Patch(color="tab:blue", label="heat out"),
                       Patch(color="tab:gray", label="the total")], fontsize=7, loc="lower right")
    suptitle(fig, f"{name}: energy balance", fontsize=9)
    return fig


def physics_lines(rec: dict, views: dict | None) -> list[str]:
    """report.md's physics section: what the update read (sources, alpha, sides), the temperature's range and where,
    and the energy balance with its chart (when the record has one)."""
    from .energy import energy_row

    ph, inp = rec.get("physics") or {}, rec["input"]
    lines = ["## Physics", ""]
    if ph:
        a = ph["alpha"]
        alpha = (f"a field from {a['min']:.4g} to {a['max']:.4g} (contrast {a['contrast']:.3g})" if a["field"]
                 else f"{a['min']:.4g} everywhere")
        lines += [f"- sources: {'; '.join(ph['sources']) or 'none'}", f"- alpha: {alpha}",
                  "- sides: " + "; ".join(f"{side}: {text}" for side, text in ph["sides"].items())]
    if views:
        lo, hi, mean = views["extremes"]["min"], views["extremes"]["max"], views["extremes"]["mean"]
        steady = steady_unit(rec)
        when = (f"the steady solution (after {views['steps'][1]} {steady})" if steady else
                f"the last snapshot (step {views['steps'][1]}, t = {views['times'][1]:.4g})")
        lines.append(f"- u in {when}: from {lo[0]:.6g} at (x, y) = ({lo[1]:.4g}, {lo[2]:.4g}) to {hi[0]:.6g} at "
                     f"({hi[1]:.4g}, {hi[2]:.4g}); mean {mean:.6g} ({inp['nx']} x {inp['ny']} points, case units)")
    e = rec.get("energy")
    if e:
        lines += [f"- {': '.join(energy_row(e))}", "", "![energy balance](energy.png)", "",
                  "*The energy balance's terms (record.json: energy; solver/core/balance.py)*"]
    return lines + [""]


MAX_Q_PANELS = 3  # source maps drawn at most (the phases after them are listed in the figure's title)


def panel_grid(n: int, aspect: float, ncols: int = 3):
    """A figure of n image panels of a domain `aspect` (width / height) wide, sized so that each axes box fits its
    image (a colour bar beside an image is then as tall as the image, and a long, flat strip's panels stack in one
    column instead of leaving their labels crowded side by side); constrained layout; the axes in reading order."""
    from matplotlib.figure import Figure

    cols = 1 if aspect >= 2.5 else min(n, 2 if aspect >= 1.4 else ncols)
    rows = -(-n // cols)
    wide = 8.0 if cols == 1 else 4.0  # the image's width in inches
    tall = min(max(wide / aspect, 0.6), 5.0) + 1.3  # the image's height plus its title, ticks and x label
    fig = Figure(figsize=(cols * (wide + 2.2), rows * tall + 0.5), layout="constrained")
    fig.get_layout_engine().set(w_pad=0.1, wspace=0.06)  # a colour bar's label clear of the next panel's y label
    return fig, [fig.add_subplot(rows, cols, k + 1) for k in range(n)]


def aspect_of(extent) -> float:
    """Width over height of an image's extent (x0, x1, y0, y1); 1 for a degenerate one (a single row or column)."""
    w, h = extent[1] - extent[0], extent[3] - extent[2]
    return w / h if w > 0 and h > 0 else 1.0


def fig_maps(rec: dict, views: dict):
    """The material map (alpha, log scale where it varies), the source q in each phase of the run (the terms on over
    a stretch of time, drawn when they are on: solver.results.maps.phases) and the last snapshot."""
    from matplotlib.colors import LogNorm

    data = maps(rec, views["times"][1])
    case, alpha, extent = data["case"], data["alpha"], data["extent"]
    heat = case.physics.equation == "heat"
    shown = data["phases"][:MAX_Q_PANELS] or [(0.0, views["times"][1], data["q"])]
    varies = alpha.max() > alpha.min()
    fig, axes = panel_grid(2 + len(shown), aspect_of(extent))
    top = max(float(q.max()) for _, _, q in shown)  # one colour scale for every phase's q
    bottom = min(float(q.min()) for _, _, q in shown)
    a = axes[0].imshow(alpha, origin="lower", extent=extent, cmap="viridis", interpolation="nearest",
                       norm=LogNorm() if varies else None)
    labels, L = data["labels"], data["length"]
    bars = [([axes[0]], fig.colorbar(a, ax=axes[0], label=labels["material"] + (" (log scale)" if varies else "")))]
    axes[0].set(title=f"material map: {labels['material'].split(',')[0]}", xlabel=f"x ({L})", ylabel=f"y ({L})")
    shapes = outlines(rec)
    draw_outlines(axes[0], shapes)
    for ax, (t0, t1, q) in zip(axes[1:], shown):
        im = ax.imshow(q, origin="lower", extent=extent, cmap="magma", interpolation="nearest", vmin=bottom,
                       vmax=top if top > bottom else bottom + 1)
        bars.append(([ax], fig.colorbar(im, ax=ax, label=labels["q"])))
        when = (f" for {t0:.3g} <= t < {t1:.3g}" if t1 > t0 else f" at t = {t0:.3g}") if heat else ""
        ax.set(title=f"source q{when}" if data["phases"] else "source q: none on during the run",
               xlabel=f"x ({L})", ylabel=f"y ({L})")
    u = axes[-1].imshow(full_view(views["last"], VIEW_PIXELS * 2), origin="lower", extent=views["extent"],
                        cmap="inferno", interpolation="nearest")
    bars.append(([axes[-1]], fig.colorbar(u, ax=axes[-1], label=f"u ({data['temperature']})")))
    when = f"at step {views['steps'][1]} (t = {views['times'][1]:.3g})" if heat else \
        f"steady, after {views['steps'][1]} {steady_unit(rec)}"
    axes[-1].set(title=f"u {when}", xlabel=f"x ({L})", ylabel=f"y ({L})")
    draw_outlines(axes[-1], shapes)
    more = len(data["phases"]) - len(shown)
    suptitle(fig, f"{rec['input']['name']}: what the update reads (alpha, q) and the field it gave"
             + (f"; {more} later phase(s) of the sources not drawn (record.json: physics.sources)" if more > 0 else ""),
             fontsize=9)
    fit_colorbars(fig, bars)
    return fig


def fit_colorbars(fig, bars) -> None:
    """Each colour bar as tall as the images it belongs to: the layout is computed once (constrained layout sizes a
    bar to its panel's slot, which an image of another aspect does not fill), then frozen with each bar moved to
    its images' height. bars: (the bar's axes, the colorbar) pairs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()  # places every axes and applies the images' aspect
    boxes = [([ax.get_position() for ax in axes], bar) for axes, bar in bars]
    fig.set_layout_engine("none")
    for places, bar in boxes:
        y0, y1 = min(b.y0 for b in places), max(b.y1 for b in places)
        c = bar.ax.get_position()
        bar.ax.set_position([c.x0, y0, c.width, y1 - y0])


# figures: bench results (stencil bench access / reduction --json) -----------------------------------

PATTERN_STYLE = {"contiguous": dict(color="tab:blue", lw=2.2, marker="o"),
                 "random": dict(color="k", ls="--", marker="x"), "rows": dict(color="tab:blue", lw=2.2, marker="o"), "cols": dict(color="tab:red", lw=2.2, marker="s")}


PATTERN_TEXT = {"rows": "row-major (unit stride)", "cols": "column-major (stride = row length)",
                "random": "random (precomputed permutation)"}


def _size_axis(ax, sizes: list[int]) -> None:
    from ..bench.access import human

    ax.set_xscale("log", base=2)
    ticks = sizes[::2] if len(sizes) > 9 else sizes
    ax.set_xticks(ticks, [human(b).replace(" ", "") for b in ticks], rotation=45, fontsize=7)
    ax.minorticks_off()


def cache_lines(ax, marks: list[dict]) -> None:
    """A vertical line at each cache's capacity, labelled at the top (L1/L2/L3...)."""
    for m in marks:
        ax.axvline(m["bytes"], color="gray", lw=0.9, ls=":")
        ax.annotate(m["label"], (m["bytes"], 1.0), xycoords=("data", "axes fraction"), xytext=(2, -10),
                    textcoords="offset points", fontsize=7, color="dimgray", rotation=90, va="top")


def fig_access(res: dict, backend: str):
    """Left: contiguous, each stride and random by array size; right: a 2-D array read by rows and by columns.
    GB/s on a log scale; the caches' capacities drawn as labelled vertical lines."""
    from ..bench.access import columns, label

    rows = [r for r in res["results"] if r["backend"] == backend]
    fig, (a, b) = new_figure(2, 5.6)
    strides = sorted({r["stride"] for r in rows if r["pattern"] == "strided"})
    shades = {s: matplotlib_colour(k, len(strides)) for k, s in enumerate(strides)}
    for ax, names in ((a, ("contiguous", "strided", "random")), (b, ("rows", "cols"))):
        for key in [c for c in columns(res, backend) if c.split()[0] in names or c.startswith("stride") and
                    "strided" in names]:
            pts = sorted((r["bytes"], r["gbs"]) for r in rows if label(r) == key)
            style = PATTERN_STYLE.get(key) or dict(color=shades[int(key.split()[1])], marker=".", lw=1.2)
            text = PATTERN_TEXT.get(key, key + (" elements" if "stride" in key else ""))
            ax.plot(*zip(*pts), label=text, **style)
        cache_lines(ax, res["marks"][backend])
        _size_axis(ax, res["sizes"][backend])
        ax.set(yscale="log", xlabel="array size (bytes read per pass)", ylabel="read bandwidth (GB/s, 8 B per element)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="lower left")
    a.set_title("Access order against array size")
    b.set_title("2-D array: row-major against column-major traversal")
    who = (f"{res['cpu']}, {res['threads']} numba thread(s)" if backend == "numba"
           else res["caches"]["gpu"]["name"] + " (CuPy)")
    clock = {"cpu": "CPU time per thread", "wall": "wall clock"}[res.get("clock", "wall")] if backend == "numba" \
        else "CUDA events"
    suptitle(fig, f"stencil bench access: {who}; median of {res['repeats']}, {clock}; {res['date']}")
    return fig


def matplotlib_colour(k: int, n: int):
    from matplotlib import colormaps

    return colormaps["viridis"](0.15 + 0.75 * k / max(n - 1, 1))


def fig_allreduce(runs: list[dict]):
    """MPI_Allreduce time per call against message size, one line per rank count (from `bench reduction`)."""
    fig, (ax,) = new_figure()
    for res in sorted(runs, key=lambda r: r["ranks"]):
        pts = [(r["bytes"], r["seconds"] * 1e6) for r in res["allreduce_by_size"]]
        ax.plot(*zip(*pts), "o-", label=f"{res['ranks']} rank(s)")
    sizes = sorted({r["bytes"] for res in runs for r in res["allreduce_by_size"]})
    _size_axis(ax, sizes)
    ax.set(yscale="log", title="MPI_Allreduce (sum of float64) against message size",
           xlabel="message size per rank (bytes)", ylabel="time per call (us, median, slowest rank)")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    first = runs[0]
    lib = " ".join((first.get("mpi_library") or "MPI").split())
    suptitle(fig, f"stencil bench reduction: {lib}; {first['cpu']}; {first['date']}")
    return fig


def fig_mpi_scaling(rows: list[dict], where: str):
    """tools/cpu_scaling.py's rows (JSON lines): speedup against ranks for strong and weak scaling (every
    decomposition with the blocking and overlap halos), and strong scaling's bandwidth against the copy
    (and memcpy) ceiling measured at the same rank count."""
    from collections import defaultdict

    groups = defaultdict(list)
    for r in rows:
        groups[(r["scaling"], r["decomposition"], r["halo"])].append(r)
    fig, axes = new_figure(3, 5.0)
    ranks = sorted({r["ranks"] for r in rows})
    for ax, scaling in zip(axes[:2], ("strong", "weak")):
        if not any(r["scaling"] == scaling for r in rows):
            _nothing(ax, f"{scaling} scaling", f"no {scaling}-scaling rows in this file")
            continue
        ax.plot(ranks, ranks, "k--", label="ideal")
        for (sc, dec, halo), rs in sorted(groups.items()):
            if sc != scaling or halo == "nonblocking" or "+" in halo:  # "+dynamic": see the tables
                continue
            rs.sort(key=lambda r: r["ranks"])
            t1 = rs[0]["seconds_per_step"]
            speedup = [t1 / r["seconds_per_step"] * (r["ranks"] if scaling == "weak" else 1) for r in rs]
            ax.plot([r["ranks"] for r in rs], speedup, marker="o", label=f"{dec}, {halo}")
        first = next((r for r in rows if r["scaling"] == scaling), None)
        grid = "" if first is None else f"{first['ny']} x {first['nx']}" if scaling == "strong" else \
            f"{first['ny']} x {first['nx']} per rank"
        ax.set(title=f"{scaling} scaling ({grid})", xlabel="MPI ranks (1 thread each)", ylabel="speedup vs 1 rank",
               xscale="log", yscale="log")
        ax.set_xticks(ranks, [str(r) for r in ranks])
        ax.legend()
    ax = axes[2]
    strong = sorted(groups[("strong", "rows", "overlap")], key=lambda r: r["ranks"])
    if not strong:
        _nothing(ax, "strong scaling: bandwidth", "no strong-scaling rows (rows, overlap) in this file")
        fig.suptitle(f"stencil, numba per-step kernel, float64 - {where}")
        return fig
    n = [r["ranks"] for r in strong]
    ax.plot(n, [r["copy_gbs"] for r in strong], "k--", marker="s", label="copy, ordinary stores, same ranks (ceiling)")
    if all("memcpy_gbs" in r for r in strong):
        ax.plot(n, [r["memcpy_gbs"] for r in strong], ":", color="grey", marker="s",
                label="memcpy (non-temporal stores), same ranks")
    for dec in ("rows", "cart"):
        rs = sorted(groups[("strong", dec, "overlap")], key=lambda r: r["ranks"])
        ax.plot([r["ranks"] for r in rs], [r["gbs"] for r in rs], marker="o",
                label=f"stencil effective GB/s, {dec} overlap")
    ax.set(title="strong scaling: bandwidth against the ceiling", xlabel="MPI ranks", ylabel="GB/s (read + write)",
           xscale="log", yscale="log")
    ax.set_xticks(n, [str(r) for r in n])
    ax.legend(fontsize=8)
    fig.suptitle(f"stencil, numba per-step kernel, float64 - {where}")
    return fig


def _nothing(ax, title: str, why: str) -> None:
    """An empty panel that says why it is empty."""
    ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=9, wrap=True)
    ax.set(title=title, xticks=[], yticks=[], xlabel="MPI ranks", ylabel="(no data)")


def load_scaling_rows(path: Path) -> list[dict] | None:
    """The rows of a tools/cpu_scaling.py JSON-lines file, or None if the file is something else;
    InputError naming the line when it is such a file but a row is damaged."""
    try:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    keys = {"scaling", "decomposition", "halo", "ranks", "seconds_per_step", "gbs", "copy_gbs"}
    if not (rows and all(isinstance(r, dict) and keys <= r.keys() for r in rows)):
        return None
    for i, r in enumerate(rows):
        problem = shape_problem(r, SCALING_ROW, f"row {i + 1}")
        if problem:
            raise InputError(f"{path}: {problem}; it is damaged: run tools/cpu_scaling.py again")
    return rows


def load_bench_results(d: Path) -> dict[str, dict]:
    """The `stencil bench access` and `stencil bench reduction` JSON files of a directory, by file stem
    (files of other kinds are skipped; one of these kinds that lacks what its figure needs is refused)."""
    found = {}
    for path in sorted(d.glob("*.json")):
        try:
            res = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(res, dict) or res.get("bench") not in ("access", "reduction"):
            continue
        spec = ACCESS if res["bench"] == "access" else ALLREDUCE if res.get("allreduce_by_size") else None
        problem = shape_problem(res, spec) if spec else None
        if spec is ACCESS and not problem and set(res["marks"]) - set(res["sizes"]):
            problem = "marks names a backend that sizes does not"
        if problem:
            raise InputError(f"{path}: {problem}; it is damaged: run `stencil bench {res['bench']} --json` again")
        found[path.stem] = res
    for path in sorted(d.glob("*.jsonl")):
        rows = load_scaling_rows(path)
        if rows:
            found[path.stem] = {"bench": "mpi_scaling", "rows": rows, "where": f"{d.resolve().name}/{path.name}"}
    return found


def bench_report(found: dict[str, dict]) -> tuple[dict, str]:
    from ..bench.access import columns, human

    figs, md = {}, ["# Benchmark figures", ""]
    for stem, res in found.items():
        if res["bench"] != "access":
            continue
        for backend in res["marks"]:
            name = f"{stem}.png" if len(res["marks"]) == 1 else f"{stem}_{backend}.png"
            figs[name] = fig_access(res, backend)
            cols = columns(res, backend)
            md += [f"## {stem}: {backend}", "", f"`stencil bench access` on {res['cpu']}, {res['date']}; caches: "
                   + ", ".join(m["label"] for m in res["marks"][backend]) + "; read GB/s, median of "
                   f"{res['repeats']}.", "", f"![access]({name})", "", "| array | " + " | ".join(cols) + " |",
                   "|---" * (len(cols) + 1) + "|"]
            for nbytes in res["sizes"][backend]:
                got = _by_label(res, backend, nbytes)
                md.append(f"| {human(nbytes)} | " + " | ".join(f"{got[c]['gbs']:.3g}" if c in got else "-"
                                                               for c in cols) + " |")
            md.append("")
    for stem, res in found.items():
        if res["bench"] == "mpi_scaling":
            figs[f"{stem}.png"] = fig_mpi_scaling(res["rows"], res["where"])
            md += [f"## {stem}: MPI scaling", "", f"`tools/cpu_scaling.py` rows from {res['where']}.", "",
                   f"![scaling]({stem}.png)", ""]
    mpi = [r for r in found.values() if r["bench"] == "reduction" and r.get("allreduce_by_size")]
    if mpi:
        figs["allreduce.png"] = fig_allreduce(mpi)
        md += ["## MPI_Allreduce by message size", "", "![allreduce](allreduce.png)", ""]
    if not figs:
        raise InputError("no `stencil bench access` result, no `stencil bench reduction` result run under MPI and no "
                         "tools/cpu_scaling.py JSON lines in this directory: write them there with --json")
    return figs, "\n".join(md)


def _by_label(res: dict, backend: str, nbytes: int) -> dict:
    from ..bench.access import label

    return {label(r): r for r in res["results"] if r["backend"] == backend and r["bytes"] == nbytes}


# report.md -------------------------------------------------------------------------------------

def problem(rec: dict) -> list[str]:
    """What was solved and by which method, with the work counted for that method (record.throughput)."""
    from .solver import method_text

    inp, tp, sol = rec["input"], rec["throughput"] or {}, rec.get("solver")
    head = (f"{inp['equation']} on nx x ny = {inp['nx']} x {inp['ny']} interior points ({inp['dtype']}), initial "
            f"{inp['initial']}: ")
    steps = rec["run"]["steps"]
    if sol:
        what = method_text(sol, steps)
        if "scheme" in sol:
            what += f"; dt = {inp['dt']:.6g}, to t = {steps * inp['dt']:.6g}"
    else:
        what = f"{steps} explicit (FTCS) steps of dt = {inp['dt']:.6g} to t = {steps * inp['dt']:.6g}"
    cycle = "iteration" if sol and sol.get("krylov") == "cg" else "cycle"
    return ["## Problem", "", head + what + ". " + work_text(inp, tp, cycle), ""]


def work_text(inp: dict, tp: dict, cycle: str = "cycle") -> str:
    """The bytes and flops counted for the method that ran (per update, or per `cycle` of multigrid: a cycle or an
    iteration of conjugate gradients), and what their ratio says."""
    if not tp:
        return "No step was timed, so no work rate is reported."
    if "bytes_per_cycle" in tp:  # multigrid: per cycle (and per implicit step), counted per level and verb
        per = (f"{tp['bytes_per_cycle'] / 1e6:.3g} MB of memory traffic and {tp['flops_per_cycle'] / 1e6:.3g} MFLOP "
               f"per {cycle}" if "flops_per_cycle" in tp else f"{tp['bytes_per_cycle'] / 1e6:.3g} MB per {cycle}")
        if "bytes_per_step" in tp:
            per += (f" ({tp['bytes_per_step'] / 1e6:.3g} MB and {tp['flops_per_step'] / 1e6:.3g} MFLOP per step with "
                    f"its {cycle}s and right-hand side)")
        ai = f", {tp['flops_per_cycle'] / tp['bytes_per_cycle']:.3g} flop/byte" if "flops_per_cycle" in tp else ""
        return (f"Counted (array passes and flops per point of each verb, on every level: "
                f"solver/results/solver.py): {per}{ai}, far below the ridge point of any current CPU or GPU: the "
                "cycle is bound by memory bandwidth where its levels outgrow the caches, and by per-sweep costs "
                "where they are small.")
    w = inp["weights"]
    each = "iteration" if inp["equation"] == "laplace" else "step"
    return (f"Each {each} applies the 5-point update (wc = {w['wc']:.6g}, wx = {w['wx']:.6g}, wy = {w['wy']:.6g}, "
            "solver/core/physics.py gives its forms) to every point: "
            f"{tp['flops_per_update']} flops and {tp['bytes_per_update']} bytes of memory traffic per point update "
            f"(every array it reads or writes, once): {tp['flops_per_update'] / tp['bytes_per_update']:.3g} flop/byte, "
            "far below the ridge point of any current CPU or GPU, so once the field outgrows the caches the kernel "
            "is bound by memory bandwidth.")


def hardware(rec: dict) -> list[str]:
    env = rec["environment"]
    gpus = ", ".join(g["name"] for g in env.get("gpus", [])) or "none used"
    libs = ", ".join(f"{k} {v}" for k, v in env["libraries"].items())
    return ["## Hardware and software", "",
            f"- host {env['host']}: {env['cpu']}, {env['cores']} cores ({env['cores_usable']} usable), "
            f"{env['memory_gb']} GB memory; GPUs: {gpus}", f"- {env['os']}, Python {env['python']}; MPI: "
            f"{env['mpi_library'] or 'none'}", f"- stencil {env['stencil']} (git {env['git_commit']}); {libs}", ""]


def design(rec: dict, launcher: str | None = None) -> list[str]:
    res = rec["resources"]
    how = "" if launcher is None else f", launched by `{launcher}`" if launcher else ", one process (no launcher)"
    lines = ["## Parallel design", "",
             f"- backend {rec['stencil']['backend']}, {res['threads_per_rank']} thread(s) per rank{how}",
             f"- {res['decomposition']} decomposition; process grid {res['dims'][0]} x {res['dims'][1]} at "
             f"{res['ranks']} rank(s); halo mode {res['halo']}",
             f"- halo schedule: {res['halo_schedule']}", ""]
    return lines


def correctness_line(label: str, c: dict) -> str:
    if c.get("passed") is None:
        return f"| {label} | not verified | | | |"
    k = c.get("conservation")
    also = f"; sum conserved to {k['error']:.2e} (tolerance {k['tolerance']:.1e})" if k else ""
    return (f"| {label} | {c['reference']}{also} | {c['relative_error']:.2e} | {c['tolerance']:.1e} | "
            f"{'PASS' if c['passed'] else 'FAIL'} |")


def correctness(items: list[tuple[str, dict]]) -> list[str]:
    lines = ["## Correctness evidence", "", "| point | reference | relative error | tolerance | result |",
             "|---|---|---|---|---|"]
    lines += [correctness_line(label, rec["correctness"]) for label, rec in items]
    if all(rec["correctness"].get("passed") is None for _, rec in items):
        lines += ["", "No point was verified: rerun with `--verify` (exact eigenmode for a sine initial field, "
                      "else the numpy reference, bitwise on the CPU)."]
    return lines + [""]


def method(command: str, repeats: int | None, tp: dict | None = None) -> list[str]:
    """How the figures were measured; the bandwidth's definition is the one of the method that ran (tp)."""
    rep = f"{repeats} run(s) per point, the median time per step reported" if repeats else "one run"
    per = (tp or {}).get("per", "step") if "bytes_per_cycle" in (tp or {}) else "step"
    if "bytes_per_cycle" in (tp or {}):
        moved = (f"effective bandwidth = the bytes counted per {per} (array passes of every verb on every level, "
                 "solver/results/solver.py) / the time per " + per)
    else:
        moved = "effective bandwidth = updates/s x the bytes each update reads and writes (every array once)"
    return ["## Benchmark method", "",
            f"- command: `{command}`; {rep}; each point a separate process (`stencil run`) with its own record.",
            f"- time per {per}: the solve loop after the warm-up steps (compile and first-touch excluded) minus the "
            "snapshots written inside it, over the timed steps; per-rank sections compute / comm / wait / io / "
            "other, reduced with max (fractions) and mean (breakdown chart); load imbalance = max / mean compute.",
            f"- {moved}; ceiling = STREAM-like copy bandwidth measured with "
            "the same ranks and threads, all streaming at once, cached per machine (`stencil bench bandwidth`); "
            "compute roofs = register-only multiply + add and FMA loops on every worker at once (solver.bench.peak), "
            "cached the same way.", ""]


def limitations(notes: list[str], rows: list[dict], repeats: int | None, env: dict) -> list[str]:
    out = ["## Limitations and next steps", ""]
    if not repeats or repeats < 3:
        out.append("- fewer than 3 repeats per point: run-to-run noise is not measured; use `--repeats 5`.")
    spread = [r["time_max"] / r["time_min"] - 1 for r in rows if r.get("time_min") and r.get("repeats_ok", 0) > 1]
    if spread and max(spread) > 0.1:
        out.append(f"- timings vary by up to {max(spread):.0%} between repeats: a shared or virtual machine; "
                   "treat differences below that as noise.")
    if any("oversubscribed" in n for n in notes):
        out.append("- some points oversubscribe the cores: they measure time-sharing, not scaling.")
    if any("small" in n for n in notes):
        out.append("- local domains are small at the larger counts: rerun with a larger grid to see scaling "
                   "that is not dominated by halo traffic and latency.")
    out.append(f"- one node ({env['host']}); multi-node runs (`tools/slurm/`) would add network latency and "
               "bandwidth to the comm and wait columns.")
    if not all(r["_record"]["throughput"].get("peak_mul_add_gflops") for r in rows if r.get("_record", {}).get("throughput")):
        out.append("- some points have no measured compute peak (older records): their roofline shows memory roofs only.")
    out += [f"- next: {s}" for s in next_steps(rows)]
    return out + [""]


def next_steps(rows: list[dict]) -> list[str]:
    last = rows[-1] if rows else None
    if last is None:
        return ["make the failed points run first"]
    steps = []
    if (last.get("comm_wait_fraction") or 0) > 0.25:  # per rank, then the largest
        steps.append("communication dominates at the largest count: larger local domains, the overlap halo mode, "
                     "or the cart decomposition (shorter halos per rank)")
    frac = last.get("fraction_of_copy")
    if frac is not None and frac > 1.1:
        steps.append("above the copy ceiling: data are reused from cache (time tiling, or fields that fit in the "
                     "last-level cache); a larger grid measures memory")
    elif frac is not None and frac > 0.7:
        steps.append("the kernel runs near the copy ceiling: only fewer bytes per update help (float32, temporal "
                     "blocking) or more memory bandwidth (more sockets, a GPU)")
    elif frac is not None:
        steps.append("the kernel leaves memory bandwidth unused: check threads and SIMD (`stencil bench vectorize`)")
    if (last.get("load_imbalance") or 1) > 1.15:
        steps.append("load imbalance: choose counts that divide the grid evenly")
    return steps


def charts(names: dict[str, str]) -> list[str]:
    lines = ["## Charts", ""]
    for file, caption in names.items():
        lines += [f"![{caption}]({file})", "", f"*{caption}*", ""]
    return lines


# putting it together ---------------------------------------------------------------------------

SWEEP_CAPTIONS = {
    "scaling.png": "Speedup against ideal, and parallel efficiency",
    "breakdown.png": "Time per step split into compute, comm, wait, io and other (mean over ranks)",
    "bandwidth.png": "Effective bandwidth against the measured copy ceiling, and the roofline view",
}
RUN_CAPTIONS = {
    "ranks.png": "Seconds in each section per rank (timed loop)",
    "bandwidth.png": "Effective bandwidth against the measured copy ceiling, and the roofline view",
    "timeline.png": "Per-rank timeline of the first timed steps (from trace.json)",
    "fields.png": "The first and the last snapshot of fields.h5 (one colour scale)",
    "maps.png": "The material map (alpha), the source q in each phase of the run (drawn while it is on) and the last "
                "snapshot",
    "energy.png": "The energy balance's terms",
    "probes.png": PROBES_CAPTION,
}


def throughput_line(tp: dict) -> str:
    """'x ms per step, y MLUP/s, z GB/s effective, f of the c GB/s copy ceiling.' (multigrid: per cycle or implicit
    step, with cycles or steps per second and the bytes and flops counted for them)."""
    ceiling = (f", {_pct(tp.get('fraction_of_copy'))} of the {tp['copy_gbs']:.3g} GB/s copy ceiling"
               if tp.get("copy_gbs") else "")
    if "bytes_per_cycle" in tp:
        per = tp.get("per", "cycle")
        rate = f"{1 / tp['seconds_per_step']:.3g} {per}s/s"
        if "cycles_per_second" in tp:
            rate += f", {tp['cycles_per_second']:.3g} cycles/s"
        flops = f", {tp['gflops']:.3g} GFLOP/s" if "gflops" in tp else ""
        return (f"{tp['seconds_per_step'] * 1e3:.4g} ms per {per} ({rate}), {tp['effective_gbs']:.3g} GB/s{flops} "
                f"counted{ceiling}.")
    return (f"{tp['seconds_per_step'] * 1e3:.4g} ms per step, {tp['mlups']:.3g} MLUP/s, "
            f"{tp['effective_gbs']:.3g} GB/s effective{ceiling}.")


def sweep_baseline(b: dict) -> list[str]:
    first = "" if b["workers"] == 1 else " (the sweep's smallest point; it is not a single worker)"
    return ["## Serial baseline", "", f"{b['ranks']} rank(s) x {b['threads']} thread(s) on {b['global_ny']} x "
            f"{b['global_nx']}{first}: " + throughput_line(b), ""]


def sweep_analysis(res: dict, rows: list[dict]) -> list[str]:
    """The per-point table, the sweep's notes, and each point's own bottleneck line."""
    kind = res["kind"]
    lines = ["## Bottleneck analysis", "", "| n | ms/step | MLUP/s | speedup | efficiency | comm | wait | GB/s | "
             "of copy |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {count_of(r, kind)} | {r['seconds_per_step'] * 1e3:.4g} | {r['mlups']:.1f} | {r['speedup']:.2f} | "
              f"{r['efficiency']:.0%} | {r['comm_fraction']:.0%} | {r['wait_fraction']:.0%} | "
              f"{r['effective_gbs']:.2f} | {_pct(r.get('fraction_of_copy'))} |" for r in rows]
    lines += [""] + [f"- {n}" for n in res["notes"]]
    return lines + [f"- at n = {count_of(r, kind)}: {r['bottleneck']}" for r in rows] + [""]


def sweep_report(res: dict) -> tuple[dict, str]:
    rows = ok_rows(res)
    if not rows:
        raise InputError("sweep: no point succeeded, so there is nothing to plot; see sweep.md for the failures")
    figs = {"scaling.png": fig_scaling(res), "breakdown.png": fig_breakdown(res), "bandwidth.png": fig_bandwidth(res)}
    captions = dict(SWEEP_CAPTIONS)
    if any(r.get("predicted_seconds_per_step") is not None for r in rows):
        figs["model.png"] = fig_model(res)
        captions["model.png"] = "Measured time per step over the scaling model's prediction, and the predicted parts"
    first = rows[0]["_record"]
    md = [f"# Performance report: {res['case_name']} ({res['kind']} sweep)", "", f"{res['growth']}.", "",
          *problem(first), *hardware(first), *sweep_baseline(rows[0]), *design(rows[-1]["_record"], res["launcher"]),
          *correctness([(f"n = {count_of(r, res['kind'])}", r["_record"]) for r in rows]),
          *method(res["command"], res["repeats"]), *charts(captions), *sweep_analysis(res, rows), *model_lines(res),
          *limitations(res["notes"], rows, res["repeats"], first["environment"])]
    return figs, "\n".join(md)


def _pct(v) -> str:
    from .record import percent

    return "" if v is None else percent(v)


def run_report(d: Path) -> tuple[dict, str]:
    rec, timings = load_record(d / "record.json"), load_timings(d)
    if not rec.get("throughput"):
        raise InputError(f"{d}: the run has no timed steps; raise run.steps above run.warmup and run it again")
    figs = {"ranks.png": fig_ranks(timings), "bandwidth.png": fig_run_bandwidth(rec)}
    if (d / "trace.json").exists():
        figs["timeline.png"] = fig_timeline(load_trace(d / "trace.json"))
    views = read_views(d / "fields.h5") if (d / "fields.h5").exists() else None
    if views:
        u = (rec.get("case") or {}).get("units") or {}
        units = (u.get("length", "m"), u.get("temperature", "K")) if (rec.get("case") or {}).get("physics", {}).get(
            "material") else ()
        figs["fields.png"] = fig_fields(views, rec["input"]["name"], steady_unit(rec), outlines(rec), units)
        if has_maps(rec):
            figs["maps.png"] = fig_maps(rec, views)
    if rec.get("energy"):
        figs["energy.png"] = fig_energy(rec["energy"], rec["input"]["name"])
    figs.update(probe_figures(d))  # probes.png: each probe against time (solver.results.probes)
    tp, t = rec["throughput"], rec["timings"]
    base = ["## Serial baseline", "", "One run: for a baseline and speedups, run `stencil sweep strong CASE "
            "--ranks 1,2,4`. This run: " + throughput_line(tp), ""]
    analysis = ["## Bottleneck analysis", "", f"- {rec['bottleneck']}",
                f"- comm (max over ranks) {t['comm_fraction']['max']:.0%} and wait {t['wait_fraction']['max']:.0%} "
                f"of the step time; load imbalance {t['load_imbalance']:.3f}", ""]
    captions = {k: v for k, v in RUN_CAPTIONS.items() if k in figs and k != "energy.png"}  # (the physics section's)
    row = {"comm_fraction": t["comm_fraction"]["max"], "wait_fraction": t["wait_fraction"]["max"],
           "comm_wait_fraction": t["comm_wait_fraction"]["max"], "fraction_of_copy": tp.get("fraction_of_copy"),
           "load_imbalance": t["load_imbalance"]}
    md = [f"# Report: {rec['input']['name']} (one run)", "", *problem(rec), *physics_lines(rec, views), "# Performance",
          "", *hardware(rec), *base,
          *design(rec), *correctness([("this run", rec)]), *method(f"stencil run ({d})", None, tp), *charts(captions),
          *analysis, *limitations([], [row], None, rec["environment"])]
    return figs, "\n".join(md)


def make_report(directory: Path, output: Path | None = None) -> Path:
    """Write the PNGs and report.md for a sweep or a run directory; returns report.md's path."""
    d = Path(directory)
    if (d / "sweep.json").exists():
        figs, md = sweep_report(load_sweep(d))
    elif (d / "record.json").exists():
        figs, md = run_report(d)
    elif load_bench_results(d):
        figs, md = bench_report(load_bench_results(d))
    else:
        raise InputError(f"{d}: neither a sweep (sweep.json), a run (record.json) nor benchmark results (JSON from "
                         "`stencil bench access` or `bench reduction --json`) are there; give a directory that "
                         "`stencil sweep` or `stencil run` wrote, or one holding those JSON files")
    out = Path(output or d)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in figs.items():
            fig.savefig(out / name, dpi=110)
        (out / "report.md").write_text(md + "\n")
    except OSError as exc:
        raise InputError(f"--output: cannot write to {out} ({exc.strerror}); choose a writable --output") from None
    return out / "report.md"
