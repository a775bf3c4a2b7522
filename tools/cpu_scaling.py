"""MPI scaling on this machine's CPU cores: every halo mode, rows and cart, strong and weak (BENCHMARKS.md, "MPI on
CPU cores"). One script: it launches itself under mpirun at each rank count, then prints the tables.

    python tools/cpu_scaling.py DIR [RANKS ...]             # default ranks 1 2 4 8 16; DIR/scaling.jsonl, scaling.md
    python tools/cpu_scaling.py DIR 1 16 --kinds weak --repeats 3 --dynamic overlap
    python tools/cpu_scaling.py --table DIR/scaling.jsonl   # the markdown tables again
    stencil report DIR                                      # the figure (speedup and bandwidth against ranks)

Each launch (`mpirun -n P python tools/cpu_scaling.py --launch OUT.jsonl ...`, ranks bound to cores; BIND="..."
replaces the binding options, e.g. BIND="--bind-to none") runs, for each decomposition (rows, cart) and halo mode
(blocking, nonblocking, overlap; --dynamic adds parallel.balance dynamic on rows), a strong-scaling run of a fixed
global grid and a weak-scaling run with a fixed block per rank (rows: the global grid grows in y; cart: along
both axes of the process grid). One numba thread per rank (a pure MPI study) and no time tiling, so one rank runs
the same per-step kernel as many (the tiled one-process figure is in `stencil bench`). Each point is the median
of `repeats` runs of the library's normal run (warm-up excluded, output not timed), taken round-robin: every
repeat runs every configuration once. The ceiling is measured in the same launch by the library's own copy
(solver.bench.bandwidth.measure, the one `stencil bench bandwidth` and runs use): all P ranks copy at once, one
thread each, between barriers, and the rate is all ranks' bytes over the slowest rank's time (median of repeats),
the definition of McCalpin's stream_mpi.c. Equal blocks cannot stream faster than that. The copy uses ordinary
stores, as the stencil does; memcpy (non-temporal stores for large arrays) is recorded too.

Tables: speedup and efficiency against the same configuration at the smallest rank count measured (strong:
t1 / (P tP); weak: t1 / tP); a "+dynamic" row is compared with the plain halo mode's smallest rank count. "of copy"
= effective GB/s over the copy bandwidth measured with the same number of processes in the same launch.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path


def launch_command() -> list[str]:
    """mpirun for this MPI, ranks bound to cores (BIND replaces the binding), what a rank needs passed on (Open
    MPI), root allowed. Shared with tools/deep_bench.py."""
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        cmd = ["mpirun", "--oversubscribe", *os.environ.get("BIND", "--bind-to core --map-by core").split()]
        cmd += [x for v in ("PYTHONPATH", "STENCIL_CACHE_DIR", "NUMBA_NUM_THREADS") for x in ("-x", v)]
        return cmd + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return ["mpirun", *os.environ.get("BIND", "-bind-to core").split()]


def one_thread_env() -> dict:
    return {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


# one launch (under mpirun) ------------------------------------------------------------------------

def copy_ceilings(comm) -> tuple[float, float]:
    """(copy, memcpy) GB/s of all ranks at once: ordinary stores (the stencil's ceiling), and memcpy."""
    from solver.backends.numba_backend import NumbaBackend
    from solver.bench.bandwidth import measure
    from solver.case import BackendSettings

    be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
    return measure(be, comm, "copy", repeats=7)["gbs"], measure(be, comm, "memcpy", repeats=7)["gbs"]


def one(comm, shape, decomposition, halo, steps, workdir, balance="none") -> dict:
    from solver.case import validate_case
    from solver.run import Options, Run

    data = {"name": "scaling", "grid": {"ny": shape[0], "nx": shape[1]},
            "initial": {"kind": "hotspot"}, "run": {"steps": steps, "check_every": steps, "warmup": 5},
            "backend": {"name": "numba", "threads": 1, "time_tile": 1},  # the per-step kernel MPI ranks use
            "parallel": {"decomposition": decomposition, "halo": halo, "balance": balance},
            "output": {"dir": workdir, "vtk": False}}
    rec = Run(validate_case(data), comm, Options(ceiling=False, quiet=True, overwrite=True)).execute()
    t, steps_timed = rec["timings"], rec["throughput"]["timed_steps"]
    return {"seconds_per_step": rec["throughput"]["seconds_per_step"], "mlups": rec["throughput"]["mlups"],
            "gbs": rec["throughput"]["effective_gbs"], "comm_max": t["comm_fraction"]["max"],
            "wait_max": t["wait_fraction"]["max"], "wait_mean": t["wait_fraction"]["mean"],
            "imbalance": t["load_imbalance"],
            "compute_ms": [t["compute"]["min"] * 1e3 / steps_timed, t["compute"]["max"] * 1e3 / steps_timed]}


def points(args, p: int) -> list[tuple]:
    """(scaling, decomposition, shape, steps, halo, balance) of every configuration of a P-rank launch."""
    from solver.core.decomp import choose_dims

    out = []
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
            out += [(scaling, decomposition, shape, steps, halo, balance) for halo, balance in modes]
    return out


def launch(args) -> None:
    from mpi4py import MPI

    from solver.parallel.comm import Comm

    comm = Comm(MPI.COMM_WORLD)
    p = comm.size
    ceiling, memcpy = copy_ceilings(comm)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # snapshots are not timed; keep them off the disk
    work = comm.bcast(tempfile.mkdtemp(prefix="scaling-", dir=shm) if comm.rank == 0 else None)
    todo = points(args, p)
    # Round-robin: each repeat runs every point once, so a slow spell of a shared machine (other tenants)
    # lands on all configurations alike instead of on whichever one was running; medians afterwards.
    runs = {pt: [] for pt in todo}
    for _ in range(args.repeats):
        for pt in todo:
            scaling, decomposition, shape, steps, halo, balance = pt
            runs[pt].append(one(comm, shape, decomposition, halo, steps, f"{work}/{scaling}", balance))
    for pt in todo:
        scaling, decomposition, shape, steps, halo, balance = pt
        rs = runs[pt]
        label = halo if balance == "none" else f"{halo}+{balance}"
        med = sorted(rs, key=lambda r: r["seconds_per_step"])[len(rs) // 2]
        row = {"ranks": p, "scaling": scaling, "decomposition": decomposition, "halo": label,
               "ny": shape[0], "nx": shape[1], **med, "copy_gbs": ceiling, "memcpy_gbs": memcpy,
               "spread": [min(r["seconds_per_step"] for r in rs), max(r["seconds_per_step"] for r in rs)],
               "repeats": args.repeats, "library": MPI.Get_library_version().splitlines()[0]}
        if comm.rank == 0:
            with open(args.launch, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"P={p:2d} {scaling:6s} {decomposition:4s} {label:15s} {shape[0]}x{shape[1]} "
                  f"{med['seconds_per_step'] * 1e3:8.3f} ms/step {med['gbs']:7.1f} GB/s "
                  f"(copy {ceiling:.1f}) comm {med['comm_max']:.1%} wait {med['wait_max']:.1%}", flush=True)


# the tables ---------------------------------------------------------------------------------------

def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["scaling"], r["decomposition"], r["halo"])].append(r)
    out = []
    for scaling in ("strong", "weak"):
        out += [f"\n### {scaling} scaling\n",
                "| decomposition | halo | ranks | grid | ms/step | MLUP/s | speedup | efficiency | comm (max) | "
                "wait (max) | wait (mean) | imbalance | GB/s | copy GB/s | of copy | memcpy GB/s |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for (sc, dec, halo), rs in sorted(groups.items()):
            if sc != scaling:
                continue
            rs.sort(key=lambda r: r["ranks"])
            # "overlap+dynamic" has no 1-rank run (nothing to balance): its base is plain overlap's
            plain = sorted(groups.get((sc, dec, halo.split("+")[0]), rs), key=lambda r: r["ranks"])
            base = min(rs[0], plain[0], key=lambda r: r["ranks"])
            for r in rs:
                ratio = base["seconds_per_step"] / r["seconds_per_step"]
                speedup = ratio * (r["ranks"] / base["ranks"] if scaling == "weak" else 1)
                eff = ratio / (r["ranks"] / base["ranks"]) if scaling == "strong" else ratio
                out.append(f"| {dec} | {halo} | {r['ranks']} | {r['ny']}x{r['nx']} | {r['seconds_per_step'] * 1e3:.3f} | "
                           f"{r['mlups']:.0f} | {speedup:.2f} | {eff:.0%} | {r['comm_max']:.1%} | {r['wait_max']:.1%} | "
                           f"{_pct(r.get('wait_mean'))} | {r['imbalance']:.2f} | {r['gbs']:.1f} | {r['copy_gbs']:.1f} | "
                           f"{r['gbs'] / r['copy_gbs']:.0%} | {_num(r.get('memcpy_gbs'))} |")
    return "\n".join(out)


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x) -> str:
    return "-" if x is None else f"{x:.1f}"


# the driver ---------------------------------------------------------------------------------------

STUDY = ("strong", "weak", "strong_steps", "weak_steps", "repeats", "halos", "kinds", "dynamic")


def drive(args) -> None:
    """Launch this script under mpirun at each rank count, then write and print the tables."""
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "scaling.jsonl"
    forwarded = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in STUDY]
    for p in args.ranks or [1, 2, 4, 8, 16]:
        cmd = [*launch_command(), "-n", str(p), sys.executable, __file__, "--launch", str(jsonl), *forwarded]
        subprocess.run(cmd, check=True, env=one_thread_env())
    text = table(jsonl)
    (out / "scaling.md").write_text(text + "\n")
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="results directory (scaling.jsonl, scaling.md)")
    ap.add_argument("ranks", nargs="*", type=int, help="rank counts (default 1 2 4 8 16)")
    ap.add_argument("--table", type=Path, help="print the tables of a scaling.jsonl")
    ap.add_argument("--launch", metavar="FILE", help="one launch (under mpirun), appending its points to FILE; what "
                    "the driver runs at each rank count")
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
    if args.table:
        print(table(args.table))
    elif args.launch:
        launch(args)
    elif args.dir:
        drive(args)
    else:
        ap.error("give a results directory, --table FILE, or see the docstring")


if __name__ == "__main__":
    main()
