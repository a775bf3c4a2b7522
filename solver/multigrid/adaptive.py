"""Adaptive implicit steps: TR-BDF2 with its embedded error estimate, on the multigrid's verbs.

Why TR-BDF2 (Bank et al. 1985; Hosea and Shampine 1996, the method of MATLAB's ode23tb): with
gamma = 2 - sqrt(2) its two stages solve with the same operator, I - d dt alpha L with d = gamma / 2, so a
multigrid hierarchy built for a step's length (Multigrid.retime) serves the whole step, and the estimate's filter
too. It is L-stable (a step far past the explicit limit damps the sharp modes, as backward Euler does, where
Crank-Nicolson rings) and second order; its estimate costs no extra solve beyond one V-cycle. The others weighed:
backward Euler against the trapezoidal rule has two operators a step (two hierarchies, or a rebuild mid-step);
step doubling three solves and two operators; variable-step BDF2 one solve, but its estimate comes from the
steps before (none at the start or after a window edge, where the field's slope jumps).

One step from u_n over [t, t + dt], f(u) = alpha L u + q:

    u_g = u_n + d dt (f(u_n) + f(u_g))                   the trapezoidal rule over gamma dt (a Crank-Nicolson
                                                         step: solver.core.operator.implicit_rhs with theta 1/2)
    u_1 = a u_g - b u_n + d dt f(u_1)                    BDF2 over the rest, a = 1 / (gamma (2 - gamma)),
                                                         b = (1 - gamma)^2 / (gamma (2 - gamma))
    e   = (I - d dt alpha L)^-1 dt ((4w - 1)/3 f_n - 1/3 f_g + 2d/3 f_1)

e is the difference between the step and the embedded third-order solution (weights (w, w, d) against
((1 - w)/3, (3w + 1)/3, d/3), w = sqrt(2) / 4), filtered through the stages' operator as Hosea and Shampine
recommend for stiff problems: without it the sharp modes of a rough field, which the step damps correctly,
would count as error. f_g and f_1 follow from the stages (no operator is applied), f_n from one explicit
update of u_n (X = u_n + dt f(u_n)), so

    dt (...) = E0 (X - u_n) + E1 (u_1 - u_n) - E2 (u_g - u_n),   E0 = 4w/3, E1 = 2/3, E2 = (1 + 2w) / (3d),

and the filter is one V-cycle from zero with the homogeneous boundary rules (Multigrid.precondition; an estimate
needs a digit, not a solve). The step's error is max|e| / max(max|u_n|, max|u_1|) (solver.core.controller judges
it against run.time_tolerance).

The error as it will stand when the field is next seen (an output or probe time, t_end: tau after the step,
solver.core.events.Plan.horizon): until then the homogeneous equation carries it, e^(-tau A) e with A = -alpha L,
which damps each mode of a symmetric A at least as (I + tau A)^-1 does (e^-x <= 1 / (1 + x)). The filter is
therefore (I + (d dt + tau) A)^-1, one V-cycle on the hierarchy retimed for dt + tau / d: mode by mode it is never
below the product of the two filters ((1 + a x)(1 + b x) >= 1 + (a + b) x), so it keeps what survives. Why: a
rough start (cases/heat_implicit.yaml's mosaic of random cells) has local errors of the field's own size at the
cells' edges in its first instants, all gone long before the end; judged where they arise (tau = 0) they took 28 of
32 steps before t = 0.032 of 0.1, and 82 solves for the error of the shipped 200 backward-Euler steps; judged at
t_end, 36 (BENCHMARKS.md, "Time as the user gives it"). Where snapshots or probe samples come by step count every
step's field is seen, and tau is 0. The next step retimes the hierarchy for its own dt, as every step does. The source and the sides: q is the exact mean over each stage (adaptive steps land
on window edges, so it is constant there); side values that vary in time are those at each stage's end.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.events import Span
from ..core.physics import spacing
from ..core.trbdf2 import A2, B2, D, E0, E1, E2, GAMMA

SOLVES = 2  # solves a step (the estimate's one V-cycle besides)


@dataclass
class Result:
    """One attempted step: the stages' solves (cycles, the residual's unit, the relative residual reached, why it
    ended), the error estimate relative to the field, and the field's largest change per unit time."""

    solves: list
    error: float
    rate: float


class Stepper:
    """TR-BDF2 steps on the multigrid `mg` (its operator's implicit share must be D: cycle.settings_theta). Two
    fields of the finest level's layout beside the solver's own: u_n whole (ghosts included: the estimate's
    explicit update reads them, and a rejected step restores them) and u_g's owned points."""

    def __init__(self, mg):
        self.mg, be = mg, mg.backend
        lay = mg.grids[0].layout
        self.un, self.ug = (be.zeros(lay.shape, aligned=lay.owned[2]) for _ in range(2))
        self.whole = (0, lay.shape[0], 0, lay.shape[1])
        from ..core.medium import medium

        self.capacity = medium(mg.case).capacity_field  # c varies: the estimate weighs by it (_capacity_weighted)

    def step(self, span: Span, tol: float, most: int, timer, on_stage=None, horizon: float = 0.0) -> Result:
        """One step `span` from the finest level's u (collective); u holds u_1 after it (undo() gives u_n back).
        on_stage(): called with u = u_g (the energy balance reads the walls there). horizon: the time from the step's
        end until the field is next seen (events.Plan.horizon), the estimate's filter's extra length."""
        mg, be = self.mg, self.mg.backend
        g0 = mg.grids[0]
        own, t1 = g0.owned, self.mg.dtype.type(1.0)
        mg.retime(span.dt)
        be.timed(timer, lambda: (be.clear(self.un), be.axpy(self.un, t1, g0.u, self.whole)))
        solves = [self._stage(Span(span.step, span.t0, span.t0 + GAMMA * span.dt, GAMMA * span.dt), 0.5,
                              tol, most, timer)]
        be.timed(timer, lambda: (be.clear(self.ug), be.axpy(self.ug, t1, g0.u, own)))
        if on_stage is not None:
            on_stage()
        solves.append(self._stage(span, "bdf2", tol, most, timer))
        return Result(solves, self._estimate(span, timer, horizon), self._rate(span, timer))

    def undo(self, timer) -> None:
        """u back to u_n, ghosts included (a rejected step)."""
        be, g0 = self.mg.backend, self.mg.grids[0]
        be.timed(timer, lambda: (be.clear(g0.u), be.axpy(g0.u, self.mg.dtype.type(1.0), self.un, self.whole)))

    # the stages ----------------------------------------------------------------------------------------------
    def _stage(self, span: Span, theta, tol: float, most: int, timer) -> tuple:
        """g = the stage's right-hand side from u, the ghosts at the stage's end, the solve. theta "bdf2": the BDF2
        stage, c u_1 - d dt R(u_1) = c (a u_g - b u_n) + d dt f: a backward Euler right-hand side of length d dt
        (solver.core.operator.implicit_rhs with theta 1: c, the source and held values as every implicit step has
        them, over the diagonal where alpha is a number) applied to a u_g - b u_n, formed in the spare field."""
        mg, be = self.mg, self.mg.backend
        if theta == "bdf2":
            g0, t = mg.grids[0], mg.dtype.type
            be.timed(timer, lambda: (be.clear(g0.t), be.axpy(g0.t, t(A2), self.ug, self.whole),
                                     be.axpy(g0.t, t(-B2), self.un, self.whole)))
            mg._rhs(mg.rhs_weights(Span(span.step, span.t0, span.t1, D * span.dt), 1.0), timer, u=g0.t)
            be.timed(timer, lambda: be.fill(g0.t, g0.fill))  # the spare's ghosts take the case's rules again
        else:
            mg._rhs(mg.rhs_weights(span, theta), timer)
        if mg.timed_sides:
            mg._refill(span.t1, timer)
        return mg.solve(tol, most, timer)

    def _diagonal(self, dt: float) -> float:
        """The operator's diagonal the right-hand side is divided by: 1 + d dt alpha (2/dx^2 + 2/dy^2) where alpha is
        a number (the unit-diagonal form), 1 where it is a field (the equation's units)."""
        from ..core.medium import medium
        from ..core.physics import alpha_of

        case = self.mg.case
        if case.alpha_field:
            return 1.0
        dx, dy = spacing(case)
        return 1.0 + D * dt * alpha_of(case) * (2.0 / dx**2 + 2.0 / dy**2) + D * dt * medium(case).beta

    # the estimate ----------------------------------------------------------------------------------------------
    def _estimate(self, span: Span, timer, horizon: float = 0.0) -> float:
        """max|e| / max(max|u_n|, max|u_1|), e filtered by (I + (d dt + horizon) A)^-1 (module docstring), reduced over
        the ranks."""
        mg, be = self.mg, self.mg.backend
        g0 = mg.grids[0]
        own, t = g0.owned, mg.dtype.type
        from ..core import operator

        if self.capacity:  # c varies (materials, shapes): g = (E0 / E1) dt R(u_n) + c ((u_1 - u_n) - (E2 / E1) (u_g - u_n))
            self._capacity_weighted(span, timer)
        else:
            explicit = mg.rhs_weights(span, "explicit",
                                      lambda b, sh, ow: operator.host_weights(mg.case, b, sh, ow, span))
            mg._rhs(explicit, timer, u=self.un)  # g = X = u_n + dt f(u_n)
            be.timed(timer, lambda: (be.xpay(g0.g, g0.u, t(E0 / E1), own), be.axpy(g0.g, t(-E2 / E1), self.ug, own),
                                     be.axpy(g0.g, t((E2 - E1 - E0) / E1), self.un, own)))
        dtf = span.dt + horizon / D  # the filter's step length: d dtf = d dt + horizon
        mg.retime(dtf)
        z, _ = mg.precondition(self.ug, g0.t, g0.g, timer)  # (I - d dtf alpha L)^-1 (e / E1), the diagonal folded in
        be.timed(timer, lambda: be.fill(g0.t, g0.fill))  # the cycle gave g0.t (its spare) zero ghosts: the sweeps do
        # not refill constant rules, so its ghosts take the case's again before it is u's other buffer
        size = mg._reduced(be.max_abs(z, own), timer) * E1 / self._diagonal(dtf)
        scale = mg._reduced(max(be.max_abs(g0.u, own), be.max_abs(self.un, own)), timer)
        return size / scale if scale > 0 else size

    def _capacity_weighted(self, span: Span, timer) -> None:
        """g = e / E1 in the equation's units where the heat capacity c varies: (E0 / E1) dt R(u_n) (the rate
        itself: solver.core.operator.rate_weights, since an explicit update of c u would take the rims and held
        points implicitly) plus c ((u_1 - u_n) - (E2 / E1) (u_g - u_n)); 0 at held points. u_g's field is spent."""
        from ..core import operator

        mg, be = self.mg, self.mg.backend
        g0, t, case = mg.grids[0], mg.dtype.type, mg.case
        be.timed(timer, lambda: (be.xpay(self.ug, g0.u, t(-E2 / E1), self.whole),
                                 be.axpy(self.ug, t(E2 / E1 - 1.0), self.un, self.whole)))
        cap = mg.rhs_weights(span, "capacity", lambda b, sh, ow: operator.capacity_weights(case, b, sh, ow))
        mg._rhs(cap, timer, u=self.ug)  # g = c v
        be.timed(timer, lambda: (be.clear(self.ug), be.axpy(self.ug, t(1.0), g0.g, g0.owned)))
        rate = mg.rhs_weights(span, "rate",
                              lambda b, sh, ow: operator.rate_weights(case, b, sh, ow, span, E0 / E1))
        mg._rhs(rate, timer, u=self.un)  # g = (E0 / E1) dt R(u_n)
        be.timed(timer, lambda: be.axpy(g0.g, t(1.0), self.ug, g0.owned))

    def _rate(self, span: Span, timer) -> float:
        """max|u_1 - u_n| / dt, reduced over the ranks (run.until: steady)."""
        mg, be = self.mg, self.mg.backend
        return mg._reduced(be.max_update(mg.grids[0].u, self.un, mg.grids[0].owned), timer) / span.dt
