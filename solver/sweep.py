"""Scaling sweeps: every point is a normal `stencil run` in its own process and output directory.

    stencil sweep strong CASE --ranks 1,2,4,8     global grid fixed, ranks vary
    stencil sweep weak   CASE --ranks 1,2,4,8     grid per rank fixed, the global grid grows
    stencil sweep threads CASE --threads 1,2,4,8  one process, numba threads vary

Layout of the sweep directory (--output, default output/sweep-<kind>-<case name>):
    cases/<point>.yaml      the input of each point (rerun one with `stencil run`)
    <point>/rep<k>/         the run's own output: record.json, timings.csv, timings.h5, case.yaml (and fields.h5
                            with --fields: points keep no fields unless asked, output.fields false)
    sweep.csv, sweep.md     one row per point (the repeat with the median time per step)
    sweep.json              the sweep's metadata, every repeat's outcome, the rows and the notes

Weak scaling grows the grid with the process grid, keeping dx, dy (so dt) fixed: rows decomposition
(py, px) = (n, 1), cart the most nearly square pair py >= px (as MPI_Dims_create); the global grid is
(py * ny, px * nx) with ly, lx scaled so that the spacing is unchanged, and parallel.dims is set so
that every rank owns exactly the case's ny x nx.

Before the first point runs the sweep says how much disk it will take at most (disk_estimate).

Threads per rank in rank sweeps: --threads-per-rank, else the case's backend.threads, else 1 (pure
MPI, as PETSc users expect). Numba's time tiling (and under MPI the deep halo) is the case's
backend.time_tile, the same at every point; `--time-tile 1` sweeps the per-step kernel and halo.
A point that fails (non-zero exit, timeout) is reported in sweep.md/.csv and the sweep goes on; the
sweep's exit code is then the first failed point's (124 for a timeout).
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .case.loading import dump_yaml
from .core.errors import InputError
from .results.report import count_of

KINDS = ("strong", "weak", "threads")
HALO_WARN = 0.05  # halo cells / owned cells per rank above which halo traffic matters
COMM_WARN = 0.20  # comm + wait fraction of the loop above which communication dominates
LATENCY_WARN_S = 100e-6  # a step shorter than this is within reach of MPI message latency
SATURATION = 0.25  # copy bandwidth gaining less than this share of the ideal growth: saturated
RUN_FILE_BYTES = 32 << 10  # a point's record.json, record.md, timings.csv/.h5, case.yaml (19 kB at 2 ranks)...
RANK_FILE_BYTES = 2 << 10  # ... and per rank (its rows in the record and the timings)
CSV_FIELDS = ["ranks", "threads", "workers", "global_ny", "global_nx", "local_ny", "local_nx", "halo_fraction",
              "seconds_per_step", "time_min", "time_max", "repeats_ok", "mlups", "speedup", "efficiency",
              "compute_fraction", "comm_fraction", "wait_fraction", "comm_wait_fraction", "load_imbalance", "effective_gbs",
              "copy_gbs", "fraction_of_copy", "verified", "status", "record", "predicted_seconds_per_step", "model_error",
              "predicted_compute", "predicted_halo", "predicted_waiting", "predicted_collective"]


@dataclass
class Settings:
    kind: str
    case: Path
    counts: list[int]
    output: Path | None = None
    launcher: str | None = None  # mpirun | mpiexec | srun | none | a path; None: mpirun (threads: none)
    launcher_args: str = ""
    repeats: int = 1
    threads_per_rank: int | None = None
    backend: str | None = None
    steps: int | None = None
    dtype: str | None = None
    halo: str | None = None
    decomposition: str | None = None
    balance: str | None = None
    time_tile: int | None = None
    verify: bool | None = None
    overwrite: bool = False
    timeout: float | None = None
    fields: bool = False  # keep every point's fields.h5 (output.fields); off: records and timings only
    model: bool = True  # predict every point (solver.model) beside the measurement
    network: str | None = None  # the model's network between nodes (preset, "measured" or a file)
    sets: dict = field(default_factory=dict)  # --set PATH=VALUE overrides (solver.case.parse_sets)
    argv: list[str] = field(default_factory=list)


@dataclass
class Point:
    label: str
    ranks: int
    threads: int
    case_file: Path
    dirs: list[Path]
    runs: list[dict] = field(default_factory=list)  # per repeat: dir, exit code, error, seconds_per_step
    disk: int = 0  # the most bytes one repeat writes (solver.results.summary.disk_bytes + its record)


# input -----------------------------------------------------------------------------------------

MAX_COUNTS = 64  # entries of a list option (--ranks 1,2,4...): each one a sweep point or a measurement


def parse_counts(text: str, option: str) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]: positive, distinct, increasing."""
    try:
        counts = [int(p) for p in text.replace(" ", "").split(",") if p]
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a comma-separated list of whole numbers; e.g. 1,2,4,8") from None
    if not counts or min(counts) < 1:
        raise InputError(f"{option}: give positive counts, e.g. 1,2,4,8")
    if len(counts) > MAX_COUNTS:
        raise InputError(f"{option}: {len(counts)} counts; give at most {MAX_COUNTS} (each is a point to run or measure)")
    if counts != sorted(set(counts)):
        raise InputError(f"{option}: {text!r} must increase without repeats; e.g. 1,2,4,8")
    return counts


def base_case(s: Settings) -> dict:
    """The validated case with the sweep's overrides, as plain data."""
    from .case import load_case

    over = {"--backend": s.backend, "--steps": s.steps, "--dtype": s.dtype, "--halo": s.halo,
            "--decomposition": s.decomposition, "--balance": s.balance, "--time-tile": s.time_tile}
    case = load_case(s.case, {**{k: v for k, v in over.items() if v is not None}, **s.sets})
    if s.kind == "threads" and case.backend.name != "numba":
        raise InputError(f"backend.name: the threads sweep varies numba threads but the case uses "
                         f"{case.backend.name!r}; pass --backend numba or set backend.name: numba")
    return case.model_dump(mode="json")


def resolve_launcher(s: Settings) -> list[str]:
    """The launcher command and its arguments ([] for none)."""
    name = s.launcher or ("none" if s.kind == "threads" else "mpirun")
    if name == "none":
        if s.kind != "threads":
            raise InputError("--launcher: rank sweeps need an MPI launcher; use mpirun, mpiexec or srun")
        return []
    beside = Path(sys.executable).parent / name  # the venv's launcher, matching its mpi4py
    exe = str(beside) if "/" not in name and beside.exists() else shutil.which(name)
    if exe is None:
        raise InputError(f"--launcher: {name!r} is not on PATH; install MPI, or pass the full path to "
                         "mpirun / mpiexec / srun")
    try:
        extra = shlex.split(s.launcher_args)
    except ValueError as exc:
        raise InputError(f"--launcher-args: {exc}; quote it as one shell string, e.g. '--bind-to core'") from None
    if Path(exe).name == "srun" and _option(extra, "--mpi") is None and "SLURM_MPI_TYPE" not in os.environ:
        plugin = srun_mpi_plugin()
        extra += [f"--mpi={plugin}"] if plugin else []
    return [exe, *extra]


def _option(args: list[str], *names: str) -> str | None:
    """The value of the last of the options `names` in args ('--x v', '--x=v', short '-N v' or '-Nv');
    '' for one given without a value at the end; None when absent."""
    value = None
    for k, a in enumerate(args):
        for n in names:
            if a == n:
                value = args[k + 1] if k + 1 < len(args) else ""
            elif a.startswith(n + "=") or (len(n) == 2 and a.startswith(n) and len(a) > 2):
                value = a[len(n) + 1:] if a.startswith(n + "=") else a[2:]
    return value


def srun_mpi_plugin() -> str | None:
    """srun's --mpi plugin for the MPI that mpi4py was built with (that of the points' Python): pmix for
    Open MPI (5.x speaks only PMIx), pmi2 for the MPICH family (MPICH, Intel MPI, MVAPICH; the PyPI
    mpich wheel has no PMIx client and aborts under --mpi=pmix). None without mpi4py. MPI is not
    initialised: MPI_Get_library_version may be called before MPI_Init."""
    try:
        import mpi4py

        mpi4py.rc.initialize = mpi4py.rc.finalize = False
        from mpi4py import MPI
    except ImportError:
        return None
    return "pmix" if "Open MPI" in MPI.Get_library_version() else "pmi2"


def sweep_dir(s: Settings, name: str) -> Path:
    d = s.output or Path("output") / f"sweep-{s.kind}-{name}"
    if d.exists() and not d.is_dir():
        raise InputError(f"--output: {d} exists and is not a directory; choose another --output")
    if (d / "sweep.json").exists() and not s.overwrite:
        raise InputError(f"--output: {d} already holds a sweep; pass --overwrite to replace it, or choose "
                         "another --output directory")
    return d


# planning --------------------------------------------------------------------------------------

def weak_dims(n: int) -> tuple[int, int]:
    """The most nearly square (py, px) with py * px = n and py >= px."""
    px = max(p for p in range(1, int(n**0.5) + 1) if n % p == 0)
    return n // px, px


def point_case(base: dict, s: Settings, n: int) -> tuple[dict, int, int]:
    """(case data, ranks, threads per rank) of the point with count n."""
    data = copy.deepcopy(base)
    data["output"]["vtk"] = False  # a sweep measures the solver; VTK files per point would only cost time
    data["output"]["fields"] = s.fields  # and its fields cost disk: kept only when asked (--fields)
    if s.kind == "threads":
        data["backend"]["threads"] = n
        return data, 1, n
    threads = s.threads_per_rank or base["backend"].get("threads") or 1
    if data["backend"]["name"] == "numba":
        data["backend"]["threads"] = threads
    if s.kind == "weak":
        grow(data, n)
    return data, n, threads if data["backend"]["name"] == "numba" else 1


def grow(data: dict, n: int) -> None:
    """Weak scaling: (py*ny, px*nx) points, the same dx and dy, parallel.dims fixed."""
    g, par = data["grid"], data["parallel"]
    py, px = (n, 1) if par["decomposition"] == "rows" else weak_dims(n)
    from .core.boundary import raw_kinds, spans

    kx, ky = raw_kinds(data, "x"), raw_kinds(data, "y")  # the walls' distance depends on the boundary kinds
    dx, dy = g["lx"] / spans(kx, g["nx"]), g["ly"] / spans(ky, g["ny"])
    g["nx"], g["ny"] = g["nx"] * px, g["ny"] * py
    g["lx"], g["ly"] = dx * spans(kx, g["nx"]), dy * spans(ky, g["ny"])
    if par["decomposition"] == "cart":
        par["dims"] = [py, px]


def plan(s: Settings, base: dict, root: Path) -> list[Point]:
    from .case import validate_case
    from .results.summary import disk_bytes

    points = []
    for n in s.counts:
        data, ranks, threads = point_case(base, s, n)
        label = f"t{n}" if s.kind == "threads" else f"r{n}"
        dirs = [root / label / f"rep{k + 1}" for k in range(s.repeats)]
        data["output"]["dir"] = str(dirs[0])
        case = validate_case(data, source=f"{s.case} ({label})")
        case_file = root / "cases" / f"{label}.yaml"
        disk = disk_bytes(case)["disk_bytes"] + RUN_FILE_BYTES + RANK_FILE_BYTES * ranks
        points.append(Point(label, ranks, threads, case_file, dirs, disk=disk))
        case_file.parent.mkdir(parents=True, exist_ok=True)
        case_file.write_text(dump_yaml(data))
    return points


def disk_estimate(s: Settings, points: list[Point]) -> dict:
    """The most bytes the sweep writes (every repeat of every point), and a line that says so."""
    total = sum(p.disk * len(p.dirs) for p in points)
    runs = sum(len(p.dirs) for p in points)
    what = ("every point's fields.h5 kept: --fields" if s.fields else
            "records and timings only; --fields keeps every point's fields.h5")
    return {"bytes": total, "runs": runs, "fields": s.fields,
            "line": f"disk: at most {_size(total)} for {runs} run(s) ({what})"}


def _size(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


# running ---------------------------------------------------------------------------------------

def command(s: Settings, launcher: list[str], p: Point, outdir: Path) -> list[str]:
    cmd = [*launcher[:1], "-n", str(p.ranks), *srun_nodes(launcher, p.ranks), *launcher[1:]] if launcher else []
    cmd += [sys.executable, "-m", "solver", "run", str(p.case_file), "--output", str(outdir), "--quiet"]
    if not launcher:
        cmd.append("--no-mpi")
    if s.overwrite:
        cmd.append("--overwrite")
    if s.verify is not None:
        cmd.append("--verify" if s.verify else "--no-verify")
    return cmd


def srun_nodes(launcher: list[str], n: int) -> list[str]:
    """['--nodes=K'] for srun, K = ceil(n / ranks per node), ranks per node from --ntasks-per-node in the
    launcher arguments, else from the job (SLURM_NTASKS_PER_NODE). Without it srun spreads a step over
    every node of the allocation (srun -n 2 in a 2-node job puts one rank on each), so points would
    differ in ranks per node. [] when the user passed --nodes/-N or the ranks per node are unknown."""
    if not launcher or Path(launcher[0]).name != "srun" or _option(launcher[1:], "--nodes", "-N") is not None:
        return []
    per_node = _option(launcher[1:], "--ntasks-per-node") or os.environ.get("SLURM_NTASKS_PER_NODE", "")
    return [f"--nodes={-(-n // int(per_node))}"] if per_node.isdigit() and int(per_node) > 0 else []


def point_env(s: Settings, p: Point) -> dict:
    """The sweep's environment; rank sweeps size numba's pool to the threads per rank (unless the user
    set NUMBA_NUM_THREADS), so no idle pool thread competes for the cores the other ranks use."""
    env = dict(os.environ)
    if s.kind != "threads":
        env.setdefault("NUMBA_NUM_THREADS", str(p.threads))
        env.setdefault("OMP_NUM_THREADS", str(p.threads))
    return env


def run_once(cmd: list[str], timeout: float | None, env: dict | None = None) -> tuple[int, str]:
    """(exit code, the error it printed); 124 and a message on timeout. The point runs in its own
    process group, so a timeout or Ctrl-C ends the launcher and every rank it started, nothing else."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    except OSError as exc:
        return 127, f"could not start {cmd[0]}: {exc.strerror}"
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_group(proc)
        return 124, f"timed out after {timeout:g} s"
    except BaseException:
        end_group(proc)
        raise
    return proc.returncode, failure(err) if proc.returncode else ""


def end_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the point's process group, SIGKILL after 5 s if it is still there."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.communicate(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue


# the launcher's own per-task status lines ("srun: error: node1: task 0: Exited with exit code 16"), which
# name no cause: the cause is what the ranks printed before them
_LAUNCHER_STATUS = re.compile(r"^srun: (error: \S+: tasks? [\d,-]+: |Job step aborted|.*step .* CANCELLED)")


def failure(stderr: str) -> str:
    """The run's error: from its first 'error:' line on (several field errors), else its last line;
    srun's per-task exit lines are skipped when the ranks said something themselves."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    lines = [ln for ln in lines if not _LAUNCHER_STATUS.match(ln)] or lines
    first = next((k for k, ln in enumerate(lines) if "error:" in ln), len(lines) - 1)
    return " | ".join(lines[first:])[:500] if lines else "no message"


def run_points(s: Settings, launcher: list[str], points: list[Point], say) -> None:
    for p in points:
        for k, d in enumerate(p.dirs):
            cmd = command(s, launcher, p, d)
            t = time.perf_counter()
            rc, err = run_once(cmd, s.timeout, point_env(s, p))
            rec = read_record(d) if rc == 0 else None
            if rc == 0 and rec is None:
                rc, err = 1, f"no record.json in {d}"
            elif rec and rec["resources"]["ranks"] != p.ranks:
                rc, err = 1, (f"{p.ranks} processes were started but the record shows {rec['resources']['ranks']} "
                              f"rank(s): they did not form one MPI job (srun: pass --mpi=pmi2 for MPICH or "
                              f"--mpi=pmix for Open MPI); see docs/clusters.md")
                rec = None
            tp = rec.get("throughput") or {} if rec else {}
            p.runs.append({"dir": str(d), "exit_code": rc, "error": err, "seconds_per_step": tp.get("seconds_per_step"),
                           "mlups": tp.get("mlups"), "wall_s": time.perf_counter() - t, "command": shlex.join(cmd)})
            say(p, k, p.runs[-1])


def read_record(d: Path) -> dict | None:
    """A point's record.json (solver.core.readers), or None where the point wrote none that reads as an object."""
    from .core.readers import read_json

    try:
        rec = read_json(Path(d) / "record.json", None, "")
    except InputError:
        return None
    return rec if isinstance(rec, dict) else None


# rows ------------------------------------------------------------------------------------------

def compute_fraction(run_dir: Path) -> float | None:
    """Largest over ranks of compute / step time (loop minus in-loop output), from the run's timings.csv:
    the same definition the record uses for its comm and wait fractions."""
    try:
        with open(run_dir / "timings.csv", newline="") as f:
            ranks = list(csv.DictReader(f))
        fracs = [float(r["compute"]) / (float(r["loop"]) - float(r["io"])) for r in ranks
                 if float(r["loop"]) - float(r["io"]) > 0]
    except (OSError, KeyError, ValueError):
        return None
    return max(fracs) if fracs else None


def largest_block(rec: dict) -> tuple[int, int]:
    from .core.decomp import all_blocks

    inp, dims = rec["input"], rec["resources"]["dims"]
    b = max(all_blocks((inp["ny"], inp["nx"]), tuple(dims)), key=lambda b: b.ny * b.nx)
    return b.ny, b.nx


def median_run(p: Point) -> tuple[dict, dict] | None:
    """(run, record) of the successful repeat with the median time per step (the lower one if even)."""
    ok = sorted((r for r in p.runs if r["exit_code"] == 0 and r["seconds_per_step"]),
                key=lambda r: r["seconds_per_step"])
    if not ok:
        return None
    run = ok[(len(ok) - 1) // 2]
    return run, read_record(Path(run["dir"]))


def row(p: Point, root: Path) -> dict:
    """One sweep.csv row, every number taken from the chosen repeat's own record.json."""
    base = {"ranks": p.ranks, "threads": p.threads, "workers": p.ranks * p.threads}
    chosen = median_run(p)
    if chosen is None:
        failed = next((r for r in p.runs if r["exit_code"] != 0), p.runs[0] if p.runs else {})
        reason = failed.get("error") or "no timed steps (raise run.steps above run.warmup)"
        return {**base, "status": f"failed (exit {failed.get('exit_code')}): {reason}"}
    run, rec = chosen
    tp, t, inp = rec["throughput"], rec["timings"], rec["input"]
    times = [r["seconds_per_step"] for r in p.runs if r["exit_code"] == 0 and r["seconds_per_step"]]
    ly, lx = largest_block(rec)
    return {**base, "halo_fraction": halo_fraction(rec), "ranks": rec["resources"]["ranks"],
            "threads": rec["resources"]["threads_per_rank"],
            "global_ny": inp["ny"], "global_nx": inp["nx"], "local_ny": ly, "local_nx": lx,
            "seconds_per_step": tp["seconds_per_step"], "time_min": min(times), "time_max": max(times),
            "repeats_ok": len(times), "mlups": tp["mlups"],
            "compute_fraction": compute_fraction(Path(run["dir"])),
            "comm_fraction": t["comm_fraction"]["max"], "wait_fraction": t["wait_fraction"]["max"],
            "comm_wait_fraction": t["comm_wait_fraction"]["max"], "load_imbalance": t["load_imbalance"], "effective_gbs": tp["effective_gbs"],
            "copy_gbs": tp.get("copy_gbs"), "fraction_of_copy": tp.get("fraction_of_copy"),
            "verified": rec["correctness"].get("passed"), "status": "ok",
            "record": str(Path(run["dir"]).relative_to(root) / "record.json"), "bottleneck": rec["bottleneck"]}


def add_speedup(rows: list[dict], kind: str) -> None:
    """Against the first successful point (count n0), scaled so that the ideal speedup is the count:
    strong/threads S(n) = n0 * T(n0) / T(n); weak (scaled speedup) S(n) = n * T(n0) / T(n); E = S / n."""
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return
    t0, n0 = ok[0]["seconds_per_step"], count_of(ok[0], kind)
    for r in ok:
        n = count_of(r, kind)
        r["speedup"] = (n if kind == "weak" else n0) * t0 / r["seconds_per_step"]
        r["efficiency"] = r["speedup"] / n


def halo_fraction(rec: dict) -> float:
    """Largest ratio over ranks of halo cells received per step to owned cells."""
    from .core.decomp import all_blocks

    inp, dims = rec["input"], rec["resources"]["dims"]
    worst = 0.0
    for b in all_blocks((inp["ny"], inp["nx"]), tuple(dims)):
        worst = max(worst, b.halo_cells / (b.ny * b.nx))
    return worst


# notes -----------------------------------------------------------------------------------------

def notes(rows: list[dict], s: Settings, launcher: list[str]) -> list[str]:
    """Warnings and findings for sweep.md: failures, oversubscription, small domains, saturation."""
    out = [f"point {r['ranks']} rank(s) x {r['threads']} thread(s) {r['status']}" for r in rows if r["status"] != "ok"]
    out += oversubscription(rows, launcher)
    out += [small_domain(r) for r in rows if r["status"] == "ok" and small_domain(r)]
    out += [comm_heavy(r) for r in rows if r["status"] == "ok" and comm_heavy(r)]
    out += saturation(rows, "copy_gbs", "memory bandwidth (copy, every worker streaming at once)")
    out += saturation(rows, "effective_gbs", "the stencil's effective bandwidth")
    low = next((r for r in rows if r.get("efficiency") is not None and r["efficiency"] < 0.8), None)
    if low:
        n = count_of(low, s.kind)
        out.append(f"parallel efficiency falls below 80% at {n} {'threads' if s.kind == 'threads' else 'ranks'} "
                   f"({low['efficiency']:.0%}); bottleneck there: {low['bottleneck']}")
    return out


def oversubscription(rows: list[dict], launcher: list[str]) -> list[str]:
    from .core.machine import cpu_count

    if launcher and Path(launcher[0]).name == "srun":
        return []  # the job's nodes are not this machine
    cores = cpu_count()
    return [f"{r['ranks']} rank(s) x {r['threads']} thread(s) = {r['workers']} workers on {cores} cores here: "
            "oversubscribed, so this point measures time-sharing, not scaling" for r in rows if r["workers"] > cores]


def small_domain(r: dict) -> str | None:
    """Why halo traffic or message latency dominate at this point by construction (None when they do not)."""
    if r["ranks"] < 2:
        return None
    why = []
    if r["halo_fraction"] > HALO_WARN:
        why.append(f"halo cells are {r['halo_fraction']:.1%} of the owned cells")
    if r["seconds_per_step"] < LATENCY_WARN_S:
        why.append(f"a step takes {r['seconds_per_step'] * 1e6:.0f} us, close to MPI message latency")
    if not why:
        return None
    return (f"{r['ranks']} ranks: local domains of nx x ny = {r['local_nx']} x {r['local_ny']} are small: " + "; ".join(why) +
            ": halo traffic and latency dominate; scaling here says little about larger problems")


def comm_heavy(r: dict) -> str | None:
    """Measured communication above COMM_WARN where the domains are not small: say what it can mean."""
    share = r["comm_wait_fraction"]  # per rank, then the largest
    if r["ranks"] < 2 or share <= COMM_WARN or small_domain(r):
        return None
    return (f"{r['ranks']} ranks: comm + wait take up to {share:.0%} of a rank's loop (largest over ranks: comm "
            f"{r['comm_fraction']:.0%}, wait {r['wait_fraction']:.0%}) although halo cells are only {r['halo_fraction']:.2%} of the owned cells: "
            "waiting for neighbours points at imbalance or at noise (shared or oversubscribed cores, other jobs), "
            "not at halo volume; check the spread over repeats and the per-rank timeline")


def saturation(rows: list[dict], key: str, what: str) -> list[str]:
    """Where `key` stops growing with the workers: the first step that gains less than SATURATION of
    the ideal (proportional) growth."""
    ok = [r for r in rows if r["status"] == "ok" and r.get(key)]
    if len(ok) < 2:
        return []
    series = ", ".join(f"{r[key]:.3g} at {r['workers']}" for r in ok)
    for a, b in zip(ok, ok[1:]):
        ideal = b["workers"] / a["workers"] - 1
        gain = b[key] / a[key] - 1
        if ideal > 0 and gain < SATURATION * ideal:
            return [f"{what}, GB/s at workers: {series}; it stops growing after {a['workers']} worker(s): "
                    f"{b['workers']} workers give {gain:+.0%} for {ideal:+.0%} workers"]
    return [f"{what}, GB/s at workers: {series}; still growing at {ok[-1]['workers']} workers: "
            "not saturated in this range"]


# output ----------------------------------------------------------------------------------------

def growth(s: Settings, base: dict, rows: list[dict]) -> str:
    g, dec = base["grid"], base["parallel"]["decomposition"]
    if s.kind == "strong":
        return f"strong scaling: the global grid stays nx x ny = {g['nx']} x {g['ny']}; ranks vary ({dec} decomposition)"
    if s.kind == "threads":
        return f"thread scaling: one process, nx x ny = {g['nx']} x {g['ny']} points, numba threads vary"
    rule = "py = ranks, px = 1" if dec == "rows" else "(py, px) the most nearly square pair, py >= px"
    return (f"weak scaling: every rank owns nx x ny = {g['nx']} x {g['ny']} points; the global grid is "
            f"(px*{g['nx']}) x (py*{g['ny']}) with {rule} ({dec} decomposition); lx, ly grow with it so dx, dy and dt stay fixed")


def csv_text(rows: list[dict]) -> str:
    from .results.record import csv_text as table

    return table(rows, CSV_FIELDS)


def _f(v, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def markdown(res: dict) -> str:
    m = res["machine"]
    lines = [f"# {res['kind'].capitalize()} sweep: {res['case_name']}", "",
             f"{res['growth']}.", "",
             f"Command: `{res['command']}`  ", f"Launcher: `{res['launcher'] or 'none (one process)'}`; "
             f"{res['repeats']} repeat(s) per point, the row shows the repeat with the median time per step.  ",
             f"Machine: {m['host']}, {m['cpu']}, {m['cores_usable']} usable cores; {res['date']}.", "",
             "| ranks | threads | global nx x ny | local nx x ny (largest) | ms/step (min-max) | MLUP/s | speedup | efficiency | "
             "compute | comm | wait | imbalance | GB/s | copy GB/s | of copy | verified | status | model ms | model error |",
             "|" + "---|" * 19]
    for r in res["rows"]:
        ok = r["status"] == "ok"
        lines.append(" | ".join([
            f"| {r['ranks']}", str(r["threads"]),
            f"{r['global_nx']} x {r['global_ny']}" if ok else "", f"{r['local_nx']} x {r['local_ny']}" if ok else "",
            f"{r['seconds_per_step'] * 1e3:.4g} ({r['time_min'] * 1e3:.4g}-{r['time_max'] * 1e3:.4g})" if ok else "",
            _f(r.get("mlups"), ".1f"), _f(r.get("speedup"), ".2f"), _f(r.get("efficiency"), ".0%"),
            _f(r.get("compute_fraction"), ".0%"), _f(r.get("comm_fraction"), ".0%"), _f(r.get("wait_fraction"), ".0%"),
            _f(r.get("load_imbalance"), ".3f"), _f(r.get("effective_gbs"), ".2f"), _f(r.get("copy_gbs"), ".1f"),
            _f(r.get("fraction_of_copy"), ".0%"), verified(r.get("verified")), r["status"],
            _f(r.get("predicted_seconds_per_step") and r["predicted_seconds_per_step"] * 1e3, ".4g"),
            _f(r.get("model_error"), "+.1%")]) + " |")
    lines += ["", "## Notes", ""] + [f"- {n}" for n in res["notes"] or ["nothing to report"]]
    lines += ["", "## Model", "", "Predicted seconds per step beside each point (solver.model, docs/scaling_model.md; "
              "`stencil model --validate DIR` prints the error per point):", ""] + [f"- {n}" for n in res.get("model") or []]
    lines += ["", "## Columns", "", COLUMNS, ""]
    return "\n".join(lines)


def verified(v) -> str:
    """The verified column: PASS, FAIL, or empty when the point did not verify (None)."""
    return "" if v is None else "PASS" if v else "FAIL"


COLUMNS = """- time per step: the run's solve time (after warm-up, in-loop output excluded) over its timed steps;
  min-max over repeats.
- speedup: strong/threads n0*T(n0)/T(n), weak n*T(n0)/T(n) (scaled speedup), against the first point;
  ideal = n. efficiency = speedup / n.
- compute, comm, wait: fractions of each rank's step time (its timed loop minus in-loop output), the
  largest over ranks (the record's definition). imbalance: max / mean compute time over ranks.
- GB/s: effective bandwidth, 2 x itemsize per update (one read, one write of the field); copy GB/s: the
  copy ceiling measured with the same ranks and threads, all at once (cached per machine; `stencil bench
  bandwidth --refresh` measures again); of copy: their ratio.
- verified: the run's own check (exact eigenmode or numpy reference); empty when the case does not verify.
- model ms: the scaling model's predicted time per step for this point (its ranks, nodes and case), from
  inputs measured on this machine; model error: predicted / measured - 1."""


def write_sweep(root: Path, res: dict) -> None:
    (root / "sweep.csv").write_text(csv_text(res["rows"]))
    (root / "sweep.md").write_text(markdown(res))
    (root / "sweep.json").write_text(json.dumps(res, indent=1, default=str))


# the sweep -------------------------------------------------------------------------------------

def sweep(s: Settings, say=None, note=None) -> dict:
    """Plan, say the disk it will take (note(line)), run every point (failures reported, not fatal), write
    sweep.csv/.md/.json; returns the result."""
    from .results.environment import environment

    base = base_case(s)
    launcher = resolve_launcher(s)
    if s.network and s.network != "measured":
        from .model.network import load

        load(s.network)  # a bad preset or file: exit 2 before any point runs
    if not launcher or Path(launcher[0]).name != "srun":  # the points run here: the backend must too
        from .backends import backend_class

        backend_class(base["backend"]["name"])
    root = sweep_dir(s, base["name"])
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--output: cannot create {root} ({exc.strerror}); choose a writable --output") from None
    points = plan(s, base, root)
    disk = disk_estimate(s, points)
    (note or (lambda line: None))(disk["line"])
    run_points(s, launcher, points, say or (lambda *a: None))
    rows = [row(p, root) for p in points]
    add_speedup(rows, s.kind)
    model_notes = add_predictions(rows, points, s, launcher, say)
    res = {"kind": s.kind, "case": str(s.case), "case_name": base["name"], "growth": growth(s, base, rows),
           "command": shlex.join(["stencil", "sweep", s.kind, *s.argv]), "launcher": shlex.join(launcher),
           "repeats": s.repeats, "date": time.strftime("%Y-%m-%d %H:%M"), "machine": environment(with_gpus=False),
           "disk_estimate": {k: v for k, v in disk.items() if k != "line"},
           "points": [{"label": p.label, "ranks": p.ranks, "threads": p.threads, "case": str(p.case_file),
                       "runs": p.runs} for p in points],
           "rows": rows}
    res["notes"] = notes(rows, s, launcher)
    res["model"] = model_notes
    write_sweep(root, res)
    res["dir"] = str(root)
    return res


def add_predictions(rows: list[dict], points: list[Point], s: Settings, launcher: list[str], say=None) -> list[str]:
    """The scaling model's prediction beside every measured point (solver.model.sweeps), its inputs measured
    under the sweep's own launcher where the cache lacks them; notes for sweep.md. Never fails the sweep."""
    if not s.model or s.kind == "threads" or not launcher:
        return ["model: not run (" + ("--no-model" if not s.model else "thread sweeps are outside the model") + ")"]
    from .core.errors import StencilError
    from .model.sweeps import predict_points, row_fields

    records = [median_run(p)[1] if median_run(p) else None for p in points]
    try:
        preds, notes = predict_points(records, launcher, s.network,
                                      say=(lambda line: print(line, flush=True)) if say else None)
    except (StencilError, OSError, ValueError, KeyError) as exc:
        return [f"model: no predictions: {exc}"]
    for r, pred in zip(rows, preds):
        r.update(row_fields(pred, r.get("seconds_per_step")))
    errors = [r["model_error"] for r in rows if r.get("model_error") is not None]
    if errors:
        from .model.sweeps import summary

        notes.insert(0, summary(errors))
    return notes


def exit_code(res: dict) -> int:
    """0 when every repeat of every point succeeded, else the first failure's exit code (>= 1)."""
    for p in res["points"]:
        for r in p["runs"]:
            if r["exit_code"] != 0:
                return r["exit_code"] if 0 < r["exit_code"] < 256 else 1
    return 0


def say_point(p: Point, k: int, run: dict) -> None:
    rep = f" rep {k + 1}/{len(p.dirs)}" if len(p.dirs) > 1 else ""
    what = f"{p.ranks} rank(s) x {p.threads} thread(s)"
    if run["exit_code"] == 0:
        rate = f", {run['mlups']:.0f} MLUP/s" if run.get("mlups") else ""
        print(f"{p.label}{rep}: {what}: {run['seconds_per_step'] * 1e3:.4g} ms/step{rate}, {run['wall_s']:.1f} s",
              flush=True)
    else:
        print(f"{p.label}{rep}: {what}: FAILED (exit {run['exit_code']}): {run['error']}", flush=True)


def print_sweep(res: dict) -> None:
    """The terminal's view: the main columns as a table that fits 100 columns, then the notes; every column
    (global and local sizes, compute/comm/wait apart, imbalance, GB/s) is in sweep.md and sweep.csv."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    con = Console(width=max(Console().width, 100))
    count = "threads" if res["kind"] == "threads" else "ranks"
    t = Table(title=f"{res['kind']} sweep: {res['case_name']}", box=box.SIMPLE_HEAD)
    for col in (count, "ms/step", "MLUP/s", "speedup", "efficiency", "comm+wait", "of copy", "verified", "status"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in res["rows"]:
        ok = r["status"] == "ok"
        cw = r.get("comm_wait_fraction") if ok else None
        t.add_row(str(count_of(r, res["kind"])), _f(r.get("seconds_per_step") and r["seconds_per_step"] * 1e3, ".4g"),
                  _f(r.get("mlups"), ".0f"), _f(r.get("speedup"), ".2f"), _f(r.get("efficiency"), ".0%"),
                  _f(cw, ".0%"), _f(r.get("fraction_of_copy"), ".0%"),
                  verified(r.get("verified")), "ok" if ok else "failed")  # why: in the notes
    con.print(t)
    con.print(f"{res['growth']}.", markup=False, highlight=False)
    for n in res["notes"] or ["nothing to report"]:
        con.print(f"- {n}", markup=False, highlight=False)
    for n in (res.get("model") or [])[:1]:
        con.print(f"- {n} (the model's inputs and the error per point: sweep.md)", markup=False, highlight=False)
    con.print(f"results in {res['dir']}/sweep.md, sweep.csv; plots: stencil report {res['dir']}", markup=False)
