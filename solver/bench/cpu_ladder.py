"""numba kernels for the first rungs of the ladder: streaming (copy, SAXPY) and reductions.

Loops index 1-D slices from 0 with a range() variable: numba then knows the index is non-negative and
emits no negative-index wraparound, which would otherwise make LLVM vectorise the loads as gathers
(measured: a reassociated sum over x[lo:hi] indexed by i in range(lo, hi) ran at half the scalar speed).

Imported only by the ladder benchmarks (numba is imported here). Threads: `numba.set_num_threads`
decides how many of the pool's threads a prange uses; the caller sets it.
"""

import types

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def copy(b, a, one):
    """b[i] = a[i] * one (one = 1.0, exact): one read and one write per element, with ordinary stores.

    A plain `b[i] = a[i]` loop is turned into a call to memcpy by LLVM (loop-idiom recognition), and
    glibc's memcpy switches to non-temporal stores above a size tied to the last-level cache: those
    skip the read-for-ownership of the destination, which the stencil's ordinary stores pay. The
    factor, unknown to the compiler, keeps this a loop of ordinary loads and stores like the stencil's,
    so this copy is the stencil's ceiling; `memcpy` below is the other one, for comparison.
    """
    for i in prange(a.size):
        b[i] = a[i] * one


@njit(parallel=True, cache=True)
def memcpy(b, a):
    """b[i] = a[i], which LLVM compiles to a memcpy call (non-temporal stores for large arrays)."""
    for i in prange(a.size):
        b[i] = a[i]


@njit(parallel=True, cache=True)
def saxpy(y, x, a):
    """y[i] = a*x[i] + y[i]: two reads and one write per element (no FMA contraction: no fastmath)."""
    for i in prange(x.size):
        y[i] = a * x[i] + y[i]


@njit(cache=True)
def sum_serial(x):
    """One thread, one float64 accumulator, left to right: the scalar baseline (no SIMD: the adds
    depend on each other and LLVM may not reorder them without fastmath)."""
    s = 0.0
    for i in range(x.size):
        s += x[i]
    return s


def _sum_partials(x, parts):
    """Thread-local partial sums, combined at the end: chunk c of `parts` equal chunks goes to one
    thread, which accumulates into a local float64; partial[c] is written once; the partials are
    added in chunk order (so the result does not depend on the schedule)."""
    partial = np.zeros(parts)
    n = x.size
    for c in prange(parts):
        chunk = x[c * n // parts:(c + 1) * n // parts]
        s = 0.0
        for i in range(chunk.size):
            s += chunk[i]
        partial[c] = s
    total = 0.0
    for c in range(parts):
        total += partial[c]
    return total


def _named(f, name: str):
    """The same Python function under another name: numba names its on-disk cache entry after the
    function, so two dispatchers of one function with different flags need two names."""
    g = types.FunctionType(f.__code__.replace(co_name=name), f.__globals__, name, f.__defaults__, f.__closure__)
    g.__qualname__, g.__doc__ = name, f.__doc__
    return g


sum_partials = njit(parallel=True, cache=True)(_named(_sum_partials, "sum_partials"))
# The same loop with reassociation allowed inside each chunk, so LLVM keeps several SIMD lanes of
# partial sums per thread (a different, still exact-to-rounding order of the adds).
sum_partials_simd = njit(parallel=True, cache=True, fastmath={"reassoc"})(_named(_sum_partials, "sum_partials_simd"))
