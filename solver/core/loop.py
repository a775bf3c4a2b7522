"""The time loop: the same for every backend, rank count and halo mode.

Each step: start the halo exchange, compute the regions that need no halo, finish the exchange,
compute the rest, swap buffers. Between steps, at scheduled stops: convergence and NaN/Inf checks
(collective), snapshots, checkpoints, signal polls and progress. With no neighbours the steps
between two stops go to the backend in one call (backend.advance), which GPUs batch or graph; with
deep halos (exchange.depth > 1) to the exchanger's time tiles (solver.parallel.deep), which end at
the same stops. Polls (signals, progress) fall at multiples of the tile: the deep halo's depth, or the
k steps a GPU computes per launch; GPU batch lengths are planned before the loop so that no tile depth
is compiled inside it. Heat checks without neighbours are lagged: a check's reduction is started at its
stop and read at the next stop, once the next batch is enqueued (or before any output, checkpoint, progress
line or the end), so a GPU computes the next batch while the host waits; a NaN/Inf is reported with the step
of the check that saw it. Where the backend answers checks inside its launches (a GPU's `chip`:
backend.checks_inside), checks end no batch: advance_checked gets the batch's check steps.
"""

from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass, field

from . import stops
from .errors import NumericalError
from .physics import step_tolerance
from .timing import Timer

POLL_EVERY = 10  # steps between collective polls for a stop request (signals) and progress
SERIAL_POLL_EVERY = 50  # one process: polls cost nothing, but each ends a batch of steps (GPU graphs, time tiles)
GPU_POLL_EVERY = 1000  # one process on a GPU: a batch costs 0.03-0.1 ms beyond its steps (a launch's fill and drain:
# `chip` at 2048^2 float64, 3.88 us a step in launches of 400 against 3.75 in 1024); polls still come every POLL_SECONDS
# at most (fit_poll), and every 10% of the steps where progress lines are shown (poll_period)
POLL_SECONDS = 2.0  # polls at most this far apart (progress lines every 10 s, signals answered): see fit_poll
MAX_STEPS = 2**62  # adaptive steps: no count bounds them (t_end does)


@dataclass
class LoopState:
    u: object  # current field (device array, padded)
    u_new: object  # the other buffer: after a step it holds the previous field
    step: int = 0
    residuals: list[tuple[int, float]] = field(default_factory=list)  # (step, max |residual|): laplace's checks
    converged: bool = False
    stopped_by: str | None = None  # "signal": a stop request paused the run; multigrid: a stop rule (core.stops.ENDINGS)
    r0: float | None = None  # laplace: max |residual| of the initial field, the unit of run.tolerance
    solves: list[tuple[int, int, float, float, str]] = field(default_factory=list)  # implicit heat: (step, cycles,
    # the unit max|g - A u^n|, the relative residual reached, why the solve ended: multigrid.cycle.Multigrid.time_step)

    floor: float | None = None  # multigrid: the rounding floor of the residual, measured when the residual stalled
    t: float = 0.0  # heat: the time of the current field (solver.core.events: a step's end lands on its events)
    at_end: bool = False  # adaptive steps: t reached t_end
    steady: bool = False  # run.until steady: the field changed by less than run.steady_rate per unit time
    taken: list = field(default_factory=list)  # adaptive steps: (step, t, dt, error / tolerance, kept, cycles) each

    def relative(self, r: float) -> float:
        """A residual in units of the initial one (0 when the initial field already solves the problem)."""
        return r / self.r0 if self.r0 else (0.0 if r == 0 else float("inf"))

    def finished(self, end: int) -> bool:
        """The run ends at this step: run.steps reached, converged, or a stop rule held (a stop request only
        pauses it: the run continues from its checkpoint)."""
        return self.step >= end or self.at_end or self.converged or self.stopped_by in stops.ENDINGS


@dataclass
class Data:
    """What a run's update reads beyond u where the physics is data (solver.core.operator): weights(step, ex)
    gives (the weights of plain steps, those of time tiles) for the step from `step`; `changes`: the steps
    at which they change (a source window's edges: the loop stops there); fill_at(step): the ghost rules at
    `step` where side values vary in time (None: they do not; then every step refills with them)."""

    weights: object
    tiles: object = None
    changes: list = field(default_factory=list)
    fill_at: object = None
    balance: object = None  # solver.core.balance.Balance: the energy terms, step by step where the loop sees them
    moved: object = None  # moved(step, ex): after a rebalance, everything the new block carries beyond its rows
    # (solver.run.Run.block_data: ghost rules, the update's fields, the balance's walls); returns the weights
    stepper: object = None  # adaptive steps: solver.multigrid.adaptive.Stepper
    controller: object = None  # and solver.core.controller.Controller


def halo_step(ex, u, compute) -> None:
    """One step's schedule for any halo mode: start the exchange of u's halo, compute ex.before (the
    interior, in bands, with ex.progress between them so MPI moves the messages), finish the exchange,
    compute ex.after. compute(regions) updates the given regions (the time loop's step, multigrid's sweeps)."""
    pending = ex.start(u)
    for i, band in enumerate(ex.before):
        if i:  # between bands: let MPI move the messages (the last one is waited for next)
            ex.progress(pending)
        compute([band])
    ex.finish(pending)
    compute(ex.after)


def poll_period(default: int, steps: int, lines: bool = True) -> int:
    """Steps between polls: `default`, or less on short runs so that progress lines (`lines`: not --quiet)
    show at least every 10% of the steps (a round number, so the polls fall on round steps)."""
    most = max(1, steps // 10) if lines else max(1, steps)
    return next(p for p in (1000, 500, 200, 100, 50, 25, 10, 5, 2, 1) if p <= default and p <= most)


class TimeLoop:
    """layout: solver.core.layout.Layout (case, weights, the current block); exchange: the halo exchanger
    for layout.block; timers: (timed, warm-up). With a balancer, `connect(block)` makes the exchanger
    for the block a rebalance gave this rank."""

    def __init__(self, layout, backend, comm, exchange, timers: tuple[Timer, Timer], hooks=None,
                 poll_every: int | None = None, balancer=None, connect=None, iterate=None, data: Data | None = None):
        self.layout, self.case, self.w = layout, layout.case, layout.w
        self.plan = layout.plan  # solver.core.events.Plan: the steps' times, the events they land on
        self.end = self.plan.steps if self.plan.steps is not None else MAX_STEPS  # adaptive: until t_end
        self.data = data or Data(None)
        self.w_tiles = self.data.tiles if self.data.tiles is not None else self.w  # deep halos: on their deep fields
        self.backend, self.comm, self.ex = backend, comm, exchange
        self.iterate = iterate  # multigrid (solver.multigrid.cycle.Multigrid): a step is one cycle, checked every cycle
        self.laplace = layout.case.physics.equation == "laplace"
        self.check_every = 1 if iterate is not None else layout.case.run.check_every
        self.timer, self.warm_timer = timers
        self.hooks = hooks  # object with snapshot(state), checkpoint(state), stop_requested(), progress(step), warmed(step)
        depth = getattr(exchange, "depth", 1)  # deep halos: polls on tile boundaries
        tile = backend.tile_steps(layout.block.padded) if exchange.trivial else depth  # GPU time tiles: k per launch
        serial = GPU_POLL_EVERY if getattr(backend, "on_gpu", False) else SERIAL_POLL_EVERY
        lines = getattr(hooks, "lines", False)  # progress lines at 10% of the steps: polls there
        poll = poll_period(serial if exchange.trivial else POLL_EVERY, self.end, lines)
        if iterate is not None:
            tile, poll = 1, 1  # a cycle is long: signals and progress after every one
        self.tile = tile
        self.poll_every = poll_every or -(-poll // tile) * tile
        self.poll_fitted = poll_every is not None  # a period asked for is kept
        self.loop_seconds = 0.0  # wall time of the timed (post-warm-up) steps, measured apart from the sections
        self.probe_seconds = 0.0  # of which the host's share of sampling probes (charged to io, with the snapshots;
        # inside numba's time tiles the statistics run in the sweep: compute)
        self.warm_seconds = 0.0
        self.timed_steps = 0  # steps taken after warm-up
        self.updates = 0  # points this rank updated in the timed steps (its block may change: balance)
        self.balancer, self.connect = balancer, connect  # solver.parallel.balance.Balancer, or None
        self.fail_at = _injected_failure(comm.rank)
        # heat without neighbours: a check's value is read one check later, with the next batch enqueued (a GPU
        # keeps computing while the host waits for it), and at the latest before outputs, checkpoints and the end
        self.lagged = exchange.trivial and iterate is None and not self.laplace
        # and where the backend folds checks into its launches (a GPU's `chip`), checks end no batch
        self.inner = self.lagged and backend.checks_inside(layout.block.padded)
        self.pending: list[tuple[int, object]] = []  # lagged checks: (step, function giving the local value)
        self.slow = _injected_slowness(comm.rank)
        self._batched = False  # inside a batch handed to the backend or the deep-halo tiles
        # a host backend that takes plain steps anyway: the loop takes them one by one, so the energy balance
        # sees every step's walls (no speed is lost: a batch would be the same steps)
        self.seen = (self.data.balance is not None and not getattr(backend, "on_gpu", False) and exchange.trivial
                     and iterate is None and backend.tile_steps(layout.block.padded) == 1)
        # probes sampled inside the backend's batches (numba's time tiles: backend.samples_inside), which then end at
        # no probe step; elsewhere each sampled step ends a batch and the field is read after it
        self.inside = (bool(self.case.output.probes) and hooks is not None and exchange.trivial and iterate is None
                       and not self.laplace and not self.plan.adaptive and self.data.fill_at is None and not self.seen
                       and backend.samples_inside(layout.block.padded))
        self.sampled = None  # inside: the last step sampled in a batch
        kinds = ("output", "checkpoint") if self.inside else ("output", "checkpoint", "probe")
        self.marks = sorted({s for k in kinds for s in self.plan.marks(k)}) \
            if self.plan.heat and not self.plan.adaptive else []
        self.vote = None  # the stop vote of the last poll, in flight (several ranks: see _vote)
        self.state = None  # the run's LoopState (run())

    # one step with exchange ------------------------------------------------------------------
    def step(self, s: LoopState, timer: Timer, slow: bool = True) -> None:
        timer.step = s.step
        self.ex.timer = timer  # warm-up halo time goes to the warm-up timer, not the timed sections

        def compute(regions):
            if regions is self.ex.after and self.slow and slow:  # test hook: a slower core, charged to compute
                time.sleep(self.slow * self.layout.block.ny)
            self.backend.compute(s.u_new, s.u, self.w, regions, timer)

        halo_step(self.ex, s.u, compute)
        if self.data.balance is not None and not self._batched:  # the walls' fluxes of the step's start (s.u)
            t = time.perf_counter()
            self.data.balance.explicit(self.backend, s.u, s.step, s.u_new)
            timer.add("other", t)
        if self.data.fill_at is not None:  # side values that vary in time: the rules of the step's end
            self.backend.boundary = self.data.fill_at(s.step + 1)
        self.backend.fill_boundary(s.u_new, timer)  # Neumann and one-rank periodic ghosts, from the new field
        t = time.perf_counter()
        s.u, s.u_new = s.u_new, s.u
        s.step += 1
        timer.add("other", t)

    def steps(self, s: LoopState, n: int, timer: Timer, keep_previous: bool = True) -> None:
        """n steps; keep_previous: the last one must leave the previous field in s.u_new (a check follows)."""
        self._steps(s, n, timer, keep_previous)
        if self.plan.heat and not self.plan.adaptive:
            s.t = self.plan.time(s.step)

    def _steps(self, s: LoopState, n: int, timer: Timer, keep_previous: bool) -> None:
        if self.iterate is not None:
            for _ in range(n):
                timer.step = s.step
                if self.laplace:
                    self.iterate.cycle(timer)
                elif getattr(self.iterate, "explicit", False):  # a nonlinear case's explicit steps (solver.nonlinear)
                    self._explicit_step(s, timer)
                elif self.plan.adaptive:
                    self._adaptive_step(s, timer)
                else:
                    self._implicit_step(s, timer)
                s.step += 1
            s.u, s.u_new = self.iterate.views()
            return
        if (self.ex.trivial or getattr(self.ex, "depth", 1) > 1) and self.data.fill_at is None and not self.seen:
            first = s.step
            self._batched = True  # the balance sees the batch's sources only (solver.core.balance)
            try:
                if self.ex.trivial:
                    self._advance(s, n, timer, keep_previous)
                else:
                    self.ex.advance(s, n, self.w_tiles, timer, lambda st, tm: self.step(st, tm, slow=False), keep_previous)
            finally:
                self._batched = False
            if self.data.balance is not None:  # the batch's sources, summed step by step: time of the loop's own
                t = time.perf_counter()
                self.data.balance.batch(first, n)
                timer.add("other", t)
            if self.slow:  # the test hook of step(), for every step of the batch, charged to compute
                t = time.perf_counter()
                time.sleep(self.slow * self.layout.block.ny * (s.step - first))
                timer.add("compute", t)
        else:
            for _ in range(n):
                self.step(s, timer)

    def _advance(self, s: LoopState, n: int, timer: Timer, keep_previous: bool) -> None:
        """n steps without neighbours, in one call to the backend; with checks inside batches, the batch's
        checks (the end's too) go with it and stay pending until the next batch runs."""
        timer.step, region, first, every = s.step, self.layout.block.everything(), s.step, self.check_every
        if self.inner:
            checks = [c - first for c in range((first // every + 1) * every, first + n + 1, every)]
            if first + n == self.end and n not in checks:
                checks.append(n)
            s.u, s.u_new, values = self.backend.advance_checked(s.u, s.u_new, self.w, n, region, timer, keep_previous,
                                                                checks)
            self.pending += [(first + c, v) for c, v in zip(checks, values)]
        elif self.inside:
            self._advance_sampled(s, n, timer, keep_previous)
        else:
            s.u, s.u_new = self.backend.advance_timed(s.u, s.u_new, self.w, n, region, timer, keep_previous)
        s.step += n

    def _advance_sampled(self, s: LoopState, n: int, timer: Timer, keep_previous: bool) -> None:
        """advance() with the batch's probe steps sampled as the backend computes them (a tap), the samples then
        recorded (the host's share, the tap's own inside the advance included, charged to io: the probes' seconds)."""
        first = s.step
        tap = self.hooks.tap([o for o in range(1, n + 1) if self._probe_due(first + o)])
        s.u, s.u_new = self.backend.advance_timed(s.u, s.u_new, self.w, n, self.layout.block.everything(), timer,
                                                  keep_previous, tap=tap)
        if tap is not None:
            timer.move("compute", "io", tap.seconds)
            t = time.perf_counter()
            offsets, parts = tap.parts()  # (the batch's samples at once)
            steps = [first + o for o in offsets]
            self.hooks.record_probes(steps, [self.plan.time(k) for k in steps], parts)
            self.sampled = steps[-1]
            self.probe_seconds += tap.seconds + timer.add("io", t) - t

    def _probe_due(self, step: int) -> bool:
        """Whether the probes are sampled at this step of fixed steps: every probe_every steps, at a probe time, or the
        last step."""
        every = self._probe_every()
        return bool((every and step % every == 0) or self.plan.due("probe", step, self.plan.time(step))
                    or step == self.end)

    def _explicit_step(self, s: LoopState, timer: Timer) -> None:
        """One explicit step the iterate takes itself (k(T) and radiation at the old field): the energy balance sees
        the walls at the step's start."""
        bal = self.data.balance
        if bal is not None:
            t = time.perf_counter()
            bal.explicit(self.backend, self.iterate.views()[0], s.step)
            timer.add("other", t)
        self.iterate.explicit_step(self.plan.span(s.step), timer)

    def _implicit_step(self, s: LoopState, timer: Timer) -> None:
        """One implicit heat step: a multigrid solve to the step tolerance (solver.multigrid.cycle.time_step)."""
        tol = step_tolerance(self.case)
        bal = self.data.balance
        t = time.perf_counter()
        before = bal.fluxes(self.backend, self.iterate.views()[0]) if bal is not None else None
        timer.add("other", t)
        span = self.plan.span(s.step)
        cycles, scale, rel, why = self.iterate.time_step(span, tol, self.case.multigrid.max_cycles, timer)
        if bal is not None:
            t = time.perf_counter()
            bal.implicit(before, bal.fluxes(self.backend, self.iterate.views()[0]), span)
            timer.add("other", t)
        s.solves.append((s.step + 1, cycles, scale, rel, why))
        if self.hooks is not None:
            self.hooks.solved(s.step + 1, cycles, rel, tol)

    def _adaptive_step(self, s: LoopState, timer: Timer) -> None:
        """One kept adaptive step (solver.multigrid.adaptive, solver.core.controller): steps are tried from s.t
        until the controller keeps one; each kept step's length and estimate go to s.taken, each rejected one too."""
        tol = step_tolerance(self.case)
        bal, ctl, stepper = self.data.balance, self.data.controller, self.data.stepper
        while True:
            span = ctl.propose(s.step, s.t, self.plan)
            t = time.perf_counter()
            fluxes = [bal.fluxes(self.backend, self.iterate.views()[0])] if bal is not None else None
            on_stage = (lambda: fluxes.append(bal.fluxes(self.backend, self.iterate.views()[0]))) if fluxes else None
            timer.add("other", t)
            res = stepper.step(span, tol, self.case.multigrid.max_cycles, timer, on_stage, self.plan.horizon(span.t1))
            kept = ctl.judge(span, res.error)
            s.taken.append((s.step + 1 if kept else s.step, span.t1 if kept else span.t0, span.dt,
                            res.error / ctl.tol, kept, [c for c, *_ in res.solves]))
            if kept:
                break
            stepper.undo(timer)
        if bal is not None:
            t = time.perf_counter()
            fluxes.append(bal.fluxes(self.backend, self.iterate.views()[0]))
            bal.stages(fluxes, span)
            timer.add("other", t)
        for cycles, scale, rel, why in res.solves:
            s.solves.append((s.step + 1, cycles, scale, rel, why))
        s.t = span.t1
        s.at_end = span.t1 == self.plan.end
        if self.hooks is not None:
            cycles, _, rel, _ = res.solves[-1]
            self.hooks.solved(s.step + 1, cycles, rel, tol)
            getattr(self.hooks, "clock", lambda t: None)(s.t)
        if self.case.run.until == "steady" and res.rate < self.case.run.steady_rate:
            s.steady = s.converged = True

    # the loop --------------------------------------------------------------------------------
    def run(self, s: LoopState) -> LoopState:
        run = self.case.run
        end, warm_end = self.end, s.step + run.warmup
        self.state = s
        if self.ex.trivial and self.iterate is None:
            self.backend.plan(self._batches(s.step, end, warm_end))
        if self.iterate is not None and self.laplace and s.r0 is None:  # the unit of the relative residual (Jacobi: step 1's update)
            s.r0 = self.comm.allmax(self.iterate.residual_norm(self.warm_timer))
            self._finite(s.r0, s.step)
            self._converged(s, s.r0)
        try:
            self._run(s, end, warm_end)
            self._resolve(self.timer)  # a stop request ended the loop with a lagged check unread
        finally:  # the last poll's vote ends with the loop (also when it raised: no MPI request is left behind)
            if self.vote is not None:
                self.vote.result()
                self.vote = None
        return s

    def _run(self, s: LoopState, end: int, warm_end: int) -> None:
        run = self.case.run
        while s.step < end and not s.at_end and not s.converged and s.stopped_by is None:
            warm = s.step < warm_end
            timer = self.warm_timer if warm else self.timer
            n = self._next_stop(s.step, end, warm_end if warm else None) - s.step
            t0 = timer.cursor = time.perf_counter()
            points = self.layout.block.ny * self.layout.block.nx  # a rebalance at the stop changes the block
            first = s.step
            self.steps(s, n, timer, keep_previous=not self.inner and (self._checks(s.step + n) or s.step + n == end))
            self._at_stop(s, timer, end, first)
            if warm:
                self.backend.synchronize()  # GPU: warm-up kernels finish before the timed steps start
            elapsed = timer.add("other", time.perf_counter()) - t0  # the batch's tail too: the sections end where the loop does
            if not self.poll_fitted:
                self.fit_poll(elapsed / max(n, 1), s.step, end, warm_end)
            if warm:
                self.warm_seconds += elapsed
                if s.step >= warm_end and getattr(self.hooks, "warmed", None):
                    self.hooks.warmed(s.step)  # progress rates count from here, as the record's does
            else:
                self.loop_seconds += elapsed
                self.timed_steps += n
                self.updates += n * points

    def _vote(self, flag: bool) -> bool:
        """Whether any rank asked to stop. One process: at once. Several: this poll's vote is started and the
        last poll's read (MPI_Iallreduce), so the ranks stop together one poll later and no rank waits here
        for the slowest to arrive (a blocking vote made the polls the place where every rank's drift since
        the last one was waited for: with deep halos, the only such place)."""
        if self.comm.size == 1:
            return bool(flag)
        last, self.vote = self.vote, self.comm.start_anytrue(flag)
        return last.result() if last is not None else False

    def fit_poll(self, seconds_per_step: float, step: int, end: int, warm_end: int) -> None:
        """Once, after the first batch (the warm-up step: compiled, first touch done): shorten the poll period
        so that polls fall at most POLL_SECONDS apart on the slowest rank (collective: every rank takes the
        same batches, so all get here at the same step). Kept a multiple of the tile; never lengthened."""
        self.poll_fitted = True
        slowest = self.comm.allmax(seconds_per_step)
        if self.poll_every * slowest <= POLL_SECONDS:
            return
        self.poll_every = max(self.tile, int(POLL_SECONDS / slowest) // self.tile * self.tile)
        if self.ex.trivial:  # GPU: the batch lengths change, so do the tile depths to compile before capture
            self.backend.plan(self._batches(step, end, warm_end))

    def _batches(self, step: int, end: int, warm_end: int, most: int = 10000) -> set[int]:
        """The distinct batch lengths the loop will hand to advance() (the first `most` batches)."""
        lengths = set()
        for _ in range(most):
            if step >= end:
                break
            n = self._next_stop(step, end, warm_end if step < warm_end else None) - step
            lengths.add(n)
            step += n
        return lengths

    def _checks(self, step: int) -> bool:
        """Whether the loop checks the residual (laplace) and NaN/Inf at this step: every check_every steps,
        and for Jacobi also after its first step (whose update is the initial field's residual, r0)."""
        return step % self.check_every == 0 or (step == 1 and self.laplace and self.iterate is None)

    def _next_stop(self, step: int, end: int, warm_end: int | None) -> int:
        periods = [None if self.inner else self.check_every, self.poll_every, self.case.output.every, self.case.output.checkpoint_every,
                   self.balancer.every if self.balancer else None, None if self.inside else self._probe_every()]
        stops = [end] + [(step // p + 1) * p for p in periods if p] + [c for c in self.data.changes if c > step][:1]
        stops += [m for m in self.marks[bisect.bisect_right(self.marks, step):][:1]]  # output, checkpoint, probe times
        if step < 1 and self.laplace and self.iterate is None:
            stops.append(1)
        if warm_end is not None:
            stops.append(warm_end)
        return min(stops)

    def _probe_every(self) -> int | None:
        """Steps between probe samples by count (output.probe_every, or every step), or None."""
        out = self.case.output
        if not out.probes or out.probe_interval is not None:
            return None
        return out.probe_every or 1

    def _due(self, kind: str, every: int | None, s: LoopState, end: int) -> bool:
        """Whether an output of `kind` falls at this stop: every `every` steps, or an event of its kind here."""
        return bool((every and s.step % every == 0) or self.plan.due(kind, s.step, s.t))

    def _at_stop(self, s: LoopState, timer: Timer, end: int, first: int) -> None:
        """The stop after the batch that started at step `first`."""
        run, out, step = self.case.run, self.case.output, s.step
        if self.fail_at is not None and step >= self.fail_at:
            raise RuntimeError(f"injected failure on rank {self.comm.rank} at step {step} (STENCIL_FAIL_AT)")
        if step in self.data.changes:  # a source's window opened or closed: the next steps read other fields
            self._settle(timer)
            self.w, self.w_tiles = self.data.weights(step, self.ex)
        if (self._checks(step) or step == end) and not self.inner:  # (inner: started with the batch)
            self._check(s, timer)
        self._resolve(timer, None if step == end else first)  # the checks of the batches before this one
        if self.hooks is None:
            return
        if self.inside:  # sampled in the batch; an ending elsewhere (converged, steady, a stop) is sampled here
            due = s.finished(end) and self.sampled != step
        else:
            due = out.probes and (self._due("probe", self._probe_every(), s, end) or s.finished(end))
        if due:
            self._settle(timer)
            t = time.perf_counter()
            self.hooks.probe(s)
            self.probe_seconds += timer.add("io", t) - t  # (output inside the loop; the record says probes' share)
        if self._due("output", out.every, s, end) or s.finished(end):  # every ending writes its final field
            self._settle(timer)
            t = time.perf_counter()
            self.hooks.snapshot(s)
            timer.add("io", t)
        if self._due("checkpoint", out.checkpoint_every, s, end) and not s.finished(end):  # (the end: after_loop)
            self._settle(timer)
            t = time.perf_counter()
            self.hooks.checkpoint(s)
            timer.add("io", t)
        if step % self.poll_every == 0 and not s.finished(end) and s.stopped_by is None:
            t = time.perf_counter()
            stop = self._vote(self.hooks.stop_requested())
            t = timer.add("wait", t)
            if stop:
                s.stopped_by = "signal"
            if self.hooks.progress_due(step):
                self._settle(timer)  # GPU: the line counts the steps computed, not those enqueued
                t = time.perf_counter()
            self.hooks.progress(step)  # shows something only when due
            timer.add("other", t)
        if self.balancer and self.balancer.due(step) and not s.finished(end) and s.stopped_by is None:
            if self.balancer.maybe(s, timer):  # rows moved: layout.block is new, and so must the exchanger be
                t = time.perf_counter()
                self.ex.close()
                self.ex = self.connect(self.layout.block, s, self.ex)
                if self.data.moved is not None:  # ghost rules, fields and walls of the new block
                    self.w, self.w_tiles = self.data.moved(step, self.ex)
                timer.add("comm", t)

    def _check(self, s: LoopState, timer: Timer) -> None:
        """The residual (multigrid: max |g - A u|; otherwise max |update| of the last step, which for Jacobi is
        the residual of the field before it), reduced over ranks: convergence and NaN/Inf detection.
        Lagged (heat without neighbours): started here, read at the next check (_resolve)."""
        if self.lagged:
            t = time.perf_counter()
            self.pending.append((s.step, self.backend.start_max_update(s.u, s.u_new, self.layout.block.everything())))
            self.backend.charge_host(timer, "other", t)
            return
        self.backend.settle(timer)  # GPU: its queued steps are compute (events), not this check's time
        t = time.perf_counter()
        if self.iterate is not None and not self.laplace:  # implicit heat: the last solve's (reduced) residual
            local = self.iterate.last if self.iterate.last is not None else 0.0
            t = time.perf_counter()
        elif self.iterate is not None:
            local = self.iterate.residual_norm(timer)
            t = time.perf_counter()
        else:
            local = self.backend.max_update(s.u, s.u_new, self.layout.block.everything())
            t = timer.add("other", t)
        r = self.comm.allmax(local)
        timer.add("wait", t)
        self._finite(r, s.step)
        if not self.laplace:
            self._steady(s, s.step, r)
            return
        if s.r0 is None:  # Jacobi's first step: its update is the initial field's residual
            s.r0 = r
        s.residuals.append((s.step, r))
        self._converged(s, r)
        if self.hooks is not None:  # (Jacobi: the residual is the last sweep's update)
            self.hooks.iteration(s.step, r, s.relative(r))

    def _resolve(self, timer: Timer, upto: int | None = None) -> None:
        """Read the lagged checks of steps up to `upto` (None: all). Each one's value was copied to the host
        after its batch, so a GPU is still busy with the next batch while the host waits here for those of
        the batches before (the wait is charged to no section: the batches' events count it)."""
        while self.pending and (upto is None or self.pending[0][0] <= upto):
            step, value = self.pending.pop(0)
            local = value()
            t = timer.cursor = time.perf_counter()
            r = self.comm.allmax(local)
            timer.add("wait", t)
            self._finite(r, step)
            self._steady(self.state, step, r)

    def _steady(self, s: LoopState | None, step: int, r: float) -> None:
        """run.until steady, explicit steps: the check's max |u^{n+1} - u^n| over the step's length against
        run.steady_rate (adaptive steps judge their own: _adaptive_step)."""
        if s is None or self.iterate is not None or self.case.run.until != "steady" or step < 1:
            return
        if r / self.plan.span(step - 1).dt < self.case.run.steady_rate:
            s.steady = s.converged = True

    def _settle(self, timer: Timer) -> None:
        """Before the field is looked at (output, checkpoint, progress): every lagged check read, the device
        idle."""
        self._resolve(timer)
        self.backend.settle(timer)

    def _finite(self, r: float, step: int) -> None:
        if r == float("inf") or r != r:
            raise NumericalError(f"NaN or Inf in the field at step {step} (checked every {self.check_every} "
                                 f"steps); {stops.overflow_fix(self.case)}")

    def _converged(self, s: LoopState, r: float) -> None:
        """The stop tests: the relative residual below run.tolerance (or none left at all); multigrid also
        stops when its residual has stopped falling, for a reason the figures show (solver.core.stops)."""
        tol = self.case.run.tolerance
        if tol is not None and s.relative(r) < tol or r == 0:
            s.converged = True
        elif getattr(self.iterate, "ended", None) is not None:  # Newton's line search found no step (solver.nonlinear)
            s.stopped_by, s.floor = self.iterate.ended, getattr(self.iterate, "floor", None)
        elif self.iterate is not None:
            s.stopped_by = stops.ending([v for _, v in s.residuals], lambda: self._floor(s))

    def _floor(self, s: LoopState) -> float:
        """The residual's rounding floor now (collective), kept in the state for the record."""
        s.floor = stops.rounding_floor(self.case.numerics.dtype, self.comm.allmax(self.iterate.scale()))
        return s.floor


def _injected_failure(rank: int) -> int | None:
    """Test-only hook: STENCIL_FAIL_AT=RANK:STEP makes that rank raise inside the loop at that step."""
    spec = os.environ.get("STENCIL_FAIL_AT")
    if not spec:
        return None
    r, _, step = spec.partition(":")
    return int(step) if int(r) == rank else None


def _injected_slowness(rank: int) -> float:
    """Test-only hook: STENCIL_SLOW_RANK=RANK:SECONDS makes that rank's compute take SECONDS longer per
    owned row and step, like a slower core (the dynamic balancer should give it fewer rows)."""
    spec = os.environ.get("STENCIL_SLOW_RANK")
    if not spec:
        return 0.0
    r, _, seconds = spec.partition(":")
    return float(seconds) if int(r) == rank else 0.0
