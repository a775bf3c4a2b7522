"""`stencil bench`: the kernel alone, against a copy bandwidth measured in the same run.

Each backend is timed over `repeats` batches of `steps` steps after two warm-up steps; the median
time per step is reported. The ceiling is a STREAM-like copy of arrays the size of the field, on the
same backend with the same thread count, also the median of `repeats`.
"""

from __future__ import annotations

import socket
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from .backends import backend_class, cpu_count
from .config import BackendSettings
from .info import cpu_model
from .physics import FLOPS_PER_UPDATE, Weights


def bench_weights(dtype: str) -> Weights:
    """Heat on a square grid at 0.9 of the stable step: wx = wy = 0.225, wc = 0.1."""
    return Weights(0.1, 0.225, 0.225).cast(dtype)


def time_backend(be, size: int, repeats: int, steps: int) -> list[float]:
    """Seconds per step for each repeat, on a random field (never zeros)."""
    host = np.random.default_rng(1).random((size + 2, size + 2)).astype(be.dtype)
    u, v = be.asarray(host), be.asarray(host)
    w = bench_weights(be.dtype.name)
    region = (1, size + 1, 1, size + 1)
    be.prepare(u, v, w)
    u, v = be.advance(u, v, w, steps, region)
    be.synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        u, v = be.advance(u, v, w, steps, region)
        be.synchronize()
        times.append((time.perf_counter() - t) / steps)
    return times


def variants(names: list[str], time_tiles: list[int]) -> list[tuple[str, BackendSettings]]:
    """(label, settings) per measured variant: numba once per time tile (1 = the plain kernel)."""
    out = []
    for name in names:
        if name == "numba":
            out += [(f"numba tt={t}", BackendSettings(name=name, time_tile=t)) for t in time_tiles]
        else:
            out.append((name, BackendSettings(name=name)))
    return out


def stencil_bench(size: int, dtype: str, threads: int | None, names: list[str], repeats: int, steps: int,
                  time_tiles: list[int] = (1, 4)) -> dict:
    threads = threads or cpu_count()
    itemsize = np.dtype(dtype).itemsize
    out = {"host": socket.gethostname(), "cpu": cpu_model(), "cores": cpu_count(), "size": size, "dtype": dtype,
           "threads": threads, "repeats": repeats, "steps_per_repeat": steps, "date": time.strftime("%Y-%m-%d %H:%M"),
           "results": []}
    copies = {}
    for label, settings in variants(names, list(time_tiles)):
        name = settings.name
        be = backend_class(name)(settings, dtype, threads)
        if name not in copies:
            copies[name] = be.copy_bandwidth((size + 2) ** 2 * itemsize, repeats)
        copy = copies[name]
        per_step = time_backend(be, size, repeats, steps)
        med = float(np.median(per_step))
        updates = size * size / med
        gbs = updates * 2 * itemsize / 1e9
        out["results"].append({"backend": label, "threads": be.threads, "seconds_per_step": med,
                               "spread": [float(min(per_step)), float(max(per_step))],
                               "mlups": updates / 1e6, "effective_gbs": gbs, "gflops": updates * FLOPS_PER_UPDATE / 1e9,
                               "copy_gbs": copy / 1e9, "fraction_of_copy": gbs / (copy / 1e9)})
    return out


def print_bench(res: dict) -> None:
    con = Console(width=120)
    t = Table(title=f"stencil bench: {res['size']}x{res['size']} {res['dtype']}, median of {res['repeats']} x "
                    f"{res['steps_per_repeat']} steps, {res['cpu']} ({res['cores']} cores)")
    for col in ("backend", "threads", "ms/step", "MLUP/s", "GB/s", "copy GB/s", "of copy"):
        t.add_column(col, justify="right")
    for r in res["results"]:
        t.add_row(r["backend"], str(r["threads"]), f"{r['seconds_per_step'] * 1e3:.3f}", f"{r['mlups']:.0f}",
                  f"{r['effective_gbs']:.2f}", f"{r['copy_gbs']:.2f}", f"{r['fraction_of_copy']:.2f}")
    con.print(t)
    by = {r["backend"]: r for r in res["results"]}
    for label, r in by.items():
        if label.startswith("numba") and "numpy" in by:
            con.print(f"{label} / numpy: {r['mlups'] / by['numpy']['mlups']:.1f}x")
    con.print("Effective GB/s counts 2 x itemsize per update; above the copy bandwidth (of copy > 1) means "
              "time tiling reuses data in cache across steps.")
