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
from ..core.timing import SECTIONS
from ..io.safeio import write_text
from .environment import environment

CSV_FIELDS = ["rank", "host", "pid", "affinity", "threads", "rows", "cols", "points", *SECTIONS, "loop", "warmup", "steps",
              "updates"]


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
    stats["mlups_per_rank"] = [r.get("updates", r["points"] * r["steps"]) / t / 1e6 for r, t in zip(rows, loops)]
    return stats


def throughput(case, rows: list[dict], ceiling: dict | None) -> dict | None:
    steps = rows[0]["steps"]
    solve = max(r["loop"] - r["io"] for r in rows)  # output is timed apart (times.output)
    if steps == 0 or solve <= 0:
        return None
    updates = case.grid.nx * case.grid.ny * steps / solve
    itemsize = np.dtype(case.numerics.dtype).itemsize
    gbs = updates * 2 * itemsize / 1e9
    out = {"timed_steps": steps, "seconds_per_step": solve / steps, "mlups": updates / 1e6, "effective_gbs": gbs,
           "gflops": updates * physics.FLOPS_PER_UPDATE / 1e9, "bytes_per_update": 2 * itemsize,
           "flops_per_update": physics.FLOPS_PER_UPDATE}
    if ceiling:
        out["copy_gbs"] = ceiling["gbs"]
        out["fraction_of_copy"] = gbs / ceiling["gbs"]
        out["copy_cached"] = ceiling.get("cached", False)
    return out


def bottleneck(tp: dict | None, stats: dict, ranks: int, oversubscribed: str | None = None) -> str:
    if tp is None:
        return "no timed steps: raise run.steps above run.warmup to measure"
    if oversubscribed:
        return (f"oversubscription: {oversubscribed}, so ranks wait for a core as well as for messages; "
                "timings show the machine, not the code - use at most one thread per core")
    frac = tp.get("fraction_of_copy")
    comm = stats["comm_fraction"]["max"] + stats["wait_fraction"]["max"]
    if ranks > 1 and comm > 0.25:
        return (f"communication: comm + wait take up to {comm:.0%} of the loop on some rank; "
                "larger local blocks, overlap, or fewer ranks help")
    if ranks > 1 and stats["load_imbalance"] > 1.15:
        return f"load imbalance: the slowest rank computes {stats['load_imbalance']:.2f}x the mean"
    if frac is not None and frac >= 0.7:
        return (f"memory bandwidth: {frac:.0%} of the measured copy bandwidth ({tp['copy_gbs']:.1f} GB/s); "
                "more threads or ranks on the same memory will not help much")
    if tp["seconds_per_step"] < 1e-4:
        return "per-step overhead: steps are shorter than 0.1 ms, so launch and Python costs dominate; use a larger grid"
    if frac is not None:
        return (f"kernel efficiency: {frac:.0%} of the copy bandwidth; the kernel leaves bandwidth unused "
                "(more threads, SIMD or a better kernel would help)")
    return "unknown: no copy bandwidth measured to compare with"


def oversubscription(rows: list[dict], on_gpu: bool) -> str | None:
    """A description when some host runs more threads (ranks x threads) than the cores its ranks may use
    (the union of their CPU affinities), else None."""
    if on_gpu:
        return None
    hosts: dict[str, tuple[set, int]] = {}
    for r in rows:
        cores, used = hosts.get(r["host"], (set(), 0))
        hosts[r["host"]] = (cores | parse_cores(r["affinity"]), used + r["threads"])
    for host, (cores, used) in hosts.items():
        if cores and used > len(cores):
            ranks = sum(r["host"] == host for r in rows)
            return f"{ranks} rank(s) with {used} thread(s) in all on {len(cores)} core(s) of {host}"
    return None


def parse_cores(text: str) -> set[int]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the format info.affinity() writes)."""
    cores: set[int] = set()
    for part in filter(None, str(text).split(",")):
        a, _, b = part.partition("-")
        if a.isdigit():
            cores.update(range(int(a), int(b or a) + 1))
    return cores


def build_record(layout, rows: list[dict], facts: dict, correctness: dict | None, ceiling: dict | None) -> dict:
    """layout: solver.core.layout.Layout; rows: one per rank (run.Run.rank_row); facts: plain data of the
    run (run.Run.facts: phases, mpi_library, on_gpu, halo, halo_schedule, threads_per_rank, balance, run)."""
    case = layout.case
    stats = section_stats(rows)
    tp = throughput(case, rows, ceiling)
    w = physics.weights(case)
    return {
        "stencil": {"version": environment(with_gpus=False)["stencil"], "backend": case.backend.name,
                    "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "case": case.model_dump(mode="json"),
        "environment": environment(facts["mpi_library"], with_gpus=facts["on_gpu"]),
        "input": {"name": case.name, "nx": case.grid.nx, "ny": case.grid.ny, "dtype": case.numerics.dtype,
                  "equation": case.physics.equation, "initial": case.initial.kind, "steps_requested": case.run.steps,
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
        "correctness": correctness or {"reference": None, "passed": None,
                                       "note": "not verified; use --verify or verify: true"},
        "times": facts["phases"],
        "timings": stats,
        "throughput": tp,
        "bottleneck": bottleneck(tp, stats, layout.size, oversubscription(rows, facts["on_gpu"])),
    }


def tiling(facts: dict | None, rows: list[dict]) -> dict:
    """time_tile (steps per sweep), halo_depth (ghost layers per message: the time tile under MPI, capped
    to the thinnest block) and the halo messages all ranks sent per step of this run."""
    if not facts:
        return {}
    sent = sum(int(r.get("messages", 0)) for r in rows)
    return {"time_tile": facts["time_tile"], "halo_depth": facts["halo_depth"],
            "messages_per_step": sent / facts["steps"] if facts["steps"] else 0.0}


def placement(row: dict) -> dict:
    """Where a rank ran: host, CPU affinity, GPU (index, name) and halo transport where there are any."""
    dev = row["device"] if isinstance(row.get("device"), dict) else {}
    out = {"rank": row["rank"], "host": row["host"], "affinity": row["affinity"]}
    out.update({k: dev[k] for k in ("gpu_index", "gpu_name", "pci_bus_id") if k in dev})
    out.update({k: row[k] for k in ("transport", "halo_gpu", "gpu_wait") if k in row})
    return out


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


def markdown(rec: dict) -> str:
    inp, res, tp, c = rec["input"], rec["resources"], rec["throughput"], rec["correctness"]
    env, t = rec["environment"], rec["timings"]
    lines = [f"# Run record: {inp['name']}", "",
             f"**Bottleneck:** {rec['bottleneck']}", "",
             "## Input", "",
             f"{inp['equation']} on {inp['ny']} x {inp['nx']} interior points ({inp['dtype']}), initial "
             f"{inp['initial']}, dt = {inp['dt']:.6g}, {rec['run']['steps']} steps taken "
             f"({inp['steps_requested']} requested{', converged' if rec['run']['converged'] else ''}).", "",
             "## Resources", "",
             f"backend {rec['stencil']['backend']}, {res['ranks']} rank(s) as {res['dims'][0]} x {res['dims'][1]} "
             f"({res['decomposition']}, halo {res['halo']}), {res['threads_per_rank']} thread(s) per rank."
             + _tiling_line(res)
             + _balance_line(res.get("balance")), "",
             "## Correctness", ""]
    if c.get("passed") is None:
        lines.append(c.get("note", "not verified"))
    else:
        lines.append(f"{'PASS' if c['passed'] else 'FAIL'}: {c['reference']}; relative error "
                     f"{c['relative_error']:.3e} (tolerance {c['tolerance']:.1e}).")
    lines += ["", "## Times (s)", "", "| phase | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.4f} |" for k, v in rec["times"].items()]
    lines += ["", "## Per-rank sections (s, over ranks)", "", "| section | min | mean | max |", "|---|---|---|---|"]
    lines += [f"| {k} | {t[k]['min']:.4f} | {t[k]['mean']:.4f} | {t[k]['max']:.4f} |" for k in (*SECTIONS, "loop")]
    lines += ["", f"Load imbalance (max/mean compute): {t['load_imbalance']:.3f}; comm fraction (max) "
              f"{t['comm_fraction']['max']:.1%}; wait fraction (max) {t['wait_fraction']['max']:.1%}.", ""]
    if tp:
        lines += ["## Throughput", "", "| metric | value |", "|---|---|",
                  f"| time per step | {tp['seconds_per_step'] * 1e3:.4f} ms |", f"| MLUP/s | {tp['mlups']:.1f} |",
                  f"| effective GB/s ({tp['bytes_per_update']} B/update) | {tp['effective_gbs']:.2f} |",
                  f"| GFLOP/s ({tp['flops_per_update']} flop/update) | {tp['gflops']:.2f} |"]
        if "copy_gbs" in tp:
            lines += [f"| copy bandwidth (same ranks/threads) | {tp['copy_gbs']:.2f} GB/s |",
                      f"| fraction of copy bandwidth | {tp['fraction_of_copy']:.1%} |"]
        lines.append("")
    lines += ["## Environment", "", f"{env['cpu']}, {env['cores']} cores, {env['memory_gb']} GB; Python "
              f"{env['python']}; MPI: {env['mpi_library'] or 'none'}; GPUs: "
              f"{', '.join(g['name'] for g in env['gpus']) or 'none'}; git {env['git_commit']}.", "",
              "Libraries: " + ", ".join(f"{k} {v}" for k, v in env["libraries"].items()), ""]
    return "\n".join(lines)
