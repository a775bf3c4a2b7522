#!/usr/bin/env python3
"""Issue 45's benchmark: a steady nonlinear plate (k(T) and a radiating side) to a relative residual of 1e-10,
stencil's Newton against the same grid's linear solve, and against PETSc's SNES on the same equations and cores.

    # stencil (the project's python): Newton, then the linear solve of the same grid (k constant, no radiation)
    python tools/nonlinear_bench.py stencil N [--backend numba|cupy] [--repeats 3] [--out DIR]
    mpirun -n 2 python tools/nonlinear_bench.py stencil N ...
    # the peer (the system's python and petsc4py 3.18; not a dependency of stencil)
    PETSC_DIR=/usr/lib/petscdir/petsc3.18/x86_64-linux-gnu-real \\
        /usr/bin/mpirun -n 2 /usr/bin/python3 tools/nonlinear_bench.py petsc N [--pc gamg|hypre] [--repeats 3]

The problem (PROBLEM): a 10 x 10 mm silicon plate, k = 148 (T / 300 K)^-1.3 W/(m K), 2e8 W/m^3 heating it evenly,
its bottom side held at 350 K, its top side convecting (h = 50 W/(m^2 K) to 300 K) and radiating (emissivity 0.9 to
300 K), its left and right sides insulated; N x N points, starting from 350 K. The equations are stencil's
(docs/nonlinear.md): the bottom wall one spacing below the first row, the others half a spacing out; faces the
harmonic mean of the two points' k at their own temperatures (the bottom wall's: the first point's and the wall's);
the top wall's temperature from the balance of the conduction over half a spacing at k of the mean temperature with
what it convects and radiates. The peer builds the same residual with numpy on a PETSc DMDA (an independent
implementation: its answer checks stencil's) and leaves the Jacobian to PETSc (colouring finite differences, the
default with a DMDA), SNES newtonls with its backtracking line search and Eisenstat-Walker forcing, GMRES
right-preconditioned (as stencil's) by GAMG or hypre's BoomerAMG. Both stop at max |R| <= 1e-10 max |R(u_0)|. Each prints one JSON line:
times (medians of --repeats; set-up apart), iterations, the residual reached, the hottest temperature.

Do not read timings from a loaded machine: run it where nothing else runs (docs/nonlinear.md says what is measured).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

PROBLEM = {"L": 0.01, "k0": 148.0, "T0": 300.0, "b": -1.3, "q": 2e8, "T_bottom": 350.0, "h": 50.0, "T_air": 300.0,
           "emissivity": 0.9, "T_sky": 300.0, "start": 350.0, "tolerance": 1e-10}
SIGMA = 5.670374419e-8


def case_data(n: int, backend: str, out: str, linear: bool = False) -> dict:
    p = PROBLEM
    k = 148.0 if linear else {"k0": p["k0"], "T0": p["T0"], "b": p["b"]}
    top = {"kind": "convective", "h": p["h"], "ambient": p["T_air"]}
    if not linear:
        top.update(emissivity=p["emissivity"], surroundings=p["T_sky"])
    return {"name": "nonlinear_bench" + ("_linear" if linear else ""), "grid": {"nx": n, "ny": n, "lx": p["L"], "ly": p["L"]},
            "materials": {"si": {"k": k, "C": 1.66e6}},
            "physics": {"material": "si", "equation": "laplace", "solver": "multigrid",
                        "source": [{"kind": "constant", "value": p["q"]}]},
            "boundary": {"bottom": p["T_bottom"], "top": top, "left": {"kind": "neumann"}, "right": {"kind": "neumann"}},
            "initial": {"kind": "constant", "value": p["start"]}, "run": {"steps": 100, "tolerance": p["tolerance"]},
            "backend": {"name": backend}, "output": {"dir": out, "vtk": False, "fields": False}}


def prepared(run):
    """`run` (a solver.run.Run) set up now, so that its execute() times and profiles the solve alone."""
    setup, run.setup = run.setup, lambda: None
    setup()
    return run


def stencil(args) -> None:
    from solver.case import validate_case
    from solver.parallel.comm import Comm
    from solver.run import Options, Run

    comm = Comm()
    if args.mpi:  # under mpirun: every rank
        from mpi4py import MPI

        comm = Comm(MPI.COMM_WORLD)
    rows, times, recs = {}, {False: [], True: []}, {}
    for k in range(args.repeats):  # Newton and the linear solve alternating: a drift of the machine hits both
        for linear in (False, True):
            c = validate_case(case_data(args.n, args.backend, str(Path(args.out) / f"{'lin' if linear else 'nl'}{k}"),
                                        linear))
            r = Run(c, comm, Options(ceiling=False, quiet=True, overwrite=True))
            if args.profile and not linear and k == 0 and comm.rank == 0:  # where Newton's time goes (host calls;
                import cProfile  # on a GPU the waits land on the calls that synchronise)
                import pstats

                prepared(r)  # the set-up unprofiled: the profile is the solve's
                prof = cProfile.Profile()
                recs[linear] = prof.runcall(r.execute)
                pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(args.profile)
                pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(args.profile)
            else:
                recs[linear] = r.execute()
            times[linear].append(recs[linear]["times"]["solve"])
            del r  # (its fields gone before the next run's set-up asks how much memory is free)
            gc.collect()
    for linear in (False, True):
        rec, s = recs[linear], recs[linear]["solver"]
        rows["linear" if linear else "newton"] = {
            "solve_s": statistics.median(times[linear]), "runs_s": times[linear], "setup_s": rec["times"].get("setup"), "ended": s["ended"],
            "iterations": s["iterations"], "cycles": s.get("newton", {}).get("cycles", s["iterations"]),
            "gmres": s.get("newton", {}).get("linear_iterations"),
            "hottest": (rec.get("answers") or {}).get("max", {}).get("value")}
    if comm.rank == 0:
        rows["ratio"] = rows["newton"]["solve_s"] / rows["linear"]["solve_s"]
        print(json.dumps({"tool": "stencil", "n": args.n, "ranks": comm.size, "backend": args.backend, **rows}))


# the peer ---------------------------------------------------------------------------------------------------------
def k_of(t):
    p = PROBLEM
    return p["k0"] * (t / p["T0"]) ** p["b"]


def harmonic(a, b):
    return 2.0 * a * b / (a + b)


def top_loss(u, dy):
    """What each top point loses per unit wall area: the film's balance (k((u + x) / 2) / (dy / 2)) (u - x) = h (x -
    T_air) + eps sigma (x^4 - T_sky^4), solved for the wall temperature x by bisection (robust; the peer's own)."""
    p = PROBLEM
    lo = np.minimum(np.minimum(u, p["T_air"]), p["T_sky"])
    hi = np.maximum(np.maximum(u, p["T_air"]), p["T_sky"])
    for _ in range(80):
        x = 0.5 * (lo + hi)
        g = k_of(0.5 * (u + x)) / (dy / 2) * (u - x) - p["h"] * (x - p["T_air"]) - p["emissivity"] * SIGMA * (
            x**4 - p["T_sky"] ** 4)
        lo, hi = np.where(g > 0, x, lo), np.where(g > 0, hi, x)
    x = 0.5 * (lo + hi)
    return p["h"] * (x - p["T_air"]) + p["emissivity"] * SIGMA * (x**4 - p["T_sky"] ** 4)


def petsc(args) -> None:
    import petsc4py

    petsc4py.init([a for a in sys.argv if a.startswith("-")])
    from petsc4py import PETSc

    p, n = PROBLEM, args.n
    dx, dy = p["L"] / n, p["L"] / (n + 0.5)  # left/right half a spacing out, bottom one spacing, top half
    da = PETSc.DMDA().create([n, n], stencil_width=1, stencil_type=PETSc.DMDA.StencilType.STAR)
    local = da.createLocalVec()

    def residual(snes, x, f):
        da.globalToLocal(x, local)
        (i0, i1), (j0, j1) = da.getRanges()
        (gi0, gi1), (gj0, gj1) = da.getGhostRanges()
        u = np.full((i1 - i0 + 2, j1 - j0 + 2), p["T_bottom"])  # [i, j] (x first) from global i0 - 1, j0 - 1
        oi, oj = gi0 - (i0 - 1), gj0 - (j0 - 1)  # (no ghost beyond a physical side: the padding, never used)
        u[oi:oi + gi1 - gi0, oj:oj + gj1 - gj0] = local.getArray(readonly=True).reshape((gi1 - gi0, gj1 - gj0),
                                                                                        order="F")
        ui, uj = slice(1, i1 - i0 + 1), slice(1, j1 - j0 + 1)
        uu = u[ui, uj]
        k = k_of(uu)
        out = np.full(uu.shape, p["q"])
        for di, dj, hh in ((-1, 0, dx), (1, 0, dx), (0, -1, dy), (0, 1, dy)):
            nb = u[slice(ui.start + di, ui.stop + di), slice(uj.start + dj, uj.stop + dj)]
            gi = np.arange(i0, i1)[:, None] + di
            gj = np.arange(j0, j1)[None, :] + dj
            beyond_x = (gi < 0) | (gi >= n)
            bottom = (gj < 0)
            top = (gj >= n)
            nbv = np.where(bottom, p["T_bottom"], nb)
            face = harmonic(k, k_of(nbv)) * (nbv - uu) / hh**2
            face = np.where(beyond_x | top, 0.0, face)
            out += face
        if j1 == n:
            out[:, -1] -= top_loss(uu[:, -1], dy) / dy
        f.setArray(-out.ravel(order="F"))

    x = da.createGlobalVec()
    best = []
    for _ in range(args.repeats):
        x.set(p["start"])
        snes = PETSc.SNES().create()
        snes.setDM(da)
        snes.setFunction(residual, da.createGlobalVec())
        opts = PETSc.Options()
        opts["snes_type"] = "newtonls"
        opts["snes_linesearch_type"] = "bt"
        opts["snes_ksp_ew"] = None
        opts["snes_fd_color"] = None
        opts["ksp_type"] = "gmres"
        opts["ksp_pc_side"] = "right"  # the forcing term on the true residual (left: GAMG's preconditioned norm fell
        # while the true one grew 5-fold, and the line search failed)
        opts["pc_type"] = "gamg" if args.pc == "gamg" else "hypre"
        if args.pc == "hypre":
            opts["pc_hypre_type"] = "boomeramg"
        opts["snes_max_it"] = 50
        snes.setFromOptions()
        f0 = da.createGlobalVec()
        residual(snes, x, f0)
        r0 = f0.norm(PETSc.NormType.INFINITY)
        snes.setTolerances(atol=p["tolerance"] * r0, rtol=1e-30, stol=0.0)
        t = time.perf_counter()
        snes.solve(None, x)
        secs = time.perf_counter() - t
        f = da.createGlobalVec()
        residual(snes, x, f)
        best.append((secs, snes.getIterationNumber(), snes.getLinearSolveIterations(),
                     f.norm(PETSc.NormType.INFINITY) / r0, x.max()[1], str(snes.getConvergedReason())))
    if PETSc.COMM_WORLD.getRank() == 0:
        secs = statistics.median(b[0] for b in best)
        s, its, lin, rel, hot, why = best[-1]
        print(json.dumps({"tool": "petsc", "n": n, "ranks": PETSc.COMM_WORLD.getSize(), "pc": args.pc, "solve_s": secs,
                          "newton": its, "linear_iterations": lin, "relative": rel, "hottest": hot, "reason": why}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tool", choices=("stencil", "petsc"))
    ap.add_argument("n", type=int)
    ap.add_argument("--backend", default="numba")
    ap.add_argument("--pc", default="gamg", choices=("gamg", "hypre"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="output/nonlinear_bench")
    ap.add_argument("--mpi", action="store_true", help="stencil under mpirun: use every rank")
    ap.add_argument("--profile", type=int, default=0, help="stencil: cProfile the first Newton run after its set-up (its solve "
                    "counts the profiler too), the top N functions by own and by cumulative time to stderr")
    args, _ = ap.parse_known_args()
    (stencil if args.tool == "stencil" else petsc)(args)


if __name__ == "__main__":
    main()
