"""One schedule of events in time: what a heat run must land on, and the steps that take it there.

A case turns into a sorted list of events (`Event`: a time and its kinds), plain data a test can inspect
without running anything:

    output       a snapshot (output.times, output.interval)
    checkpoint   a checkpoint (output.checkpoint_interval)
    probe        a probe sample (output.probe_interval)
    window       a source term switches on or off (physics.source's `active`)
    table        a breakpoint of a side value's table in time (its slope changes)
    end          the run's end (run.t_end, or run.steps x dt)

Fixed steps (`Plan.span`): the step boundaries are the multiples k dt of the case's dt and the times of the
events a step must land on (output, checkpoint, probe, end): a step that would cross one ends on it and the
next goes on to the next multiple, so the steps keep their grid and each such event adds one step. Window
edges and table breakpoints do not shorten fixed steps: a step's source is the exact integral of the terms
over it (solver.core.sources.step_weights: a term on for part of a step counts for that part), and side
values are evaluated at the steps' own times. Adaptive steps (run.time_tolerance) land on every event,
window edges and breakpoints included (`Plan.next_event`: the step controller shortens the step that would
cross one, solver.core.controller).

Times compare with a tolerance of their own rounding (`close`): 19 x (0.05 / 19) = 0.049999999999999996 is
on 0.05, so a window opening at 0.05 opens at step 19 exactly, and an output at 0.3 with dt = 0.1 falls on
step 3 (its time written as 0.3). A step that lands on an event has that event's time as its end; a whole
step keeps the case's dt as its length (its weights are those of every other step, bit for bit), a shortened
one has t1 - t0.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from .clock import Span, close

LANDING = ("output", "checkpoint", "probe", "end")  # events fixed steps are shortened to land on
EVERY_EVENT = LANDING + ("window", "table")  # and adaptive ones on these too
SEEN = ("output", "probe", "end")  # where the user reads the field: adaptive steps bound their error there


@dataclass(frozen=True)
class Event:
    t: float
    kinds: tuple[str, ...]


def multiples(interval: float | None, end: float, first: int = 0) -> list[float]:
    """k x interval for k = first, first + 1, ... up to end (the last one close to end counts as end)."""
    if not interval:
        return []
    out, k = [], first
    while True:
        t = k * interval
        if t > end and not close(t, end):
            return out
        out.append(end if close(t, end) else t)
        k += 1


def case_events(case, end: float) -> list[Event]:
    """Every event of a heat case up to `end`, merged where times are close (the earlier time kept), sorted."""
    out = case.output
    raw: list[tuple[float, str]] = [(end, "end")]
    raw += [(t, "output") for t in (out.times or [])] + [(t, "output") for t in multiples(out.interval, end)]
    raw += [(t, "checkpoint") for t in multiples(out.checkpoint_interval, end, 1)]
    raw += [(t, "probe") for t in multiples(out.probe_interval, end)]
    for term in case.physics.source:
        raw += [(t, "window") for t in (term.active or []) if 0.0 < t < end]
    raw += [(t, "table") for t in table_times(case) if 0.0 < t < end]
    raw.sort(key=lambda e: (e[0], e[1] != "end"))
    merged: list[list] = []
    for t, kind in raw:
        if merged and close(merged[-1][0], t):
            if kind == "end":
                merged[-1][0] = end  # t_end is exact: what lands near it lands on it
            if kind not in merged[-1][1]:
                merged[-1][1].append(kind)
        else:
            merged.append([t, [kind]])
    return [Event(t, tuple(k)) for t, k in merged]


def end_time(case) -> float:
    """The time a heat run ends at: run.t_end, or run.steps steps of the case's dt."""
    from .physics import time_step

    return case.run.t_end if case.run.t_end is not None else case.run.steps * time_step(case)


def table_times(case) -> list[float]:
    """The breakpoints of the sides' tables in time."""
    times = set()
    for side in ("bottom", "top", "left", "right"):
        spec = getattr(case.boundary, side)
        for key in ("value", "flux", "h", "ambient"):
            v = getattr(spec, key, None)
            if hasattr(v, "time"):
                times.update(row[0] for row in v.time)
    return sorted(times)


def seen_every_step(case) -> str | None:
    """The output field that makes any step's field one the user may see (snapshots or probe samples by step
    count), or None: adaptive steps then judge each step's error where it arises (Plan.horizon)."""
    out = case.output
    if out.every is not None:
        return "output.every"
    if out.probes and out.probe_interval is None:
        return "output.probes without output.probe_interval"
    return None


class Plan:
    """The events of a heat case and its steps (module docstring). Laplace: iterations, each a "step" of length 1."""

    def __init__(self, case):
        from .physics import time_step

        self.case = case
        self.heat = case.physics.equation == "heat"
        self.dt = time_step(case)
        self.adaptive = self.heat and case.run.time_tolerance is not None
        if not self.heat:
            self.end, self.events, self.steps = float(case.run.steps or 0), [], case.run.steps  # (Newton's linear
            # case is a laplace case that keeps the heat case's run section: no count there)
            self._off, self._pos, self._short, self._snapped, self._marks = [], [], set(), {}, {}
            self._times, self._seen = [], []
            return
        self.end = end_time(case)
        self.events = case_events(case, self.end)
        self._times = [e.t for e in self.events]  # (sorted: adaptive steps look events up by bisection)
        self._seen = [e.t for e in self.events if set(e.kinds) & set(SEEN)]
        self.steps = None
        if not self.adaptive:
            self._grid()

    # fixed steps ------------------------------------------------------------------------------------
    def _grid(self) -> None:
        """The step boundaries: the multiples k dt (k = 0 .. steps, or those before t_end and t_end itself where it
        is one) and the landing events between them, each with its boundary index."""
        dt, run = self.dt, self.case.run
        if run.steps is not None:
            count = run.steps + 1  # multiples 0 .. steps; the end is the last
        else:
            k = round(self.end / dt)
            count = k + 1 if close(k * dt, self.end) else math.floor(self.end / dt) + 1
        self._snapped: dict[int, float] = {}  # multiple k -> the event time it stands for
        self._off: list[float] = []  # landing times between multiples, increasing
        landing = []
        for e in self.events:
            if not set(e.kinds) & set(LANDING):
                continue
            k = round(e.t / dt)
            if close(k * dt, e.t) and k < count:
                self._snapped[k] = e.t
                landing.append((e, k, True))
            else:
                self._off.append(e.t)
                landing.append((e, len(self._off) - 1, False))
        self._pos = [math.floor(t / dt) + 1 + i for i, t in enumerate(self._off)]  # their boundary indices
        self._short = set(self._pos)
        self.steps = count + len(self._off) - 1
        self._marks: dict[int, set] = {}
        for e, k, snapped in landing:
            s = k + bisect.bisect_left(self._off, e.t) if snapped else self._pos[k]
            self._marks.setdefault(s, set()).update(e.kinds)

    def time(self, step: int) -> float:
        """The time of step boundary `step` (fixed steps; laplace: the iteration count)."""
        if not self.heat:
            return float(step)
        i = bisect.bisect_left(self._pos, step)
        if i < len(self._pos) and self._pos[i] == step:
            return self._off[i]
        k = step - i
        return self._snapped.get(k, k * self.dt)

    def span(self, step: int) -> Span:
        """The step from `step` (fixed steps)."""
        if not self.heat:
            return Span(step, float(step), float(step + 1), 1.0)
        t0, t1 = self.time(step), self.time(step + 1)
        whole = step not in self._short and (step + 1) not in self._short
        return Span(step, t0, t1, self.dt if whole else t1 - t0)

    def shortened(self, steps: int) -> list[int]:
        """The steps before `steps` that were shortened to land on an event (fixed steps): their own length."""
        return sorted({s for p in self._pos for s in (p - 1, p) if 0 <= s < steps and self.span(s).dt != self.dt})

    def marked(self, step: int, kind: str) -> bool:
        """Whether an event of `kind` lands at step boundary `step` (fixed steps)."""
        return kind in self._marks.get(step, ())

    def marks(self, kind: str) -> list[int]:
        return sorted(s for s, kinds in self._marks.items() if kind in kinds)

    def changes(self) -> list[int]:
        """The steps (0 < s < steps) whose weights differ from the step before's: a different length, or other
        source weights. The time loop stops there and takes new weights (solver.core.loop)."""
        if not self.heat or self.adaptive:
            return []
        from . import sources

        cand = set()
        for p in self._pos:
            cand.update((p - 1, p, p + 1))
        for e in self.events:
            if "window" in e.kinds:
                s = self.step_at(e.t)
                cand.update((s - 1, s, s + 1, s + 2))

        def key(s: int):
            span = self.span(s)
            return span.dt, sources.step_weights(self.case, span)

        return sorted(s for s in cand if 0 < s < self.steps and key(s) != key(s - 1))

    def step_at(self, t: float) -> int:
        """The step whose span holds t (t0 <= t < t1), clamped to [0, steps - 1]."""
        lo, hi = 0, self.steps
        while lo < hi:  # the first boundary after t (the boundaries increase with the step)
            mid = (lo + hi) // 2
            if self.time(mid) <= t:
                lo = mid + 1
            else:
                hi = mid
        return min(max(lo - 1, 0), max(self.steps - 1, 0))

    # adaptive steps ----------------------------------------------------------------------------------
    def next_event(self, t: float) -> Event:
        """The first event after t (not close to it); the end's event at the end."""
        i = bisect.bisect_right(self._times, t)
        while i < len(self._times) and close(self._times[i], t):
            i += 1
        return self.events[i] if i < len(self.events) else self.events[-1]

    def horizon(self, t: float) -> float:
        """How long from t until the field is next seen (an output, a probe sample, the end; 0 if at t, and 0 where
        snapshots or probe samples come by step count): an adaptive step's error is judged as it will stand then
        (solver.multigrid.adaptive)."""
        if seen_every_step(self.case):
            return 0.0
        j = bisect.bisect_left(self._seen, t)
        if j > 0 and close(self._seen[j - 1], t):
            return 0.0
        return self._seen[j] - t if j < len(self._seen) else 0.0

    def event_at(self, t: float) -> Event | None:
        i = bisect.bisect_left(self._times, t)
        for k in (i - 1, i):
            if 0 <= k < len(self.events) and close(self._times[k], t):
                return self.events[k]
        return None

    def due(self, kind: str, step: int, t: float) -> bool:
        """Whether an event of `kind` is at this step (fixed) or time (adaptive)."""
        if self.adaptive:
            e = self.event_at(t)
            return e is not None and kind in e.kinds
        return self.heat and self.marked(step, kind)

    def describe(self) -> dict:
        """What validate prints and the record keeps: dt, steps, t_end, the events by kind."""
        kinds = {}
        for e in self.events:
            for k in e.kinds:
                kinds[k] = kinds.get(k, 0) + 1
        return {"dt": self.dt, "steps": self.steps, "t_end": self.end, "adaptive": self.adaptive, "events": kinds}


def plan_of(case) -> Plan:
    """The case's plan (a run builds it once: solver.core.layout.Layout.plan)."""
    return Plan(case)
