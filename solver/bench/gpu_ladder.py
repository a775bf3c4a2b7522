"""GPU rungs of the ladder: SAXPY and the three reductions of kernels/ladder.cu, launched with CuPy.

The module is compiled once per element type (NVRTC, `--fmad=false`, ELEM and BLOCK as defines) and
kept for the process; CuPy also caches the binary on disk. Launch shape: grid-stride loops over
`blocks()` = 8 blocks of BLOCK = 256 threads per SM (a full SM's worth of threads), so the block
reduction issues that many atomics, the per-element version one per element.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

BLOCK = 256
SOURCE = Path(__file__).resolve().parent / "kernels" / "ladder.cu"
ELEM = {"float64": "double", "float32": "float"}


@lru_cache(maxsize=None)
def module(dtype: str):
    import cupy

    return cupy.RawModule(code=SOURCE.read_text(),
                          options=("--std=c++14", "--fmad=false", f"-DELEM={ELEM[dtype]}", f"-DBLOCK={BLOCK}"))


@lru_cache(maxsize=None)
def _blocks(device: int) -> int:
    import cupy

    return 8 * cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"]


def blocks() -> int:
    """8 blocks of BLOCK threads per SM of the current device."""
    import cupy

    return _blocks(cupy.cuda.Device().id)


def launch_saxpy(y, x, a) -> None:
    k = module(x.dtype.name).get_function("saxpy")
    k((blocks(),), (BLOCK,), (x, y, x.dtype.type(a), np.int64(x.size)))


def _sum(kernel: str, x, total) -> None:
    total.fill(0)
    module(x.dtype.name).get_function(kernel)((blocks(),), (BLOCK,), (x, total, np.int64(x.size)))


def sum_atomic(x, total) -> None:
    """One atomicAdd(double) per element on one address: the wrong way."""
    _sum("sum_atomic", x, total)


def sum_block(x, total) -> None:
    """Shared-memory tree per block, one atomicAdd per block."""
    _sum("sum_block", x, total)


def cupy_sum(x, total) -> None:
    """CuPy's own reduction (CUB), accumulated in float64."""
    import cupy

    cupy.sum(x, dtype=cupy.float64, out=total.reshape(()))
