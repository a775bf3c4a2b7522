"""`stencil tune CASE`: time every CuPy kernel variant over a set of block shapes (and, for the
time-tiled variants and `chip`, steps per launch) on one GPU.

The tiled variants are also tried with their default block for this grid (cupy_kernels.default_block);
`chip` only where the field fits on chip, with k from --chip-steps.

Schedule per (variant, block, k): compile; check it against `naive` (k steps from the same random
field must agree bitwise; k = 1 for the one-step variants); two warm-up batches; `repeats` batches of
`steps` steps rounded up to a multiple of k (CUDA graphs), each timed with CUDA events; the median
time per step is reported. The batches fold no residual (no check follows them: kernel-only). Effective bandwidth counts 2 x itemsize per update and is shown against
the device-to-device copy bandwidth measured at the start of the same run (cudaMemcpyAsync of a
field-sized buffer, median of `repeats`): above 1, steps are fused (time tiling).

With --save (the default) the fastest block and k of each variant, per k, are stored in tune.json
beside the bandwidth cache (STENCIL_CACHE_DIR or ~/.cache/stencil), keyed by GPU model, dtype,
interior grid shape, variant and k. A run with any of backend.kernel / block / time_tile null takes
the fastest stored entry that matches what the case does fix, at its local grid shape or else the
nearest measured shape (in number of points) for the same GPU and dtype. What is best at one size
need not be best at another: tune at the sizes you run.
"""

from __future__ import annotations

import time

import numpy as np

from ..backends import cupy_kernels as gk
from ..backends.tuned import store_tuned, tune_key

SEED = 12345


def parse_blocks(text: str | None) -> list[tuple[int, int]] | None:
    """'32x8,128x16' -> [(32, 8), (128, 16)]; InputError on anything else."""
    from ..core.errors import InputError

    if not text:
        return None
    try:
        blocks = [tuple(int(v) for v in part.lower().split("x")) for part in text.split(",") if part.strip()]
    except ValueError:
        blocks = []
    if not blocks or any(len(b) != 2 or min(b) < 1 for b in blocks):
        raise InputError(f"--blocks: {text!r} is not a list of BXxBY shapes; write e.g. --blocks 32x8,128x16")
    return blocks


def random_field(be, shape, seed: int = SEED):
    """Padded device field: uniform [0, 1) interior (never zeros), zero ghost layers."""
    cp = be.cp
    u = be.zeros(shape)
    with be.main:
        u[1:-1, 1:-1] = cp.random.default_rng(seed).random((shape[0] - 2, shape[1] - 2), dtype=be.dtype)
    be.main.synchronize()
    return u


def time_config(be, u, v, w, region, repeats: int, steps: int, previous: bool = False) -> list[float]:
    """Seconds per step of each repeat (CUDA events around graph-batched advance). previous: the
    batch ends as before a check (a time tile folds its residual); kernel-only timings leave it out,
    as a run's batches between two checks do."""
    u, v = be.advance(u, v, w, steps, region, previous)
    times = []
    for _ in range(repeats):
        e0 = be._record(be.main)
        u, v = be.advance(u, v, w, steps, region, previous)
        e1 = be._record(be.main)
        e1.synchronize()
        times.append(be.cp.cuda.get_elapsed_time(e0, e1) / 1e3 / steps)
    return times


def matches_naive(be, u0, w, region, reference, k: int) -> bool:
    """k steps of the configured kernel from u0 (one launch when it is tiled) equal k naive steps, bitwise."""
    a, b = be.zeros(u0.shape), be.zeros(u0.shape)
    with be.main:
        a[...] = u0
        b[...] = u0
    a, _ = be.advance(a, b, w, k, region)
    r0, r1, c0, c1 = region
    with be.main:
        same = bool(be.cp.array_equal(a[r0:r1, c0:c1], reference[r0:r1, c0:c1]))
    del a, b
    return same


def naive_steps(be, u0, w, region, k: int):
    """k steps of the naive kernel from u0: the reference every configuration must equal."""
    be.configure("naive", gk.DEFAULT_BLOCK["naive"])
    a, b = be.zeros(u0.shape), be.zeros(u0.shape)
    with be.main:
        a[...] = u0
        b[...] = u0
    a, b = be.advance(a, b, w, k, region)
    del b
    return a


def tune(case, variants: list[str] | None = None, blocks: list | None = None, repeats: int = 5, steps: int = 20,
         save: bool = True, fmad: bool = False, tiles: list[int] | None = None, chip_steps: list[int] | None = None) -> dict:
    from ..backends import backend_class
    from ..core.physics import weights

    be = backend_class("cupy")(case.backend, case.numerics.dtype)
    ny, nx = case.shape
    shape, region = (ny + 2, nx + 2), (1, ny + 1, 1, nx + 1)
    w = weights(case).cast(be.dtype)
    u0 = random_field(be, shape)
    u, v = be.zeros(shape), be.zeros(shape)
    copy = be.copy_bandwidth(u.shape[0] * u.strides[0], repeats)
    references: dict = {}
    rows = []
    for variant, block, k in configurations(variants, blocks, tiles, chip_steps, be, (ny, nx)):
        if k not in references:
            references[k] = naive_steps(be, u0, w, region, k)
        be.configure(variant, block, fmad, k if variant in gk.MULTI else None)
        be.prepare(u, v, w)
        same = matches_naive(be, u0, w, region, references[k], k)
        with be.main:
            u[...] = u0
            v[...] = u0
        per_step = time_config(be, u, v, w, region, repeats, -(-steps // k) * k)
        rows.append(_row(variant, block, k, per_step, ny * nx, be.dtype.itemsize, copy, same))
    res = {"gpu": be.gpu_name, "gpu_index": be.device_index, "dtype": be.dtype.name, "shape": [ny, nx],
           "repeats": repeats, "steps_per_repeat": steps, "fmad": fmad, "copy_gbs": copy / 1e9,
           "date": time.strftime("%Y-%m-%d %H:%M"), "cupy": be.cp.__version__, "rows": rows,
           "best": best_per_variant(rows)}
    if save and res["best"]:
        store_tuned(entries(res))
    return res


def configurations(variants, blocks, tiles, chip_steps=None, be=None, interior=None) -> list[tuple]:
    """(variant, block, k) in sweep order: each variant's blocks (a tiled variant's also with its
    default block for this grid, when `be` and `interior` are given), and k for the ones
    that take several steps per launch; `chip` only where it fits."""
    out = []
    for variant in variants or list(gk.VARIANTS):
        found = _blocks_for(variant, blocks)
        if be is not None and variant in gk.TILED:
            fitted = dict.fromkeys(be._default_block(variant, interior, k) for k in _ks(variant, tiles, chip_steps))
            found += [b for b in fitted if b not in found]
        if be is not None and variant in gk.ON_CHIP:
            found = [b for b in found if be.chip_layout(interior, b) is not None]
        out += [(variant, block, k) for block in found for k in _ks(variant, tiles, chip_steps)]
    return out


def _ks(variant: str, tiles, chip_steps) -> list[int]:
    if variant in gk.ON_CHIP:
        return list(chip_steps or gk.SWEEP_CHIP_STEPS)
    if variant in gk.TILED:
        return [t for t in (tiles or gk.SWEEP_TILES) if gk.tile_problem(variant, t) is None]
    return [1]


def _blocks_for(variant: str, blocks):
    if variant == "expr":
        return [None]
    return [b for b in (blocks or gk.SWEEP[variant]) if gk.block_problem(variant, b) is None]


def _row(variant, block, k, per_step, points, itemsize, copy, same) -> dict:
    med = float(np.median(per_step))
    gbs = points * 2 * itemsize / med / 1e9
    return {"kernel": variant, "block": list(block) if block else None, "time_tile": k, "seconds_per_step": med,
            "spread": [float(min(per_step)), float(max(per_step))], "gups": points / med / 1e9,
            "effective_gbs": gbs, "fraction_of_copy": gbs / (copy / 1e9), "bitwise_vs_naive": same}


def best_per_variant(rows: list[dict]) -> dict:
    """The fastest bitwise-correct row of each variant."""
    best = {}
    for r in rows:
        if r["bitwise_vs_naive"] and (r["kernel"] not in best or r["seconds_per_step"] < best[r["kernel"]]["seconds_per_step"]):
            best[r["kernel"]] = r
    return best


def entries(res: dict) -> dict:
    """tune.json entries: the fastest bitwise-correct block of each (variant, k)."""
    gpu, dtype, shape = res["gpu"], res["dtype"], res["shape"]
    meta = {"measured": res["date"], "cupy": res["cupy"]}
    out: dict = {}
    for r in res["rows"]:
        key = tune_key(gpu, dtype, shape, r["kernel"], r["time_tile"])
        if r["bitwise_vs_naive"] and (key not in out or r["seconds_per_step"] < out[key]["seconds_per_step"]):
            out[key] = {**meta, "kernel": r["kernel"], "block": r["block"], "time_tile": r["time_tile"],
                        "seconds_per_step": r["seconds_per_step"], "fraction_of_copy": r["fraction_of_copy"]}
    return out


def print_tune(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=120)
    ny, nx = res["shape"]
    t = Table(title=f"stencil tune: {ny}x{nx} {res['dtype']} on {res['gpu']}, median of {res['repeats']} x "
                    f"{res['steps_per_repeat']} steps (CUDA events)")
    for col in ("kernel", "block", "k", "ms/step", "G updates/s", "GB/s", "of copy", "bitwise", "best"):
        t.add_column(col, justify="right")
    best = res["best"]
    for r in res["rows"]:
        mark = "*" if best.get(r["kernel"]) is r else ""
        t.add_row(r["kernel"], "x".join(map(str, r["block"])) if r["block"] else "-", str(r.get("time_tile", 1)),
                  f"{r['seconds_per_step'] * 1e3:.4f}",
                  f"{r['gups']:.1f}", f"{r['effective_gbs']:.0f}", f"{r['fraction_of_copy']:.1%}",
                  "yes" if r["bitwise_vs_naive"] else "NO", mark)
    con.print(t)
    con.print(f"device-to-device copy: {res['copy_gbs']:.0f} GB/s (read + written), measured in this run")
    if best:
        fastest = min(best.values(), key=lambda r: r["seconds_per_step"])
        line = (f"fastest: {fastest['kernel']} {fastest['block']} k={fastest.get('time_tile', 1)} at "
                f"{fastest['fraction_of_copy']:.1%} of copy bandwidth")
        if "vec" in best and fastest["kernel"] != "vec":
            line += f", {best['vec']['seconds_per_step'] / fastest['seconds_per_step']:.2f}x vec"
        if "expr" in best:
            line += f", {best['expr']['seconds_per_step'] / fastest['seconds_per_step']:.1f}x the expr baseline"
        con.print(line)
    if any(not r["bitwise_vs_naive"] for r in res["rows"]):
        con.print("[red]some configurations differ from the naive kernel; they were not stored[/red]")
