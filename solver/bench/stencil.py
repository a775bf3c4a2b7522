"""`stencil bench`: the kernel alone, against a copy bandwidth measured in the same run.

Round-robin: each of `repeats` rounds times a STREAM-like copy of field-sized arrays on every backend
(same thread count), then a batch of steps of every variant, so a noisy neighbour on a shared machine
slows every variant and its ceiling alike; medians over rounds are reported. A batch is `steps` steps
(numpy: a tenth of them, at least 2) through `backend.advance()`, exactly as a one-process run calls it
between two stops - for numba with time tiles, (steps - 1) // tile tiles and then plain steps.
"""

from __future__ import annotations

import socket
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from ..backends import backend_class
from ..case import BackendSettings
from ..core.machine import cpu_count, cpu_model
from ..core.physics import FLOPS_PER_UPDATE, Weights


def bench_weights(dtype: str) -> Weights:
    """Heat on a square grid at 0.9 of the stable step: wx = wy = 0.225, wc = 0.1."""
    return Weights(0.1, 0.225, 0.225).cast(dtype)


class Variant:
    """One backend configuration with its two fields, ready to time batches of steps."""

    def __init__(self, label: str, be, size: int, steps: int):
        self.label, self.be, self.steps = label, be, steps
        host = np.random.default_rng(1).random((size + 2, size + 2)).astype(be.dtype)  # never zeros
        self.u, self.v = be.asarray(host), be.asarray(host)
        self.w = bench_weights(be.dtype.name)
        self.region = (1, size + 1, 1, size + 1)
        be.prepare(self.u, self.v, self.w)
        self.batch()  # warm-up: first touch, caches, clocks
        self.times: list[float] = []

    def batch(self) -> float:
        t = time.perf_counter()
        self.u, self.v = self.be.advance(self.u, self.v, self.w, self.steps, self.region)
        self.be.synchronize()
        return (time.perf_counter() - t) / self.steps


def variants(names: list[str], time_tiles: list[int]) -> list[tuple[str, BackendSettings]]:
    """(label, settings) per measured variant: numba once per time tile (1 = the plain kernel, 0 = the
    default: the stored `stencil bench --tune` choice, else numba_backend.default_time_tile)."""
    out = []
    for name in names:
        if name == "numba":
            out += [(f"numba tt={t or 'default'}", BackendSettings(name=name, time_tile=t or None)) for t in time_tiles]
        else:
            out.append((name, BackendSettings(name=name)))
    return out


def stencil_bench(size: int, dtype: str, threads: int | None, names: list[str], repeats: int, steps: int,
                  time_tiles: list[int] = (1, 0)) -> dict:
    threads = threads or cpu_count()
    itemsize = np.dtype(dtype).itemsize
    out = {"host": socket.gethostname(), "cpu": cpu_model(), "cores": cpu_count(), "size": size, "dtype": dtype,
           "threads": threads, "repeats": repeats, "steps_per_repeat": steps, "date": time.strftime("%Y-%m-%d %H:%M"),
           "results": []}
    runs = []
    for label, settings in variants(names, list(time_tiles)):
        be = backend_class(settings.name)(settings, dtype, threads)
        if hasattr(be, "use_tuned"):  # numba tt=default: the stored `stencil bench --tune` choice, if any
            from ..backends.numba_backend import stored_tile

            be.use_tuned(stored_tile(dtype, threads))
        runs.append(Variant(label, be, size, steps if settings.name != "numpy" else max(2, steps // 10)))
    ceilings = {r.be.name: r.be for r in runs}  # one copy ceiling per backend
    copies: dict[str, list[float]] = {name: [] for name in ceilings}
    for _ in range(repeats):
        for name, be in ceilings.items():
            copies[name].append(be.copy_bandwidth((size + 2) ** 2 * itemsize, repeats=1))
        for r in runs:
            r.times.append(r.batch())
    for r in runs:
        med = float(np.median(r.times))
        copy = float(np.median(copies[r.be.name])) / 1e9
        updates = size * size / med
        gbs = updates * 2 * itemsize / 1e9
        out["results"].append({"backend": r.label, "threads": r.be.threads, "seconds_per_step": med,
                               "steps_per_batch": r.steps, "spread": [float(min(r.times)), float(max(r.times))],
                               "mlups": updates / 1e6, "effective_gbs": gbs, "gflops": updates * FLOPS_PER_UPDATE / 1e9,
                               "copy_gbs": copy, "fraction_of_copy": gbs / copy})
    return out


def print_bench(res: dict) -> None:
    con = Console(width=120)
    t = Table(title=f"stencil bench: {res['size']}x{res['size']} {res['dtype']}, median of {res['repeats']} rounds "
                    f"(copy, then a batch of each variant), {res['cpu']} ({res['cores']} cores), {res['date']}")
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
