"""Max and min over a mask of a region of a host field (probes': solver.io.probes; the mean:
numba_kernels.masked_mean), on threads. Each is exact (a comparison), so every backend's field gives the same values
as numpy's masked reductions would: max and min propagate NaN as numpy's do."""

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
