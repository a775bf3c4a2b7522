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
def copy(b, a, one):
    """b = a * one (one = 1.0): ordinary loads and stores, as the stencil's (see bench_kernels.copy:
    a plain copy loop becomes memcpy, which may use non-temporal stores the stencil does not)."""
    for i in prange(a.shape[0]):
        b[i] = a[i] * one



@njit(inline="always")
def _row(o, s, c, n, wc, wx, wy, m):
    """o[1:m+1] from the full-width rows s (south), c (centre), n (north): the same term order as step()."""
    oo = o[1:m + 1]
    cc = c[1:m + 1]
    ww = c[0:m]
    ee = c[2:m + 2]
    ss = s[1:m + 1]
    nn = n[1:m + 1]
    for j in range(m):
        oo[j] = wc * cc[j] + wx * (ww[j] + ee[j]) + wy * (ss[j] + nn[j])


@njit(parallel=True, cache=True)
def fused(out, u, wc, wx, wy, k, nblocks):
    """out = k steps of the update applied to u, in one sweep through memory (temporal blocking).

    For one process (every ghost layer is a Dirichlet boundary). Each of `nblocks` row blocks marches a
    front upwards; level L (1..k-1) keeps its three most recent rows in a ring buffer that stays in
    cache, level k writes `out`. A block recomputes the k-1 intermediate rows just outside it, so blocks
    are independent. Every value is computed by the same expression as step(), so the result is bitwise
    equal to k calls of step(). Memory traffic per k steps: one read of u and one write of out.
    """
    ny = u.shape[0] - 2
    width = u.shape[1]
    m = width - 2
    for b in prange(nblocks):
        r0 = 1 + (b * ny) // nblocks
        r1 = 1 + ((b + 1) * ny) // nblocks
        ring = np.empty((k, 3, width), dtype=u.dtype)
        for front in range(r0 - k + 1, r1 + k):
            for level in range(1, k + 1):
                i = front - (level - 1)
                if i < max(r0 - (k - level), 0) or i >= min(r1 + (k - level), ny + 2):
                    continue
                dst = out[i] if level == k else ring[level, i % 3]
                if i < 1 or i > ny:  # a ghost row: the boundary value, unchanged in time
                    if level < k:
                        dst[:] = u[i]
                    continue
                if level == 1:
                    _row(dst, u[i - 1], u[i], u[i + 1], wc, wx, wy, m)
                else:
                    prev = ring[level - 1]
                    s = u[i - 1] if i == 1 else prev[(i - 1) % 3]
                    n = u[i + 1] if i == ny else prev[(i + 1) % 3]
                    _row(dst, s, prev[i % 3], n, wc, wx, wy, m)
                if level < k:
                    dst[0] = u[i, 0]
                    dst[width - 1] = u[i, width - 1]
