"""One run, from a validated case to an experiment record. The communicator is passed in.

validated case -> decomposition -> checks (memory, output directory) -> backend arrays -> time loop
-> snapshots -> per-rank timings gathered -> verification -> record written by rank 0.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from .backends import backend_class
from .core import physics
from .core.decomp import all_blocks, choose_dims
from .core.errors import InputError, NumericalError
from .core.field import padded_field, set_edges
from .core.initial import initial_block
from .core.loop import LoopState, TimeLoop
from .core.machine import affinity, memory_bytes
from .core.timing import Clock, Timer
from .io.outputs import RESULT_FILES, Outputs, holds_results, vtk_wanted
from .io.safeio import write_text
from .parallel.comm import Comm, agree, threads_per_rank
from .parallel.exchange import make_exchange


@dataclass
class Options:
    overwrite: bool = False
    quiet: bool = False
    verify: bool | None = None  # None: the case's `verify`
    restart: str | None = None
    ceiling: bool = True  # look up (or measure) the copy bandwidth for the record


class Run:
    def __init__(self, case, comm: Comm | None = None, options: Options | None = None):
        self.case, self.comm, self.opts = case, comm or Comm(), options or Options()
        self.clock = Clock()
        self.quiet = self.opts.quiet
        self.outdir = Path(case.output.dir)
        self.spacing = physics.spacing(case)
        self.dt = physics.time_step(case)
        self.w = physics.weights(case).cast(case.numerics.dtype)
        self.verify_on = case.verify if self.opts.verify is None else self.opts.verify
        self._flat: list[np.ndarray] = []  # field buffers reused by move_rows (parallel.balance)

    # set-up ------------------------------------------------------------------------------------
    def setup(self) -> None:
        agree(self.comm, self._plan)
        agree(self.comm, self._check_output_dir)
        agree(self.comm, self._build)
        agree(self.comm, self._connect)
        self.clock.lap("setup")
        self.backend.prepare(self.u, self.u_new, self.w)
        self.comm.barrier()
        self.clock.lap("compile")

    def _plan(self) -> None:
        case, comm = self.case, self.comm
        self.restart = self._open_checkpoint()
        self.vtk_on = vtk_wanted(case, comm.rank)
        self.dims = choose_dims(comm.size, case.shape, case.parallel.decomposition, case.parallel.dims)
        self.blocks = all_blocks(case.shape, self.dims)
        self.block = self.blocks[comm.rank]
        self.node_rank, self.node_size = comm.node()
        self.threads = case.backend.threads or threads_per_rank(comm.node_cores(), self.node_rank)
        self.backend_cls = backend_class(case.backend.name)
        if hasattr(self.backend_cls, "check_placement"):  # GPUs: ranks per node vs GPUs (parallel.share_gpus)
            self.backend_cls.check_placement(self.node_size, case.parallel)
        self._check_memory()

    def _open_checkpoint(self):
        """--restart: the checkpoint, checked against the case; appending when it lies in output.dir."""
        self.appending = False
        if not self.opts.restart:
            return None
        from .io.checkpoint import Checkpoint

        cp = Checkpoint.open(self.opts.restart)
        cp.check(self.case, self.dt)
        self.appending = cp.directory == self.outdir.resolve()
        return cp

    def _check_memory(self) -> None:
        itemsize = np.dtype(self.case.numerics.dtype).itemsize
        need = 2 * int(np.prod(self.block.padded)) * itemsize
        if self.verify_on and self.comm.rank == 0:
            need += 4 * (self.case.grid.nx + 2) * (self.case.grid.ny + 2) * itemsize  # reference run on rank 0
        _, available = memory_bytes()
        if available and need > available / self.node_size:
            g = self.case.grid
            raise InputError(
                f"grid: {g.ny} x {g.nx} {self.case.numerics.dtype} needs {need / 2**30:.1f} GiB per process but "
                f"{available / 2**30 / self.node_size:.1f} GiB are available to each of {self.node_size} "
                f"process(es) here; use a smaller grid, dtype float32, or more nodes")

    def _check_output_dir(self) -> None:
        if self.comm.rank != 0:
            return
        d = self.outdir
        if d.exists() and not d.is_dir():
            raise InputError(f"output.dir: {d} exists and is not a directory; choose another --output")
        if self.appending:
            return  # continue the run in the checkpoint's own directory: output is appended
        if holds_results(d):
            if not self.opts.overwrite:
                raise InputError(f"output.dir: {d} already holds results; pass --overwrite to replace them, "
                                 "or choose another --output directory")
            for name in RESULT_FILES:
                (d / name).unlink(missing_ok=True)
            shutil.rmtree(d / "vtk", ignore_errors=True)
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"output.dir: cannot create {d} ({exc.strerror}); choose a writable --output") from None
        if not os.access(d, os.W_OK):
            raise InputError(f"output.dir: {d} is not writable; choose a writable --output")

    def _build(self) -> None:
        case, block = self.case, self.block
        interior = self.restart.read_block(block) if self.restart else initial_block(case, block)
        self.backend = self.backend_cls(case.backend, case.numerics.dtype, self.threads,
                                        local_rank=self.node_rank, local_size=self.node_size)
        host = padded_field(case, block, interior)
        self.u = self.backend.asarray(host)
        self.u_new = self.backend.asarray(host)
        self.timer = Timer(trace=case.output.trace)
        self.warm_timer = Timer()
        self.resolved_yaml = self._resolved_yaml()
        if self.comm.rank == 0:
            write_text(self.outdir / "case.yaml", self.resolved_yaml)
        self.outputs = Outputs(self)

    def _connect(self) -> None:
        """The halo exchanger: its own agreed step, as GPU transports negotiate collectively."""
        self.exchange = self._exchange_for(self.block)
        if hasattr(self.exchange, "adopt"):  # deep halos: the fields get k ghost layers, we keep one-layer views
            self.u, self.u_new = self.exchange.adopt(self.u, self.u_new)

    def _exchange_for(self, block):
        p = self.case.parallel
        return make_exchange(p.halo, block, self.comm.mpi, self.backend, self.timer, p.transport,
                             depth=getattr(self.backend, "time_tile", 1), blocks=self.blocks,
                             fill=lambda b, a: set_edges(self.case, b, a))

    def _resolved_yaml(self) -> str:
        data = self.case.model_dump(mode="json")
        if self.case.physics.equation == "heat":
            data["physics"]["dt"] = self.dt
        data["output"]["vtk"] = self.vtk_on
        w = physics.weights(self.case)
        derived = (f"# derived: dx={self.spacing[0]!r} dy={self.spacing[1]!r} wc={w.wc!r} wx={w.wx!r} wy={w.wy!r}\n"
                   f"# ranks={self.comm.size} dims={list(self.dims)} threads_per_rank={self.threads}\n")
        return yaml.safe_dump(data, sort_keys=False) + derived

    # the run -----------------------------------------------------------------------------------
    def execute(self) -> dict:
        self.setup()
        state = LoopState(self.u, self.u_new, step=self.restart.step if self.restart else 0)
        self.balancer = None
        if self.case.parallel.balance == "dynamic" and not self.exchange.trivial:
            from .parallel.balance import Balancer

            self.balancer = Balancer(self, self.case.parallel.balance_every)
        loop = TimeLoop(self.case, self.backend, self.exchange, self.block, self.comm, self.w,
                        self.timer, self.warm_timer, hooks=self.outputs, balancer=self.balancer)
        self.comm.barrier()
        self.timer.epoch = self.warm_timer.epoch = time.perf_counter()
        self.clock.skip()
        failed = None
        try:
            with self.outputs.signals:
                self.outputs.snapshot(state)
                self.clock.lap("output")
                try:
                    loop.run(state)
                except NumericalError as exc:
                    exc.agreed, exc.report = True, self.comm.rank == 0
                    raise
                self.backend.synchronize()  # GPU: the last kernels' event timings reach the timers
                t = time.perf_counter()
                self.outputs.after_loop(state)  # checkpoint at the end, or on a stop request
                self.clock.phases["output"] = self.clock.phases.get("output", 0.0) + time.perf_counter() - t
        except BaseException as exc:
            failed = exc
            raise
        finally:
            self.exchange.close()
            self.outputs.close(alone=failed is not None and not getattr(failed, "agreed", False))
        self.clock.phases["warmup"] = loop.warm_seconds
        io = self.timer.seconds["io"]  # snapshots inside the loop: reported as output, not as solve time
        self.clock.phases["solve"] = loop.loop_seconds - io
        self.clock.phases["output"] = self.clock.phases.get("output", 0.0) + io
        self.clock.skip()
        self.loop, self.state = loop, state
        return self.finish()

    def finish(self) -> dict:
        from .results.record import build_record, write_record

        correctness, stopped = None, self.state.stopped_by is not None
        if self.verify_on and not stopped:
            from .results.verify import verify

            correctness = verify(self, self.state.u, self.state.step)
            self.clock.lap("verify")
        ceiling = None if stopped else self._ceiling()
        rows = self.comm.gather(self.rank_row())
        written = {}

        def write_results() -> None:  # rank 0; a failure (disk full) ends every rank with exit 5
            if self.comm.rank == 0:
                written["record"] = build_record(self, rows, correctness, ceiling)
                write_record(self, written["record"], rows)
                self.outputs.write_timings(rows, self.restart.step if self.restart else 0, self.state.step)

        self.outputs.collective_io(write_results, "writing the record")
        record = self.comm.bcast(written.get("record"))
        if self.state.stopped_by == "signal":
            raise self.outputs.interrupted(self.state)
        return record

    def move_rows(self, state, blocks) -> None:
        """parallel.balance: give each rank the rows of `blocks` (collective). The owned rows that change
        owner move in one MPI_Alltoallv into the other field buffer, the halo exchanger is rebuilt for
        the new block. The two buffers are kept between moves and grown only when a block outgrows them
        (fresh memory costs page faults: about as much as the stencil steps between two checks)."""
        from .parallel.balance import move_rows

        block = blocks[self.comm.rank]
        size = block.padded[0] * block.padded[1]
        if not self._flat or self._flat[0].size < size:  # two buffers, with room to grow
            self._flat = [np.empty(int(size * 1.25), dtype=self.case.numerics.dtype) for _ in range(2)]
        a, b = self._flat
        spare, other = (b, a) if np.shares_memory(a, state.u) else (a, b)  # never write where u lives
        out = spare[:size].reshape(block.padded)
        move_rows(self.comm.mpi, state.u, [b.rows for b in self.blocks], [b.rows for b in blocks], out)
        previous = other[:size].reshape(block.padded)  # u_new: the next step writes every owned point
        set_edges(self.case, block, out)
        set_edges(self.case, block, previous)
        self.exchange.close()
        sent = self.exchange.sent()
        self.blocks, self.block = blocks, block
        state.u, state.u_new = out, previous
        self.exchange = self._exchange_for(block)
        self.exchange.carried = sent
        if hasattr(self.exchange, "adopt"):
            state.u, state.u_new = self.exchange.adopt(state.u, state.u_new)
        if self.outputs.vtk is not None:
            self.outputs.vtk.blocks, self.outputs.vtk.block = blocks, block

    def _ceiling(self) -> dict | None:
        if not self.opts.ceiling:
            return None
        from .bench.bandwidth import copy_ceiling

        return copy_ceiling(self.backend, self.comm, refresh=self.backend.on_gpu)  # GPU: measured in every run

    def rank_row(self) -> dict:
        b, t = self.block, self.timer
        return {"rank": self.comm.rank, "host": socket.gethostname(), "pid": os.getpid(), "affinity": affinity(),
                "threads": self.backend.threads, "rows": f"{b.rows[0]}-{b.rows[1] - 1}", "cols": f"{b.cols[0]}-{b.cols[1] - 1}",
                "points": b.ny * b.nx, **{k: v for k, v in t.seconds.items()}, "loop": self.loop.loop_seconds,
                "warmup": self.loop.warm_seconds, "steps": self.loop.timed_steps, "device": self.backend.describe(),
                "events": t.events if t.trace else None, "updates": self.loop.updates,
                **getattr(self.exchange, "stats", dict)()}


def run_case(case, comm: Comm | None = None, options: Options | None = None) -> dict:
    """The library entry point: run a validated case and return its record (on every rank)."""
    return Run(case, comm, options).execute()
