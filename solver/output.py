"""What the time loop calls at its stops: snapshots, checkpoints, stop requests, progress."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from .fields import FieldFile, for_each_block, owned

RESULT_FILES = ("record.json", "record.md", "fields.h5", "fields.xdmf", "case.yaml", "timings.csv", "trace.json",
                "checkpoint.h5", "u.pvd")


def holds_results(d: Path) -> bool:
    return d.is_dir() and (any((d / f).exists() for f in RESULT_FILES) or (d / "vtk").exists())


class StopSignals:
    """SIGTERM/SIGINT set a flag; the ranks agree on it at the next poll and stop together."""

    def __init__(self):
        self.received: int | None = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (e.g. a test runner thread)
                pass
        return self

    def _handle(self, signum, frame):
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C stops at once
        self.received = signum

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


class Progress:
    """A progress bar on rank 0 when stdout is a terminal, shown once a run passes a couple of seconds."""

    DELAY = 2.0

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled = total, enabled and sys.stdout.isatty()
        self.t0 = time.perf_counter()
        self.bar = None

    def update(self, step: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.DELAY:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("step"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                TimeRemainingColumn(), transient=True)
            self.task = self.bar.add_task("run", total=self.total)
            self.bar.start()
        self.bar.update(self.task, completed=step)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


class Outputs:
    """Hooks for the time loop. Collective: every rank calls every method at the same steps."""

    def __init__(self, run):
        self.run = run  # solver.run.Run: case, comm, block, blocks, backend, outdir, dt
        self.fields = None
        if run.comm.rank == 0:
            self.fields = FieldFile(run.outdir / "fields.h5", run.case, run.spacing, run.resolved_yaml)
        self.signals = StopSignals()
        self.progress_bar = Progress(run.case.run.steps, run.comm.rank == 0 and not run.quiet)
        self.snapshots: list[int] = []

    def snapshot(self, s) -> None:
        if self.snapshots and self.snapshots[-1] == s.step:
            return
        r = self.run
        mine = owned(r.backend, s.u)
        k = self.fields.append(s.step, s.step * r.dt) if self.fields else None
        for_each_block(r.comm, r.blocks, mine, lambda b, data: self.fields.put(k, b, data))
        self.snapshots.append(s.step)

    def checkpoint(self, s) -> None:  # replaced by the checkpoint/restart work
        pass

    def stop_requested(self) -> bool:
        return self.signals.received is not None

    def progress(self, step: int) -> None:
        self.progress_bar.update(step)

    def close(self) -> None:
        self.progress_bar.close()
        if self.fields is not None:
            self.fields.close()
