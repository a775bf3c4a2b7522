"""Deep halos under MPI on CPU cores: the default time tile beside `time_tile: 1`, with the machine's
no-data lockstep floor measured in the same launch (tools/cpu_probe.py). Appends JSON lines.

    mpirun -n P python tools/deep_scaling.py --out deep.jsonl [--strong 4096] [--weak 1024] [--repeats 3]
    python tools/deep_scaling.py --table deep.jsonl          # the table (tools/deep_scaling.sh prints it)
    python tools/deep_scaling.py --out deep.jsonl --threads 16   # one process x 16 threads, tiled

Points per launch: strong (a fixed --strong^2 grid) and weak (--weak^2 per rank, rows: the grid grows
in y, and so does its length: dx = dy); a hot spot on a background of 1 (no subnormal numbers), rows
decomposition, halo overlap, one numba thread per rank (--threads for a one-process run), each with the default time tile (deep halos: backend.time_tile null) and with time_tile 1, taken
round-robin over `repeats` and reported as medians of the library's normal run (warm-up excluded). The
floor: the same launch's lockstep loop on each point's block (the per-step kernel, then empty
messages to and from both row neighbours each step): the share of time blocked there is the wait no
halo schedule can avoid on these cores. A point's comm + wait (max over ranks) is compared with it.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def point(comm, shape, time_tile, threads, steps, workdir, warmup=20) -> dict:
    from solver.config import validate_case
    from solver.run import Options, Run

    # dx = dy (ly grows with the weak grid) and a background of 1: with lx = ly = 1 the weak grids' weights
    # were anisotropic (wx = 0.027 on 4 ranks), the hot spot's front underflowed to subnormal numbers after
    # about 200 steps in the ranks that hold it, and subnormal arithmetic made those ranks up to 2x slower
    data = {"name": "deep", "grid": {"ny": shape[0], "nx": shape[1], "ly": shape[0] / shape[1]},
            "initial": {"kind": "hotspot", "background": 1.0},
            "run": {"steps": steps, "check_every": steps, "warmup": warmup},
            "backend": {"name": "numba", "threads": threads, "time_tile": time_tile},
            "parallel": {"decomposition": "rows", "halo": "overlap"},
            "output": {"dir": workdir, "vtk": False, "trace": comm.size > 1}}
    rec = Run(validate_case(data), comm, Options(ceiling=False, quiet=True, overwrite=True)).execute()
    t, res = rec["timings"], rec["resources"]
    sites = wait_sites(Path(workdir) / "trace.json") if comm.size > 1 and comm.rank == 0 else {}
    return {"seconds_per_step": rec["throughput"]["seconds_per_step"], "mlups": rec["throughput"]["mlups"],
            "comm_wait_max": t["comm_wait_fraction"]["max"],  # one rank's comm + wait, the largest over ranks
            "comm_max": t["comm_fraction"]["max"], "wait_max": t["wait_fraction"]["max"],
            "compute_min": t["compute"]["min"], "compute_max": t["compute"]["max"],  # seconds, over ranks
            "wait_sites": sites, "time_tile": res.get("time_tile"), "halo_depth": res.get("halo_depth"),
            "messages_per_step": res.get("messages_per_step")}


# where a wait interval sits in a rank's sequence of sections (solver.core.loop, solver.parallel.deep)
SITES = {("other", "comm"): "send", ("-", "comm"): "send",  # a tile's start: the last tile's sends (overlap)
         ("compute", "comm"): "halo",  # finish: the receives, before the edge strips
         ("other", "other"): "poll",  # the stop vote at a poll
         ("other", "io"): "check"}  # the last step's collective check, before the final snapshot


def wait_sites(trace: Path) -> dict:
    """{site: the largest share of a rank's solve time (io excluded) spent waiting there}, from trace.json."""
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]
    out: dict[str, float] = {}
    for rank in {e["pid"] for e in events}:
        seq = sorted((e for e in events if e["pid"] == rank), key=lambda e: e["ts"])
        total = sum(e["dur"] for e in seq if e["name"] != "io")
        mine: dict[str, float] = {}
        for i, e in enumerate(seq):
            if e["name"] == "wait":
                around = (seq[i - 1]["name"] if i else "-", seq[i + 1]["name"] if i + 1 < len(seq) else "-")
                site = SITES.get(around, "other")
                mine[site] = mine.get(site, 0.0) + e["dur"] / total
        for site, share in mine.items():
            out[site] = max(out.get(site, 0.0), share)
    return out


def measure(args) -> None:
    from mpi4py import MPI

    from cpu_probe import lockstep
    from solver.backends.numba_backend import NumbaBackend, default_time_tile
    from solver.config import BackendSettings
    from solver.parallel.comm import Comm

    comm = Comm(MPI.COMM_WORLD)
    p = comm.size
    if args.blocking_poll:  # the loop's stop vote as it was before it became nonblocking (for an A/B)
        from solver.core.loop import TimeLoop

        TimeLoop._vote = lambda self, flag: self.comm.anytrue(flag)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = comm.bcast(tempfile.mkdtemp(prefix="deep-", dir=shm) if comm.rank == 0 else None)
    points = [("strong", (args.strong, args.strong), args.strong_steps), ("weak", (args.weak * p, args.weak), args.weak_steps)]
    be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
    floors, tiled_floors = {}, {}
    for scaling, shape, steps in points:
        ny = shape[0] // p
        k = default_time_tile(ny)
        for store, depth in ((floors, 1), (tiled_floors, k)):
            wait = lockstep(comm.mpi, be, ny, shape[1], min(steps, 200), depth)[0] if p > 1 else 0.0
            store[scaling] = max(comm.mpi.allgather(wait))
    tiles = [None, 1] if args.variants == "both" else [None]
    runs = {(s, tt): [] for s, _, _ in points for tt in tiles}
    for _ in range(args.repeats):
        for scaling, shape, steps in points:
            for tt in tiles:
                runs[(scaling, tt)].append(point(comm, shape, tt, args.threads, steps, f"{work}/{scaling}", args.warmup))
    for (scaling, tt), rs in runs.items():
        med = sorted(rs, key=lambda r: r["seconds_per_step"])[len(rs) // 2]
        shape = next(sh for s, sh, _ in points if s == scaling)
        row = {"ranks": p, "threads": args.threads, "scaling": scaling, "ny": shape[0], "nx": shape[1],
               "variant": ("default" if tt is None else "time_tile 1") + (" blocking poll" if args.blocking_poll else ""),
               **med, "lockstep_wait": floors[scaling],
               "lockstep_tiled_wait": tiled_floors[scaling],
               "spread": [min(r["seconds_per_step"] for r in rs), max(r["seconds_per_step"] for r in rs)],
               "repeats": args.repeats}
        if comm.rank == 0:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"P={p:2d} x {args.threads} {scaling:6s} {row['variant']:11s} {shape[0]}x{shape[1]} "
                  f"{med['seconds_per_step'] * 1e3:8.3f} ms/step {med['mlups']:7.0f} MLUP/s tile {med['time_tile']} "
                  f"depth {med['halo_depth']} comm+wait {med['comm_wait_max']:.1%} (floor {floors[scaling]:.1%}, "
                  f"tiled {tiled_floors[scaling]:.1%}) compute max/min {med['compute_max'] / med['compute_min']:.3f} "
                  f"waits {sites(med)}", flush=True)


def sites(row: dict) -> str:
    """The wait of the rank that waited most at each site, as in the table: 'halo 1.2% poll 0.3%'."""
    return " ".join(f"{k} {v:.1%}" for k, v in sorted(row.get("wait_sites", {}).items(), key=lambda kv: -kv[1])) or "-"


def table(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for scaling in ("strong", "weak"):
        sel = sorted((r for r in rows if r["scaling"] == scaling), key=lambda r: (r["ranks"], r["threads"]))
        if not sel:
            continue
        print(f"\n{scaling}: ranks x threads, ms/step and MLUP/s (median), default (deep halos) vs time_tile 1, "
              "comm+wait (max over ranks) vs the lockstep floors of the same launch (per-step kernel; tiled "
              "kernel coupled once per tile), compute max/min over ranks, the largest wait per site")
        print(f"{'P x T':>7s} {'grid':>11s} {'default':>9s} {'MLUP/s':>8s} {'tile':>4s} {'tt=1':>9s} {'MLUP/s':>8s} "
              f"{'speedup':>7s} {'c+w def':>8s} {'c+w tt1':>8s} {'floor':>6s} {'tiled':>6s} {'cmp d':>5s} "
              f"{'cmp 1':>5s}  waits by site: default | tt1")
        keys = sorted({(r["ranks"], r["threads"]) for r in sel})
        for p, t in keys:
            d = next((r for r in sel if (r["ranks"], r["threads"]) == (p, t) and r["variant"] == "default"), None)
            o = next((r for r in sel if (r["ranks"], r["threads"]) == (p, t) and r["variant"] == "time_tile 1"), None)
            if not d or not o:
                continue
            print(f"{p:3d} x {t:<3d} {d['ny']:>5d}x{d['nx']:<5d} {d['seconds_per_step'] * 1e3:9.3f} {d['mlups']:8.0f} "
                  f"{d['halo_depth'] if p > 1 else d['time_tile']:>4} {o['seconds_per_step'] * 1e3:9.3f} {o['mlups']:8.0f} "
                  f"{o['seconds_per_step'] / d['seconds_per_step']:7.2f} {d['comm_wait_max']:8.1%} "
                  f"{o['comm_wait_max']:8.1%} {d['lockstep_wait']:6.1%} {d.get('lockstep_tiled_wait', 0):6.1%} "
                  f"{d.get('compute_max', 1) / d.get('compute_min', 1):5.3f} {o.get('compute_max', 1) / o.get('compute_min', 1):5.3f}  "
                  f"{sites(d)} | {sites(o)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path)
    ap.add_argument("--strong", type=int, default=4096)
    ap.add_argument("--weak", type=int, default=1024)
    ap.add_argument("--strong-steps", type=int, default=200)
    ap.add_argument("--weak-steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first (at least two tiles of 8)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--variants", choices=("both", "default"), default="both", help="default: deep halos only")
    ap.add_argument("--blocking-poll", action="store_true",
                    help="the stop vote at polls blocking (MPI_Allreduce), as before: an A/B of the nonblocking one")
    args = ap.parse_args()
    if args.table:
        table(args.table)
    else:
        measure(args)


if __name__ == "__main__":
    main()
