"""The experiment record: environment, input, correctness, resources, times, throughput, bottleneck.

Written by rank 0 as record.json (for programs) and record.md (for people), with timings.csv
(one row per rank) and, with output.trace, trace.json (Chrome trace events; open in Perfetto).
"""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import numpy as np

from ..core import physics
from ..core.operator import streams
from ..core.machine import last_level_cache_bytes, parse_cpulist
from ..core.medium import medium
from ..core.timing import RANK_COLUMNS, SECTIONS
from ..io.safeio import write_text
from .answers import lines as answer_lines
from .energy import energy_lines
from .environment import environment
from .physics import physics_record
from .solver import markdown_lines, mg_throughput, residual_energy, solver_record, update_flops

CSV_FIELDS = [name for name, _ in RANK_COLUMNS]
UNKNOWN = "not recorded"  # what the tables say of a fact the run could not find out (never a bare "?")


def section_stats(rows: list[dict]) -> dict:
    stats = {}
    for name in (*SECTIONS, "loop"):
        v = np.array([r[name] for r in rows], dtype=float)
        stats[name] = {"min": float(v.min()), "mean": float(v.mean()), "max": float(v.max())}
    loops = np.array([max(r["loop"] - r["io"], 1e-300) for r in rows])  # step time, output excluded
    comp = np.array([r["compute"] for r in rows])
    stats["load_imbalance"] = float(comp.max() / comp.mean()) if comp.mean() > 0 else 1.0
    for name in ("comm", "wait"):
        frac = np.array([r[name] for r in rows]) / loops
        stats[f"{name}_fraction"] = {"max": float(frac.max()), "mean": float(frac.mean())}
    both = np.minimum((np.array([r["comm"] for r in rows]) + np.array([r["wait"] for r in rows])) / loops, 1.0)
    worst = int(both.argmax())  # comm + wait of one rank, then the largest over ranks (never two ranks' parts)
    stats["comm_wait_fraction"] = {"max": float(both[worst]), "mean": float(both.mean()), "rank": rows[worst]["rank"]}
    steps = max(int(rows[0].get("steps", 0)), 1)  # every rank takes the same timed steps
    stats["per_step_ms"] = {name: stats[name]["max"] * 1e3 / steps for name in (*SECTIONS, "loop")}  # slowest rank
    stats["mlups_per_rank"] = [r.get("updates", r["points"] * r["steps"]) / t / 1e6 for r, t in zip(rows, loops)]
    return stats


def throughput(case, rows: list[dict], ceiling: dict | None) -> dict | None:
    steps = rows[0]["steps"]
    solve = max(r["loop"] - r["io"] for r in rows)  # output is timed apart (times.output)
    if steps == 0 or solve <= 0:
        return None
    updates = case.grid.nx * case.grid.ny * steps / solve
    per_update = streams(case) * np.dtype(case.numerics.dtype).itemsize  # a source and face fields count too
    gbs, flops = updates * per_update / 1e9, update_flops(case)  # the form that ran (solver.results.solver)
    out = {"timed_steps": steps, "seconds_per_step": solve / steps, "mlups": updates / 1e6, "effective_gbs": gbs,
           "gflops": updates * flops / 1e9, "bytes_per_update": per_update, "flops_per_update": flops}
    if ceiling:
        out["copy_gbs"] = ceiling["gbs"]
        out["fraction_of_copy"] = gbs / ceiling["gbs"]
        out["copy_cached"] = ceiling.get("cached", False)
        out["copy_source"] = ceiling.get("source", "cached" if out["copy_cached"] else "measured now")
    for kind, entry in (ceiling or {}).get("compute", {}).items():  # solver.bench.peak: fma, mul_add
        out[f"peak_{kind}_gflops"] = entry["gflops"]
        out[f"peak_{kind}_source"] = entry.get("source", "measured now")
    if "peak_mul_add_gflops" in out:
        out["fraction_of_peak"] = out["gflops"] / out["peak_mul_add_gflops"]
    return out


CACHE_REUSE = 1.1  # above this fraction of the copy rate data came from cache, not from memory
MEMORY_BOUND = 0.7  # from here to CACHE_REUSE: the copy rate is the limit
COMM_BOUND = 0.25  # comm + wait of one rank, as a fraction of its loop
IMBALANCED = 1.15  # max / mean compute
OVERHEAD_STEP = 1e-4  # seconds per step below which launch and Python costs dominate
OVERHEAD_OTHER = 0.3  # or: `other` above this fraction of a rank's loop
OVERHEAD_DATA = 5e-5  # or: below the copy rate while a step's data would move in less than this (seconds) at that
#                       rate: about the fixed cost of a CPU step (a Python call, a thread-pool wake-up), so the time
#                       is that cost, not the kernel's (a tiny grid)
COMPUTE_BOUND = 0.5  # GFLOP/s above this fraction of the measured multiply + add peak: arithmetic is the limit
COARSE_BOUND = 0.5  # multigrid: levels below the finest above this share of the cycle
GPU_BUSY = 0.7  # GPU kernels (events) below this fraction of the loop: the GPU waits between launches


def percent(v: float) -> str:
    """A fraction as a percentage: whole percents from 10% on, two significant digits below (a small part is never
    printed as a bare 0%)."""
    return f"{v:.0%}" if v >= 0.1 or v == 0 else f"{100 * v:.2g}%"


def _no_cycles(sol: dict | None) -> bool:
    """A multigrid run whose solves needed no cycle at all (the initial fields already solved them)."""
    return bool(sol) and sol["method"] == "multigrid" and sol.get("cycles", sol.get("iterations")) == 0


def bottleneck(tp: dict | None, stats: dict, rows: list[dict], dtype: str = "float64", on_gpu: bool = False) -> str:
    """One sentence naming the limit the timings show, by the first regime that applies (each rule is
    tested in tests/test_bottleneck.py with constructed rank rows). Fractions are of a rank's loop
    (output excluded), so none exceeds 100%."""
    if tp is None:
        return "no timed steps: raise run.steps above run.warmup to measure"
    for rule in (_oversubscribed, _communication, _imbalance, _launch_gaps, _coarse_levels, _compute, _gpu_launch,
                 _fewer_passes, _cache_reuse, _overhead):
        line = rule(tp, stats, rows, dtype, on_gpu)
        if line:
            return line
    frac = tp.get("fraction_of_copy")
    if frac is None:
        return "unknown: no copy bandwidth measured to compare with"
    if frac >= MEMORY_BOUND:
        workers = "ranks and threads" if len(rows) > 1 else "threads"
        return (f"memory bandwidth: {percent(frac)} of the copy bandwidth measured with the same {workers} "
                f"({tp['copy_gbs']:.1f} GB/s); more workers help only as far as that copy rate grows with them")
    return (f"kernel efficiency: {percent(frac)} of the copy bandwidth; the kernel leaves bandwidth unused "
            "(more threads, SIMD or a better kernel would help)")


def _oversubscribed(tp, stats, rows, dtype, on_gpu) -> str | None:
    what = oversubscription(rows, on_gpu)
    return what and (f"oversubscription: {what}, so ranks wait for a core as well as for messages; "
                     "timings show the machine, not the code - use at most one thread per core")


def _communication(tp, stats, rows, dtype, on_gpu) -> str | None:
    cw = stats.get("comm_wait_fraction")
    if len(rows) < 2 or not cw or cw["max"] <= COMM_BOUND:
        return None
    r = next(r for r in rows if r["rank"] == cw["rank"])
    loop = max(r["loop"] - r["io"], 1e-300)
    return (f"communication: comm + wait take up to {cw['max']:.0%} of the loop (rank {r['rank']}: comm "
            f"{min(r['comm'] / loop, 1):.0%}, wait {min(r['wait'] / loop, 1):.0%}); larger local blocks, overlap, "
            "or fewer ranks help")


def _imbalance(tp, stats, rows, dtype, on_gpu) -> str | None:
    if len(rows) < 2 or stats["load_imbalance"] <= IMBALANCED:
        return None
    return (f"load imbalance: the slowest rank computes {stats['load_imbalance']:.2f}x the mean; "
            "parallel.balance: dynamic or an even decomposition helps")


def _launch_gaps(tp, stats, rows, dtype, on_gpu) -> str | None:
    if not on_gpu:
        return None
    busy = min(min(r["compute"] / max(r["loop"] - r["io"], 1e-300) for r in rows), 1.0)
    if busy >= GPU_BUSY:
        return None
    return (f"GPU launch gaps: the kernels (CUDA events) run {busy:.0%} of the loop on some rank; the GPU waits "
            "for the host between launches (Python, synchronisation, copies): larger grids or more steps per "
            "graph help")


def _coarse_levels(tp, stats, rows, dtype, on_gpu) -> str | None:
    """Multigrid: the levels below the finest take most of the cycle (small grids: latency, launches)."""
    shares = tp.get("level_shares")
    if not shares or sum(shares[1:]) <= COARSE_BOUND:
        return None
    return (f"multigrid coarse levels: levels 1-{len(shares) - 1} take {sum(shares[1:]):.0%} of the cycle, the "
            f"finest {shares[0]:.0%}; their grids are small, so per-sweep costs (messages, launches, Python) "
            "dominate: a larger multigrid.coarsest" + (" or fewer ranks help" if len(rows) > 1 else " helps"))


def _compute(tp, stats, rows, dtype, on_gpu) -> str | None:
    frac = tp.get("fraction_of_peak")
    if frac is None or frac < COMPUTE_BOUND:
        return None
    return (f"arithmetic: {frac:.0%} of the measured multiply + add peak ({tp['peak_mul_add_gflops']:.1f} GFLOP/s, "
            f"{tp['flops_per_update']} flops per update); fewer flops per update, or fused multiply-adds "
            f"({tp['peak_fma_gflops']:.1f} GFLOP/s measured, at the price of bitwise equality with numpy) would help")


def _gpu_launch(tp, stats, rows, dtype, on_gpu) -> str | None:
    """A GPU kernel that computes several steps per pass over memory: what its launch asks of the GPU
    (the backend's launch facts), since the copy rate is then not the limit."""
    facts, k = gpu_launch(rows), time_tile(rows)
    frac = tp.get("fraction_of_copy")
    if not on_gpu or not facts or k <= 1 or frac is None:
        return None
    fields = 2 * facts["field_bytes"]
    if facts.get("on_chip"):
        return (f"on chip: the field ({facts['field_bytes'] / 2**20:.0f} MiB) stays in the registers and shared memory of "
                f"{facts['blocks']} blocks ({facts['threads']} threads, {facts['tile_rows']} rows each; {facts['sms']} "
                f"multiprocessors) for up to {k} steps per launch, so memory is touched once per launch "
                f"({frac:.0%} of the copy-bound rate): the limit is on chip, each step's exchange of tile edges "
                "between blocks through L2 and the arithmetic (Nsight Compute names the unit)")
    if "warps" not in facts or frac / k >= MEMORY_BOUND:
        return None
    l2 = facts.get("l2_bytes") or 0
    cache = (f"both fields ({fields / 2**20:.0f} MiB) fit in the {l2 / 2**20:.0f} MiB L2" if l2 and fields <= l2 else
             f"the fields ({fields / 2**20:.0f} MiB) are {fields / l2:.1f}x the {l2 / 2**20:.0f} MiB L2" if l2 else "")
    regs = f" at {facts['registers']} registers a thread" if facts.get("registers") else ""
    return (f"latency at low occupancy: {facts['warps']} warps launched for {facts['slots']} warp slots "
            f"({facts['warps_per_sm']} per multiprocessor{regs}; {facts['waves']:.2f} waves), each one streaming "
            f"{facts['segment_rows']} rows; a pass of {k} steps moves {frac / k:.0%} of the copy bandwidth "
            f"({frac:.0%} of the copy-bound rate), so DRAM is not the limit" + (f"; {cache}" if cache else ""))


def gpu_launch(rows: list[dict]) -> dict | None:
    """Rank 0's launch facts for its kernel choice (CupyBackend.launch_facts), or None."""
    kernels = (rows[0].get("device") or {}).get("kernels") or {}
    return next((v["launch"] for v in kernels.values() if isinstance(v, dict) and v.get("launch")), None)


def _fewer_passes(tp, stats, rows, dtype, on_gpu) -> str | None:
    """Multigrid with sweeps two a pass: the copy rate bounds the passes made, not a plain cycle's."""
    made, frac = tp.get("fraction_of_copy_made"), tp.get("fraction_of_copy")
    if made is None or frac is None:
        return None
    how = (f"the passes the cycle makes (sweeps two a pass on {tp['tiled_levels']} level(s), the residual, the "
           f"prolongation and the stop test inside them) move {made:.0%} of the copy bandwidth "
           f"({tp['copy_gbs']:.1f} GB/s); the cycle takes {1 / frac if frac else float('inf'):.2f}x the copy-bound "
           "time of a plain cycle's passes")
    if made > CACHE_REUSE:
        return f"data reused from cache: {how}, so memory is not the limit; the GPU's L2 cache holds part of the levels"
    if made >= MEMORY_BOUND:
        return f"memory bandwidth: {how}"
    return f"kernel efficiency: {how}; the tiled kernel leaves bandwidth unused (Nsight Compute names its limit)"


def _cache_reuse(tp, stats, rows, dtype, on_gpu) -> str | None:
    frac = tp.get("fraction_of_copy")
    if frac is None or frac <= CACHE_REUSE:
        return None
    head = f"data reused from cache: {frac:.0%} of the copy bandwidth ({tp['copy_gbs']:.1f} GB/s), so memory is not the limit"
    tile = time_tile(rows)
    if tile > 1:
        return f"{head}; time tiling: {tile} steps per pass over memory reuse each row from cache"
    ws, llc = working_set(rows, dtype), None if on_gpu else node_cache(rows)
    if on_gpu:
        return f"{head}; the GPU's L2 cache holds part of the working set ({ws / 2**20:.0f} MiB)"
    if llc and ws <= llc:
        return (f"{head}; the working set ({ws / 2**20:.1f} MiB: two arrays) fits in the last-level cache "
                f"({llc / 2**20:.0f} MiB); a larger grid measures memory")
    size = f" ({ws / 2**20:.0f} MiB against a {llc / 2**20:.0f} MiB last-level cache)" if llc else ""
    return (f"{head}; the working set{size} does not fit in the last-level cache, so the copy ceiling may be "
            "low: measure it again with `stencil bench bandwidth --refresh`")


def _overhead(tp, stats, rows, dtype, on_gpu) -> str | None:
    if on_gpu:  # host sections overlap the GPU's kernels there: the GPU's overhead rule is _launch_gaps
        return None
    other = max(r["other"] / max(r["loop"] - r["io"], 1e-300) for r in rows)
    frac, step = tp.get("fraction_of_copy"), tp["seconds_per_step"]
    moved = frac * step if frac is not None else None  # the step's bytes at the copy rate, in seconds
    tiny = moved is not None and frac < MEMORY_BOUND and moved < OVERHEAD_DATA
    if step >= OVERHEAD_STEP and other <= OVERHEAD_OTHER and not tiny:
        return None
    data = f" (at the copy rate its data would move in {moved * 1e6:.1f} us)" if moved is not None else ""
    return (f"per-step overhead: {step * 1e3:.3f} ms per step{data}, {min(other, 1):.0%} of the loop outside "
            "compute and communication: fixed costs per step (Python calls, thread wake-ups, launches) dominate, "
            "not the kernel; use a larger grid")


def time_tile(rows: list[dict]) -> int:
    """The largest time tile (steps per pass over memory) any rank's backend used; 1 without tiling."""
    devices = [r.get("device") for r in rows]
    return max([int(d.get("time_tile") or 1) for d in devices if isinstance(d, dict)] or [1])


def working_set(rows: list[dict], dtype: str) -> int:
    """Bytes of the two field arrays on rank 0's host (all its ranks' blocks)."""
    host = rows[0]["host"]
    return 2 * np.dtype(dtype).itemsize * sum(r["points"] for r in rows if r["host"] == host)


def node_cache(rows: list[dict]) -> int | None:
    """The last-level cache serving the cores of rank 0's host's ranks (read from /sys on rank 0)."""
    host = rows[0]["host"]
    cores = set().union(*(parse_cpulist(r["affinity"]) for r in rows if r["host"] == host))
    return last_level_cache_bytes(cores or None)


def oversubscription(rows: list[dict], on_gpu: bool) -> str | None:
    """A description when some host runs more threads (ranks x threads) than the cores its ranks may use
    (the union of their CPU affinities), else None."""
    if on_gpu:
        return None
    hosts: dict[str, tuple[set, int]] = {}
    for r in rows:
        cores, used = hosts.get(r["host"], (set(), 0))
        hosts[r["host"]] = (cores | parse_cpulist(r["affinity"]), used + r["threads"])
    for host, (cores, used) in hosts.items():
        if cores and used > len(cores):
            ranks = sum(r["host"] == host for r in rows)
            return f"{ranks} rank(s) with {used} thread(s) in all on {len(cores)} core(s) of {host}"
    return None


def check_not_reached(outdir: Path, case) -> None:
    """A restart into a run directory whose run already reached case.run.steps (or converged) after its last
    checkpoint would recompute the stretch since then and rewrite its results: an InputError that says so
    (nothing is changed). Read-only; a directory without a readable record.json is not checked."""
    from ..core.errors import InputError
    from ..core.readers import read_json

    try:
        rec = read_json(Path(outdir) / "record.json", None, "")
        reached, converged = int(rec["run"]["steps"]), bool(rec["run"].get("converged"))
        tol = rec["case"]["run"].get("tolerance")
    except (InputError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return
    converged = converged and tol is not None and (case.run.tolerance or 0.0) >= tol  # a lower tolerance goes on
    end = _reached_end(rec, case)
    if end or converged:
        why = f"converged at step {reached}" if converged else f"reached {end}"
        fix = "a later run.t_end" if case.run.t_end is not None else f"--steps above {reached}"
        raise InputError(f"--restart: the run in {outdir} already {why} (its record.json), after its last checkpoint; "
                         f"nothing was changed: use {fix} to extend it, or -o DIR to continue from the checkpoint "
                         "elsewhere")


def _reached_end(rec: dict, case) -> str | None:
    """'step N (run.steps is M)' or 't = T (run.t_end is E)' where the recorded run reached the case's end."""
    from ..core.events import close, plan_of

    plan, reached = plan_of(case), int(rec["run"]["steps"])
    t = rec["run"].get("t")
    if case.run.t_end is not None and t is not None and (float(t) >= plan.end or close(float(t), plan.end)):
        return f"t = {float(t):g} (run.t_end is {plan.end:g})"
    if case.run.t_end is None and reached >= plan.steps:
        return f"step {reached} (run.steps is {plan.steps})"
    return None


def build_record(layout, rows: list[dict], facts: dict, correctness: dict | None, ceiling: dict | None) -> dict:
    """layout: solver.core.layout.Layout; rows: one per rank (run.Run.rank_row); facts: plain data of the
    run (run.Run.facts: phases, mpi_library, on_gpu, halo, halo_schedule, threads_per_rank, balance, run)."""
    case = layout.case
    stats = section_stats(rows)
    sol = solver_record(facts.get("solver"), rows, case)
    tp = (mg_throughput(case, rows, ceiling, sol) if sol and sol["method"] in ("multigrid", "newton")
          else throughput(case, rows, ceiling))
    w = physics.weights(case)
    return {
        "stencil": {"version": environment(with_gpus=False)["stencil"], "backend": case.backend.name,
                    "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "case": case.model_dump(mode="json"),
        "environment": environment(facts["mpi_library"], with_gpus=facts["on_gpu"]),
        "input": {"name": case.name, "nx": case.grid.nx, "ny": case.grid.ny, "dtype": case.numerics.dtype,
                  "equation": case.physics.equation, "initial": case.initial.kind, "steps_requested": layout.plan.steps,
                  "dt": layout.dt, "dx": layout.spacing[0], "dy": layout.spacing[1],
                  "weights": {"wc": w.wc, "wx": w.wx, "wy": w.wy}},
        "resources": {"ranks": layout.size, "dims": list(layout.dims), "decomposition": case.parallel.decomposition,
                      "halo": facts["halo"], "halo_schedule": facts["halo_schedule"],
                      "threads_per_rank": facts["threads_per_rank"], "ranks_per_node": layout.node_size,
                      **tiling(facts.get("tiling"), rows),
                      "devices": [r["device"] for r in rows],
                      "balance": facts["balance"] or
                      {"mode": case.parallel.balance, **({"note": "no neighbours: nothing to balance"}
                                                         if case.parallel.balance == "dynamic" else {})},
                      "placement": [placement(r) for r in rows]},
        "run": facts["run"],
        "solver": sol,
        "energy": energy_bounds(facts.get("energy"), case, sol, layout.spacing),
        "answers": facts.get("answers"),
        "physics": physics_record(case, tiling(facts.get("tiling"), rows), False),
        "correctness": correctness or {"reference": None, "passed": None,
                                       "note": "not verified; use --verify or verify: true"},
        "times": facts["phases"],
        "timings": stats,
        "throughput": tp,
        "bottleneck": (bottleneck(tp, stats, rows, case.numerics.dtype, facts["on_gpu"]) if tp or not _no_cycles(sol)
                       else "no multigrid cycle ran (every solve started at its answer): nothing to time"),
    }


def energy_bounds(energy: dict | None, case, sol: dict | None, spacing) -> dict | None:
    """The energy section with what the solves' residuals can leave in it (solver.results.solver.residual_energy):
    residual_bound and how it was found, and `holds` (implicit steps: with the rounding bound; a steady state: with
    rounding of its terms, 64 eps of their sizes); explicit steps keep `closed` (the rounding bound alone)."""
    med = medium(case)  # the balance's sums over points carry C0 depth (J and W in the material form)
    cell = spacing[0] * spacing[1] * med.c0 * med.depth
    found = residual_energy(case, sol, cell) if energy and energy.get("imbalance") is not None else None
    if found is None:
        return energy
    bound, how = found
    eps = float(np.finfo(case.numerics.dtype).eps)
    rounding = energy.get("bound")
    if rounding is None:  # a steady state: its terms' own rounding
        terms = (abs(energy["sources"]) + sum(abs(v) for v in energy["sides"].values())
                 + abs(energy.get("faces") or 0.0) + sum(abs(v) for v in (energy.get("rims") or {}).values()))
        rounding = 64 * eps * terms
    total = bound + rounding
    return {**energy, "residual_bound": bound, "residual_bound_how": how, "rounding_bound": rounding,
            "total_bound": total, "holds": bool(abs(energy["imbalance"]) <= total)}


def tiling(facts: dict | None, rows: list[dict]) -> dict:
    """time_tile (steps per sweep), halo_depth (ghost layers per message: the time tile under MPI, capped
    to the thinnest block) and the halo messages all ranks sent per step of this run."""
    if not facts:
        return {}
    sent = sum(int(r.get("messages", 0)) for r in rows)
    return {"time_tile": facts["time_tile"], "halo_depth": facts["halo_depth"],
            "messages_per_step": sent / facts["steps"] if facts["steps"] else 0.0}


def placement(row: dict) -> dict:
    """Where a rank ran: host, cores (CPU affinity), NUMA node (/sys), GPU (index, name, PCI bus id) and halo
    transport where there are any."""
    dev = row["device"] if isinstance(row.get("device"), dict) else {}
    out = {"rank": row["rank"], "host": row["host"], "affinity": row["affinity"]}
    out.update({"numa": row["numa"]} if "numa" in row else {})
    out.update({k: dev[k] for k in ("gpu_index", "gpu_name", "pci_bus_id") if k in dev})
    out.update({k: row[k] for k in ("transport", "halo_gpu", "gpu_wait") if k in row})
    return out


def placement_lines(places: list[dict]) -> list[str]:
    """record.md's placement table: rank -> host, cores, NUMA node, GPU."""
    lines = ["| rank | host | cores | NUMA node | GPU |", "|---|---|---|---|---|"]
    for p in places:
        gpu = f"{p['gpu_index']} ({p.get('gpu_name', '')}, PCI {p.get('pci_bus_id', UNKNOWN)})" if "gpu_index" in p else "-"
        lines.append(f"| {p['rank']} | {p['host']} | {p['affinity']} | {p.get('numa') or UNKNOWN} | {gpu} |")
    return lines


def write_record(outdir: Path, trace: bool, record: dict, rows: list[dict]) -> None:
    d = Path(outdir)
    write_text(d / "record.json", json.dumps(record, indent=1, default=str))
    write_text(d / "record.md", markdown(record))
    write_text(d / "timings.csv", timings_csv(rows))
    if trace:
        write_text(d / "trace.json", json.dumps(chrome_trace(rows)))


def csv_text(rows: list[dict], fields: list[str]) -> str:
    """CSV with a header of `fields`; keys of the rows outside `fields` are left out."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _balance_line(b: dict | None) -> str:
    if not b or b.get("mode") != "dynamic" or "rebalances" not in b:
        return ""
    return (f" Dynamic row balance every {b['every']} steps: {b['rebalances']} move(s), "
            f"{b['move_seconds']:.3f} s moving rows (in comm).")


def timings_csv(rows: list[dict]) -> str:
    return csv_text(rows, CSV_FIELDS)


def chrome_trace(rows: list[dict]) -> dict:
    """Chrome trace-event format: one process per rank, one complete event per section interval.
    Host sections are thread 0; GPU events (kernels: track `gpu`, halo copies/NCCL: `halo`) get their own
    threads, so overlap of GPU compute with communication shows on one timeline."""
    events = []
    for r in rows:
        events.append({"name": "process_name", "ph": "M", "pid": r["rank"], "tid": 0,
                       "args": {"name": f"rank {r['rank']} ({r['host']})"}})
        tids = {"host": 0}
        for name, start, end, step, *track in r["events"] or []:
            label = track[0] if track else "host"
            if label not in tids:
                tids[label] = len(tids)
                events.append({"name": "thread_name", "ph": "M", "pid": r["rank"], "tid": tids[label],
                               "args": {"name": label}})
            events.append({"name": name, "cat": name, "ph": "X", "pid": r["rank"], "tid": tids[label],
                           "ts": start * 1e6, "dur": (end - start) * 1e6, "args": {"step": step}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _tiling_line(res: dict) -> str:
    if "time_tile" not in res:
        return ""
    return (f" Time tile {res['time_tile']}, halo depth {res['halo_depth']}, "
            f"{res['messages_per_step']:.2f} halo messages per step (all ranks).")


def when(source: str) -> str:
    """A ceiling's source ('cached 2026-12-01 06:36' or 'measured now', solver.bench.bandwidth) as the run
    table and record.md say it: when it was measured, and whether in this run."""
    if source.startswith("cached"):
        date = source.removeprefix("cached").strip() or "earlier"
        return (f"measured {date} and cached, not in this run; `stencil bench bandwidth --refresh` measures it "
                "again")
    return "measured in this run" if source == "measured now" else source


def verdict(passed) -> str:
    return "PASS" if passed else "FAIL"


def check_lines(c: dict) -> list[str]:
    """record.md's correctness: every check with its figures (the field against its reference, and the
    conservation of the sum where the sides conserve it)."""
    if c.get("passed") is None:
        return [c.get("note", "not verified")]
    field = (f"- field: {verdict(c['relative_error'] <= c['tolerance'])} against the {c['reference']}: max |u - ref| "
             f"{c['max_abs_error']:.3e}, relative error {c['relative_error']:.3e} (tolerance {c['tolerance']:.1e})")
    if "mismatched_points" in c:
        field += f", {c['mismatched_points']} point(s) differ"
    lines = [f"{verdict(c['passed'])} after {c['steps']} steps.", "", field + "."]
    if "conservation" in c:
        lines.append(f"- conservation: {conservation_text(c['conservation'])}.")
    if "steady_state" in c:
        lines.append(f"- steady state: {steady_text(c['steady_state'])}.")
    return lines


def steady_text(k: dict) -> str:
    """'PASS against the exact solution ...: max |u - u*| e (bound b)'."""
    return (f"{verdict(k['passed'])} against the {k['reference']}: max |u - u*| {k['max_abs_error']:.3e}, relative "
            f"{k['relative_error']:.3e} (bound {k['bound']:.3e}: the final residual's, plus rounding)")


def conservation_text(k: dict) -> str:
    """'PASS: sum(u) = S, expected E (initial sum + steps x flux through the Neumann sides), error e (tolerance t)'."""
    return (f"{verdict(k['passed'])}: sum(u) = {k['sum']:.10g}, expected {k['expected_sum']:.10g} (initial sum + "
            f"steps x flux through the Neumann sides), error {k['error']:.3e} (tolerance {k['tolerance']:.1e})")


def iteration_word(sol: dict | None) -> str:
    """What a steady solve's steps are: "cycle" (multigrid), "iteration" (Jacobi, conjugate gradients)."""
    return "cycle" if sol and sol["method"] == "multigrid" and sol.get("krylov") != "cg" else "iteration"


def method_word(sol: dict | None) -> str:
    if not sol:
        return "iteration"
    return {"jacobi": "Jacobi iteration", "newton": "Newton's method"}.get(sol["method"], "conjugate gradients and multigrid" if
                                              sol.get("krylov") == "cg" else "multigrid")


def steps_text(run: dict, requested: int, unit: str = "step") -> str:
    """'reached step 1000 of 1000 requested; this segment computed 488 (from step 512).' (unit: a steady solve's
    "cycle" or "iteration" in place of "step")."""
    segs = run.get("segments") or []
    if requested is None:  # adaptive steps: as many as the tolerance asked for, to t_end
        head = (f"reached step {run['steps']} at t = {run.get('t', 0.0):.6g} of t_end {run.get('t_end', 0.0):.6g} "
                f"(adaptive){', steady' if run.get('steady') else ''}")
    else:
        head = f"reached {unit} {run['steps']} of {requested} requested{', converged' if run.get('converged') else ''}"
    if len(segs) < 2:
        return head + "."
    last = segs[-1]
    return (f"{head}; this segment computed {last['last_step'] - last['first_step']} step(s) (from step "
            f"{last['first_step']}), {len(segs)} segments in all (below).")


def segment_lines(segs: list[dict]) -> list[str]:
    """record.md's table of the run's segments (one launch each: a restart adds one)."""
    if not segs:
        return []
    lines = ["| segment | steps | ranks | hosts | started | ended | seconds |", "|---|---|---|---|---|---|---|"]
    for k, s in enumerate(segs):
        first = UNKNOWN if s.get("first_step") is None else s["first_step"]
        lines.append(f"| {k} | {first}-{s['last_step']} | {s.get('ranks', UNKNOWN)} | "
                     f"{', '.join(s.get('hosts', [])) or UNKNOWN} | {s.get('started') or UNKNOWN} | "
                     f"{s.get('ended') or UNKNOWN} | {UNKNOWN if s.get('seconds') is None else format(s['seconds'], '.1f')} |"
                     + (f" {s['note']}" if s.get("note") else ""))
    return lines + [""]


def markdown(rec: dict) -> str:
    inp, res, tp, c = rec["input"], rec["resources"], rec["throughput"], rec["correctness"]
    env, t = rec["environment"], rec["timings"]
    lines = [f"# Run record: {inp['name']}", "",
             f"**Bottleneck:** {rec['bottleneck']}", "",
             "## Input", "",
             f"{inp['equation']} on nx x ny = {inp['nx']} x {inp['ny']} interior points ({inp['dtype']}), initial "
             f"{inp['initial']}, " + (f"dt = {inp['dt']:.6g}; " if inp["equation"] == "heat" else
                                      f"a steady solve by {method_word(rec.get('solver'))}; ")
             + steps_text(rec["run"], inp["steps_requested"], "step" if inp["equation"] == "heat" else
                          iteration_word(rec.get("solver"))), "",
             *segment_lines(rec["run"].get("segments") or []),
             "## Resources", "",
             f"backend {rec['stencil']['backend']}, {res['ranks']} rank(s) as py x px = {res['dims'][0]} x {res['dims'][1]} "
             f"({res['decomposition']}, halo {res['halo']}), {res['threads_per_rank']} thread(s) per rank."
             + _tiling_line(res)
             + _balance_line(res.get("balance")), "",
             "## Placement", "", *placement_lines(res.get("placement", [])), "", *answer_lines(rec.get("answers")),
             *energy_lines(rec.get("energy")),
             "## Correctness", ""]
    lines += check_lines(c)
    if rec.get("solver"):
        lines += ["", *markdown_lines(rec["solver"])]
    lines += ["", "## Times (s)", "", "| phase | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.4f} |" for k, v in rec["times"].items()]
    lines += ["", "## Per-rank sections (s, over ranks)", "", "| section | min | mean | max |", "|---|---|---|---|"]
    lines += [f"| {k} | {t[k]['min']:.4f} | {t[k]['mean']:.4f} | {t[k]['max']:.4f} |" for k in (*SECTIONS, "loop")]
    lines += ["", f"Load imbalance (max/mean compute): {t['load_imbalance']:.3f}; comm fraction (max) "
              f"{t['comm_fraction']['max']:.1%}; wait fraction (max) {t['wait_fraction']['max']:.1%}; comm + wait "
              f"(largest rank, rank {t['comm_wait_fraction']['rank']}) {t['comm_wait_fraction']['max']:.1%}.", ""]
    if tp:
        lines += ["## Throughput", "", "| metric | value |", "|---|---|"]
        if "bytes_per_cycle" in tp:
            lines += [f"| time per {tp['per']} | {tp['seconds_per_step'] * 1e3:.4f} ms |",
                      f"| effective GB/s ({tp['bytes_per_cycle'] / 1e6:.3g} MB per cycle, counted) | "
                      f"{tp['effective_gbs']:.3g} |"]
            if "flops_per_cycle" in tp:
                lines += [f"| GFLOP/s ({tp['flops_per_cycle'] / 1e6:.3g} MFLOP per cycle, counted) | {tp['gflops']:.3g} |"]
            if "bytes_made_per_cycle" in tp:  # sweeps two a pass: the passes made, beside a plain cycle's
                lines += [f"| GB/s of the passes made ({tp['bytes_made_per_cycle'] / 1e6:.1f} MB per cycle, counted) | "
                          f"{tp['made_gbs']:.2f} |"]
        else:
            lines += [f"| time per step | {tp['seconds_per_step'] * 1e3:.4f} ms |", f"| MLUP/s | {tp['mlups']:.1f} |",
                      f"| effective GB/s ({tp['bytes_per_update']} B/update) | {tp['effective_gbs']:.2f} |",
                      f"| GFLOP/s ({tp['flops_per_update']} flop/update) | {tp['gflops']:.2f} |"]
        if "copy_gbs" in tp:
            lines += [f"| copy bandwidth (same ranks/threads) | {tp['copy_gbs']:.2f} GB/s ({when(tp['copy_source'])}) |",
                      f"| fraction of copy bandwidth | {tp['fraction_of_copy']:.1%} |"]
            if "fraction_of_copy_made" in tp:
                lines += [f"| fraction of copy bandwidth, the passes made | {tp['fraction_of_copy_made']:.1%} |"]
        if "peak_mul_add_gflops" in tp:
            lines += [f"| compute peak, multiply + add (as the stencil is compiled) | {tp['peak_mul_add_gflops']:.1f} "
                      f"GFLOP/s ({when(tp['peak_mul_add_source'])}) |",
                      f"| compute peak, fused multiply-add | {tp['peak_fma_gflops']:.1f} GFLOP/s ({when(tp['peak_fma_source'])}) |",
                      f"| fraction of the multiply + add peak | {tp['fraction_of_peak']:.2%} |"]
        lines.append("")
    lines += ["## Environment", "", f"{env['cpu']}, {env['cores']} cores, {env['memory_gb']} GB; Python "
              f"{env['python']}; MPI: {env['mpi_library'] or 'none'}; GPUs: "
              f"{', '.join(g['name'] for g in env['gpus']) or 'none'}; git {env['git_commit']}.", "",
              "Libraries: " + ", ".join(f"{k} {v}" for k, v in env["libraries"].items()), ""]
    return "\n".join(lines)
