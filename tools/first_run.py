"""First-run compile times: each case run twice as a user runs it, first with an empty numba cache (a fresh
install), then again with the cache the first run left; the difference is what compiling cost the first run.

usage: python tools/first_run.py [CASE.yaml ...] [--repeats N] [--threads T] [--shrink N] [--steps N] [--json FILE]
                                 [--installed]

--installed: as after `make venv` instead: one empty cache warmed by tools/warm_cache.py (its time printed), then
each case's first run in it (a user's first run after installing) and a second one.

Cases default to cases/*.yaml. A case with more than --shrink^2 points (default 512) runs on a --shrink^2 grid,
and at most --steps steps (default 20): the kernels compiled are the same (no shipped case switches a source on
later, which would compile more); only the solve's time would change. Each repeat takes a new empty cache
(NUMBA_CACHE_DIR in a temporary directory) and its own output directory. Prints one line per case: the medians of
the cold run's wall time, the warm run's, their difference, and the cold record's setup, compile and warm-up phases.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def command(case: Path, out: Path, shrink: int, steps: int) -> list[str]:
    data = yaml.safe_load(case.read_text())
    grid = data.get("grid", {})
    cmd = [sys.executable, "-m", "solver", "run", str(case), "-o", str(out), "--overwrite", "-q"]
    if data.get("run", {}).get("steps", 0) > steps:
        cmd += ["--steps", str(steps)]
    if grid.get("nx", 0) * grid.get("ny", 0) > shrink * shrink:
        cmd += ["--set", f"grid.nx={shrink}", "--set", f"grid.ny={shrink}"]
    return cmd


def timed(cmd: list[str], env: dict) -> tuple[float, dict]:
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    out = Path(cmd[cmd.index("-o") + 1])
    return wall, json.loads((out / "record.json").read_text())["times"]


def installed(cases: list[Path], threads: int | None, shrink: int, steps: int) -> list[dict]:
    """One empty cache warmed by tools/warm_cache.py, then each case's first and second run in it."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="stencil-first-run-") as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "numba")}
        if threads:
            env["NUMBA_NUM_THREADS"] = str(threads)
        t = time.perf_counter()
        subprocess.run([sys.executable, str(ROOT / "tools" / "warm_cache.py"), "--quiet"], env=env, cwd=ROOT, check=True)
        print(f"tools/warm_cache.py: {time.perf_counter() - t:.1f} s", flush=True)
        for case in cases:
            cmd = command(case, Path(tmp) / "out", shrink, steps)
            first, times = timed(cmd, env)
            second, again = timed(cmd, env)
            rows.append({"case": case.name, "first_s": first, "second_s": second,
                         **{f"first_{k}_s": times.get(k, 0.0) for k in ("setup", "compile", "warmup", "solve")},
                         **{f"second_{k}_s": again.get(k, 0.0) for k in ("setup", "compile", "warmup", "solve")}})
            r = rows[-1]
            print(f"{r['case']:24} first {first:6.2f} s (setup {r['first_setup_s']:.2f}, compile {r['first_compile_s']:.2f}, "
                  f"warm-up {r['first_warmup_s']:.2f}, solve {r['first_solve_s']:.2f}); second {second:6.2f} s (setup "
                  f"{r['second_setup_s']:.2f}, compile {r['second_compile_s']:.2f}, warm-up {r['second_warmup_s']:.2f})",
                  flush=True)
    return rows


def measure(case: Path, repeats: int, threads: int | None, shrink: int, steps: int) -> dict:
    cold, warm, phases = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="stencil-first-run-") as tmp:
            env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "numba")}
            if threads:
                env["NUMBA_NUM_THREADS"] = str(threads)
            cmd = command(case, Path(tmp) / "out", shrink, steps)
            wall, times = timed(cmd, env)
            cold.append(wall)
            phases.append(times)
            warm.append(timed(cmd, env)[0])
    med = statistics.median
    return {"case": case.name, "cold_s": med(cold), "warm_s": med(warm), "compile_cost_s": med(c - w for c, w in
                                                                                            zip(cold, warm)),
            **{f"cold_{k}_s": med(p.get(k, 0.0) for p in phases) for k in ("setup", "compile", "warmup", "solve")},
            "repeats": repeats, "cold_runs_s": cold, "warm_runs_s": warm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", type=Path)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--shrink", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--installed", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    cases = args.cases or sorted((ROOT / "cases").glob("*.yaml"))
    if args.installed:
        rows = installed(cases, args.threads, args.shrink, args.steps)
        if args.json:
            args.json.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return
    rows = []
    print(f"{'case':24} {'cold s':>8} {'warm s':>8} {'compile cost s':>15} {'setup':>7} {'compile':>8} {'warmup':>7}")
    for case in cases:
        r = measure(case, args.repeats, args.threads, args.shrink, args.steps)
        rows.append(r)
        print(f"{r['case']:24} {r['cold_s']:8.2f} {r['warm_s']:8.2f} {r['compile_cost_s']:15.2f} "
              f"{r['cold_setup_s']:7.2f} {r['cold_compile_s']:8.2f} {r['cold_warmup_s']:7.2f}", flush=True)
    if args.json:
        args.json.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


if __name__ == "__main__":
    main()
