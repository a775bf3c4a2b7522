"""Restarted GMRES with a right preconditioner on the finest level's fields (Saad and Schultz 1986; Saad's Iterative
Methods, algorithm 9.5): each Newton step's linear solve.

A x = b is solved as A P w = b, x = P w, with P the preconditioner (one multigrid cycle: solver.nonlinear.newton). An
iteration applies P and A once to the newest basis vector, orthogonalises the result against the basis (modified
Gram-Schmidt) and updates the least-squares problem by Givens rotations, whose last entry is the residual's 2-norm
without computing it. A restart (after `restart` iterations) forms x and starts again from the true residual.

The basis vectors are fields of the finest level's layout; the dot products are reduced with the same bits on every
rank count (solver.multigrid.dot), and the small Hessenberg problem is solved in Python floats, the same on every rank,
so the iterates are bitwise equal across ranks, as the multigrid's are.
"""

from __future__ import annotations

import math

from ..multigrid.dot import dot


class Gmres:
    def __init__(self, backend, comm, layout, owned, count: int, restart: int, dtype):
        self.be, self.comm, self.owned, self.count, self.m = backend, comm, owned, count, restart
        self.t = dtype.type
        new = lambda: backend.zeros(layout.shape, aligned=layout.owned[2])  # noqa: E731
        self.basis = [new() for _ in range(restart + 1)]
        self.w, self.z, self.r = new(), new(), new()

    def _dot(self, a, b, timer) -> float:
        return dot(self.be, self.comm, a, b, self.owned, self.count, timer)

    def _scaled(self, out, a, c: float, timer) -> None:
        """out = c a over the owned points."""
        be = self.be
        be.timed(timer, lambda: (be.clear(out), be.axpy(out, self.t(c), a, self.owned)))

    def solve(self, x, b, apply, precondition, rtol: float, most: int, timer) -> tuple[int, float]:
        """x (cleared first) with |b - A x|_2 <= rtol |b|_2, in at most `most` iterations. apply(out, v): out = A v;
        precondition(out, r): out = P r. Returns (iterations, |b - A x|_2 / |b|_2 reached: the Givens estimate at each
        restart's end replaced by the true residual)."""
        be = self.be
        be.timed(timer, lambda: be.clear(x))
        norm_b = math.sqrt(max(self._dot(b, b, timer), 0.0))
        if norm_b == 0.0 or norm_b != norm_b:
            return 0, 0.0 if norm_b == 0.0 else float("nan")
        done, rel, residual = 0, 1.0, b
        while done < most:
            beta = norm_b if residual is b else math.sqrt(max(self._dot(residual, residual, timer), 0.0))
            rel = beta / norm_b
            if rel <= rtol or beta == 0.0:
                break
            self._scaled(self.basis[0], residual, 1.0 / beta, timer)
            h, cs, sn, g = [], [], [], [beta]
            k = 0
            while k < self.m and done < most:
                precondition(self.z, self.basis[k])
                apply(self.w, self.z)
                col = []
                for i in range(k + 1):  # modified Gram-Schmidt
                    c = self._dot(self.w, self.basis[i], timer)
                    col.append(c)
                    be.timed(timer, lambda c=c, i=i: be.axpy(self.w, self.t(-c), self.basis[i], self.owned))
                nxt = math.sqrt(max(self._dot(self.w, self.w, timer), 0.0))
                col.append(nxt)
                for i in range(k):  # the earlier rotations on the new column
                    a, bb = col[i], col[i + 1]
                    col[i], col[i + 1] = cs[i] * a + sn[i] * bb, -sn[i] * a + cs[i] * bb
                den = math.hypot(col[k], col[k + 1])
                c_k, s_k = (1.0, 0.0) if den == 0.0 else (col[k] / den, col[k + 1] / den)
                cs.append(c_k)
                sn.append(s_k)
                col[k], col[k + 1] = den, 0.0
                g.append(-s_k * g[k])
                g[k] = c_k * g[k]
                h.append(col)
                k += 1
                done += 1
                rel = abs(g[k]) / norm_b
                if rel <= rtol or nxt == 0.0 or rel != rel:
                    break
                self._scaled(self.basis[k], self.w, 1.0 / nxt, timer)
            self._update(x, h, g, k, precondition, timer)
            if rel <= rtol or rel != rel or done >= most:
                break
            apply(self.r, x)  # the true residual, for the restart
            be.timed(timer, lambda: (be.xpay(self.r, b, self.t(-1.0), self.owned)))
            residual = self.r
        return done, rel

    def _update(self, x, h, g, k: int, precondition, timer) -> None:
        """x += P (V y), y solving the k x k upper-triangular system of the rotated Hessenberg matrix."""
        if k == 0:
            return
        y = [0.0] * k
        for i in range(k - 1, -1, -1):
            s = g[i] - sum(h[j][i] * y[j] for j in range(i + 1, k))
            y[i] = s / h[i][i] if h[i][i] != 0.0 else 0.0
        be = self.be
        be.timed(timer, lambda: be.clear(self.w))
        for i in range(k):
            be.timed(timer, lambda i=i: be.axpy(self.w, self.t(y[i]), self.basis[i], self.owned))
        precondition(self.z, self.w)
        be.timed(timer, lambda: be.axpy(x, self.t(1.0), self.z, self.owned))
