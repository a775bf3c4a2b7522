"""Conjugate gradients preconditioned by one multigrid cycle (multigrid.krylov: cg).

Where alpha jumps by orders of magnitude, a cycle built on re-discretised coarse levels and linear transfers
can lose its way at the jumps (a 31^2 lid with a 10^3 jump: two-grid factors above 1), yet each cycle is
still a good approximate inverse away from them. As the preconditioner of conjugate gradients its errors
are corrected by the Krylov space (PETSc's KSPCG + PCMG; hypre's PFMG-PCG): the iteration count stays
bounded by the preconditioned condition number instead of the cycle's convergence factor.

One iteration (one of the loop's steps, as a cycle is): q = A p, alpha = (r, z) / (p, q), x += alpha p,
r -= alpha q, z = M r (one cycle from zero with r as its right-hand side and the homogeneous boundary
rules), beta = (r, z)_new / (r, z)_old, p = z + beta p. The cycle is symmetric (the same smoothing weights
before and after the coarse correction, in reverse order: multigrid.levels), A is symmetric (the unit-
diagonal operator where alpha is a number, the equation's own units with face coefficients where it is a
field), and the dot products are reduced with the same bits on every rank count (solver.multigrid.dot), so
the iterates are bitwise equal across ranks as a cycle's are. x is the finest level's u; r, z, p and q are
fields of the finest level's layout.
"""

from __future__ import annotations

from .dot import dot


class ConjugateGradient:
    def __init__(self, mg):
        self.mg, be = mg, mg.backend
        lay = mg.grids[0].layout
        self.r, self.z, self.p, self.q, self.spare = (be.zeros(lay.shape, aligned=lay.owned[2]) for _ in range(5))
        self.rz = None  # (r, z) of the current direction; None: start afresh at the next iteration
        self.resumed = False  # r and p came from a checkpoint: the next iteration recomputes z and (r, z) from them
        self.count = mg.case.grid.nx * mg.case.grid.ny

    def reset(self) -> None:
        """A new right-hand side (an implicit step): the next iteration starts from the current x."""
        self.rz, self.resumed = None, False

    def state(self) -> dict:
        """What a checkpoint keeps to continue the iteration bitwise (this rank's owned blocks): r and p; z and
        (r, z) follow from r (z = M r is deterministic). None before the first iteration."""
        own, be = self.mg.grids[0].owned, self.mg.backend
        return {} if self.rz is None else {"cg_r": be.get(self.r, own), "cg_p": be.get(self.p, own)}

    def restore(self, fields: dict) -> None:
        """r and p from a checkpoint (state); the next iteration recomputes z and (r, z) before going on."""
        own, be = self.mg.grids[0].owned, self.mg.backend
        be.put(self.r, own, fields["cg_r"])
        be.put(self.p, own, fields["cg_p"])
        self.resumed = True

    def iterate(self, timer) -> None:
        if self.rz is None:
            self._resume(timer) if self.resumed else self._start(timer)
        mg, be, own = self.mg, self.mg.backend, self.mg.grids[0].owned
        mg.apply(self.q, self.p, timer)  # q = -A p
        pq = -self._dot(self.p, self.q, timer)
        if pq == 0.0 or pq != pq:  # the residual is already zero (or a NaN, which the loop's check reports)
            return
        alpha = self.rz / pq
        t = self.mg.dtype.type
        be.timed(timer, lambda: (be.axpy(mg.grids[0].u, t(alpha), self.p, own), be.axpy(self.r, t(alpha), self.q, own)))
        mg.refill(timer)
        self.z, self.spare = mg.precondition(self.z, self.spare, self.r, timer)
        rz = self._dot(self.r, self.z, timer)
        beta = rz / self.rz
        self.rz = rz
        be.timed(timer, lambda: be.xpay(self.p, self.z, t(beta), own))

    def _start(self, timer) -> None:
        """r = f - A x, z = M r, p = z."""
        mg, be = self.mg, self.mg.backend
        own = mg.grids[0].owned
        mg.true_residual(self.r, timer)
        self.z, self.spare = mg.precondition(self.z, self.spare, self.r, timer)
        be.timed(timer, lambda: (be.clear(self.p), be.axpy(self.p, mg.dtype.type(1), self.z, own)))
        self.rz = self._dot(self.r, self.z, timer)

    def _resume(self, timer) -> None:
        """z = M r and (r, z) from the restored r, as the iteration before the checkpoint left them."""
        self.resumed = False
        self.z, self.spare = self.mg.precondition(self.z, self.spare, self.r, timer)
        self.rz = self._dot(self.r, self.z, timer)

    def _dot(self, a, b, timer) -> float:
        return dot(self.mg.backend, self.mg.comm, a, b, self.mg.grids[0].owned, self.count, timer)
