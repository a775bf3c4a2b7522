"""Halo exchange: one object, two verbs, the same time loop for every mode.

    pending = ex.start(u)        # pack and post (blocking: the whole exchange happens here)
    compute ex.before regions    # overlap: the interior that reads no neighbour's ghost, in bands,
                                 #   with ex.progress(pending) between them (MPI_Testall)
    ex.finish(pending)           # wait and unpack
    compute ex.after regions     # overlap: the edge strips; otherwise everything

Halo strips travel through contiguous buffers allocated once (the backend packs and unpacks them
with array slices, or device copies into pinned memory); ghost layers on physical edges are never
touched. Messages carry the direction of travel as their tag, so a rank may have the same
neighbour on two sides (two ranks in a periodic-free 1 x 2 grid) without confusion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..core.decomp import Block

TAGS = {"north": 0, "south": 1, "east": 2, "west": 3}  # tag = direction the message travels
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}


@dataclass
class Side:
    name: str  # where the neighbour is
    rank: int
    send: tuple[int, int, int, int]  # owned strip next to that neighbour
    ghost: tuple[int, int, int, int]  # ghost strip it fills
    sbuf: object
    rbuf: object


def strips(block: Block) -> dict[str, tuple[tuple, tuple]]:
    ny, nx = block.ny, block.nx
    return {
        "south": ((1, 2, 1, nx + 1), (0, 1, 1, nx + 1)),
        "north": ((ny, ny + 1, 1, nx + 1), (ny + 1, ny + 2, 1, nx + 1)),
        "west": ((1, ny + 1, 1, 2), (1, ny + 1, 0, 1)),
        "east": ((1, ny + 1, nx, nx + 1), (1, ny + 1, nx + 1, nx + 2)),
    }


class Exchange:
    """No neighbours: nothing to exchange (one process, or one rank of a 1 x 1 grid)."""

    mode = "none"
    overlap = False
    schedule = "compute everything; there are no neighbours"

    def __init__(self, block: Block, mpi, backend, timer):
        self.block, self.mpi, self.backend, self.timer = block, mpi, backend, timer
        self.sides = [self._side(name, rank, *strips(block)[name])
                      for name, rank in block.neighbours.items() if rank is not None]
        self.before = [block.interior()] if self.overlap else []
        self.after = block.edges() if self.overlap else [block.everything()]

    @property
    def trivial(self) -> bool:
        return not self.sides

    def _side(self, name, rank, send, ghost) -> Side:
        n = (send[1] - send[0]) * (send[3] - send[2])
        return Side(name, rank, send, ghost, self.backend.halo_buffer(n), self.backend.halo_buffer(n))

    def start(self, u):
        return None

    def progress(self, pending) -> None:
        """Called between the bands of `before`: lets MPI move messages while this rank computes."""

    def finish(self, pending) -> None:
        pass

    def close(self) -> None:
        pass


class Blocking(Exchange):
    mode = "blocking"
    schedule = ("for each axis and direction: pack, MPI_Sendrecv with the neighbour ahead and behind "
                "(MPI_PROC_NULL at physical edges), unpack; then compute every owned point")

    def __init__(self, block, mpi, backend, timer):
        super().__init__(block, mpi, backend, timer)
        from mpi4py import MPI

        self.null = MPI.PROC_NULL
        by_name = {s.name: s for s in self.sides}
        self.pairs = [(by_name.get(a), by_name.get(b), a) for a, b in
                      (("north", "south"), ("south", "north"), ("east", "west"), ("west", "east"))
                      if a in by_name or b in by_name]

    def start(self, u):
        t = time.perf_counter()
        for to, frm, direction in self.pairs:
            if to is not None:
                self.backend.pack(u, to.send, to.sbuf)
            self.mpi.Sendrecv(to.sbuf if to else None, dest=to.rank if to else self.null, sendtag=TAGS[direction],
                              recvbuf=frm.rbuf if frm else None, source=frm.rank if frm else self.null,
                              recvtag=TAGS[direction])
            if frm is not None:
                self.backend.unpack(frm.rbuf, u, frm.ghost)
        self.timer.add("comm", t)
        return None


class Nonblocking(Exchange):
    mode = "nonblocking"
    schedule = ("start persistent MPI_Irecv from every neighbour, pack, start persistent MPI_Isend; "
                "MPI_Waitall; unpack; then compute every owned point")

    def __init__(self, block, mpi, backend, timer):
        super().__init__(block, mpi, backend, timer)
        from mpi4py import MPI

        self.MPI = MPI
        self.requests = [mpi.Recv_init(s.rbuf, source=s.rank, tag=TAGS[OPPOSITE[s.name]]) for s in self.sides]
        self.requests += [mpi.Send_init(s.sbuf, dest=s.rank, tag=TAGS[s.name]) for s in self.sides]
        self.waited = self.requests  # what finish() waits for before unpacking

    def start(self, u):
        t = time.perf_counter()
        nrecv = len(self.sides)
        self.MPI.Prequest.Startall(self.requests[:nrecv])
        for s in self.sides:
            self.backend.pack(u, s.send, s.sbuf)
        self.MPI.Prequest.Startall(self.requests[nrecv:])
        self.timer.add("comm", t)
        return u

    def finish(self, u) -> None:
        t = time.perf_counter()
        self.MPI.Request.Waitall(self.waited)
        t = self.timer.add("wait", t)
        for s in self.sides:
            self.backend.unpack(s.rbuf, u, s.ghost)
        self.timer.add("comm", t)

    def close(self) -> None:
        for r in self.requests:
            r.Free()
        self.requests = []


class Overlap(Nonblocking):
    """Nonblocking, with the interior computed while the messages travel.

    Without an MPI progress thread a message moves only while its sender and receiver are inside MPI
    calls: a halo above the eager limit (Open MPI's shared memory: 4 KiB, i.e. a 512-point row in
    float64) is a rendezvous that would otherwise start only in Waitall, which then lines the ranks up
    every step. So the interior is computed in bands with MPI_Testall between them, the wait before the
    edges is for the receives only, and the sends complete when their buffers are next needed (the
    next start, or close).
    """

    mode = "overlap"
    overlap = True
    schedule = ("start receives, pack and start sends; compute the interior points that read no "
                "neighbour's ghost in bands, with MPI_Testall between them so the messages progress; "
                "MPI_Waitall on the receives; unpack; compute the edge strips. The sends are completed "
                "before their buffers are packed again (next step)")
    BANDS = 4  # interior bands per step, i.e. progress calls while computing

    def __init__(self, block, mpi, backend, timer):
        super().__init__(block, mpi, backend, timer)
        self.before = bands(block.interior(), self.BANDS)
        self.sends = self.requests[len(self.sides):]
        self.waited = self.requests[:len(self.sides)]  # the receives: sends complete at the next start

    def start(self, u):
        # last step's sends, before their buffers are packed again (inactive requests return at once)
        t = time.perf_counter()
        self.MPI.Request.Waitall(self.sends)
        self.timer.add("wait", t)
        return super().start(u)

    def progress(self, u) -> None:
        t = time.perf_counter()
        self.MPI.Request.Testall(self.requests)
        self.timer.add("comm", t)

    def close(self) -> None:
        self.MPI.Request.Waitall(self.sends)
        super().close()


def bands(region: tuple[int, int, int, int], n: int) -> list[tuple[int, int, int, int]]:
    """`region` cut into at most n bands of whole rows, balanced to within one row (none empty)."""
    r0, r1, c0, c1 = region
    rows = r1 - r0
    if rows <= 0 or c1 <= c0:
        return [region] if rows > 0 else []
    n = max(1, min(n, rows))
    return [(r0 + i * rows // n, r0 + (i + 1) * rows // n, c0, c1) for i in range(n)]


MODES = {cls.mode: cls for cls in (Blocking, Nonblocking, Overlap)}


def make_exchange(mode: str, block: Block, mpi, backend, timer, transport: str = "auto") -> Exchange:
    """The exchanger for `mode`; GPU fields get solver.parallel.gpu_exchange (staged, CUDA-aware or NCCL `transport`)."""
    if block.is_serial or mpi is None:
        return Exchange(block, mpi, backend, timer)
    if backend.on_gpu:
        from .gpu_exchange import GpuExchange

        return GpuExchange(mode, block, mpi, backend, timer, transport)
    return MODES[mode](block, mpi, backend, timer)
