#!/usr/bin/env python3
"""Time as the user gives it (issue 44): adaptive implicit steps against today's fixed steps, and what probes cost.
Every figure is a real `stencil run` in this process (its record's solve phase, solves and cycles); prints one
JSON line per run and a table at the end.

    python tools/time_bench.py implicit [--n 511] [--tols 3e-3 1e-3 3e-4] [--repeats 3] [--out DIR] [--backend B]
                                        [--no-reference] [--quick]
        cases/heat_implicit.yaml (backward Euler, 200 steps of 5e-4 to t = 0.1, the mosaic of random cells with the
        top side at 100) on an n x n grid (the cells scaled: the same 32 x 32 mosaic), against a fine reference (its
        own adaptive TR-BDF2 run at --ref-tol, checked against a second at ten times it); then adaptive runs at
        --tols, their solves to 1e-6 as the case's and to the adaptive default (run.tolerance null: 0.1 x the time
        tolerance, solver.core.physics.step_tolerance): the error at t = 0.1 (max |u - ref| / max |ref|), linear solves, cycles, stepping seconds (the record's
        warm-up and solve phases: every step, median of --repeats). The full case is --n 4096 (213 s a run on the 2-core VM for the fixed
        steps alone; --no-reference times it without errors, --quick leaves out the solves to 1e-6, --backend cupy
        runs it on a GPU). --out keeps reference_N.npy and initial_N.npy for tools/petsc_ts_peer.py.
    python tools/time_bench.py probes [--n 1024] [--steps 400] [--repeats 5] [--every 1 10] [--set mixed|points]
        explicit steps (numba, one process) with ten probes sampled every --every steps (every step and every 10
        unless given) against none: ms per step of the timed loop (median of --repeats, the runs alternating; each
        run's figures in the JSON line's "runs"; "paired": each run over the none run just before it, median and
        range, which cancels the VM's drift over seconds), and the probes' own ms per sample (their seconds in the record over
        the loop's samples: the host's share, reading the sweeps' sums and combining them). --set mixed (the default):
        six points, a max over a rectangle (0.67M points at 4096^2), a min and a mean over disks (0.53M each), a
        side's heat flow; --set points: eight points and two sides' heat flows, no regions. Numba samples the probes
        inside its time tiles (a sampled step ends no batch), so the ratio to none is the sampling's whole cost in the
        loop: the regions' statistics and the captured points read in the tiles, the sweeps' plan (built at the first
        sample) and the host's share; the probes' masks are built before the loop and the files' last append comes
        after it, neither counted.
    python tools/time_bench.py sweep [--n 4096] [--k 8] [--repeats 20]
        numba's fused sweep alone (numba_kernels.fused, k steps, 2 threads, the field in memory) with each probe set
        (and each of their kinds alone) sampled at every level against none and against the sampling arrays given with
        no level sampled ("idle": the kernel's own cost of taking them), the variants interleaved, median ms a step of
        --repeats: what the tiles' sampling costs without the loop's noise (the sweeps' accumulators are made outside
        the timing; the host's share is the loop's probe seconds).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def implicit_case(n: int, out: Path, backend: str = "numba", **run) -> dict:
    data = yaml.safe_load((ROOT / "cases" / "heat_implicit.yaml").read_text())
    data["grid"] = {"nx": n, "ny": n}
    data["backend"] = {"name": backend}
    data["initial"]["cell"] = max(1, round(128 * n / 4096))
    data["run"] = {"tolerance": 1e-6, **run}
    data["output"] = {"dir": str(out), "vtk": False, "fields": False}
    return data


def one(data: dict, repeats: int = 1) -> dict:
    """Run `data` `repeats` times; the last field, solves, cycles, the median solve seconds."""
    from solver import api

    case = api.build_case(data)
    seconds = []
    for _ in range(repeats):
        r = api.run(case, overwrite=True, progress=False, ceiling=False)
        seconds.append(r.record["times"]["solve"] + r.record["times"]["warmup"])  # every step, the first one's too
    ad = r.record["run"].get("adaptive")
    solves = ad["solves"] if ad else r.record["run"]["steps"]
    return {"field": r.field, "solves": solves, "cycles": r.record["solver"]["cycles"],
            "steps": r.record["run"]["steps"], "rejected": ad["rejected"] if ad else 0,
            "solve_seconds": statistics.median(seconds), "repeats": seconds}


def implicit(args) -> None:
    out = Path(args.out or tempfile.mkdtemp(prefix="time_bench_"))
    out.mkdir(parents=True, exist_ok=True)
    n, rows, be = args.n, [], args.backend
    ref = None if args.no_reference else reference(n, out, args.ref_tol, be)
    from solver import api
    from solver.core.initial import initial_block
    from solver.core.decomp import decompose

    c = api.build_case(implicit_case(n, out / "i", be, steps=1))
    np.save(out / f"initial_{n}.npy", initial_block(c, decompose(c.shape, (1, 1), 0)))
    runs = [("backward Euler, 200 steps of 5e-4 (today)", implicit_case(n, out / "be", be, steps=200))]
    runs += [(f"adaptive, time_tolerance {tol:g}, solves to 1e-6", implicit_case(n, out / f"a{tol:g}", be, t_end=0.1,
                                                                              time_tolerance=tol))
             for tol in ([] if args.quick else args.tols)]
    runs += [(f"adaptive, time_tolerance {tol:g}, solves to 0.1 x it (run.tolerance null)",
              implicit_case(n, out / f"d{tol:g}", be, t_end=0.1, time_tolerance=tol, tolerance=None))
             for tol in args.tols]
    for label, data in runs:
        r = one(data, args.repeats)
        error = None if ref is None else float(np.abs(r["field"] - ref).max() / np.abs(ref).max())
        row = {"run": label, "n": n, "backend": args.backend, "error": error,
               **{k: v for k, v in r.items() if k != "field"}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n| run | error at t = 0.1 | linear solves | cycles | solve s (median of {args.repeats}) |\n|---|---|---|---|---|")
    for r in rows:
        error = "-" if r["error"] is None else f"{r['error']:.2e}"
        print(f"| {r['run']} | {error} | {r['solves']} | {r['cycles']} | {r['solve_seconds']:.2f} |")


def reference(n: int, out: Path, tol: float, backend: str):
    """The fine reference (adaptive at `tol`, solves to 1e-10), checked against a run at ten times its tolerance."""
    ref = one(implicit_case(n, out / "ref", backend, t_end=0.1, time_tolerance=tol, tolerance=1e-10))["field"]
    check = one(implicit_case(n, out / "check", backend, t_end=0.1, time_tolerance=tol * 10, tolerance=1e-10))["field"]
    note = {"reference": f"adaptive TR-BDF2, time_tolerance {tol:g}, solves to 1e-10",
            "against ten times its tolerance": float(np.abs(check - ref).max() / np.abs(ref).max())}
    print(json.dumps(note), flush=True)
    np.save(out / f"reference_{n}.npy", ref)
    return ref


PROBES = [{"name": f"p{k}", "kind": "point", "at": [0.1 + 0.08 * k, 0.37]} for k in range(6)] + [
    {"name": "hot", "kind": "max", "region": {"kind": "rectangle", "lower": [0.4, 0.4], "upper": [0.6, 0.6]}},
    {"name": "cold", "kind": "min", "region": {"kind": "disk", "center": [0.3, 0.7], "radius": 0.1}},
    {"name": "mean", "kind": "mean", "region": {"kind": "disk", "center": [0.7, 0.3], "radius": 0.1}},
    {"name": "top", "kind": "heat_flow", "side": "top"}]
POINTS = [{"name": f"p{k}", "kind": "point", "at": [0.1 + 0.1 * k, 0.2 + 0.08 * k]} for k in range(8)] + [
    {"name": "top", "kind": "heat_flow", "side": "top"}, {"name": "left", "kind": "heat_flow", "side": "left"}]
PROBE_SETS = {"mixed": PROBES, "points": POINTS}  # time_bench.py probes --set


def probes(args) -> None:
    """ms per step of the timed loop (its wall time over its steps, the probes' output included) with no probes and
    the ten probes of --set every --every steps (1 and 10 unless given), runs alternating; and the probes' own seconds
    per sample."""
    from solver import api

    out = Path(tempfile.mkdtemp(prefix="time_bench_probes_"))
    base = {"name": "probes", "grid": {"nx": args.n, "ny": args.n}, "initial": {"kind": "random", "seed": 1},
            "boundary": {"top": 1.0}, "run": {"steps": args.steps, "check_every": 100, "warmup": 10},
            "backend": {"name": "numba"}, "output": {"dir": str(out), "vtk": False, "fields": False}}
    variants = {"none": base}
    for every in args.every:
        variants[f"ten probes every {every} step(s)"] = {**base, "output": {**base["output"],
                                                                          "probes": PROBE_SETS[args.set],
                                                                          "probe_every": every}}
    times = {k: [] for k in variants}
    per_sample = {k: [] for k in variants if k != "none"}
    for _ in range(args.repeats):
        for label, data in variants.items():
            r = api.run(api.build_case(data), overwrite=True, progress=False, ceiling=False)
            loop, steps = r.record["timings"]["loop"], args.steps - 10
            times[label].append((loop if isinstance(loop, float) else loop["max"]) / steps * 1e3)
            if label != "none":
                every = data["output"]["probe_every"]
                samples = math.ceil(args.steps / every)  # the loop's samples (the warm-up's and the last step included)
                per_sample[label].append(r.record["run"]["probe_seconds"] / samples * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    sample = {k: statistics.median(v) for k, v in per_sample.items()}
    # each run against the none run just before it (the VM's speed drifts over seconds: a pair shares its drift)
    paired = {k: sorted(a / b for a, b in zip(v, times["none"])) for k, v in times.items() if k != "none"}
    print(json.dumps({"n": args.n, "steps": args.steps, "set": args.set, "ms_per_step": med, "ms_per_sample": sample,
                      "runs": times, "paired": paired}))
    print(f"\n| {args.n}^2 explicit, numba, 2 threads, --set {args.set} | ms per step (median of {args.repeats}) | "
          "of none | paired: median (range) | probes' own ms per sample | their share of a step (none) |\n"
          "|---|---|---|---|---|---|")
    for k, v in med.items():  # (the share: ms a sample over the steps between samples)
        every = int(k.split()[3]) if k in sample else 1
        own = f"{sample[k]:.3f} | {sample[k] / every / med['none']:.2%}" if k in sample else "- | -"
        pair = f"{statistics.median(paired[k]):.3f} ({paired[k][0]:.2f}-{paired[k][-1]:.2f})" if k in paired else "-"
        print(f"| {k} | {v:.3f} | {v / med['none']:.3f} | {pair} | {own} |")


def sweep(args) -> None:
    """The fused sweep alone with probes sampled at every level, interleaved variants (module docstring)."""
    import numba

    from solver.backends import numba_kernels
    from solver.case import validate_case
    from solver.io.probes import Sampler, Tap
    from solver.parallel.comm import Comm
    from solver.run import Options, Run

    n, k = args.n, args.k
    sets = {**PROBE_SETS, "points alone": [p for p in POINTS if p["kind"] == "point"], "the top's heat flow": POINTS[-2:-1],
            "the left's heat flow": POINTS[-1:], **{kind: [p for p in PROBES if p["kind"] == kind] for kind in ("max", "min",
                                                                                                        "mean")}}
    taps, w = {}, None
    out = Path(tempfile.mkdtemp(prefix="time_bench_sweep_"))
    for m, (name, chosen) in enumerate(sets.items()):
        data = {"name": "sweep", "grid": {"nx": n, "ny": n}, "boundary": {"top": 1.0, "left": 0.5}, "run": {"steps": 1},
                "backend": {"name": "numba"}, "output": {"dir": str(out / str(m)), "vtk": False, "fields": False,
                                                         "probes": chosen}}
        r = Run(validate_case(data), Comm(), Options(ceiling=False, quiet=True, overwrite=True))
        r.setup()
        taps[name], w = Tap(Sampler(r.case, r.layout.block), range(1, k + 1)), r.layout.w
    numba.set_num_threads(2)  # (after the set-ups: a run's compile on a tiny array leaves one thread set)
    u = np.random.default_rng(1).random((n + 2, n + 2))
    dst = u.copy()
    cb = max(1, -(-n // max(8 * k, (1 << 20) // (3 * k * 8))))  # numba_backend.column_blocks's default
    every = np.arange(-1, k, dtype=np.int64)  # level L's slot L - 1 (level 0 unused)
    never = np.full(k + 1, -1, dtype=np.int64)
    times = {label: [] for label in ("none", "idle", *sets)}
    for rep in range(args.repeats + 2):  # (the first two compile and warm)
        for label in times:
            tap = taps["points" if label == "idle" else label] if label != "none" else None
            rb = 2 * (tap.bands if tap is not None else 1)  # (as numba_backend.advance: a tap's bands a thread)
            pr = None if tap is None else tap.sweep(never if label == "idle" else every, rb * cb, 2)
            t = time.perf_counter()
            numba_kernels.fused(dst, u, w.wc, w.wx, w.wy, k, rb, cb, None, None, None, None, None, pr)
            if rep >= 2:
                times[label].append(time.perf_counter() - t)
    med = {label: statistics.median(v) * 1e3 / k for label, v in times.items()}
    paired = {label: statistics.median(a / b for a, b in zip(v, times["none"])) for label, v in times.items()}
    print(json.dumps({"n": n, "k": k, "ms_per_step": med, "paired": paired}))
    print(f"\n| {n}^2 fused sweep of {k} steps, numba, 2 threads | ms a step (median of {args.repeats}) | of none | "
          "paired (each over the none sweep of its round, median) |\n|---|---|---|---|")
    for label, v in med.items():
        print(f"| {label} | {v:.3f} | {v / med['none']:.3f} | {paired[label]:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    a = sub.add_parser("implicit")
    a.add_argument("--n", type=int, default=511)
    a.add_argument("--tols", type=float, nargs="+", default=[3e-3, 1e-3, 3e-4])
    a.add_argument("--ref-tol", type=float, default=1e-7)
    a.add_argument("--repeats", type=int, default=3)
    a.add_argument("--out")
    a.add_argument("--backend", default="numba", help="the runs' backend (cupy on a GPU)")
    a.add_argument("--no-reference", action="store_true",
                   help="no reference and no errors: times and solves alone (the full size on 2 cores)")
    a.add_argument("--quick", action="store_true", help="the adaptive runs with the default solves only")
    b = sub.add_parser("probes")
    b.add_argument("--n", type=int, default=1024)
    b.add_argument("--steps", type=int, default=400)
    b.add_argument("--repeats", type=int, default=5)
    b.add_argument("--every", type=int, nargs="+", default=[1, 10], help="probe_every values to time")
    b.add_argument("--set", choices=sorted(PROBE_SETS), default="mixed",
                   help="the ten probes: mixed (points, three regions, a heat flow) or points (points and heat flows)")
    c = sub.add_parser("sweep")
    c.add_argument("--n", type=int, default=4096)
    c.add_argument("--k", type=int, default=8)
    c.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    {"implicit": implicit, "probes": probes, "sweep": sweep}[args.part](args)


if __name__ == "__main__":
    main()
