"""The model beside measurements: a prediction for every point of a sweep, and the error per point.

`predict_points` runs after a sweep's points: from each point's record (its case as run, its ranks and
their hosts) it takes the problem and the placement, measures what the model lacks in one probe launch
under the sweep's own launcher (so ranks sit where the points' ranks sat: the same cores, the same
emulated nodes), and predicts every point. `validate` reads a sweep directory and prints the error of
each point (predicted / measured - 1), the median and the largest.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from . import calibrate
from .here import choose_network
from .inputs import Inputs
from .predict import gpu_needs, kernel_needs, pattern, predict, tile_depth
from .problem import Placement, Problem, blocks

PARTS = ("compute", "halo", "waiting", "collective")


def point(rec: dict) -> tuple[Problem, Placement]:
    """The problem and placement a record ran: its case, ranks, ranks on rank 0's host, GPUs."""
    places = rec["resources"]["placement"]
    per_host = Counter(p["host"] for p in places)
    place = Placement(rec["resources"]["ranks"], per_host[places[0]["host"]], rec["stencil"]["backend"] == "cupy")
    case = dict(rec["case"])
    case["parallel"] = {**case["parallel"], "dims": rec["resources"]["dims"]}
    return replace(Problem.from_case(case), lines=False), place  # sweep points run --quiet


def why_not(rec: dict) -> str | None:
    """Why the model does not predict this point (None: it does)."""
    outside = Problem.from_case(rec["case"]).outside()
    if outside:
        return outside
    if rec["resources"]["threads_per_rank"] != 1:
        return "the model measures one thread per rank"
    if rec["stencil"]["backend"] == "numpy":
        return "the model covers the numba and cupy backends"
    return None


def predict_points(records: list[dict | None], launcher: list[str], network: str | None, say=None) -> tuple[list, list]:
    """(one prediction dict or None per record, notes)."""
    usable = [(i, r) for i, r in enumerate(records) if r and not why_not(r)]
    notes = [f"model: point {i + 1} not predicted: {why_not(r)}" for i, r in enumerate(records) if r and why_not(r)]
    out: list = [None] * len(records)
    if not usable:
        return out, notes
    pts = [point(r) for _, r in usable]
    inputs = measure_for(pts, launcher, say)
    for (i, _), (problem, place) in zip(usable, pts):
        net, _ = choose_network(network, place, inputs)
        out[i] = predict(problem, place, inputs, net)
    notes += [f"model inputs: {line}" for line in inputs.describe()]
    net_line = {choose_network(network, pl, inputs)[1] for _, pl in pts if pl.nodes > 1}
    notes += [f"model network between nodes: {n}" for n in net_line]
    return out, notes


def measure_for(pts: list[tuple[Problem, Placement]], launcher: list[str], say=None) -> Inputs:
    """The (occupancy, shape, tile) points each sweep point needs that the cache lacks, measured by launches of
    the probe with as many ranks as the points themselves (largest first: it also measures the messages),
    so that no rank idles on a core a measured rank needs (an emulated node may have one core)."""
    problem = pts[0][0]
    groups: dict[int, set] = {}
    gpu: set = set()
    for pr, pl in pts:
        if pl.gpus:
            gpu.update(gpu_needs(pr, pl))
            continue
        k, _ = tile_depth(pr, blocks(pr, pl.ranks), pl, None)
        shapes, tiles = kernel_needs(pr, pl, k)
        want = {(min(pl.per_node, pl.ranks), ny, nx, t, pattern(pl)) for ny, nx in shapes for t in tiles}
        groups.setdefault(max(pl.ranks, 2), set()).update(want)
    inputs = None
    for ranks in sorted(groups, reverse=True) or [2]:
        inputs = calibrate.measure(launcher, ranks, problem.dtype, problem.halo, gpu_shapes=sorted(gpu),
                                   points=sorted(groups.get(ranks, ())), say=say)
        gpu = set()
    return inputs


def row_fields(pred: dict | None, measured: float | None) -> dict:
    """The sweep row's model columns."""
    if not pred:
        return {}
    out = {"predicted_seconds_per_step": pred["seconds_per_step"],
           **{f"predicted_{k}": pred["parts"][k] for k in PARTS}}
    if measured:
        out["model_error"] = pred["seconds_per_step"] / measured - 1
    return out


def summary(errors: list[float]) -> str:
    a = np.abs(errors)
    worst = int(a.argmax())
    return (f"model error (predicted / measured - 1) over {len(a)} point(s): median |error| {np.median(a):.1%}, "
            f"largest {a[worst]:.1%} (point {worst + 1})")


def validate(directory: Path, inputs_file: Path | None = None, network: str | None = None) -> dict:
    """Every point of a sweep directory: measured and predicted seconds per step and the error; the
    predictions are the sweep's own, or made again from the records with --inputs FILE. The directory is read
    as `stencil report` reads it (solver.results.report.load_sweep: sweep.json, every point's record and
    timings, each checked), and what the model reads of it besides is checked here (check_point)."""
    from ..results.report import load_sweep

    d = Path(directory)
    if not (d / "sweep.json").is_file():
        raise InputError(f"--validate: {d} holds no sweep.json; give a directory `stencil sweep` wrote")
    res = load_sweep(d)
    inputs = Inputs.from_file(inputs_file) if inputs_file else None
    rows = []
    for i, r in enumerate(r for r in res["rows"] if r["status"] == "ok"):
        rec = r.pop("_record")
        r.pop("_timings", None)
        check_point(d, i, r, rec if inputs is not None else None)
        if inputs is not None:
            problem, place = point(rec)
            pred = predict(problem, place, inputs, choose_network(network, place, inputs)[0])
            r = {**r, **row_fields(pred, r["seconds_per_step"])}
        if r.get("predicted_seconds_per_step") is not None:
            rows.append(r)
    if not rows:
        raise InputError(f"--validate: the sweep in {directory} has no predictions (run with the model, or pass "
                         "--inputs FILE to predict from its records)")
    return {"dir": str(directory), "kind": res["kind"], "case": res["case_name"], "rows": rows,
            "summary": summary([r["model_error"] for r in rows])}


def check_point(d: Path, i: int, row: dict, rec: dict | None) -> None:
    """What the model reads of an ok row of sweep.json (its measured time, its prediction) and, when it predicts
    the point again, of the point's record (its case, validated as a case file is, and where its ranks ran)."""
    from ..case import validate_case
    from ..results.report import NUM, Optional_, shape_problem

    fix = "it is damaged or not stencil's: run the sweep again"
    positive = (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf"), "a number > 0")
    problem = shape_problem(row, {"seconds_per_step": positive, "predicted_seconds_per_step": Optional_(positive),
                                  "model_error": Optional_(NUM)}, f"rows[{i}]")
    if problem is None and row.get("predicted_seconds_per_step") is not None and row.get("model_error") is None:
        problem = f"rows[{i}].model_error is missing beside predicted_seconds_per_step"
    if problem:
        raise InputError(f"--validate: {d / 'sweep.json'}: {problem}; {fix}")
    if rec is None:
        return
    path = d / row["record"]
    place = (lambda v: isinstance(v, list) and v != [] and all(isinstance(p, dict) and isinstance(p.get("host"), str)
                                                              for p in v), "a list of objects with a host")
    problem = shape_problem(rec, {"case": (lambda v: isinstance(v, dict), "an object"),
                                  "resources": {"placement": place, "ranks": (lambda v: isinstance(v, int), "a whole number"),
                                                "threads_per_rank": (lambda v: True, "anything")},
                                  "stencil": {"backend": (lambda v: isinstance(v, str), "text")}})
    res = rec.get("resources", {})
    if problem is None and len(res["placement"]) != res["ranks"]:
        problem = "resources.placement does not list one entry per rank"
    dims = res.get("dims")
    if problem is None and not (isinstance(dims, list) and len(dims) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in dims) and dims[0] * dims[1] == res["ranks"]):
        problem = f"resources.dims is {dims!r}, not two whole numbers whose product is the {res['ranks']} ranks"
    if problem:
        raise InputError(f"--validate: {path}: {problem}; {fix}")
    rec["case"] = validate_case(rec["case"], source=f"--validate: {path}: case").model_dump(mode="json")
