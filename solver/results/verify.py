"""Every run can prove itself: against the exact eigenmode, or against the numpy backend.

- initial.kind sine with zero Dirichlet values and zero fluxes (any boundary kinds): each rank compares
  its block with amplitude * factor**steps * mode; the error is max|u - exact| / max|exact| over all ranks.
- otherwise: a numpy reference runs the same steps on the same ranks, distributed by rows with its own
  blocking exchange (reference_rows), and every rank compares the run's values with the reference rows
  they fall in (to_reference_rows: one piece per pair of ranks, never a whole field on one rank). On the
  CPU the tolerance is zero (bitwise equality); on a GPU 1e-13 (float64) or 1e-5 (float32) relative.
  Its cost is said before the run starts (cost_note: reference steps timed on the real blocks).
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
from ..core import exact
from ..core.exact import exact_solution_available
from ..core.physics import FIELDS, eigenmode, exact_tolerance, mode_factor, weights
from ..io.fields import for_each_block, owned

GPU_RTOL = {"float64": 1e-13, "float32": 1e-5}
CONSERVATION_ULPS = 8.0  # per step, relative to sum |u|


def verify(layout, comm, backend, u, steps: int, residual: float | None = None, solves=None) -> dict:
    """layout: solver.core.layout.Layout; u: this rank's padded field after `steps` steps (collective);
    residual: laplace, the final max |g - A u| (for the steady-state check); solves: implicit heat, each
    step's (step, cycles, the residual's unit, relative residual reached) (the tolerances allow for them)."""
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
    solved to relative residual rho (its initial residual the unit) leaves a relative error of about rho
    dt alpha lambda in the mode (its residual is that share of the mode; other modes' errors decay faster
    than it), so the allowance is 10 sum(rho_n max(1, dt alpha lambda)), lambda the mode's 5-point
    eigenvalue, measured against the initial amplitude (the errors of slower modes stay)."""
    if not solves:
        return 0.0
    from ..core.physics import mode_eigenvalue, time_step

    z = time_step(case) * case.physics.alpha * mode_eigenvalue(case)
    return 10.0 * sum(rel for _, _, _, rel, _ in solves) * max(1.0, z)


def fluxes_over(case, steps: int) -> float:
    """The exact change of sum(u) through the Neumann sides over the first `steps` steps (each step's own length)."""
    from ..core.events import plan_of

    plan = plan_of(case)
    short = plan.shortened(steps) if plan.heat else []
    return (steps - len(short)) * flux_per_step(case, weights(case)) + sum(
        flux_per_step(case, weights(case, plan.span(k).dt)) for k in short)


def mode_product(case, steps: int) -> float:
    """The eigenmode's multiplier over the first `steps` steps: the whole steps' factor to their count, times each
    shortened step's own (solver.core.events)."""
    from ..core.events import plan_of

    plan = plan_of(case)
    short = plan.shortened(steps) if plan.heat else []
    out = mode_factor(case) ** (steps - len(short))
    for k in short:
        out *= mode_factor(case, plan.span(k).dt)
    return out


def _against_exact(layout, comm, backend, u, steps: int, solves=None) -> dict:
    case, b = layout.case, layout.block
    exact = eigenmode(case, range(*b.rows), range(*b.cols), case.initial.value * mode_product(case, steps))
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
    ref = exact.of_case(case, range(*b.rows), range(*b.cols))  # this rank's block only
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
    expected = s0 + fluxes_over(case, steps)
    eps = float(np.finfo(case.numerics.dtype).eps)
    tol = CONSERVATION_ULPS * eps * (steps + 1) * max(a0, a)
    if solves:
        from ..core.physics import implicit_operator, spacing

        (dx, dy), (_, kappa) = spacing(case), implicit_operator(case)
        d = 1.0 + kappa * (2.0 / dx**2 + 2.0 / dy**2)
        tol += sum(g * rel for _, _, g, rel, _ in solves) * d * case.grid.nx * case.grid.ny
    return {"sum": s, "expected_sum": expected, "error": abs(s - expected), "tolerance": tol,
            "passed": bool(abs(s - expected) <= tol)}


# the numpy reference, distributed -------------------------------------------------------------------

STRIP_ROWS = 16  # rows per numpy pass of the reference: its temporaries stay in cache (16 x 4096 x 8 B = 512 kB)


def reference_block(case, comm, rank: int | None = None):
    """A rank's block of the reference (this one's by default): rows split over every rank (decomposition
    rows), whatever the run's decomposition, balance or halo depth."""
    from ..core.boundary import periodic_axes

    return decompose(case.shape, (comm.size, 1), comm.rank if rank is None else rank, periodic_axes(case))


def reference_rows(case, comm, steps: int, block=None, ticks: list | None = None) -> np.ndarray:
    """The numpy reference's owned rows after `steps` steps (collective). Independent of the code it checks
    but for the initial field, the boundary rules and the data the update reads (the source term and face
    coefficients of solver.core.operator): its own row split, the update in the term order of
    solver.core.physics (evaluated in row strips where the case has no such data: bitwise the same values),
    and its own plain blocking exchange of one ghost row each way per step (MPI_Sendrecv, tag "verify").
    ticks: a list that gets time.perf_counter() after each step."""
    import time

    from ..core import operator
    from ..core.field import padded_field
    from ..core.initial import initial_block
    from ..core.events import plan_of
    from ..core.physics import update
    from ..core.sides import varies_in_time

    block = block or reference_block(case, comm)
    plan = plan_of(case)
    fill = make_fill(case, block)
    u = padded_field(case, block, initial_block(case, block))
    u_new = u.copy()
    tmp = np.empty((2, STRIP_ROWS, block.nx), dtype=u.dtype)
    data, timed = operator.needs_data(case), varies_in_time(case)
    changes, w = set(operator.changes(case)), None
    for step in range(steps):
        if w is None or step in changes:  # a window's edge, a step shortened to land on an event
            w = operator.host_weights(case, block, u.shape, (1, 1), plan.span(step)).cast(u.dtype)
            w = w.with_data(**{k: np.asarray(getattr(w, k), dtype=u.dtype) for k in FIELDS
                               if getattr(w, k) is not None})
        exchange_rows(comm, block, u)
        if data:
            update(u_new, u, w, (1, u.shape[0] - 1, 1, u.shape[1] - 1))
        else:
            strip_step(u_new, u, w, tmp)
        if timed:
            fill = make_fill(case, block, t=plan.time(step + 1))
        if not fill.constant:
            fill.apply(u_new)
        u, u_new = u_new, u
        if ticks is not None:
            ticks.append(time.perf_counter())
    return u[1:-1, 1:-1]


def exchange_rows(comm, block, u: np.ndarray) -> None:
    """Ghost rows from the ranks before and after (a periodic wrap included): two blocking MPI_Sendrecv."""
    if comm.size == 1 or (block.north is None and block.south is None):
        return
    from ..parallel.comm import TAGS, sendrecv

    sendrecv(comm.mpi, u[-2], block.north, u[0], block.south, TAGS["verify"]["north"])
    sendrecv(comm.mpi, u[1], block.south, u[-1], block.north, TAGS["verify"]["south"])


def strip_step(out: np.ndarray, u: np.ndarray, w, tmp: np.ndarray) -> None:
    """out = wc*u + wx*(west + east) + wy*(south + north) on the owned points, STRIP_ROWS rows at a time."""
    ny, nx = u.shape[0] - 2, u.shape[1] - 2
    for r0 in range(1, ny + 1, STRIP_ROWS):
        r1 = min(r0 + STRIP_ROWS, ny + 1)
        a, b, o = tmp[0, :r1 - r0], tmp[1, :r1 - r0], out[r0:r1, 1:nx + 1]
        np.add(u[r0:r1, 0:nx], u[r0:r1, 2:nx + 2], out=a)
        np.multiply(a, w.wx, out=a)
        np.multiply(u[r0:r1, 1:nx + 1], w.wc, out=o)
        np.add(o, a, out=o)
        np.add(u[r0 - 1:r1 - 1, 1:nx + 1], u[r0 + 1:r1 + 1, 1:nx + 1], out=b)
        np.multiply(b, w.wy, out=b)
        np.add(o, b, out=o)


def reference_field(case, steps: int) -> np.ndarray:
    """The numpy reference on one process: the whole field after `steps` steps (implicit heat: each a
    multigrid solve), or multigrid cycles (the numpy backend running the same solver)."""
    from ..parallel.comm import Comm

    if case.uses_multigrid or case.nonlinear:  # (a nonlinear case's explicit steps: Newton's operator's too)
        return _multigrid_field(case, steps)
    return reference_rows(case, Comm(), steps)


def _multigrid_field(case, cycles: int) -> np.ndarray:
    from ..backends.numpy_backend import NumpyBackend
    from ..core.boundary import periodic_axes
    from ..core.field import padded_field
    from ..core.initial import initial_block

    block = decompose(case.shape, (1, 1), 0, periodic_axes(case))
    be = NumpyBackend(case.backend, case.numerics.dtype)
    be.boundary = make_fill(case, block)
    return _multigrid_reference(case, block, be, padded_field(case, block, initial_block(case, block)), cycles)


def _multigrid_reference(case, block, backend, u, cycles: int) -> np.ndarray:
    from ..core.layout import Layout
    from ..core.timing import Timer
    from ..multigrid.cycle import Multigrid, operator_of, settings_of
    from ..parallel.comm import Comm

    from ..core import physics

    layout = Layout(case=case, dt=1.0, spacing=(0.0, 0.0), w=None, dims=(1, 1), rank=0, blocks=[block], outdir=None)
    plan = layout.plan
    if case.nonlinear:  # Newton's iterations, each its GMRES and cycles (solver.nonlinear)
        from ..nonlinear.newton import Newton

        newton = Newton(layout, Comm(), backend)
        newton.adopt(u, u.copy())
        for step in range(cycles):  # the loop's own calls (solver.core.loop)
            if case.physics.equation == "laplace":
                newton.cycle(Timer())
            elif newton.explicit:
                newton.explicit_step(plan.span(step), Timer())
            else:
                newton.time_step(plan.span(step), physics.step_tolerance(case),
                                 case.multigrid.max_cycles, Timer())
        return np.array(newton.views()[0][1:-1, 1:-1])
    op = operator_of(case)
    mg = Multigrid(layout, Comm(), backend, settings_of(case, *op), case.multigrid.cycle)
    mg.adopt(u, u.copy())
    timer = Timer()
    tol = physics.step_tolerance(case)
    if plan.adaptive:  # the same controller and steps (solver.core.loop.TimeLoop._adaptive_step)
        _adaptive_reference(case, mg, plan, cycles, tol, timer)
    elif case.implicit:  # each step: the solve the time loop makes (solver.core.loop.TimeLoop._implicit_step)
        for step in range(cycles):
            mg.time_step(plan.span(step), tol, case.multigrid.max_cycles, timer)
    else:
        for _ in range(cycles):
            mg.cycle(timer)
    return np.array(mg.views()[0][1:-1, 1:-1])




def _adaptive_reference(case, mg, plan, steps: int, tol: float, timer) -> None:
    """`steps` kept adaptive steps of the multigrid `mg` from its field, tried and judged as the run does."""
    from ..core.controller import Controller
    from ..multigrid.adaptive import Stepper

    ctl, stepper, t = Controller.of(case, plan.dt, plan.end), Stepper(mg), 0.0
    for step in range(steps):
        while True:
            span = ctl.propose(step, t, plan)
            res = stepper.step(span, tol, case.multigrid.max_cycles, timer, horizon=plan.horizon(span.t1))
            if ctl.judge(span, res.error):
                break
            stepper.undo(timer)
        t = span.t1


COST_STEPS = 4  # reference steps timed before a verified run: the first touches fresh memory, the median of the rest


def reference_seconds_per_step(case, comm) -> float:
    """The reference's time per step on this job's ranks: the median of COST_STEPS - 1 steps of its real
    blocks after a first one (slowest rank; collective): what `--verify` will cost, said before the run."""
    import time

    ticks = [time.perf_counter()]
    reference_rows(case, comm, COST_STEPS, ticks=ticks)
    return comm.allmax(float(np.median(np.diff(ticks)[1:])))


def cost_note(case, comm, steps: int) -> str | None:
    """The line a verified run prints before it starts: the reference's expected time (None: exact solution)."""
    if case.uses_multigrid or case.nonlinear or exact_solution_available(case):
        return None  # the exact eigenmode costs nothing; multigrid's reference runs on one process (not timed)
    per_step = reference_seconds_per_step(case, comm)
    return (f"verify: after the run a numpy reference repeats the {steps} steps on {comm.size} rank(s): about "
            f"{per_step * steps:.1f} s ({per_step * 1e3:.1f} ms per step, timed now on {COST_STEPS} of its steps)")


def _against_reference(layout, comm, backend, u, steps: int) -> dict:
    case = layout.case
    if case.uses_multigrid or case.nonlinear:
        return _against_one_process(layout, comm, backend, u, steps)
    block = reference_block(case, comm)
    ref = reference_rows(case, comm, steps, block)
    worst = {"abs": 0.0, "scale": 0.0, "mismatched": 0}

    def compare(rows: tuple[int, int], cols: tuple[int, int], data: np.ndarray) -> None:
        r = ref[rows[0] - block.rows[0]:rows[1] - block.rows[0], cols[0]:cols[1]]
        d = np.abs(data.astype(np.float64) - r)
        worst["abs"] = max(worst["abs"], float(np.max(d, initial=0.0)))
        worst["scale"] = max(worst["scale"], float(np.max(np.abs(r), initial=0.0)))
        worst["mismatched"] += int(np.count_nonzero(data != r))

    to_reference_rows(comm, layout.blocks, owned(backend, u), [reference_block(case, comm, q) for q in range(comm.size)],
                      compare)
    err, scale = comm.allmax(worst["abs"]), comm.allmax(worst["scale"])
    mismatched = comm.allsum(worst["mismatched"])
    rel = err / scale if scale > 0 else err
    tol = GPU_RTOL[case.numerics.dtype] if backend.on_gpu else 0.0
    return {"reference": f"numpy reference on {comm.size} rank(s) (rows, blocking exchange), same steps"
                         + ("" if tol else " (bitwise)"),
            "steps": steps, "max_abs_error": err, "relative_error": rel, "mismatched_points": mismatched,
            "tolerance": tol, "passed": bool(rel <= tol and (tol > 0 or mismatched == 0))}


def to_reference_rows(comm, blocks, mine: np.ndarray, ref_blocks, compare) -> None:
    """Collective: the run's owned block of every rank meets the reference rows it overlaps. In round k each
    rank sends the part of its block that rank + k's reference rows hold and receives from rank - k the
    part that its own reference rows hold (MPI_Sendrecv; one piece per pair, never a whole field), then
    calls compare(rows, cols, data) with global rows and columns."""
    from ..parallel.comm import TAGS, sendrecv

    me = blocks[comm.rank]

    def overlap(b, q) -> tuple[int, int]:
        r = ref_blocks[q].rows
        return max(b.rows[0], r[0]), min(b.rows[1], r[1])

    for k in range(comm.size):
        dest, src = (comm.rank + k) % comm.size, (comm.rank - k) % comm.size
        (s0, s1), (g0, g1) = overlap(me, dest), overlap(blocks[src], comm.rank)
        piece = np.ascontiguousarray(mine[s0 - me.rows[0]:s1 - me.rows[0]]) if s1 > s0 else None
        got = np.empty((max(g1 - g0, 0), blocks[src].nx), dtype=mine.dtype) if g1 > g0 else None
        if k == 0:
            got = piece
        else:
            sendrecv(comm.mpi, piece, dest if piece is not None else None, got, src if got is not None else None,
                     TAGS["verify"]["compare"])
        if got is not None:
            compare((g0, g1), blocks[src].cols, got)


def _against_one_process(layout, comm, backend, u, steps: int) -> dict:
    """Multigrid: the numpy backend's cycles on rank 0, compared block by block as they arrive."""
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
