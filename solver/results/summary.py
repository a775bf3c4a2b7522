"""What the CLI prints: the run summary, the resolved plan, the environment, the backend list."""

from __future__ import annotations

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core import physics, ringing
from ..core.operator import streams
from ..core.boundary import periodic_axes
from ..core.decomp import all_blocks, choose_dims
from .answers import rows as answer_rows
from .energy import energy_row
from .physics import physics_rows
from .record import UNKNOWN, iteration_word, when
from .solver import summary_rows as solver_rows


def _console() -> Console:
    return Console(soft_wrap=False, width=max(Console().width, 100))


def print_summary(rec: dict) -> None:
    con = _console()
    inp, tp, t, res = rec["input"], rec["throughput"], rec["timings"], rec["resources"]
    table = Table(title=f"{inp['name']}: {inp['equation']} nx x ny = {inp['nx']} x {inp['ny']} "
                        f"{inp['dtype']}, "
                        f"{rec['stencil']['backend']}, {res['ranks']} rank(s) x {res['threads_per_rank']} thread(s)")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    unit = "steps" if inp["equation"] == "heat" else iteration_word(rec.get("solver")) + "s"  # a steady solve's
    table.add_row(unit, f"{rec['run']['steps']}" + (" (converged)" if rec["run"]["converged"] else ""))
    for phase in ("setup", "compile", "warmup", "solve", "output", "verify", "total"):
        if phase in rec["times"]:
            table.add_row(f"time {phase}", f"{rec['times'][phase]:.3f} s")
    for name, value in solver_rows(rec["solver"]) if rec.get("solver") else []:
        table.add_row(name, value)
    if tp and "bytes_per_cycle" in tp:
        rate = f"{1 / tp['seconds_per_step']:.3g} {tp['per']}s/s" + (f", {tp['cycles_per_second']:.3g} cycles/s"
                                                                     if "cycles_per_second" in tp else "")
        table.add_row(f"time per {tp['per']}", f"{tp['seconds_per_step'] * 1e3:.3f} ms ({rate})")
        flops = f", {tp['gflops']:.3g} GFLOP/s" if "gflops" in tp else ""
        work = f", {tp['flops_per_cycle'] / 1e6:.3g} MFLOP" if "flops_per_cycle" in tp else ""
        table.add_row("throughput", f"{tp['effective_gbs']:.3g} GB/s{flops} ({tp['bytes_per_cycle'] / 1e6:.3g} MB{work} "
                                    "per cycle, counted)")
    elif tp:
        table.add_row("time per step", f"{tp['seconds_per_step'] * 1e3:.3f} ms")
        table.add_row("throughput", f"{tp['mlups']:.1f} MLUP/s, {tp['effective_gbs']:.2f} GB/s, {tp['gflops']:.2f} GFLOP/s "
                                    "(after warm-up, output excluded, as in the progress lines; slowest rank)")
        if "copy_gbs" in tp:
            table.add_row("copy bandwidth", f"{tp['copy_gbs']:.2f} GB/s, {when(tp.get('copy_source', 'cached'))} "
                                            f"({tp['fraction_of_copy']:.0%} reached)")
        if "peak_mul_add_gflops" in tp:
            table.add_row("compute peak", f"{tp['peak_mul_add_gflops']:.1f} GFLOP/s multiply + add, {when(tp['peak_mul_add_source'])} "
                                          f"({tp['fraction_of_peak']:.1%} reached)")
    gpu = res["devices"][0] if res.get("devices") and isinstance(res["devices"][0], dict) else {}
    if "h2d_s" in gpu:  # GPU runs: transfers (rank 0) and kernel time from CUDA events (max over ranks)
        table.add_row("GPU h2d / kernel / d2h", f"{gpu['h2d_s']:.3f} / {t['compute']['max']:.3f} / {gpu['d2h_s']:.3f} s "
                                                f"({gpu['gpu_name']}, {', '.join(k['kernel'] for k in gpu['kernels'].values())})")
    if res["ranks"] > 1:
        table.add_row("compute / comm / wait (max)",
                      f"{t['compute']['max']:.3f} / {t['comm']['max']:.3f} / {t['wait']['max']:.3f} s")
        table.add_row("load imbalance", f"{t['load_imbalance']:.3f}")
    for name, value in answer_rows(rec.get("answers")):
        table.add_row(name, value)
    if energy_row(rec.get("energy")):
        table.add_row(*energy_row(rec.get("energy")))
    if (rec.get("physics") or {}).get("note"):
        table.add_row("note", rec["physics"]["note"])
    places = res.get("placement", [])
    table.add_row("placement", "; ".join(_place(p) for p in places[:4]) +
                  (f"; ... ({len(places)} ranks: record.md)" if len(places) > 4 else ""))
    c = rec["correctness"]
    if c.get("passed") is not None:
        table.add_row("verification", f"{'PASS' if c['relative_error'] <= c['tolerance'] else 'FAIL'} rel. error "
                                      f"{c['relative_error']:.2e} (tol {c['tolerance']:.1e}) against the {c['reference']}")
        if "conservation" in c:
            from .record import conservation_text

            table.add_row("conservation", conservation_text(c["conservation"]))
        if "steady_state" in c:
            from .record import steady_text

            table.add_row("steady state", steady_text(c["steady_state"]))
    table.add_row("bottleneck", rec["bottleneck"])
    con.print(table)
    con.print(f"results in {rec['case']['output']['dir']}")


def _place(p: dict) -> str:
    """'rank 0: host, cores 0-3, NUMA 0, GPU 0 (PCI 0000:1b:00.0)'."""
    gpu = f", GPU {p['gpu_index']} (PCI {p.get('pci_bus_id', UNKNOWN)})" if "gpu_index" in p else ""
    return f"rank {p['rank']}: {p['host']}, cores {p['affinity']}, NUMA {p.get('numa') or UNKNOWN}{gpu}"


def plan(case, ranks: int) -> dict:
    """The resolved numbers `stencil validate` prints."""
    dims = choose_dims(ranks, case.shape, case.parallel.decomposition, case.parallel.dims)
    blocks = all_blocks(case.shape, dims, periodic_axes(case))
    big = max(blocks, key=lambda b: b.ny * b.nx)
    itemsize = np.dtype(case.numerics.dtype).itemsize
    w = physics.weights(case)
    halo = max(b.halo_cells for b in blocks)
    out = {"dx": physics.spacing(case)[0], "dy": physics.spacing(case)[1], "dt": physics.time_step(case),
           "wc": w.wc, "wx": w.wx, "wy": w.wy, "dims": dims, "largest_block": (big.ny, big.nx),
           "memory_per_process_bytes": streams(case) * (big.ny + 2) * (big.nx + 2) * itemsize,
           "bytes_per_step": streams(case) * itemsize * case.grid.nx * case.grid.ny, "streams": streams(case),
           "halo_bytes_per_step_per_rank": 2 * halo * itemsize, "vtk": case.vtk_enabled}
    out.update(disk_bytes(case))
    if case.physics.equation == "heat":
        out["stable_dt"] = physics.stable_dt(case)
        out["dt_over_limit"] = out["dt"] / out["stable_dt"]
    return out


def iteration_plan(case) -> str:
    """What `stencil validate` says of a laplace solve: the method, its limit, and what run.tolerance means."""
    tol = case.run.tolerance
    if case.nonlinear:
        n, m = case.newton, case.multigrid
        stop = (f"stops when max|R(u)| / max|R(u_0)| < {tol:g}" if tol is not None else
                "tolerance null: until the residual reaches its rounding floor (or the line search finds no step)")
        return (f"Newton's method ({'exact Jacobian' if n.jacobian == 'newton' else 'Picard'}), each step GMRES "
                f"preconditioned by one multigrid {m.cycle}({m.pre},{m.post})-cycle, forcing "
                f"{'Eisenstat-Walker' if n.forcing is None else n.forcing}, line search {n.line_search}; at most "
                f"{case.run.steps} Newton iterations; {stop} (docs/nonlinear.md)")
    if case.physics.solver == "multigrid":
        m = case.multigrid
        head = (f"multigrid {m.cycle}({m.pre},{m.post})-cycles, {m.smoother} smoothing, coarsest level at most "
                f"{m.coarsest} points solved directly; at most {case.run.steps} cycles")
    else:
        head = f"Jacobi, at most {case.run.steps} iterations"
    if tol is None:
        stop = ("; tolerance null: " + ("until the residual reaches its rounding floor (or stalls above it, or "
                                         "diverges: the record says which)"
                                         if case.physics.solver == "multigrid" else "every iteration is run"))
    else:
        stop = (f"; stops when the relative residual max|g - A u| / max|g - A u_0| < {tol:g} (the initial field's "
                "residual is the unit; for Jacobi the residual is a sweep's update, so this is the update over the "
                "first one)")
    return head + stop


def smoothing_note(case) -> str | None:
    """Multigrid: the note the run prints before it starts when the smoothing sweeps smooth slowly."""
    if not case.uses_multigrid:
        return None
    from ..multigrid.cycle import operator_of, settings_of
    from ..multigrid.levels import hierarchy, smoothing_note as note

    op = operator_of(case)
    return note(hierarchy(case, settings_of(case, *op)))


def time_plan(case) -> str:
    """What `stencil validate` says of a heat run's time (solver.core.events): dt, steps and t_end together, the
    events steps land on; adaptive steps: the method, tolerance and limits."""
    from ..core.events import plan_of

    plan = plan_of(case)
    kinds = plan.describe()["events"]
    words = {"output": "output times", "checkpoint": "checkpoint times", "probe": "probe times",
             "window": "window edges", "table": "table breakpoints"}
    events = ", ".join(f"{n} {words[k]}" for k, n in kinds.items() if k != "end")
    if plan.adaptive:
        run = case.run
        return (f"adaptive steps to t_end = {plan.end:.6g}: TR-BDF2 (two multigrid solves a step), each step's "
                f"estimated error below {run.time_tolerance:g} x max|u|, first dt {plan.dt:.6g}, dt within "
                f"[{run.dt_min or plan.end * 1e-12:.3g}, {run.dt_max or plan.end:.3g}]"
                + (f"; steps land on {events}" if events else "")
                + ("; stops earlier once steady" if run.until == "steady" else ""))
    short = plan.shortened(plan.steps)
    text = f"dt = {plan.dt:.6g} x {plan.steps} steps to t_end = {plan.end:.6g}"
    if short:
        text += f" ({len(short)} of them shortened to land on output times or t_end)"
    if events:
        text += f"; events: {events}"
    return text + ("; stops earlier once steady" if case.run.until == "steady" else "")


def snapshot_count(case) -> int:
    """Snapshots fields.h5 will hold: the initial field, every output.every steps, at output times, and the last (at
    most: laplace may converge earlier, adaptive steps count only their output times)."""
    from ..core.events import plan_of

    plan = plan_of(case)
    steps, every = plan.steps, case.output.every
    marks = set(plan.marks("output")) if plan.heat and not plan.adaptive else set()
    if plan.adaptive:
        return 2 + sum("output" in e.kinds for e in plan.events if 0.0 < e.t < plan.end)
    if steps == 0:
        return 1
    at = {0, steps} | marks | (set(range(every, steps + 1, every)) if every else set())
    return len(at)


def disk_bytes(case) -> dict:
    """The most bytes the output can take: fields.h5 (every snapshot) and VTK (the same values again), both
    before their compression (lossless: a smooth field keeps about two thirds of its bytes, a uniform region
    almost none, noise nearly all), and one checkpoint.h5 (when checkpoints are on; not compressed)."""
    field = case.grid.nx * case.grid.ny * np.dtype(case.numerics.dtype).itemsize
    n = snapshot_count(case)
    out = {"snapshots": n, "hdf5_bytes": n * field if case.output.fields else 0,
           "vtk_bytes": n * field if case.vtk_enabled else 0,
           "checkpoint_bytes": field if case.output.checkpoint_every or case.output.checkpoint_interval else 0}
    out["disk_bytes"] = out["hdf5_bytes"] + out["vtk_bytes"] + out["checkpoint_bytes"]
    return out


def disk_text(p: dict) -> str:
    """'at most N MB before compression: ...' from disk_bytes (validate and the sweeps print it)."""
    parts = [f"{p['hdf5_bytes'] / 1e6:.0f} MB fields.h5 ({p['snapshots']} snapshots)"] if p["hdf5_bytes"] else []
    if p["vtk_bytes"]:
        parts.append(f"{p['vtk_bytes'] / 1e6:.0f} MB VTK")
    if p["checkpoint_bytes"]:
        parts.append(f"{p['checkpoint_bytes'] / 1e6:.0f} MB checkpoint.h5")
    squeezed = " before compression (fields.h5 and VTK are compressed: smooth fields need less)" \
        if p["hdf5_bytes"] + p["vtk_bytes"] else ""
    return f"at most {p['disk_bytes'] / 1e6:.0f} MB{squeezed}: " + (" + ".join(parts) or "no fields (output.fields: "
                                                                        "false), the record and timings only")


def print_plan(case, ranks: int) -> None:
    from ..backends import registry

    con = _console()
    p = plan(case, ranks)
    t = Table(title=f"{case.name}: valid")
    t.add_column("field")
    t.add_column("value")
    for key, val in case.model_dump(mode="json").items():
        t.add_row(key, escape(str(val)))
    t.add_row("dx, dy", f"{p['dx']:.6g}, {p['dy']:.6g}")
    if "stable_dt" in p and case.implicit:
        tol = physics.step_tolerance(case)
        how = ("Newton's method (GMRES + multigrid) to a relative residual of" if case.nonlinear else
               "one multigrid solve to a relative residual of")
        t.add_row("dt", f"{p['dt']:.6g} ({p['dt_over_limit']:.4g} x the explicit stability limit {p['stable_dt']:.6g}); "
                        f"{case.physics.scheme}: each step {how} {tol:g}, at most {case.multigrid.max_cycles} "
                        f"{'iterations' if case.nonlinear else 'cycles'}")
    elif "stable_dt" in p:
        t.add_row("dt", f"{p['dt']:.6g} ({p['dt_over_limit']:.0%} of the stable limit {p['stable_dt']:.6g}; "
                        f"margin: the smallest centre weight 1 - dt / limit = {1 - p['dt_over_limit']:.4g} >= 0)")
    else:
        t.add_row("iterations", iteration_plan(case))
    if case.physics.equation == "heat":
        t.add_row("time", time_plan(case))
    if case.alpha_field:
        t.add_row("weights wc, wx, wy", f"{p['wc']:.6g}, {p['wx']:.6g}, {p['wy']:.6g} (of the largest alpha; the "
                                        "kernels read face fields)")
    else:
        t.add_row("weights wc, wx, wy", f"{p['wc']:.6g}, {p['wx']:.6g}, {p['wy']:.6g}")
    for name, text in physics_rows(case):
        t.add_row(name, text)
    t.add_row("ranks", f"{ranks} as py x px = {p['dims'][0]} x {p['dims'][1]} ({case.parallel.decomposition}), "
                       f"largest block nx x ny = {p['largest_block'][1]} x {p['largest_block'][0]}")
    t.add_row("memory per process", f"{p['memory_per_process_bytes'] / 2**20:.1f} MiB ({p['streams']} padded arrays: "
                                    "u, u_new" + (", the source, face and capacity fields)" if p["streams"] > 2
                                                  else ")"))
    t.add_row("bytes per step", f"{p['bytes_per_step'] / 1e6:.1f} MB through memory ({p['streams']} x itemsize per "
                                f"update), "
                                f"halo {p['halo_bytes_per_step_per_rank'] / 1e3:.1f} kB per rank")
    t.add_row("output", f"{case.output.dir} (VTK {'on' if p['vtk'] else 'off'})")
    t.add_row("disk space", disk_text(p))
    con.print(t)
    for note in (smoothing_note(case), ringing.warning(case), *case.notes()):
        if note:
            con.print(f"[yellow]{escape(note)}[/yellow]")
    reason = registry()[case.backend.name].unavailable()
    if reason:
        con.print(f"[yellow]note: backend {case.backend.name} is not available on this machine: {escape(reason)}[/yellow]")


def print_info() -> None:
    from .environment import environment

    con = _console()
    env = environment(_mpi_library())
    t = Table(title="stencil environment")
    t.add_column("item")
    t.add_column("value")
    for k in ("stencil", "git_commit", "host", "os", "cpu", "cores", "cores_usable", "memory_gb",
              "memory_available_gb", "python", "mpi_library"):
        t.add_row(k, str(env[k]))
    t.add_row("gpus", ", ".join(f"{g['index']}: {g['name']} ({g['memory_gb']} GB)" for g in env["gpus"]) or "none")
    for k, v in env["libraries"].items():
        t.add_row(k, v)
    con.print(t)


def _mpi_library() -> str | None:
    """The MPI library's own version line, read without initialising MPI (MPI_Get_library_version
    may be called before MPI_Init)."""
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        return f"{MPI.Get_library_version().splitlines()[0].strip()} (mpi4py {mpi4py.__version__})"
    except Exception:  # noqa: BLE001 - no mpi4py or no MPI library
        return None


def print_backends() -> None:
    from ..backends import registry

    con = _console()
    t = Table(title="backends")
    for col in ("name", "available", "what / why not"):
        t.add_column(col)
    for name, cls in registry().items():
        reason = cls.unavailable()
        t.add_row(name, "yes" if reason is None else "no", escape(cls.summary if reason is None else reason))
    con.print(t)
