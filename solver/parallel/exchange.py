"""Halo exchange of host fields: the three halo modes, and the registry that picks an exchanger.

Modes (parallel.halo) are schedules over the phases of solver.parallel.halo; each class's `schedule`
states its own. The transport moves a side's strip between the field and its buffers and the buffers
between ranks: host fields pack and unpack with array slices (the backend's pack/unpack) into host
buffers that MPI reads and writes; GPU fields (staged through pinned memory, CUDA-aware MPI on device
buffers, or NCCL) are exchanged by solver.parallel.gpu_exchange with the same modes. Every MPI call
and tag lives in solver.parallel.comm. `make_exchange` is the one registry: mode x transport x depth.
"""

from __future__ import annotations

import time

from ..core.decomp import Block
from .comm import free_all, recv_init, send_init, sendrecv, start_all, test_all, wait_all
from .halo import HALO_TAGS, OPPOSITE, Exchange, Side, bands, shifts, strips  # noqa: F401 - strips: re-exported


class Blocking(Exchange):
    mode = "blocking"
    schedule = ("for each phase, axis and direction: pack, MPI_Sendrecv with the neighbour ahead and behind "
                "(MPI_PROC_NULL at physical edges), unpack; then compute every owned point")

    def start(self, u):
        t = time.perf_counter()
        for phase in self.phases:
            for to, frm, direction in shifts(phase):
                if to is not None:
                    self.backend.pack(u, to.send, to.sbuf)
                    self.messages += 1
                sendrecv(self.mpi, to.sbuf if to else None, to.rank if to else None,
                         frm.rbuf if frm else None, frm.rank if frm else None, HALO_TAGS[direction])
                if frm is not None:
                    self.backend.unpack(frm.rbuf, u, frm.ghost)
        self.timer.add("comm", t)
        return None


class Nonblocking(Exchange):
    mode = "nonblocking"
    schedule = ("start persistent MPI_Irecv from every neighbour of the phase, pack, start persistent MPI_Isend; "
                "MPI_Waitall; unpack; the next phase likewise; then compute every owned point")
    WAIT_SENDS = True  # finish() waits for the sends too before unpacking

    def __init__(self, block, mpi, backend, timer, phases=None):
        super().__init__(block, mpi, backend, timer, phases)
        self.recvs = [[recv_init(mpi, s.rbuf, s.rank, HALO_TAGS[OPPOSITE[s.name]]) for s in p] for p in self.phases]
        self.sends = [[send_init(mpi, s.sbuf, s.rank, HALO_TAGS[s.name]) for s in p] for p in self.phases]
        self.current = len(self.phases)  # the phase in flight (none)

    def _begin(self, i: int, u) -> None:
        self.current = i
        start_all(self.recvs[i])
        for s in self.phases[i]:
            self.backend.pack(u, s.send, s.sbuf)
        start_all(self.sends[i])
        self.messages += len(self.sends[i])

    def _end(self, i: int, u) -> None:
        """Unpack phase i (its receives are complete) and start the next one."""
        for s in self.phases[i]:
            self.backend.unpack(s.rbuf, u, s.ghost)
        if i + 1 < len(self.phases):
            self._begin(i + 1, u)
        else:
            self.current = len(self.phases)

    def start(self, u):
        t = time.perf_counter()
        self._begin(0, u)
        self.timer.add("comm", t)
        return u

    def finish(self, u) -> None:
        while self.current < len(self.phases):
            i = self.current
            t = time.perf_counter()
            wait_all(self.recvs[i] + self.sends[i] if self.WAIT_SENDS else self.recvs[i])
            t = self.timer.add("wait", t)
            self._end(i, u)
            self.timer.add("comm", t)

    def close(self) -> None:
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
    or close).
    """

    mode = "overlap"
    overlap = True
    schedule = ("start receives, pack and start sends; compute the interior points that read no "
                "neighbour's ghost in bands, with MPI_Testall between them so the messages progress (a phase "
                "received is unpacked there and the next one started); MPI_Waitall on the receives; unpack; "
                "compute the edge strips. The sends are completed before their buffers are packed again")
    BANDS = 4  # interior bands per step, i.e. progress calls while computing
    WAIT_SENDS = False

    def __init__(self, block, mpi, backend, timer, phases=None):
        super().__init__(block, mpi, backend, timer, phases)
        self.before = bands(block.interior(), self.BANDS)

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
        self.timer.add("comm", t)

    def close(self) -> None:
        wait_all([r for p in self.sends for r in p])
        super().close()


MODES = {cls.mode: cls for cls in (Blocking, Nonblocking, Overlap)}


def make_exchange(mode: str, block: Block, mpi, backend, timer, transport: str = "auto", *,
                  depth: int = 1, blocks: list[Block] | None = None, fill=None) -> Exchange:
    """The exchanger for `mode` over this block's neighbours: none without neighbours; GPU fields get
    solver.parallel.gpu_exchange (staged, CUDA-aware or NCCL `transport`); host fields the mode itself,
    or with depth > 1 (backend.time_tile) solver.parallel.deep's tiles of that many steps per exchange."""
    if block.is_serial or mpi is None:
        return Exchange(block, mpi, backend, timer)
    if backend.on_gpu:
        from .gpu_exchange import GpuExchange

        return GpuExchange(mode, block, mpi, backend, timer, transport)
    if depth > 1 and hasattr(backend, "tiled"):
        from .deep import DeepTiles

        return DeepTiles(MODES[mode], block, blocks or [block], mpi, backend, timer, depth, fill)
    return MODES[mode](block, mpi, backend, timer)
