"""Compiled kernels for the numba backend (imported only when that backend is used).

Each row is taken as 1-D slices starting at column 0 of the range, so the inner loop index is a
non-negative range() variable: numba then emits no negative-index wraparound and LLVM vectorises it.
The term order matches physics.py exactly (no fastmath, no FMA contraction), so results are bitwise
equal to the numpy backend for any thread count.
"""

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def step(out, u, wc, wx, wy, r0, r1, c0, c1, q=None, ax=None, ay=None, m=None, cw=None):
    """One update of the region; q (the source term), ax, ay (face coefficients: the flux form), m and cw (the
    capacity's multiplier and centre weight) are arrays or None, and a None is compiled out (solver.core.physics:
    the forms and their term order)."""
    for i in prange(r0, r1):
        qr = None if q is None else q[i, c0:c1]
        if ax is None:
            _update(out[i, c0:c1], u[i - 1, c0:c1], u[i, c0 - 1:c1 + 1], u[i + 1, c0:c1], wc, wx, wy, c1 - c0, qr)
        else:
            mr = None if m is None else m[i, c0:c1]
            cr = None if cw is None else cw[i, c0:c1]
            _flux(out[i, c0:c1], u[i - 1, c0:c1], u[i, c0 - 1:c1 + 1], u[i + 1, c0:c1], c1 - c0, qr,
                  ax[i, c0 - 1:c1], ay[i - 1, c0:c1], ay[i, c0:c1], wc, mr, cr)


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



@njit(parallel=True, cache=True)
def tiled(out, u, wc, wx, wy, k, t0, t1, s0, s1, ylo, yhi, xlo, xhi, fs, fn, fw, fe, rblocks, cblocks, q=None, ax=None,
          ay=None, m=None, cw=None):
    """out[t0:t1, s0:s1] = k steps of the update applied to u, in one sweep through memory (temporal
    blocking on trapezoids; solver.parallel.deep says how ranks use it).

    What u holds: rows [ylo, yhi) and columns [xlo, xhi) are points the update changes, valid at time 0.
    A side marked fixed (fs, fn, fw, fe: south, north, west, east) has one more row/column just outside
    (ylo - 1, yhi, xlo - 1, xhi) that holds a boundary value, unchanged in time; a side not fixed has
    nothing valid beyond, so level L (1..k) is known only L points inside it (the shrinking region).
    The target is cut into rblocks x cblocks tiles computed in parallel; each marches a front upwards,
    level L keeping its three most recent rows (tile width + 2k columns) in a ring buffer that stays
    in cache, and recomputes the k - L intermediate rows and columns just outside it, so tiles are
    independent. Every value is computed by the same expression in the same term order as step(),
    so the result is bitwise equal to k calls of step(). Memory traffic per k steps: about one read
    of u and one write of out (and of the source and coefficient fields, where given: read at every level,
    from cache after the first).
    """
    nrows = t1 - t0
    ncols = s1 - s0
    for t in prange(rblocks * cblocks):
        a = t0 + ((t // cblocks) * nrows) // rblocks
        b = t0 + ((t // cblocks + 1) * nrows) // rblocks
        c = s0 + ((t % cblocks) * ncols) // cblocks
        d = s0 + ((t % cblocks + 1) * ncols) // cblocks
        if a >= b or c >= d:
            continue
        base = c - k  # column of ring index 0
        ring = np.empty((k, 3, _padded(d - c + 2 * k)), dtype=u.dtype)  # levels 1..k-1 (index 0 unused)
        for front in range(a - k + 1, b + k - 1):  # level L computes row front - (L - 1)
            for level in range(1, k + 1):
                i = front - (level - 1)
                lo = ylo if fs else ylo + level
                hi = yhi if fn else yhi - level
                if i < max(a - (k - level), lo) or i >= min(b + (k - level), hi):
                    continue
                cl = max(c - (k - level), xlo if fw else xlo + level)
                ch = min(d + (k - level), xhi if fe else xhi - level)
                w = ch - cl
                if level == 1:
                    s = u[i - 1, cl - 1:ch + 1]
                    cc = u[i, cl - 1:ch + 1]
                    n = u[i + 1, cl - 1:ch + 1]
                else:
                    off = cl - 1 - base
                    cc = ring[level - 1, i % 3, off:off + w + 2]
                    if fs and i == ylo:
                        s = u[i - 1, cl - 1:ch + 1]
                    else:
                        s = ring[level - 1, (i - 1) % 3, off:off + w + 2]
                    if fn and i == yhi - 1:
                        n = u[i + 1, cl - 1:ch + 1]
                    else:
                        n = ring[level - 1, (i + 1) % 3, off:off + w + 2]
                if level == k:
                    dst = out[i, cl:ch]
                else:
                    dst = ring[level, i % 3, cl - base:ch - base]
                qr = None if q is None else q[i, cl:ch]
                if ax is None:
                    _update(dst, s[1:w + 1], cc, n[1:w + 1], wc, wx, wy, w, qr)
                else:
                    mr = None if m is None else m[i, cl:ch]
                    cr = None if cw is None else cw[i, cl:ch]
                    _flux(dst, s[1:w + 1], cc, n[1:w + 1], w, qr, ax[i, cl - 1:ch], ay[i - 1, cl:ch], ay[i, cl:ch], wc,
                          mr, cr)
                if level < k:
                    if fw and cl == xlo:
                        ring[level, i % 3, xlo - 1 - base] = u[i, xlo - 1]
                    if fe and ch == xhi:
                        ring[level, i % 3, xhi - base] = u[i, xhi]


@njit(inline="always")
def _padded(n):
    """n rounded up to a multiple of 8 elements: every ring row starts on a 64-byte line (as aligned as
    its first), so wide vector loads and stores split no more lines in one row than in another."""
    return (n + 7) // 8 * 8


@njit
def _update(o, ss, c, nn, wc, wx, wy, m, q):
    """o[0:m] from the south and north rows (aligned with o) and the centre row (one column west of o, m + 2
    long), plus the source row q where given: the constant-coefficient terms of solver.core.physics."""
    cc = c[1:m + 1]
    ww = c[0:m]
    ee = c[2:m + 2]
    if q is None:
        for j in range(m):
            o[j] = wc * cc[j] + wx * (ww[j] + ee[j]) + wy * (ss[j] + nn[j])
    else:
        for j in range(m):
            o[j] = wc * cc[j] + wx * (ww[j] + ee[j]) + wy * (ss[j] + nn[j]) + q[j]


@njit
def _flux(o, ss, c, nn, m, q, axr, ays, ayn, wc, mr, cr):
    """The flux form (coefficient fields): axr holds the m + 1 faces from the west face of o's first point to the east
    face of its last, ays and ayn the south and north faces of each point; wc the centre's weight (cr its row where it
    varies), mr the capacity's multiplier of the fluxes (None: not multiplied)."""
    cc = c[1:m + 1]
    ww = c[0:m]
    ee = c[2:m + 2]
    aw = axr[0:m]
    ae = axr[1:m + 1]
    for j in range(m):
        x = cc[j]
        f = (ae[j] * (ee[j] - x) - aw[j] * (x - ww[j])) + (ayn[j] * (nn[j] - x) - ays[j] * (x - ss[j]))
        if mr is not None:
            f = mr[j] * f
        if cr is None:
            v = wc * x + f
        else:
            v = cr[j] * x + f
        if q is None:
            o[j] = v
        else:
            o[j] = v + q[j]


def fused(out, u, wc, wx, wy, k, rblocks, cblocks=1, q=None, ax=None, ay=None, m=None, cw=None):
    """out = k steps applied to the whole of u on one process (every ghost layer a Dirichlet boundary)."""
    ny, nx = u.shape[0] - 2, u.shape[1] - 2
    tiled(out, u, wc, wx, wy, k, 1, ny + 1, 1, nx + 1, 1, ny + 1, 1, nx + 1, True, True, True, True, rblocks, cblocks,
          q, ax, ay, m, cw)
