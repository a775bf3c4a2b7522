"""Per-rank section timers for the time loop.

Sections (docs/timings.md repeats these definitions):
- compute: the stencil kernel (GPU: measured with CUDA events, not host clocks);
- comm:    posting sends/receives, packing/unpacking halo buffers, staging copies, Sendrecv;
- wait:    blocked in Wait/Waitall, or in a collective (convergence, stop and NaN checks);
- io:      writing snapshots and checkpoints;
- other:   the rest of the loop: buffer swaps, the local convergence/NaN reduction, progress.
`loop` is the wall time of the whole loop, measured separately. Sections are contiguous: the loop
marks where a batch of steps starts (`cursor`), and each section also takes the few instructions
between the previous section's end and its own start, so no time falls between sections (a
descheduled process would otherwise lose whole milliseconds there) and the sections add up to the
loop. A section timed inside another would be counted twice, and the sum would exceed the loop.
"""

from __future__ import annotations

import time

SECTIONS = ("compute", "comm", "wait", "io", "other")

# The per-rank row of a run (run.Run.rank_row), as written to timings.csv and timings.h5: name, HDF5 kind.
RANK_COLUMNS = (("rank", "i4"), ("host", "S64"), ("pid", "i8"), ("affinity", "S256"), ("numa", "S64"), ("threads", "i4"),
                ("rows", "S32"), ("cols", "S32"), ("points", "i8"), *((s, "f8") for s in SECTIONS), ("loop", "f8"),
                ("warmup", "f8"), ("steps", "i8"), ("updates", "i8"))


class Timer:
    def __init__(self, trace: bool = False, epoch: float | None = None):
        self.seconds = dict.fromkeys(SECTIONS, 0.0)
        self.trace = trace
        self.events: list[tuple[str, float, float, int]] = []  # (section, start, end, step)
        self.epoch = time.perf_counter() if epoch is None else epoch
        self.step = 0
        self.cursor: float | None = None  # end of the last section (or start of the batch)
        self.level: int | None = None  # multigrid: the level being worked on; its time is also tallied apart
        self.levels: dict[int, dict[str, float]] = {}

    def add(self, section: str, start: float, end: float | None = None) -> float:
        """Charge [start, end) - extended back to the end of the previous section - to a section;
        returns end (pass it on as the next start)."""
        end = time.perf_counter() if end is None else end
        if self.cursor is not None and self.cursor <= start:
            start = self.cursor
        self.cursor = end
        self.seconds[section] += end - start
        if self.level is not None:
            self._tally(self.level, section, end - start)
        if self.trace:
            self.events.append((section, start - self.epoch, end - self.epoch, self.step))
        return end

    def charge(self, section: str, seconds: float, level: int | None = None) -> None:
        """Add a duration measured elsewhere (CUDA events) without a trace interval (level: the multigrid
        level it belongs to, taken when the work was enqueued: see charger)."""
        self.seconds[section] += seconds
        if level is not None:
            self._tally(level, section, seconds)

    def move(self, source: str, target: str, seconds: float) -> None:
        """Recharge seconds already charged to `source` to `target` (host work done inside a section's interval, as a
        tap's inside a sweep's; a trace keeps the interval whole)."""
        self.seconds[source] -= seconds
        self.seconds[target] += seconds

    def charger(self):
        """charge() bound to the level being worked on now (GPU events resolve later)."""
        level = self.level
        return lambda section, seconds: self.charge(section, seconds, level)

    def _tally(self, level: int, section: str, seconds: float) -> None:
        per = self.levels.get(level)
        if per is None:
            per = self.levels[level] = dict.fromkeys(SECTIONS, 0.0)
        per[section] += seconds


class Clock:
    """Named wall-clock phases of a run (set-up, compile, warm-up, solve, output, verify, total)."""

    def __init__(self):
        self.start = time.perf_counter()
        self.phases: dict[str, float] = {}
        self._mark = self.start

    def lap(self, phase: str) -> float:
        now = time.perf_counter()
        elapsed, self._mark = now - self._mark, now
        self.phases[phase] = self.phases.get(phase, 0.0) + elapsed
        return elapsed

    def skip(self) -> None:
        """Restart the lap without charging the time since the last mark to any phase."""
        self._mark = time.perf_counter()

    def total(self) -> float:
        return time.perf_counter() - self.start
