#!/usr/bin/env python3
"""Multigrid and implicit-heat measurements for BENCHMARKS.md (issues 22 and 23). Every figure is a real
`stencil run` (its record's solve time, cycles and per-level sections) or a kernel timed on the backend
itself; each prints one JSON line per measurement and a short table at the end.

    python tools/mg_bench.py solve 257 1025 4097 1000 [--backend numba] [--dtype float64] [--ranks R] [--repeats 3]
        the lid (top 1, other sides 0) from zero to a relative residual of --tol (1e-10): cycles, reduction
        per cycle, solve seconds (median of repeats), the finest level's share
    python tools/mg_bench.py pyamg 4096        PyAMG (classical AMG, ruge_stuben_solver) on the same equations:
        setup and solve seconds to --tol (its own relative 2-norm residual), against our solve in the same call
    python tools/mg_bench.py jacobi 1025 --steps 100000 --tol 1e-6   plain Jacobi to --tol (or --steps), and
        multigrid's time to the residual Jacobi reached
    python tools/mg_bench.py kernels 16384 [--backend cupy]   the smoothing sweep (with a right-hand side) and
        the plain sweep, kernel only, against the backend's copy rate in the same process
    python tools/mg_bench.py heat 4096 --t-end 0.01 --dt 1e-4    implicit (backward Euler, Crank-Nicolson) to
        t_end against explicit steps to t_end, and the largest difference between the final fields
    python tools/mg_bench.py growth 1024 --ratios 1 10 100 1000 10000    cycles per implicit step as dt grows
    python tools/mg_bench.py same 4096 --t-end 0.01    explicit against Crank-Nicolson to t_end at the same
        accuracy: both measured against the exact solution of the space-discrete problem, exp(-alpha lambda t)
        times the initial eigenmode (lambda its 5-point eigenvalue); the implicit steps are the fewest whose
        closed-form time error, |((1 - z/2) / (1 + z/2))^k / exp(-alpha lambda t) - 1|, is at most half the
        explicit run's, |(1 - z_e)^N / exp(-alpha lambda t) - 1| (the other half left to the solves)

--out DIR keeps every run's directory (records); --launcher/--launcher-args as `stencil sweep`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml


def lid(n: int, **over) -> dict:
    case = {"name": f"lid{n}", "grid": {"nx": n, "ny": n}, "physics": {"equation": "laplace", "solver": "multigrid"},
            "initial": {"kind": "constant", "value": 0.0}, "boundary": {"top": 1.0}, "run": {"steps": 60},
            "output": {"vtk": False}}
    for k, v in over.items():
        case[k] = {**case.get(k, {}), **v} if isinstance(v, dict) else v
    return case


def stencil_run(case: dict, out: Path, args: argparse.Namespace, ranks: int = 1, extra=()) -> dict:
    """One `stencil run` (under the launcher with ranks > 1); returns its record."""
    out.mkdir(parents=True, exist_ok=True)
    case = {**case, "output": {**case.get("output", {}), "dir": str(out / "run")}}
    path = out / "case.yaml"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    cmd = [sys.executable, "-m", "solver", "run", str(path), "-q", "--overwrite", *extra]
    if ranks > 1:
        cmd = [args.launcher, *shlex.split(args.launcher_args), "-n", str(ranks), *cmd]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr[-2000:]}")
    return json.loads((out / "run" / "record.json").read_text())


def solve_facts(rec: dict) -> dict:
    s = rec["solver"]
    levels = s.get("levels", [])
    secs = [sum(lev["seconds"].values()) for lev in levels]
    return {"cycles": s.get("iterations"), "relative": s.get("final_relative"), "reduction": s.get("reduction_per_iteration"),
            "solve_s": rec["times"]["solve"] + rec["times"].get("warmup", 0.0), "levels": len(levels),
            "finest_share": secs[0] / sum(secs) if secs and sum(secs) else None,
            "comm_wait_s": [round(lev["seconds"]["comm"] + lev["seconds"]["wait"], 4) for lev in levels],
            "ranks": rec["resources"]["ranks"], "backend": rec["stencil"]["backend"]}


def repeat(fn, repeats: int) -> tuple[dict, list[float]]:
    runs = [fn(i) for i in range(repeats)]
    times = [r["solve_s"] for r in runs]
    best = sorted(runs, key=lambda r: r["solve_s"])[len(runs) // 2]
    return {**best, "solve_s": statistics.median(times), "solve_s_all": times}, times


def cmd_solve(args) -> list[dict]:
    rows = []
    for n in args.sizes:
        for ranks in args.ranks:
            case = lid(n, backend={"name": args.backend}, numerics={"dtype": args.dtype},
                       run={"tolerance": args.tol}, multigrid={"cycle": args.cycle})
            facts, _ = repeat(lambda i: solve_facts(stencil_run(case, args.out / f"solve{n}-r{ranks}-{i}", args, ranks)),
                              args.repeats)
            rows.append({"what": "solve", "n": n, "dtype": args.dtype, "tol": args.tol, **facts})
            emit(rows[-1])
    return rows


def poisson_lid(n: int):
    """The 5-point equations of the lid on n x n points (scaled by h^2), as scipy CSR, and the right-hand side."""
    import scipy.sparse as sp

    one = sp.diags([-1, 2, -1], [-1, 0, 1], shape=(n, n))
    a = sp.kronsum(one, one, format="csr")
    b = np.zeros((n, n))
    b[-1, :] = 1.0  # the top side's value enters the last row's equations
    return a, b.ravel()


def cmd_pyamg(args) -> list[dict]:
    import pyamg

    rows = []
    for n in args.sizes:
        ours, _ = repeat(lambda i: solve_facts(stencil_run(lid(n, backend={"name": args.backend},
                                                               run={"tolerance": args.tol}),
                                                           args.out / f"ours{n}-{i}", args)), args.repeats)
        a, b = poisson_lid(n)
        t = time.perf_counter()
        ml = pyamg.ruge_stuben_solver(a)
        setup = time.perf_counter() - t
        res = []
        t = time.perf_counter()
        x = ml.solve(b, tol=args.tol, residuals=res, maxiter=200)
        solve = time.perf_counter() - t
        inf = float(np.abs(b - a @ x).max() / np.abs(b).max())
        rows.append({"what": "pyamg", "n": n, "setup_s": setup, "solve_s": solve, "iterations": len(res) - 1,
                     "relative_max_residual": inf, "ours_s": ours["solve_s"], "ours_cycles": ours["cycles"],
                     "ratio": (setup + solve) / ours["solve_s"]})
        emit(rows[-1])
    return rows


def cmd_jacobi(args) -> list[dict]:
    rows = []
    for n in args.sizes:
        case = lid(n, physics={"equation": "laplace", "solver": "jacobi"}, backend={"name": args.backend},
                   run={"steps": args.steps, "check_every": 1000, **({"tolerance": args.tol} if args.tol else {})})
        rec = stencil_run(case, args.out / f"jacobi{n}", args)
        s = rec["solver"]
        reached = s["final_relative"]
        mg = lid(n, backend={"name": args.backend}, run={"tolerance": reached})
        ours, _ = repeat(lambda i: solve_facts(stencil_run(mg, args.out / f"mg{n}-{i}", args)), args.repeats)
        rows.append({"what": "jacobi", "n": n, "iterations": s["iterations"], "relative": reached,
                     "jacobi_s": rec["times"]["solve"] + rec["times"].get("warmup", 0.0), "mg_s": ours["solve_s"],
                     "mg_cycles": ours["cycles"], "converged": s["converged"]})
        rows[-1]["speedup"] = rows[-1]["jacobi_s"] / rows[-1]["mg_s"]
        emit(rows[-1])
    return rows


def cmd_kernels(args) -> list[dict]:
    """The sweeps of the finest level, kernel only, and the copy rate, in one process on one backend."""
    from solver.backends import backend_class
    from solver.case import BackendSettings
    from solver.core.physics import Weights

    rows = []
    for n in args.sizes:
        be = backend_class(args.backend)(BackendSettings(name=args.backend), args.dtype, args.threads or os.cpu_count())
        shape = (n + 4, n + 4)
        u, t, g = (be.zeros(shape, aligned=2) for _ in range(3))  # as multigrid allocates its fields
        for i, a in enumerate((u, t, g)):
            be.put(a, (0, n + 4, 0, n + 4), np.random.default_rng(i).random(shape).astype(args.dtype))
        t_ = np.dtype(args.dtype).type
        w = Weights(t_(0.2), t_(0.2), t_(0.2))
        region = (2, n + 2, 2, n + 2)
        item = np.dtype(args.dtype).itemsize
        out = {"what": "kernels", "n": n, "dtype": args.dtype, "backend": args.backend}
        for name, fn, arrays in (("sweep", lambda: be.smooth(t, u, None, w, None, region), 2),
                                 ("sweep_g", lambda: be.smooth(t, u, g, w, t_(0.8), region), 3),
                                 ("residual_g", lambda: be.residual(t, u, g, w, region), 3)):
            secs = timed(be, fn, args.repeats)
            out[f"{name}_gbs"] = arrays * n * n * item / secs / 1e9
        out["copy_gbs"] = (be.copy_bandwidth(2 * n * n * item) if be.on_gpu else
                           2 * n * n * item / timed(be, copier(be, t, u), args.repeats)) / 1e9
        for name in ("sweep", "sweep_g", "residual_g"):
            out[f"{name}_of_copy"] = out[f"{name}_gbs"] / out["copy_gbs"]
        rows.append(out)
        emit(out)
    return rows


def copier(be, dst, src):
    """A copy of the same fields with the backend's own copy (the CPU ceiling the sweeps are compared with;
    the GPU's is the run's own: copy_bandwidth, cudaMemcpyAsync device to device)."""
    if hasattr(be, "k"):  # numba: ordinary loads and stores, as the stencil's (numba_kernels.copy)
        one = np.dtype(dst.dtype).type(1.0)
        return lambda: be.k.copy(dst.reshape(-1), src.reshape(-1), one)
    return lambda: np.copyto(dst, src)


def timed(be, fn, repeats: int) -> float:
    fn()
    be.synchronize()
    times = []
    for _ in range(max(repeats, 5)):
        t = time.perf_counter()
        for _ in range(10):
            fn()
        be.synchronize()
        times.append((time.perf_counter() - t) / 10)
    return statistics.median(times)


def heat_case(n: int, args, **over) -> dict:
    case = {"name": f"heat{n}", "grid": {"nx": n, "ny": n}, "physics": {"equation": "heat"},
            "initial": {"kind": "sine", "k": [3, 2]},
            "boundary": {"top": 0.0}, "backend": {"name": args.backend}, "numerics": {"dtype": args.dtype},
            "output": {"vtk": False}}
    for k, v in over.items():
        case[k] = {**case.get(k, {}), **v} if isinstance(v, dict) else v
    return case


def final_field(out: Path) -> np.ndarray:
    import h5py

    with h5py.File(out / "run" / "fields.h5") as f:
        return f["u"][-1].astype(np.float64)


def cmd_heat(args) -> list[dict]:
    from solver.case import validate_case
    from solver.core.physics import stable_dt

    rows = []
    for n in args.sizes:
        limit = stable_dt(validate_case(heat_case(n, args)))
        steps = int(np.ceil(args.t_end / (0.9 * limit)))
        dt = args.t_end / steps
        ex = stencil_run(heat_case(n, args, physics={"dt": dt}, run={"steps": steps}), args.out / f"explicit{n}", args)
        ref = final_field(args.out / f"explicit{n}")
        out = {"what": "heat", "n": n, "t_end": args.t_end, "explicit_steps": steps,
               "explicit_s": ex["times"]["solve"] + ex["times"].get("warmup", 0.0)}
        for scheme in ("backward-euler", "crank-nicolson"):
            k = int(round(args.t_end / args.dt))
            rec = stencil_run(heat_case(n, args, physics={"scheme": scheme, "dt": args.t_end / k},
                                        run={"steps": k, "tolerance": args.tol}), args.out / f"{scheme}{n}", args)
            diff = float(np.abs(final_field(args.out / f"{scheme}{n}") - ref).max() / np.abs(ref).max())
            out[scheme] = {"steps": k, "seconds": rec["times"]["solve"] + rec["times"].get("warmup", 0.0),
                           "cycles": rec["solver"]["cycles"], "max_difference_to_explicit": diff}
            out[scheme]["speedup"] = out["explicit_s"] / out[scheme]["seconds"]
        rows.append(out)
        emit(out)
    return rows


def mode_error(out: Path, decay: float) -> float:
    """max |u(t) - exp(-alpha lambda t) u(0)| / max |exp(-alpha lambda t) u(0)| over the run's fields."""
    import h5py

    with h5py.File(out / "run" / "fields.h5") as f:
        u0, u1, t = f["u"][0].astype(np.float64), f["u"][-1].astype(np.float64), float(f["time"][-1])
    exact = np.exp(-decay * t) * u0
    return float(np.abs(u1 - exact).max() / np.abs(exact).max())


def cn_error(zt: float, k: int) -> float:
    """|((1 - z/2) / (1 + z/2))^k e^{z_t} - 1| for k Crank-Nicolson steps to z_t = alpha lambda t (z = z_t / k)."""
    return float(abs(np.expm1(k * (np.log1p(-zt / (2 * k)) - np.log1p(zt / (2 * k))) + zt)))


def explicit_error(zt: float, steps: int) -> float:
    """|(1 - z)^N e^{z_t} - 1| for N explicit steps to z_t = alpha lambda t (z = z_t / N)."""
    return float(abs(np.expm1(steps * np.log1p(-zt / steps) + zt)))


def fewest_cn_steps(zt: float, bound: float) -> int:
    """The fewest Crank-Nicolson steps whose cn_error is at most bound (it falls as k grows)."""
    err = lambda k: cn_error(zt, k)
    hi = 1
    while err(hi) > bound:
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if err(mid) <= bound else (mid, hi)
    return hi


def cmd_same(args) -> list[dict]:
    from solver.case import validate_case
    from solver.core.physics import mode_eigenvalue, stable_dt

    rows = []
    for n in args.sizes:
        case = validate_case(heat_case(n, args))
        limit, decay = stable_dt(case), case.physics.alpha * mode_eigenvalue(case)
        steps = int(np.ceil(args.t_end / (0.9 * limit)))
        predicted = explicit_error(decay * args.t_end, steps)
        k = fewest_cn_steps(decay * args.t_end, predicted / 2)
        runs = {"explicit": (heat_case(n, args, physics={"dt": args.t_end / steps}, run={"steps": steps}), steps),
                "crank_nicolson": (heat_case(n, args, physics={"scheme": "crank-nicolson", "dt": args.t_end / k},
                                             run={"steps": k, "tolerance": args.tol}), k)}
        out = {"what": "same", "n": n, "dtype": args.dtype, "backend": args.backend, "t_end": args.t_end,
               "repeats": args.repeats}
        seconds: dict = {name: [] for name in runs}
        for i in range(args.repeats):  # alternately, so that a slow spell of the machine falls on both
            for name, (c, count) in runs.items():
                rec = stencil_run(c, args.out / f"same-{name}{n}-{i}", args)
                seconds[name].append(rec["times"]["solve"] + rec["times"].get("warmup", 0.0))
                if i == 0:
                    closed = explicit_error if name == "explicit" else cn_error
                    out[name] = {"steps": count, "dt_over_limit": args.t_end / count / limit,
                                 "error_closed_form": closed(decay * args.t_end, count),
                                 "error": mode_error(args.out / f"same-{name}{n}-{i}", decay)}
                    if name == "crank_nicolson":
                        out[name].update(tolerance=args.tol, cycles=rec["solver"]["cycles"])
        for name in runs:
            out[name].update(seconds=statistics.median(seconds[name]), seconds_all=seconds[name])
        out["speedup"] = out["explicit"]["seconds"] / out["crank_nicolson"]["seconds"]
        rows.append(out)
        emit(out)
    return rows


def cmd_growth(args) -> list[dict]:
    from solver.case import validate_case
    from solver.core.physics import stable_dt

    rows = []
    for n in args.sizes:
        limit = stable_dt(validate_case(heat_case(n, args)))
        for ratio in args.ratios:
            for scheme in ("backward-euler", "crank-nicolson"):
                rec = stencil_run(heat_case(n, args, physics={"scheme": scheme, "dt": ratio * limit},
                                            run={"steps": args.steps, "tolerance": args.tol}),
                                  args.out / f"growth{n}-{ratio:g}-{scheme}", args)
                s = rec["solver"]
                rows.append({"what": "growth", "n": n, "dt_over_limit": ratio, "scheme": scheme,
                             "cycles_per_step": s["cycles_per_step"]["mean"], "max_cycles": s["cycles_per_step"]["max"],
                             "seconds_per_step": rec["throughput"]["seconds_per_step"] if rec["throughput"] else None})
                emit(rows[-1])
    return rows


def emit(row: dict) -> None:
    print(json.dumps(row), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["solve", "pyamg", "jacobi", "kernels", "heat", "same", "growth"])
    p.add_argument("sizes", type=int, nargs="+")
    p.add_argument("--backend", default="numba")
    p.add_argument("--dtype", default="float64")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--cycle", default="V")
    p.add_argument("--ranks", type=int, nargs="+", default=[1])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=200000)
    p.add_argument("--t-end", type=float, default=0.01)
    p.add_argument("--dt", type=float, default=1e-4)
    p.add_argument("--ratios", type=float, nargs="+", default=[1, 10, 100, 1000, 10000])
    p.add_argument("--launcher", default="mpirun")
    p.add_argument("--launcher-args", default="")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    args.out = args.out or Path(tempfile.mkdtemp(prefix="mg_bench-"))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what in ("heat", "same") and args.tol == 1e-10:
        args.tol = 1e-8 if args.dtype == "float64" else 1e-5
    if args.what == "growth" and args.tol == 1e-10:
        args.tol = 1e-8
    if args.what == "growth" and args.steps == 200000:
        args.steps = 5
    rows = globals()[f"cmd_{args.what}"](args)
    (args.out / f"{args.what}.json").write_text(json.dumps(rows, indent=1))
    print(f"# {args.what}: {len(rows)} measurement(s); records under {args.out}", flush=True)


if __name__ == "__main__":
    main()
