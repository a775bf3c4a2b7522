"""Threads on shared cores: a small multigrid cycle and explicit steps timed with 1 and with every thread, on the
machine as it is and with a competing job (one busy loop per core in other processes, as another user's job
would be), each run a `stencil run` in its own process (the record's time per cycle or step, after warm-up).

usage: python tools/threads_loaded.py [--repeats N] [--env NAME=VALUE ...] [--json FILE]

--env sets variables for the runs (e.g. OMP_WAIT_POLICY=ACTIVE to see numba's OpenMP pool spin, or
STENCIL_SMALL_GRID=0 to switch off the one-thread rule for small grids): each configuration is one line.
Prints per case and thread count the medians of the idle and loaded times and their ratio to one thread loaded.
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
CASES = {  # name: (case, what the record's time is per)
    "mg 600x100": ({"grid": {"nx": 600, "ny": 100, "lx": 6.0, "ly": 1.0},
                    "physics": {"equation": "laplace", "solver": "multigrid"}, "boundary": {"top": 1.0},
                    "run": {"steps": 40, "tolerance": 1e-300}}, "cycle"),
    "mg 127x127": ({"grid": {"nx": 127, "ny": 127}, "physics": {"equation": "laplace", "solver": "multigrid"},
                    "boundary": {"top": 1.0}, "run": {"steps": 40, "tolerance": 1e-300}}, "cycle"),
    "heat 600x100": ({"grid": {"nx": 600, "ny": 100, "lx": 6.0, "ly": 1.0}, "boundary": {"top": 1.0},
                      "run": {"steps": 4000, "check_every": 1000}}, "step"),
    "heat 2048x2048": ({"grid": {"nx": 2048, "ny": 2048}, "boundary": {"top": 1.0},
                        "run": {"steps": 40, "check_every": 20}}, "step"),
}
BUSY = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


def run(name: str, threads: int, env: dict, tmp: Path) -> float:
    data = {"name": name.replace(" ", "_"), **CASES[name][0], "backend": {"name": "numba", "threads": threads},
            "output": {"dir": str(tmp / "out"), "fields": False, "vtk": False}}
    path = tmp / "case.yaml"
    path.write_text(yaml.safe_dump(data))
    res = subprocess.run([sys.executable, "-m", "solver", "run", str(path), "-q", "--overwrite"], capture_output=True,
                         text=True, cwd=ROOT, env=env, timeout=600)
    if res.returncode != 0:
        raise SystemExit(res.stderr[-2000:])
    return json.loads((tmp / "out" / "record.json").read_text())["throughput"]["seconds_per_step"]


def competing(cores: int, seconds: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)]) for _ in range(cores)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    env = {**os.environ, **dict(e.split("=", 1) for e in args.env)}
    cores = len(os.sched_getaffinity(0))
    rows = []
    with tempfile.TemporaryDirectory(prefix="stencil-threads-") as tmp:
        for name in args.cases.split(","):
            for threads in sorted({1, cores}):
                idle, loaded = [], []
                for _ in range(args.repeats):
                    idle.append(run(name, threads, env, Path(tmp)))
                    jobs = competing(cores, 600)
                    try:
                        time.sleep(0.2)
                        loaded.append(run(name, threads, env, Path(tmp)))
                    finally:
                        for j in jobs:
                            j.kill()
                            j.wait()
                rows.append({"case": name, "per": CASES[name][1], "threads": threads, "env": args.env,
                             "idle_ms": 1e3 * statistics.median(idle), "loaded_ms": 1e3 * statistics.median(loaded),
                             "idle_runs_ms": [1e3 * v for v in idle], "loaded_runs_ms": [1e3 * v for v in loaded]})
                r = rows[-1]
                print(f"{name:16} {threads} thread(s): ms per {r['per']}: idle {r['idle_ms']:.3g}, with a competing job "
                      f"{r['loaded_ms']:.3g} ({', '.join(f'{v:.3g}' for v in r['loaded_runs_ms'])})", flush=True)
    for name in args.cases.split(","):
        one = next(r for r in rows if r["case"] == name and r["threads"] == 1)
        for r in rows:
            if r["case"] == name and r["threads"] > 1:
                print(f"{name:16} {r['threads']} threads loaded / 1 thread loaded: {r['loaded_ms'] / one['loaded_ms']:.2f}x;"
                      f" idle: {r['idle_ms'] / one['idle_ms']:.2f}x")
    if args.json:
        args.json.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


if __name__ == "__main__":
    main()
