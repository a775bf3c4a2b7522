"""The nonlinear operator's sweeps over the grid (solver.nonlinear.operator: its residual, its Jacobian's faces and
diagonal, the Jacobian applied to a vector, the preconditioner's change of variable) as numba kernels: each point's
terms in the order the operator's array expressions take them (no fastmath, no FMA contraction), so the numba backend
equals the numpy one bit for bit while each sweep reads its inputs once instead of making a temporary per term.
Rows in parallel (prange).

Shapes (the operator's, solver.nonlinear.operator): fields (u, v, out) and the reference faces (ax, ay) are the
finest level's padded arrays, the owned block starting at (r0, c0); kap, dkap: the one-layer box around it (owned
point (i, j) is box point (i + 1, j + 1)); the faces' (K, A, B): east (n, m + 1), north (n + 1, m); every other array
the owned block's (n, m). A face's conductance is its reference K_ref times the harmonic mean 2 a b / (a + b) of its
two points' kappa, a the west or south point's (kap None: K_ref alone, every k constant).
"""

import numpy as np
from numba import njit, prange


@njit(inline="always")
def _mean(kref, a, b):
    return kref * ((2.0 * a * b) / (a + b))


@njit(inline="always")
def _k(w, kap, R, C, pi, pj, qi, qj):
    """A face's conductance: w[R, C] (the reference) times the harmonic mean of kap at box points p and q, in that
    order (kap None: w[R, C] alone)."""
    if kap is None:
        return w[R, C]
    return _mean(w[R, C], kap[pi, pj], kap[qi, qj])


@njit(parallel=True, cache=True)
def residual(out, u, kap, ax, ay, g0, sigma0, d_lin, r0, c0):
    """out = g0 + div(K grad u) - sigma0 u [- d_lin u] at the owned points (Operator.residual's first terms; d_lin
    None: compiled out). out, u, ax, ay: padded fields, the owned block from (r0, c0); kap: the box."""
    n, m = g0.shape
    for i in prange(n):
        R = r0 + i
        for j in range(m):
            C = c0 + j
            c = u[R, C]
            fw = _k(ax, kap, R, C - 1, i + 1, j, i + 1, j + 1) * (c - u[R, C - 1])
            fe = _k(ax, kap, R, C, i + 1, j + 1, i + 1, j + 2) * (u[R, C + 1] - c)
            fs = _k(ay, kap, R - 1, C, i, j + 1, i + 1, j + 1) * (c - u[R - 1, C])
            fn = _k(ay, kap, R, C, i + 1, j + 1, i + 2, j + 1) * (u[R + 1, C] - c)
            v = (g0[i, j] + ((fe - fw) + (fn - fs))) - sigma0[i, j] * c
            if d_lin is not None:
                v = v - d_lin[i, j] * c
            out[R, C] = v


@njit(parallel=True, cache=True)
def faces(kx, ex_a, ex_b, ky, ny_a, ny_b, kap, dkap, u, ax, ay, r0, c0):
    """The owned block's faces' (K, A, B) at u (Operator._faces; ex_a None: Picard, K alone). kx: (n, m + 1), east face
    (i, j) west of owned column j; ky: (n + 1, m), north face (i, j) south of owned row i."""
    n = kx.shape[0]
    m = ky.shape[1]
    for i in prange(n + 1):
        if i < n:
            R = r0 + i
            for j in range(m + 1):
                C = c0 - 1 + j
                a, b = kap[i + 1, j], kap[i + 1, j + 1]
                s = a + b
                kr = ax[R, C]
                kx[i, j] = kr * ((2.0 * a * b) / s)
                if ex_a is not None:
                    du = u[R, C + 1] - u[R, C]
                    s2 = s * s
                    ex_a[i, j] = kr * ((2.0 * b * b) / s2) * dkap[i + 1, j] * du
                    ex_b[i, j] = kr * ((2.0 * a * a) / s2) * dkap[i + 1, j + 1] * du
        R = r0 - 1 + i
        for j in range(m):
            C = c0 + j
            a, b = kap[i, j + 1], kap[i + 1, j + 1]
            s = a + b
            kr = ay[R, C]
            ky[i, j] = kr * ((2.0 * a * b) / s)
            if ny_a is not None:
                du = u[R + 1, C] - u[R, C]
                s2 = s * s
                ny_a[i, j] = kr * ((2.0 * b * b) / s2) * dkap[i, j + 1] * du
                ny_b[i, j] = kr * ((2.0 * a * a) / s2) * dkap[i + 1, j + 1] * du


@njit(inline="always")
def _flux(k, a, b, i, j, vp, vq):
    f = k[i, j] * (vq - vp)
    if a is None:
        return f
    return f + (a[i, j] * vp + b[i, j] * vq)


@njit(parallel=True, cache=True)
def apply(out, v, kx, ex_a, ex_b, ky, ny_a, ny_b, diag, r0, c0):
    """out = -J v = D v - div(the faces' linearised fluxes) at the owned points (Operator.apply; ex_a None: K alone).
    out, v: padded fields; the faces: faces()'s shapes; diag: the owned block's."""
    n, m = diag.shape
    for i in prange(n):
        R = r0 + i
        for j in range(m):
            C = c0 + j
            c = v[R, C]
            fw = _flux(kx, ex_a, ex_b, i, j, v[R, C - 1], c)
            fe = _flux(kx, ex_a, ex_b, i, j + 1, c, v[R, C + 1])
            fs = _flux(ky, ny_a, ny_b, i, j, v[R - 1, C], c)
            fn = _flux(ky, ny_a, ny_b, i + 1, j, c, v[R + 1, C])
            out[R, C] = diag[i, j] * c - ((fe - fw) + (fn - fs))


@njit(parallel=True, cache=True)
def diagonal(d, scale, sigma0, d_lin, kap, free):
    """d = sigma0 + d_lin (or + 0.0), scale = kappa at free points and 1 elsewhere (Operator.linearise's first terms;
    kap None: scale 1)."""
    n, m = d.shape
    for i in prange(n):
        for j in range(m):
            d[i, j] = sigma0[i, j] + (0.0 if d_lin is None else d_lin[i, j])
            scale[i, j] = kap[i + 1, j + 1] if (kap is not None and free[i, j]) else 1.0


@njit(parallel=True, cache=True)
def quotient(out, a, b):
    """out = max(a / b, 0), NaN kept (numpy.maximum's rule)."""
    n, m = out.shape
    for i in prange(n):
        for j in range(m):
            q = a[i, j] / b[i, j]
            out[i, j] = q if (q >= 0.0 or q != q) else 0.0


@njit(parallel=True, cache=True)
def moved(new, old, tiny):
    """max |new - old| / max(|old|, tiny) (0 for no points; NaN where a quotient is NaN)."""
    n, m = new.shape
    best = np.zeros(n)
    for i in prange(n):
        r = 0.0
        for j in range(m):
            q = abs(new[i, j] - old[i, j]) / max(abs(old[i, j]), tiny)
            if q > r or q != q:
                r = q
        best[i] = r
    out = 0.0
    for i in range(n):
        if best[i] > out or best[i] != best[i]:
            out = best[i]
    return out


@njit(inline="always")
def _least(best):
    """The least of per-row minima (NaN where a row's is NaN; inf for none)."""
    out = np.inf
    for i in range(best.shape[0]):
        if best[i] < out or best[i] != best[i]:
            out = best[i]
    return out


@njit(parallel=True, cache=True)
def trial(y, x, a, v, free, r0, c0):
    """y = (0 + x) + a*v over the owned points (Backend.combine's terms), and the lowest y where free (lowest's)."""
    n, m = free.shape
    best = np.full(n, np.inf)
    zero = y.dtype.type(0)
    for i in prange(n):
        r = np.inf
        for j in range(m):
            t = (zero + x[r0 + i, c0 + j]) + a * v[r0 + i, c0 + j]
            y[r0 + i, c0 + j] = t
            if free[i, j] and (t < r or t != t):
                r = t
        best[i] = r
    return _least(best)


@njit(parallel=True, cache=True)
def lowest(u, free, r0, c0):
    """min of u over the owned points where free (inf where none; NaN where a free value is NaN)."""
    n, m = free.shape
    best = np.full(n, np.inf)
    for i in prange(n):
        r = np.inf
        for j in range(m):
            if free[i, j]:
                x = u[r0 + i, c0 + j]
                if x < r or x != x:
                    r = x
        best[i] = r
    return _least(best)


@njit(parallel=True, cache=True)
def divide(out, y, k, r0, c0):
    """out[r0 + i, c0 + j] = y[r0 + i, c0 + j] / k[i, j] over k's shape (Operator.unscale)."""
    n, m = k.shape
    for i in prange(n):
        for j in range(m):
            out[r0 + i, c0 + j] = y[r0 + i, c0 + j] / k[i, j]
