"""The record's account of a steady-state solve (laplace): how it stopped, how fast the residual fell, what
the residual says about the error, and (multigrid) where each level's time went.

- relative residual: max |g - A u| / max |g - A u_0|, the max norm (exact in any reduction order, so the
  same on every rank count); the initial field's residual is the unit (run.tolerance).
- reduction per iteration: the geometric mean of the residual's fall per iteration (or cycle) between the
  first and the last check of this run.
- Jacobi's error bound (jacobi_bound): the last sweep's update d is the residual of the field before it, and the
  final field's residual is no larger (max norm). Where alpha is a number, the error of the final field is at most
  |A^-1| max|d| (max norm: the barrier function of solver.core.exact.inverse_bound, where an axis has two
  Dirichlet sides) and at most rho / (1 - rho) |d|_2 (the iteration is symmetric; rho an upper bound on its
  spectral radius, a convective side counted as Neumann), whichever is smaller: bounds in exact arithmetic, not
  estimates. With rho near 1 a small update is not a small error. Where alpha is a field, or rho is 1 (no
  Dirichlet side), no bound is known and the record says so; where the bound reaches the final field's whole
  range (max - min), it says that it bounds nothing.
- multigrid throughput: the bytes its kernels move per cycle, counted (array passes x points x itemsize, as
  the time loop counts 2 x itemsize per update), over the measured time per cycle, against the copy rate.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import boundary, stops

# array passes per point of a level, per verb (reads + writes of whole fields; tables and coarse fields aside)
PASSES = {"sweep": 2, "sweep_g": 3, "residual": 2, "residual_g": 3, "restrict": 1, "prolong": 2, "clear": 1,
          "max": 1}


def jacobi_rho(case) -> float:
    """An upper bound on the spectral radius of the Jacobi iteration (alpha a number): 2 wx cos(theta_x) +
    2 wy cos(theta_y) of the lowest mode of the sides' kinds, a convective side taken as Neumann (its ghost puts a
    weight between Dirichlet's 0 and Neumann's 1 on the first point, and the largest eigenvalue of a symmetric
    nonnegative matrix grows with its entries: Perron-Frobenius). Exact with Dirichlet, Neumann and periodic sides."""
    from ..core.physics import weights

    w, k = weights(case), {s: ("neumann" if v == "convective" else v) for s, v in boundary.kinds(case).items()}
    theta = []
    for axis, n in (("x", case.grid.nx), ("y", case.grid.ny)):
        lo, hi = (k[s] for s in boundary.AXIS_SIDES[axis])
        lowest = 1 if "dirichlet" in (lo, hi) else 0
        theta.append(boundary.axis_mode(lo, hi, n, lowest, np.arange(0))[1])
    return 2 * w.wx * math.cos(theta[0]) + 2 * w.wy * math.cos(theta[1])


def jacobi_bound(case, last_update: float, update_l2: float | None) -> tuple[float | None, str]:
    """(a bound on max |u - u*| of the final field, how it was obtained) from the last sweep's update (its max and its
    2-norm over every point; module docstring), or (None, why there is none)."""
    from ..core.exact import inverse_bound

    if case.alpha_field:
        return None, ("no bound known: alpha is a field, so neither the barrier function nor the iteration's spectral "
                      "radius is known in closed form")
    found = []
    inv = inverse_bound(case)
    if inv is not None:
        found.append((inv * last_update, f"|A^-1| max|update| with |A^-1| <= {inv:.3g} (max norm)"))
    rho = jacobi_rho(case)
    if rho < 1 and update_l2 is not None:
        found.append((rho / (1 - rho) * update_l2, f"rho / (1 - rho) |update|_2 with rho <= {rho:.8f}"))
    if not found:
        return None, ("no bound known: without a Dirichlet side the iteration's spectral radius is 1 (the field's "
                      "level is not fixed by the sides)")
    return min(found)


def solver_record(facts: dict | None, rows: list[dict], case) -> dict | None:
    """The record's `solver` section (None for heat)."""
    if not facts:
        return None
    if "solves" in facts and "newton" in facts:  # Newton's iterations each step (solver.nonlinear)
        out = implicit_record(facts, rows, "Newton iterations") | mg_settings(case) | {"krylov": "gmres"}
        nw = {k: v for k, v in facts["newton"].items() if k != "iterations"}
        return {**out, "method": "newton", "newton": nw, "cycles_per_iteration": nw["cycles"] / max(out["cycles"], 1)}
    if "solves" in facts:
        settings = mg_settings(case)
        return implicit_record(facts, rows, "iterations" if settings["krylov"] == "cg" else "cycles") | settings
    res = facts["residuals"]
    out = {k: facts[k] for k in ("method", "iterations", "first_iteration", "initial_residual", "tolerance", "converged",
                                 "stopped_by")}
    out["history"] = [{"iteration": k, "residual": r, "relative": rel} for k, r, rel in res]
    if res:
        out["final_residual"], out["final_relative"] = res[-1][1], res[-1][2]
        out["reduction_per_iteration"] = reduction(res)
    elif facts["initial_residual"] is not None:  # no check after the first: the initial field's residual is the last
        out["final_residual"] = facts["initial_residual"]
        out["final_relative"] = 0.0 if facts["initial_residual"] == 0 else 1.0
    if facts.get("floor") is not None:  # measured when the residual stopped halving (solver.core.stops)
        out["rounding_floor"] = facts["floor"]
    if facts["method"] == "jacobi":
        out["contraction"] = jacobi_rho(case) if not case.alpha_field else None
        if res:
            out["error_bound"], out["error_bound_how"] = jacobi_bound(case, res[-1][1], facts.get("update_l2"))
        out["field_range"] = facts.get("field_range")
        out["update_l2"] = facts.get("update_l2")
    else:
        out["cycle"] = facts["cycle"]
        out["levels"] = level_table(facts["levels"], rows)
        out.update(mg_settings(case))
    if facts["method"] == "newton":
        out["newton"] = newton_record(facts["newton"], res)
        out["cycles_per_iteration"] = out["newton"]["cycles"] / max(len(out["newton"]["iterations"]), 1)
        out["krylov"] = "gmres"
    out["ended"] = ending(out)
    return out


def newton_record(newton: dict, res: list) -> dict:
    """Newton's iterations as the record keeps them: each one's residual (max norm, relative), forcing term, GMRES
    iterations and the relative linear residual they reached, multigrid cycles, step length; the convergence order
    the last iterations show (log(r_k+1 / r_k) / log(r_k / r_k-1): 2 for quadratic, 1 for linear)."""
    rows = []
    for entry, (k, r, rel) in zip(newton["iterations"], res[-len(newton["iterations"]):] if newton["iterations"] else []):
        rows.append({**entry, "residual": r, "relative": rel})
    out = {k: v for k, v in newton.items() if k != "iterations"}
    out["iterations"] = rows
    out["orders"] = orders([h[2] for h in res])
    return out


def orders(rel: list[float]) -> list[float]:
    """The convergence order each iteration shows from the relative residuals (module function newton_record)."""
    out = []
    for a, b, c in zip(rel, rel[1:], rel[2:]):
        if 0 < c < b < a:
            out.append(math.log(c / b) / math.log(b / a))
    return out


def mg_settings(case) -> dict:
    """What the record says of the multigrid that ran: krylov (cg: conjugate gradients preconditioned by a cycle, or
    none), sweeps before and after the coarse correction, the smoother."""
    m = case.multigrid
    return {"krylov": case.krylov, "pre": m.pre, "post": m.post, "smoother": m.smoother}


def method_text(s: dict, count: int | None = None) -> str:
    """The method that ran, in words (with `count`, how many of its units ran): Jacobi iterations; multigrid cycles
    (kind, sweeps, levels, smoother), or conjugate gradients preconditioned by one such cycle an iteration; implicit
    steps with their solves."""
    n = "" if count is None else f"{count} "
    if s["method"] == "jacobi":
        return f"{n}Jacobi iterations (one sweep of the 5-point update each)"
    if s["method"] == "newton":
        levels = len(s["levels"])
        sweeps = f"({s['pre']},{s['post']})"
        jac = "exact Jacobian" if s["newton"]["jacobian"] == "newton" else "Picard's Jacobian (dk/dT left out)"
        solve = (f"GMRES preconditioned by one multigrid {s['cycle']}{sweeps}-cycle over {levels} "
                 f"level{'s' if levels != 1 else ''} with {s['smoother']} smoothing")
        if "scheme" in s:
            return f"{n}implicit {s['scheme']} steps, each by Newton's method ({jac}), its linear steps by {solve}"
        return f"{n}Newton iterations ({jac}), each step's linear solve by {solve}"
    levels = len(s["levels"])
    sweeps = f"({s['pre']},{s['post']})" if "pre" in s else ""  # (records before 0.2 did not say)
    where = f"over {levels} level{'s' if levels != 1 else ''}" + (f" with {s['smoother']} smoothing"
                                                                  if s.get("smoother") else "")
    if s.get("krylov") == "cg":
        solve = (f"conjugate gradients, each iteration preconditioned by one multigrid {s['cycle']}{sweeps}-cycle "
                 f"{where}")
        unit = "iterations of "
    else:
        solve, unit = f"multigrid {s['cycle']}{sweeps}-cycles {where}", ""
    if "scheme" in s:
        return f"{n}implicit {s['scheme']} steps, each one linear solve by {solve}"
    return f"{n}{unit}{solve}" if count is not None else solve


WHY = {"floor": "at the rounding floor", "max_cycles": "at multigrid.max_cycles", "diverged": "diverging",
       "stalled": "stalled far above the rounding floor", "overflow": "with NaN or Inf"}  # an implicit solve's end


def implicit_record(facts: dict, rows: list[dict], unit: str = "cycles") -> dict:
    """Implicit heat: each step's solve (cycles, the residual's unit, relative residual reached, why it ended)."""
    solves = facts["solves"]
    cycles = [c for _, c, _, _, _ in solves]
    worst = max((rel for _, _, _, rel, _ in solves), default=None)
    out = {"method": "multigrid", "scheme": facts["scheme"], "cycle": facts["cycle"], "tolerance": facts["tolerance"],
           "steps": len(solves), "cycles": sum(cycles),
           "cycles_per_step": {"min": min(cycles), "mean": sum(cycles) / len(cycles), "max": max(cycles)} if cycles else None,
           "worst_relative": worst,
           "unconverged_steps": [k for k, _, _, _, why in solves if why != "tolerance"],
           "history": [{"step": k, "cycles": c, "unit": g, "relative": rel, "ended": why} for k, c, g, rel, why in solves],
           "levels": level_table(facts["levels"], rows), "unit": unit}
    out["ended"] = implicit_ending(out, solves)
    return out


ADAPTIVE = "tr-bdf2 (adaptive)"  # the scheme an adaptive run's record names (solver.multigrid.adaptive)


def implicit_ending(out: dict, solves: list) -> str:
    """One sentence: the steps, their cycles, and whether every solve reached the tolerance (if not, why not)."""
    if not solves:
        return "no steps"
    tol, n = out["tolerance"], len(solves)
    what = "stage solves (two a step, rejected steps included)" if out["scheme"] == ADAPTIVE else f"{out['scheme']} steps"
    head = f"{n} {what}, {out['cycles']} {out.get('unit', 'cycles')}"
    if out["cycles"] == 0:
        return f"{head}: every step's field already solved its equations (each step's initial residual was 0)"
    head += f" ({out['cycles_per_step']['mean']:.1f} per step, at most {out['cycles_per_step']['max']})"
    bad = [why for *_, why in solves if why != "tolerance"]
    if not bad:
        return f"{head}; every solve reached the relative residual {tol:.0e} (worst {out['worst_relative']:.1e})"
    kinds = ", ".join(f"{bad.count(w)} {WHY.get(w, w)}" for w in dict.fromkeys(bad))
    return f"{head}; {len(bad)} step(s) stopped above the tolerance {tol:.0e}: {kinds} (worst {out['worst_relative']:.1e})"


def reduction(res: list) -> float | None:
    """Geometric mean of the residual's fall per iteration between the first and last check."""
    (k0, r0, _), (k1, r1, _) = res[0], res[-1]
    if k1 <= k0 or r0 <= 0 or r1 <= 0:
        return None
    return (r1 / r0) ** (1.0 / (k1 - k0))


def ending(out: dict) -> str:
    """One sentence from the measured figures: converged (the test that held), the initial field already a
    solution, stopped at the rounding floor, stalled above it, diverged, stopped by a signal, or out of
    iterations (slowly, for multigrid, when the residual fell less than stops.SLOW per cycle)."""
    what = "cycles" if out["method"] == "multigrid" and out.get("krylov") != "cg" else "iterations"
    if out["method"] == "newton":
        what = "Newton iterations"
    rel, n = out.get("final_relative"), out["first_iteration"] + out["iterations"]  # a restart's too: the field's
    rel_text = f"relative residual {rel:.2e}" if rel is not None else "no residual checked"
    r0, stop = out["initial_residual"], out["stopped_by"]
    if out["converged"]:
        if r0 == 0:
            return "converged: the initial field already solves the equations (max |g - A u_0| = 0)"
        if out.get("final_residual") == 0:
            return f"converged: the residual is exactly 0 after {n} {what}"
        return f"converged: {rel_text} < tolerance {out['tolerance']:.1e} after {n} {what}"
    floor = out.get("rounding_floor")
    floor_rel = f"{floor / r0:.1e}" if floor is not None and r0 else "not measured"
    if stop == "floor":
        tol = out["tolerance"]
        how = "reached" if out["method"] == "newton" else "stopped falling"  # (Newton stops at its first iterate there)
        return (f"stopped at the rounding floor: {rel_text} {how} after {n} {what}, within the dtype's "
                f"rounding floor ({floor_rel} relative: {stops.FLOOR_ULPS:g} eps x the largest value); "
                + (f"run.tolerance {tol:.1e} is below it: the dtype goes no further" if tol else
                   "run.tolerance null: this is as far as the field's dtype goes"))
    newton = out["method"] == "newton"
    if stop == "line_search":
        return (f"stopped: Newton's line search found no step that lowers the residual after {n} {what} ({rel_text}); "
                "the linear steps are not descent directions here: check the case's data (k(T) within its table, "
                "temperatures), or raise newton.max_linear")
    if stop == "stalled":
        return (f"stalled: {rel_text} stopped falling after {n} {what}, far above the rounding floor ({floor_rel} "
                "relative): " + ("the Newton steps no longer reduce the residual; check newton.max_linear and the "
                                 "case's data" if newton else
                                 "the cycles no longer reduce the residual; check multigrid.smoother, omega, pre and "
                                 "post"))
    if stop == "diverged" and newton:
        best = min(h["relative"] for h in out["history"])
        return (f"diverged: the residual grew to {rel_text} after {n} {what} (best {best:.2e}); check the case's "
                "data, or newton.line_search: backtracking")
    if stop == "diverged":
        best = min(h["relative"] for h in out["history"])
        return (f"diverged: the residual grew to {rel_text} after {n} {what} (best {best:.2e}): the cycles amplify "
                "the error; check multigrid.smoother, omega, pre and post")
    if stop == "signal":
        return f"stopped by a signal after {n} {what}: {rel_text}"
    text = f"not converged: {rel_text} after {n} {what} (run.steps reached)"
    fall = out.get("reduction_per_iteration")
    if out["method"] == "multigrid" and fall is not None and fall > stops.SLOW:
        text += (f"; the residual fell only {fall:.2f} per cycle, slowly (a working cycle leaves 0.1-0.2): check "
                 "multigrid.smoother and multigrid.omega")
    return text


def level_table(levels: list[dict], rows: list[dict]) -> list[dict]:
    """Each level's description with its compute/comm/wait/other seconds (largest over ranks)."""
    out = []
    for lev in levels:
        per = [r.get("levels", {}).get(lev["level"], {}) for r in rows]
        secs = {s: max((p.get(s, 0.0) for p in per), default=0.0) for s in ("compute", "comm", "wait", "other")}
        out.append({**lev, "seconds": secs})
    return out


def cycle_bytes(case, levels: list[dict], pre: int, post: int, made: bool = False, krylov: str = "none",
                kind: str = "V") -> int:
    """Bytes the kernels move per cycle, counted (module docstring): each level's passes times its visits in one
    `kind` cycle (V: once; W: 2^i; F: i + 1), level 0 reading g where it has one (a source, an implicit step's
    right-hand side), every sweep and residual reading the two face fields where alpha is a field, and with krylov cg
    conjugate gradients' own passes (krylov_passes). A plain cycle's passes, or (made) those this run made: a level
    whose sweeps run two a pass (its record row's `passes`) counts its passes as they are (tiled_passes)."""
    item = np.dtype(case.numerics.dtype).itemsize
    g0, coef = level0_rhs(case, krylov), COEFFICIENT_PASSES * bool(case.alpha_field)
    total = 0.0
    for i, lev in enumerate(levels):
        g = i > 0 or g0
        if lev["solve"] != "smoothing":
            passes = PASSES["residual_g"] + 2 + coef
        elif made and lev.get("passes") == "two sweeps a pass":
            passes = tiled_passes(i, lev, pre, post, g)
        else:
            passes = ((pre + post) * (PASSES["sweep_g" if g else "sweep"] + coef) + PASSES["residual_g" if g else
                      "residual"] + coef + PASSES["restrict"] + PASSES["prolong"] + (PASSES["clear"] if i > 0 else 0))
            if i == 0:
                passes += PASSES["residual"] + PASSES["max"]  # the stop test's residual
        total += passes * lev["nx"] * lev["ny"] * item * visits(kind, i)
    if krylov == "cg":
        total += (KRYLOV_PASSES + coef) * levels[0]["nx"] * levels[0]["ny"] * item
    return int(total)


# floating-point operations per point, per verb, counted from the expressions of solver/backends/mg_ops.py (adds,
# multiplies, divides; loads, stores and comparisons not counted): sweep / residual with wx, wy (alpha a number) or
# face fields ("v": vsmooth, vresidual), with a right-hand side g ("_g"); restrict per coarse point (3 x 3 taps summed
# from zero, times the scale), prolong per fine point (2 x 2 taps and the add to u)
FLOPS = {"sweep": 7, "sweep_g": 9, "vsweep": 15, "vsweep_g": 16, "residual": 6, "residual_g": 7, "vresidual": 13,
         "vresidual_g": 14, "restrict": 25, "prolong": 13, "dot": 2, "axpy": 2}
COEFFICIENT_PASSES = 2  # alpha a field: a sweep or a residual also reads the east and north face fields
KRYLOV_PASSES = 17  # conjugate gradients per iteration on the finest level: q = A p (2), two dot products (2 x 2),
#                     two axpys (2 x 3), p = z + beta p (3), z and its spare cleared (2)


def visits(kind: str, i: int) -> int:
    """How often one cycle of `kind` visits level i (V: once; W: twice each coarser level, 2^i; F: an F-cycle at each
    level followed by a V-cycle, i + 1)."""
    return {"W": 2**i, "F": i + 1}.get(kind, 1)


def level0_rhs(case, krylov: str = "none") -> bool:
    """Whether the finest level's verbs read a right-hand side g: a Poisson source, an implicit step's right-hand
    side, or conjugate gradients' preconditioning cycle (its g is the residual r)."""
    return bool(case.physics.source) or case.implicit or krylov == "cg"


def cycle_flops(case, levels: list[dict], pre: int, post: int, krylov: str = "none", kind: str = "V") -> int:
    """Floating-point operations of one cycle, counted as cycle_bytes counts its bytes (FLOPS per point per verb; the
    coarsest level's dense solve e += M r: 2 n^2 for its n points)."""
    v, g0 = "v" if case.alpha_field else "", level0_rhs(case, krylov)
    total = 0
    for i, lev in enumerate(levels):
        n, g = lev["nx"] * lev["ny"], "_g" if i > 0 or g0 else ""
        if lev["solve"] != "smoothing":
            work = FLOPS[f"{v}residual_g"] * n + 2 * n * n
        else:
            work = ((pre + post) * FLOPS[f"{v}sweep{g}"] + FLOPS[f"{v}residual{g}"] + FLOPS["prolong"]) * n
            coarse = levels[i + 1]["nx"] * levels[i + 1]["ny"] if i + 1 < len(levels) else 0
            work += FLOPS["restrict"] * coarse
            if i == 0:
                work += FLOPS[f"{v}residual{g}"] * n  # the stop test's residual
        total += work * visits(kind, i)
    if krylov == "cg":  # q = A p, (p, q) and (r, z), x and r updated, p = z + beta p
        total += (FLOPS[f"{v}residual"] + 2 * FLOPS["dot"] + 3 * FLOPS["axpy"]) * levels[0]["nx"] * levels[0]["ny"]
    return total


def tiled_passes(i: int, lev: dict, pre: int, post: int, g: bool) -> float:
    """Array passes per point of a level whose sweeps run two a pass (solver/multigrid/cycle.py `_tiled`): each pass
    reads u (and g) and writes u; the last pre-pass writes r as well, which the restriction reads; the prolongation
    rides on the first post-pass (its coarse field aside, as for a plain cycle); a coarse level's first pass reads
    no u (zeros) and needs no clear; level 0's stop test costs nothing where it is folded into the last pass."""
    per = PASSES["sweep_g" if g else "sweep"]
    passes = (-(-pre // 2) + -(-post // 2)) * per + 1 + PASSES["restrict"]
    if i > 0 and pre:
        passes -= 1
    if i == 0 and lev.get("stop_test") != "in the last sweep's pass":
        passes += PASSES["residual"] + PASSES["max"]
    return passes


def update_flops(case) -> int:
    """Floating-point operations of one explicit update or Jacobi sweep of a point, counted from the forms of
    solver/core/physics.py: wc u + wx (W + E) + wy (S + N), 7 (3 multiplies, 4 adds); the flux form (alpha a field,
    heat) 12; the Jacobi form with face fields 15 (its division included); a source adds 1."""
    if not case.alpha_field:
        base = 7
    else:
        base = 15 if case.physics.equation == "laplace" else 12
    return base + bool(case.physics.source)


def mg_throughput(case, rows: list[dict], ceiling: dict | None, solver: dict) -> dict | None:
    """The multigrid run's figures in the time loop's throughput shape (per cycle, or per implicit step: its cycles
    and the update that makes its right-hand side): bytes and flops counted (cycle_bytes, cycle_flops), over the
    measured time."""
    from ..core.operator import streams

    steps = rows[0]["steps"]  # timed steps: cycles (laplace), or implicit time steps
    solve = max(r["loop"] - r["io"] for r in rows)
    implicit = "scheme" in solver
    cycles = (solver["cycles_per_step"] or {"mean": 0})["mean"] if implicit else solver.get("cycles_per_iteration", 1.0)
    if implicit and solver["method"] == "newton":  # the multigrid cycles of a step's Newton iterations
        cycles = solver["newton"]["cycles"] / max(solver["steps"], 1)
    if steps == 0 or solve <= 0 or not cycles:  # no cycle ran (every step's field already solved): no rate
        return None
    m, levels, krylov = case.multigrid, solver["levels"], solver.get("krylov", "none")
    per_cycle = cycle_bytes(case, levels, m.pre, m.post, krylov=krylov, kind=m.cycle)
    flops_cycle = cycle_flops(case, levels, m.pre, m.post, krylov=krylov, kind=m.cycle)
    points = case.grid.nx * case.grid.ny
    rhs_bytes = streams(case) * np.dtype(case.numerics.dtype).itemsize * points if implicit else 0
    rhs_flops = update_flops(case) * points if implicit else 0
    moved, flops = per_cycle * cycles + rhs_bytes, flops_cycle * cycles + rhs_flops
    per = solve / steps
    out = {"timed_steps": steps, "seconds_per_step": per, "mlups": points / per / 1e6,
           "effective_gbs": moved / per / 1e9, "bytes_per_cycle": per_cycle, "flops_per_cycle": flops_cycle,
           "gflops": flops / per / 1e9, "counted": "array passes and flops per point of each verb, per level",
           "per": "step" if implicit else "cycle", "per_second": 1 / per}
    if solver["method"] == "newton":  # a step is a Newton iteration (or an implicit step): its cycles counted only
        out.update(per="step" if implicit else "Newton iteration", cycles_per_iteration=cycles,
                   counted="the multigrid cycles' passes and flops only (the mean cycles per iteration); GMRES, the "
                           "Jacobian's and the residual's evaluations are not counted: a lower bound")
    if implicit:
        out.update(bytes_per_step=moved, flops_per_step=flops, cycles_per_second=cycles / per)
    total = sum(sum(lev["seconds"].values()) for lev in levels) or 1.0
    out["level_shares"] = [sum(lev["seconds"].values()) / total for lev in levels]
    tiled = sum(lev.get("passes") == "two sweeps a pass" for lev in levels)
    if tiled:  # the passes actually made (fewer than a plain cycle's: fraction_of_copy above 1 only by that)
        made = cycle_bytes(case, levels, m.pre, m.post, made=True, krylov=krylov, kind=m.cycle) * cycles + rhs_bytes
        out.update(tiled_levels=tiled, bytes_made_per_cycle=(made - rhs_bytes) / cycles, made_gbs=made / per / 1e9)
    if ceiling:
        out["copy_gbs"] = ceiling["gbs"]
        out["fraction_of_copy"] = out["effective_gbs"] / ceiling["gbs"]
        out["copy_source"] = ceiling.get("source", "cached" if ceiling.get("cached") else "measured now")
        if tiled:
            out["fraction_of_copy_made"] = out["made_gbs"] / ceiling["gbs"]
    return out


def summary_rows(s: dict) -> list[tuple[str, str]]:
    """(quantity, value) lines for the run table."""
    rows = [("solver", method_text(s)), ("ended", s["ended"])]
    if s.get("reduction_per_iteration") is not None:
        rows.append(("reduction per " + ("cycle" if s["method"] == "multigrid" and s.get("krylov") != "cg" else
                                         "iteration"),
                     f"{s['reduction_per_iteration']:.4g} (geometric mean)"))
    if "error_bound" in s:
        rows.append(("error bound", error_text(s)))
    if "newton" in s and "scheme" not in s:
        rows.append(("Newton", newton_text(s["newton"])))
    elif "newton" in s:
        nw = s["newton"]
        rows.append(("Newton", f"{s['cycles']} Newton iterations in {s['steps']} steps, {nw['linear_iterations']} "
                               f"GMRES iterations and {nw['cycles']} multigrid cycles in all"))
    return rows


def newton_text(nw: dict) -> str:
    """Each Newton iteration in a few words: its relative residual, GMRES iterations, cycles and step length."""
    parts = [f"{e['iteration']}: {e['relative']:.2e} ({e['linear_iterations']} GMRES, {e['cycles']} cycles"
             + (f", step {e['step']:.3g}" if e["step"] != 1.0 else "") + ")" for e in nw["iterations"]]
    shown = parts if len(parts) <= 10 else parts[:5] + ["..."] + parts[-4:]
    text = "; ".join(shown) + f"; {nw['linear_iterations']} GMRES iterations and {nw['cycles']} cycles in all"
    if nw.get("orders"):
        text += f"; order shown by the last iterations {nw['orders'][-1]:.2f}"
    return text


def residual_scale(case, sol: dict) -> float:
    """What turns the solver's residual (max |g - A u| in its own form) into the equation's own: the operator's
    diagonal where the rows are scaled to a unit diagonal (alpha a number: implicit steps 1 + kappa (2/dx^2 +
    2/dy^2), laplace alpha (2/dx^2 + 2/dy^2)); 1 where multigrid works in the equation's units (alpha a field); the
    largest diagonal for Jacobi with face fields (each row divided by its own)."""
    from ..core.materials import alpha_range
    from ..core.physics import implicit_operator, spacing

    dx, dy = spacing(case)
    d = 2.0 / dx**2 + 2.0 / dy**2
    if "scheme" in sol and sol["method"] == "newton":  # G = R - c (u - u^n) / (theta dt): per unit time
        from ..core.physics import THETA, time_step

        return THETA[case.physics.scheme] * time_step(case)
    if "scheme" in sol:
        return 1.0 + implicit_operator(case)[1] * d
    if sol["method"] == "multigrid" and case.alpha_field or sol["method"] == "newton":
        return 1.0
    return alpha_range(case)[1] * d


def residual_energy(case, sol: dict | None, cell: float) -> tuple[float, str] | None:
    """(the most that the solves' residuals can leave in the energy balance, how) or None (explicit steps): the
    imbalance is cell (a point's area times C0 depth: solver.core.balance's factor, which makes the material form's
    terms J and W) x the sum of the equation's residual over the N points, so at most cell x N x
    residual_scale x max |g - A u|, summed over an implicit run's steps (each step's reached residual: its unit
    times its relative residual), or the final field's for a steady state (Jacobi: the last update, which bounds
    the final field's residual)."""
    if not sol:
        return None
    n, scale = case.grid.nx * case.grid.ny, residual_scale(case, sol)
    if "scheme" in sol:
        worst = sum(h["unit"] * h["relative"] for h in sol["history"])
        return cell * n * scale * worst, f"{n} points x {scale:.3g} x the sum over steps of max|g - A u|"
    if sol.get("final_residual") is None:
        return None
    return (cell * n * scale * sol["final_residual"],
            f"{n} points x {scale:.3g} x the final max|g - A u| {sol['final_residual']:.2e}")


def error_text(s: dict) -> str:
    """Jacobi's error bound (jacobi_bound) with how it was obtained, and where it exceeds the final field's whole
    range, that it bounds nothing; or why there is none."""
    bound, how, spread = s["error_bound"], s["error_bound_how"], s.get("field_range")
    if bound is None:
        return f"{how}; the last update {s['final_residual']:.2e} is not an error: use physics.solver: multigrid"
    text = f"max |u - u*| <= {bound:.2e} ({how}; exact arithmetic)"
    if spread is not None and bound >= spread:
        text += (f"; larger than the field's whole range ({spread:.2e}), so it bounds nothing: a smaller "
                 "run.tolerance, more steps or physics.solver: multigrid")
    return text


def markdown_lines(s: dict) -> list[str]:
    lines = ["## Solver", "", s["ended"] + ".", ""]
    lines += [f"- {k}: {v}" for k, v in summary_rows(s)[2:]]
    if "levels" in s:
        lines += ["", "| level | nx x ny | placement | compute | comm | wait | other (s, max over ranks) | passes |",
                  "|---|---|---|---|---|---|---|---|"]
        for lev in s["levels"]:  # (passes: how the level's verbs run; a tail's time is its first level's)
            t = lev["seconds"]
            lines.append(f"| {lev['level']} | {lev['nx']} x {lev['ny']} | {lev['placement']} | {t['compute']:.4f} | "
                         f"{t['comm']:.4f} | {t['wait']:.4f} | {t['other']:.4f} | {lev.get('passes', '')} |")
    hist = s["history"]
    if hist and "scheme" in s:
        shown = hist if len(hist) <= 12 else hist[:6] + hist[-6:]
        lines += ["", "| step | cycles | initial residual max abs(g - A u^n) | relative residual reached |",
                  "|---|---|---|---|"]
        lines += [f"| {h['step']} | {h['cycles']} | {h['unit']:.3e} | {h['relative']:.3e} |" for h in shown]
    elif hist:
        shown = hist if len(hist) <= 12 else hist[:6] + hist[-6:]
        lines += ["", "| iteration | max residual | relative |", "|---|---|---|"]
        lines += [f"| {h['iteration']} | {h['residual']:.3e} | {h['relative']:.3e} |" for h in shown]
    return lines + [""]
