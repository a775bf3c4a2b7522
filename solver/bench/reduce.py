"""`stencil bench reduction`: sum a large array the ways the textbooks contrast, each checked.

Data: uniform random numbers in [0, 1) (non-negative, so the sum is perfectly conditioned), one
array of `size` elements per rank, the same on every backend of a rank. Every variant accumulates in
float64. Reference: math.fsum of the same data, exactly rounded (across ranks: the exactly rounded
local sums, added with fsum on rank 0).

Tolerance, stated once for every variant: |s - ref| / ref <= n * u with u = 2**-53 and n the number
of elements summed: Higham's a-priori bound for summing n non-negative numbers in any order, so it
holds for every schedule (serial, per-thread partials, tree, atomics in any order). Typical errors are
far below it (about sqrt(n) * u for random orders), and the measured error is printed beside it.

Time: median of `repeats`, each repeat `inner` calls long enough (>= 20 ms) to be timed with the host
clock after a device synchronize. GB/s = bytes read (n * itemsize) / time; across ranks: all ranks'
bytes over the slowest rank's time.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .stream import MIN_REPEAT_S

U = 2.0**-53  # unit roundoff of float64


@dataclass
class Variant:
    name: str
    where: str  # cpu | gpu | mpi
    run: Callable[[], float]
    n: int
    itemsize: int
    sync: Callable[[], None] = lambda: None
    note: str = ""
    timed_once: bool = False  # too slow to repeat (the lock)
    extra: dict = field(default_factory=dict)


def median_seconds(v: Variant, comm, repeats: int) -> tuple[float, float]:
    """(median seconds per call over ranks' slowest, the value of the last call)."""
    comm.barrier()
    t = time.perf_counter()
    value = v.run()
    v.sync()
    warm = comm.allmax(time.perf_counter() - t)
    if v.timed_once:
        return warm, value
    inner = max(1, math.ceil(MIN_REPEAT_S / max(warm, 1e-9)))
    times = []
    for _ in range(repeats):
        comm.barrier()
        t = time.perf_counter()
        for _ in range(inner):
            value = v.run()
        v.sync()
        times.append(comm.allmax(time.perf_counter() - t) / inner)
    return float(np.median(times)), value


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


# CPU variants ----------------------------------------------------------------------------------

def locked_sum(x: np.ndarray, threads: int) -> float:
    """The wrong way: `threads` Python threads add every element into one shared total, taking a
    lock for each add (an OpenMP `critical` per element). Contention and the lock serialise it."""
    total = [0.0]
    lock = threading.Lock()

    def work(chunk: list[float]) -> None:
        for v in chunk:
            with lock:
                total[0] += v

    parts = [x[k * x.size // threads:(k + 1) * x.size // threads].tolist() for k in range(threads)]
    pool = [threading.Thread(target=work, args=(p,)) for p in parts]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    return total[0]


def cpu_variants(x: np.ndarray, x_lock: np.ndarray, threads: int) -> list[Variant]:
    import numba

    from . import cpu_ladder as k

    numba.set_num_threads(threads)
    b, ts = x.dtype.itemsize, plural(threads, "thread")
    return [
        Variant("numpy.sum (pairwise, 1 thread)", "cpu", lambda: float(np.sum(x, dtype=np.float64)), x.size, b),
        Variant("numba serial loop (1 thread)", "cpu", lambda: float(k.sum_serial(x)), x.size, b,
                note="one chain of dependent adds"),
        Variant(f"numba thread-local partials ({ts})", "cpu", lambda: float(k.sum_partials(x, threads)),
                x.size, b, note="one partial per thread, combined at the end"),
        Variant(f"numba partials + SIMD lanes ({ts})", "cpu",
                lambda: float(k.sum_partials_simd(x, threads)), x.size, b, note="fastmath reassoc in each chunk"),
        Variant(f"threads + one locked total ({ts})", "cpu", lambda: locked_sum(x_lock, threads),
                x_lock.size, b, note=f"the wrong way; small n = {x_lock.size}; Python threads", timed_once=True),
    ]


# GPU variants ----------------------------------------------------------------------------------

def gpu_variants(x: np.ndarray, local_rank: int) -> list[Variant]:
    import cupy

    from . import gpu_ladder as g

    cupy.cuda.Device(local_rank % cupy.cuda.runtime.getDeviceCount()).use()
    xd = cupy.asarray(x)
    total = cupy.zeros(1, dtype=cupy.float64)
    sync = cupy.cuda.Device().synchronize

    def runner(fn):
        def run() -> float:
            fn(xd, total)
            return float(total.get()[0])
        return run

    b, n = x.dtype.itemsize, x.size
    return [
        Variant("GPU: one atomicAdd per element", "gpu", runner(g.sum_atomic), n, b, sync,
                note="every add serialised on one address"),
        Variant("GPU: shared-memory block tree + 1 atomic/block", "gpu", runner(g.sum_block), n, b, sync,
                note=f"{g.blocks()} blocks x {g.BLOCK} threads, grid-stride"),
        Variant("GPU: cupy.sum (CUB)", "gpu", runner(g.cupy_sum), n, b, sync, note="library reduction"),
    ]


# across ranks ----------------------------------------------------------------------------------

def mpi_variants(x: np.ndarray, comm, threads: int) -> list[Variant]:
    from mpi4py import MPI

    from . import cpu_ladder as k

    def combine(op: str) -> Callable[[], float]:
        def run() -> float:
            local = np.array([k.sum_partials(x, threads)])
            out = np.zeros(1)
            if op == "Reduce":
                comm.mpi.Reduce(local, out, op=MPI.SUM, root=0)
                out = comm.mpi.bcast(out, root=0)  # so every rank can report; not part of MPI_Reduce's cost
            else:
                comm.mpi.Allreduce(local, out, op=MPI.SUM)
            return float(out[0])
        return run

    n, b, ts = x.size * comm.size, x.dtype.itemsize, plural(threads, "thread")
    note = f"local numba partials ({ts}) + "
    return [Variant(f"MPI: local sums + Reduce ({comm.size} ranks)", "mpi", combine("Reduce"), n, b,
                    note=note + "MPI_Reduce to rank 0 (+ bcast of the result, timed too)"),
            Variant(f"MPI: local sums + Allreduce ({comm.size} ranks)", "mpi", combine("Allreduce"), n, b,
                    note=note + "MPI_Allreduce")]


MESSAGE_ELEMENTS = tuple(8**k for k in range(8))  # float64 elements: 8 B to 16 MiB


def allreduce_by_size(comm, repeats: int, elements=MESSAGE_ELEMENTS) -> list[dict]:
    """MPI_Allreduce (sum) of n float64 per rank for each n: median seconds per call (slowest rank), back to
    back between barriers as median_seconds times them; each result checked (rank r sends r + 1 everywhere,
    so every element must be size * (size + 1) / 2, exact in float64)."""
    from mpi4py import MPI

    rows = []
    for n in elements:
        send, recv = np.full(n, comm.rank + 1.0), np.empty(n)

        def run() -> float:
            comm.mpi.Allreduce(send, recv, op=MPI.SUM)
            return float(recv[-1])

        seconds, _ = median_seconds(Variant(f"Allreduce {n}", "mpi", run, n, 8), comm, repeats)
        ok = comm.allmax(float(np.any(recv != comm.size * (comm.size + 1) / 2))) == 0
        rows.append({"elements": n, "bytes": 8 * n, "seconds": seconds, "gbs": 8 * n / seconds / 1e9, "passed": ok})
    return rows


# the bench -------------------------------------------------------------------------------------

def local_data(size: int, dtype: str, rank: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng([seed, rank]).random(size).astype(dtype)


def references(comm, x: np.ndarray, x_lock: np.ndarray) -> dict:
    """Exactly rounded sums: this rank's array, its small lock array, and all ranks' arrays."""
    mine = math.fsum(x.astype(np.float64))
    parts = comm.gather(mine)
    total = comm.bcast(math.fsum(parts) if comm.rank == 0 else None)
    return {"cpu": mine, "gpu": mine, "mpi": total, "lock": math.fsum(x_lock.astype(np.float64))}


def result(v: Variant, seconds: float, value: float, ref: float, comm) -> dict:
    """One row; the error is the worst over ranks (each rank checks its own sum)."""
    rel = abs(value - ref) / abs(ref) if ref else abs(value)
    rel = comm.allmax(rel if math.isfinite(rel) else math.inf)
    tol = v.n * U
    total_bytes = v.n * v.itemsize * (comm.size if v.where != "mpi" else 1)
    return {"variant": v.name, "where": v.where, "n": v.n, "seconds": seconds,
            "gbs": total_bytes / seconds / 1e9, "value": value, "reference": ref, "relative_error": rel,
            "tolerance": tol, "passed": bool(rel <= tol), "note": v.note}


def reduction_bench(size: int, lock_size: int, threads: int, dtype: str, gpu: bool, comm, repeats: int = 5) -> dict:
    from ..backends.numba_backend import _ensure_thread_pool
    from ..core.machine import cpu_count, cpu_model

    _ensure_thread_pool(threads)
    x = local_data(size, dtype, comm.rank)
    x_lock = x[:lock_size]
    refs = references(comm, x, x_lock)
    variants = cpu_variants(x, x_lock, threads)
    if gpu:
        variants += gpu_variants(x, comm.node()[0])
    if comm.size > 1:
        variants += mpi_variants(x, comm, threads)
    rows = []
    for v in variants:
        seconds, value = median_seconds(v, comm, repeats)
        ref = refs["lock"] if v.timed_once else refs[v.where]
        rows.append(result(v, seconds, value, ref, comm))
    by_size = allreduce_by_size(comm, repeats) if comm.mpi is not None else []
    return {"bench": "reduction", "size": size, "lock_size": x_lock.size, "dtype": dtype, "threads": threads,
            "ranks": comm.size, "repeats": repeats, "cpu": cpu_model(), "cores": cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "reference": "math.fsum (exactly rounded); tolerance n * 2**-53 (Higham's bound, any order)",
            "results": rows, "allreduce_by_size": by_size, "mpi_library": comm.library() if comm.mpi else None,
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}


def print_reduction(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"stencil bench reduction: {res['size']} x {res['dtype']} per rank, {res['ranks']} rank(s), "
                    f"median of {res['repeats']}; {res['cpu']} ({res['cores']} cores)")
    for col in ("variant", "n", "ms", "GB/s", "rel. error", "tolerance", "check", "note"):
        t.add_column(col, justify="left" if col in ("variant", "note") else "right")
    for r in res["results"]:
        t.add_row(r["variant"], str(r["n"]), f"{r['seconds'] * 1e3:.3f}", f"{r['gbs']:.3f}",
                  f"{r['relative_error']:.1e}", f"{r['tolerance']:.1e}", "ok" if r["passed"] else "FAIL", r["note"])
    Console(width=170).print(t)
    print(f"reference: {res['reference']}; GB/s counts the bytes read once (n x itemsize)")
    if res.get("allreduce_by_size"):
        print(f"MPI_Allreduce (sum, float64) on {res['ranks']} rank(s), median of {res['repeats']}, slowest rank: " +
              ", ".join(f"{r['bytes']} B {r['seconds'] * 1e6:.2f} us" + ("" if r["passed"] else " WRONG")
                        for r in res["allreduce_by_size"]))
