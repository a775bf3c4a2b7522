"""What the time loop calls at its stops: snapshots, checkpoints, stop requests, progress.

Every output step is collective and failure-safe: each rank completes the step's communication, a
write that fails on any rank (disk full, unwritable directory) becomes the same OutputError (exit 5)
on every rank, naming the file and where the last good checkpoint is (see solver.io.safeio).

Appending (a restart into the directory that holds its checkpoint, at step M): fields.h5, u.pvd and
timings.h5 keep what was written up to step M and drop anything written after it (by a run that
went on past its last checkpoint before it died); the first snapshot of the continued run is the
next scheduled one, so the series has no duplicate and no hole.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import InputError, Interrupted, OutputError
from . import checkpoint as ckpt
from .fields import FieldFile, ParallelFieldFile, for_each_block, hdf5_writer, owned
from .safeio import collective, describe
from .timings import write_timings_table

RESULT_FILES = ("record.json", "record.md", "fields.h5", "residual.h5", "fields.xdmf", "fields_views.h5", "case.yaml", "timings.csv",
                "trace.json", "checkpoint.h5", "u.pvd", "timings.h5", "probes.csv", "probes.h5")
LIST_SECONDS = 1.0  # u.pvd and fields.xdmf are rewritten at most this often (and at checkpoints and the end)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def field_time(layout, s) -> float:
    """The time of the loop state's field: its own (heat: solver.core.events), or the iteration count (laplace)."""
    return s.t if layout.plan.heat else float(s.step)


def holds_results(d: Path) -> bool:
    return d.is_dir() and (any((d / f).exists() for f in RESULT_FILES) or (d / "vtk").exists())


def vtk_wanted(case, rank: int = 0) -> bool:
    """output.vtk true/false, or null: on up to config.VTK_AUTO_MAX_POINTS points, when pyvista is installed."""
    if not case.vtk_enabled:
        return False
    from .vtk import available

    if available():
        return True
    if case.output.vtk:
        raise InputError("output.vtk: true needs pyvista, which is not installed here; "
                         "install it with `pip install -e .[vtk]` or set output.vtk: false")
    if rank == 0:
        print("note: no VTK output: pyvista is not installed (pip install -e .[vtk]); fields.h5 and fields.xdmf "
              "are written as usual", file=sys.stderr)
    return False


def _race_ignored(unraisable, default) -> None:
    """sys.unraisablehook after settle(): a stop signal that the C handler caught just as its Python handler gave
    way to SIG_IGN is reported by Python as "Signal N ignored due to race condition" (an OSError with a traceback);
    ignoring it is what settle() asked for, so it is not printed. Anything else goes to the hook before."""
    if isinstance(unraisable.exc_value, OSError) and "ignored due to race condition" in str(unraisable.exc_value):
        return
    default(unraisable)


class StopSignals:
    """The one signal policy of a run, from set-up to exit: SIGTERM, SIGINT and SIGUSR1 only set a flag,
    so no signal ends the process in the middle of a phase (a file half written, the lock left behind).

    - Set-up and the loop: the loop polls the flag (every rank agrees at a poll), every rank stops at the
      same step, writes a checkpoint and the record, and exits 75. A signal during set-up is answered
      at the loop's first poll.
    - After the loop (the final checkpoint, verification, the record): the run is complete and finishes
      its files; a stop already under way still ends with 75, otherwise the run exits with its own code
      and a note says the signal came after the last step.
    - A second SIGINT (Ctrl-C twice) stops at once: the lock is released (`at_abort`), one line said,
      and the process exits 130 where it stands, without a checkpoint (the last one stays intact). In a
      library call of run_case (a notebook) it raises KeyboardInterrupt instead, Python's own way.

    `held()` gives the instance installed in this process: the CLI installs one for the process's
    lifetime (`install`); a library call of run_case installs one for the run and restores the previous
    handlers after it. SIGUSR1 is there for schedulers that signal the ranks themselves ahead of a time
    limit (Slurm's `--signal=USR1@120`), for launchers that kill soon after SIGTERM (Open MPI 4.1's
    mpirun; see docs/output.md for what each launcher was seen to do).
    """

    _current: StopSignals | None = None  # the instance installed in this process

    def __init__(self, process: bool = False):
        self.received: int | None = None
        self.process = process  # installed for the process's lifetime (the CLI), not for one library call
        self.served = False  # held() has given it to a run already
        self._old = {}
        self._at_abort: list = []  # what a second Ctrl-C does before the process ends (release the lock)

    @classmethod
    def install(cls) -> StopSignals:
        """The policy for the rest of this process (the CLI): installed once, never restored."""
        if cls._current is None:
            cls._current = cls(process=True).__enter__()
        return cls._current

    @classmethod
    def settle(cls) -> None:
        """At the process's exit (the CLI), once the run's exit code is decided: stop signals that arrive
        while Python shuts down (MPI_Finalize, module teardown) are ignored instead of replacing that code
        by their default action (death by the signal). Ignored, not blocked: a block holds for the calling
        thread only, and the kernel hands a signal to any thread that does not block it (numpy's BLAS
        threads), while Python's shutdown resets its own handlers to the default but keeps SIG_IGN."""
        if cls._current is not None:
            sys.unraisablehook = functools.partial(_race_ignored, default=sys.unraisablehook)
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)

    @classmethod
    @contextmanager
    def held(cls):
        """The installed policy, or one installed for the duration of the block. An installed policy that
        already served a run starts the next one with no signal received (a process that runs several cases,
        the Python API or a test session: one run's stop request is not the next one's); the first run keeps
        a signal that came before it (the CLI installs the policy before it reads the case)."""
        if cls._current is not None:
            if cls._current.served:
                cls._current.received = None
            cls._current.served = True
            yield cls._current
            return
        with cls() as signals:
            cls._current = signals
            try:
                yield signals
            finally:
                cls._current = None

    def __enter__(self):
        for sig in STOP_SIGNALS:
            try:
                self._old[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (e.g. a test runner thread)
                pass
        return self

    def _handle(self, signum, frame):
        if self.received is not None and signum == signal.SIGINT:
            if not self.process:
                raise KeyboardInterrupt  # a library call (a notebook): Python's own way; the run's finally releases the lock
            self._abort()
        self.received = signum

    def at_abort(self, fn) -> None:
        """Call `fn` (no arguments) if a second Ctrl-C ends the process."""
        self._at_abort.append(fn)

    def _abort(self) -> None:
        """A second Ctrl-C: end the process at once. Not by raising (KeyboardInterrupt would land wherever
        the interpreter is, a C callback or a cleanup included, and be swallowed or reported as a crash)."""
        for fn in self._at_abort:
            try:
                fn()
            except Exception:  # noqa: BLE001 - ending now matters more
                pass
        print("error: stopped at once by a second SIGINT, without a checkpoint (the last one, if any, is intact)",
              file=sys.stderr, flush=True)
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - a closed or full stdout
            pass
        os._exit(130)

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}
        return False

    @property
    def name(self) -> str:
        return signal.Signals(self.received).name if self.received else "a signal on another rank"


class Progress:
    """Progress on rank 0 (`--quiet` silences it), by one rule for every solver. A terminal gets a bar once a
    run passes DELAY seconds; anything else (mpirun, srun, a pipe, a log file, a Jupyter notebook) gets plain
    lines `UNIT N/M (P%), T s elapsed, RATE` at least every LINE_FRACTION of the steps or every
    LINE_SECONDS, whichever comes first (at the loop's polls, which solver.core.loop spaces at most
    POLL_SECONDS apart). UNIT is `step` (explicit and implicit heat steps), `iteration` (Jacobi, conjugate
    gradients) or `cycle` (multigrid's steady state); RATE is what the run measures, by `rate`: "updates" (explicit
    steps and Jacobi sweeps: every point updated once, in MLUP/s), "units" (multigrid cycles or conjugate gradients'
    iterations per second) or "solves" (implicit steps per second, and the cycles their solves took per second),
    always with three significant digits, and left out before any step has been timed (never a rate of 0). A
    solver with a residual adds the latest one to the line (`, relative residual X`, and for an implicit step the
    cycles its solve took), never a line of its own. With a `callback` (the Python API's progress=), it is called
    with (step, total, elapsed, mlups) instead of a line, mlups the points times the steps (cycles, iterations) per
    second. The rates count the steps after the warm-up with the output written inside the loop left out, measured
    on rank 0 (the summary takes the slowest rank). The loop asks `due(step)` first and waits for a GPU's queued
    steps when it is, so a line counts the steps computed, not those enqueued. Before a first compilation it says
    so, since that can take half a minute."""

    DELAY = 2.0
    LINE_FRACTION = 0.1
    LINE_SECONDS = 10.0
    BAR_SECONDS = 0.5  # a terminal's bar moves at most this often (each move waits for a GPU)

    def __init__(self, total: int, enabled: bool, points: int = 0, stream=None, clock=time.perf_counter,
                 callback=None, unit: str = "step", rate: str = "updates"):
        self.stream, self.clock, self.callback = stream or sys.stdout, clock, callback
        self.total, self.show, self.points, self.unit, self.measure = total, enabled, points, unit, rate
        self.cycles = 0  # implicit steps: the cycles their solves took since the warm-up
        self.detail = ""  # the solver's latest residual, added to the next line
        self.t_end, self.t, self.last_shown_t = None, 0.0, 0.0  # adaptive steps: the run's end time, now, last line's
        self.enabled = enabled and callback is None and _isatty(self.stream)  # the bar
        self.output_seconds = 0.0  # output written inside the loop so far: not stepping
        self.bar = None
        self.start(0)

    def compiling(self, note: str | None) -> None:
        """Say `note` (the backend's: a first compilation is coming) before it starts."""
        if self.show and note:
            print(note, file=self.stream, flush=True)

    def start(self, step: int) -> None:
        """The timed loop begins at `step` (0, or the checkpoint's step): the rate counts from here."""
        self.t0 = self.last_t = self.clock()
        self.first = self.last_step = step
        self.warmed(step, self.t0)

    def warmed(self, step: int, now: float | None = None) -> None:
        """The warm-up steps end at `step`: the rate counts from here, as the summary's does."""
        self.rate_t0, self.rate_first = self.clock() if now is None else now, step
        self.output_seconds, self.cycles = 0.0, 0

    def due(self, step: int, now: float | None = None) -> bool:
        """Would update(step) show something now? (False on other ranks and with --quiet.)"""
        now = self.clock() if now is None else now
        if self.enabled:
            return now - (self.last_t if self.bar else self.t0) >= (self.BAR_SECONDS if self.bar else self.DELAY)
        if self.t_end:  # adaptive steps: lines by time, not by count
            return self.show and (self.t - self.last_shown_t >= self.LINE_FRACTION * self.t_end
                                  or now - self.last_t >= self.LINE_SECONDS)
        return self.show and (step - self.last_step >= max(1, int(self.LINE_FRACTION * self.total))
                              or now - self.last_t >= self.LINE_SECONDS)

    def update(self, step: int) -> None:
        now = self.clock()
        if not self.due(step, now):
            return
        if self.enabled:
            self._bar(step, now)
        else:
            self._line(step, now)

    def exclude(self, seconds: float) -> None:
        """Time spent writing output inside the loop: not part of the rate."""
        self.output_seconds += seconds

    def rate(self, step: int, now: float) -> float:
        """MLUP/s of the steps since the warm-up (since start() before it ends), output excluded."""
        return self.points * self.per_second(step, now) / 1e6

    def per_second(self, step: int, now: float) -> float:
        """Steps (cycles, iterations) per second since the warm-up, output excluded; 0 before any was timed."""
        stepping = now - self.rate_t0 - self.output_seconds
        return (step - self.rate_first) / stepping if stepping > 0 else 0.0

    def rate_text(self, step: int, now: float) -> str:
        """', R MLUP/s' (or steps, cycles, iterations per second: `rate`), or nothing before a step was timed."""
        per = self.per_second(step, now)
        if per <= 0:
            return ""
        if self.measure == "updates":
            return f", {self.points * per / 1e6:.3g} MLUP/s"
        if self.measure == "solves":
            stepping = now - self.rate_t0 - self.output_seconds
            return f", {per:.3g} steps/s ({self.cycles / stepping:.3g} cycles/s)"
        return f", {per:.3g} {self.unit}s/s"

    def iteration(self, step: int, r: float, rel: float) -> None:
        """A multigrid cycle's residual: shown on the next line (the lines' rule is the same for every solver)."""
        self.detail = f", relative residual {rel:.3e} (max |g - A u| {r:.3e})"  # (Jacobi: the last update)

    def solved(self, step: int, cycles: int, rel: float, tol: float) -> None:
        """An implicit step's solve: its cycles and residual, shown on the next line."""
        self.detail = f", last solve {cycles} cycle(s) to a relative residual {rel:.2e} (tolerance {tol:.0e})"
        if step > self.rate_first:
            self.cycles += cycles

    def _line(self, step: int, now: float) -> None:
        where = (f"{self.unit} {step}, t = {self.t:.4g} of {self.t_end:.4g} ({self.t / self.t_end:.0%})" if self.t_end
                 else f"{self.unit} {step}/{self.total} ({step / max(self.total, 1):.0%})")
        self.last_shown_t = self.t
        self._say(step, lambda elapsed: f"{where}, {elapsed:.1f} s elapsed{self.rate_text(step, now)}{self.detail}",
                  now)

    def _say(self, step: int, text, now: float | None = None) -> None:
        """Every progress line goes through here: printed, or given to the callback (the Python API's
        progress=) as (step, total, elapsed seconds, MLUP/s) instead. text(elapsed) makes the line."""
        if not self.show:
            return
        now = self.clock() if now is None else now
        if self.callback is not None:
            self.callback(step, self.total, now - self.t0, self.rate(step, now))
        else:
            print(text(now - self.t0), file=self.stream, flush=True)
        self.last_step, self.last_t = step, now

    def _bar(self, step: int, now: float) -> None:
        self.last_t = now
        if self.bar is None:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn(self.unit), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                TimeRemainingColumn(), transient=True)
            self.task = self.bar.add_task("run", total=self.total)
            self.bar.start()
        self.bar.update(self.task, completed=step)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def progress_units(case) -> dict:
    """What a run's progress lines count and measure (Progress): explicit steps and Jacobi iterations update every
    point (MLUP/s); multigrid's steady state counts cycles (conjugate gradients: iterations) per second; implicit
    steps count steps and their solves' cycles per second."""
    if case.implicit:
        return {"unit": "step", "rate": "solves"}
    if case.physics.equation == "laplace":
        if case.uses_multigrid:
            return {"unit": "iteration" if case.krylov == "cg" else "cycle", "rate": "units"}
        return {"unit": "iteration", "rate": "updates"}
    return {"unit": "step", "rate": "updates"}


def segment(first_step: int, ranks: int, hosts: list[str], started: float) -> dict:
    """One stretch of a run in one launch: its steps, ranks, hosts, start and end (the record's run.segments
    lists every one that led to the result; a checkpoint carries those before it). `started`: time.time()."""
    return {"first_step": first_step, "last_step": first_step, "ranks": ranks, "hosts": sorted(set(hosts)),
            "started": _date(started), "ended": None, "seconds": 0.0, "_t0": started}


def segment_at(seg: dict, step: int) -> dict:
    """The segment as it stands at `step` (now), as plain data."""
    now = time.time()
    out = {k: v for k, v in seg.items() if not k.startswith("_")}
    out.update(last_step=step, ended=_date(now), seconds=round(now - seg["_t0"], 3))
    return out


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


@dataclass(frozen=True)
class Resume:
    """Where a restarted run continues: the checkpoint's step, and whether its output is appended
    (the restart runs in the directory that holds the checkpoint). A fresh run: step None."""

    step: int | None = None
    appending: bool = False

    @classmethod
    def of(cls, checkpoint, outdir: Path) -> Resume:
        if checkpoint is None:
            return cls()
        return cls(checkpoint.step, checkpoint.directory == Path(outdir).resolve())


def blank(case, block, mine: np.ndarray, cache: dict) -> np.ndarray:
    """The owned block as the fields' files show it: NaN (their _FillValue) at points that are not the plate's (in a
    hole, a held object or outside the outline: solver.core.plate.blanked); the solver's own field keeps its values.
    cache: the caller's, keyed by the block's rows and columns (a rebalance moves them)."""
    key = (block.rows, block.cols)
    if key not in cache:
        from ..core.plate import blanked

        cache.clear()
        cache[key] = blanked(case, np.arange(*block.rows), np.arange(*block.cols))
    mask = cache[key]
    return mine if mask is None else np.where(mask, np.nan, mine).astype(mine.dtype)


class Outputs:
    """Hooks for the time loop. Collective: every rank calls every method at the same steps.

    layout: solver.core.layout.Layout (case, blocks, outdir, dt, spacing, dims, resolved_yaml, vtk_on);
    backend: reads the owned block of a field; resume: where a restarted run continues.
    """

    def __init__(self, layout, comm, backend, resume: Resume = Resume(), quiet: bool = False,
                 segments: tuple = (), current: dict | None = None, progress=None, signals: StopSignals | None = None,
                 solver_state=None):
        self.layout, self.comm, self.backend = layout, comm, backend
        self.solver_state = solver_state  # () -> the solver's own fields a checkpoint keeps (write_checkpoint's state)
        self.segments, self.current = list(segments), current  # earlier segments (a checkpoint's), this one
        self.resume = resume.step
        self.appending = resume.appending
        self.checkpoint_path = layout.outdir / ckpt.NAME
        self.last_checkpoint = self.resume if self.appending else None  # step of the checkpoint in outdir
        self.fields = self.vtk = None
        self.hdf5_writer = hdf5_writer(self.comm)  # "serial", "streamed" or "mpio": fields.h5 and checkpoint.h5
        self.signals = signals or StopSignals()  # the run's (run.Run holds it from set-up to the end)
        self.progress_bar = Progress(layout.plan.steps or 0, comm.rank == 0 and not quiet,
                                     layout.case.grid.nx * layout.case.grid.ny, callback=progress,
                                     **progress_units(layout.case))
        if layout.plan.adaptive:
            self.progress_bar.t_end = layout.plan.end
        self.lines = not quiet or progress is not None  # progress at 10% of the steps (the same on every rank)
        self.snapshots: list[int] = []
        self._blanks: dict = {}  # the block's points outside the plate (blank)
        self.listed_at, self.unlisted = time.perf_counter(), False
        self.controller = None  # adaptive steps: solver.core.controller.Controller (run.Run sets it)
        self.probes = None  # solver.io.probes.Probes where the case has probes
        try:
            self._open_files()
        except OSError as exc:
            raise OutputError(f"{describe(exc)} while opening the output files; free disk space or choose a "
                              "writable --output") from None

    def _open_files(self) -> None:
        """Local to each rank (no communication: this runs inside the set-up's agree())."""
        lay, resume = self.layout, self.resume if self.appending else None
        if not lay.case.output.fields:
            pass  # output.fields: false: no fields.h5 (sweep points)
        elif self.hdf5_writer == "mpio":  # every rank holds it; rank 0 alone prepares the file here
            self.fields = ParallelFieldFile(lay.outdir / "fields.h5", lay.case, lay.spacing, lay.resolved_yaml,
                                            self.comm, resume)
        elif self.comm.rank == 0:
            self.fields = FieldFile(lay.outdir / "fields.h5", lay.case, lay.spacing, lay.resolved_yaml, resume,
                                    self.hdf5_writer)
        if lay.vtk_on:
            from .vtk import VtkSeries

            self.vtk = VtkSeries(lay, self.comm, resume)
        if lay.case.output.probes:
            from .probes import Probes

            self.probes = Probes(lay, self.comm, resume)

    # collective error handling --------------------------------------------------------------------
    def collective_io(self, fn, what: str):
        return collective(self.comm, fn, self._advice(what))

    def _advice(self, what: str) -> str:
        fix = f" while {what}; free disk space or choose a writable --output"
        if self.last_checkpoint is None:
            return f"{fix}; no checkpoint was written yet"
        return (f"{fix}; the last checkpoint, {self.checkpoint_path} (step {self.last_checkpoint}), is intact: "
                f"continue with --restart {self.checkpoint_path}")

    # hooks --------------------------------------------------------------------------------------
    def snapshot(self, s) -> None:
        """fields.h5 (+ fields.xdmf) and VTK at s.step, unless already written (appending, end == scheduled)."""
        if (self.snapshots and self.snapshots[-1] == s.step) or (self.appending and s.step == self.resume):
            return
        t0 = time.perf_counter()
        self._snapshot(s)
        self.progress_bar.exclude(time.perf_counter() - t0)

    def _snapshot(self, s) -> None:
        if not self.layout.case.output.fields and self.vtk is None:
            return  # nothing to write (output.fields: false, no VTK)
        mine = blank(self.layout.case, self.layout.block, owned(self.backend, s.u), self._blanks)
        t = field_time(self.layout, s)
        if self.layout.case.output.fields:
            self.collective_io(lambda: self._fields(s.step, t, mine), f"writing the snapshot of step {s.step}")
        self.snapshots.append(s.step)
        self.unlisted = True
        self.collective_io(lambda: self._vtk(s.step, t, mine), f"writing the VTK files of step {s.step}")

    def _vtk(self, step: int, t: float, mine: np.ndarray) -> None:
        if self.vtk is not None:
            self.vtk.write(step, t, mine)
        self.list_snapshots(force=False)

    def list_snapshots(self, force: bool = True) -> None:
        """Rank 0 rewrites fields.xdmf and u.pvd; no communication (callers run it inside collective_io).

        Each rewrite costs time in the number of snapshots, so between checkpoints they are rewritten
        at most every LIST_SECONDS; at checkpoints and at the end always. A crash loses at most the
        last LIST_SECONDS of listing, never data (fields.h5 and the .vti files are complete). The
        decision is rank 0's alone: a clock-based decision taken on every rank could differ between
        ranks, and a collective entered by some ranks only would hang the job.
        """
        if self.comm.rank != 0 or not self.unlisted:
            return
        if force or time.perf_counter() - self.listed_at >= LIST_SECONDS:
            self._write_listings()
            self.listed_at, self.unlisted = time.perf_counter(), False

    def _write_listings(self) -> None:
        from .xdmf import write_xdmf

        if self.fields is not None:
            write_xdmf(self.layout.outdir / "fields.xdmf", self.fields)
        if self.vtk is not None:
            self.vtk.write_pvd()

    def _fields(self, step: int, t: float, mine: np.ndarray) -> None:
        f = self.fields
        if isinstance(f, ParallelFieldFile):
            return f.write(step, t, self.layout.block, mine)
        if f is None:
            return for_each_block(self.comm, self.layout.blocks, mine, None)
        try:
            k = f.append(step, t)
        except OSError:
            for_each_block(self.comm, self.layout.blocks, mine, None)  # receive anyway: no rank is left waiting
            raise
        try:
            for_each_block(self.comm, self.layout.blocks, mine, lambda b, data: f.put(k, b, data))
            f.commit()
        except OSError:
            f.rollback(k)
            raise

    def checkpoint(self, s) -> None:
        """checkpoint.h5 at s.step (collective; the previous one stays until the new one is complete)."""
        t0 = time.perf_counter()
        self._checkpoint(s)
        self.progress_bar.exclude(time.perf_counter() - t0)

    def _checkpoint(self, s) -> None:
        self.collective_io(self.list_snapshots, "listing the snapshots")
        lay = self.layout
        if self.probes is not None:  # the samples up to this step are on disk before the checkpoint says so
            self.collective_io(self.probes.flush, "writing probes.csv and probes.h5")
        meta = {"step": s.step, "time": field_time(lay, s),
                "fingerprint": ckpt.fingerprint(lay.case, lay.dt, files=self.comm.rank == 0),
                "case": lay.resolved_yaml, "dims": lay.dims, "converged": s.converged, "ended": s.stopped_by,
                "tolerance": lay.case.run.tolerance, "r0": s.r0, "segments": self.run_segments(s.step),
                "residuals": s.residuals, "clock": self._clock(s)}
        mine = owned(self.backend, s.u)
        state = self.solver_state() if self.solver_state else {}
        self.collective_io(lambda: ckpt.write_checkpoint(self.checkpoint_path, self.comm, lay.blocks, mine, meta, state),
                           f"writing the checkpoint of step {s.step}")
        self.last_checkpoint = s.step

    def _clock(self, s) -> dict | None:
        """Adaptive steps: what a restart needs to take the same steps (the controller's state, the steps so far)."""
        if self.controller is None:
            return None
        return {"controller": self.controller.state(), "taken": [list(x) for x in s.taken]}

    def probe(self, s) -> None:
        """Every probe's value at s.step (collective; solver.io.probes), unless already written (appending)."""
        if self.probes is None or (self.appending and s.step == self.resume):
            return
        t0 = time.perf_counter()
        self.collective_io(lambda: self.probes.sample(self.backend, s.u, s.step, field_time(self.layout, s)),
                           f"sampling the probes at step {s.step}")
        self.progress_bar.exclude(time.perf_counter() - t0)

    def tap(self, offsets):
        """The probes of a batch's steps at these offsets, sampled inside the backend's sweeps (solver.io.probes.Tap;
        None: no probes or no step of the batch sampled)."""
        return self.probes.tap(offsets) if self.probes is not None and offsets else None

    def record_probes(self, steps: list[int], times: list[float], parts) -> None:
        """Samples a tap took: this rank's parts of every probe at `steps` (collective; their times)."""
        t0 = time.perf_counter()
        what = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        self.collective_io(lambda: self.probes.record(steps, times, parts), f"sampling the probes at {what}")
        self.progress_bar.exclude(time.perf_counter() - t0)

    def run_segments(self, step: int) -> list[dict]:
        """Every segment up to `step`: the checkpoint's earlier ones, then this one as it stands."""
        return [*self.segments, *([segment_at(self.current, step)] if self.current else [])]

    def after_loop(self, s) -> None:
        """Listings, and a checkpoint where the loop ended (when stopped by a signal or checkpoints are on)."""
        self.collective_io(self.list_snapshots, "listing the snapshots")
        out = self.layout.case.output
        if self.probes is not None:
            self.collective_io(self.probes.flush, "writing probes.csv and probes.h5")
        if s.stopped_by == "signal" or ((out.checkpoint_every or out.checkpoint_interval) and s.step != self.last_checkpoint):
            self.checkpoint(s)

    def residual(self, s, mine: np.ndarray) -> None:
        """residual.h5: the final residual field (this rank's owned block `mine`), one snapshot laid out as
        fields.h5 (collective; blocks streamed to rank 0)."""
        lay = self.layout

        def write() -> None:
            f = FieldFile(lay.outdir / "residual.h5", lay.case, lay.spacing, lay.resolved_yaml) if self.comm.rank == 0 else None
            try:
                k = f.append(s.step, float(s.step)) if f else None
                for_each_block(self.comm, lay.blocks, mine, (lambda b, data: f.put(k, b, data)) if f else None)
                if f:
                    f.commit()
            finally:
                if f:
                    f.close()

        self.collective_io(write, "writing residual.h5")

    def interrupted(self, s) -> Interrupted:
        err = Interrupted(f"stopped by {self.signals.name} at step {s.step} of {self.layout.plan.steps or 'an adaptive run'}; "
                          f"checkpoint written to {self.checkpoint_path}; continue with "
                          f"`stencil run --restart {self.layout.outdir}`")
        err.agreed, err.report = True, self.comm.rank == 0
        return err

    def stop_requested(self) -> bool:
        return self.signals.received is not None

    def progress_due(self, step: int) -> bool:
        return self.progress_bar.due(step)

    def progress(self, step: int) -> None:
        self.progress_bar.update(step)

    def warmed(self, step: int) -> None:
        """The loop's warm-up steps end here (the progress rate counts from here)."""
        self.progress_bar.warmed(step)

    def iteration(self, step: int, r: float, rel: float) -> None:
        """A multigrid cycle's residual, for the next progress line."""
        self.progress_bar.iteration(step, r, rel)

    def solved(self, step: int, cycles: int, rel: float, tol: float) -> None:
        """An implicit step's cycles and residual, for the next progress line."""
        self.progress_bar.solved(step, cycles, rel, tol)

    def clock(self, t: float) -> None:
        """Adaptive steps: the time reached, for the next progress line."""
        self.progress_bar.t = t

    def write_timings(self, rows: list[dict], first_step: int, last_step: int) -> None:
        """Rank 0: append this run's per-rank rows to timings.h5 (see write_timings_table)."""
        keep_before = self.resume if self.appending else None
        write_timings_table(self.layout.outdir / "timings.h5", rows, first_step, last_step, keep_before)

    def close(self, alone: bool = False) -> None:
        """Also after an error: rank 0 lists what was written (best effort, no communication).

        alone: the run failed on this rank only (the job is about to be aborted), so the other ranks will
        not join a collective close: a fields.h5 open with parallel HDF5 is left as its last flush left it.
        """
        self.progress_bar.close()
        if self.unlisted and self.comm.rank == 0:
            try:
                self._write_listings()
            except Exception:  # noqa: BLE001 - the error that ended the run is the one to report
                pass
        if self.fields is not None and not (alone and isinstance(self.fields, ParallelFieldFile)):
            self.fields.close()
        if self.probes is not None:
            self.probes.close()
