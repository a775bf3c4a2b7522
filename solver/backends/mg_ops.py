"""The multigrid verbs as array expressions: the reference every backend's kernels match bit for bit.

Each expression below fixes the order of its terms; the numba kernels (numba_mg.py) and the CUDA kernels
(kernels/mg.cu, compiled with --fmad=false) evaluate the same terms in the same order, so a cycle gives
the same bits on every backend. Regions are local (r0, r1, c0, c1) index ranges of padded arrays.

    smooth:   out = wc*u + wx*(W + E) + wy*(S + N) [+ om*g]       (the Jacobi update, weighted)
    residual: r = (wx*(W + E) + wy*(S + N) [+ g]) - u            (g - A u, unit diagonal)
    restrict: gc[I, J] = scale * sum_a yw[I,a] * (sum_b xw[J,b] * r[ys[I]+a, xs[J]+b])   (a < yc[I], b < xc[J])
    prolong:  u[i, j] = u + sum_a yw[i,a] * (sum_b xw[j,b] * e[ys[i]+a, xs[j]+b])        (a, b < 2)
    solve:    e = e + M r over the region's points in row-major order, sum over k ascending
Sums start from zero and add in index order.

With coefficient fields (alpha a field; ax east faces, ay north faces, solver.core.materials), in the
equation's own units (f = the source, not divided by the diagonal d):
    vsmooth:   out = wc*u + om*((((ax_W*W + ax_E*E) + (ay_S*S + ay_N*N)) [+ f]) / d)
    vresidual: r = (((ax_W*W + ax_E*E) + (ay_S*S + ay_N*N)) [+ f]) - d*u
    d = sigma + ((ax_W + ax_E) + (ay_S + ay_N)), sigma a number or a field sg (a capacity that varies)
"""

from __future__ import annotations

import numpy as np


def smooth(out, u, g, w, om, region) -> None:
    r0, r1, c0, c1 = region
    v = (w.wc * u[r0:r1, c0:c1] + w.wx * (u[r0:r1, c0 - 1:c1 - 1] + u[r0:r1, c0 + 1:c1 + 1])
         + w.wy * (u[r0 - 1:r1 - 1, c0:c1] + u[r0 + 1:r1 + 1, c0:c1]))
    out[r0:r1, c0:c1] = v if g is None else v + om * g[r0:r1, c0:c1]


def _faces(u, w, region):
    """(sum of the neighbours weighted by their faces, the diagonal d) over the region."""
    r0, r1, c0, c1 = region
    ax_w, ax_e = w.ax[r0:r1, c0 - 1:c1 - 1], w.ax[r0:r1, c0:c1]
    ay_s, ay_n = w.ay[r0 - 1:r1 - 1, c0:c1], w.ay[r0:r1, c0:c1]
    v = ((ax_w * u[r0:r1, c0 - 1:c1 - 1] + ax_e * u[r0:r1, c0 + 1:c1 + 1])
         + (ay_s * u[r0 - 1:r1 - 1, c0:c1] + ay_n * u[r0 + 1:r1 + 1, c0:c1]))
    sigma = w.sigma if w.sg is None else w.sg[r0:r1, c0:c1]
    return v, sigma + ((ax_w + ax_e) + (ay_s + ay_n))


def vsmooth(out, u, g, w, om, region) -> None:
    r0, r1, c0, c1 = region
    v, d = _faces(u, w, region)
    if g is not None:
        v = v + g[r0:r1, c0:c1]
    out[r0:r1, c0:c1] = w.wc * u[r0:r1, c0:c1] + om * (v / d)


def vresidual(r, u, g, w, region) -> None:
    r0, r1, c0, c1 = region
    v, d = _faces(u, w, region)
    if g is not None:
        v = v + g[r0:r1, c0:c1]
    r[r0:r1, c0:c1] = v - d * u[r0:r1, c0:c1]


def residual(r, u, g, w, region) -> None:
    r0, r1, c0, c1 = region
    v = w.wx * (u[r0:r1, c0 - 1:c1 - 1] + u[r0:r1, c0 + 1:c1 + 1]) + w.wy * (u[r0 - 1:r1 - 1, c0:c1] + u[r0 + 1:r1 + 1, c0:c1])
    if g is not None:
        v = v + g[r0:r1, c0:c1]
    r[r0:r1, c0:c1] = v - u[r0:r1, c0:c1]


def restrict(gc, r, region, ys, yc, yw, xs, xc, xw, scale) -> None:
    r0, r1, c0, c1 = region
    xp = _module(r)
    acc = xp.zeros((r1 - r0, c1 - c0), dtype=r.dtype)
    last_row, last_col = r.shape[0] - 1, r.shape[1] - 1
    for a in range(yw.shape[1]):
        rows = xp.minimum(ys + a, last_row)[:, None]
        row = xp.zeros_like(acc)
        for b in range(xw.shape[1]):
            cols = xc > b
            vals = r[rows, xp.minimum(xs + b, last_col)[None, :]]
            row[:, cols] = row[:, cols] + xw[cols, b][None, :] * vals[:, cols]
        take = yc > a
        acc[take] = acc[take] + yw[take, a][:, None] * row[take]
    gc[r0:r1, c0:c1] = scale * acc


def prolong(u, e, region, ys, yw, xs, xw) -> None:
    r0, r1, c0, c1 = region
    xp = _module(u)
    acc = xp.zeros((r1 - r0, c1 - c0), dtype=u.dtype)
    for a in range(2):
        row = xp.zeros_like(acc)
        for b in range(2):
            row = row + xw[None, :, b] * e[(ys + a)[:, None], (xs + b)[None, :]]
        acc = acc + yw[:, a][:, None] * row
    u[r0:r1, c0:c1] = u[r0:r1, c0:c1] + acc


def prolong_op(u, e, region, ys, xs, wy0, wy1, wx0, wx1) -> None:
    """u += the coarse correction e interpolated with per-point weights (solver.multigrid.opdep): the terms and
    order of prolong, the weights taken at each fine point."""
    r0, r1, c0, c1 = region
    xp = _module(u)
    rows, cols = (ys)[:, None], (xs)[None, :]
    w = [a[r0:r1, c0:c1] for a in (wy0, wy1, wx0, wx1)]
    zero = xp.zeros((r1 - r0, c1 - c0), dtype=u.dtype)
    row0 = (zero + w[2] * e[rows, cols]) + w[3] * e[rows, cols + 1]
    row1 = (zero + w[2] * e[rows + 1, cols]) + w[3] * e[rows + 1, cols + 1]
    u[r0:r1, c0:c1] = u[r0:r1, c0:c1] + ((zero + w[0] * row0) + w[1] * row1)


def restrict_op(gc, r, region, ys, yc, xs, xc, ty, tx, origin, area, wy0, wy1, wx0, wx1) -> None:
    """gc = the transpose of prolong_op, times area: each coarse point (I, J) sums over its window's fine points
    (rows ys[k] + a, a < yc[k]; columns xs[q] + b, b < xc[q]) every term ty[a'][i] == I, tx[b'][j] == J (global)
    of area * (wy_a'[i, j] * wx_b'[i, j]) * r[i, j], in the order a, b, a', b'."""
    r0, r1, c0, c1 = region
    xp = _module(r)
    acc = xp.zeros((r1 - r0, c1 - c0), dtype=r.dtype)
    gi = (xp.arange(r0, r1) + origin[0])[:, None]
    gj = (xp.arange(c0, c1) + origin[1])[None, :]
    wy, wx = (wy0, wy1), (wx0, wx1)
    for a in range(int(yc.max()) if len(yc) else 0):
        rows = xp.minimum(ys + a, r.shape[0] - 1)[:, None]
        row_ok = (yc > a)[:, None]
        for b in range(int(xc.max()) if len(xc) else 0):
            cols = xp.minimum(xs + b, r.shape[1] - 1)[None, :]
            ok = row_ok & (xc > b)[None, :]
            x = r[rows, cols]
            for ai in range(2):
                for bi in range(2):
                    hit = ok & (ty[ai][rows] == gi) & (tx[bi][cols] == gj)
                    term = (area * (wy[ai][rows, cols] * wx[bi][rows, cols])) * x
                    acc = xp.where(hit, acc + term, acc)
    gc[r0:r1, c0:c1] = acc


def solve(e, r, minv, region) -> None:
    r0, r1, c0, c1 = region
    xp = _module(e)
    rhs = r[r0:r1, c0:c1].reshape(-1)
    acc = xp.zeros(rhs.shape[0], dtype=e.dtype)
    for k in range(rhs.shape[0]):
        acc = acc + minv[:, k] * rhs[k]
    e[r0:r1, c0:c1] = e[r0:r1, c0:c1] + acc.reshape(r1 - r0, c1 - c0)


def axpy(y, a, x, region) -> None:
    """y = y + a*x over the region (conjugate gradients' updates)."""
    r0, r1, c0, c1 = region
    y[r0:r1, c0:c1] = y[r0:r1, c0:c1] + a * x[r0:r1, c0:c1]


def xpay(y, x, b, region) -> None:
    """y = x + b*y over the region."""
    r0, r1, c0, c1 = region
    y[r0:r1, c0:c1] = x[r0:r1, c0:c1] + b * y[r0:r1, c0:c1]


def products_max(a, b, region) -> float:
    """max |a*b| over the region, the products in float64 (exact for float32 fields); inf for NaN or Inf."""
    r0, r1, c0, c1 = region
    xp = _module(a)
    if r1 <= r0 or c1 <= c0:
        return 0.0
    t = a[r0:r1, c0:c1].astype(np.float64) * b[r0:r1, c0:c1].astype(np.float64)
    m = float(xp.max(xp.abs(t)))
    return m if np.isfinite(m) else float("inf")


def folded_sums(a, b, region, s1: float, s2: float) -> tuple[float, float]:
    """The products a*b (float64) split at the boundaries s1 and s2 (solver.multigrid.dot): the sums of
    q1 = (t + s1) - s1 and of q2 = (r + s2) - s2, r = t - q1; each sum is exact in any order."""
    r0, r1, c0, c1 = region
    xp = _module(a)
    if r1 <= r0 or c1 <= c0:
        return 0.0, 0.0
    t = a[r0:r1, c0:c1].astype(np.float64) * b[r0:r1, c0:c1].astype(np.float64)
    q1 = (t + s1) - s1
    r = t - q1
    q2 = (r + s2) - s2
    return float(xp.sum(q1)), float(xp.sum(q2))


def max_abs(a, region) -> float:
    """max |a| over the region; inf when any value there is NaN or Inf."""
    r0, r1, c0, c1 = region
    xp = _module(a)
    m = float(xp.max(xp.abs(a[r0:r1, c0:c1]), initial=0.0)) if r1 > r0 and c1 > c0 else 0.0
    return m if np.isfinite(m) else float("inf")


def _module(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy")
