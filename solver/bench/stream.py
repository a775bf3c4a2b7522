"""Streaming kernels on every backend (copy, SAXPY) and a timer that runs them on every rank at once.

Bytes counted (the STREAM convention, and the stencil's: 2 x itemsize per update):
- copy  b = a          : 2 x itemsize per element (one read, one write); with ordinary stores on the
                         CPU, like the stencil's (numba: bench_kernels.copy; numpy: a multiply by 1.0);
- memcpy b = a         : the same bytes, through memcpy, which for large arrays may use non-temporal
                         stores (no read-for-ownership of b): the faster ceiling a stencil with
                         ordinary stores cannot reach, shown for comparison;
- SAXPY y = a*x + y    : 3 x itemsize per element (two reads, one write).
These are the bytes the operation must move; numpy's SAXPY moves more (a temporary for a*x, so two
passes), which is part of what the ladder shows.

Schedule of `concurrent_rate`: a warm-up call sizes `inner` (calls per timed repeat) so that a repeat
lasts at least MIN_REPEAT_S on the slowest rank; then for each repeat: barrier, time `inner` calls and
a device synchronize on every rank, take the slowest rank's time (allreduce MAX). The rate is all
ranks' bytes over the median of those times: the machine's aggregate bandwidth with every process
streaming at once, never a sum of rates measured at different moments.
"""

from __future__ import annotations

import math
import time

import numpy as np

KINDS = {"copy": 2, "memcpy": 2, "saxpy": 3}  # arrays touched per element
MIN_REPEAT_S = 0.02
SAXPY_A = 0.5  # a power of two: a*x is exact, so results can be compared exactly


class Stream:
    """copy/SAXPY on host memory with numpy (one thread, a temporary for a*x)."""

    def __init__(self, n: int, dtype: str = "float64", threads: int = 1, local_rank: int = 0):
        self.n, self.dtype = n, np.dtype(dtype)
        self.x = self.fill(np.random.default_rng(1).random(n))
        self.y = self.fill(np.random.default_rng(2).random(n))
        self.a = self.dtype.type(SAXPY_A)

    def fill(self, host: np.ndarray):
        return host.astype(self.dtype, copy=False)

    def copy(self) -> None:
        np.multiply(self.x, self.dtype.type(1.0), out=self.y)

    def memcpy(self) -> None:
        np.copyto(self.y, self.x)

    def saxpy(self) -> None:
        if not hasattr(self, "_t"):
            self._t = np.empty_like(self.x)
        np.multiply(self.x, self.a, out=self._t)
        np.add(self._t, self.y, out=self.y)

    def synchronize(self) -> None:
        pass

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)

    def nbytes(self, kind: str) -> int:
        return KINDS[kind] * self.n * self.dtype.itemsize


class NumbaStream(Stream):
    """prange loops over the array; `threads` numba threads (the caller sized the pool)."""

    def __init__(self, n: int, dtype: str = "float64", threads: int = 1, local_rank: int = 0):
        import numba

        from . import cpu_ladder as bench_kernels

        numba.set_num_threads(threads)
        self.k = bench_kernels
        super().__init__(n, dtype, threads, local_rank)

    def copy(self) -> None:
        self.k.copy(self.y, self.x, self.dtype.type(1.0))

    def memcpy(self) -> None:
        self.k.memcpy(self.y, self.x)

    def saxpy(self) -> None:
        self.k.saxpy(self.y, self.x, self.a)


class CupyStream(Stream):
    """Device memory on the GPU of this node-local rank: copy is cudaMemcpyAsync device-to-device,
    SAXPY a grid-stride kernel from kernels/ladder.cu."""

    def __init__(self, n: int, dtype: str = "float64", threads: int = 1, local_rank: int = 0):
        import cupy

        self.cp = cupy
        cupy.cuda.Device(local_rank % cupy.cuda.runtime.getDeviceCount()).use()
        super().__init__(n, dtype, threads, local_rank)

    def fill(self, host: np.ndarray):
        return self.cp.asarray(host.astype(self.dtype, copy=False))

    def copy(self) -> None:
        self.y.data.copy_from_device_async(self.x.data, self.x.nbytes)

    memcpy = copy  # GPU memory has no read-for-ownership to skip

    def saxpy(self) -> None:
        from .gpu_ladder import launch_saxpy

        launch_saxpy(self.y, self.x, self.a)

    def synchronize(self) -> None:
        self.cp.cuda.Device().synchronize()

    def to_host(self, a) -> np.ndarray:
        return self.cp.asnumpy(a)


STREAMS = {"numpy": Stream, "numba": NumbaStream, "cupy": CupyStream}


def make_stream(backend: str, n: int, dtype: str = "float64", threads: int = 1, local_rank: int = 0) -> Stream:
    return STREAMS[backend](n, dtype, threads, local_rank)


def time_calls(fn, sync, inner: int) -> float:
    t = time.perf_counter()
    for _ in range(inner):
        fn()
    sync()
    return time.perf_counter() - t


def concurrent_rate(comm, fn, sync, nbytes: int, repeats: int = 5) -> dict:
    """Aggregate bytes/s of `fn` run on every rank at once (schedule in the module docstring)."""
    comm.barrier()
    warm = comm.allmax(time_calls(fn, sync, 1))
    inner = max(1, math.ceil(MIN_REPEAT_S / max(warm, 1e-9)))
    times = []
    for _ in range(repeats):
        comm.barrier()
        times.append(comm.allmax(time_calls(fn, sync, inner)) / inner)
    total = comm.allsum(nbytes)
    med = float(np.median(times))
    return {"gbs": total / med / 1e9, "per_rank_gbs": total / med / 1e9 / comm.size, "seconds": med,
            "spread_gbs": [total / max(times) / 1e9, total / min(times) / 1e9], "inner": inner, "repeats": repeats}
