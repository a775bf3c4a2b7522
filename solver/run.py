"""One run, from a validated case to an experiment record. The communicator is passed in.

validated case -> decomposition -> checks (memory, output directory) -> backend arrays -> time loop
-> snapshots -> per-rank timings gathered -> verification -> record written by rank 0.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .backends import backend_class
from .case.loading import dump_yaml
from .core import operator, physics
from .core.boundary import constant_ghosts, make_fill, periodic_axes
from .core.sides import varies_in_time
from .core.decomp import all_blocks, choose_dims
from .core.events import plan_of
from .core.errors import InputError, NumericalError
from .core.field import padded_field, set_edges
from .core.initial import initial_block
from .core.datafile import named
from .core.inputs import check_inputs
from .core.layout import Layout
from .core.balance import Balance
from .core.loop import Data, LoopState, TimeLoop
from .core.machine import affinity, memory_bytes, numa_text
from .core.timing import Clock, Timer
from .io.claim import check_not_working_dir, check_output_dir, claim, output_step, write_manifest
from .io.continued import check_continued
from .io.fields import hdf5_writer
from .io.outputs import Outputs, Resume, StopSignals, segment, vtk_wanted
from .io.safeio import write_text
from .io.vtk import check_folder
from .parallel.comm import Comm, agree, default_threads
from .parallel.consensus import check_same_case
from .parallel.exchange import make_exchange


@dataclass
class Options:
    overwrite: bool = False
    quiet: bool = False
    verify: bool | None = None  # None: the case's `verify`
    restart: str | None = None
    case_file: str | None = None  # the case file the case was read from (an input: never removed or rewritten)
    ceiling: bool = True  # look up (or measure) the copy bandwidth and compute peak for the record
    progress: object = None  # rank 0: called as progress(step, total, elapsed_s, mlups) instead of printing lines


class Run:
    """Orchestration only: case -> layout -> backend -> exchange -> loop -> outputs -> record.

    Every part below gets plain data (the Layout, the backend, the communicator), never this object.
    """

    def __init__(self, case, comm: Comm | None = None, options: Options | None = None):
        self.case, self.comm, self.opts = case, comm or Comm(), options or Options()
        self.clock = Clock()
        self.started = time.time()  # this segment's start (the record's run.segments)
        self.verify_on = case.verify if self.opts.verify is None else self.opts.verify
        self.signals = StopSignals()  # not installed: execute() holds the process's policy for the run
        self.balancer = None
        self.mg = None  # the multigrid solver (physics.solver: multigrid)

    # the layout owns the decomposition; these are views for callers (tests, tools)
    @property
    def block(self):
        return self.layout.block

    @property
    def blocks(self):
        return self.layout.blocks

    @property
    def dims(self):
        return self.layout.dims

    @property
    def appending(self) -> bool:
        return self.resume.appending

    @property
    def exchange(self):
        return self.loop.ex if hasattr(self, "loop") else self._exchange

    # set-up ------------------------------------------------------------------------------------
    def setup(self) -> None:
        """Every check on every rank, agreed, before anything is written (solver.io.claim); then the claim."""
        agree(self.comm, lambda: check_same_case(self.comm, self.case, self.opts))
        self.hosts = self.comm.allgather(socket.gethostname())
        agree(self.comm, self._plan)
        agree(self.comm, self._check_inputs)
        agree(self.comm, self._check_output_dir)
        agree(self.comm, self._build)
        agree(self.comm, self._connect)
        agree(self.comm, lambda: output_step(self._claim, "claiming the output directory"))
        agree(self.comm, lambda: output_step(self._open_outputs, "opening the output files"))
        self.clock.lap("setup")
        if self.verify_on:  # what --verify will cost, before the run starts (two reference steps, timed)
            from .results.verify import cost_note

            self.outputs.progress_bar.compiling(cost_note(self.case, self.comm, self.layout.plan.steps))
            self.clock.lap("verify")
        if self.comm.rank == 0:
            for note in self.case.notes():
                print(note, file=sys.stderr, flush=True)
            from .core.ringing import warning  # Crank-Nicolson far past the explicit limit on a sharp field rings

            ring = warning(self.case)
            if ring:
                print(ring, file=sys.stderr, flush=True)
        self.outputs.progress_bar.compiling(self.backend.compile_note())
        self.backend.prepare(self.u, self.u_new, self.layout.w)
        if self.mg is not None:  # its kernels too: the first cycle is timed as the others
            from .multigrid.cycle import warm_up
            from .multigrid.levels import smoothing_note

            note = smoothing_note(self.mg.levels)
            if note and self.comm.rank == 0:
                print(note, file=sys.stderr, flush=True)
            if hasattr(self.mg, "warm_up"):  # Newton's own multigrid (solver.nonlinear)
                self.mg.warm_up()
            else:
                warm_up(self.case, self.backend, self.mg.settings, self.mg.kind)
        self.comm.barrier()
        self.clock.lap("compile")

    def _check_inputs(self) -> None:
        """Every data file the case names read whole, and the products of its physical data (solver.core.inputs);
        a restart's case and data files against the checkpoint's fingerprint (solver.io.checkpoint). Rank 0 reads them once,
        before anything is written (a source whose window opens late included); a step of its own, as no other
        rank meets a collective while rank 0 reads."""
        if self.comm.rank == 0:
            check_inputs(self.case)
            if self.restart:  # the case against the checkpoint's fingerprint, its data files' hashes included
                self.restart.check(self.case, self.layout.dt)

    def _plan(self) -> None:
        case, comm = self.case, self.comm
        dt = physics.time_step(case)
        self.restart = open_restart(self.opts.restart)  # checked against the case in _check_inputs
        dims = choose_dims(comm.size, case.shape, case.parallel.decomposition, case.parallel.dims)
        node_rank, node_size = comm.node()
        self.layout = Layout(case=case, dt=dt, spacing=physics.spacing(case), plan=plan_of(case),
                             w=physics.weights(case).cast(case.numerics.dtype), dims=dims, rank=comm.rank,
                             blocks=all_blocks(case.shape, dims, periodic_axes(case)), outdir=Path(case.output.dir),
                             threads=case.backend.threads or default_threads(comm.node_cores(), node_rank),
                             node_rank=node_rank, node_size=node_size, vtk_on=vtk_wanted(case, comm.rank))
        self.resume = Resume.of(self.restart, self.layout.outdir)
        self.backend_cls = backend_class(case.backend.name, self.layout.threads)
        if hasattr(self.backend_cls, "check_placement"):  # GPUs: ranks per node vs GPUs (parallel.share_gpus)
            self.backend_cls.check_placement(node_size, case.parallel)
        check_memory(self.layout, self.verify_on)

    def _check_output_dir(self) -> None:
        check_not_working_dir(self.layout.outdir)
        if self.comm.rank == 0:
            check_output(self.layout, self.comm, self.opts.overwrite, self.resume.appending, self._inputs())

    def _inputs(self) -> dict:
        """Files this run reads, which --overwrite must not remove (nor a restart rewrite), by the option or field
        that names them: the case file, the checkpoint it continues, and every data file the case names
        (solver.core.datafile.named: the initial field, alpha, the sources, the sides)."""
        found = {"case": Path(self.opts.case_file)} if self.opts.case_file else {}
        if self.restart:
            found["--restart"] = self.restart.path
        found.update({f.name: Path(f.path) for f in named(self.case)})
        return found

    def _claim(self) -> None:
        if self.comm.rank == 0:
            self.claim = claim(self.layout.outdir, appending=self.resume.appending, overwrite=self.opts.overwrite,
                               inputs=self._inputs())
            self.signals.at_abort(self.claim.release)  # a second Ctrl-C leaves no lock behind

    def _build(self) -> None:
        case, lay = self.case, self.layout
        interior = self.restart.read_block(lay.block) if self.restart else initial_block(case, lay.block)
        self.restored = {n: self.restart.read_block(lay.block, n) for n in self.restart.state} if self.restart else {}
        self.backend = self.backend_cls(case.backend, case.numerics.dtype, lay.threads,
                                        local_rank=lay.node_rank, local_size=lay.node_size)
        t0 = self.first_time  # side values that vary in time: the ghosts hold their values at the start
        self.backend.boundary = make_fill(case, lay.block, t=t0)
        if hasattr(self.backend, "use_tuned"):  # numba: the stored time/cache tile, rank 0's for every rank
            from .backends.numba_backend import stored_tile

            self.backend.use_tuned(self.comm.bcast(stored_tile(case.numerics.dtype, lay.threads) if self.comm.rank == 0 else None))
        host = padded_field(case, lay.block, interior, t=t0)
        self.u = self.backend.asarray(host)
        self.u_new = self.backend.asarray(host)
        self.timer = Timer(trace=case.output.trace)
        self.warm_timer = Timer()
        lay.resolved_yaml = resolved_yaml(lay, self.comm.size)

    def _open_outputs(self) -> None:
        lay = self.layout
        first = self.restart.step if self.restart else 0
        self.outputs = Outputs(lay, self.comm, self.backend, self.resume, quiet=self.opts.quiet,
                               segments=self.restart.segments if self.restart else (),
                               current=segment(first, self.comm.size, self.hosts, self.started),
                               progress=self.opts.progress, signals=self.signals,
                               solver_state=self.mg.state if self.mg is not None else None)
        if self.comm.rank == 0:
            write_text(lay.outdir / "case.yaml", lay.resolved_yaml)

    def _connect(self) -> None:
        """The halo exchanger: its own agreed step, as GPU transports negotiate collectively. Multigrid: the
        solver, with the exchangers of every level (solver.multigrid), stands in for it."""
        if self.case.nonlinear:  # Newton's method with the multigrid inside it (explicit steps: its operator)
            from .nonlinear.newton import Newton

            self.mg = Newton(self.layout, self.comm, self.backend, t=self.first_time)
            self._exchange = self.mg
            self.u, self.u_new = self.mg.adopt(self.u, self.u_new)
            if self.restart:
                self.mg.resume(self.restart.r0, self.restart.residuals)
                self.mg.restore(self.restored)  # the levels' diagonal the checkpointed run held
            return
        if self.case.uses_multigrid:
            from .multigrid.cycle import Multigrid, operator_of, settings_of

            self.mg = Multigrid(self.layout, self.comm, self.backend,
                                settings_of(self.case, *operator_of(self.case, self.first_dt)),
                                self.case.multigrid.cycle, t=self.first_time)
            self._exchange = self.mg
            self.u, self.u_new = self.mg.adopt(self.u, self.u_new)
            self.mg.restore(self.restored)  # a restart: the solver's own state beside the field
            return
        self._exchange = self.connect(self.layout.block)
        if hasattr(self._exchange, "adopt"):  # deep halos: fields with k ghost layers; we keep one-layer views
            self.u, self.u_new = self._exchange.adopt(self.u, self.u_new)
        self.layout.w, self.w_tiles = self.block_data(self.first_step, self._exchange)

    @property
    def first_step(self) -> int:
        return self.restart.step if self.restart else 0

    @property
    def first_time(self) -> float:
        """The time of the first field: 0, or the checkpoint's."""
        return self.restart.time if self.restart else 0.0

    @property
    def first_dt(self) -> float:
        """The first step's length: the case's dt, or (adaptive steps) the controller's from the checkpoint."""
        clock = self.restart.clock if self.restart else None
        return clock["controller"]["dt"] if clock and clock.get("controller") else self.layout.dt

    def weights_at(self, step: int, ex):
        """(the weights of plain steps, those of time tiles) for the step from `step`, on this rank's fields: the
        case's numbers, with the source and coefficient fields where the physics has them (solver.core.operator),
        built on the exchanger's deep layout (plain steps read its one-layer views) or the padded block."""
        lay = self.layout
        deep = getattr(ex, "layout", None)
        shape, owned = (deep.shape, (deep.owned[0], deep.owned[2])) if deep is not None else (lay.block.padded, (1, 1))
        host = operator.host_weights(self.case, lay.block, shape, owned, lay.plan.span(step))
        w = operator.on_device(self.backend, host, self.case.numerics.dtype, aligned=owned[1])
        return (operator.view(w, deep.view) if deep is not None else w), w

    def fill_at(self, step: int):
        """The ghost rules of this rank's physical sides at `step` (side values that vary in time)."""
        return make_fill(self.case, self.layout.block, t=self.layout.plan.time(step))

    def block_data(self, step: int, ex):
        """Everything this rank holds per row and per column beyond its field's points, for its current block on
        the layout of the exchanger `ex`, from `step` on. The one list of what a block carries: the set-up builds
        it here and a rebalance (solver.parallel.balance) rebuilds it here, so a moved block reads what a static
        one does, bit for bit:
        - the ghost rules of its physical sides (profiles along a side, side files, tables in time at the step's
          time): backend.boundary, which refills the ghosts after a step where they are not constant;
        - the update's fields (sources, face coefficients) on the exchanger's layout (a deep halo's fields);
        - the energy balance's walls and source sums (solver.core.balance).
        The fields' own ghost layers take the same rules (fill_edges). Returns (the weights of plain steps,
        those of time tiles)."""
        self.backend.boundary = self.fill_at(step)
        if getattr(self, "balance", None) is not None:
            self.balance.moved(self.layout.block)
        return self.weights_at(step, ex)

    def fill_edges(self, block, u, step: int, owned: tuple[int, int] = (1, 1)):
        """The ghost layer of `u`, a field of `block` whose first owned point is at local `owned`, on its physical
        sides by the rules at `step`: the rows a rebalance moved, and a deep-halo exchanger's fields."""
        return set_edges(self.case, block, u, step * self.layout.dt, owned)

    def connect(self, block, state=None, previous=None):
        """An exchanger for `block` (called again by the loop after a rebalance moved the blocks, with the
        loop's state, whose fields a deep-halo exchanger adopts, and the exchanger it replaces)."""
        p, lay = self.case.parallel, self.layout
        tiles = hasattr(self.backend, "tile_for") and constant_ghosts(self.case, lay.blocks)  # agreed by all ranks
        depth = self.comm.bcast(self.backend.tile_for(min(b.ny for b in lay.blocks))) if tiles else 1  # rank 0's
        step = state.step if state is not None else self.first_step
        ex = make_exchange(p.halo, block, self.comm.mpi, self.backend, self.timer, p.transport, depth=depth, blocks=lay.blocks,
                           fill=lambda b, a, owned: self.fill_edges(b, a, step, owned))
        if previous is not None:
            ex.carried = previous.sent()  # messages per step count the whole run
        if state is not None and hasattr(ex, "adopt"):
            state.u, state.u_new = ex.adopt(state.u, state.u_new)
        return ex

    # the run -----------------------------------------------------------------------------------
    def execute(self) -> dict:
        # NaN and Inf are the loop's to find and report (exit 4, one line): numpy's own overflow warnings are not
        with StopSignals.held() as self.signals, np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            try:
                return self._execute()
            finally:
                if getattr(self, "claim", None) is not None:
                    self.claim.release()  # the output directory's lock, held for the run's life

    def _execute(self) -> dict:
        try:
            self.setup()
        except BaseException:  # a step after the exchanger's failed: free its persistent requests now (MPI would
            self._close_exchange()  # find them inactive at its end and say so on every rank)
            raise
        cp = self.restart  # a restart continues with every piece of state that decides the next step
        state = LoopState(self.u, self.u_new, step=cp.step if cp else 0, r0=cp.r0 if cp else None,
                          residuals=list(cp.residuals) if cp else [], t=self.first_time,
                          taken=[tuple(x) for x in (cp.clock or {}).get("taken", [])] if cp else [])
        if self.case.parallel.balance == "dynamic" and not self._exchange.trivial:
            from .parallel.balance import Balancer

            self.balancer = Balancer(self.layout, self.comm.mpi, (self.timer, self.warm_timer),
                                     self.case.parallel.balance_every, self.fill_edges)
        self.balance = (self.mg.balance(state.step) if hasattr(self.mg, "balance") else  # Newton: its own rates
                        Balance(self.case, self.layout.block, self.layout.dt, state.step, self.layout.plan))
        stepper, controller = self._adaptive()
        self.outputs.controller = controller  # (its state goes into checkpoints)
        loop = TimeLoop(self.layout, self.backend, self.comm, self._exchange, (self.timer, self.warm_timer),
                        hooks=self.outputs, balancer=self.balancer, connect=self.connect, iterate=self.mg,
                        data=Data(self.weights_at, getattr(self, "w_tiles", None), operator.changes(self.case),
                                  self.fill_at if varies_in_time(self.case) else None, self.balance,
                                  self.block_data, stepper, controller))
        self.balance.begin(self.backend, state.u)
        self.comm.barrier()
        self.timer.epoch = self.warm_timer.epoch = time.perf_counter()
        self.outputs.progress_bar.start(state.step)
        self.clock.skip()
        failed = None
        try:
            self.outputs.snapshot(state)
            self.outputs.probe(state)
            self.clock.lap("output")
            try:
                loop.run(state)
            except NumericalError as exc:
                exc.agreed, exc.report = True, self.comm.rank == 0
                raise
            self.backend.synchronize()  # GPU: the last kernels' event timings reach the timers
            self._close_balance(state)
            t = time.perf_counter()
            self.outputs.after_loop(state)  # checkpoint at the end, or on a stop request
            if self.case.output.residual and state.stopped_by != "signal":
                self.outputs.residual(state, self.residual_field(state))
            self.clock.phases["output"] = self.clock.phases.get("output", 0.0) + time.perf_counter() - t
        except BaseException as exc:
            failed = exc
            raise
        finally:
            loop.ex.close()
            self.outputs.close(alone=failed is not None and not getattr(failed, "agreed", False))
        self.clock.phases["warmup"] = loop.warm_seconds
        io = self.timer.seconds["io"]  # snapshots inside the loop: reported as output, not as solve time
        self.clock.phases["solve"] = loop.loop_seconds - io
        self.clock.phases["output"] = self.clock.phases.get("output", 0.0) + io
        self.clock.skip()
        self.loop, self.state = loop, state
        return self.finish()

    def _close_exchange(self) -> None:
        ex = getattr(self, "_exchange", None)
        if ex is not None:
            ex.close()

    def _adaptive(self):
        """(stepper, controller) of adaptive steps (run.time_tolerance), the controller from the checkpoint on a
        restart; (None, None) otherwise."""
        if not self.layout.plan.adaptive:
            return None, None
        from .core.controller import Controller
        from .multigrid.adaptive import Stepper

        clock = self.restart.clock if self.restart else None
        if clock and clock.get("controller"):
            controller = Controller.restore(clock["controller"])
        else:
            controller = Controller.of(self.case, self.layout.dt, self.layout.plan.end)
        return Stepper(self.mg), controller

    def finish(self) -> dict:
        from .results.record import build_record, write_record

        correctness, stopped = None, self.state.stopped_by == "signal"
        if self.verify_on and not stopped:
            from .results.verify import verify

            last = self.state.residuals[-1][1] if self.state.residuals else None
            correctness = verify(self.layout, self.comm, self.backend, self.state.u, self.state.step, last,
                                 self.state.solves)
            energy = getattr(self, "energy", None) or {}
            if energy.get("closed") is not None:  # explicit steps seen one by one: the balance closes to rounding
                correctness["energy_balance"] = {"imbalance": energy["imbalance"], "bound": energy["bound"],
                                                 "passed": energy["closed"]}
                correctness["passed"] = bool(correctness["passed"] and energy["closed"])
            self.clock.lap("verify")
        ceiling = None if stopped else self._ceiling()
        self.field_range = self._field_range()
        self.answers = self._answers()
        self.update_l2 = self._update_l2()
        rows = self.comm.gather(self.rank_row())
        written = {}

        def write_results() -> None:  # rank 0; a failure (disk full) ends every rank with exit 5
            if self.comm.rank == 0:
                written["record"] = build_record(self.layout, rows, self.facts(), correctness, ceiling)
                write_record(self.layout.outdir, self.case.output.trace, written["record"], rows)
                self.outputs.write_timings(rows, self.restart.step if self.restart else 0, self.state.step)
                write_manifest(self.layout.outdir)

        self.outputs.collective_io(write_results, "writing the record")
        record = self.comm.bcast(written.get("record"))
        if self.state.stopped_by == "signal":
            raise self.outputs.interrupted(self.state)
        self._note_late_signal()
        if self.state.stopped_by in ("diverged", "stalled"):  # written like any ending, then exit 4 as NaN/Inf do: a
            # solve that stalled far above the rounding floor left a field that does not solve the case
            err = NumericalError(f"{record['solver']['ended']}; the record and the final field are in "
                                 f"{self.layout.outdir}")
            err.agreed, err.report = True, self.comm.rank == 0
            raise err
        return record

    def _note_late_signal(self) -> None:
        """A stop request that came after the last step: the run finished its files; say so (collective)."""
        if self.comm.allmax(1 if self.signals.received is not None else 0) and self.comm.rank == 0:
            print(f"note: {self.signals.name} arrived after the last step (step {self.state.step}); the run "
                  "finished its checkpoint, verification and record first, so there is nothing to continue",
                  file=sys.stderr, flush=True)

    def _close_balance(self, state) -> None:
        """The balance's last terms, from the final field (solver.core.balance)."""
        t = time.perf_counter()
        if self.case.physics.equation == "laplace":
            self.balance.steady(self.backend, state.u)
        self.balance.finish(self.backend, state.u)
        self.energy = self.balance.result(self.comm, self.case.numerics.dtype)
        from .core.medium import heat_units

        if heat_units(self.case):
            self.energy["units"] = heat_units(self.case)
        self.clock.phases["output"] = self.clock.phases.get("output", 0.0) + time.perf_counter() - t

    def facts(self) -> dict:
        """What the record says of this run beyond the layout and the rank rows (plain data)."""
        s, ex, phases = self.state, self.loop.ex, dict(self.clock.phases)
        phases["total"] = self.clock.total()
        return {"phases": phases, "mpi_library": self.comm.library(), "on_gpu": self.backend.on_gpu,
                "halo": ex.mode if self.comm.size > 1 else "none", "halo_schedule": ex.schedule,
                "threads_per_rank": self.backend.threads,
                "tiling": {"time_tile": getattr(self.backend, "chosen", None) or 1, "halo_depth": getattr(ex, "depth", 1),
                           "steps": s.step - (self.restart.step if self.restart else 0)},
                "balance": self.balancer.summary() if self.balancer else None,
                "solver": self.solver_facts(),
                "energy": getattr(self, "energy", None),
                "answers": getattr(self, "answers", None),
                "run": {"steps": s.step, "converged": s.converged, "stopped_by": s.stopped_by,
                        "residuals": s.residuals, "snapshots": self.outputs.snapshots,
                        "hdf5_writer": self.outputs.hdf5_writer,  # serial, streamed or mpio
                        "segments": self.outputs.run_segments(s.step), **self.time_facts()}}

    def time_facts(self) -> dict:
        """The run's time (solver.core.events): where it ended, its plan, why it stopped early (steady), the host's share
        of the loop spent sampling probes (inside numba's time tiles their statistics are the sweep's: compute), and with adaptive steps every step tried: [step, t, dt, error / tolerance, kept, the
        stages' cycles] (solver.core.controller)."""
        s, plan = self.state, self.layout.plan
        if not plan.heat:
            return {}
        out = {"t": s.t, "t_end": plan.end, "plan": plan.describe(), "steady": s.steady,
               "probe_seconds": self.loop.probe_seconds}
        if plan.adaptive:
            ctl = self.loop.data.controller
            out["adaptive"] = {"method": "TR-BDF2 (solver/multigrid/adaptive.py), PI controller "
                                         "(solver/core/controller.py)", "time_tolerance": ctl.tol,
                               "accepted": ctl.accepted, "rejected": ctl.rejections,
                               "solves": sum(len(x[5]) for x in s.taken), "steps": [list(x) for x in s.taken]}
        return out

    def residual_field(self, state) -> np.ndarray:
        """This rank's owned block of the final residual g - A u: multigrid's last check left it in the finest
        level's r; Jacobi's last step was a plain one (a check followed it), so its update is the residual
        of the field before it (the record's last residual is the same quantity)."""
        from .io.fields import owned

        if self.mg is not None:
            g = self.mg.grids[0]
            return self.backend.get(g.r, g.owned)
        return owned(self.backend, state.u) - owned(self.backend, state.u_new)

    def solver_facts(self) -> dict | None:
        """Laplace: how the iteration ended; implicit heat: each step's solve (solver.results.solver)."""
        s = self.state
        if self.case.implicit:
            scheme = "tr-bdf2 (adaptive)" if self.layout.plan.adaptive else self.case.physics.scheme
            return {"method": "multigrid", "scheme": scheme, "cycle": self.case.multigrid.cycle,
                    "tolerance": physics.step_tolerance(self.case), "solves": s.solves,
                    "levels": self.mg.describe(), **({"newton": self.mg.facts()} if hasattr(self.mg, "facts") else {})}
        if self.case.physics.equation != "laplace":
            return None
        start = self.restart.step if self.restart else 0
        facts = {"method": self.case.physics.solver, "iterations": s.step - start, "initial_residual": s.r0,
                 "residuals": [(k, r, s.relative(r)) for k, r in s.residuals], "tolerance": self.case.run.tolerance,
                 "converged": s.converged, "stopped_by": s.stopped_by, "first_iteration": start, "floor": s.floor}
        if self.mg is not None:
            facts.update(cycle=self.case.multigrid.cycle, levels=self.mg.describe())
        if hasattr(self.mg, "facts"):  # Newton's method (solver.nonlinear)
            facts.update(method="newton", newton=self.mg.facts())
        else:
            facts["field_range"] = self.field_range  # what Jacobi's error estimate is weighed against
            facts["update_l2"] = self.update_l2  # and what its bound is made of
        return facts

    def _update_l2(self) -> float | None:
        """Jacobi: sqrt(sum of squares) of the last sweep's update over every rank (collective; summed in rank order),
        where the run ended at a check (the field before the last sweep then still in u_new); else None."""
        s = self.state
        if self.case.physics.equation != "laplace" or self.mg is not None or not s.residuals or s.residuals[-1][0] != s.step:
            return None
        d = self.residual_field(s).astype(np.float64)
        return float(np.sqrt(sum(self.comm.allgather(float(np.sum(d * d))))))

    def _field_range(self) -> float | None:
        """max(u) - min(u) of the final field over every rank (collective), for Jacobi's error estimate."""
        if self.case.physics.equation != "laplace" or self.mg is not None:
            return None
        from .io.fields import owned

        u = owned(self.backend, self.state.u)
        hi = self.comm.allmax(float(u.max()) if u.size else -np.inf)
        lo = -self.comm.allmax(float(-u.min()) if u.size else -np.inf)
        return hi - lo

    def _answers(self) -> dict | None:
        """The answers in the problem's units (solver.results.answers), merged on rank 0 (collective)."""
        from .io.fields import owned
        from .results import answers

        u = owned(self.backend, self.state.u).astype(np.float64)
        parts = self.comm.gather(answers.partial(self.case, self.layout.block, u))
        if self.comm.rank != 0:
            return None
        return answers.section(self.case, answers.merge(parts), getattr(self, "energy", None))

    def _ceiling(self) -> dict | None:
        if not self.opts.ceiling:
            return None
        from .bench.bandwidth import compute_ceiling, copy_ceiling

        fresh = self.backend.on_gpu  # GPU: measured in every run (clocks and neighbours vary)
        copy = copy_ceiling(self.backend, self.comm, refresh=fresh)
        return {**copy, "compute": compute_ceiling(self.backend, self.comm, self.case.numerics.dtype, refresh=fresh)}

    def rank_row(self) -> dict:
        b, t, loop = self.layout.block, self.timer, self.loop
        return {"rank": self.comm.rank, "host": socket.gethostname(), "pid": os.getpid(), "affinity": affinity(),
                "numa": numa_text(),
                "threads": self.backend.threads, "rows": f"{b.rows[0]}-{b.rows[1] - 1}", "cols": f"{b.cols[0]}-{b.cols[1] - 1}",
                "points": b.ny * b.nx, **{k: v for k, v in t.seconds.items()}, "loop": loop.loop_seconds,
                "warmup": loop.warm_seconds, "steps": loop.timed_steps, "device": self.backend.describe(),
                "events": t.events if t.trace else None, "updates": loop.updates, "levels": t.levels,
                **getattr(loop.ex, "stats", dict)()}


# set-up steps as functions of plain data ---------------------------------------------------------

def open_restart(path: str | None):
    """--restart: the checkpoint (None without --restart); Run._check_inputs checks it against the case."""
    if not path:
        return None
    from .io.checkpoint import Checkpoint

    return Checkpoint.open(path)


def check_memory(layout: Layout, verify_on: bool) -> None:
    case = layout.case
    itemsize = np.dtype(case.numerics.dtype).itemsize
    need = operator.streams(case) * math.prod(layout.block.padded) * itemsize  # u, u_new, data (Python ints: no overflow)
    if case.nonlinear:  # Newton: GMRES's basis and work fields, its own five, the Jacobian's (about eight)
        need += (case.newton.restart + 1 + 3 + 5 + 8) * math.prod(layout.block.padded) * itemsize
    if verify_on:  # the numpy reference's two padded row blocks and the piece of another rank's block it meets
        rows = -(-case.grid.ny // layout.size) + 2
        need += 3 * rows * (case.grid.nx + 2) * itemsize
    _, available = memory_bytes()
    if available and need > available / layout.node_size:
        g = case.grid
        raise InputError(
            f"grid: nx x ny = {g.nx} x {g.ny} {case.numerics.dtype} needs {need / 2**30:.1f} GiB per process but "
            f"{available / 2**30 / layout.node_size:.1f} GiB are available to each of {layout.node_size} "
            f"process(es) here; use a smaller grid, dtype float32, or more nodes")


def check_output(layout: Layout, comm: Comm, overwrite: bool, appending: bool, inputs: dict) -> None:
    """Rank 0, read-only: the output directory (solver.io.claim) and, when appending, every file the run
    continues there (solver.io.continued)."""
    d = layout.outdir
    check_output_dir(d, appending=appending, overwrite=overwrite, inputs=inputs)
    if layout.vtk_on:
        check_folder(d)
    if appending:
        from .results.record import check_not_reached

        check_not_reached(d, layout.case)
        check_continued(d, layout.case, hdf5_writer(comm), layout.vtk_on)


def resolved_yaml(layout: Layout, ranks: int) -> str:
    """case.yaml: the validated case with the derived values a reader needs to reproduce the run."""
    case = layout.case
    data = case.model_dump(mode="json")
    if case.physics.equation == "heat":
        data["physics"]["dt"] = layout.dt
    data["output"]["vtk"] = layout.vtk_on
    w = physics.weights(case)
    dx, dy = layout.spacing
    derived = (f"# derived: dx={dx!r} dy={dy!r} wc={w.wc!r} wx={w.wx!r} wy={w.wy!r}\n"
               f"# ranks={ranks} dims={list(layout.dims)} threads_per_rank={layout.threads}\n")
    return dump_yaml(data) + derived


def run_case(case, comm: Comm | None = None, options: Options | None = None) -> dict:
    """The library entry point (the CLI calls it): run a validated case, return its record on every rank."""
    return Run(case, comm, options).execute()
