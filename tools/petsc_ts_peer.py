#!/usr/bin/env python3
"""The peer for adaptive implicit steps: cases/heat_implicit.yaml's equations integrated by PETSc TS (Debian's
petsc4py 3.18 with hypre) with its adaptive BDF2 and TSAdaptBasic, for BENCHMARKS.md (issue 44). Not a dependency
of stencil: it runs with the system Python.

    python tools/time_bench.py implicit --n 511 --out DIR            (writes DIR/initial_511.npy, reference_511.npy)
    PETSC_DIR=/usr/lib/petscdir/petsc3.18/x86_64-linux-gnu-real \\
        /usr/bin/mpirun -n 2 /usr/bin/python3 tools/petsc_ts_peer.py DIR 511 --tols 1e-2 3e-3 1e-3 [--repeats 3]

The same semi-discrete system stencil steps: u_t = L u + b on the n x n interior points (spacing 1 / (n + 1),
alpha 1), L the 5-point Laplacian with the walls' Dirichlet values in b (the top side at 100, the others at 0),
the same initial field (stencil's, read from DIR), to t = 0.1, given to TS as an implicit function F(t, u, u_t) =
u_t - L u - b with its Jacobian shift I - L (so every method treats it implicitly; as a right-hand side, ARKIMEX
would take it explicitly). TS: TSBDF of order 2 with TSAdaptBasic (PETSc's
defaults: safety 0.9, clipping [0.1, 10]), the local error in the max norm with atol = tol x 100 (stencil's
tolerance is relative to max |u| = 100) and rtol 0, first dt 5e-4 (the case's); the problem linear (TS_LINEAR,
SNES ksponly), each step's system solved by conjugate gradients preconditioned with hypre's BoomerAMG to a
relative residual of 1e-6 (the case's run.tolerance; stencil measures its own in the max norm, PETSc in the
2-norm). Prints one JSON line per tolerance: TS steps, rejected steps, linear solves, KSP iterations, TSSolve
seconds (median of --repeats), the error at t = 0.1 against DIR's reference (max |u - ref| / max |ref|).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np


DEFAULTS = {"ts_type": "bdf", "ts_bdf_order": 2, "ts_adapt_type": "basic", "ts_adapt_wnormtype": "infinity",
            "ts_max_snes_failures": -1, "ts_max_reject": -1, "snes_type": "ksponly", "ksp_type": "cg", "ksp_rtol": 1e-6,
            "pc_type": "hypre", "pc_hypre_type": "boomeramg"}


def build(PETSc, n: int):
    da = PETSc.DMDA().create([n, n], stencil_width=1, stencil_type=PETSc.DMDA.StencilType.STAR)
    h2 = float(n + 1) ** 2
    A = da.createMatrix()
    (xs, xe), (ys, ye) = da.getRanges()
    row, col = PETSc.Mat.Stencil(), PETSc.Mat.Stencil()
    for j in range(ys, ye):
        for i in range(xs, xe):
            row.index = (i, j)
            for di, dj, v in ((0, 0, -4.0 * h2), (-1, 0, h2), (1, 0, h2), (0, -1, h2), (0, 1, h2)):
                if 0 <= i + di < n and 0 <= j + dj < n:
                    col.index = (i + di, j + dj)
                    A.setValueStencil(row, col, v)
    A.assemble()
    b = da.createGlobalVec()
    with da.getVecArray(b) as a:
        a[:, :] = 0.0
        if ye == n:
            a[:, n - 1] = 100.0 * h2  # the top side's value beyond the last row (y the second DMDA index)
    return da, A, b


def solve(PETSc, da, A, b, u0: np.ndarray, tol: float):
    ts = PETSc.TS().create(comm=PETSc.COMM_WORLD)
    ts.setDM(da)
    ts.setProblemType(PETSc.TS.ProblemType.LINEAR)
    J = A.duplicate(copy=True)

    def residual(ts, t, u, udot, f):  # F = u_t - A u - b: the whole right-hand side implicit, for every method
        A.mult(u, f)
        f.axpy(1.0, b)
        f.aypx(-1.0, udot)

    def jacobian(ts, t, u, udot, shift, Jm, P):  # shift I - A
        A.copy(Jm, structure=PETSc.Mat.Structure.SAME_NONZERO_PATTERN)
        Jm.scale(-1.0)
        Jm.shift(shift)

    ts.setIFunction(residual, da.createGlobalVec())
    ts.setIJacobian(jacobian, J, J)
    u = da.createGlobalVec()
    with da.getVecArray(u) as a:
        (xs, xe), (ys, ye) = da.getRanges()
        a[:, :] = u0[ys:ye, xs:xe].T
    ts.setTime(0.0)
    ts.setMaxTime(0.1)
    ts.setExactFinalTime(PETSc.TS.ExactFinalTime.MATCHSTEP)
    ts.setTimeStep(5e-4)
    ts.setMaxSteps(10**6)
    ts.setTolerances(rtol=0.0, atol=tol * 100.0)
    opts = PETSc.Options()
    for key, value in DEFAULTS.items():  # options given on the command line win
        if not opts.hasName(key):
            opts[key] = value
    ts.setFromOptions()
    PETSc.COMM_WORLD.barrier()
    t0 = time.perf_counter()
    ts.solve(u)
    PETSc.COMM_WORLD.barrier()
    seconds = time.perf_counter() - t0
    out = {"steps": ts.getStepNumber(), "rejected": ts.getStepRejections(), "solves": ts.getSNESIterations(),
           "ksp_iterations": ts.getKSPIterations(), "seconds": seconds, "t": ts.getTime()}
    return u, out


def gathered(PETSc, da, u, n: int) -> np.ndarray | None:
    """The whole field on rank 0 as (rows y, columns x)."""
    scatter, whole = PETSc.Scatter.toZero(da.createNaturalVec())
    natural = da.createNaturalVec()
    da.globalToNatural(u, natural)
    scatter.scatter(natural, whole)
    return whole.getArray().reshape(n, n).copy() if PETSc.COMM_WORLD.rank == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("n", type=int)
    ap.add_argument("--tols", type=float, nargs="+", default=[1e-2, 3e-3, 1e-3])
    ap.add_argument("--repeats", type=int, default=3)
    args, petsc_args = ap.parse_known_args()  # the rest are PETSc's options (-ts_monitor, -log_view ...)
    import petsc4py

    petsc4py.init(sys.argv[:1] + petsc_args)
    from petsc4py import PETSc

    d = Path(args.dir)
    u0, ref = np.load(d / f"initial_{args.n}.npy"), np.load(d / f"reference_{args.n}.npy")
    da, A, b = build(PETSc, args.n)
    for tol in args.tols:
        runs = []
        for _ in range(args.repeats):
            u, info = solve(PETSc, da, A, b, u0, tol)
            runs.append(info)
        field = gathered(PETSc, da, u, args.n)
        if PETSc.COMM_WORLD.rank == 0:
            o = PETSc.Options()
            row = {"peer": f"PETSc TS {o.getString('ts_type')} + TSAdaptBasic, {o.getString('ksp_type')} + "
                           f"{o.getString('pc_type')}", "ranks": PETSc.COMM_WORLD.size, "tol": tol,
                   **{k: v for k, v in runs[-1].items() if k != "seconds"},
                   "seconds": statistics.median(r["seconds"] for r in runs), "repeats": [r["seconds"] for r in runs],
                   "error": float(np.abs(field - ref).max() / np.abs(ref).max())}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
