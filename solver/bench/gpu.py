"""GPU measurements the device suite (tools/device_suite.sh) makes beyond `stencil tune`.

    python -m solver.bench.gpu launch  --size 4096 --json F     # launch gaps: CUDA graphs vs a loop of launches
    python -m solver.bench.gpu fmad    --size 16384 --json F    # cost of --fmad=false (bitwise CPU equality)
    [mpirun -n P] python -m solver.bench.gpu hybrid --json F ... # strong/weak scaling over 1..P GPUs
    python -m solver.bench.gpu ncu-target                       # a few launches for Nsight Compute to profile
    python -m solver.bench.gpu tiling --sizes 4096 16384 --steps 2000 --json F  # time tiling: kernel-only and runs
    python -m solver.bench.gpu runs --cases 16384:float64 2048:float64 --steps 2400 --json F  # `stencil run`, x copy-bound
    python -m solver.bench.gpu ncu-launches --cases 2048:float64:chip 16384:float64:wave2a  # one launch each, for ncu
    python -m solver.bench.gpu physics --size 8192 --dtypes float64 --json F  # kernels with a source / face fields
    python -m solver.bench.gpu table DIR                         # the short table the suite prints last

Every timing is a median of repeats measured with CUDA events (single GPU) or with the host clock
around synchronised batches (hybrid: max over ranks), after warm-up; every hybrid configuration is
checked against the exact eigenmode before its time is reported.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HEAT = {"equation": "heat"}


def make_case(n_y: int, n_x: int, dtype: str, **sections):
    from ..case import validate_case

    data = {"name": f"gpu_{n_y}x{n_x}_{dtype}", "grid": {"nx": n_x, "ny": n_y}, "physics": HEAT,
            "numerics": {"dtype": dtype}, "backend": {"name": "cupy"},
            "output": {"dir": "/tmp/stencil-gpu-bench", "vtk": False}, **sections}
    return validate_case(data)


def single_gpu(size: int, dtype: str, kernel=None, block=None, fmad=False, graphs=True, repeats=7, steps=100,
               time_tile=None, previous=False):
    """Median seconds per step of one configuration on one GPU (events around `steps` steps; previous:
    batches that end as before a check, the last time tile folding its residual)."""
    from ..backends.cupy_backend import CupyBackend
    from ..core.physics import weights
    from .tune import random_field, time_config

    case = make_case(size, size, dtype)
    be = CupyBackend(case.backend, dtype)
    be.configure(kernel, block, fmad, time_tile)
    be.use_graphs = graphs
    shape = (size + 2, size + 2)
    u, v = random_field(be, shape), be.zeros(shape)
    w = weights(case).cast(dtype)
    be.prepare(u, v, w)
    k = be.tile_steps(shape)
    steps = -(-steps // k) * k  # whole time tiles
    times = time_config(be, u, v, w, (1, size + 1, 1, size + 1), repeats, steps, previous)
    choice = be.choice(shape)
    return {"size": size, "dtype": dtype, "kernel": choice[0], "block": list(choice[1]) if choice[1] else None,
            "time_tile": choice[2], "source": choice[3], "fmad": fmad, "graphs": graphs, "steps": steps,
            "seconds_per_step": float(np.median(times)), "spread": [float(min(times)), float(max(times))],
            "gups": size * size / float(np.median(times)) / 1e9, "gpu": be.gpu_name}


def launch(args) -> dict:
    """At a moderate size: time per step replaying CUDA graphs vs one Python launch per step, and the
    per-point time at the large size (where launch gaps are negligible) scaled to this size."""
    out = {"rows": []}
    for dtype in args.dtypes:
        g = single_gpu(args.size, dtype, graphs=True, steps=args.steps)
        lo = single_gpu(args.size, dtype, kernel=g["kernel"], block=g["block"], graphs=False, steps=args.steps)
        big = single_gpu(args.large, dtype, kernel=g["kernel"], block=g["block"], graphs=True, steps=20)
        scaled = big["seconds_per_step"] * (args.size / args.large) ** 2
        out["rows"].append({"dtype": dtype, "graph": g, "loop": lo, "large": big,
                            "large_rate_scaled_s": scaled, "per_point_vs_large": g["seconds_per_step"] / scaled - 1})
    return out


def fmad(args) -> dict:
    rows = []
    for dtype in args.dtypes:
        off = single_gpu(args.size, dtype, steps=20)
        on = single_gpu(args.size, dtype, kernel=off["kernel"], block=off["block"], fmad=True, steps=20)
        rows.append({"dtype": dtype, "fmad_false": off, "fmad_true": on,
                     "cost": off["seconds_per_step"] / on["seconds_per_step"] - 1})
    return {"rows": rows}


def ncu_target(args) -> dict:
    """Launch tiled and vec at the large size, then the default (tuned; time-tiled) variant at both
    sizes: one launch each (a tiled variant: one tile of its k steps)."""
    from ..backends.cupy_backend import CupyBackend
    from ..core.physics import weights
    from .tune import random_field

    for size, kernel in ((args.large, "tiled"), (args.large, "vec"), (args.large, None), (args.size, None)):
        case = make_case(size, size, "float32")
        be = CupyBackend(case.backend, "float32")
        be.configure(kernel, None)
        u = random_field(be, (size + 2, size + 2))
        v = be.zeros(u.shape)
        w = weights(case).cast("float32")
        be.advance(u, v, w, be.tile_steps(u.shape), (1, size + 1, 1, size + 1))  # no prepare(): only big launches
        be.synchronize()
        print(f"ncu-target: {size}x{size} float32 kernel {be.choice(u.shape)[:3]}", flush=True)
    return {}


def tiling(args) -> dict:
    """Time tiling at each size and dtype, in one process: the device-to-device copy, `vec` and the tiled
    choice (tuned, else default) kernel-only (CUDA events, median of repeats), then both through a
    whole `stencil run` of `--steps` steps (record's time per step, median of repeats), with the sum of
    the record's sections over its loop time."""
    from ..backends.cupy_backend import CupyBackend

    rows = []
    for size in args.sizes:
        for dtype in args.dtypes:
            be = CupyBackend(make_case(size, size, dtype).backend, dtype)
            copy = be.copy_bandwidth((size + 2) * (size + 2) * be.dtype.itemsize, args.repeats)
            del be
            free_device_memory()
            row = {"size": size, "dtype": dtype, "copy_gbs": copy / 1e9}
            for label, kernel, tile in (("vec", "vec", None), ("tiled", None, None)):
                k = single_gpu(size, dtype, kernel=kernel, repeats=args.repeats, steps=200)
                free_device_memory()
                runs = [run_once(size, dtype, k["kernel"], k["block"], k["time_tile"], args.steps) for _ in range(args.repeats)]
                free_device_memory()
                per_step = float(np.median([r["seconds_per_step"] for r in runs]))
                row[label] = {"kernel_only": k, "run_seconds_per_step": per_step, "runs": runs,
                              "run_vs_kernel": k["seconds_per_step"] / per_step,
                              "vs_copy": size * size * 2 * np.dtype(dtype).itemsize / k["seconds_per_step"] / copy}
            row["tiled_vs_vec_kernel"] = row["vec"]["kernel_only"]["seconds_per_step"] / row["tiled"]["kernel_only"]["seconds_per_step"]
            row["tiled_vs_vec_run"] = row["vec"]["run_seconds_per_step"] / row["tiled"]["run_seconds_per_step"]
            rows.append(row)
            print(tiling_line(row), flush=True)
    return {"rows": rows, "steps": args.steps, "repeats": args.repeats}


def batches(args) -> dict:
    """What a batch costs beyond its steps: kernel-only seconds per step of the tiled choice (tuned, else
    default) in batches of each --batch-steps length, with and without the fused residual of a check
    (previous), at --size; the per-batch constant and the steady per-step time from a line through the
    points, and the residual's cost per batch."""
    rows = []
    for dtype in args.dtypes:
        points = {}
        for steps in args.batch_steps:
            for previous in (False, True):
                r = single_gpu(args.size, dtype, repeats=args.repeats, steps=steps, previous=previous)
                points[(r["steps"], previous)] = r["seconds_per_step"] * r["steps"]
                free_device_memory()
        n = sorted({s for s, _ in points})
        a, b = n[0], n[-1]
        per_step = (points[(b, False)] - points[(a, False)]) / (b - a)
        row = {"size": args.size, "dtype": dtype, "kernel": r["kernel"], "block": r["block"], "time_tile": r["time_tile"],
               "batch_seconds": {f"{s}{'+resid' if p else ''}": t for (s, p), t in points.items()},
               "steady_seconds_per_step": per_step, "per_batch_seconds": points[(a, False)] - a * per_step,
               "resid_seconds_per_batch": float(np.median([points[(s, True)] - points[(s, False)] for s in n]))}
        rows.append(row)
        print(f"batches {args.size}^2 {dtype} {row['kernel']} {row['block']} k={row['time_tile']}: steady "
              f"{per_step * 1e3:.4f} ms/step, per batch {row['per_batch_seconds'] * 1e3:.3f} ms, fused residual "
              f"{row['resid_seconds_per_batch'] * 1e3:.3f} ms per batch; "
              + ", ".join(f"{k} steps {v / int(k.split('+')[0]) * 1e3:.4f}" for k, v in row["batch_seconds"].items()),
              flush=True)
    return {"rows": rows}


def run_once(size: int, dtype: str, kernel, block, k, steps: int) -> dict:
    """One `stencil run` (run_record) of this kernel, block and time tile: its step time and sections."""
    r = run_record(size, dtype, steps, kernel, block=block, time_tile=k)
    return {"seconds_per_step": r["seconds_per_step"], "loop": r["loop"], "sections": r["sections"],
            "sections_over_loop": sum(r["sections"].values()) / r["loop"], "kernel": kernel, "time_tile": k}


def record_sections(timings: dict) -> dict:
    """A record's sections of the loop, slowest rank's seconds each."""
    from ..core.timing import SECTIONS

    return {s: timings[s]["max"] for s in SECTIONS}


def runs(args) -> dict:
    """`stencil run` (library entry point) of --steps steps for each --cases SIZE:DTYPE, --repeats times,
    nothing asked of the kernel unless a case names one (SIZE:DTYPE:KERNEL; else the tune's entry for
    the grid where one is stored, else the default):
    per run the record's step time, the copy bandwidth the record measured in the same run, the ratio
    of the update rate to the copy-bound rate (2 x itemsize bytes an update), the kernel choice and
    the bottleneck line; the row's figures are medians over the repeats."""
    rows = []
    for size, dtype, *kernel in _cases(args.cases):
        got = [run_record(size, dtype, args.steps, *kernel, check_every=args.check_every) for _ in range(args.repeats)]
        free_device_memory()
        med = {k: float(np.median([g[k] for g in got])) for k in ("seconds_per_step", "gups", "copy_gbs", "x_copy")}
        row = {"size": size, "dtype": dtype, "steps": args.steps, "check_every": args.check_every, "repeats": args.repeats,
               **med, "runs": got,
               "kernel": got[0]["kernel"], "bottleneck": got[0]["bottleneck"]}
        rows.append(row)
        print(runs_line(row), flush=True)
    return {"rows": rows}


def _cases(items) -> list[tuple]:
    """'16384:float64' -> (16384, 'float64'); a third field (a kernel) is kept."""
    out = []
    for item in items:
        parts = item.split(":")
        out.append((int(parts[0]), *parts[1:]))
    return out


def run_record(size: int, dtype: str, steps: int, kernel: str | None = None, check_every: int = 400,
               block=None, time_tile: int | None = None) -> dict:
    """One `stencil run` (library entry point) of the heat eigenmode, nothing asked of the kernel but what is
    given: the record's step time, rates, kernel choice, bottleneck line, loop and sections."""
    from ..run import Options, run_case

    case = make_case(size, size, dtype, run={"steps": steps, "check_every": check_every},
                     backend={"name": "cupy", "kernel": kernel, "block": block, "time_tile": time_tile})
    rec = run_case(case, options=Options(overwrite=True, quiet=True))
    tp, t = rec["throughput"], rec["timings"]
    choice = next(iter(rec["resources"]["devices"][0]["kernels"].values()))
    return {"seconds_per_step": tp["seconds_per_step"], "gups": tp["mlups"] / 1e3, "copy_gbs": tp["copy_gbs"],
            "x_copy": tp["fraction_of_copy"], "kernel": {k: v for k, v in choice.items() if k != "launch"},
            "launch": choice.get("launch"), "bottleneck": rec["bottleneck"],
            "correct": rec.get("correctness", {}).get("passed"), "loop": t["loop"]["max"],
            "sections": record_sections(t)}  # where the run path's time goes


def runs_line(r: dict) -> str:
    k = r["kernel"]
    spread = [x["x_copy"] for x in r["runs"]]
    sec = r["runs"][len(r["runs"]) // 2]  # one run's loop and its nonzero sections, ms
    parts = ", ".join(f"{s} {v * 1e3:.2f}" for s, v in sec["sections"].items() if v)
    return (f"run {r['size']}^2 {r['dtype']} {r['steps']} steps, check every {r['check_every']}: {k['kernel']} {k['block']} "
            f"k={k['time_tile']} ({k['source']}) loop {sec['loop'] * 1e3:.2f} ms ({parts}); "
            f"{r['gups']:.0f} G updates/s = {r['x_copy']:.2f}x the copy-bound rate (copy {r['copy_gbs']:.0f} GB/s; "
            f"{min(spread):.2f}-{max(spread):.2f} over {len(spread)}); {r['bottleneck'][:150]}")


def ncu_launches(args) -> dict:
    """One launch of each --cases SIZE:DTYPE:KERNEL (a time tile of the default k, or a `chip` launch of
    64 steps) on a random field, nothing else on the GPU (no prepare(): only the launches ncu should see)."""
    from ..backends.cupy_backend import CupyBackend
    from ..core.physics import weights
    from .tune import random_field

    for size, dtype, kernel in _cases(args.cases):
        case = make_case(size, size, dtype)
        be = CupyBackend(case.backend, dtype)
        be.configure(kernel, None, False, 64 if kernel == "chip" else None)
        be.use_graphs = False  # the launches themselves, not graph nodes
        u = random_field(be, (size + 2, size + 2))
        v = be.zeros(u.shape)
        w = weights(case).cast(dtype)
        be.advance(u, v, w, be.tile_steps(u.shape) if kernel != "chip" else 64, (1, size + 1, 1, size + 1), False)
        be.synchronize()
        print(f"ncu-launches: {size}^2 {dtype} {be.choice(u.shape)[:3]} {be.launch_facts(u.shape)}", flush=True)
        del be, u, v
        free_device_memory()
    return {}


# physics as data (issues 33, 34): kernels that read a source term and face coefficients -----------------------

PHYSICS_FORMS = {"plain": {}, "source": {"s"}, "faces": {"ax", "ay"}, "faces+source": {"s", "ax", "ay"},
                 "capacity": {"s", "ax", "ay", "m", "cw"}}  # issue 42: heat capacities that differ, face cooling
PHYSICS_KERNELS = [  # label, kernel, time tile, STENCIL_WAVE_DPF (None: the default)
    ("vec", "vec", None, None), ("tiled", None, None, None), ("wave2a_k8_dpf0", "wave2a", 8, "0")]


def physics_configs(items) -> list[tuple]:
    """--configs KERNEL[:K[:DPF]] ('default' for the tiled default): PHYSICS_KERNELS' rows."""
    out = []
    for item in items:
        kernel, k, dpf = (item.split(":") + [None, None])[:3]
        label = item.replace(":", "_")
        out.append((label, None if kernel == "default" else kernel, int(k) if k else None, dpf))
    return out


def data_fields(be, shape, form: str, wx: float, seed: int = 1) -> dict:
    """Device fields of a form, on u's layout (zeros() as coefficient() allocates them): a source of small values
    (dt q), face coefficients between 0.5 and 1 times wx, a capacity multiplier m in [0.5, 1] and a centre weight cw
    in [0, 0.1] (a stable flux form)."""
    cp, out = be.cp, {}
    rng = cp.random.default_rng(seed)
    scale = {"s": (0.0, 1e-3), "m": (0.5, 0.5), "cw": (0.0, 0.1)}
    for key in sorted(PHYSICS_FORMS[form]):
        a = be.zeros(shape)
        lo, span = scale.get(key, (0.5 * wx, 0.5 * wx))
        with be.main:
            a[...] = lo + span * rng.random(shape, dtype=be.dtype)
        out[key] = a
    be.main.synchronize()
    return out


def data_gpu(size: int, dtype: str, kernel, form: str, repeats: int = 7, steps: int = 200, time_tile=None) -> dict:
    """Kernel-only seconds per step (CUDA events around graph-batched advance, median of repeats) of the explicit
    update with the fields of `form`, and its bytes per update: u read and written, each field read once."""
    from ..backends.cupy_backend import CupyBackend
    from ..core.physics import weights
    from .tune import random_field, time_config

    case = make_case(size, size, dtype)
    be = CupyBackend(case.backend, dtype)
    be.configure(kernel, None, False, time_tile)
    shape, region = (size + 2, size + 2), (1, size + 1, 1, size + 1)
    u, v = random_field(be, shape), be.zeros(shape)
    w = weights(case).cast(dtype)
    w = w.with_data(**data_fields(be, shape, form, float(w.wx)))
    be.prepare(u, v, w)
    from ..backends import cupy_kernels as gk

    multi = be.choice(shape)[0] in gk.MULTI
    k = be.tiled_choice(shape, gk.data_of(w))[2] if multi and form != "plain" else be.tile_steps(shape)
    steps = -(-steps // k) * k
    times = time_config(be, u, v, w, region, repeats, steps)
    choice = be.describe()["kernels"][f"{size}x{size}"]
    path = choice.get("with_data", [{}])[-1] if form != "plain" else {}  # the kernel and tile the data took
    used, k_used = path.get("kernel", choice["kernel"]), path.get("time_tile", choice["time_tile"])
    fn = None
    if used in gk.TILED:
        variant, block, kk = be.tiled_choice(shape, gk.data_of(w))
        fn = be._function(variant, block, kk, gk.data_of(w))
    elif used not in gk.ON_CHIP and used != "expr":
        fn = be._function(*be.step_choice(shape), 1, gk.data_of(w))
    regs = {"registers": getattr(fn, "num_regs", None), "local_bytes": getattr(fn, "local_size_bytes", None)}
    per = float(np.median(times))
    nbytes = (2 + len(PHYSICS_FORMS[form])) * np.dtype(dtype).itemsize
    del be, u, v, w
    free_device_memory()
    return {"size": size, "dtype": dtype, "form": form, "kernel": used, "block": choice["block"],
            "time_tile": k_used, "seconds_per_step": per, "spread": [float(min(times)), float(max(times))],
            "gups": size * size / per / 1e9, "bytes_per_update": nbytes, **regs}


def physics(args) -> dict:
    """At --size, per dtype: the copy rate, then each PHYSICS_KERNELS kernel on each form (plain, a source, face
    coefficients, both), kernel-only; x_copy = updates/s x bytes per update (the form's fields counted) / copy."""
    import os

    from ..backends.cupy_backend import CupyBackend

    rows = []
    for dtype in args.dtypes:
        be = CupyBackend(make_case(args.size, args.size, dtype).backend, dtype)
        copy = be.copy_bandwidth((args.size + 2) ** 2 * be.dtype.itemsize, args.repeats)
        del be
        free_device_memory()
        row = {"size": args.size, "dtype": dtype, "copy_gbs": copy / 1e9, "runs": {}}
        for label, kernel, tile, dpf in (physics_configs(args.configs) if args.configs else PHYSICS_KERNELS):
            for form in args.forms or PHYSICS_FORMS:
                if dpf is not None and form == "plain":
                    continue
                saved = os.environ.get("STENCIL_WAVE_DPF")
                if dpf is not None:
                    os.environ["STENCIL_WAVE_DPF"] = dpf
                try:
                    r = data_gpu(args.size, dtype, kernel, form, args.repeats, args.steps, tile)
                finally:
                    if dpf is not None:
                        os.environ.pop("STENCIL_WAVE_DPF") if saved is None else os.environ.update(STENCIL_WAVE_DPF=saved)
                r["x_copy"] = r["gups"] * 1e9 * r["bytes_per_update"] / copy
                row["runs"][f"{label}/{form}"] = r
                print(f"physics {args.size}^2 {dtype} {label}/{form}: {r['kernel']} {r['block']} k={r['time_tile']} "
                      f"{r['seconds_per_step'] * 1e3:.4f} ms/step, {r['gups']:.1f} G/s, {r['x_copy']:.3f}x copy-bound at "
                      f"{r['bytes_per_update']} B/update; {r['registers']} registers, {r['local_bytes']} B local",
                      flush=True)
        rows.append(row)
        if not args.configs:
            print(physics_line(row), flush=True)
    return {"rows": rows, "steps": args.steps, "repeats": args.repeats}


def physics_line(row: dict) -> str:
    r = row["runs"]
    x = lambda key: r[key]["x_copy"] if key in r else float("nan")  # noqa: E731
    gain = lambda a, b: r[b]["seconds_per_step"] / r[a]["seconds_per_step"] if a in r and b in r else float("nan")  # noqa: E731
    tiled = ", ".join(f"{form} {r['tiled/' + form]['kernel']} k={r['tiled/' + form]['time_tile']} {x('tiled/' + form):.2f} = "
                      f"{gain('tiled/' + form, 'vec/' + form):.2f}x vec" for form in PHYSICS_FORMS if "tiled/" + form in r)
    return (f"physics {row['size']}^2 {row['dtype']} (copy {row['copy_gbs']:.0f} GB/s), x the copy-bound rate counted with "
            f"the fields' bytes: vec plain {x('vec/plain'):.3f}, source {x('vec/source'):.3f}, faces {x('vec/faces'):.3f}, "
            f"faces+source {x('vec/faces+source'):.3f}, capacity {x('vec/capacity'):.3f}; tiled default: {tiled}; "
            f"wave2a k=8 without prefetch (DPF 0): "
            f"source {x('wave2a_k8_dpf0/source'):.2f}, faces {x('wave2a_k8_dpf0/faces'):.2f}")


def tiling_line(r: dict) -> str:
    t, v = r["tiled"], r["vec"]
    ko = t["kernel_only"]
    return (f"tiling {r['size']}^2 {r['dtype']}: {ko['kernel']} {ko['block']} k={ko['time_tile']} "
            f"{ko['seconds_per_step'] * 1e3:.4f} ms/step kernel-only = {r['tiled_vs_vec_kernel']:.2f}x vec, "
            f"{t['vs_copy']:.2f}x copy ({r['copy_gbs']:.0f} GB/s); stencil run {t['run_seconds_per_step'] * 1e3:.4f} "
            f"= {t['run_vs_kernel']:.1%} of kernel-only, {r['tiled_vs_vec_run']:.2f}x vec's run; vec run "
            f"{v['run_vs_kernel']:.1%} of its kernel-only; sections/loop "
            f"{max(x['sections_over_loop'] for x in t['runs'] + v['runs']):.3f} max")


# hybrid ------------------------------------------------------------------------------------------

def hybrid(args) -> list[dict]:
    """Each configuration: build, warm up, time `repeats` batches of steps, check the exact mode."""
    from ..parallel.comm import Comm

    comm = Comm.world()
    copy = None
    results = []
    for cfg in configs(args, comm.size):
        res = hybrid_one(comm, cfg, args.repeats)
        be = res.pop("_backend")
        copy = copy or per_rank_copy(comm, be)
        del be
        free_device_memory()
        res["copy_gbs_per_gpu"] = copy
        res["fraction_of_copy_per_gpu"] = res["effective_gbs_per_gpu"] / copy
        results.append(res)
        if comm.rank == 0:
            print(json.dumps({k: v for k, v in res.items() if k != "ranks_detail"}, default=str), flush=True)
    return results


def configs(args, ranks: int) -> list[dict]:
    out = []
    for kind in args.kinds:
        for size in args.sizes if kind == "strong" else [args.sizes[0]]:
            for dtype in args.dtypes:
                for halo in args.halos if ranks > 1 else ["none"]:
                    for transport in args.transports if ranks > 1 else ["none"]:
                        for tile in args.time_tiles:
                            ny = size * ranks if kind == "weak" else size
                            if kind == "weak" and ranks == 1:
                                continue
                            out.append({"kind": kind, "ny": ny, "nx": size, "dtype": dtype, "halo": halo,
                                        "transport": transport, "time_tile": tile})
    return out


def hybrid_one(comm, cfg: dict, repeats: int) -> dict:
    from ..backends.cupy_backend import CupyBackend
    from ..core import physics
    from ..core.decomp import all_blocks, choose_dims
    from ..core.layout import Layout
    from ..core.loop import LoopState, TimeLoop
    from ..core.timing import Timer
    from ..parallel.exchange import make_exchange

    from ..core.field import set_edges

    ny, nx, dtype = cfg["ny"], cfg["nx"], cfg["dtype"]
    par = {"decomposition": "rows", "share_gpus": True}
    if cfg["halo"] != "none":
        par.update(halo=cfg["halo"], transport=cfg["transport"])
    case = make_case(ny, nx, dtype, initial={"kind": "sine"}, parallel=par, run={"steps": 10**9, "check_every": 10**9},
                     backend={"name": "cupy", "time_tile": cfg.get("time_tile", 1)})
    node_rank, node_size = comm.node()
    dims = choose_dims(comm.size, case.shape, "rows")
    lay = Layout(case=case, dt=physics.time_step(case), spacing=physics.spacing(case),
                 w=physics.weights(case).cast(dtype), dims=dims, rank=comm.rank, blocks=all_blocks(case.shape, dims),
                 outdir=Path("."), node_rank=node_rank, node_size=node_size)
    block, w = lay.block, lay.w
    be = CupyBackend(case.backend, dtype, local_rank=node_rank, local_size=node_size)
    u, v = sine_field(be, case, block), be.zeros(block.padded)
    timer, warm = Timer(), Timer()
    be.prepare(u, v, w)  # the fields' shape: the time tile's choice
    depth = comm.bcast(be.tile_for(min(b.ny for b in lay.blocks)))  # deep halos of that depth (as Run.connect)
    ex = make_exchange(case.parallel.halo, block, comm.mpi, be, timer, case.parallel.transport, depth=depth,
                       blocks=lay.blocks, fill=lambda b, a, owned: set_edges(case, b, a, owned=owned))
    if hasattr(ex, "adopt"):
        u, v = ex.adopt(u, v)
        be.prepare(u, v, w)
    loop = TimeLoop(lay, be, comm, ex, (timer, warm))
    s = LoopState(u, v)
    steps = steps_for(ny * nx, np.dtype(dtype).itemsize, comm.size)
    loop.steps(s, max(10, steps // 10), warm)
    be.synchronize()
    for k in timer.seconds:
        timer.seconds[k] = 0.0
    ex_stats0 = _ex_stats(ex)
    sent0 = ex.sent()
    per_step = []
    for _ in range(repeats):
        comm.barrier()
        t = time.perf_counter()
        loop.steps(s, steps, timer)
        be.synchronize()
        per_step.append(comm.allmax((time.perf_counter() - t) / steps))
    err = exact_error(be, case, block, s, comm)
    loop_s = steps * float(np.sum(per_step))
    mine = {"rank": comm.rank, "gpu": be.device_index, **{k: v / loop_s for k, v in timer.seconds.items()},
            **{k: (v - ex_stats0.get(k, 0.0)) / loop_s for k, v in _ex_stats(ex).items()}}
    detail = comm.gather(mine)
    messages = comm.allsum(ex.sent() - sent0) / (steps * repeats)
    ex.close()
    med = float(np.median(per_step))
    itemsize = np.dtype(dtype).itemsize
    res = {**cfg, "ranks": comm.size, "steps": steps, "repeats": repeats, "seconds_per_step": med,
           "spread": [float(min(per_step)), float(max(per_step))], "gups": ny * nx / med / 1e9,
           "effective_gbs_per_gpu": ny * nx / comm.size * 2 * itemsize / med / 1e9,
           "transport_used": getattr(getattr(ex, "tx", None), "name", "none"), "exact_relative_error": err,
           "halo_depth": getattr(ex, "depth", 1), "messages_per_step": messages, "time_tile_used": be._tile_used,
           "exact_tolerance": float(8 * np.finfo(dtype).eps * (s.step + 1)), "ranks_detail": detail, "_backend": be,
           "kernel": list(be.choice(u.shape)[:2])}
    res["kernel"][1] = list(res["kernel"][1]) if res["kernel"][1] else None
    del u, v, s
    be.synchronize()
    return res


def free_device_memory() -> None:
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()


def _ex_stats(ex) -> dict:
    return {k: v for k, v in getattr(ex, "stats", dict)().items() if k in ("halo_gpu", "gpu_wait")}


def steps_for(points: int, itemsize: int, ranks: int, seconds: float = 0.15) -> int:
    """Steps for about `seconds` per batch at ~3.5 TB/s per GPU."""
    per_step = points * 2 * itemsize / (3.5e12 * ranks)
    return int(min(2000, max(20, seconds / per_step)))


def sine_field(be, case, block):
    """The exact eigenmode on this block, computed on the device (no host field of the whole grid)."""
    cp = be.cp
    ny, nx = case.shape
    i = cp.arange(block.rows[0], block.rows[1], dtype=cp.float64)
    j = cp.arange(block.cols[0], block.cols[1], dtype=cp.float64)
    u = be.zeros(block.padded)
    with be.main:
        u[1:-1, 1:-1] = cp.outer(cp.sin(math.pi * (i + 1) / (ny + 1)), cp.sin(math.pi * (j + 1) / (nx + 1))).astype(be.dtype)
    be.main.synchronize()
    return u


def exact_error(be, case, block, s, comm) -> float:
    from ..core.physics import mode_factor

    exact = sine_field(be, case, block)
    with be.main:
        a = s.u[1:-1, 1:-1].astype(be.cp.float64)
        scale = mode_factor(case) ** s.step
        err = float(be.cp.max(be.cp.abs(a - exact[1:-1, 1:-1].astype(be.cp.float64) * scale)))
    be.main.synchronize()
    return comm.allmax(err) / scale  # the mode's maximum is 1 up to O(1/n^2), times scale


def per_rank_copy(comm, be) -> float:
    """Device-to-device copy GB/s of this rank's GPU (1 GiB, median of 5), every rank at once; mean over ranks."""
    comm.barrier()
    mine = be.copy_bandwidth(1 << 30) / 1e9
    return comm.allsum(mine) / comm.size


# table -------------------------------------------------------------------------------------------

def table(directory: Path) -> str:
    """The short table the suite prints last, from the JSON files it wrote."""
    lines = []
    for name in sorted(directory.glob("tune_*.json")):
        res = json.loads(name.read_text())
        best = res.get("best", {})
        if not best:
            continue
        fastest = min(best.values(), key=lambda r: r["seconds_per_step"])
        ny, nx = res["shape"]
        ranked = sorted(best.items(), key=lambda kv: kv[1]["seconds_per_step"])
        line = (f"kernels {ny}x{nx} {res['dtype']}: copy {res['copy_gbs']:.0f} GB/s; "
                + ", ".join(f"{k} {r['fraction_of_copy']:.0%}" for k, r in ranked)
                + f"; best {fastest['kernel']} {fastest['block']}")
        if "expr" in best:
            line += f" = {best['expr']['seconds_per_step'] / fastest['seconds_per_step']:.1f}x expr"
        lines.append(line)
    p = directory / "runs.json"
    if p.exists():
        lines += [runs_line(r) for r in json.loads(p.read_text())["rows"]]
    p = directory / "tiling.json"
    if p.exists():
        lines += [tiling_line(r) for r in json.loads(p.read_text())["rows"]]
    p = directory / "physics.json"
    if p.exists():
        lines += [physics_line(r) for r in json.loads(p.read_text())["rows"]]
    for p in sorted(directory.glob("physics_sweep*.json")):
        for row in json.loads(p.read_text())["rows"]:
            lines.append(f"physics sweep {row['size']}^2 {row['dtype']} (copy {row['copy_gbs']:.0f} GB/s): " + ", ".join(
                f"{key} {r['kernel']} k={r['time_tile']} {r['x_copy']:.2f}x ({r['local_bytes']} B local)"
                for key, r in row["runs"].items()))
    for name, key in (("launch.json", "launch"), ("fmad.json", "fmad")):
        p = directory / name
        if p.exists():
            for r in json.loads(p.read_text())["rows"]:
                if key == "launch":
                    lines.append(f"launch {r['graph']['size']}^2 {r['dtype']}: graph {r['graph']['seconds_per_step'] * 1e6:.1f} us/step, "
                                 f"loop {r['loop']['seconds_per_step'] * 1e6:.1f}; per-point time {r['per_point_vs_large']:+.1%} "
                                 f"vs {r['large']['size']}^2 (kernel efficiency at this size plus launch gaps)")
                else:
                    lines.append(f"fmad {r['fmad_false']['size']}^2 {r['dtype']}: --fmad=false costs {r['cost']:+.1%} "
                                 f"({r['fmad_false']['kernel']})")
    lines += hybrid_lines(directory)
    return "\n".join(lines)


def hybrid_lines(directory: Path) -> list[str]:
    rows = []
    for p in sorted(directory.glob("hybrid_*.json")):
        rows += json.loads(p.read_text())
    one = {(r["ny"], r["nx"], r["dtype"], r.get("time_tile", 1)): r["seconds_per_step"] for r in rows if r["ranks"] == 1}
    lines = []
    for r in rows:
        if r["ranks"] == 1:
            continue
        base_shape = (r["nx"], r["nx"]) if r["kind"] == "weak" else (r["ny"], r["nx"])
        t1 = one.get((*base_shape, r["dtype"], r.get("time_tile", 1)))
        eff = ""
        if t1:
            eff = t1 / r["seconds_per_step"] if r["kind"] == "weak" else t1 / (r["ranks"] * r["seconds_per_step"])
            eff = f" eff {eff:.0%}"
        ok = "ok" if r["exact_relative_error"] <= r["exact_tolerance"] else "WRONG"
        comm = max(d["comm"] + d["wait"] for d in r["ranks_detail"])
        tile = (f" k={r['time_tile']} depth {r['halo_depth']}, {r['messages_per_step']:.2f} msg/step,"
                if "halo_depth" in r else "")
        lines.append(f"hybrid {r['kind']} {r['ranks']}x {r['ny']}x{r['nx']} {r['dtype']} {r['halo']}/{r['transport_used']}:"
                     f"{tile} {r['seconds_per_step'] * 1e3:.3f} ms/step{eff}, {r['fraction_of_copy_per_gpu']:.0%} copy/GPU, "
                     f"comm+wait {comm:.0%}, exact {ok}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m solver.bench.gpu")
    p.add_argument("what", choices=["launch", "fmad", "hybrid", "ncu-target", "table", "tiling", "batches", "runs",
                                     "ncu-launches", "physics"])
    p.add_argument("dir", nargs="?", default=".")
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--large", type=int, default=16384)
    p.add_argument("--sizes", type=int, nargs="+", default=[16384, 32768])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--halos", nargs="+", default=["overlap"])
    p.add_argument("--transports", nargs="+", default=["staged"])
    p.add_argument("--kinds", nargs="+", default=["strong", "weak"])
    p.add_argument("--time-tiles", type=int, nargs="+", default=[1],
                   help="hybrid: backend.time_tile values (k > 1: deep halos of k layers under MPI)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-steps", type=int, nargs="+", default=[48, 400])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--check-every", type=int, default=400, help="runs: the case's run.check_every")
    p.add_argument("--cases", nargs="+", default=["16384:float64"], help="runs, ncu-launches: SIZE:DTYPE[:KERNEL]")
    p.add_argument("--configs", nargs="+", help="physics: KERNEL[:K[:DPF]] instead of the default set")
    p.add_argument("--forms", nargs="+", choices=list(PHYSICS_FORMS), help="physics: the forms to time (default all)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if args.what == "table":
        print(table(Path(args.dir)))
        return 0
    res = {"launch": launch, "fmad": fmad, "hybrid": hybrid, "ncu-target": ncu_target, "tiling": tiling,
           "batches": batches, "runs": runs, "ncu-launches": ncu_launches, "physics": physics}[args.what](args)
    from ..parallel.comm import launched_by_mpi

    rank0 = not launched_by_mpi() or _rank() == 0
    if args.json and rank0:
        args.json.write_text(json.dumps(res, indent=1, default=str))
    if args.what in ("launch", "fmad") and rank0:
        print(json.dumps(res, indent=1, default=str))
    return 0


def _rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - under mpirun one failing rank must end every rank, not leave them waiting
        import traceback

        from ..parallel.comm import launched_by_mpi

        traceback.print_exc()
        if launched_by_mpi():
            from mpi4py import MPI

            MPI.COMM_WORLD.Abort(1)
        sys.exit(1)
