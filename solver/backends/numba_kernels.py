"""Compiled kernels for the numba backend (imported only when that backend is used).

Each row is taken as 1-D slices starting at column 0 of the range, so the inner loop index is a
non-negative range() variable: numba then emits no negative-index wraparound and LLVM vectorises it.
The term order matches physics.py exactly (no fastmath, no FMA contraction), so results are bitwise
equal to the numpy backend for any thread count.
"""

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def step(out, u, wc, wx, wy, r0, r1, c0, c1):
    m = c1 - c0
    for i in prange(r0, r1):
        o = out[i, c0:c1]
        c = u[i, c0:c1]
        w = u[i, c0 - 1:c1 - 1]
        e = u[i, c0 + 1:c1 + 1]
        s = u[i - 1, c0:c1]
        n = u[i + 1, c0:c1]
        for j in range(m):
            o[j] = wc * c[j] + wx * (w[j] + e[j]) + wy * (s[j] + n[j])


@njit(parallel=True, cache=True)
def max_update(a, b, r0, r1, c0, c1):
    """max |a - b| over the region; inf if any difference is NaN or Inf (non-finite field)."""
    rowmax = np.zeros(r1 - r0)
    for i in prange(r0, r1):
        m = 0.0
        for j in range(c0, c1):
            d = abs(a[i, j] - b[i, j])
            if d > m:
                m = d
            elif d != d:
                m = np.inf
        rowmax[i - r0] = m
    return rowmax.max() if r1 > r0 else 0.0


@njit(parallel=True, cache=True)
def copy(b, a):
    for i in prange(a.shape[0]):
        b[i] = a[i]

