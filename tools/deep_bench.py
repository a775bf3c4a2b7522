"""Deep halos and time tiles against the per-step run, the copy rate and peer codes, in one run.

    python tools/deep_bench.py [--size 4096] [--steps 200] [--repeats 5] [--ranks 2] [--threads 2]
                               [--parts mpi,one,wide,tiles] [--sizes 1024 2048 4096] [--json out.json]

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
Every launch is one process tree; rounds are round-robin (each round runs every variant once, so a
noisy neighbour slows them alike) and medians over rounds give the ratios. `stencil run` figures are
its record's solve time per timed step (output off: output.every null, vtk off, no verify); peers time
their own loop between barriers after a warm-up (JIT). The case: cases/heat_4096.yaml at --size, in
float64 (the peers' dtype; the case file says float32).
"""

import argparse
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
    from solver.config import BackendSettings

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
    from solver.config import BackendSettings

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parts", default="mpi,one")
    ap.add_argument("--wide", type=int, nargs=2, default=[512, 65536], metavar=("NY", "NX"))
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer == "pystencils":
        return pystencils_peer(a)
    a.parts = a.parts.split(",")
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
