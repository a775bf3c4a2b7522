"""Compiled kernels for the numba backend (imported where it runs, and for the probes' statistics on any backend).

Each row is taken as 1-D slices starting at column 0 of the range, so the inner loop index is a
non-negative range() variable: numba then emits no negative-index wraparound and LLVM vectorises it.
The term order matches physics.py exactly (no fastmath, no FMA contraction), so results are bitwise
equal to the numpy backend for any thread count. The probes' statistics (sampled inside tiled's sweeps, or over a
masked box) are at the end.
"""

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

from ..core.exactsum import B0, HIGHEST, LOWEST, MAG, NAN, NEG_INF, NPOS, POS_INF, W



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
          ay=None, m=None, cw=None, pr=None):
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

    pr (probes sampled inside the sweep, or None: compiled out): at each level pr[0] marks, each tile passes the rows
    it owns, as it computes them, to sample_row (its statistics, captured points), with its own
    accumulators (indexed by tile): no tile waits for another and no level is stored. With pr the row bands are
    interleaved (_interleaved): the caller gives more bands than threads where regions are read.
    """
    nrows = t1 - t0
    ncols = s1 - s0
    for t in prange(rblocks * cblocks):
        band = t // cblocks
        if pr is not None:  # bands interleaved: each thread's share of the tiles reaches across the plate
            band = _interleaved(band, rblocks, pr[11][0])
        a = t0 + (band * nrows) // rblocks
        b = t0 + ((band + 1) * nrows) // rblocks
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
                if pr is not None:
                    if pr[0][level] >= 0 and a <= i < b:
                        if pr[9][i]:
                            sample_row(pr, t, pr[0][level], i, dst, cl, c, d)
                        _walls(pr[10], pr[12], pr[13], pr[0][level], i, dst, cl, c, d)
                if level < k:
                    if fw and cl == xlo:
                        ring[level, i % 3, xlo - 1 - base] = u[i, xlo - 1]
                    if fe and ch == xhi:
                        ring[level, i % 3, xhi - base] = u[i, xhi]


@njit(inline="always")
def _interleaved(band, bands, threads):
    """A permutation of the row bands, round robin over the threads: where each of the threads takes a contiguous share
    of the tile indices (bands / threads consecutive bands; prange's static shares), thread h gets bands h, h +
    threads, h + 2 threads, ... spread over the plate, so that a region's statistics in one part of it (sample_row)
    fall to every thread. The identity where bands is not a multiple of threads. (threads comes from the caller: a
    call to numba.get_num_threads here would keep numba from caching the kernel.)"""
    if threads < 1 or bands % threads != 0:
        return band
    per = bands // threads
    return (band % per) * threads + band // per


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


def fused(out, u, wc, wx, wy, k, rblocks, cblocks=1, q=None, ax=None, ay=None, m=None, cw=None, pr=None):
    """out = k steps applied to the whole of u on one process (every ghost layer a Dirichlet boundary); pr: probes
    sampled inside (tiled)."""
    ny, nx = u.shape[0] - 2, u.shape[1] - 2
    tiled(out, u, wc, wx, wy, k, 1, ny + 1, 1, nx + 1, 1, ny + 1, 1, nx + 1, True, True, True, True, rblocks, cblocks,
          q, ax, ay, m, cw, pr)


# probes: a region's statistics and captured points, inside the sweep or over a masked box -----------------------
# A region's max, min and the digits of its order-free mean (solver.core.exactsum), taken over a row's segment inside
# a time tile (tiled: each sampled level's rows as the tile computes them, in cache) or over a masked box of a field
# (solver.io.probes: a sample read from the field). Max and min are exact in any order; the mean's digits are integer
# sums, so tiles, threads and ranks may add them in any order and get the same bits.
#
# A sweep's accumulators (per tile t, sampled level `slot`, region probe r): for a mean (kind 2) fac[t, slot, r] the
# largest finite |x| and iac[t, slot, r, :NPOS] the digit sums by position; for a max (kind 0) or min (kind 1)
# iac[t, slot, r, 0] the extreme as an ordered integer key (_key: compared in integer lanes, which vectorise where a
# float compare-and-select chain does not); iac[t, slot, r, NPOS] the flags (solver.core.exactsum: NaN, +inf, -inf).
# They live here, beside tiled: numba keeps a kernel's cache by its own file's stamp, so what tiled calls must change
# this file when it changes.

TWO_W = float(2 ** W)
TWO_2W = float(2 ** (2 * W))
INV_W = 1.0 / TWO_W
INV_2W = 1.0 / TWO_2W
INF_BITS = np.int64(0x7FF0000000000000)  # +inf's bits: finite magnitudes are below


@intrinsic
def _as_float(typingctx, bits):
    """The double whose bits are the int64 `bits`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@njit(inline="always")
def _position(a):
    return (math.frexp(a)[1] - 1 - B0) // W


@njit(inline="always")
def _key(b):
    """An int64 ordered as the doubles whose bits are b (an involution: _key(_key(b)) == b); NaNs beyond +-inf."""
    return b ^ ((b >> 63) & MAG)


@njit(inline="always")
def _flags(x):
    if x != x:
        return NAN
    if x == np.inf:
        return POS_INF
    if x == -np.inf:
        return NEG_INF
    return 0


@njit(inline="always")
def _scales(top):
    t = -(W * (top - 2) + B0)
    return math.ldexp(1.0, t // 2), math.ldexp(1.0, t - t // 2)


@njit(inline="always")
def _magnitudes(v):
    """(the largest finite |x|'s bits, the largest |x|'s bits: at least INF_BITS where one is not finite) of v, in
    integer lanes (vectorised: no float compare-and-select chain); the finite one in a second pass only where a value
    is not finite."""
    b = v.view(np.int64)
    top = np.int64(0)
    for j in range(b.shape[0]):
        top = max(top, b[j] & MAG)
    if top < INF_BITS:
        return top, top
    fin = np.int64(0)
    for j in range(b.shape[0]):
        a = b[j] & MAG
        fin = max(fin, a if a < INF_BITS else np.int64(0))
    return fin, top


@njit(inline="always")
def _digits(y, t2, t1, t0):
    """The sums t2 t1 t0 with y's digits added: y's integer part (|y| < 2^(3W)) in base 2^W, each digit truncated
    towards zero and signed as y (an int64 conversion truncates towards zero, and the remainders keep y's sign)."""
    n2 = np.int64(y * INV_2W)
    r = y - np.float64(n2) * TWO_2W
    n1 = np.int64(r * INV_W)
    n0 = np.int64(r - np.float64(n1) * TWO_W)
    return t2 + n2, t1 + n1, t0 + n0


@njit(inline="always")
def _digit_sums(v, s1, s2, finite):
    """The signed digit sums (positions P, P - 1, P - 2 of the scales s1 s2 = 2^-(W (P - 2) + B0)) of v's finite
    values: |x| s1 s2 < 2^(3W), each digit of |x| s1 s2's integer part signed as x (a truncation: the positions nest,
    whatever P). No sign handling, no abs: about 15 vector operations a value (24 with them)."""
    t2 = np.int64(0)
    t1 = np.int64(0)
    t0 = np.int64(0)
    s = s1 * s2
    if finite and 0.0 < s < np.inf:  # one power of two: x s is x s1 s2
        for j in range(v.shape[0]):
            t2, t1, t0 = _digits(v[j] * s, t2, t1, t0)
    else:
        for j in range(v.shape[0]):
            x = v[j]
            y = x * s1 * s2
            if not finite:
                y = y if abs(x) < np.inf else 0.0  # NaN and inf count nothing
            t2, t1, t0 = _digits(y, t2, t1, t0)
    return t2, t1, t0


@njit(inline="always")
def _mean_segment(v, acc):
    """Add the digits of v (a row's segment) to acc (NPOS + 1 int64: the sums, then the flags); returns the largest
    finite |x|."""
    fin, top = _magnitudes(v)
    if top >= INF_BITS:
        for j in range(v.shape[0]):
            acc[NPOS] |= _flags(v[j])
    if fin == 0:
        return 0.0
    amax = _as_float(fin)
    p = _position(amax)
    s1, s2 = _scales(p)
    t2, t1, t0 = _digit_sums(v, s1, s2, top < INF_BITS)
    acc[p] += t2
    acc[p - 1] += t1
    acc[p - 2] += t0
    return amax


@njit(inline="always")
def _extreme_keys(v, largest, key, acc):
    """max (largest) or min of v as an ordered key folded into `key`; a NaN sets acc[NPOS]'s NaN flag."""
    b = v.view(np.int64)
    top = np.int64(0)
    if largest:  # (two loops: a choice inside one kept it from vectorising)
        for j in range(b.shape[0]):
            key = max(key, _key(b[j]))
            top = max(top, b[j] & MAG)
    else:
        for j in range(b.shape[0]):
            key = min(key, _key(b[j]))
            top = max(top, b[j] & MAG)
    if top > INF_BITS:
        acc[NPOS] |= NAN
    return key


@njit(inline="always")
def _walls(cols, wrows, wv, slot, i, dst, cl, c, d):
    """A sampled level's row i: the walls' first lines into wv[slot, :] (each side's points along it in order): a
    side's first column from every row (cols[q] = (column, wv index less the row)), a side's first row copied whole
    (wrows[q] = (row, first column, column after the last, wv index of the first)). wv's rows are padded off a
    whole number of pages (the sampler's), so that a front's stores to its levels' rows fall in different cache
    sets."""
    for q in range(cols.shape[0]):
        j = cols[q, 0]
        if c <= j < d:
            wv[slot, cols[q, 1] + i] = dst[j - cl]
    for q in range(wrows.shape[0]):
        if wrows[q, 0] == i:
            lo = max(wrows[q, 1], c)
            hi = min(wrows[q, 2], d)
            base = wrows[q, 3] - wrows[q, 1]
            for j in range(lo, hi):
                wv[slot, base + j] = dst[j - cl]


@njit(inline="always")
def sample_row(pr, t, slot, i, dst, cl, c, d):
    """A sampled level's row i of a tile owning columns [c, d), dst holding columns [cl, ...): its region probes'
    statistics into the tile's accumulators, its captured points into the level's captures. pr: (lv, ent, rstart,
    kinds, fac, iac, cent, cstart, capv, todo, cols, threads, wrows, wv) - lv[level] the slot of a sampled level (-1:
    not sampled), ent[e] = (probe, column lo, column hi) of row entries rstart[i]:rstart[i + 1], cent[e] = (column,
    capture index) of the point captures cstart[i]:cstart[i + 1] (every index global and padded); todo[i]: whether row
    i has any (tiled calls this only then); cols, wrows, wv: the walls' first lines (_walls); pr[11][0]: the threads
    the sweep's bands are dealt to (_interleaved). capv[capture, slot]: a point's levels side by side."""
    ent, rstart, kinds, fac, iac, cent, cstart, capv = pr[1], pr[2], pr[3], pr[4], pr[5], pr[6], pr[7], pr[8]
    for e in range(rstart[i], rstart[i + 1]):
        r = ent[e, 0]
        lo = max(ent[e, 1], c)
        hi = min(ent[e, 2], d)
        if lo >= hi:
            continue
        k = kinds[r]
        acc = iac[t, slot, r]
        if k == 2:
            a = _mean_segment(dst[lo - cl:hi - cl], acc)
            if a > fac[t, slot, r]:
                fac[t, slot, r] = a
        else:
            acc[0] = _extreme_keys(dst[lo - cl:hi - cl], k == 0, acc[0], acc)
    for e in range(cstart[i], cstart[i + 1]):
        j = cent[e, 0]
        if c <= j < d:
            capv[cent[e, 1], slot] = dst[j - cl]


@njit(parallel=True, cache=True)
def masked_mean(v, mask):
    """The mean's parts over v where mask (each row's masked values a group): (digit sums and flags: NPOS + 1 int64,
    largest finite |x|)."""
    n = v.shape[0]
    per = np.zeros((n, NPOS + 1), dtype=np.int64)
    amax = np.zeros(n)
    for i in prange(n):
        picked = v[i][mask[i]]  # (a copy: the row's masked values in order)
        amax[i] = _mean_segment(picked, per[i])
    acc = np.zeros(NPOS + 1, dtype=np.int64)
    for i in range(n):
        for p in range(NPOS):
            acc[p] += per[i, p]
        acc[NPOS] |= per[i, NPOS]
    return acc, amax.max() if n else 0.0


@njit(parallel=True, cache=True)
def masked_extreme(v, mask, largest):
    """max (largest) or min of v where mask (at least one point), in the sweep's order (ordered keys: -0.0 below
    +0.0, as IEEE 754's maximum and minimum; the same bits as sample_row's in any order); NaN if any of them is NaN."""
    n = v.shape[0]
    keys = np.empty(n, dtype=np.int64)
    nan = np.zeros(n, dtype=np.int64)
    for i in prange(n):
        acc = np.zeros(NPOS + 1, dtype=np.int64)
        picked = v[i][mask[i]]
        keys[i] = _extreme_keys(picked, largest, LOWEST if largest else HIGHEST, acc)
        nan[i] = acc[NPOS]
    if nan.max() if n else 0:
        return np.nan
    return _as_float(_key(keys.max() if largest else keys.min()))
