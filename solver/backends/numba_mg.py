"""The multigrid verbs as numba kernels: the terms and order of mg_ops.py (no fastmath, no FMA contraction),
so the results equal the numpy reference bit for bit. Rows in parallel (prange), unit-stride inner loops."""

import numpy as np
from numba import njit, prange


@njit(inline="always")
def _rows(u, i, c0, c1):
    """Row i's centre, west, east, south and north slices over columns [c0, c1) (unit stride: vectorised)."""
    return u[i, c0:c1], u[i, c0 - 1:c1 - 1], u[i, c0 + 1:c1 + 1], u[i - 1, c0:c1], u[i + 1, c0:c1]


@njit(parallel=True, cache=True)
def smooth(out, u, g, wc, wx, wy, om, r0, r1, c0, c1):
    m = c1 - c0
    for i in prange(r0, r1):
        o, f = out[i, c0:c1], g[i, c0:c1]
        c, w, e, s, n = _rows(u, i, c0, c1)
        for j in range(m):
            o[j] = wc * c[j] + wx * (w[j] + e[j]) + wy * (s[j] + n[j]) + om * f[j]


@njit(parallel=True, cache=True)
def residual(r, u, wx, wy, r0, r1, c0, c1):
    m = c1 - c0
    for i in prange(r0, r1):
        o = r[i, c0:c1]
        c, w, e, s, n = _rows(u, i, c0, c1)
        for j in range(m):
            o[j] = (wx * (w[j] + e[j]) + wy * (s[j] + n[j])) - c[j]


@njit(parallel=True, cache=True)
def residual_g(r, u, g, wx, wy, r0, r1, c0, c1):
    m = c1 - c0
    for i in prange(r0, r1):
        o, f = r[i, c0:c1], g[i, c0:c1]
        c, w, e, s, n = _rows(u, i, c0, c1)
        for j in range(m):
            o[j] = ((wx * (w[j] + e[j]) + wy * (s[j] + n[j])) + f[j]) - c[j]


@njit(parallel=True, cache=True)
def vsmooth(out, u, g, ax, ay, wc, om, sigma, r0, r1, c0, c1, sg=None):
    """mg_ops.vsmooth; g None and sg None (sigma one number) are compiled out."""
    m = c1 - c0
    for i in prange(r0, r1):
        o = out[i, c0:c1]
        c, w, e, s, n = _rows(u, i, c0, c1)
        aw, ae, as_, an = ax[i, c0 - 1:c1 - 1], ax[i, c0:c1], ay[i - 1, c0:c1], ay[i, c0:c1]
        sr = None if sg is None else sg[i, c0:c1]
        for j in range(m):
            v = (aw[j] * w[j] + ae[j] * e[j]) + (as_[j] * s[j] + an[j] * n[j])
            if g is not None:
                v = v + g[i, c0 + j]
            d = sigma if sr is None else sr[j]
            o[j] = wc * c[j] + om * (v / (d + ((aw[j] + ae[j]) + (as_[j] + an[j]))))


@njit(parallel=True, cache=True)
def vresidual(r, u, g, ax, ay, sigma, r0, r1, c0, c1, sg=None):
    """mg_ops.vresidual; g None and sg None (sigma one number) are compiled out."""
    m = c1 - c0
    for i in prange(r0, r1):
        o = r[i, c0:c1]
        c, w, e, s, n = _rows(u, i, c0, c1)
        aw, ae, as_, an = ax[i, c0 - 1:c1 - 1], ax[i, c0:c1], ay[i - 1, c0:c1], ay[i, c0:c1]
        sr = None if sg is None else sg[i, c0:c1]
        for j in range(m):
            v = (aw[j] * w[j] + ae[j] * e[j]) + (as_[j] * s[j] + an[j] * n[j])
            if g is not None:
                v = v + g[i, c0 + j]
            d = sigma if sr is None else sr[j]
            o[j] = v - (d + ((aw[j] + ae[j]) + (as_[j] + an[j]))) * c[j]


@njit(inline="always")
def _uniform_terms(a, b, w, e, s, n, g, i, col, sigma, sr, j):
    """The neighbours' flux sum (plus g) and the diagonal's own part at one point, faces a (x) and b (y)."""
    v = (a * w + a * e) + (b * s + b * n)
    if g is not None:
        v = v + g[i, col]
    return v, (sigma if sr is None else sr[j])


@njit(parallel=True, cache=True)
def vsmooth_u(out, u, g, a, b, wc, om, sigma, r0, r1, c0, c1, sg=None):
    """vsmooth where every face along x is a and along y b (Weights.uniform): the same terms, two fields fewer."""
    m = c1 - c0
    for i in prange(r0, r1):
        o = out[i, c0:c1]
        c, w, e, s, n = _rows(u, i, c0, c1)
        sr = None if sg is None else sg[i, c0:c1]
        for j in range(m):
            v, d = _uniform_terms(a, b, w[j], e[j], s[j], n[j], g, i, c0 + j, sigma, sr, j)
            o[j] = wc * c[j] + om * (v / (d + ((a + a) + (b + b))))


@njit(parallel=True, cache=True)
def vresidual_u(r, u, g, a, b, sigma, r0, r1, c0, c1, sg=None):
    """vresidual where every face along x is a and along y b (Weights.uniform)."""
    m = c1 - c0
    for i in prange(r0, r1):
        o = r[i, c0:c1]
        c, w, e, s, n = _rows(u, i, c0, c1)
        sr = None if sg is None else sg[i, c0:c1]
        for j in range(m):
            v, d = _uniform_terms(a, b, w[j], e[j], s[j], n[j], g, i, c0 + j, sigma, sr, j)
            o[j] = v - (d + ((a + a) + (b + b))) * c[j]


@njit(inline="always")
def _plain_point(r, k, q, ys, yc, yw, xs, xc, xw, scale, zero):
    """restrict's sum for coarse row k, column q."""
    acc = zero
    for a in range(yc[k]):
        row = zero
        src = r[ys[k] + a]
        for b in range(xc[q]):
            row = row + xw[q, b] * src[xs[q] + b]
        acc = acc + yw[k, a] * row
    return scale * acc


@njit(inline="always")
def _run(o, runs, n, zero):
    """Run n of a restriction's column runs (qa, qb, start): its coarse row's slice o[qa:qb], zeroed, and start."""
    out = o[runs[n, 0]:runs[n, 1]]
    for q in range(out.shape[0]):
        out[q] = zero
    return out, runs[n, 0], runs[n, 2]


@njit(parallel=True, cache=True)
def restrict(gc, r, r0, r1, c0, c1, ys, yc, yw, xs, xc, xw, scale):
    zero = gc.dtype.type(0)
    for I in prange(r0, r1):
        for J in range(c0, c1):
            gc[I, J] = _plain_point(r, I - r0, J - c0, ys, yc, yw, xs, xc, xw, scale, zero)


@njit(parallel=True, cache=True)
def restrict_runs(gc, r, r0, r1, c0, c1, ys, yc, yw, xs, xc, xw, scale, odd, runs, cnt, xwt):
    """restrict with the columns in vectorised passes: over each run (qa, qb, start) of coarse columns whose windows
    have one shape (cnt columns, xwt[b, q] = xw[q, b]) and start 2 apart from `start`, a window row's sum along the
    run one pass a window column, then added to the run's sums; the other columns (`odd`: the ends and a seam) as
    restrict. Each point gets restrict's terms in its order: the same bits."""
    zero = gc.dtype.type(0)
    m = c1 - c0
    for I in prange(r0, r1):
        k = I - r0
        o = gc[I, c0:c1]
        row = np.empty(m, dtype=gc.dtype)
        for n in range(runs.shape[0]):
            out, qa, start = _run(o, runs, n, zero)
            part = row[:out.shape[0]]
            for a in range(yc[k]):
                src = r[ys[k] + a]
                for q in range(out.shape[0]):
                    part[q] = zero
                for b in range(cnt):
                    s, wv = src[start + b:], xwt[b, qa:]
                    for q in range(out.shape[0]):
                        part[q] = part[q] + wv[q] * s[2 * q]
                w = yw[k, a]
                for q in range(out.shape[0]):
                    out[q] = out[q] + w * part[q]
            for q in range(out.shape[0]):
                out[q] = scale * out[q]
        for q in odd:
            o[q] = _plain_point(r, k, q, ys, yc, yw, xs, xc, xw, scale, zero)


@njit(parallel=True, cache=True)
def prolong(u, e, r0, r1, c0, c1, ys, yw, xs, xw, runs):
    """mg_ops.prolong, the columns in runs (qa, count, start): columns qa, qa + 2, ... (count of them, region
    columns) read coarse columns start, start + 1, ... (NumbaBackend's _parity_runs: every column in one run), so
    that each run is one vectorised pass; each point's terms as before."""
    zero = u.dtype.type(0)
    for i in prange(r0, r1):
        k = i - r0
        lo, hi, out = e[ys[k]], e[ys[k] + 1], u[i, c0:]
        a0, a1 = yw[k, 0], yw[k, 1]
        for n in range(runs.shape[0]):
            qa, count, start = runs[n, 0], runs[n, 1], runs[n, 2]
            o, w0, w1, l, h = out[qa:], xw[0, qa:], xw[1, qa:], lo[start:], hi[start:]
            for t in range(count):
                row0 = (zero + w0[2 * t] * l[t]) + w1[2 * t] * l[t + 1]
                row1 = (zero + w0[2 * t] * h[t]) + w1[2 * t] * h[t + 1]
                o[2 * t] = o[2 * t] + ((zero + a0 * row0) + a1 * row1)


@njit(cache=True)
def solve(e, r, minv, r0, r1, c0, c1):
    nx = c1 - c0
    n = (r1 - r0) * nx
    acc = np.zeros(n, dtype=e.dtype)
    for k in range(n):
        v = r[r0 + k // nx, c0 + k % nx]
        for p in range(n):
            acc[p] = acc[p] + minv[p, k] * v
    for p in range(n):
        e[r0 + p // nx, c0 + p % nx] = e[r0 + p // nx, c0 + p % nx] + acc[p]


@njit(parallel=True, cache=True)
def max_abs(a, r0, r1, c0, c1):
    """max |a| over the region; inf if any value is NaN or Inf."""
    rowmax = np.zeros(max(r1 - r0, 1))
    for i in prange(r0, r1):
        m = 0.0
        for j in range(c0, c1):
            d = abs(a[i, j])
            if d > m:
                m = d
            elif d != d:
                m = np.inf
        rowmax[i - r0] = m
    return rowmax.max() if r1 > r0 else 0.0


@njit(parallel=True, cache=True)
def residual_max(r, u, g, wx, wy, r0, r1, c0, c1):
    """The stop test in one pass: residual (residual_g with g) into r, unless r is None, and max |.| over the
    region as max_abs gives it (inf for NaN or Inf); g None and r None are compiled out."""
    m = c1 - c0
    rowmax = np.zeros(max(r1 - r0, 1))
    for i in prange(r0, r1):
        c, w, e, s, n = _rows(u, i, c0, c1)
        top, bad = 0.0, False
        for j in range(m):
            if g is None:
                v = (wx * (w[j] + e[j]) + wy * (s[j] + n[j])) - c[j]
            else:
                v = ((wx * (w[j] + e[j]) + wy * (s[j] + n[j])) + g[i, c0 + j]) - c[j]
            if r is not None:
                r[i, c0 + j] = v
            d = abs(v)
            top = d if d > top else top  # (a select and an or: 7% faster than max_abs's branch on the VM)
            bad |= d != d
        rowmax[i - r0] = np.inf if bad else top
    return rowmax.max() if r1 > r0 else 0.0


@njit(parallel=True, cache=True)
def across_rows(k, rows, w, wsum):
    """solver.multigrid.coefficients._across in one pass: out[I] = (sum over t, in order, of w[I, t] k[rows[I, t]])
    / wsum[I]."""
    m, taps = rows.shape
    c = k.shape[1]
    out = np.empty((m, c))
    for i in prange(m):
        o = out[i]
        for j in range(c):
            o[j] = 0.0
        for t in range(taps):
            wt = w[i, t]
            src = k[rows[i, t]]
            for j in range(c):
                o[j] = o[j] + wt * src[j]
        for j in range(c):
            o[j] = o[j] / wsum[i]
    return out


@njit(parallel=True, cache=True)
def across_cols(k, cols, w, wsum):
    """across_rows along the other axis: out[:, J] = (sum over t of w[J, t] k[:, cols[J, t]]) / wsum[J], the same
    terms in the same order as across_rows on k's transpose."""
    n = k.shape[0]
    m, taps = cols.shape
    out = np.empty((n, m))
    for i in prange(n):
        src, o = k[i], out[i]
        for jc in range(m):
            acc = 0.0
            for t in range(taps):
                acc = acc + w[jc, t] * src[cols[jc, t]]
            o[jc] = acc / wsum[jc]
    return out


@njit(parallel=True, cache=True)
def gather(a, rows, cols):
    """a[np.ix_(rows, cols)] on the threads."""
    out = np.empty((rows.shape[0], cols.shape[0]), dtype=a.dtype)
    for i in prange(rows.shape[0]):
        src = a[rows[i]]
        for j in range(cols.shape[0]):
            out[i, j] = src[cols[j]]
    return out


@njit(parallel=True, cache=True)
def zero(a):
    z = a.dtype.type(0)
    for i in prange(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = z


@njit(parallel=True, cache=True)
def axpy_max(y, a, x, r0, r1, c0, c1):
    """axpy, then max |y| over the region in the same pass (max_abs's: inf for NaN or Inf)."""
    rowmax = np.zeros(max(r1 - r0, 1))
    for i in prange(r0, r1):
        m = 0.0
        for j in range(c0, c1):
            v = y[i, j] + a * x[i, j]
            y[i, j] = v
            d = abs(np.float64(v))
            if d > m:
                m = d
            elif d != d:
                m = np.inf
        rowmax[i - r0] = m
    out = rowmax.max() if r1 > r0 and c1 > c0 else 0.0
    return out if out < np.inf else np.inf


@njit(parallel=True, cache=True)
def combine(y, x, a, v, r0, r1, c0, c1):
    """Backend.combine's terms in one pass (its other points left as they are: their readers refill them)."""
    zero = y.dtype.type(0)
    for i in prange(r0, r1):
        for j in range(c0, c1):
            y[i, j] = (zero + x[i, j]) + a * v[i, j]


@njit(parallel=True, cache=True)
def scale(y, a, x, r0, r1, c0, c1):
    """Backend.scale's terms in one pass (its other points left as they are: only the region is read)."""
    zero = y.dtype.type(0)
    for i in prange(r0, r1):
        for j in range(c0, c1):
            y[i, j] = zero + a * x[i, j]


@njit(parallel=True, cache=True)
def axpy(y, a, x, r0, r1, c0, c1):
    for i in prange(r0, r1):
        for j in range(c0, c1):
            y[i, j] = y[i, j] + a * x[i, j]


@njit(parallel=True, cache=True)
def xpay(y, x, b, r0, r1, c0, c1):
    for i in prange(r0, r1):
        for j in range(c0, c1):
            y[i, j] = x[i, j] + b * y[i, j]


@njit(parallel=True, cache=True)
def products_max(a, b, r0, r1, c0, c1):
    """mg_ops.products_max."""
    rowmax = np.zeros(max(r1 - r0, 1))
    for i in prange(r0, r1):
        m = 0.0
        for j in range(c0, c1):
            d = abs(np.float64(a[i, j]) * np.float64(b[i, j]))
            if d > m:
                m = d
            elif d != d:
                m = np.inf
        rowmax[i - r0] = m
    return rowmax.max() if r1 > r0 and c1 > c0 else 0.0


@njit(fastmath={"reassoc"}, cache=True)
def _exact_sum(q):
    """The sum of values whose every partial sum is exact (folded_sums' parts): the adds may be reordered (vectors),
    the result is the same. The only function here compiled with reassociation."""
    s = 0.0
    for j in range(q.shape[0]):
        s += q[j]
    return s


@njit(parallel=True, cache=True)
def folded_sums(a, b, r0, r1, c0, c1, s1, s2):
    """mg_ops.folded_sums (the sums are exact, so the parallel reduction's order does not matter): each row's parts
    made without reassociation (the folds must round as written), then summed as vectors (_exact_sum)."""
    acc1 = 0.0
    acc2 = 0.0
    m = max(c1 - c0, 0)
    for i in prange(r0, r1):
        q = np.empty(m)
        e = np.empty(m)
        for j in range(m):
            t = np.float64(a[i, c0 + j]) * np.float64(b[i, c0 + j])
            q1 = (t + s1) - s1
            q[j] = q1
            e[j] = ((t - q1) + s2) - s2
        acc1 += _exact_sum(q)
        acc2 += _exact_sum(e)
    return acc1, acc2


@njit(parallel=True, cache=True)
def prolong_op(u, e, r0, r1, c0, c1, ys, xs, wy0, wy1, wx0, wx1, runs):
    """mg_ops.prolong_op, the columns in runs as prolong's."""
    zero = u.dtype.type(0)
    for i in prange(r0, r1):
        k = i - r0
        lo, hi, out = e[ys[k]], e[ys[k] + 1], u[i, c0:]
        y0, y1, x0, x1 = wy0[i, c0:], wy1[i, c0:], wx0[i, c0:], wx1[i, c0:]
        for n in range(runs.shape[0]):
            qa, count, start = runs[n, 0], runs[n, 1], runs[n, 2]
            o, l, h = out[qa:], lo[start:], hi[start:]
            a0, a1, w0, w1 = y0[qa:], y1[qa:], x0[qa:], x1[qa:]
            for t in range(count):
                row0 = (zero + w0[2 * t] * l[t]) + w1[2 * t] * l[t + 1]
                row1 = (zero + w0[2 * t] * h[t]) + w1[2 * t] * h[t + 1]
                o[2 * t] = o[2 * t] + ((zero + a0[2 * t] * row0) + a1[2 * t] * row1)


@njit(parallel=True, cache=True)
def prolong_sep(u, e, r0, r1, c0, c1, ys, xs, wy0, wy1, wx0, wx1, runs):
    """prolong_op where the weights along y depend on the row alone and along x on the column alone (wy*: per row,
    wx*: per column, 1-D): the same terms, four fields fewer; the columns in runs as prolong's."""
    zero = u.dtype.type(0)
    for i in prange(r0, r1):
        k = i - r0
        lo, hi, out = e[ys[k]], e[ys[k] + 1], u[i, c0:]
        a0, a1 = wy0[i], wy1[i]
        for n in range(runs.shape[0]):
            qa, count, start = runs[n, 0], runs[n, 1], runs[n, 2]
            o, w0, w1, l, h = out[qa:], wx0[c0 + qa:], wx1[c0 + qa:], lo[start:], hi[start:]
            for t in range(count):
                row0 = (zero + w0[2 * t] * l[t]) + w1[2 * t] * l[t + 1]
                row1 = (zero + w0[2 * t] * h[t]) + w1[2 * t] * h[t + 1]
                o[2 * t] = o[2 * t] + ((zero + a0 * row0) + a1 * row1)


@njit(inline="always")
def _sep_point(r, k, q, ys, yc, xs, xc, area, cy, wy, cx, wx, zero):
    """restrict_sep's sum for coarse row k, column q."""
    acc = zero
    for a in range(yc[k]):
        na = cy[k, a]
        if na == 0:
            continue
        src = r[ys[k] + a]
        for b in range(xc[q]):
            nb = cx[q, b]
            if nb == 0:
                continue
            x = src[xs[q] + b]
            for p in range(na):
                w1 = wy[k, a, p]
                for v in range(nb):
                    acc = acc + (area * (w1 * wx[q, b, v])) * x
    return acc


@njit(parallel=True, cache=True)
def restrict_sep(gc, r, r0, r1, c0, c1, ys, yc, xs, xc, area, cy, wy, cx, wx):
    """restrict_op with separable weights: for coarse row k's window row a, the cy[k, a] weights wy[k, a, :] of the
    terms whose row target is that coarse row (restrict_op's ai that match, in order), likewise cx, wx for columns;
    the same terms in the same order (a, b, ai, bi), without the per-point tests and weight fields."""
    zero = gc.dtype.type(0)
    for I in prange(r0, r1):
        for J in range(c0, c1):
            gc[I, J] = _sep_point(r, I - r0, J - c0, ys, yc, xs, xc, area, cy, wy, cx, wx, zero)


@njit(parallel=True, cache=True)
def restrict_sep_runs(gc, r, r0, r1, c0, c1, ys, yc, xs, xc, area, cy, wy, cx, wx, odd, runs, cnt, wxt):
    """restrict_sep with the columns in vectorised passes: over each run (qa, qb, start) of coarse columns whose
    windows have one shape (cnt[b] terms at window column b; wxt[b, v, q] = wx[q, b, v]) and start 2 apart from
    `start`, one pass along the run per term (a, b, p, v); the other columns (`odd`: the ends and a seam) as
    restrict_sep. Each point gets restrict_sep's terms in its order: the same bits."""
    zero = gc.dtype.type(0)
    for I in prange(r0, r1):
        k = I - r0
        o = gc[I, c0:c1]
        for n in range(runs.shape[0]):
            out, qa, start = _run(o, runs, n, zero)
            for a in range(yc[k]):
                na = cy[k, a]
                if na == 0:
                    continue
                src = r[ys[k] + a]
                for b in range(cnt.shape[0]):
                    s = src[start + b:]
                    for p in range(na):
                        w1 = wy[k, a, p]
                        for v in range(cnt[b]):
                            wv = wxt[b, v, qa:]
                            for q in range(out.shape[0]):
                                out[q] = out[q] + (area * (w1 * wv[q])) * s[2 * q]
        for q in odd:
            o[q] = _sep_point(r, k, q, ys, yc, xs, xc, area, cy, wy, cx, wx, zero)


@njit(inline="always")
def _op_point(r, I, J, k, q, ys, yc, xs, xc, ty, tx, oy, ox, area, wy0, wy1, wx0, wx1, zero):
    """restrict_op's sum for coarse point (I, J), its row k and column q in the region."""
    acc = zero
    for a in range(yc[k]):
        i = ys[k] + a
        for b in range(xc[q]):
            j = xs[q] + b
            x = r[i, j]
            for ai in range(2):
                if ty[ai, i] != I + oy:
                    continue
                wy = wy0[i, j] if ai == 0 else wy1[i, j]
                for bi in range(2):
                    if tx[bi, j] == J + ox:
                        wx = wx0[i, j] if bi == 0 else wx1[i, j]
                        acc = acc + (area * (wy * wx)) * x
    return acc


@njit(parallel=True, cache=True)
def restrict_op(gc, r, r0, r1, c0, c1, ys, yc, xs, xc, ty, tx, oy, ox, area, wy0, wy1, wx0, wx1):
    """mg_ops.restrict_op."""
    zero = gc.dtype.type(0)
    for I in prange(r0, r1):
        for J in range(c0, c1):
            gc[I, J] = _op_point(r, I, J, I - r0, J - c0, ys, yc, xs, xc, ty, tx, oy, ox, area, wy0, wy1, wx0, wx1,
                                 zero)


@njit(parallel=True, cache=True)
def restrict_op_runs(gc, r, r0, r1, c0, c1, ys, yc, xs, xc, ty, tx, oy, ox, area, wy0, wy1, wx0, wx1, odd, runs, cnt,
                     bis):
    """restrict_op with the columns in vectorised passes: over each run (qa, qb, start) of coarse columns whose
    windows have one shape (cnt[b] column targets at window column b, bis[b, v] which of tx's two, in order) and
    start 2 apart from `start`, one pass along the run per term (a, b, ai, v); the other columns (`odd`: the ends
    and a seam) as restrict_op. Each point gets restrict_op's terms in its order: the same bits."""
    zero = gc.dtype.type(0)
    for I in prange(r0, r1):
        k = I - r0
        o = gc[I, c0:c1]
        for n in range(runs.shape[0]):
            out, qa, start = _run(o, runs, n, zero)
            for a in range(yc[k]):
                i = ys[k] + a
                for b in range(cnt.shape[0]):
                    s = r[i, start + b:]
                    for ai in range(2):
                        if ty[ai, i] != I + oy:
                            continue
                        wy = wy0[i, start + b:] if ai == 0 else wy1[i, start + b:]
                        for v in range(cnt[b]):
                            wx = wx0[i, start + b:] if bis[b, v] == 0 else wx1[i, start + b:]
                            for q in range(out.shape[0]):
                                out[q] = out[q] + (area * (wy[2 * q] * wx[2 * q])) * s[2 * q]
        for q in odd:
            o[q] = _op_point(r, I, c0 + q, k, q, ys, yc, xs, xc, ty, tx, oy, ox, area, wy0, wy1, wx0, wx1, zero)