"""Deep halos and time tiles under MPI on CPU cores (issue 14; BENCHMARKS.md, "Deep halos and time tiles under
MPI"): against the per-step run, the copy rate, the machine's lockstep floor and peer codes. One script, in parts:

    python tools/deep_bench.py [--size 4096] [--steps 200] [--repeats 5] [--ranks 2] [--threads 2]
                               [--parts mpi,one,wide,tiles] [--sizes 1024 2048 4096] [--json out.json]
    python tools/deep_bench.py --parts scaling --dir DIR [--rank-counts 1 2 4 8 16] [--node-threads 16]
                               [--repeats 3] [--strong-steps 200] [--weak-steps 400] [--node-weak-steps N]
    python tools/deep_bench.py --parts device --dir DIR     # the GPU machine's 16 cores in one call (3 minutes)
    python tools/deep_bench.py --table DIR/deep.jsonl       # the scaling table again

mpi: `mpirun -n RANKS stencil run` (1 thread per rank) with the default time tile (deep halos) and with
     `--time-tile 1` (per-step kernel and one-layer halo), and Devito's MPI in its `overlap` mode
     (DEVITO_MPI=overlap, tools/devito_heat.py) on the same grid.
tiles: one process, THREADS threads, the kernel alone on square grids of --sizes: per-step against time
     tiles of k = 2..8 and the default k with more row blocks per thread (the default-tile rule's data).
wide: one process, THREADS threads, the kernel alone on a WIDE-column grid (512 x 65536 by default,
     whose rows do not fit in cache): per-step, the default time tile with its column blocks (ring
     buffers within numba_backend.RING_BYTES), and the same tile with whole rows (one column block).
one: one process, THREADS threads: `stencil run --no-mpi` with the default time tile (its record's copy
     ceiling is measured in the same process, STENCIL_CACHE_DIR fresh per launch), pystencils (OpenMP,
     explicit SIMD) and Devito (OpenMP) on the same update.
scaling: strong (--strong^2) and weak (--weak^2 per rank, rows: the grid grows in y, and so does its length:
     dx = dy) at each of --rank-counts, one numba thread per rank, ranks bound to cores (tools/cpu_scaling.py's
     launcher; BIND replaces the binding), the default time tile (deep halos) beside time_tile 1, round-robin
     over --repeats, medians of the library's normal run (warm-up excluded); each launch also measures the
     machine's lockstep floor on each point's block (`stencil bench balance`'s loop: the per-step kernel, then
     empty messages to and from both row neighbours each step; and the tiled kernel coupled once per tile):
     the wait no halo schedule can avoid on these cores, set beside the point's comm + wait (max over ranks).
     Then one process x --node-threads threads, tiled. Writes DIR/deep.jsonl and DIR/deep.md. --blocking-poll
     (with --variants default) runs the stop vote at polls blocking, as it was: an A/B of the nonblocking one.
device: the sequence of one device call: compile once, `tiles` at --node-threads threads (1024^2, 2048^2,
     4096^2) and at 1 thread (1024^2, 4096^2), `scaling` (--repeats 3 --strong-steps 160 --weak-steps 600;
     the one-process run 4000 weak steps), and the blocking-poll A/B at 2 ranks; DIR/tiles.txt, deep.md,
     ab.txt, machine.txt.
Every launch is one process tree; rounds are round-robin (each round runs every variant once, so a
noisy neighbour slows them alike) and medians over rounds give the ratios. `stencil run` figures are
its record's solve time per timed step (output off: output.every null, vtk off, no verify); peers time
their own loop between barriers after a warm-up (JIT). The case of mpi and one: cases/heat_4096.yaml at
--size, in float64 (the peers' dtype; the case file says float32).
"""

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))  # cpu_scaling (the launcher), compare_pystencils (the peer)
BIN = Path(sys.executable).parent


def case_file(tmp: Path, size: int, steps: int) -> Path:
    data = yaml.safe_load((ROOT / "cases" / "heat_4096.yaml").read_text())
    data["grid"].update(nx=size, ny=size)
    data["run"].update(steps=steps, check_every=100)
    data["numerics"]["dtype"] = "float64"  # as the peers (tools/devito_heat.py, pystencils_kernel); the case is float32
    data["output"].update(every=None, vtk=False, dir=str(tmp / "out"))
    data["backend"]["threads"] = None
    path = tmp / "case.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def env_with(**kw) -> dict:
    env = dict(os.environ)
    env.update({k: str(v) for k, v in kw.items()})
    return env


def stencil_run(tmp: Path, case: Path, ranks: int, threads: int, extra: list[str]) -> dict:
    """One `stencil run`; returns its record's throughput and resources."""
    out = tmp / "out"
    shutil.rmtree(out, ignore_errors=True)
    cache = tempfile.mkdtemp(dir=tmp)  # a fresh copy ceiling measured in this process (and no stored tile)
    cmd = [str(BIN / "stencil"), "run", str(case), "-q", "--overwrite", "--no-verify", "--threads", str(threads), *extra]
    if ranks > 1:
        cmd = [str(BIN / "mpirun"), "-n", str(ranks), *cmd]
    else:
        cmd.append("--no-mpi")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env_with(STENCIL_CACHE_DIR=cache), cwd=ROOT)
    if res.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    rec = json.loads((out / "record.json").read_text())
    return {"seconds_per_step": rec["throughput"]["seconds_per_step"],
            "fraction_of_copy": rec["throughput"].get("fraction_of_copy"),
            "copy_gbs": rec["throughput"].get("copy_gbs"),
            "time_tile": rec["resources"].get("time_tile"), "halo_depth": rec["resources"].get("halo_depth"),
            "messages_per_step": rec["resources"].get("messages_per_step")}


def peer(cmd: list[str], env: dict, name: str) -> dict:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [ln.split() for ln in res.stdout.splitlines() if ln.startswith(name + " ")]
    if res.returncode or not lines:
        return {"error": (res.stderr or res.stdout)[-500:]}
    return {"seconds_per_step": float(lines[-1][1])}


def variants(a, tmp: Path, case: Path) -> dict:
    devito = [sys.executable, str(ROOT / "tools" / "devito_heat.py"), "--size", str(a.size), "--steps", str(a.steps)]
    pys = [sys.executable, __file__, "--peer", "pystencils", "--size", str(a.size), "--steps", str(a.steps),
           "--threads", str(a.threads)]
    out = {}
    if "mpi" in a.parts:
        n = a.ranks
        out[f"mpirun -n {n} stencil (default)"] = lambda: stencil_run(tmp, case, n, 1, [])
        out[f"mpirun -n {n} stencil --time-tile 1"] = lambda: stencil_run(tmp, case, n, 1, ["--time-tile", "1"])
        out[f"mpirun -n {n} devito overlap"] = lambda: peer([str(BIN / "mpirun"), "-n", str(n), *devito],
                                                            env_with(DEVITO_MPI="overlap", OMP_NUM_THREADS=1), "devito")
    if "one" in a.parts:
        t = a.threads
        out[f"1 process x {t} stencil (default)"] = lambda: stencil_run(tmp, case, 1, t, [])
        out[f"1 process x {t} pystencils"] = lambda: peer(pys, env_with(OMP_NUM_THREADS=t), "pystencils")
        out[f"1 process x {t} devito"] = lambda: peer(devito, env_with(OMP_NUM_THREADS=t), "devito")
    return out


def wide_part(a) -> None:
    """Kernel-only round-robin on a wide grid: the column blocking of the ring buffer, measured."""
    import numba

    from solver.backends import numba_kernels as k
    from solver.backends.numba_backend import NumbaBackend, default_time_tile
    from solver.case import BackendSettings

    numba.set_num_threads(a.threads)
    ny, nx = a.wide
    be = NumbaBackend(BackendSettings(name="numba"), "float64", a.threads)
    tile = default_time_tile(ny // a.threads)
    cb = be.column_blocks(nx, tile)
    u = np.random.default_rng(1).random((ny + 2, nx + 2))
    v = u.copy()
    w = (0.1, 0.225, 0.225)
    runs = {"per-step": (lambda: k.step(v, u, *w, 1, ny + 1, 1, nx + 1), 1),
            f"time tile {tile}, {cb} column blocks (default)": (lambda: k.fused(v, u, *w, tile, a.threads, cb), tile),
            f"time tile {tile}, whole rows": (lambda: k.fused(v, u, *w, tile, a.threads, 1), tile)}
    times = {n: [] for n in runs}
    for fn, _ in runs.values():
        fn()
    for _ in range(a.repeats):
        for n, (fn, steps) in runs.items():
            t = time.perf_counter()
            for _ in range(max(1, 16 // steps)):
                fn()
            times[n].append((time.perf_counter() - t) / (steps * max(1, 16 // steps)))
    print(f"wide: {ny} x {nx} float64, {a.threads} threads, kernel only, median of {a.repeats} rounds, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    base = float(np.median(times["per-step"]))
    for n, ts in times.items():
        m = float(np.median(ts))
        print(f"  {n:42s} {m * 1e3:8.2f} ms/step {ny * nx / m / 1e6:7.0f} MLUP/s  {base / m:.2f}x per-step")


def tiles_part(a) -> None:
    """Kernel-only round-robin, one process x THREADS threads, square grids of --sizes: the per-step kernel
    beside the time-tiled one at k = 2..8 (a row block per thread, the default column blocks) and at the
    default k with 2 and 4 row blocks per thread: which tile pays at which rows per thread."""
    import numba

    from solver.backends import numba_kernels as k
    from solver.backends.numba_backend import NumbaBackend, default_time_tile
    from solver.case import BackendSettings

    numba.set_num_threads(a.threads)
    be = NumbaBackend(BackendSettings(name="numba"), "float64", a.threads)
    w = (0.1, 0.225, 0.225)
    print(f"tiles: {a.threads} threads, float64, kernel only, median of {a.repeats} rounds, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    for n in a.sizes:
        u = np.random.default_rng(1).random((n + 2, n + 2))
        v = u.copy()
        rows = n // a.threads
        kd = default_time_tile(rows)
        runs = {"per-step": (lambda: k.step(v, u, *w, 1, n + 1, 1, n + 1), 1)}
        for kk in sorted({2, 3, 4, 6, 8, kd}):
            runs[f"k {kk}" + (" (default)" if kk == kd else "")] = (
                lambda kk=kk: k.fused(v, u, *w, kk, a.threads, be.column_blocks(n, kk)), kk)
        for m in (2, 4):
            runs[f"k {kd}, {m} row blocks per thread"] = (
                lambda m=m: k.fused(v, u, *w, kd, m * a.threads, be.column_blocks(n, kd)), kd)
        reps = {name: max(1, int(0.1 / max(_once(fn), 1e-6))) for name, (fn, _) in runs.items()}
        times = {name: [] for name in runs}
        for _ in range(a.repeats):
            for name, (fn, steps) in runs.items():
                t = time.perf_counter()
                for _ in range(reps[name]):
                    fn()
                times[name].append((time.perf_counter() - t) / (steps * reps[name]))
        base = float(np.median(times["per-step"]))
        print(f" {n}^2 ({rows} rows per thread, fields {2 * 8 * (n + 2) ** 2 / 2 ** 20:.0f} MiB):")
        for name, ts in times.items():
            m = float(np.median(ts))
            print(f"  {name:34s} {m * 1e3:8.4f} ms/step {n * n / m / 1e6:7.0f} MLUP/s  {base / m:.2f}x per-step "
                  f"(spread {min(ts) * 1e3:.4f}-{max(ts) * 1e3:.4f})", flush=True)


def _once(fn) -> float:
    fn()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def pystencils_peer(a) -> None:
    """Time pystencils' generated kernel alone (OpenMP, the widest SIMD target it compiles for)."""
    from compare_pystencils import pystencils_kernel

    n = a.size
    u = np.random.default_rng(1).random((n + 2, n + 2))
    v = u.copy()
    kern, target = pystencils_kernel((0.1, 0.225, 0.225), u)
    t = time.perf_counter()
    for _ in range(a.steps):
        kern(src=u, dst=v)
        u, v = v, u
    print(f"pystencils {(time.perf_counter() - t) / a.steps:.6e} {target}", flush=True)


def point(comm, shape, time_tile, threads, steps, workdir, warmup=20) -> dict:
    from solver.case import validate_case
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


def launch(args) -> None:
    """One launch under mpirun (or one process with --threads): appends its points to --launch FILE."""
    from mpi4py import MPI

    from solver.bench.balance import lockstep
    from solver.backends.numba_backend import NumbaBackend, default_time_tile
    from solver.case import BackendSettings
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
            with open(args.launch, "a") as f:
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
    """The scaling table (printed), from the JSON lines of the launches."""
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


SCALING = ("strong", "weak", "strong_steps", "weak_steps", "warmup", "variants")


def scaling_part(a) -> None:
    """Launch `--launch` at each rank count (one thread per rank), then one process x --node-threads threads;
    the table to DIR/deep.md."""
    from cpu_scaling import launch_command, one_thread_env

    out = Path(a.dir)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "deep.jsonl"
    study = [f"--{k.replace('_', '-')}={getattr(a, k)}" for k in SCALING] + [f"--repeats={a.repeats or 3}"]
    if a.blocking_poll:
        study.append("--blocking-poll")
    for p in a.rank_counts:
        cmd = [*launch_command(), "-n", str(p), sys.executable, __file__, "--launch", str(jsonl), *study]
        subprocess.run(cmd, check=True, env=one_thread_env())
    if a.node_threads:
        node = [f"--weak-steps={a.node_weak_steps}"] if a.node_weak_steps else []
        subprocess.run([sys.executable, __file__, "--launch", str(jsonl), f"--threads={a.node_threads}", *study, *node],
                       check=True)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        table(jsonl)
    (out / "deep.md").write_text(buf.getvalue())
    print(buf.getvalue())


def device_part(a) -> None:
    """The GPU machine's CPU cores in one call: compile, tiles, scaling, the blocking-poll A/B."""
    out = Path(a.dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    machine = subprocess.run("date -u; nproc; lscpu | grep -E 'Model name|MHz|L2|L3'; mpirun --version | head -1",
                             shell=True, capture_output=True, text=True).stdout
    (out / "machine.txt").write_text(machine + f"numba {__import__('numba').__version__}\n")
    _compile_once()
    print(f"compile: {time.time() - t0:.0f} s", flush=True)
    tiles = io.StringIO()
    for threads, sizes in ((a.node_threads or 16, [1024, 2048, 4096]), (1, [1024, 4096])):
        with contextlib.redirect_stdout(tiles):
            tiles_part(argparse.Namespace(**{**vars(a), "threads": threads, "sizes": sizes, "repeats": 3}))
    (out / "tiles.txt").write_text(tiles.getvalue())
    print(tiles.getvalue(), f"tiles: {time.time() - t0:.0f} s", flush=True)
    study = {"repeats": a.repeats or 3, "strong_steps": 160, "weak_steps": 600, "node_weak_steps": 4000}
    scaling_part(argparse.Namespace(**{**vars(a), **study}))
    print(f"scaling: {time.time() - t0:.0f} s", flush=True)
    ab = argparse.Namespace(**{**vars(a), **study, "dir": str(out / "ab"), "rank_counts": [2], "node_threads": 0,
                               "variants": "default", "blocking_poll": True})
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        scaling_part(ab)
    (out / "ab.txt").write_text(buf.getvalue())
    print(f"a/b: {time.time() - t0:.0f} s; total {time.time() - t0:.0f} s", flush=True)


def _compile_once() -> None:
    """Compile the numba kernels once (numba caches them), so that the ranks do not all compile at once."""
    from types import SimpleNamespace

    import numba

    from solver.backends.numba_backend import NumbaBackend
    from solver.case import BackendSettings

    be = NumbaBackend(BackendSettings(name="numba", threads=1), "float64", 1)
    u = np.zeros((8, 8))
    be.prepare(u, u.copy(), SimpleNamespace(wc=0.5, wx=0.125, wy=0.125))
    print("compiled; threading layer", numba.threading_layer(), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=None, help="rounds (default: 5; scaling 3)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None, help="threads (default: 2; a scaling launch 1)")
    ap.add_argument("--parts", default="mpi,one")
    ap.add_argument("--wide", type=int, nargs=2, default=[512, 65536], metavar=("NY", "NX"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--dir", help="scaling, device: the results directory")
    ap.add_argument("--rank-counts", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--node-threads", type=int, default=16, help="scaling: the one-process run's threads (0: none)")
    ap.add_argument("--node-weak-steps", type=int, default=None, help="scaling: the one-process run's weak steps")
    ap.add_argument("--strong", type=int, default=4096)
    ap.add_argument("--weak", type=int, default=1024)
    ap.add_argument("--strong-steps", type=int, default=200)
    ap.add_argument("--weak-steps", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first (at least two tiles of 8)")
    ap.add_argument("--variants", choices=("both", "default"), default="both", help="default: deep halos only")
    ap.add_argument("--blocking-poll", action="store_true",
                    help="the stop vote at polls blocking (MPI_Allreduce), as before: an A/B of the nonblocking one")
    ap.add_argument("--table", type=Path, help="print the scaling table of a deep.jsonl")
    ap.add_argument("--launch", metavar="FILE", help="one scaling launch (under mpirun, or one process with --threads), "
                    "appending its points to FILE; what --parts scaling runs at each rank count")
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.table:
        return table(a.table)
    if a.launch:
        a.repeats, a.threads = a.repeats or 3, a.threads or 1
        return launch(a)
    if a.peer == "pystencils":
        return pystencils_peer(a)
    a.parts = a.parts.split(",")
    if ("scaling" in a.parts or "device" in a.parts) and not a.dir:
        ap.error("--parts scaling and device write to --dir DIR")
    if "device" in a.parts:
        return device_part(a)
    if "scaling" in a.parts:
        scaling_part(a)
        a.parts.remove("scaling")
    a.repeats, a.threads = a.repeats or 5, a.threads or 2
    for name, part in (("wide", wide_part), ("tiles", tiles_part)):
        if name in a.parts:
            part(a)
            a.parts.remove(name)
    if not a.parts:
        return
    tmp = Path(tempfile.mkdtemp(prefix="deep_bench."))
    case = case_file(tmp, a.size, a.steps)
    runs = variants(a, tmp, case)
    got = {name: [] for name in runs}
    start = time.strftime("%Y-%m-%d %H:%M")
    for r in range(a.repeats):
        for name, fn in runs.items():
            got[name].append(fn())
            print(f"round {r + 1}: {name}: {got[name][-1]}", file=sys.stderr, flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    med = {}
    for name, rs in got.items():
        ok = [x for x in rs if "seconds_per_step" in x]
        med[name] = float(np.median([x["seconds_per_step"] for x in ok])) if ok else None
    print(f"{a.size}^2 float64, {a.steps} steps per launch, median of {a.repeats} round-robin rounds, "
          f"{os.uname().nodename}, {start} - {time.strftime('%H:%M')}")
    print(f"{'variant':40s} {'ms/step':>8s} {'MLUP/s':>8s}  spread (ms)         notes")
    for name, rs in got.items():
        if med[name] is None:
            print(f"{name:40s} failed: {rs[-1].get('error', '')[:200]}")
            continue
        ts = [x["seconds_per_step"] * 1e3 for x in rs if "seconds_per_step" in x]
        notes = ""
        if "time_tile" in rs[-1]:
            fr = [x["fraction_of_copy"] for x in rs if x.get("fraction_of_copy")]
            notes = (f"tile {rs[-1]['time_tile']}, depth {rs[-1]['halo_depth']}, "
                     f"{rs[-1]['messages_per_step']:.2f} msg/step, of copy {np.median(fr):.2f}" if fr else "")
        print(f"{name:40s} {med[name] * 1e3:8.2f} {a.size ** 2 / med[name] / 1e6:8.0f}  "
              f"{min(ts):.2f}-{max(ts):.2f}  {notes}")
    ratios = {}
    for part in ("mpirun", "1 process"):
        names = [n for n in med if n.startswith(part) and med[n]]
        base = next((n for n in names if n.endswith("(default)")), None)
        for n in names:
            if n != base and base:
                ratios[f"{base} / {n}"] = med[n] / med[base]
    for k, v in ratios.items():
        print(f"speedup {k}: {v:.2f}x")
    if a.json:
        a.json.write_text(json.dumps({"medians": med, "rounds": got, "ratios": ratios, "date": start}, indent=1))


if __name__ == "__main__":
    main()
