"""Halo geometry and the protocol every exchanger follows (host modes in solver.parallel.exchange, GPU
fields in solver.parallel.gpu_exchange; both import this module, neither imports the other).

    pending = ex.start(u)        # pack and post (blocking: the whole exchange happens here)
    compute ex.before regions    # overlap: the interior that reads no neighbour's ghost, in bands,
                                 #   with ex.progress(pending) between them (MPI_Testall)
    ex.finish(pending)           # wait and unpack
    compute ex.after regions     # overlap: the edge strips; otherwise everything

An exchange is a list of phases, each a list of sides (a neighbour, the owned strip sent to it, the
ghost strip its message fills); the sides of one phase travel together, a phase starts when the one
before it has been unpacked. A step's halo (one ghost layer, no corners) is one phase; a deep halo on
a process grid is two, columns then rows including the ghost columns just received, so that the
corners arrive without diagonal neighbours (solver.parallel.deep). Ghost layers on physical edges are
never touched. Neighbours are taken from the decomposition as given: a rank may have the same
neighbour on two sides, or be its own neighbour (periodic sides); messages carry the direction of
travel as their tag (solver.parallel.comm.TAGS), so they cannot be confused.

HostTransport (below) is the transport protocol and its host implementation: how strips reach the
buffers and the buffers the other ranks; the GPU transports (solver.parallel.gpu_exchange) subclass
it, and the modes (solver.parallel.exchange) call only these verbs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.decomp import Block
from .comm import TAGS, recv_init, send_init, sendrecv

HALO_TAGS = TAGS["halo"]  # tag = direction the message travels
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
SHIFTS = (("north", "south"), ("south", "north"), ("east", "west"), ("west", "east"))  # (towards, from)

Region = tuple[int, int, int, int]


@dataclass
class Side:
    name: str  # where the neighbour is
    rank: int
    send: Region  # owned strip next to that neighbour
    ghost: Region  # ghost strip it fills
    sbuf: object = None
    rbuf: object = None

    def shape(self) -> tuple[int, int]:
        r0, r1, c0, c1 = self.send
        return r1 - r0, c1 - c0


def strips(block: Block) -> dict[str, tuple[Region, Region]]:
    """(send, ghost) per side of a one-layer padded block (solver.core.decomp's convention)."""
    ny, nx = block.ny, block.nx
    return {
        "south": ((1, 2, 1, nx + 1), (0, 1, 1, nx + 1)),
        "north": ((ny, ny + 1, 1, nx + 1), (ny + 1, ny + 2, 1, nx + 1)),
        "west": ((1, ny + 1, 1, 2), (1, ny + 1, 0, 1)),
        "east": ((1, ny + 1, nx, nx + 1), (1, ny + 1, nx + 1, nx + 2)),
    }


def step_phases(block: Block) -> list[list[Side]]:
    """One step's halo: one phase, a side per neighbour, one layer deep, no corners."""
    return [[Side(name, rank, *strips(block)[name]) for name, rank in block.neighbours.items() if rank is not None]]


def shifts(phase: list[Side]) -> list[tuple[Side | None, Side | None, str]]:
    """(side sent to, side received from, direction of travel) per direction in which this phase moves data."""
    by_name = {s.name: s for s in phase}
    return [(by_name.get(a), by_name.get(b), a) for a, b in SHIFTS if a in by_name or b in by_name]


def bands(region: Region, n: int) -> list[Region]:
    """`region` cut into at most n bands of whole rows, balanced to within one row (none empty)."""
    r0, r1, c0, c1 = region
    rows = r1 - r0
    if rows <= 0 or c1 <= c0:
        return [region] if rows > 0 else []
    n = max(1, min(n, rows))
    return [(r0 + i * rows // n, r0 + (i + 1) * rows // n, c0, c1) for i in range(n)]


class Exchange:
    """No neighbours: nothing to exchange (one process, or one rank of a 1 x 1 grid)."""

    mode = "none"
    overlap = False
    depth = 1  # ghost layers exchanged per message (solver.parallel.deep: more)
    schedule = "compute everything; there are no neighbours"

    def __init__(self, block: Block, mpi, backend, timer, phases: list[list[Side]] | None = None):
        self.block, self.mpi, self.backend, self.timer = block, mpi, backend, timer
        self.phases = [[self._buffers(s) for s in phase] for phase in (phases or step_phases(block))]
        self.phases = [p for p in self.phases if p]
        self.sides = [s for phase in self.phases for s in phase]
        self.before = [block.interior()] if self.overlap else []
        self.after = block.edges() if self.overlap else [block.everything()]
        self.messages = 0  # messages this rank sent
        self.carried = 0  # messages sent by the exchangers this one replaced (rebalance)

    @property
    def trivial(self) -> bool:
        return not self.sides

    def _buffers(self, side: Side) -> Side:
        """The side with its contiguous send and receive buffers, allocated once (host memory here)."""
        n = side.shape()[0] * side.shape()[1]
        side.sbuf, side.rbuf = self.backend.halo_buffer(n), self.backend.halo_buffer(n)
        return side

    def start(self, u):
        return None

    def progress(self, pending) -> None:
        """Called between the bands of `before`: lets MPI move messages while this rank computes."""

    def finish(self, pending) -> None:
        pass

    def close(self) -> None:
        pass

    def sent(self) -> int:
        return self.carried + self.messages

    def stats(self) -> dict:
        """Per-rank facts for the record's timings row."""
        return {"messages": self.sent(), "halo_depth": self.depth}


class HostTransport:
    """Host fields: array slices into host buffers, which MPI reads and writes (every call synchronous)."""

    name = "host"
    early_receives = True  # receives may be posted before packing: the last unpack has finished
    progress_bands = 4  # overlap: interior bands, i.e. MPI_Testall calls while computing

    def __init__(self, backend, mpi, overlap: bool = False):
        self.backend, self.mpi = backend, mpi

    def buffers(self, side: Side) -> Side:
        n = side.shape()[0] * side.shape()[1]
        side.sbuf, side.rbuf = self.backend.halo_buffer(n), self.backend.halo_buffer(n)
        return side

    def open(self) -> None:
        """Before an exchange packs (GPU: orders its stream after the last step's kernels)."""

    def pack(self, u, sides: list[Side], timer) -> None:
        for s in sides:
            self.backend.pack(u, s.send, s.sbuf)

    def ready(self, timer) -> None:
        """After packing, before MPI reads the buffers (GPU: waits for the copies)."""

    def requests(self, phase: list[Side]) -> tuple[list, list]:
        """Persistent (receives, sends) of a phase."""
        return ([recv_init(self.mpi, s.rbuf, s.rank, HALO_TAGS[OPPOSITE[s.name]]) for s in phase],
                [send_init(self.mpi, s.sbuf, s.rank, HALO_TAGS[s.name]) for s in phase])

    def post(self, phase: list[Side], timer) -> None:
        """After the persistent requests are started (NCCL: its grouped send/receive instead)."""

    def shift(self, phase: list[Side], timer) -> None:
        """The blocking exchange of a phase: one MPI_Sendrecv per direction, every rank taking part."""
        for to, frm, direction in shifts(phase):
            sendrecv(self.mpi, to.sbuf if to else None, to.rank if to else None,
                     frm.rbuf if frm else None, frm.rank if frm else None, HALO_TAGS[direction])

    def unpack(self, u, sides: list[Side], timer) -> None:
        for s in sides:
            self.backend.unpack(s.rbuf, u, s.ghost)

    def posted(self) -> None:
        """After start() (GPU: the interior is computed on the main stream)."""

    def finished(self) -> None:
        """After finish() (GPU overlap: the edge strips on the edge stream, after the interior)."""

    def stats(self) -> dict:
        return {}

    def close(self) -> None:
        pass
