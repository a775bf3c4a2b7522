"""numba kernels of `stencil bench access`: read every element of an array once per pass, in an order.

Every kernel splits the array into `parts` equal contiguous slices, one per thread (prange), and each
thread reads its own slice `passes` times in the kernel's order, adding every element into an int64
accumulator that is returned (so the loads cannot be removed as dead code). The data are int64 (8
bytes, as float64): an integer add takes one cycle and may be reordered, so the adds never hide the
loads' speed (a float64 chain of dependent adds would cap every order at one element per 4 cycles).
The orders:

- contiguous: element 0, 1, 2, ... (LLVM vectorises it: SIMD loads and adds);
- strided(s): 0, s, 2s, ..., then 1, 1+s, ..., up to s-1, ...: every element once, s elements apart;
- gather: the order of a precomputed index array (a random permutation, built before timing, so index
  generation is not timed; reading the index itself is a contiguous stream of 4 bytes per element);
- rows / cols of a 2-D C-ordered array: a[i, :] row after row (unit stride), or a[:, j] column after
  column (stride = the row length).

Each pass reads every element exactly once whatever the order, so the bytes per pass are the array's
and every kernel must return exactly passes x sum(x): the bench checks it.

strided, gather and cols are compiled with LLVM's loop and SLP vectorisers off (`scalar`): left on,
LLVM turns their loads into AVX-512 gathers (the development VM's Xeon has them), and the rate then
measures the gather instruction rather than the access order. numba reads the vectorisers' settings
when it builds a function's pass pipeline, so they are switched off around the (eager) compilation of
those three only; tests/test_access.py checks their machine code has no gathers and no packed adds.
"""

import numpy as np
from numba import config, njit, prange, types

I64, I32 = types.int64, types.int32


@njit(cache=True)
def _lo(n, parts, t):
    return t * n // parts


@njit(parallel=True, cache=True)
def contiguous(x, parts, passes):
    partial = np.zeros(parts, np.int64)
    n = x.size
    for t in prange(parts):
        chunk = x[_lo(n, parts, t):_lo(n, parts, t + 1)]
        s = 0
        for _ in range(passes):
            for i in range(chunk.size):
                s += chunk[i]
        partial[t] = s
    return partial.sum()


def strided(x, stride, parts, passes):
    partial = np.zeros(parts, np.int64)
    n = x.size
    for t in prange(parts):
        chunk = x[_lo(n, parts, t):_lo(n, parts, t + 1)]
        m = chunk.size
        s = 0
        for _ in range(passes):
            for o in range(stride):
                for k in range((m - o + stride - 1) // stride):
                    s += chunk[o + k * stride]
        partial[t] = s
    return partial.sum()


def gather(x, index, parts, passes):
    """index holds, for each thread's slice, a permutation of that slice's own positions."""
    partial = np.zeros(parts, np.int64)
    n = x.size
    for t in prange(parts):
        lo, hi = _lo(n, parts, t), _lo(n, parts, t + 1)
        s = 0
        for _ in range(passes):
            for k in range(lo, hi):
                s += x[index[k]]
        partial[t] = s
    return partial.sum()


@njit(parallel=True, cache=True)
def rows(a, parts, passes):
    partial = np.zeros(parts, np.int64)
    ny, nx = a.shape
    for t in prange(parts):
        s = 0
        for _ in range(passes):
            for i in range(_lo(ny, parts, t), _lo(ny, parts, t + 1)):
                for j in range(nx):
                    s += a[i, j]
        partial[t] = s
    return partial.sum()


def cols(a, parts, passes):
    partial = np.zeros(parts, np.int64)
    ny, nx = a.shape
    for t in prange(parts):
        s = 0
        for _ in range(passes):
            for j in range(_lo(nx, parts, t), _lo(nx, parts, t + 1)):
                for i in range(ny):
                    s += a[i, j]
        partial[t] = s
    return partial.sum()


SCALAR_SIGNATURES = {"strided": I64(I64[::1], I64, I64, I64), "gather": I64(I64[::1], I32[::1], I64, I64),
                     "cols": I64(I64[:, ::1], I64, I64)}


def scalar(fn, cache: bool = True):
    """`fn` compiled now for its signature, with LLVM's loop and SLP vectorisers off (module docstring)."""
    saved = config.LOOP_VECTORIZE, config.SLP_VECTORIZE
    config.LOOP_VECTORIZE = config.SLP_VECTORIZE = 0
    try:
        return njit(SCALAR_SIGNATURES[fn.__name__], parallel=True, cache=cache)(fn)
    finally:
        config.LOOP_VECTORIZE, config.SLP_VECTORIZE = saved


SCALAR_SOURCES = {"strided": strided, "gather": gather, "cols": cols}
strided, gather, cols = (scalar(fn) for fn in SCALAR_SOURCES.values())


def slice_permutation(n: int, parts: int, seed: int = 0) -> np.ndarray:
    """For each of `parts` equal slices, a random permutation of that slice's own indices (int32)."""
    rng = np.random.default_rng(seed)
    cuts = [t * n // parts for t in range(parts + 1)]
    return np.concatenate([(lo + rng.permutation(hi - lo)).astype(np.int32) for lo, hi in zip(cuts[:-1], cuts[1:])])
