"""Reductions over a mask of a region of a host field (probes' max, min and mean: solver.io.probes), on threads.
Each is exact (a comparison or a copy, no arithmetic), so every backend's field gives the same values as numpy's
masked reductions would: max and min propagate NaN as numpy's do; `take` copies the masked values in row-major order
(numpy's v[mask]) into rows' slots known in advance (the mask is fixed: each row's first slot is given)."""

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def extreme(v, mask, largest):
    """max (largest) or min of v where mask, NaN if any of them is NaN; +-inf where the mask is empty."""
    n = v.shape[0]
    best = np.empty(n)
    start = -np.inf if largest else np.inf
    for i in prange(n):
        r = start
        nan = False
        for j in range(v.shape[1]):
            if mask[i, j]:
                x = v[i, j]
                if x != x:
                    nan = True
                elif (x > r) if largest else (x < r):
                    r = x
        best[i] = np.nan if nan else r
    out = start
    for i in range(n):
        b = best[i]
        if b != b:
            return b
        if (b > out) if largest else (b < out):
            out = b
    return out


@njit(parallel=True, cache=True)
def take(out, v, mask, first):
    """out[first[i] + k] = the k-th masked value of row i (as float64)."""
    for i in prange(v.shape[0]):
        k = first[i]
        for j in range(v.shape[1]):
            if mask[i, j]:
                out[k] = v[i, j]
                k += 1
