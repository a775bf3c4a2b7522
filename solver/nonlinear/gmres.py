"""Restarted GMRES with a right preconditioner on the finest level's fields (Saad and Schultz 1986; Saad's Iterative
Methods, algorithm 9.5): each Newton step's linear solve.

A x = b is solved as A P w = b, x = P w, with P the preconditioner (one multigrid cycle: solver.nonlinear.newton). An
iteration applies P and A once to the newest basis vector, orthogonalises the result against the basis (modified
Gram-Schmidt) and updates the least-squares problem by Givens rotations, whose last entry is the residual's 2-norm
without computing it. A restart (after `restart` iterations) forms x and starts again from the true residual.

x is formed as the flexible variant does (Saad's algorithm 9.6): each z_j = P v_j is kept, x = x_0 + Z y, instead of
applying P once more to V y. That costs a field per iteration and saves a multigrid cycle per linear solve, a third
of all cycles where Newton's steps take one or two iterations each (tools/nonlinear_bench.py). The fields (the basis
and the z_j) beyond the first FIRST are made when an iteration first needs them (restart 20: 42 fields at most).

The basis vectors are fields of the finest level's layout; the dot products are reduced with the same bits on every
rank count (solver.multigrid.dot), and the small Hessenberg problem is solved in Python floats, the same on every rank,
so the iterates are bitwise equal across ranks, as the multigrid's are.
"""

from __future__ import annotations

import math
import time

from ..multigrid.dot import dot

FIRST = 5  # basis vectors (and as many z_j) made at set-up, as PETSc's GMRES preallocates a first chunk; the rest as
# iterations reach them. Newton's steps take 1 to 5 iterations each on tools/nonlinear_bench.py's plate. On a GPU
# one: its memory is what limits the grid (a field at 16384^2 is 2.15 GB), and CuPy's pool hands out the rest quickly


class Gmres:
    def __init__(self, backend, comm, layout, owned, count: int, restart: int, dtype):
        self.be, self.comm, self.owned, self.count, self.m = backend, comm, owned, count, restart
        self.t = dtype.type
        self.new = lambda: backend.zeros(layout.shape, aligned=layout.owned[2])  # noqa: E731
        self.basis, self.zs = [], []  # v_j and z_j = P v_j, made as the iterations reach them
        self.w, self.r = self.new(), None  # (r: the true residual at a restart, made at the first)
        first = 1 if getattr(backend, "on_gpu", False) else FIRST
        for k in range(min(first, restart)):  # the first ones now (zeros() takes their pages at set-up)
            self._field(self.basis, k)
            self._field(self.zs, k)

    def _field(self, fields: list, k: int):
        while len(fields) <= k:
            fields.append(self.new())
        return fields[k]

    def _dot(self, a, b, timer, largest=None) -> float:
        return dot(self.be, self.comm, a, b, self.owned, self.count, timer, largest)

    def _scaled(self, out, a, c: float, timer) -> None:
        """out = c a over the owned points (the ghosts are the preconditioner's and apply's to fill)."""
        be = self.be
        be.timed(timer, lambda: be.scale(out, self.t(c), a, self.owned))

    def solve(self, x, b, apply, precondition, rtol: float, most: int, timer, norm_b=None) -> tuple[int, float]:
        """x (cleared first) with |b - A x|_2 <= rtol |b|_2, in at most `most` iterations. apply(out, v): out = A v;
        precondition(out, r): out = P r; norm_b: |b|_2 where the caller has it. Returns (iterations,
        |b - A x|_2 / |b|_2 reached: the Givens estimate at each restart's end replaced by the true residual)."""
        be = self.be
        be.timed(timer, lambda: be.clear(x))
        if norm_b is None:
            norm_b = math.sqrt(max(self._dot(b, b, timer), 0.0))
        if norm_b == 0.0 or norm_b != norm_b:
            return 0, 0.0 if norm_b == 0.0 else float("nan")
        done, rel, residual = 0, 1.0, b
        while done < most:
            beta = norm_b if residual is b else math.sqrt(max(self._dot(residual, residual, timer), 0.0))
            rel = beta / norm_b
            if rel <= rtol or beta == 0.0:
                break
            self._scaled(self._field(self.basis, 0), residual, 1.0 / beta, timer)
            h, cs, sn, g = [], [], [], [beta]
            k = 0
            while k < self.m and done < most:
                z = self._field(self.zs, k)
                precondition(z, self.basis[k])
                apply(self.w, z)
                col, top = [], [0.0]
                for i in range(k + 1):  # modified Gram-Schmidt (the last update also gives max |w|)
                    c = self._dot(self.w, self.basis[i], timer)
                    col.append(c)
                    last = i == k
                    be.timed(timer, lambda c=c, i=i, last=last: top.__setitem__(0, be.axpy_max(
                        self.w, self.t(-c), self.basis[i], self.owned) if last else be.axpy(
                        self.w, self.t(-c), self.basis[i], self.owned)))
                t0 = time.perf_counter()
                largest = self.comm.allmax(top[0])  # max |w|: its square is |w|^2's largest term (dot's largest)
                timer.add("wait", t0)
                nxt = math.sqrt(max(self._dot(self.w, self.w, timer, largest * largest), 0.0))
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
                self._scaled(self._field(self.basis, k), self.w, 1.0 / nxt, timer)
            self._update(x, h, g, k, timer)
            if rel <= rtol or rel != rel or done >= most:
                break
            if self.r is None:
                self.r = self.new()
            apply(self.r, x)  # the true residual, for the restart
            be.timed(timer, lambda: (be.xpay(self.r, b, self.t(-1.0), self.owned)))
            residual = self.r
        return done, rel

    def _update(self, x, h, g, k: int, timer) -> None:
        """x += Z y = P (V y), y solving the k x k upper-triangular system of the rotated Hessenberg matrix."""
        if k == 0:
            return
        y = [0.0] * k
        for i in range(k - 1, -1, -1):
            s = g[i] - sum(h[j][i] * y[j] for j in range(i + 1, k))
            y[i] = s / h[i][i] if h[i][i] != 0.0 else 0.0
        be = self.be
        be.timed(timer, lambda: be.axpys(x, [self.t(c) for c in y], self.zs[:k], self.owned))
