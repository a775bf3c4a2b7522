"""The data the update reads where the physics is data (solver.core.physics.Weights): the source term s and
the face coefficients ax, ay, on a field's padded layout, for the steps of one batch.

Plain data from the case alone (no backend, no MPI): a field of shape (R, C) whose owned block sits at local
(R0, C0) gets, at every element, the values of the global point it stands for (solver.core.grid: wrapped
along periodic axes, clamped beyond walls), so one-layer steps, deep halos, time tiles and every rank count
read the same numbers. Host arrays in float64; the run rounds them once to the field's dtype on its device.

    explicit heat:  s = dt q(step's terms);  ax = dt a_x / dx^2, ay = dt a_y / dy^2   (alpha a field)
    Jacobi:         s = q / (alpha (2/dx^2 + 2/dy^2));                                (alpha a number)
                    s = q, ax = a_x / dx^2, ay = a_y / dy^2, jacobi form               (alpha a field)
"""

from __future__ import annotations

from dataclasses import replace

from . import sources
from .events import plan_of
from .grid import window
from .materials import faces
from .physics import THETA, Weights, implicit_rhs_weights, spacing, weights


def streams(case) -> int:
    """Arrays one explicit update or Jacobi sweep moves through memory: u read and u_new written, the source term
    where there is one, the two face fields where alpha is a field (the copy-bound rate counts these bytes)."""
    return 2 + bool(case.physics.source) + 2 * case.alpha_field


def needs_data(case) -> bool:
    """Whether the update reads fields beyond u (a source, or alpha a field)."""
    return bool(case.physics.source) or case.alpha_field


def host_weights(case, block, shape: tuple[int, int], owned: tuple[int, int], span=None) -> Weights:
    """The case's weights with its fields for the step `span` (solver.core.events.Span; None: the first) on a layout
    (shape, owned = (R0, C0)), in float64 on the host (module docstring). Explicit heat and Jacobi only: multigrid
    builds its own."""
    span = span if span is not None else plan_of(case).span(0)
    laplace = case.physics.equation == "laplace"
    dt = 1.0 if laplace else span.dt
    w = weights(case, None if laplace else dt)
    if not needs_data(case):
        return w
    rows, cols = window(case, block, (shape[0] + 1, shape[1] + 1), owned)
    (dx, dy) = spacing(case)
    data = {}
    terms = sources.step_weights(case, span)
    if terms:
        q = sources.q_weighted(case, terms, rows[:-1], cols[:-1])
        if laplace:
            data["s"] = q if case.alpha_field else q / (case.physics.alpha * (2.0 / dx**2 + 2.0 / dy**2))
        else:
            data["s"] = dt * q
    if case.alpha_field:
        fx, fy = faces(case, rows, cols)
        data.update(ax=dt * fx / dx**2, ay=dt * fy / dy**2, jacobi=laplace)
        if laplace:
            w = replace(w, wc=0.0)
    return replace(w, **data)


def implicit_rhs(case, block, shape: tuple[int, int], owned: tuple[int, int], span, theta: float | None = None) -> Weights:
    """An implicit step's right-hand side as one update of u^n (solver.multigrid.cycle.Multigrid.time_step), in
    float64 on the host. alpha a number: (u^n + (1 - theta) dt alpha L u^n + dt q) / d, the unit-diagonal form
    (physics.implicit_rhs_weights; s = dt q / d). A field: u^n + (1 - theta) dt div(alpha grad u^n) + dt q, the
    equation's own units (the flux form; backward Euler reads no neighbour). q: the source at the scheme's
    times (sources.step_weights). span: the step (solver.core.events.Span); theta: the implicit share (default the
    scheme's; TR-BDF2's first stage is a Crank-Nicolson step)."""
    dt, (dx, dy) = span.dt, spacing(case)
    theta = THETA[case.physics.scheme] if theta is None else theta
    rows, cols = window(case, block, (shape[0] + 1, shape[1] + 1), owned)
    terms = sources.step_weights(case, span)
    q = dt * sources.q_weighted(case, terms, rows[:-1], cols[:-1]) if terms else None
    if not case.alpha_field:
        w = implicit_rhs_weights(case, dt, theta)
        d = 1.0 + theta * dt * case.physics.alpha * (2.0 / dx**2 + 2.0 / dy**2)
        return w if q is None else replace(w, s=q / d)
    w = Weights(1.0, 0.0, 0.0, s=q)
    if theta < 1.0:
        fx, fy = faces(case, rows, cols)
        w = replace(w, ax=(1.0 - theta) * dt * fx / dx**2, ay=(1.0 - theta) * dt * fy / dy**2)
    return w


def changes(case) -> list[int]:
    """Steps at which the weights change (a source's window opens or closes, a step shortened to land on an event):
    the loop stops there (solver.core.events.Plan.changes)."""
    return plan_of(case).changes()


def on_device(backend, w: Weights, dtype, aligned: int = 1) -> Weights:
    """w with its scalars in the field's dtype and its fields on the backend's device (same pitch and alignment
    as the fields they go with)."""
    w = w.cast(dtype)
    data = {k: backend.coefficient(getattr(w, k), aligned) for k in ("s", "ax", "ay") if getattr(w, k) is not None}
    return replace(w, **data)


def view(w: Weights, slices) -> Weights:
    """w with each field cut to `slices` (a deep-halo field's one-layer view)."""
    data = {k: getattr(w, k)[slices] for k in ("s", "ax", "ay") if getattr(w, k) is not None}
    return replace(w, **data)
