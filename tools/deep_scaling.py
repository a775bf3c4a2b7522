"""Deep halos under MPI on CPU cores: the default time tile beside `time_tile: 1`, with the machine's
no-data lockstep floor measured in the same launch (tools/cpu_probe.py). Appends JSON lines.

    mpirun -n P python tools/deep_scaling.py --out deep.jsonl [--strong 4096] [--weak 1024] [--repeats 3]
    python tools/deep_scaling.py --table deep.jsonl          # the table (tools/deep_scaling.sh prints it)
    python tools/deep_scaling.py --out deep.jsonl --threads 16   # one process x 16 threads, tiled

Points per launch: strong (a fixed --strong^2 grid) and weak (--weak^2 per rank, rows: the grid grows
in y), rows decomposition, halo overlap, one numba thread per rank (--threads for a one-process run),
each with the default time tile (deep halos: backend.time_tile null) and with time_tile 1, taken
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


def point(comm, shape, time_tile, threads, steps, workdir) -> dict:
    from solver.config import validate_case
    from solver.run import Options, Run

    data = {"name": "deep", "grid": {"ny": shape[0], "nx": shape[1]}, "initial": {"kind": "hotspot"},
            "run": {"steps": steps, "check_every": steps, "warmup": 5},
            "backend": {"name": "numba", "threads": threads, "time_tile": time_tile},
            "parallel": {"decomposition": "rows", "halo": "overlap"}, "output": {"dir": workdir, "vtk": False}}
    rec = Run(validate_case(data), comm, Options(ceiling=False, quiet=True, overwrite=True)).execute()
    t, res = rec["timings"], rec["resources"]
    return {"seconds_per_step": rec["throughput"]["seconds_per_step"], "mlups": rec["throughput"]["mlups"],
            "comm_wait_max": t["comm_wait_fraction"]["max"],  # one rank's comm + wait, the largest over ranks
            "comm_max": t["comm_fraction"]["max"], "wait_max": t["wait_fraction"]["max"],
            "time_tile": res.get("time_tile"), "halo_depth": res.get("halo_depth"),
            "messages_per_step": res.get("messages_per_step")}


def measure(args) -> None:
    from mpi4py import MPI

    from cpu_probe import lockstep
    from solver.backends.numba_backend import NumbaBackend
    from solver.config import BackendSettings
    from solver.parallel.comm import Comm

    comm = Comm(MPI.COMM_WORLD)
    p = comm.size
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = comm.bcast(tempfile.mkdtemp(prefix="deep-", dir=shm) if comm.rank == 0 else None)
    points = [("strong", (args.strong, args.strong), args.strong_steps), ("weak", (args.weak * p, args.weak), args.weak_steps)]
    be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
    floors = {}
    for scaling, shape, steps in points:
        ny = shape[0] // p
        waits = comm.mpi.allgather(lockstep(comm.mpi, be, ny, shape[1], min(steps, 200))[0] if p > 1 else 0.0)
        floors[scaling] = max(waits)
    runs = {(s, tt): [] for s, _, _ in points for tt in (None, 1)}
    for _ in range(args.repeats):
        for scaling, shape, steps in points:
            for tt in (None, 1):
                runs[(scaling, tt)].append(point(comm, shape, tt, args.threads, steps, f"{work}/{scaling}"))
    for (scaling, tt), rs in runs.items():
        med = sorted(rs, key=lambda r: r["seconds_per_step"])[len(rs) // 2]
        shape = next(sh for s, sh, _ in points if s == scaling)
        row = {"ranks": p, "threads": args.threads, "scaling": scaling, "ny": shape[0], "nx": shape[1],
               "variant": "default" if tt is None else "time_tile 1", **med, "lockstep_wait": floors[scaling],
               "spread": [min(r["seconds_per_step"] for r in rs), max(r["seconds_per_step"] for r in rs)],
               "repeats": args.repeats}
        if comm.rank == 0:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"P={p:2d} x {args.threads} {scaling:6s} {row['variant']:11s} {shape[0]}x{shape[1]} "
                  f"{med['seconds_per_step'] * 1e3:8.3f} ms/step {med['mlups']:7.0f} MLUP/s tile {med['time_tile']} "
                  f"depth {med['halo_depth']} comm+wait {med['comm_wait_max']:.1%} (floor {floors[scaling]:.1%})",
                  flush=True)


def table(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for scaling in ("strong", "weak"):
        sel = sorted((r for r in rows if r["scaling"] == scaling), key=lambda r: (r["ranks"], r["threads"]))
        if not sel:
            continue
        print(f"\n{scaling}: ranks x threads, ms/step and MLUP/s (median), default (deep halos) vs time_tile 1, "
              "comm+wait (max over ranks) vs the lockstep floor of the same launch")
        print(f"{'P x T':>7s} {'grid':>11s} {'default':>9s} {'MLUP/s':>8s} {'tile':>4s} {'tt=1':>9s} {'MLUP/s':>8s} "
              f"{'speedup':>7s} {'c+w def':>8s} {'c+w tt1':>8s} {'floor':>6s}")
        keys = sorted({(r["ranks"], r["threads"]) for r in sel})
        for p, t in keys:
            d = next((r for r in sel if (r["ranks"], r["threads"]) == (p, t) and r["variant"] == "default"), None)
            o = next((r for r in sel if (r["ranks"], r["threads"]) == (p, t) and r["variant"] == "time_tile 1"), None)
            if not d or not o:
                continue
            print(f"{p:3d} x {t:<3d} {d['ny']:>5d}x{d['nx']:<5d} {d['seconds_per_step'] * 1e3:9.3f} {d['mlups']:8.0f} "
                  f"{d['halo_depth'] if p > 1 else d['time_tile']:>4} {o['seconds_per_step'] * 1e3:9.3f} {o['mlups']:8.0f} "
                  f"{o['seconds_per_step'] / d['seconds_per_step']:7.2f} {d['comm_wait_max']:8.1%} "
                  f"{o['comm_wait_max']:8.1%} {d['lockstep_wait']:6.1%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path)
    ap.add_argument("--strong", type=int, default=4096)
    ap.add_argument("--weak", type=int, default=1024)
    ap.add_argument("--strong-steps", type=int, default=200)
    ap.add_argument("--weak-steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.table:
        table(args.table)
    else:
        measure(args)


if __name__ == "__main__":
    main()
