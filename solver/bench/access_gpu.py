"""GPU patterns of `stencil bench access`: kernels/access.cu launched with CuPy, timed with CUDA events.

Compiled once per process (NVRTC, BLOCK as a define; CuPy also caches the binary on disk). Launch shape:
a grid-stride loop over at most 8 blocks of BLOCK = 256 threads per SM (fewer for small arrays, so no
block is idle); each call runs `passes` passes inside one launch, so launch overhead does not count
for small arrays.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

BLOCK = 256
SOURCE = Path(__file__).resolve().parent / "kernels" / "access.cu"


@lru_cache(maxsize=None)
def module():
    import cupy

    return cupy.RawModule(code=SOURCE.read_text(), options=("--std=c++14", f"-DBLOCK={BLOCK}"))


def grid(n: int) -> int:
    import cupy

    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    return max(1, min(8 * sms, -(-n // BLOCK)))


def gpu_patterns(x: np.ndarray, strides: list[int], cols: int) -> list[tuple]:
    """(name, stride, run) for each pattern; `cols`: the row length of the 2-D view (access.shape_2d)."""
    import cupy

    n = x.size
    xd = cupy.asarray(x)
    rng = np.random.default_rng(0)
    index = cupy.asarray(rng.permutation(n).astype(np.int32))
    visit, gather = module().get_function("visit"), module().get_function("gather")
    total = cupy.zeros(1, dtype=cupy.uint64)
    start, end = cupy.cuda.Event(), cupy.cuda.Event()

    def launcher(launch):
        def run(passes: int) -> tuple[float, int]:
            total.fill(0)
            start.record()
            launch(np.int32(passes))
            end.record()
            end.synchronize()
            return cupy.cuda.get_elapsed_time(start, end) / 1e3, int(total.get()[0])
        return run

    def strided(s: int):
        log2s, log2per = s.bit_length() - 1, (n // s).bit_length() - 1
        return launcher(lambda p: visit((grid(n),), (BLOCK,), (xd, total, np.uint64(n), np.int32(log2s),
                                                             np.int32(log2per), p)))

    random = launcher(lambda p: gather((grid(n),), (BLOCK,), (xd, index, total, np.uint64(n), p)))
    return [("contiguous", 1, strided(1)), *(("strided", s, strided(s)) for s in strides if s < n),
            ("random", 0, random), ("rows", 1, strided(1)), ("cols", cols, strided(cols))]
