"""MPI scaling on CPU cores, run under mpirun at one rank count; appends JSON lines for scaling_table.py.

    mpirun -n P python tools/mpi_scaling.py --out results.jsonl [--strong 4096] [--weak 1024] [--repeats 3]

For each decomposition (rows, cart) and halo mode (blocking, nonblocking, overlap): a strong-scaling run
of a fixed global grid and a weak-scaling run with a fixed block per rank (rows: the global grid grows
in y; cart: it grows along both axes of the process grid). One numba thread per rank (a pure MPI study)
and no time tiling, so one rank runs the same per-step kernel as many (the tiled one-process figure is
in `stencil bench`).
Each point is the median of `repeats` runs of the library's normal run (warm-up excluded, output not
timed), taken round-robin: every repeat runs every configuration once. The ceiling is measured in the same launch by the library's own copy (solver.bench.bandwidth.measure,
the one `stencil bench bandwidth` and runs use): all P ranks copy at once, one thread each, between
barriers, and the rate is all ranks' bytes over the slowest rank's time (median of repeats), the
definition of McCalpin's stream_mpi.c. Equal blocks cannot stream faster than that. The copy uses
ordinary stores, as the stencil does; memcpy (non-temporal stores for large arrays) is recorded too.
"""

import argparse
import json
import os
import tempfile

from mpi4py import MPI

from solver.backends.numba_backend import NumbaBackend
from solver.bench.bandwidth import measure
from solver.config import BackendSettings, validate_case
from solver.core.decomp import choose_dims
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)


def copy_ceilings() -> tuple[float, float]:
    """(copy, memcpy) GB/s of all ranks at once: ordinary stores (the stencil's ceiling), and memcpy."""
    be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
    return measure(be, comm, "copy", repeats=7)["gbs"], measure(be, comm, "memcpy", repeats=7)["gbs"]


def one(shape, decomposition, halo, steps, workdir, balance="none") -> dict:
    data = {"name": "scaling", "grid": {"ny": shape[0], "nx": shape[1]},
            "initial": {"kind": "hotspot"}, "run": {"steps": steps, "check_every": steps, "warmup": 5},
            "backend": {"name": "numba", "threads": 1, "time_tile": 1},  # the per-step kernel MPI ranks use
            "parallel": {"decomposition": decomposition, "halo": halo, "balance": balance},
            "output": {"dir": workdir, "vtk": False}}
    rec = Run(validate_case(data), comm, Options(ceiling=False, quiet=True, overwrite=True)).execute()
    t = rec["timings"]
    return {"seconds_per_step": rec["throughput"]["seconds_per_step"], "mlups": rec["throughput"]["mlups"],
            "gbs": rec["throughput"]["effective_gbs"], "comm_max": t["comm_fraction"]["max"],
            "wait_max": t["wait_fraction"]["max"], "wait_mean": t["wait_fraction"]["mean"],
            "imbalance": t["load_imbalance"], "compute_ms": [t["compute"]["min"] * 1e3 / rec["throughput"]["timed_steps"],
                                                             t["compute"]["max"] * 1e3 / rec["throughput"]["timed_steps"]]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--strong", type=int, default=4096)
    ap.add_argument("--weak", type=int, default=1024)
    ap.add_argument("--strong-steps", type=int, default=60)
    ap.add_argument("--weak-steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--halos", default="blocking,nonblocking,overlap")
    ap.add_argument("--kinds", default="strong,weak", help="strong, weak or both")
    ap.add_argument("--dynamic", default="overlap", help="halo modes also run with parallel.balance dynamic "
                    "(rows only; reported as e.g. 'overlap+dynamic'); '' for none")
    args = ap.parse_args()
    p = comm.size
    ceiling, memcpy = copy_ceilings()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # snapshots are not timed; keep them off the disk
    work = comm.bcast(tempfile.mkdtemp(prefix="scaling-", dir=shm) if comm.rank == 0 else None)
    points = []  # (scaling, decomposition, shape, steps, halo, balance)
    for decomposition in ("rows", "cart"):
        dims = choose_dims(p, (args.weak * p, args.weak * p), decomposition)
        weak_shape = (args.weak * dims[0], args.weak * dims[1])
        for scaling, shape, steps in (("strong", (args.strong, args.strong), args.strong_steps),
                                      ("weak", weak_shape, args.weak_steps)):
            if scaling not in args.kinds.split(","):
                continue
            modes = [(h, "none") for h in args.halos.split(",")]
            if decomposition == "rows" and p > 1:
                modes += [(h, "dynamic") for h in args.dynamic.split(",") if h]
            points += [(scaling, decomposition, shape, steps, halo, balance) for halo, balance in modes]
    # Round-robin: each repeat runs every point once, so a slow spell of a shared machine (other tenants)
    # lands on all configurations alike instead of on whichever one was running; medians afterwards.
    runs = {pt: [] for pt in points}
    for _ in range(args.repeats):
        for pt in points:
            scaling, decomposition, shape, steps, halo, balance = pt
            runs[pt].append(one(shape, decomposition, halo, steps, f"{work}/{scaling}", balance))
    for pt in points:
        scaling, decomposition, shape, steps, halo, balance = pt
        rs = runs[pt]
        label = halo if balance == "none" else f"{halo}+{balance}"
        med = sorted(rs, key=lambda r: r["seconds_per_step"])[len(rs) // 2]
        row = {"ranks": p, "scaling": scaling, "decomposition": decomposition, "halo": label,
               "ny": shape[0], "nx": shape[1], **med, "copy_gbs": ceiling, "memcpy_gbs": memcpy,
               "spread": [min(r["seconds_per_step"] for r in rs), max(r["seconds_per_step"] for r in rs)],
               "repeats": args.repeats, "library": MPI.Get_library_version().splitlines()[0]}
        if comm.rank == 0:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"P={p:2d} {scaling:6s} {decomposition:4s} {label:15s} {shape[0]}x{shape[1]} "
                  f"{med['seconds_per_step'] * 1e3:8.3f} ms/step {med['gbs']:7.1f} GB/s "
                  f"(copy {ceiling:.1f}) comm {med['comm_max']:.1%} wait {med['wait_max']:.1%}", flush=True)

if __name__ == "__main__":
    main()
