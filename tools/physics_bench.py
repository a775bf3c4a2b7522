#!/usr/bin/env python3
"""Measurements of the new physics for BENCHMARKS.md (issues 33 and 34). Every figure is a real `stencil run`
(its record: time per step or cycle, the fraction of the copy bandwidth measured for the run, counted with the
bytes of the source and coefficient fields, cycles); each prints one JSON line per run and a table at the end.

    python tools/physics_bench.py rates 4096 [--backend numba] [--threads 2] [--repeats 3] [--steps 200]
        explicit heat: plain, with a source, with an alpha field, with both; per-step and time-tiled where the
        backend tiles (time_tile 1 against the default); time per step, fraction of the copy-bound rate
    python tools/physics_bench.py steady 1023 4095 [--ranks 2] [--repeats 3]
        steady states to 1e-10: the constant lid, a two-material lid (contrast 1e3), a checkerboard of 8 x 8
        blocks (contrast 1e2), the chip case: cycles (conjugate-gradient iterations); seconds of set-up (levels,
        coefficients, tables), of the solve (its first cycle, timed apart as warm-up, included), and the two
        together (what tools/petsc_peer.py's total is compared with; numba's compilation, cached on disk, is not)
    python tools/physics_bench.py forms 4096 [--threads 2] [--repeats 7]
        the explicit kernel alone (numba) with alpha as two face fields (what the solver reads: ax, ay) and as one
        per-point field whose harmonic means the kernel computes (4 divisions a point, one array fewer), and the
        constant-coefficient kernel: time per step, medians of repeats, in one process
    python tools/physics_bench.py capacity 2048 [--threads 2] [--repeats 3] [--steps 200]
        issue 42: explicit heat in the material form with heat capacities that differ and face cooling (the flux form
        reading a capacity field and a centre weight field), against the same geometry in the diffusivity form (an
        alpha field), per-step and time-tiled: time per step and the fraction of the copy-bound rate counted with the
        bytes each reads; then backward-Euler steps of both (multigrid + CG): cycles a step and time per cycle
    python tools/physics_bench.py baseline 4096 --against DIR [--repeats 5]
        a plain case (no source, constant sides) with this checkout and with DIR (another checkout, run with its own
        .venv where it has one, e.g. the commit before the new physics), alternated run by run: the ratio of the
        medians

--out DIR keeps the runs' directories; runs start with mpirun (the venv's) when --ranks > 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def heat(n: int, source: bool, field: bool, steps: int) -> dict:
    physics = {"equation": "heat"}
    if source:
        physics["source"] = [{"kind": "gaussian", "center": [0.5, 0.5], "width": 0.2, "amplitude": 10.0}]
    if field:
        physics["alpha"] = {"background": 1.0, "regions": [{"kind": "disk", "center": [0.4, 0.6], "radius": 0.25,
                                                             "value": 10.0}]}
    return {"name": f"rates{n}", "grid": {"nx": n, "ny": n}, "physics": physics, "initial": {"kind": "random", "seed": 1},
            "boundary": {"top": 1.0}, "run": {"steps": steps, "check_every": steps}, "output": {"fields": False, "vtk": False}}


def checker(blocks: int, contrast: float) -> list[dict]:
    return [{"kind": "rectangle", "lower": [j / blocks, i / blocks], "upper": [(j + 1) / blocks, (i + 1) / blocks],
             "value": contrast} for i in range(blocks) for j in range(blocks) if (i + j) % 2 == 0]


STEADY = {
    "lid": {},
    "two-material lid (1e3)": {"alpha": {"background": 1.0, "regions": [
        {"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.5, 1.0], "value": 1000.0}]}},
    "checkerboard 8x8 (1e2)": {"alpha": {"background": 1.0, "regions": checker(8, 100.0)}},
}


def steady(n: int, physics: dict) -> dict:
    return {"name": f"steady{n}", "grid": {"nx": n, "ny": n}, "physics": {"equation": "laplace", "solver": "multigrid",
                                                                           **physics},
            "initial": {"kind": "constant", "value": 0.0}, "boundary": {"top": 1.0},
            "run": {"steps": 100, "tolerance": 1e-10}, "output": {"fields": False, "vtk": False}}


def run(case: dict, out: Path, python: str, ranks: int = 1, extra=(), cwd: Path = ROOT) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    case = {**case, "output": {**case.get("output", {}), "dir": str(out / "run")}}
    path = out / "case.yaml"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    cmd = [python, "-m", "solver", "run", str(path), "-q", "--overwrite", *extra]
    if ranks > 1:
        cmd = [str(Path(python).parent / "mpirun"), "-n", str(ranks), *cmd]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-400:]}")
    return json.loads((out / "run" / "record.json").read_text())


def median_of(records: list[dict], key) -> float:
    return statistics.median(key(r) for r in records)


def rates(a: argparse.Namespace, out: Path) -> list[dict]:
    rows = []
    for n in a.sizes:
        for source, field in ((False, False), (True, False), (False, True), (True, True)):
            for tile in (1, None):
                extra = ["--backend", a.backend, "--threads", str(a.threads)] + (["--time-tile", str(tile)] if tile else [])
                recs = [run(heat(n, source, field, a.steps), out / f"r{n}{source}{field}{tile}{k}", sys.executable,
                            extra=extra) for k in range(a.repeats)]
                tp = [r["throughput"] for r in recs]
                row = {"n": n, "source": source, "alpha_field": field, "time_tile": recs[0]["resources"]["time_tile"],
                       "ms_per_step": 1e3 * statistics.median(t["seconds_per_step"] for t in tp),
                       "fraction_of_copy": statistics.median(t["fraction_of_copy"] for t in tp),
                       "bytes_per_update": tp[0]["bytes_per_update"], "copy_gbs": statistics.median(t["copy_gbs"] for t in tp),
                       "path": recs[0]["physics"]["steps"], "repeats": a.repeats}
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def capacity_case(n: int, materials: bool, steps: int, scheme: str = "explicit") -> dict:
    """A 0.1 m square plate with a disk and a rectangle of other materials: in the material form with heat capacities
    that differ and face cooling, or as the same geometry's diffusivity field (k / C of each material)."""
    shapes = [{"kind": "disk", "center": [0.04, 0.06], "radius": 0.025}, {"kind": "rectangle", "lower": [0.055, 0.01],
                                                                        "upper": [0.09, 0.045]}]
    if materials:
        physics = {"material": "steel", "thickness": "2 mm", "faces": {"h": "25 W/(m^2 K)", "ambient": 20.0},
                   "regions": [{**shapes[0], "material": "copper"}, {**shapes[1], "material": "aluminium"}]}
    else:
        physics = {"alpha": {"background": 63.9 / (7832 * 434), "regions": [
            {**shapes[0], "value": 401 / (8933 * 385)}, {**shapes[1], "value": 237 / (2702 * 903)}]}}
    if scheme != "explicit":
        physics.update(scheme=scheme, dt=0.05)
    return {"name": f"cap{n}", "grid": {"nx": n, "ny": n, "lx": 0.1, "ly": 0.1}, "physics": physics,
            "initial": {"kind": "random", "seed": 1, "low": 20.0, "high": 80.0}, "boundary": {"top": 100.0, "bottom": 20.0,
                                                                                           "left": 20.0, "right": 20.0},
            "run": {"steps": steps, "check_every": steps}, "output": {"fields": False, "vtk": False}}


def capacity(a: argparse.Namespace, out: Path) -> list[dict]:
    rows = []
    for n in a.sizes:
        for materials in (False, True):
            for tile in (1, None):
                extra = ["--backend", a.backend, "--threads", str(a.threads)] + (["--time-tile", str(tile)] if tile else [])
                recs = [run(capacity_case(n, materials, a.steps), out / f"c{n}{materials}{tile}{k}", sys.executable,
                            extra=extra) for k in range(a.repeats)]
                tp = [r["throughput"] for r in recs]
                row = {"n": n, "case": "materials, C and faces" if materials else "alpha field",
                       "time_tile": recs[0]["resources"]["time_tile"],
                       "ms_per_step": 1e3 * statistics.median(t["seconds_per_step"] for t in tp),
                       "fraction_of_copy": statistics.median(t["fraction_of_copy"] for t in tp),
                       "bytes_per_update": tp[0]["bytes_per_update"], "copy_gbs": statistics.median(t["copy_gbs"] for t in tp),
                       "repeats": a.repeats}
                print(json.dumps(row), flush=True)
                rows.append(row)
        for materials in (False, True):
            recs = [run(capacity_case(n, materials, 5, "backward-euler"), out / f"i{n}{materials}{k}", sys.executable,
                        extra=["--backend", a.backend, "--threads", str(a.threads)]) for k in range(a.repeats)]
            sol = [r["solver"] for r in recs]
            row = {"n": n, "case": ("implicit, " + ("materials, C and faces" if materials else "alpha field")),
                   "cycles_per_step": statistics.median(s["cycles_per_step"]["mean"] for s in sol),
                   "ms_per_cycle": statistics.median(1e3 * r["throughput"]["seconds_per_step"] / s["cycles_per_step"]["mean"]
                                                     for r, s in zip(recs, sol)),
                   "repeats": a.repeats}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def steady_runs(a: argparse.Namespace, out: Path) -> list[dict]:
    rows = []
    cases = {**STEADY, "chip": None}
    for n in a.sizes:
        for label, physics in cases.items():
            case = steady(n, physics) if physics is not None else chip(n)
            recs = [run(case, out / f"s{n}{abs(hash(label))}{k}", sys.executable, a.ranks,
                        ["--backend", a.backend]) for k in range(a.repeats)]
            sol = recs[0]["solver"]
            row = {"n": n, "case": label, "ranks": a.ranks, "iterations": sol["iterations"],
                   "krylov": (recs[0].get("physics") or {}).get("multigrid", {}).get("krylov"),
                   "setup_s": median_of(recs, lambda r: r["times"]["setup"]),
                   "solve_s": median_of(recs, lambda r: r["times"]["solve"] + r["times"]["warmup"]),
                   "total_s": median_of(recs, lambda r: r["times"]["setup"] + r["times"]["warmup"] + r["times"]["solve"]),
                   "ended": sol["ended"], "repeats": a.repeats}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def chip(n: int) -> dict:
    case = yaml.safe_load((ROOT / "cases" / "chip.yaml").read_text())
    case["grid"].update(nx=n, ny=n)
    case["physics"]["source"][0]["path"] = str(ROOT / "cases" / "chip_tiles.npy")
    case["run"] = {"steps": 100, "tolerance": 1e-10}
    case["output"] = {"fields": False, "vtk": False}
    return case


def baseline(a: argparse.Namespace, out: Path) -> list[dict]:
    other = Path(a.against).resolve()
    venv = other / ".venv" / "bin" / "python"  # its own venv, else this one (`python -m solver` from DIR imports
    # DIR's solver: a source tree such as the device machine's .bench_base)
    pythons = {"this": (sys.executable, ROOT), "against": (str(venv) if venv.exists() else sys.executable, other)}
    times = {k: [] for k in pythons}
    for k in range(a.repeats):
        for name, (python, cwd) in pythons.items():
            rec = run(heat(a.sizes[0], False, False, a.steps), out / f"b{name}{k}", python, cwd=cwd,
                      extra=["--backend", a.backend, "--threads", str(a.threads)])
            times[name].append(rec["throughput"]["seconds_per_step"])
    row = {"n": a.sizes[0], "this_ms": 1e3 * statistics.median(times["this"]),
           "against_ms": 1e3 * statistics.median(times["against"]), "repeats": a.repeats,
           "speed_ratio": statistics.median(times["against"]) / statistics.median(times["this"]), "against": str(other)}
    print(json.dumps(row), flush=True)
    return [row]


def forms(a: argparse.Namespace, out: Path) -> list[dict]:
    import time

    import numba
    import numpy as np
    from numba import njit, prange

    from solver.backends import numba_kernels as k

    numba.set_num_threads(a.threads)

    @njit(parallel=True)
    def point_form(o, u, al, dt_h2, r0, r1, c0, c1):
        """The flux form with the faces' harmonic means computed here from a per-point alpha."""
        for i in prange(r0, r1):
            for j in range(c0, c1):
                c, ac = u[i, j], al[i, j]
                fw = 2.0 * ac * al[i, j - 1] / (ac + al[i, j - 1])
                fe = 2.0 * ac * al[i, j + 1] / (ac + al[i, j + 1])
                fs = 2.0 * ac * al[i - 1, j] / (ac + al[i - 1, j])
                fn = 2.0 * ac * al[i + 1, j] / (ac + al[i + 1, j])
                o[i, j] = c + dt_h2 * ((fe * (u[i, j + 1] - c) - fw * (c - u[i, j - 1]))
                                       + (fn * (u[i + 1, j] - c) - fs * (c - u[i - 1, j])))

    rows = []
    for n in a.sizes:
        rng = np.random.default_rng(0)
        u = rng.random((n + 2, n + 2))
        o = u.copy()
        al = 1.0 + rng.random((n + 2, n + 2))
        ax, ay = 0.2 * al, 0.2 * al
        kernels = {"constant coefficients": lambda: k.step(o, u, 0.2, 0.2, 0.2, 1, n + 1, 1, n + 1),
                   "face fields (ax, ay)": lambda: k.step(o, u, 0.2, 0.2, 0.2, 1, n + 1, 1, n + 1, None, ax, ay),
                   "per-point alpha, means in the kernel": lambda: point_form(o, u, al, 0.1, 1, n + 1, 1, n + 1)}
        times = {name: [] for name in kernels}
        for fn in kernels.values():
            fn()
        for _ in range(a.repeats):
            for name, fn in kernels.items():  # alternated, so drifts of the machine hit each alike
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
        for name, ts in times.items():
            row = {"n": n, "kernel": name, "threads": a.threads, "ms_per_step": 1e3 * statistics.median(ts),
                   "repeats": a.repeats}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("rates", "steady", "baseline", "forms", "capacity"))
    p.add_argument("sizes", type=int, nargs="+")
    p.add_argument("--backend", default="numba")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--against")
    p.add_argument("--out")
    a = p.parse_args()
    if a.what == "baseline" and not a.against:
        p.error("baseline needs --against DIR (a checkout with its own .venv)")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="physics_bench-"))
    rows = {"rates": rates, "steady": steady_runs, "baseline": baseline, "forms": forms, "capacity": capacity}[a.what](a, out)
    print("\n" + "\n".join(" | ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items())
                           for r in rows))


if __name__ == "__main__":
    main()
