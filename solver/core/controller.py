"""The step controller of adaptive implicit steps: how long the next step is, and whether a step is kept.

A PI controller (Gustafsson 1991): with r = error / tolerance of the step just taken (the error estimate of
solver.multigrid.adaptive, relative to the field), a step with r <= 1 is kept and the next one is

    dt_next = dt x clip((TARGET / r)^K_I x (r_prev / r)^K_P, GROWTH),   TARGET = SAFETY^k

(r_prev the ratio of the step before; the integral part alone, SAFETY x r^(-1/k), for the first step and after a
rejection); a step with r > 1 is rejected and tried again with dt x clip(SAFETY x r^(-1/k), GROWTH), never
growing right after a rejection. k = 3: a second-order method's local error goes as dt^3. SAFETY and GROWTH
are PETSc TSAdaptBasic's defaults (safety 0.9 on the step, so the steps settle where r = 0.9^3 = 0.73; the
factor clipped to [0.1, 10]); K_I = 1 / k (the integral part of a plain controller, which lets dt grow as fast
as the estimate falls: in a diffusion transient it falls step after step, and a smaller gain lags behind it) and
K_P = 0.2 / k (the proportional part damps the oscillation of steps that a pure integral controller shows where
stability, not accuracy, limits them). Measured (error x solves^2 at t_end; tests/test_adaptive.py's convective
slab at tolerances 1e-3 and 1e-5, and tools/time_bench.py's heat_implicit at 127^2, solves to reach backward
Euler's error): these gains 15.5 and 12.5, 64 solves; 0.6 / k and 0.3 / k 17.6 and 13.2, 65 solves; Gustafsson's
0.3 / k and 0.4 / k 18.4 and 14.6; a first form, SAFETY x r^-(K_I + K_P) x r_prev^K_P (Hairer and Wanner's, with
0.7 / k and 0.4 / k), settles at r = 0.9^10 = 0.35 and took about 1.2 times the solves. dt stays within
[run.dt_min, run.dt_max]; a step that would need less than dt_min ends the run with a NumericalError (exit 4)
naming both fields.

Steps land on events (solver.core.events.Plan.next_event: outputs, checkpoints, window edges, table breakpoints,
probe samples, t_end): a step that would cross the next one ends on it, one that would leave less than STRETCH of
a step before it is stretched to land (at most (1 + STRETCH)^3 = 1.33 times its error), and one that would leave
less than a step is halved (no sliver of a step after it). A step shortened so does not shrink the next one.

The controller's state (the proposed dt, the last ratio, whether the last attempt was rejected, the counts) is
plain data: a checkpoint keeps it (`state` / `restore`), so a restart takes the same steps bit for bit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .errors import NumericalError
from .events import Span, close

SAFETY = 0.9
GROWTH = (0.1, 10.0)
ORDER = 3  # the local error's order in dt (second-order steps)
TARGET = SAFETY ** ORDER  # the ratio r the steps settle at
K_I, K_P = 1.0 / ORDER, 0.2 / ORDER
STRETCH = 0.1  # a step may grow by this fraction to land on an event instead of leaving a sliver
MAX_REJECTIONS = 20  # in a row: the run ends (the estimate does not fall with dt)


@dataclass
class Controller:
    tol: float
    dt: float  # the next step's length, as the controller proposes it
    dt_min: float
    dt_max: float
    last: float | None = None  # r of the last kept step
    rejected: bool = False  # the last attempt was rejected
    accepted: int = 0
    rejections: int = 0
    in_a_row: int = 0

    @classmethod
    def of(cls, case, dt0: float, end: float) -> Controller:
        run = case.run
        dt_max = run.dt_max if run.dt_max is not None else end
        dt_min = run.dt_min if run.dt_min is not None else end * 1e-12
        return cls(run.time_tolerance, min(max(dt0, dt_min), dt_max), dt_min, dt_max)

    def propose(self, step: int, t: float, plan) -> Span:
        """The next step from time t: the proposed dt, landing on the next event where it would reach or pass it."""
        nxt = plan.next_event(t).t
        room = nxt - t
        dt = min(self.dt, self.dt_max)
        if dt * (1.0 + STRETCH) >= room or close(t + dt, nxt):
            return Span(step, t, nxt, room)
        if dt > room / 2:  # leave no sliver of a step before the event: two equal steps instead
            dt = room / 2
        return Span(step, t, t + dt, dt)

    def judge(self, span: Span, error: float) -> bool:
        """Whether the step `span` with this error estimate is kept; sets the next dt either way."""
        r = max(error / self.tol, 1e-10)
        kept = r <= 1.0
        if kept:
            factor = ((TARGET / r) ** K_I * (self.last / r) ** K_P if self.last is not None
                      else SAFETY * r ** (-1 / ORDER))
            if self.rejected:
                factor = min(factor, 1.0)
            self.last, self.accepted, self.in_a_row, self.rejected = r, self.accepted + 1, 0, False
        else:
            factor = min(SAFETY * r ** (-1 / ORDER), 1.0)
            self.rejected, self.rejections, self.in_a_row = True, self.rejections + 1, self.in_a_row + 1
        factor = min(max(factor, GROWTH[0]), GROWTH[1])
        shortened = kept and span.dt < self.dt  # landed on an event: the next step keeps at least the proposal
        self.dt = min(max(span.dt * factor, self.dt) if shortened else span.dt * factor, self.dt_max)
        if not kept and (self.dt < self.dt_min or self.in_a_row >= MAX_REJECTIONS):
            raise NumericalError(
                f"adaptive steps at t = {span.t0:.6g}: the error estimate stays at {r:.3g} x run.time_tolerance with "
                f"dt = {span.dt:.3g} ({self.in_a_row} rejections in a row, run.dt_min {self.dt_min:.3g}); raise "
                "run.time_tolerance or lower run.dt_min")
        self.dt = max(self.dt, self.dt_min)
        return kept

    def state(self) -> dict:
        """What a checkpoint keeps (JSON-ready)."""
        return asdict(self)

    @classmethod
    def restore(cls, state: dict) -> Controller:
        return cls(**state)
