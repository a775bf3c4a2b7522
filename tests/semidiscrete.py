"""The exact solution in time of the solver's own space discretisation (the semi-discrete system), for measuring
time-stepping errors alone: u' = A u + b + sum over windows of q [t0 <= t < t1], with A, b and q built from the
5-point update and the ghost rules the solver uses (solver.core.physics.update, solver.core.boundary), solved
by the eigen-decomposition of A (small grids only: A is dense). A is similar to a symmetric matrix (its
eigenvalues are real and <= 0); each mode's solution is a sum of exponentials, exact to rounding."""

from __future__ import annotations

import numpy as np

from solver.core.boundary import homogeneous_fill, make_fill, periodic_axes
from solver.core.decomp import decompose
from solver.core.physics import update, weights
from solver.core.sources import every_term, q_at


def system(case):
    """(A, b, q) on the interior points in row-major order: A u + b = (update with dt = 1) - u, q the source terms
    summed (all of them: each window given to `solution` applies to this sum)."""
    ny, nx = case.shape
    block = decompose(case.shape, (1, 1), 0, periodic_axes(case))
    fill = make_fill(case, block)
    zero = homogeneous_fill(fill)
    w = weights(case, 1.0)
    region = (1, ny + 1, 1, nx + 1)
    n = ny * nx
    a = np.zeros((n, n))
    for k in range(n):
        u = np.zeros((ny + 2, nx + 2))
        u[1 + k // nx, 1 + k % nx] = 1.0
        zero.apply(u)
        out = u.copy()
        update(out, u, w, region)
        a[:, k] = (out[1:-1, 1:-1] - u[1:-1, 1:-1]).ravel()
    u = np.zeros((ny + 2, nx + 2))
    fill.apply(u)
    out = u.copy()
    update(out, u, w, region)
    b = out[1:-1, 1:-1].ravel()
    q = q_at(case, every_term(case), np.arange(ny), np.arange(nx)).ravel() if case.physics.source else np.zeros(n)
    return a, b, q


def solution(case, u0: np.ndarray, t: float, windows=()) -> np.ndarray:
    """u(t) from u(0) = u0 with the source on during each window (t0, t1) of `windows`."""
    a, b, q = system(case)
    lam, v = np.linalg.eig(a)
    lam, v = lam.real, v.real
    vi = np.linalg.inv(v)

    def phi(s):  # int_0^s e^(lam r) dr
        small = np.abs(lam * s) < 1e-12
        return np.where(small, s, np.expm1(lam * s) / np.where(lam == 0, 1.0, lam))

    c = np.exp(lam * t) * (vi @ np.ravel(u0)) + phi(t) * (vi @ b)
    for t0, t1 in windows:
        lo, hi = min(t0, t), min(t1, t)
        if hi > lo:
            c += np.exp(lam * (t - hi)) * phi(hi - lo) * (vi @ q)
    return (v @ c).reshape(case.shape)
