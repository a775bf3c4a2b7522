"""The data the update reads where the physics is data (solver.core.physics.Weights): the source term s, the face
coefficients ax, ay, and where the materials differ in heat capacity the capacity's fields (m, cw; sg for implicit
steps), on a field's padded layout, for the steps of one batch.

Plain data from the case alone (no backend, no MPI): a field of shape (R, C) whose owned block sits at local
(R0, C0) gets, at every element, the values of the global point it stands for (solver.core.grid: wrapped
along periodic axes, clamped beyond walls), so one-layer steps, deep halos, time tiles and every rank count
read the same numbers. Host arrays in float64; the run rounds them once to the field's dtype on its device.

The equation, normalised (solver.core.medium): c u_t = div(a grad u) - beta (u - T_b) + s, with f = s + beta T_b the
source part that does not depend on u.

    explicit heat:  constant coefficients: wc = 1 - 2 wx - 2 wy - dt beta, s = dt f (physics.weights)
                    fields: ax = dt a_x / dx^2, ay = dt a_y / dy^2, wc = 1 - dt beta, s = dt f;
                    with a capacity field c also m = 1 / c, s = dt f / c and cw = 1 - dt beta / c (where beta > 0)
    Jacobi:         a number: s = f / (beta + alpha (2/dx^2 + 2/dy^2)) (unit diagonal; physics.weights)
                    fields: s = f, ax = a_x / dx^2, ay = a_y / dy^2, sigma = beta, the Jacobi form
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import sources
from .events import plan_of
from .grid import window
from .materials import faces
from .medium import capacity_at, medium
from .physics import FIELDS, THETA, Weights, alpha_of, implicit_rhs_weights, spacing, time_step, weights


def streams(case) -> int:
    """Arrays one explicit update or Jacobi sweep moves through memory: u read and u_new written, the source term
    where there is one, the two face fields where the coefficients are fields, and the capacity's one or two (the
    copy-bound rate counts these bytes)."""
    med = medium(case)
    capacity = med.capacity_field and case.physics.equation == "heat"
    return 2 + needs_source(case) + 2 * med.fields + capacity * (1 + (med.beta > 0))


def needs_source(case) -> bool:
    """Whether the update adds a source field: source terms, the faces' sink with an ambient not zero, or shapes
    (their rims' terms and held points)."""
    med = medium(case)
    return bool(case.physics.source) or (med.beta > 0 and med.ambient != 0.0) or med.shapes


def shape_terms(case, rows: np.ndarray, cols: np.ndarray):
    """The plate's shapes at the points (solver.core.plate), normalised by C0: (d, f, held, value): the rims' and held
    objects' diagonal (per unit time) and source, where a point is held (or inactive) and its value; None without
    shapes."""
    med = medium(case)
    if not med.shapes:
        return None
    from .plate import cells

    cl = cells(case, rows, cols)
    return cl["diag"] / med.c0, cl["rhs"] / med.c0, cl["held"] > 0, cl["value"]


def held_links(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray | None:
    """The part of shape_terms' diagonal that the Gibou links of held objects and fixed rims make (k / (theta h^2) at
    a free point beside one, normalised by C0; 0 elsewhere and at held points); None without any."""
    from .plate import cells, label_of, roles

    held = roles(case).held
    if not held:
        return None
    cl = cells(case, rows, cols)
    return sum(cl["rims"][label_of(case, entry[0])][0] for entry in held) / medium(case).c0


def held_diagonal(case, scale: float = 1.0) -> float:
    """The diagonal a held point's equation u = T takes in the Jacobi form (its faces are zero): the size of an open
    point's (the largest alpha's four faces, times `scale`: theta dt for an implicit step), so multigrid's coarse
    levels average like with like."""
    (dx, dy) = spacing(case)
    return scale * alpha_of(case) * (2.0 / dx**2 + 2.0 / dy**2)


def sigma_field(case, rows: np.ndarray, cols: np.ndarray, dt: float | None = None,
                theta: float | None = None) -> np.ndarray | None:
    """The diagonal's part beside the faces at the points where it varies (multigrid's sg), equation units: an
    implicit step's c + theta dt (beta + d), a steady state's beta + d; held points the held diagonal; None where it
    is one number (no capacity field in an implicit step, no shapes). dt, theta: the step's (default the case's
    dt and scheme: physics.implicit_operator)."""
    med = medium(case)
    implicit = case.physics.equation == "heat"
    if not (med.shapes or (implicit and med.capacity_field)):
        return None
    if implicit:
        theta = THETA[case.physics.scheme] if theta is None else theta
    k = theta * (time_step(case) if dt is None else dt) if implicit else 1.0
    base = capacity_at(case, rows, cols) if implicit and med.capacity_field else (1.0 if implicit else 0.0)
    terms = shape_terms(case, rows, cols)
    if terms is None:
        return base + k * med.beta
    d, _, held, _ = terms
    out = base + k * (med.beta + d)
    return np.where(held, held_diagonal(case, k) + (1.0 if implicit else 0.0), out)


def needs_data(case) -> bool:
    """Whether the update reads fields beyond u (a source, or coefficient fields)."""
    return needs_source(case) or case.alpha_field


def _source(case, terms, rows, cols):
    """f = s + beta T_b at the points (normalised units), or None."""
    med = medium(case)
    q = sources.q_weighted(case, terms, rows, cols) if terms else None
    if med.beta > 0 and med.ambient != 0.0:
        q = (0.0 if q is None else q) + med.beta * med.ambient * np.ones((len(rows), len(cols)))
    return q


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
    (dx, dy), med = spacing(case), medium(case)
    f = _source(case, sources.step_weights(case, span), rows[:-1], cols[:-1])
    if not case.alpha_field:
        if f is None:
            return w
        if laplace:
            return replace(w, s=f / (med.beta + alpha_of(case) * (2.0 / dx**2 + 2.0 / dy**2)))
        return replace(w, s=dt * f)
    fx, fy = faces(case, rows, cols)
    w = replace(w, ax=dt * fx / dx**2, ay=dt * fy / dy**2, jacobi=laplace)
    terms = shape_terms(case, rows[:-1], cols[:-1])
    if laplace:
        w = replace(w, wc=0.0, sigma=med.beta, s=f)
        if terms is None:
            return w
        d, fg, held, value = terms
        hd = held_diagonal(case)
        return replace(w, sg=np.where(held, hd, med.beta + d), s=np.where(held, hd * value, (0.0 if f is None else f) + fg))
    w = replace(w, wc=1.0 - dt * med.beta)
    if not (med.capacity_field and case.physics.equation == "heat"):
        return w if f is None else replace(w, s=dt * f)
    c = capacity_at(case, rows[:-1], cols[:-1])
    w = replace(w, m=1.0 / c, s=None if f is None else dt * f / c)
    w = replace(w, cw=1.0 - dt * med.beta / c) if med.beta > 0 else w
    return w if terms is None else _point_implicit(w, terms, c, dt)


def _point_implicit(w: Weights, terms, c: np.ndarray, dt: float) -> Weights:
    """The rims' and held objects' terms in an explicit step, taken implicitly at each point (so a cut cell or a rim
    met at a small theta does not limit the step): c u' = c u + dt (... + f_g - d u') gives every weight over
    r = 1 + dt d / c; held points take their value (no face, no centre)."""
    d, fg, held, value = terms
    r = 1.0 / (1.0 + dt * d / c)
    cw = w.cw if w.cw is not None else np.full(c.shape, float(w.wc))
    s = (0.0 if w.s is None else w.s) + dt * fg / c
    return replace(w, cw=np.where(held, 0.0, r * cw), m=np.where(held, 0.0, r * w.m), s=np.where(held, value, r * s))


def implicit_rhs(case, block, shape: tuple[int, int], owned: tuple[int, int], span, theta: float | None = None) -> Weights:
    """An implicit step's right-hand side as one update of u^n (solver.multigrid.cycle.Multigrid.time_step), in
    float64 on the host. Constant coefficients: (u^n + (1 - theta) dt (alpha L u^n - beta u^n) + dt f) / d, the
    unit-diagonal form (physics.implicit_rhs_weights; s = dt f / d). Fields: c u^n + (1 - theta) dt (div(a grad u^n)
    - beta u^n) + dt f, the equation's own units (the flux form; backward Euler reads no neighbour unless c varies,
    whose centre weight cw = c - (1 - theta) dt beta then rides on zero faces). f: the source at the scheme's times
    (sources.step_weights). span: the step (solver.core.events.Span); theta: the implicit share (default the
    scheme's; TR-BDF2's first stage is a Crank-Nicolson step)."""
    dt, (dx, dy), med = span.dt, spacing(case), medium(case)
    theta = THETA[case.physics.scheme] if theta is None else theta
    rows, cols = window(case, block, (shape[0] + 1, shape[1] + 1), owned)
    f = _source(case, sources.step_weights(case, span), rows[:-1], cols[:-1])
    q = None if f is None else dt * f
    if not case.alpha_field:
        w = implicit_rhs_weights(case, dt, theta)
        d = 1.0 + theta * dt * alpha_of(case) * (2.0 / dx**2 + 2.0 / dy**2) + theta * dt * med.beta
        return w if q is None else replace(w, s=q / d)
    w = Weights(1.0 - (1.0 - theta) * dt * med.beta, 0.0, 0.0, s=q)
    if theta < 1.0 or med.capacity_field:
        fx, fy = faces(case, rows, cols)
        k = (1.0 - theta) * dt
        w = replace(w, ax=k * fx / dx**2, ay=k * fy / dy**2)
    if med.capacity_field:
        w = replace(w, cw=capacity_at(case, rows[:-1], cols[:-1]) - (1.0 - theta) * dt * med.beta)
    terms = shape_terms(case, rows[:-1], cols[:-1])
    if terms is None:
        return w
    d, fg, held, value = terms
    hd = held_diagonal(case, theta * dt) + 1.0
    cw = w.cw - (1.0 - theta) * dt * d
    s = (0.0 if q is None else q) + dt * fg
    return replace(w, cw=np.where(held, 0.0, cw), s=np.where(held, hd * value, s))


def rate_weights(case, block, shape: tuple[int, int], owned: tuple[int, int], span, scale: float = 1.0) -> Weights:
    """scale dt R(u) as one update in the equation's units (the flux form: alpha a field or materials), R(u) = div(a
    grad u) - (beta + d) u + f + f_g the right-hand side of c du/dt = R(u) (the rims' and held objects' terms d, f_g
    explicit, held points 0): the rate an adaptive step's error estimate reads (solver.multigrid.adaptive). dt, f:
    the step `span`'s."""
    dt, (dx, dy), med = scale * span.dt, spacing(case), medium(case)
    rows, cols = window(case, block, (shape[0] + 1, shape[1] + 1), owned)
    f = _source(case, sources.step_weights(case, span), rows[:-1], cols[:-1])
    fx, fy = faces(case, rows, cols)
    w = Weights(-dt * med.beta, 0.0, 0.0, s=None if f is None else dt * f, ax=dt * fx / dx**2, ay=dt * fy / dy**2)
    terms = shape_terms(case, rows[:-1], cols[:-1])
    if terms is None:
        return w
    d, fg, held, _ = terms
    s = (0.0 if f is None else dt * f) + dt * fg
    return replace(w, cw=np.where(held, 0.0, -dt * (med.beta + d)), m=np.where(held, 0.0, 1.0),
                   s=np.where(held, 0.0, s))


def capacity_weights(case, block, shape: tuple[int, int], owned: tuple[int, int]) -> Weights:
    """c u as one update (the flux form with zero faces): each point's heat capacity c = C / C0, 0 at held points."""
    rows, cols = window(case, block, (shape[0] + 1, shape[1] + 1), owned)
    fx, fy = faces(case, rows, cols)
    c = capacity_at(case, rows[:-1], cols[:-1])
    terms = shape_terms(case, rows[:-1], cols[:-1])
    if terms is not None:
        c = np.where(terms[2], 0.0, c)
    return Weights(0.0, 0.0, 0.0, ax=0.0 * fx, ay=0.0 * fy, cw=c)


def changes(case) -> list[int]:
    """Steps at which the weights change (a source's window opens or closes, a step shortened to land on an event):
    the loop stops there (solver.core.events.Plan.changes)."""
    return plan_of(case).changes()


def on_device(backend, w: Weights, dtype, aligned: int = 1) -> Weights:
    """w with its scalars in the field's dtype and its fields on the backend's device (same pitch and alignment
    as the fields they go with)."""
    w = w.cast(dtype)
    data = {k: backend.coefficient(getattr(w, k), aligned) for k in FIELDS if getattr(w, k) is not None}
    return replace(w, **data)


def view(w: Weights, slices) -> Weights:
    """w with each field cut to `slices` (a deep-halo field's one-layer view)."""
    data = {k: getattr(w, k)[slices] for k in FIELDS if getattr(w, k) is not None}
    return replace(w, **data)


def source_density(case, rows: np.ndarray, cols: np.ndarray, span=None):
    """f = s + beta T_b at the points (normalised units) for the step `span` (solver.core.events.Span; None: a steady
    state, every term), or None: the part of the equation that does not depend on u (solver.nonlinear builds its
    residual from it)."""
    terms = sources.every_weight(case) if span is None else sources.step_weights(case, span)
    return _source(case, terms, rows, cols)
