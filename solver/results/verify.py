"""Every run can prove itself: against the exact eigenmode, or against the numpy backend.

- initial.kind sine with zero Dirichlet values and zero fluxes (any boundary kinds): each rank compares
  its block with amplitude * factor**steps * mode; the error is max|u - exact| / max|exact| over all ranks.
- otherwise: rank 0 runs the numpy backend on one process for the same number of steps and
  compares block by block as they arrive. On the CPU the tolerance is zero (bitwise equality);
  on a GPU 1e-13 (float64) or 1e-5 (float32) relative.
- multigrid: the numpy backend running the same cycles on one process (bitwise on the CPU).
- laplace with constant Dirichlet sides, in addition: against the exact solution of the discrete equations
  (solver.core.exact), within the rigorous bound that the final residual gives (steady_state).
- heat with no Dirichlet side (Neumann and periodic sides only), in addition: the sum of u equals the
  initial sum plus the fluxes times the steps (exact in exact arithmetic), within
  8 eps (steps + 1) max(sum|u_0|, sum|u|): rounding of each update and of the weights.
"""

from __future__ import annotations

import numpy as np

from ..core.boundary import conserving, flux_per_step, make_fill
from ..core.decomp import decompose
from ..core.physics import eigenmode, exact_solution_available, exact_tolerance, mode_factor, weights
from ..core import exact
from ..io.fields import for_each_block, owned

GPU_RTOL = {"float64": 1e-13, "float32": 1e-5}
CONSERVATION_ULPS = 8.0  # per step, relative to sum |u|


def verify(layout, comm, backend, u, steps: int, residual: float | None = None, solves=None) -> dict:
    """layout: solver.core.layout.Layout; u: this rank's padded field after `steps` steps (collective);
    residual: laplace, the final max |g - A u| (for the steady-state check); solves: implicit heat, each
    step's (step, cycles, initial residual, relative residual reached) (the tolerances allow for them)."""
    case = layout.case
    if exact_solution_available(case) and case.physics.solver == "jacobi":
        result = _against_exact(layout, comm, backend, u, steps, solves)
    else:
        result = _against_reference(layout, comm, backend, u, steps)
    if residual is not None and exact.available(case):
        result["steady_state"] = steady_state(layout, comm, backend, u, residual)
        result["passed"] = bool(result["passed"] and result["steady_state"]["passed"])
    if case.physics.equation == "heat" and conserving(case):
        result["conservation"] = conservation(layout, comm, backend, u, steps, solves)
        result["passed"] = bool(result["passed"] and result["conservation"]["passed"])
    return result


def solve_allowance(case, solves) -> float:
    """Implicit heat: what the solves' residuals allow the eigenmode's relative error to grow by. A step
    solved to relative residual rho leaves a relative error of about rho dt alpha lambda in the mode (its
    residual is that share of the mode; other modes' errors decay faster than it), so the allowance is
    10 sum(rho_n max(1, dt alpha lambda)), lambda the mode's 5-point eigenvalue."""
    if not solves:
        return 0.0
    from ..core.physics import mode_eigenvalue, time_step

    z = time_step(case) * case.physics.alpha * mode_eigenvalue(case)
    return 10.0 * sum(rel for *_, rel in solves) * max(1.0, z)


def _against_exact(layout, comm, backend, u, steps: int, solves=None) -> dict:
    case, b = layout.case, layout.block
    exact = eigenmode(case, range(*b.rows), range(*b.cols), case.initial.value * mode_factor(case) ** steps)
    mine = owned(backend, u).astype(np.float64)
    err = comm.allmax(float(np.max(np.abs(mine - exact), initial=0.0)))
    scale = comm.allmax(float(np.max(np.abs(exact), initial=0.0)))
    if solves:  # implicit: a solve's error goes into every mode, slow ones too, and stays while the mode decays
        scale = abs(case.initial.value)  # so it is measured against the initial amplitude
    rel = err / scale if scale > 0 else err
    tol = exact_tolerance(case, steps) + solve_allowance(case, solves)
    return {"reference": f"exact discrete eigenmode k = {list(case.initial.k)} (sine initial, homogeneous boundaries)",
            "steps": steps, "max_abs_error": err, "relative_error": rel, "tolerance": tol, "passed": bool(rel <= tol)}


def steady_state(layout, comm, backend, u, residual: float) -> dict:
    """Laplace with constant Dirichlet sides: the field against the exact solution of the discrete equations
    (solver.core.exact), within what the residual allows: |u - u*| <= |A^-1| |g - A u| (a rigorous bound,
    exact.inverse_bound) plus rounding (16 eps (n + 1) max |u*|, n the points along the longer axis)."""
    case, b = layout.case, layout.block
    ref = exact.of_case(case)[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] if b.ny and b.nx else np.zeros((0, 0))
    mine = owned(backend, u).astype(np.float64)
    err = comm.allmax(float(np.max(np.abs(mine - ref), initial=0.0)))
    scale = comm.allmax(float(np.max(np.abs(ref), initial=0.0)))
    eps = float(np.finfo(case.numerics.dtype).eps)
    bound = exact.inverse_bound(case) * residual + 16 * eps * (max(case.grid.nx, case.grid.ny) + 1) * scale
    return {"reference": "exact solution of the discrete equations (sine series x sinh, constant sides)",
            "max_abs_error": err, "relative_error": err / scale if scale else err, "bound": bound,
            "passed": bool(err <= bound)}


def conservation(layout, comm, backend, u, steps: int, solves=None) -> dict:
    """sum(u) after `steps` against sum(u_0) + steps x the flux through the Neumann sides (collective).
    Implicit steps add what their residuals leave: sum over steps of N d max|g - A u| (d the operator's
    diagonal: the unit-diagonal residual times d is the equation's own)."""
    from ..core.initial import initial_block

    case = layout.case
    first = initial_block(case, layout.block).astype(np.float64)
    mine = owned(backend, u).astype(np.float64)
    s0, a0 = comm.allsum(float(first.sum())), comm.allsum(float(np.abs(first).sum()))
    s, a = comm.allsum(float(mine.sum())), comm.allsum(float(np.abs(mine).sum()))
    expected = s0 + steps * flux_per_step(case, weights(case))
    eps = float(np.finfo(case.numerics.dtype).eps)
    tol = CONSERVATION_ULPS * eps * (steps + 1) * max(a0, a)
    if solves:
        from ..core.physics import implicit_operator, spacing

        (dx, dy), (_, kappa) = spacing(case), implicit_operator(case)
        d = 1.0 + kappa * (2.0 / dx**2 + 2.0 / dy**2)
        tol += sum(r0 * rel for _, _, r0, rel in solves) * d * case.grid.nx * case.grid.ny
    return {"sum": s, "expected_sum": expected, "error": abs(s - expected), "tolerance": tol,
            "passed": bool(abs(s - expected) <= tol)}


def reference_field(case, steps: int) -> np.ndarray:
    """The numpy backend on one process, from the initial field, for `steps` steps (implicit: each a
    multigrid solve) or multigrid cycles (rank 0 only)."""
    from ..backends.numpy_backend import NumpyBackend
    from ..core.boundary import periodic_axes
    from ..core.field import padded_field
    from ..core.initial import initial_block

    block = decompose(case.shape, (1, 1), 0, periodic_axes(case))
    be = NumpyBackend(case.backend, case.numerics.dtype)
    be.boundary = make_fill(case, block)
    u = padded_field(case, block, initial_block(case, block))
    if case.uses_multigrid:
        return _multigrid_reference(case, block, be, u, steps)
    u, _ = be.advance(u, u.copy(), weights(case).cast(case.numerics.dtype), steps, block.everything())
    return u[1:-1, 1:-1]


def _multigrid_reference(case, block, backend, u, cycles: int) -> np.ndarray:
    from ..core.layout import Layout
    from ..core.timing import Timer
    from ..multigrid.cycle import Multigrid, settings_of
    from ..parallel.comm import Comm

    from ..core import physics

    layout = Layout(case=case, dt=1.0, spacing=(0.0, 0.0), w=None, dims=(1, 1), rank=0, blocks=[block], outdir=None)
    op = physics.implicit_operator(case) if case.implicit else (0.0, 1.0)
    mg = Multigrid(layout, Comm(), backend, settings_of(case, *op), case.multigrid.cycle, fine_g=case.implicit)
    mg.adopt(u, u.copy())
    timer = Timer()
    if case.implicit:  # each step: the solve the time loop makes (solver.core.loop.TimeLoop._implicit_step)
        rhs = physics.implicit_rhs_weights(case).cast(case.numerics.dtype)
        for _ in range(cycles):
            mg.time_step(rhs, case.run.tolerance or physics.IMPLICIT_TOLERANCE, case.multigrid.max_cycles, timer)
    else:
        for _ in range(cycles):
            mg.cycle(timer)
    return np.array(mg.views()[0][1:-1, 1:-1])


def _against_reference(layout, comm, backend, u, steps: int) -> dict:
    case = layout.case
    ref = reference_field(case, steps) if comm.rank == 0 else None
    worst = {"abs": 0.0, "scale": 0.0, "mismatched": 0}

    def compare(b, data) -> None:
        r = ref[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]]
        d = np.abs(data.astype(np.float64) - r)
        worst["abs"] = max(worst["abs"], float(np.max(d, initial=0.0)))
        worst["scale"] = max(worst["scale"], float(np.max(np.abs(r), initial=0.0)))
        worst["mismatched"] += int(np.count_nonzero(data != r))

    for_each_block(comm, layout.blocks, owned(backend, u), compare)
    result = None
    if comm.rank == 0:
        rel = worst["abs"] / worst["scale"] if worst["scale"] > 0 else worst["abs"]
        tol = GPU_RTOL[case.numerics.dtype] if backend.on_gpu else 0.0
        result = {"reference": "numpy backend, one process, same steps" + ("" if tol else " (bitwise)"),
                  "steps": steps, "max_abs_error": worst["abs"], "relative_error": rel,
                  "mismatched_points": worst["mismatched"], "tolerance": tol, "passed": bool(rel <= tol)}
    return comm.bcast(result)
