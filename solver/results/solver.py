"""The record's account of a steady-state solve (laplace): how it stopped, how fast the residual fell, what
the residual says about the error, and (multigrid) where each level's time went.

- relative residual: max |g - A u| / max |g - A u_0|, the max norm (exact in any reduction order, so the
  same on every rank count); the initial field's residual is the unit (run.tolerance).
- reduction per iteration: the geometric mean of the residual's fall per iteration (or cycle) between the
  first and the last check of this run.
- Jacobi's error estimate: an update (the residual) d leaves an error of up to about d / (1 - rho), rho the
  spectral radius of the Jacobi iteration (2 wx cos(theta_x) + 2 wy cos(theta_y) of the lowest mode the
  boundary kinds allow); with rho near 1 a small update is not a small error. Where the estimate reaches the
  final field's whole range (max - min), it says that it bounds nothing.
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
    """The spectral radius of the Jacobi iteration for the case's grid and boundary kinds."""
    from ..core.physics import weights

    w, k = weights(case), boundary.kinds(case)
    theta = []
    for axis, n in (("x", case.grid.nx), ("y", case.grid.ny)):
        lo, hi = (k[s] for s in boundary.AXIS_SIDES[axis])
        lowest = 1 if "dirichlet" in (lo, hi) else 0
        theta.append(boundary.axis_mode(lo, hi, n, lowest, np.arange(0))[1])
    return 2 * w.wx * math.cos(theta[0]) + 2 * w.wy * math.cos(theta[1])


def solver_record(facts: dict | None, rows: list[dict], case) -> dict | None:
    """The record's `solver` section (None for heat)."""
    if not facts:
        return None
    if "solves" in facts:
        return implicit_record(facts, rows)
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
        rho = jacobi_rho(case)
        out["contraction"] = rho
        if res:
            out["error_estimate"] = res[-1][1] / (1 - rho) if rho < 1 else float("inf")
        out["field_range"] = facts.get("field_range")
    else:
        out["cycle"] = facts["cycle"]
        out["levels"] = level_table(facts["levels"], rows)
    out["ended"] = ending(out)
    return out


WHY = {"floor": "at the rounding floor", "max_cycles": "at multigrid.max_cycles", "diverged": "diverging",
       "stalled": "stalled far above the rounding floor", "overflow": "with NaN or Inf"}  # an implicit solve's end


def implicit_record(facts: dict, rows: list[dict]) -> dict:
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
           "levels": level_table(facts["levels"], rows)}
    out["ended"] = implicit_ending(out, solves)
    return out


ADAPTIVE = "tr-bdf2 (adaptive)"  # the scheme an adaptive run's record names (solver.multigrid.adaptive)


def implicit_ending(out: dict, solves: list) -> str:
    """One sentence: the steps, their cycles, and whether every solve reached the tolerance (if not, why not)."""
    if not solves:
        return "no steps"
    tol, n = out["tolerance"], len(solves)
    what = "stage solves (two a step, rejected steps included)" if out["scheme"] == ADAPTIVE else f"{out['scheme']} steps"
    head = f"{n} {what}, {out['cycles']} cycles"
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
    what = "cycles" if out["method"] == "multigrid" else "iterations"
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
    floor_rel = f"{floor / r0:.1e}" if floor is not None and r0 else "?"
    if stop == "floor":
        tol = out["tolerance"]
        return (f"stopped at the rounding floor: {rel_text} stopped falling after {n} {what}, within the dtype's "
                f"rounding floor ({floor_rel} relative: {stops.FLOOR_ULPS:g} eps x the largest value); "
                + (f"run.tolerance {tol:.1e} is below it: the dtype goes no further" if tol else
                   "run.tolerance null: this is as far as the field's dtype goes"))
    if stop == "stalled":
        return (f"stalled: {rel_text} stopped falling after {n} {what}, far above the rounding floor ({floor_rel} "
                "relative): the cycles no longer reduce the residual; check multigrid.smoother, omega, pre and post")
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


def cycle_bytes(case, levels: list[dict], pre: int, post: int, made: bool = False) -> int:
    """Bytes the kernels move per cycle, counted (module docstring); level 0 of laplace has no g. A plain cycle's
    passes, or (made) those this run made: a level whose sweeps run two a pass (its record row's `passes`) counts
    its passes as they are (tiled_passes)."""
    item = np.dtype(case.numerics.dtype).itemsize
    total = 0
    for i, lev in enumerate(levels):
        g = i > 0
        if lev["solve"] != "smoothing":
            passes = PASSES["residual_g"] + 2
        elif made and lev.get("passes") == "two sweeps a pass":
            passes = tiled_passes(i, lev, pre, post, g)
        else:
            passes = ((pre + post) * PASSES["sweep_g" if g else "sweep"] + PASSES["residual_g" if g else "residual"]
                      + PASSES["restrict"] + PASSES["prolong"] + (PASSES["clear"] if g else 0))
            if i == 0:
                passes += PASSES["residual"] + PASSES["max"]  # the stop test's residual
        total += passes * lev["nx"] * lev["ny"] * item
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


def mg_throughput(case, rows: list[dict], ceiling: dict | None, solver: dict) -> dict | None:
    """The multigrid run's figures in the time loop's throughput shape (per cycle instead of per step)."""
    steps = rows[0]["steps"]  # timed steps: cycles (laplace), or implicit time steps
    solve = max(r["loop"] - r["io"] for r in rows)
    cycles = (solver["cycles_per_step"] or {"mean": 0})["mean"] if "scheme" in solver else 1.0
    if steps == 0 or solve <= 0 or not cycles:  # no cycle ran (every step's field already solved): no rate
        return None
    m = case.multigrid
    moved = cycle_bytes(case, solver["levels"], m.pre, m.post) * cycles
    per = solve / steps
    out = {"timed_steps": steps, "seconds_per_step": per, "mlups": case.grid.nx * case.grid.ny / per / 1e6,
           "effective_gbs": moved / per / 1e9, "bytes_per_cycle": moved / cycles, "counted": "array passes per level",
           "per": "step" if "scheme" in solver else "cycle"}
    total = sum(sum(lev["seconds"].values()) for lev in solver["levels"]) or 1.0
    out["level_shares"] = [sum(lev["seconds"].values()) / total for lev in solver["levels"]]
    tiled = sum(lev.get("passes") == "two sweeps a pass" for lev in solver["levels"])
    if tiled:  # the passes actually made (fewer than a plain cycle's: fraction_of_copy above 1 only by that)
        made = cycle_bytes(case, solver["levels"], m.pre, m.post, made=True) * cycles
        out.update(tiled_levels=tiled, bytes_made_per_cycle=made / cycles, made_gbs=made / per / 1e9)
    if ceiling:
        out["copy_gbs"] = ceiling["gbs"]
        out["fraction_of_copy"] = out["effective_gbs"] / ceiling["gbs"]
        out["copy_source"] = ceiling.get("source", "cached" if ceiling.get("cached") else "measured now")
        if tiled:
            out["fraction_of_copy_made"] = out["made_gbs"] / ceiling["gbs"]
    return out


def summary_rows(s: dict) -> list[tuple[str, str]]:
    """(quantity, value) lines for the run table."""
    rows = [("solver", s["method"] + (f", {s['cycle']}-cycles over {len(s['levels'])} levels" if "levels" in s else "")
             + (f", {s['scheme']} steps" if "scheme" in s else "")),
            ("ended", s["ended"])]
    if s.get("reduction_per_iteration") is not None:
        rows.append(("reduction per " + ("cycle" if s["method"] == "multigrid" else "iteration"),
                     f"{s['reduction_per_iteration']:.4g} (geometric mean)"))
    if "error_estimate" in s:
        rows.append(("error estimate", error_text(s)))
    return rows


def error_text(s: dict) -> str:
    """Jacobi's error estimate, and where it exceeds the final field's whole range, that it bounds nothing."""
    est, spread = s["error_estimate"], s.get("field_range")
    text = f"up to about {est:.2e} (residual / (1 - rho), rho = {s['contraction']:.8f})"
    if spread is not None and est >= spread:
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
