#!/usr/bin/env python3
"""Measurements of shapes in the plate for BENCHMARKS.md (issue 43). Every figure comes from a real `stencil run` (its
record and fields.h5); each run prints one JSON line, and each part a table at the end.

    python tools/shapes_bench.py circles [--sizes 15 31 63 127 255 511 1023] [--repeats 3] [--threads 2]
        concentric circles: a disk of radius 0.15 held at 100 inside a circle of radius 0.4 held at 20 (u = a + b ln r,
        the centre off the grid's symmetry) on a unit square, solved to 1e-12 by multigrid + CG by
          gibou      the held disk and an outline disk with a fixed rim: the rims at their true place (Gibou's links);
          staircase  the same values held at the grid's points: two `kind: mask` regions held at 100 and 20, written
                     as .npy at the grid's resolution, one pixel per point's cell, set where the point lies inside r1
                     (outside r2): every rim moves to the faces half way between a held and a free point;
          corners    the same with the pixels between the points (corners on the points), set where all four corners
                     lie inside r1 (outside r2): the rims run through the held points themselves, so each free
                     point's link to a held one is a plain 5-point link (the textbook staircase);
        max error over the points of the annulus r1 < r < r2, the order between grids, the solve's time (the record's
        warm-up cycle + solve; set-up apart), medians of repeats; then for each target error the time each method needs
        to reach it (log-log interpolation between the grids that bracket it; "<=" where the coarsest grid already
        does), the solve alone and with the set-up, and the ratios.
    python tools/shapes_bench.py rates [--sizes 401] [--steps 200] [--repeats 5] [--threads 2]
        explicit heat on cases/pipe_plate.yaml's plate (aluminium, faces cooled, the left side held at 80 C) with its
        regions (a held pipe, two insulated holes, a convective slot) and without them, the other sides insulated
        (plain steps) or held (time tiles): time per step, plain steps (time tile 1) and the default tiles,
        alternated run by run; the ratio of the medians.
    python tools/shapes_bench.py steady [--sizes 401 801] [--repeats 3] [--threads 2]
        the steady state of the same plate with and without its regions, to 1e-10: cycles (CG iterations), time per
        cycle, set-up, alternated run by run.

--out DIR keeps the runs' directories (default: a new temporary directory).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
CENTRE, R1, R2, T1, T2 = (0.5031, 0.4893), 0.15, 0.4, 100.0, 20.0


def run(case: dict, out: Path, extra=()) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    case = {**case, "output": {**case.get("output", {}), "dir": str(out / "run")}}
    path = out / "case.yaml"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    cmd = [sys.executable, "-m", "solver", "run", str(path), "-q", "--overwrite", *extra]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-400:]}")
    return json.loads((out / "run" / "record.json").read_text())


# concentric circles ----------------------------------------------------------------------------------------------
def exact(r: np.ndarray) -> np.ndarray:
    b = (T2 - T1) / math.log(R2 / R1)
    return T1 + b * np.log(r / R1)


def points(n: int) -> np.ndarray:
    """The grid's points along an axis: Dirichlet sides, so (j + 1) h with h = 1 / (n + 1)."""
    return (np.arange(n) + 1.0) / (n + 1)


def masks(n: int, out: Path, method: str) -> list[dict]:
    """The staircases' two held mask regions (.npy written under out)."""
    h = 1.0 / (n + 1)
    p = points(n)
    if method == "staircase":  # a pixel per point's cell
        X, Y = np.meshgrid(p, p)
        r = np.hypot(X - CENTRE[0], Y - CENTRE[1])
        inner, outer = r <= R1, r >= R2
        extent = [[0.5 * h, 0.5 * h], [(n + 0.5) * h, (n + 0.5) * h]]
    else:  # pixels between the points, set where all four corners are
        X, Y = np.meshgrid(p, p)
        r = np.hypot(X - CENTRE[0], Y - CENTRE[1])
        corners = lambda m: m[:-1, :-1] & m[1:, :-1] & m[:-1, 1:] & m[1:, 1:]  # noqa: E731
        inner, outer = corners(r <= R1), corners(r >= R2)
        extent = [[h, h], [n * h, n * h]]
    out.mkdir(parents=True, exist_ok=True)
    regions = []
    for name, bits, value in (("inner", inner, T1), ("outer", outer, T2)):
        path = out / f"{name}.npy"
        np.save(path, bits.astype(np.uint8))
        regions.append({"kind": "mask", "path": str(path), "extent": extent, "held": value, "name": name})
    return regions


def circles_case(n: int, method: str, out: Path) -> dict:
    if method == "gibou":
        physics = {"regions": [{"kind": "disk", "center": list(CENTRE), "radius": R1, "held": T1, "name": "inner"}],
                   "outline": {"kind": "disk", "center": list(CENTRE), "radius": R2,
                               "rim": {"kind": "dirichlet", "value": T2}}}
    else:
        physics = {"regions": masks(n, out, method)}
    return {"name": f"{method}{n}", "grid": {"nx": n, "ny": n, "lx": 1.0, "ly": 1.0},
            "physics": {"equation": "laplace", "solver": "multigrid", "material": "steel", **physics},
            "boundary": {s: T2 for s in ("left", "right", "bottom", "top")},
            "run": {"steps": 200, "tolerance": 1e-12}, "output": {"fields": True, "vtk": False}}


def circle_error(run_dir: Path) -> float:
    import h5py

    with h5py.File(run_dir / "fields.h5") as f:
        u, x, y = f["u"][-1], f["x"][:], f["y"][:]
    X, Y = np.meshgrid(x, y)
    r = np.hypot(X - CENTRE[0], Y - CENTRE[1])
    annulus = (r > R1) & (r < R2)
    return float(np.max(np.abs(u[annulus] - exact(r[annulus]))))


def circles(a, out: Path) -> list[dict]:
    rows = []
    methods = ("gibou", "staircase", "corners")
    for n in a.sizes:
        recs = {m: [] for m in methods}
        errors = {}
        for k in range(a.repeats):
            for m in methods:  # alternated, so drifts of the machine hit each alike
                d = out / f"{m}{n}_{k}"
                recs[m].append(run(circles_case(n, m, d), d, backend_args(a)))
                errors[m] = circle_error(d / "run")  # the same field every repeat
        for m in methods:
            rs = recs[m]
            row = {"part": "circles", "method": m, "n": n, "max_error": errors[m],
                   "iterations": rs[0]["solver"]["iterations"],
                   "solve_s": statistics.median(r["times"]["warmup"] + r["times"]["solve"] for r in rs),
                   "setup_s": statistics.median(r["times"]["setup"] for r in rs), "repeats": a.repeats}
            print(json.dumps(row), flush=True)
            rows.append(row)
    summary(rows, a.targets)
    return rows


def time_to(target: float, series: list[tuple[float, float]]):
    """The time a method needs to reach `target` (series: (error, seconds) by grid, coarse to fine): log-log
    interpolation between the last grid above the target and the first at or below it; None if no grid reaches it;
    the coarsest grid's time (an upper bound, marked) if it already does."""
    for i, (e, t) in enumerate(series):
        if e <= target:
            if i == 0:
                return t, "<="
            (e0, t0), (e1, t1) = series[i - 1], (e, t)
            w = math.log(target / e0) / math.log(e1 / e0)
            return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0))), "="
    return None, ""


def summary(rows: list[dict], targets: list[float]) -> None:
    print("\nmethod | n | max error | order | iterations | solve s | setup s")
    by = {}
    for r in rows:
        by.setdefault(r["method"], []).append(r)
    for m, rs in by.items():
        prev = None
        for r in rs:
            o = "" if prev is None else f"{math.log2(prev / r['max_error']):.2f}"
            print(f"{m} | {r['n']} | {r['max_error']:.3e} | {o} | {r['iterations']} | {r['solve_s']:.4f} | "
                  f"{r['setup_s']:.3f}")
            prev = r["max_error"]
    for label, key in (("the solve", lambda r: r["solve_s"]), ("set-up + solve", lambda r: r["solve_s"] + r["setup_s"])):
        print(f"\ntime to a max error, {label} (s) | " + " | ".join(by) + " | staircase / gibou | corners / gibou")
        for target in targets:
            got = {m: time_to(target, [(r["max_error"], key(r)) for r in rs]) for m, rs in by.items()}
            ratio = lambda m: (f"{got[m][0] / got['gibou'][0]:.3g}x" if got[m][0] and got["gibou"][0] else "-")  # noqa: E731
            cells = [f"{s}{t:.4g}" if t is not None else "not reached" for t, s in got.values()]
            print(f"{target:.0e} | " + " | ".join(cells) + f" | {ratio('staircase')} | {ratio('corners')}")


# the plate with and without its shapes ---------------------------------------------------------------------------
def plate(n: int, shapes: bool, equation: str, steps: int, sides: str = "insulated") -> dict:
    """cases/pipe_plate.yaml's plate (200 x 120 mm, aluminium 3 mm, both faces cooled) at n x 0.6 n points, with its
    regions or without them; its left side held at 80 C in both (something to solve without the pipe), the other sides
    insulated as the case's ("insulated": plain steps, the ghosts refilled every step) or held at 20 C ("fixed": the
    default time tiles)."""
    case = yaml.safe_load((ROOT / "cases" / "pipe_plate.yaml").read_text())
    case["grid"].update(nx=n, ny=round((n - 1) * 0.6) + 1)  # 401 x 241, 801 x 481
    if not shapes:
        case["physics"].pop("regions")
    case["boundary"]["left"] = 80.0
    if sides == "fixed":
        case["boundary"].update(right=20.0, top=20.0, bottom=20.0)
    case["physics"]["equation"] = equation
    if equation == "heat":
        case["physics"].pop("solver", None)
        case["run"] = {"steps": steps, "check_every": steps}
    else:
        case["run"] = {"steps": 100, "tolerance": 1e-10}
    case["output"] = {"fields": False, "vtk": False}
    return case


def rates(a, out: Path) -> list[dict]:
    rows = []
    for n in a.sizes:
        for sides in ("insulated", "fixed"):
            for tile in (1, None):
                extra = backend_args(a) + (["--time-tile", str(tile)] if tile else [])
                recs = {False: [], True: []}
                for k in range(a.repeats):
                    for shapes in (False, True):  # alternated, so drifts of the machine hit each alike
                        d = out / f"rate{n}_{sides}_{shapes}_{tile}_{k}"
                        recs[shapes].append(run(plate(n, shapes, "heat", a.steps, sides), d, extra))
                ms = {s: 1e3 * statistics.median(r["throughput"]["seconds_per_step"] for r in rs)
                      for s, rs in recs.items()}
                for shapes, rs in recs.items():
                    row = {"part": "rates", "n": n, "ny": rs[0]["case"]["grid"]["ny"], "sides": sides, "shapes": shapes,
                           "time_tile": rs[0]["resources"]["time_tile"], "ms_per_step": ms[shapes],
                           "spread_ms": [round(1e3 * min(r["throughput"]["seconds_per_step"] for r in rs), 4),
                                         round(1e3 * max(r["throughput"]["seconds_per_step"] for r in rs), 4)],
                           "bytes_per_update": rs[0]["throughput"]["bytes_per_update"],
                           "update": rs[0]["physics"]["update"], "steps": rs[0]["physics"]["steps"], "repeats": a.repeats}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
                print(json.dumps({"part": "rates", "n": n, "sides": sides, "time_tile": tile or "default",
                                  "shapes_over_plain": ms[True] / ms[False]}), flush=True)
    return rows


def steady(a, out: Path) -> list[dict]:
    rows = []
    for n in a.sizes:
        recs = {False: [], True: []}
        for k in range(a.repeats):
            for shapes in (False, True):
                d = out / f"steady{n}_{shapes}_{k}"
                recs[shapes].append(run(plate(n, shapes, "laplace", 0), d,
                                        backend_args(a)))
        for shapes, rs in recs.items():
            it = rs[0]["solver"]["iterations"]
            row = {"part": "steady", "n": n, "ny": rs[0]["case"]["grid"]["ny"], "shapes": shapes, "iterations": it,
                   "ms_per_cycle": statistics.median(1e3 * (r["times"]["warmup"] + r["times"]["solve"]) / max(it, 1) for r in rs),
                   "solve_s": statistics.median(r["times"]["warmup"] + r["times"]["solve"] for r in rs),
                   "setup_s": statistics.median(r["times"]["setup"] for r in rs), "ended": rs[0]["solver"]["ended"],
                   "repeats": a.repeats}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def backend_args(a) -> list[str]:
    """The runs' backend options: numba with --threads, or cupy."""
    return ["--backend", a.backend] + (["--threads", str(a.threads)] if a.backend == "numba" else [])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("circles", "rates", "steady"))
    p.add_argument("--sizes", type=int, nargs="+")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--backend", default="numba", choices=("numba", "cupy"), help="cupy: one GPU (--threads unused)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--targets", type=float, nargs="+", default=[3.0, 1.0, 0.3, 0.1, 0.03, 0.01, 3e-3, 1e-3])
    p.add_argument("--out")
    a = p.parse_args()
    a.sizes = a.sizes or {"circles": [15, 31, 63, 127, 255, 511, 1023], "rates": [401], "steady": [401, 801]}[a.what]
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="shapes_bench-"))
    rows = {"circles": circles, "rates": rates, "steady": steady}[a.what](a, out)
    if a.what != "circles":
        print("\n" + "\n".join(" | ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())
                               for r in rows))


if __name__ == "__main__":
    main()
