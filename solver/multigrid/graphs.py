"""Whole multigrid cycles as graphs (issue 35): one launch a cycle instead of one (or several) a verb.

On one GPU a V(2,2) cycle at 4095^2 is about a hundred small launches, most of them on levels whose kernels run a
few microseconds: the host's Python and launch time, not the GPU, set the cycle's pace. Where the backend can
capture (CuPy: cupy_mg.CupyMultigrid.mg_capture) and a cycle has no host step, the cycle's verbs are captured once
as a graph and every later cycle from the same fields is one replay:

- when: the first cycle's graph right after the fields are adopted (set-up: Multigrid.adopt), the others at first
  use.
- what a graph is for: the fields the cycle starts from (every level's u and t, the finest level's g and boundary
  rules: the key) and whether the stop test follows it. A sweep swaps a level's u and t in Python; the capture runs
  that Python once, so the graph holds the launches with the pointers they had, and a replay sets the fields to
  where the capture left them. Cycles whose sweeps leave the fields swapped (an odd number of sweeps on a level)
  alternate between two graphs. Nothing is captured again unless the fields change (conjugate gradients'
  preconditioner cycles start from their own fields: graphs of their own).
- the stop test (cycle(norm=True): Laplace's checks, an implicit step's cycles) goes in the graph: g - A u on the
  finest level and its max |.| in one pass (the last tiled post-sweep's own pass, cycle.Multigrid._smooth, or
  backend.residual_max), the word copied to the host by the graph; residual_norm() right after the cycle reads it
  (backend.norm: the check's one host synchronisation). The residual field is kept only where output.residual writes
  it.
- not graphed (today's verb-by-verb path): several ranks (halo exchanges and gathers are host steps), side values
  that vary in time (new boundary rules every step), a backend that cannot capture, STENCIL_MG_GRAPHS=0.

Fewer passes come from the cycle itself, graphed or not (cycle.Multigrid._tiled: a level whose ghost rules are
constant sweeps two at a time in one tiled pass, with the residual, the stop test and the prolongation folded into
those passes). An earlier fusion at this level (a residual held for the restriction that reads it, a prolongation for
the sweep after it, each point's value recomputed for every neighbour from index tables) ran at a quarter of the copy
rate and was removed (docs/bench/2026-12-03-issue35).

The bits are the verbs' own: a replay launches the same kernels with the same arguments. Time: the backend marks
each change of level in the graph, so the per-level sections still partition the loop (mg_replay).
"""

from __future__ import annotations

import os
import time


def cycle_graphs(mg):
    """CycleGraphs for the multigrid `mg` where whole cycles can be graphs (module docstring), else None."""
    be = mg.backend
    if os.environ.get("STENCIL_MG_GRAPHS", "1") == "0" or not hasattr(be, "mg_capture") or mg.comm.size != 1:
        return None
    if any(g.part is not None or (g.ex is not None and not g.ex.trivial) for g in mg.grids) or mg.timed_sides:
        return None
    g0 = mg.grids[0]
    return CycleGraphs(mg) if be.mg_captures(g0.view(g0.u).shape) else None


class CycleGraphs:
    def __init__(self, mg):
        self.mg, self.be = mg, mg.backend
        self.graphs: dict = {}  # (norm, the fields' key) -> (captured graph, the fields it leaves)
        self.pending = None  # the fields a replay's stop test belongs to (read by norm())
        self.keep_r = bool(mg.case.output.residual)  # the run writes the finest level's residual field
        self.ready = False
        self.failed = None  # why a capture failed (the cycles then run verb by verb)

    def cycle(self, timer, norm: bool) -> None:
        """One cycle from the current fields (norm: with the stop test after it), replayed; captured first when
        these fields are new."""
        self.pending = None
        if self.failed:
            return self.mg._cycle(0, self.mg.kind, timer)
        key = (norm, self._key())
        if key not in self.graphs:
            if not self.ready:
                self._ready()
            start = self._fields()
            try:
                captured = self.be.mg_capture(lambda t: self._body(t, norm), timer)
            except Exception as exc:  # noqa: BLE001 - a capture the driver refused: the verbs one by one from now on
                self._set(start)
                self.failed = f"{type(exc).__name__}: {exc}"
                self.be.mg_capture_failed(self.failed)
                return self.mg._cycle(0, self.mg.kind, timer)
            self.graphs[key] = (captured, self._fields())
        captured, after = self.graphs[key]
        self._set(after)
        self.be.mg_replay(captured, timer)
        self.pending = self._key() if norm else None

    def ahead(self) -> None:
        """Capture the first cycle's graph now, before the loop (set-up, with the kernels' compilation: the capture's
        host time is the cycle's launches once more), and leave the fields as they were: the first cycle, the
        warm-up, is then a replay. Conjugate gradients' cycles capture at first use."""
        if self.mg.cg is not None or self.failed:
            return
        from ..core.timing import Timer

        start = self._fields()
        key = (True, self._key())
        if not self.ready:
            self._ready()
        try:
            captured = self.be.mg_capture(lambda t: self._body(t, True), Timer())
        except Exception as exc:  # noqa: BLE001 - as cycle(): the verbs one by one
            self.failed = f"{type(exc).__name__}: {exc}"
            self.be.mg_capture_failed(self.failed)
        else:
            self.graphs[key] = (captured, self._fields())
        self._set(start)

    def norm(self, timer) -> float | None:
        """max |g - A u| of the finest level computed by the last replay, if nothing replayed since without it and
        the fields are those it left (None: the caller computes it)."""
        pending, self.pending = self.pending, None
        if pending is None or pending != self._key():
            return None
        self.be.settle(timer)  # the wait for the replay: its events count it as compute (the sections partition)
        t = time.perf_counter()
        m = self.be.norm()
        timer.add("other", t)
        timer.level = None
        return m

    # inside ------------------------------------------------------------------------------------------------
    def _body(self, timer, norm: bool) -> None:
        mg = self.mg
        folded = mg._cycle(0, mg.kind, timer, ("max", self.keep_r) if norm else None)
        if norm and not folded:
            grid, be = mg._at(0, timer), self.be
            r = grid.r if self.keep_r else None
            be.timed(timer, lambda: be.residual_max(r, grid.u, grid.g, grid.w, grid.owned))
            timer.level = None

    def _ready(self) -> None:
        """What no capture may do, done before the first: compile every kernel, upload every side's values and every
        program of the coarse tail (cycle.Multigrid.tail_ready)."""
        grids = self.mg.grids
        fills = [(f, g.fill) for g in grids for f in (g.u, g.t)] + [(g.r, g.zero_fill) for g in grids]
        g0 = grids[0]
        sweeps = [w for w, _ in g0.pre + g0.post] or [g0.w]
        self.be.mg_ready(fills, g0.view(g0.u).shape, sweeps)
        self.mg.tail_ready()  # (the coarse tail's programs uploaded)
        self.ready = True

    def _key(self) -> tuple:
        g0 = self.mg.grids[0]
        return tuple(id(a) for g in self.mg.grids for a in (g.u, g.t)) + (id(g0.g), id(g0.fill))

    def _fields(self) -> list:
        return [(g.u, g.t) for g in self.mg.grids]

    def _set(self, fields) -> None:
        for g, (u, t) in zip(self.mg.grids, fields):
            g.u, g.t = u, t

