#!/usr/bin/env python3
"""Issue 35 before/after on one GPU: `stencil run` records of the multigrid lid and implicit heat, the tree before
the change (a directory holding its `solver` package, e.g. `git archive <commit> solver` unpacked) against this
one, run alternately, each a process of its own.

    python tools/mg_graphs_bench.py --base DIR --out DIR --repeats 3 lid:4095 heat:20 lid:16384:1 [--variants base new off]
        [--backend numba]

Items (ITEM:ARG[:REPEATS[:VARIANT,...]]): lid:N is cases/laplace_multigrid.yaml at N x N on cupy (float64, to 1e-10;
lid32:N in float32, to its floor); heat:STEPS is
cases/heat_implicit.yaml (4096^2, backward Euler; heatcn: Crank-Nicolson) on cupy for STEPS steps. Variants: base
(the --base tree), new (this tree), off (this tree with STENCIL_MG_GRAPHS=0: the verbs launched one by one), nomarks
(STENCIL_MG_MARKS=0: no level marks in the graphs), notiles (STENCIL_MG_TILES=0 and STENCIL_MG_TAIL=0: every sweep a
pass of its own, the residual, the prolongation and the stop test passes of their own, every level's verbs launched),
notail (STENCIL_MG_TAIL=0: the coarse levels' verbs launched, not one block), tailN (the coarse tail from levels of at
most N points; new: cycle.TAIL_POINTS), tileCxR[xB] (mg_sweeps' tiles of C x R points, at least B blocks an SM: the
launch bounds). Per run one JSON line: the
whole solve (the record's warm-up + solve), ms a cycle (lid) or a step (heat), the fraction of the copy-bound time
of a plain cycle's passes (the record's throughput.fraction_of_copy: > 1 only by fusion), the loop's sections
(compute from CUDA events, other, wait), each level's compute a cycle, the record's bottleneck sentence and its
multigrid_graphs facts. A table of medians and new/base ratios last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command(item: str) -> list[str]:
    kind, arg = item.split(":")[:2]
    if kind in ("lid", "lid32"):
        dtype = ["--set", "numerics.dtype=float32"] if kind == "lid32" else []
        return ["cases/laplace_multigrid.yaml", "--set", f"grid.nx={arg}", "--set", f"grid.ny={arg}", *dtype]
    if kind in ("heat", "heatcn"):
        scheme = ["--scheme", "crank-nicolson"] if kind == "heatcn" else []
        return ["cases/heat_implicit.yaml", "--steps", arg, "--set", f"output.every={arg}", *scheme]
    raise SystemExit(f"unknown item {item!r}: lid:N, lid32:N, heat:STEPS or heatcn:STEPS")


def run_one(item: str, variant: str, base: Path, out: Path, backend: str = "cupy") -> dict:
    env = dict(os.environ)
    tree = base if variant == "base" else ROOT
    env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    env.update({"off": {"STENCIL_MG_GRAPHS": "0"}, "nomarks": {"STENCIL_MG_MARKS": "0"},
                "notiles": {"STENCIL_MG_TILES": "0", "STENCIL_MG_TAIL": "0"},
                "notail": {"STENCIL_MG_TAIL": "0"}}.get(variant, {}))
    if variant.startswith("tail"):  # tailN: the coarse tail from levels of at most N points
        env["STENCIL_MG_TAIL"] = variant[4:]
    if variant.startswith("tile"):  # tileCxR[xB]: mg_sweeps' tiles of C x R points, B blocks an SM at least
        env["STENCIL_MG_TILE"] = variant[4:]
    args = command(item)
    args = [str(ROOT / args[0]), *args[1:]]
    cmd = [sys.executable, "-m", "solver", "run", *args, "--backend", backend, "-o", str(out), "-q", "--overwrite",
           "--set", "output.vtk=false", "--set", "output.fields=false"]
    t = time.perf_counter()
    res = subprocess.run(cmd, env=env, cwd="/tmp", capture_output=True, text=True)
    wall = time.perf_counter() - t
    if res.returncode != 0:
        return {"item": item, "variant": variant, "failed": res.returncode, "stderr": res.stderr[-1500:]}
    return facts(json.loads((out / "record.json").read_text()), item, variant, wall)


def facts(rec: dict, item: str, variant: str, wall: float) -> dict:
    times, tp, tm, s = rec["times"], rec.get("throughput") or {}, rec["timings"], rec["solver"]
    loop = tm["loop"]["max"] if isinstance(tm["loop"], dict) else tm["loop"]
    sec = {k: (tm[k]["max"] if isinstance(tm[k], dict) else tm[k]) for k in ("compute", "other", "wait")}
    n = tp.get("timed_steps") or 1
    cycles = s.get("cycles") or s.get("iterations")
    dev = rec["resources"]["devices"][0]
    return {"item": item, "variant": variant, "whole_s": times["solve"] + times.get("warmup", 0.0),
            "solve_s": times["solve"], "warmup_s": times.get("warmup", 0.0), "setup_s": times.get("setup"),
            "ms_per": 1e3 * tp.get("seconds_per_step", float("nan")), "per": tp.get("per"), "timed": n,
            "cycles": cycles, "x_copy": tp.get("fraction_of_copy"), "copy_gbs": tp.get("copy_gbs"),
            "bytes_per_cycle": tp.get("bytes_per_cycle"),
            "sections_ms_per": {k: 1e3 * v / n for k, v in sec.items()}, "loop_ms_per": 1e3 * loop / n,
            "busy": sec["compute"] / loop if loop else None,
            "levels_ms_per": [round(1e3 * lev["seconds"]["compute"] / n, 4) for lev in s.get("levels", [])],
            "final_relative": s.get("final_relative", s.get("worst_relative")), "ended": s.get("ended"),
            "bottleneck": rec.get("bottleneck"), "graphs": dev.get("multigrid_graphs"), "wall_s": wall}


def table(rows: list[dict]) -> str:
    lines = []
    items = list(dict.fromkeys(r["item"] for r in rows))
    for item in items:
        med = {}
        for variant in dict.fromkeys(r["variant"] for r in rows):
            ok = [r for r in rows if r["item"] == item and r["variant"] == variant and "failed" not in r]
            bad = [r for r in rows if r["item"] == item and r["variant"] == variant and "failed" in r]
            if bad:
                lines.append(f"{item} {variant}: {len(bad)} run(s) failed: {bad[0]['stderr'][-300:]!r}")
            if not ok:
                continue
            m = {k: statistics.median(r[k] for r in ok) for k in ("whole_s", "ms_per", "x_copy", "busy", "loop_ms_per")}
            sec = {k: statistics.median(r["sections_ms_per"][k] for r in ok) for k in ("compute", "other", "wait")}
            med[variant] = m
            r0 = ok[0]
            spread = "-".join(f"{r['whole_s'] * 1e3:.1f}" for r in ok)
            lines.append(f"{item:10s} {variant:4s} whole {m['whole_s'] * 1e3:8.2f} ms ({spread}), "
                         f"{m['ms_per']:.3f} ms/{r0['per']}, x copy {m['x_copy']:.3f}, kernels {m['busy']:.0%} of the loop "
                         f"(compute {sec['compute']:.3f} other {sec['other']:.3f} wait {sec['wait']:.3f} ms/{r0['per']}), "
                         f"cycles {r0['cycles']}, {r0['timed']} timed, levels ms/{r0['per']} {r0['levels_ms_per'][:4]} + "
                         f"{sum(r0['levels_ms_per'][4:]):.4f}; {len(ok)} runs")
            lines.append(f"{'':15s} bottleneck: {r0['bottleneck']}; graphs: {r0['graphs']}")
        for old in [v for v in ("base", "notiles", "notail") if v in med and "new" in med]:
            b, n = med[old], med["new"]
            lines.append(f"{item:10s} new/{old}: whole {b['whole_s'] / n['whole_s']:.2f}x faster, per "
                         f"{b['ms_per'] / n['ms_per']:.2f}x; x copy {b['x_copy']:.3f} -> {n['x_copy']:.3f}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("items", nargs="+")
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--out", type=Path, default=Path("/tmp/mg_graphs_bench"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--variants", nargs="+", default=["base", "new"])
    p.add_argument("--json", type=Path)
    p.add_argument("--backend", default="cupy", help="cupy; numba for the CPU's stop test in one pass")
    args = p.parse_args()
    rows = []
    for item in args.items:
        fields = item.split(":")
        repeats = int(fields[2]) if len(fields) > 2 and fields[2] else args.repeats
        for i in range(repeats):
            for variant in fields[3].split(",") if len(fields) > 3 else args.variants:
                row = run_one(item, variant, args.base.resolve(), args.out / f"{fields[0]}{fields[1]}-{variant}",
                              args.backend)
                row["repeat"] = i
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    with args.json.open("a") as f:
                        f.write(json.dumps(row) + "\n")
    print("== issue 35 before/after (tools/mg_graphs_bench.py)")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
