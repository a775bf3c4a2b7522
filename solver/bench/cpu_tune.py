"""`stencil bench --tune`: numba's time tile (steps per sweep; under MPI also the halo depth) and cache
tile (bytes of ring buffer per thread, which sets the column blocking), chosen by measurement.

Round-robin: each of `repeats` rounds times one batch of `steps` steps of every (time tile, cache tile)
pair through backend.advance(), as a one-process run calls it between stops, on a random field of
size x size points; medians over rounds decide. The fastest pair is stored in tiles.json of the
machine's cache (solver.core.cache: STENCIL_CACHE_DIR, else ~/.cache/stencil) under this CPU model,
dtype and thread count, and becomes
the default of every run with backend.time_tile null on this machine (the record says where its time
tile came from). Without an entry the default is numba_backend.default_time_tile and RING_BYTES. An
MPI rank runs with its own thread count (usually 1): tune with --threads 1 for those runs.
"""

from __future__ import annotations

import time

import numpy as np

from ..backends import backend_class
from ..backends.numba_backend import TILE_CACHE, tile_key
from ..case import BackendSettings
from ..core import cache
from ..core.machine import cpu_count, cpu_model
from .stencil import bench_weights

TILES = (1, 2, 3, 4, 6, 8, 12, 16)
RINGS = (256 << 10, 1 << 20, 4 << 20)


def tune_cpu(size: int, dtype: str, threads: int | None, repeats: int, steps: int,
             tiles=TILES, rings=RINGS, save: bool = True) -> dict:
    threads = threads or cpu_count()
    fields = [np.random.default_rng(1).random((size + 2, size + 2)).astype(dtype) for _ in range(2)]  # shared
    w, region = bench_weights(dtype), (1, size + 1, 1, size + 1)
    runs = []
    for k in tiles:
        for ring in (rings if k > 1 else rings[:1]):  # no ring buffer without tiling
            be = backend_class("numba")(BackendSettings(name="numba", time_tile=k), dtype, threads)
            be.ring_bytes = ring
            be.prepare(*fields, w)
            runs.append(((k, ring), be, []))

    def batch(be) -> float:
        t = time.perf_counter()
        fields[:] = be.advance(fields[0], fields[1], w, steps, region)
        return (time.perf_counter() - t) / steps

    for _, be, _ in runs:  # warm-up: first touch, compilation, clocks
        batch(be)
    for _ in range(repeats):
        for _, be, times in runs:
            times.append(batch(be))
    rows = [{"time_tile": k, "ring_bytes": ring, "column_blocks": be.column_blocks(size, k) if k > 1 else 1,
             "seconds_per_step": float(np.median(ts)), "spread": [float(min(ts)), float(max(ts))],
             "mlups": size * size / float(np.median(ts)) / 1e6} for (k, ring), be, ts in runs]
    best = min(rows, key=lambda r: r["seconds_per_step"])
    plain = next(r for r in rows if r["time_tile"] == 1)
    out = {"cpu": cpu_model(), "size": size, "dtype": dtype, "threads": threads, "repeats": repeats,
           "steps_per_batch": steps, "date": time.strftime("%Y-%m-%d %H:%M"), "results": rows,
           "best": {**best, "speedup_over_time_tile_1": plain["seconds_per_step"] / best["seconds_per_step"]}}
    if save:
        cache.update(TILE_CACHE, {tile_key(dtype, threads): {"time_tile": best["time_tile"], "ring_bytes": best["ring_bytes"],
                                                         "size": size, "measured": out["date"]}})
    return out


def print_tune_cpu(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"numba time tile x cache tile: {res['size']}^2 {res['dtype']}, {res['threads']} thread(s), "
                    f"median of {res['repeats']} rounds of {res['steps_per_batch']} steps, {res['cpu']}, {res['date']}")
    for col in ("time tile", "ring KiB", "column blocks", "ms/step", "MLUP/s"):
        t.add_column(col, justify="right")
    for r in res["results"]:
        t.add_row(str(r["time_tile"]), str(r["ring_bytes"] >> 10), str(r["column_blocks"]),
                  f"{r['seconds_per_step'] * 1e3:.2f}", f"{r['mlups']:.0f}")
    Console(width=120).print(t)
    b = res["best"]
    print(f"best: time_tile {b['time_tile']}, ring {b['ring_bytes'] >> 10} KiB "
          f"({b['speedup_over_time_tile_1']:.2f}x time_tile 1)")
