"""Halo exchange: halo modes x transports, composed, and the one registry that picks them.

Modes (parallel.halo) are schedules over the phases of solver.parallel.halo; each class's `schedule`
states its own. A transport moves the strips: between the field and contiguous buffers (pack,
unpack), and the buffers between ranks (shift: one blocking exchange per direction; persistent
requests; or, for NCCL, a grouped call on a stream). Host fields use halo.HostTransport (array
slices into host buffers that MPI reads and writes); GPU fields one of solver.parallel.gpu_exchange's
(staged through pinned host memory, CUDA-aware MPI on device buffers, or NCCL), with the same modes.
Every MPI call and tag lives in solver.parallel.comm. `make_exchange`: mode x transport x depth.
"""

from __future__ import annotations

import time

from ..core.decomp import Block
from .comm import free_all, start_all, test_all, wait_all
from .halo import Exchange, HostTransport, Side, bands, strips  # noqa: F401 - strips: re-exported


class Moving(Exchange):
    """What the three modes share: a transport, buffers from it, the record's facts."""

    def __init__(self, block, mpi, backend, timer, phases=None, transport=None):
        self.tx = transport or HostTransport(backend, mpi, self.overlap)
        super().__init__(block, mpi, backend, timer, phases)
        if self.tx.name != "host":
            self.schedule = f"{self.schedule} [transport {self.tx.name}: solver/parallel/gpu_exchange.py]"

    def _buffers(self, side: Side) -> Side:
        return self.tx.buffers(side)

    def stats(self) -> dict:
        return {**super().stats(), **self.tx.stats()}


class Blocking(Moving):
    mode = "blocking"
    schedule = ("for each phase: pack every strip; for each axis and direction MPI_Sendrecv with the neighbour "
                "ahead and behind (MPI_PROC_NULL at physical edges; NCCL: one grouped call); unpack; then "
                "compute every owned point")

    def start(self, u):
        t = time.perf_counter()
        self.tx.open()
        for phase in self.phases:
            self.tx.pack(u, phase, self.timer)
            self.tx.ready(self.timer)
            self.tx.shift(phase, self.timer)
            self.messages += len(phase)
            self.tx.unpack(u, phase, self.timer)
        self.tx.posted()
        self.timer.add("comm", _since(self.timer, t))
        return None


class Nonblocking(Moving):
    mode = "nonblocking"
    schedule = ("per phase: start persistent MPI_Irecv from every neighbour, pack, start persistent MPI_Isend "
                "(GPU: pack and wait for the copies first; NCCL: a grouped call on the stream); MPI_Waitall; "
                "unpack; the next phase likewise; then compute every owned point")
    WAIT_SENDS = True  # finish() waits for the sends too before unpacking

    def __init__(self, block, mpi, backend, timer, phases=None, transport=None):
        super().__init__(block, mpi, backend, timer, phases, transport)
        reqs = [self.tx.requests(p) for p in self.phases]
        self.recvs, self.sends = [r for r, _ in reqs], [s for _, s in reqs]
        self.current = len(self.phases)  # the phase in flight (none)

    def _begin(self, i: int, u) -> None:
        self.current = i
        if self.tx.early_receives:
            start_all(self.recvs[i])
        self.tx.pack(u, self.phases[i], self.timer)
        self.tx.ready(self.timer)
        if not self.tx.early_receives:
            start_all(self.recvs[i])
        start_all(self.sends[i])
        self.tx.post(self.phases[i], self.timer)
        self.messages += len(self.phases[i])

    def _end(self, i: int, u) -> None:
        """Unpack phase i (its receives are complete) and start the next one."""
        self.tx.unpack(u, self.phases[i], self.timer)
        if i + 1 < len(self.phases):
            self._begin(i + 1, u)
        else:
            self.current = len(self.phases)

    def start(self, u):
        t = time.perf_counter()
        self.tx.open()
        self._begin(0, u)
        self.tx.posted()
        self.timer.add("comm", _since(self.timer, t))
        return u

    def finish(self, u) -> None:
        while self.current < len(self.phases):
            i = self.current
            t = time.perf_counter()
            wait_all(self.recvs[i] + self.sends[i] if self.WAIT_SENDS else self.recvs[i])
            t = self.timer.add("wait", t)
            self._end(i, u)
            self.timer.add("comm", _since(self.timer, t))
        self.tx.finished()

    def close(self) -> None:
        self.tx.close()
        free_all([r for p in self.recvs + self.sends for r in p])
        self.recvs = self.sends = [[] for _ in self.phases]


class Overlap(Nonblocking):
    """Nonblocking, with the interior computed while the messages travel.

    Without an MPI progress thread a message moves only while its sender and receiver are inside MPI
    calls: a halo above the eager limit (Open MPI's shared memory: 4 KiB, i.e. a 512-point row in
    float64) is a rendezvous that would otherwise start only in Waitall, which then lines the ranks up
    every step. So the interior is computed in bands with MPI_Testall between them (a phase whose
    receives are complete is unpacked there and the next phase started), the wait before the edges is
    for the receives only, and the sends complete when their buffers are next needed (the next start,
    or close). GPU transports compute the interior in one launch (the host is free while it runs).
    """

    mode = "overlap"
    overlap = True
    schedule = ("start receives, pack and start sends; compute the interior points that read no "
                "neighbour's ghost in bands, with MPI_Testall between them so the messages progress (a phase "
                "received is unpacked there and the next one started); MPI_Waitall on the receives; unpack; "
                "compute the edge strips (GPU: on the high-priority edge stream, after the interior). The "
                "sends are completed before their buffers are packed again")
    WAIT_SENDS = False

    def __init__(self, block, mpi, backend, timer, phases=None, transport=None):
        super().__init__(block, mpi, backend, timer, phases, transport)
        self.before = bands(block.interior(), self.tx.progress_bands)

    def start(self, u):
        # the last exchange's sends, before their buffers are packed again (inactive requests return at once)
        t = time.perf_counter()
        wait_all([r for p in self.sends for r in p])
        self.timer.add("wait", t)
        return super().start(u)

    def progress(self, u) -> None:
        t = time.perf_counter()
        i = self.current
        if i < len(self.phases):
            done = test_all(self.recvs[i])
            test_all(self.sends[i])
            if done:
                self._end(i, u)
        self.timer.add("comm", _since(self.timer, t))

    def close(self) -> None:
        wait_all([r for p in self.sends for r in p])
        super().close()


MODES = {cls.mode: cls for cls in (Blocking, Nonblocking, Overlap)}


def _since(timer, t: float) -> float:
    """Where the comm section that began at t resumes: after whatever a transport charged meanwhile
    (a GPU transport's wait for its copies is `other`), so no interval is counted twice."""
    return t if timer.cursor is None else max(t, timer.cursor)


def make_exchange(mode: str, block: Block, mpi, backend, timer, transport: str = "auto", *,
                  depth: int = 1, blocks: list[Block] | None = None, fill=None) -> Exchange:
    """The exchanger for `mode` over this block's neighbours: none without neighbours; the mode over a
    transport: HostTransport for host fields, for GPU fields solver.parallel.gpu_exchange's (staged,
    CUDA-aware or NCCL: `transport`, agreed collectively); with depth > 1 (backend.time_tile: every
    rank passes the same) solver.parallel.deep's tiles of that many steps per exchange of that many
    layers, over the same transport."""
    if block.is_serial or mpi is None:
        return Exchange(block, mpi, backend, timer)
    tx = transport_for(mode, mpi, backend, transport)
    if depth > 1 and hasattr(backend, "tiled"):
        from .deep import DeepTiles

        return DeepTiles(MODES[mode], block, blocks or [block], mpi, backend, timer, depth, fill, transport=tx)
    return exchanger(mode, block, mpi, backend, timer, tx=tx)


def transport_for(mode: str, mpi, backend, transport: str = "auto"):
    """Collective: the GPU transport several exchangers of one mode share (None for host fields)."""
    if mpi is None or mpi.Get_size() == 1 or not backend.on_gpu:
        return None
    from .gpu_exchange import gpu_transport

    return gpu_transport(transport, mpi, backend, MODES[mode].overlap)


def exchanger(mode: str, block: Block, mpi, backend, timer, phases=None, tx=None) -> Exchange:
    """The mode's exchanger over `phases` (default: one step's halo, one layer, no corners) on transport
    `tx` (None: host fields); the trivial one without neighbours (multigrid builds one per level)."""
    if block.is_serial or mpi is None:
        return Exchange(block, mpi, backend, timer)
    return MODES[mode](block, mpi, backend, timer, phases, transport=tx)
