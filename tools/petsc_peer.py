#!/usr/bin/env python3
"""The peer for the steady state with materials: the same discrete problem solved by PETSc (Debian's petsc4py
3.18 with hypre), for BENCHMARKS.md (issue 34). Not a dependency of stencil: it runs with the system Python.

    PETSC_DIR=/usr/lib/petscdir/petsc3.18/x86_64-linux-gnu-real \\
        /usr/bin/mpirun -n 2 /usr/bin/python3 tools/petsc_peer.py CASE N [--pc mg|boomeramg] [--repeats 3]

CASE: lid | two-material | checker (tools/physics_bench.py's steady cases: the lid's top side at 1, the others
at 0; alpha 1 with a half at 1e3, or 8 x 8 blocks at 1e2). N interior points a side (N + 1 a power of two, as
PETSc's DMDA coarsening needs): the DMDA holds N + 2 vertices, the boundary's rows the identity with the side's
value, the interior's rows the 5-point equations sum_f a_f (u_nb - u) / h^2 = 0 with harmonic-mean faces - the
equations stencil solves. Solvers: conjugate gradients preconditioned by PCMG (geometric levels from the DMDA,
Galerkin coarse operators, PETSc's default Chebyshev/Jacobi smoothing) or by hypre's BoomerAMG. Each solve runs
until the max-norm residual over the right-hand side's is below --tol (as stencil's relative residual from a
zero field): KSP's rtol is tightened until it is. Prints one JSON line: setup and solve seconds (medians of
--repeats, each a fresh KSP), iterations, the residual reached.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def alpha_points(case: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    a = np.ones((len(y), len(x)))
    if case == "two-material":
        a[:, x <= 0.5] = 1000.0
    elif case == "checker":
        bx, by = np.minimum((x * 8).astype(int), 7), np.minimum((y * 8).astype(int), 7)
        edge_x = np.isclose(x * 8, np.round(x * 8)) & (x > 0)  # a point on a block edge belongs to both: later wins
        edge_y = np.isclose(y * 8, np.round(y * 8)) & (y > 0)
        on = ((by[:, None] + bx[None, :]) % 2 == 0)
        on |= edge_x[None, :] & ((by[:, None] + bx[None, :] - 1) % 2 == 0)
        on |= edge_y[:, None] & ((by[:, None] - 1 + bx[None, :]) % 2 == 0)
        a[on] = 100.0
    return a


def vertex_alpha(case: str, m: int) -> np.ndarray:
    """alpha on the DMDA's m x m vertices: the interior points', the walls taking the nearest interior point's (as
    stencil's wall faces take the first point's)."""
    g = np.arange(1, m - 1) / (m - 1)
    return np.pad(alpha_points(case, g, g), 1, mode="edge")


def build(PETSc, case: str, n: int):
    da = PETSc.DMDA().create([n + 2, n + 2], stencil_width=1, stencil_type=PETSc.DMDA.StencilType.STAR)
    da.setUniformCoordinates(0.0, 1.0, 0.0, 1.0)
    h = 1.0 / (n + 1)

    def operator(ksp, A, P):
        """The rows this rank owns, assembled from numpy arrays in one CSR call (PETSc's ordering via the DMDA's AO)."""
        dm = ksp.getDM()
        m, _ = dm.getSizes()
        hh = 1.0 / (m - 1)
        (i0, i1), (j0, j1) = dm.getRanges()
        a = vertex_alpha(case, m)
        jj, ii = np.meshgrid(np.arange(j0, j1), np.arange(i0, i1), indexing="ij")
        i, j = ii.ravel(), jj.ravel()
        wall = (i == 0) | (i == m - 1) | (j == 0) | (j == m - 1)
        inner = ~wall
        ic, jc = i[inner], j[inner]
        cols, vals, diag = [jc * m + ic], [None], np.zeros(len(ic))
        for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            ni, nj = ic + di, jc + dj
            f = 2 * a[jc, ic] * a[nj, ni] / (a[jc, ic] + a[nj, ni]) / hh**2
            diag += f
            nwall = (ni == 0) | (ni == m - 1) | (nj == 0) | (nj == m - 1)
            cols.append(nj * m + ni)
            vals.append(np.where(nwall, 0.0, -f))  # a wall neighbour's value sits in the right-hand side
        vals[0] = diag
        ao = dm.getAO()
        to_petsc = lambda c: ao.app2petsc(np.ascontiguousarray(c, dtype=PETSc.IntType))  # noqa: E731
        cols = np.stack([to_petsc(c) for c in cols], axis=1)
        vals = np.stack(vals, axis=1)
        order = np.argsort(cols, axis=1)
        cols, vals = np.take_along_axis(cols, order, 1), np.take_along_axis(vals, order, 1)
        count = np.where(wall, 1, 5)
        indptr = np.concatenate([[0], np.cumsum(count)]).astype(PETSc.IntType)
        all_cols = np.empty(indptr[-1], dtype=PETSc.IntType)
        all_vals = np.empty(indptr[-1])
        starts = indptr[:-1]
        all_cols[starts[wall]] = to_petsc(j[wall] * m + i[wall])
        all_vals[starts[wall]] = 1.0
        pos = starts[inner][:, None] + np.arange(5)[None, :]
        all_cols[pos.ravel()] = cols.ravel()
        all_vals[pos.ravel()] = vals.ravel()
        P.zeroEntries()
        P.setValuesCSR(indptr, all_cols, all_vals)
        P.assemble()
        if A != P:
            A.assemble()

    def rhs(ksp, b):
        dm = ksp.getDM()
        m, _ = dm.getSizes()
        hh = 1.0 / (m - 1)
        a = vertex_alpha(case, m)
        arr = dm.getVecArray(b)
        (i0, i1), (j0, j1) = dm.getRanges()
        ii, jj = np.meshgrid(np.arange(i0, i1), np.arange(j0, j1), indexing="ij")  # arr[i, j]: x first
        inner_i = (ii > 0) & (ii < m - 1)
        values = np.zeros(ii.shape)
        values[(jj == m - 1) & inner_i] = 1.0  # the top side's value (identity rows)
        below = (jj == m - 2) & inner_i  # interior rows next to the top side: the ghost's term moves right
        f = 2 * a[jj[below], ii[below]] * a[jj[below] + 1, ii[below]] / (a[jj[below], ii[below]] + a[jj[below] + 1, ii[below]])
        values[below] = f / hh**2
        arr[i0:i1, j0:j1] = values

    return da, operator, rhs, h


def solve(PETSc, da, operator, rhs, pc: str, tol: float, n: int) -> dict:
    levels = max(2, int(np.log2(n + 1)) - 2)
    opts = PETSc.Options()
    for key in list(opts.getAll()):
        opts.delValue(key)
    opts["ksp_type"] = "cg"
    opts["ksp_norm_type"] = "unpreconditioned"
    chosen = ({"pc_type": "mg", "pc_mg_levels": levels, "pc_mg_galerkin": "pmat"} if pc == "mg" else
              {"pc_type": "hypre", "pc_hypre_type": "boomeramg"})
    for key, value in chosen.items():
        opts[key] = value
    rtol, out = tol, None
    for _ in range(4):
        ksp = PETSc.KSP().create()
        ksp.setDM(da)
        ksp.setComputeOperators(operator)
        ksp.setComputeRHS(rhs)
        ksp.setTolerances(rtol=rtol, atol=0.0, max_it=2000)
        ksp.setFromOptions()
        PETSc.COMM_WORLD.barrier()
        t0 = time.perf_counter()
        ksp.setUp()
        PETSc.COMM_WORLD.barrier()
        t1 = time.perf_counter()
        ksp.solve(None, None)
        PETSc.COMM_WORLD.barrier()
        t2 = time.perf_counter()
        x, b = ksp.getSolution(), ksp.getRhs()
        A, _ = ksp.getOperators()
        r = b.duplicate()
        A.mult(x, r)
        r.aypx(-1.0, b)
        rel = r.norm(PETSc.NormType.INFINITY) / b.norm(PETSc.NormType.INFINITY)
        out = {"setup_s": t1 - t0, "solve_s": t2 - t1, "iterations": ksp.getIterationNumber(), "relative_max": rel,
               "rtol": rtol, "reason": int(ksp.getConvergedReason())}
        ksp.destroy()
        if rel <= tol:
            break
        rtol /= 10
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", choices=("lid", "two-material", "checker"))
    p.add_argument("n", type=int)
    p.add_argument("--pc", choices=("mg", "boomeramg"), default="mg")
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    import petsc4py

    petsc4py.init(sys.argv[:1])
    from petsc4py import PETSc

    da, operator, rhs, _ = build(PETSc, a.case, a.n)
    runs = [solve(PETSc, da, operator, rhs, a.pc, a.tol, a.n) for _ in range(a.repeats)]
    if PETSc.COMM_WORLD.rank == 0:
        med = {k: statistics.median(r[k] for r in runs) for k in ("setup_s", "solve_s")}
        print(json.dumps({"peer": f"PETSc {'.'.join(map(str, PETSc.Sys.getVersion()))} CG + {a.pc}", "case": a.case,
                          "n": a.n, "ranks": PETSc.COMM_WORLD.size, **med, "total_s": med["setup_s"] + med["solve_s"],
                          "iterations": runs[-1]["iterations"], "relative_max": runs[-1]["relative_max"],
                          "rtol_used": runs[-1]["rtol"], "repeats": a.repeats}), flush=True)


if __name__ == "__main__":
    main()
