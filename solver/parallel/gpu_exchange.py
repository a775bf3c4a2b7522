"""GPU transports for the halo modes of solver.parallel.exchange (hybrid MPI + GPU fields).

The modes (blocking, nonblocking, overlap) are the host's classes; a transport here supplies their
steps on the GPU. Transports (parallel.transport; the record's per-rank `transport` says which ran):
- staged: device strips -> pinned host buffers (cudaMemcpy2DAsync) -> MPI -> pinned -> device.
- cuda-aware: device strips -> contiguous device buffers -> MPI on device memory (needs a CUDA-aware MPI).
- nccl: device buffers -> grouped ncclSend/ncclRecv on a CUDA stream (no host copy, no host wait);
  the NCCL communicator is bootstrapped over MPI (unique id broadcast from rank 0).
- auto: nccl when every rank has NCCL and its own GPU, else cuda-aware when the MPI library says it
  is CUDA-aware (MPIX_Query_cuda_support / MPIX_GPU_query_support), else staged.

What each mode then does (the backend's streams: `main`, and `edge` with the highest priority; the
exchange's stream is edge for overlap, else main):
- blocking (MPI): copy out every strip; wait for the stream; MPI_Sendrecv per direction; copy in;
  compute every owned point on main.
- nonblocking (MPI): copy out; wait for the stream; start persistent receives and sends; [finish]
  MPI_Waitall (receives and sends); copy in; compute everything on main.
- overlap (MPI): record event I on main (last step's interior done) and E on edge (last step's edge
  strips done); main waits E; on edge: copy out; wait for edge; start receives and sends; compute the
  interior on main (one launch); [finish] MPI_Waitall on the receives; copy in on edge; edge waits I;
  compute the edge strips on edge. MPI and the copies run while the interior kernel runs; the sends
  are completed at the next start, before their buffers are written again.
- nccl: copy out and the grouped send/receive are enqueued on the stream in start(), the copy in in
  finish(); nothing waits on the host, so blocking and nonblocking are the same schedule.
Receives are posted only after the wait for the copy-out stream, which also guarantees the previous
step's copy-in has left the receive buffers. Host time posting and copying is `comm`, MPI_Waitall is
`wait`, host time blocked on the GPU before MPI is `other` (and gpu_wait); GPU time of the halo copies
and NCCL transfers (CUDA events) is reported per rank as halo_gpu.
"""

from __future__ import annotations

import ctypes
import os
import socket
import time

from ..core.errors import InputError
from .halo import OPPOSITE, HostTransport, Side


def cuda_aware_mpi() -> bool | None:
    """What the MPI library in this process says about CUDA support; None when it cannot say."""
    for path in _loaded_libmpi():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "MPIX_Query_cuda_support"):
            return bool(lib.MPIX_Query_cuda_support())
        if hasattr(lib, "MPIX_GPU_query_support"):
            flag = ctypes.c_int(0)
            lib.MPIX_GPU_query_support(0, ctypes.byref(flag))  # 0 = MPIX_GPU_SUPPORT_CUDA
            return bool(flag.value)
    return None


def _loaded_libmpi() -> list[str]:
    try:
        maps = open("/proc/self/maps").read().splitlines()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in maps if os.path.basename(line.split()[-1]).startswith("libmpi.so")})


def nccl_version() -> int | None:
    try:
        from cupy.cuda import nccl

        return nccl.get_version()
    except Exception:  # noqa: BLE001 - no NCCL library, or CuPy without NCCL support
        return None


def choose_transport(requested: str, mpi, backend) -> tuple[str, dict]:
    """Collective: the transport every rank uses, and what was found (for the record)."""
    mine = {"nccl": nccl_version(), "cuda_aware": cuda_aware_mpi(), "gpu": (socket.gethostname(), backend.pci)}
    found = mpi.allgather(mine)
    shared = len({f["gpu"] for f in found}) < len(found)
    nccl_ok = all(f["nccl"] for f in found) and not shared
    aware = [f["cuda_aware"] for f in found]
    info = {"nccl_version": mine["nccl"], "cuda_aware_mpi": mine["cuda_aware"], "gpus_shared": shared}
    if requested == "auto":
        return ("nccl" if nccl_ok else "cuda-aware" if all(a is True for a in aware) else "staged"), info
    if requested == "nccl" and not nccl_ok:
        why = "ranks share a GPU (NCCL needs one GPU per rank)" if shared else "CuPy cannot load NCCL on every rank"
        raise InputError(f"parallel.transport: nccl is not usable here: {why}; use transport: staged or auto")
    if requested == "cuda-aware" and any(a is False for a in aware):
        raise InputError("parallel.transport: cuda-aware but this MPI library reports no CUDA support "
                         "(MPIX_Query_cuda_support); use transport: staged or auto, or a CUDA-aware MPI")
    return requested, info


_NCCL: dict = {}


def nccl_comm(mpi):
    """One NCCL communicator per process and MPI communicator (created collectively, kept for reuse)."""
    key = (id(mpi), mpi.Get_size())
    if key not in _NCCL:
        from cupy.cuda import nccl

        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # point-to-point only: no NVLink multicast buffers
        uid = mpi.bcast(nccl.get_unique_id() if mpi.Get_rank() == 0 else None, root=0)
        _NCCL[key] = nccl.NcclCommunicator(mpi.Get_size(), uid, mpi.Get_rank())
    return _NCCL[key]


class StagedTransport(HostTransport):
    """Device strips -> pinned host buffers (cudaMemcpy2DAsync on the exchange's stream) -> MPI -> back."""

    name = "staged"
    early_receives = False  # posted after the copy-out wait, which also means the last copy-in has finished
    progress_bands = 1  # the interior is one launch: the host is free while it runs
    copy_out, copy_in = "d2h", "h2d"

    def __init__(self, backend, mpi, overlap: bool, found: dict):
        super().__init__(backend, mpi, overlap)
        self.overlap, self.found = overlap, found
        self.stream = backend.edge if overlap else backend.main
        self.ev_interior = backend.cp.cuda.Event(disable_timing=True)
        self.ev_edge = backend.cp.cuda.Event(disable_timing=True)
        self.halo_gpu = 0.0
        self.gpu_wait = 0.0

    def _buffer(self, shape):
        return self.backend.halo_buffer(shape[0] * shape[1]).reshape(shape)

    def buffers(self, side: Side) -> Side:
        side.sbuf, side.rbuf = self._buffer(side.shape()), self._buffer(side.shape())
        return side

    def _charge_halo(self, section: str, seconds: float) -> None:
        self.halo_gpu += seconds

    def _copies(self, pairs, kind: str, timer) -> None:
        """Enqueue 2-D copies (dst, src) on the exchange's stream; their GPU time is charged to halo_gpu."""
        be, s = self.backend, self.stream
        e0 = be._record(s)
        for dst, src in pairs:
            be.copy2d(dst, src, kind, s)
        be._track(self._charge_halo, "halo", e0, be._record(s), timer, "halo")

    def open(self) -> None:
        be = self.backend
        if self.overlap:  # I: last step's interior done (main); E: its edge strips done (edge); main waits E
            self.ev_interior.record(be.main)
            self.ev_edge.record(be.edge)
            be.main.wait_event(self.ev_edge)
            be._edge_used = True

    def pack(self, u, sides, timer) -> None:
        self._copies([(side.sbuf, _view(u, side.send)) for side in sides], self.copy_out, timer)

    def ready(self, timer) -> None:
        t = timer.add("comm", time.perf_counter())
        self.stream.synchronize()
        t1 = time.perf_counter()
        self.gpu_wait += t1 - t
        timer.add("other", t, t1)

    def unpack(self, u, sides, timer) -> None:
        self._copies([(_view(u, side.ghost), side.rbuf) for side in sides], self.copy_in, timer)

    def posted(self) -> None:
        self.backend.active = self.backend.main  # the interior (overlap) or everything, on main

    def finished(self) -> None:
        be = self.backend
        if self.overlap:  # the edge strips on edge, after the copy-in (same stream) and the interior (I)
            be.edge.wait_event(self.ev_interior)
            be.active = be.edge

    def stats(self) -> dict:
        return {"transport": self.name, "halo_gpu": self.halo_gpu, "gpu_wait": self.gpu_wait, **self.found}

    def close(self) -> None:
        self.backend.synchronize()


class CudaAwareTransport(StagedTransport):
    """Device strips -> contiguous device buffers -> MPI on device memory (a CUDA-aware MPI) -> back."""

    name = "cuda-aware"
    copy_out = copy_in = "d2d"

    def _buffer(self, shape):
        return self.backend.cp.zeros(shape, dtype=self.backend.dtype)  # contiguous


class NcclTransport(CudaAwareTransport):
    """Device buffers -> grouped ncclSend/ncclRecv on the exchange's stream: no host copy, no host wait,
    so the modes differ only in their streams (blocking and nonblocking are then one schedule)."""

    name = "nccl"

    def __init__(self, backend, mpi, overlap: bool, found: dict):
        super().__init__(backend, mpi, overlap, found)
        self.nccl = nccl_comm(mpi)

    def ready(self, timer) -> None:
        pass  # stream-ordered: the send reads the buffers after the copies

    def requests(self, phase):
        return [], []

    def post(self, phase, timer) -> None:
        from cupy.cuda import nccl

        be, s = self.backend, self.stream
        dtype = nccl.NCCL_FLOAT32 if be.dtype.itemsize == 4 else nccl.NCCL_FLOAT64
        e0 = be._record(s)
        # NCCL matches the sends and receives between two ranks in order, with no tags: a periodic axis of
        # two ranks has the same peer on both sides, so the receives go in the order of the opposite
        # sides (the peer's send for its south strip fills this rank's north ghost)
        order = [side.name for side in phase]
        nccl.groupStart()
        for side in phase:
            self.nccl.send(side.sbuf.data.ptr, side.sbuf.size, dtype, side.rank, s.ptr)
        for side in sorted(phase, key=lambda x: order.index(OPPOSITE[x.name]) if OPPOSITE[x.name] in order else 9):
            self.nccl.recv(side.rbuf.data.ptr, side.rbuf.size, dtype, side.rank, s.ptr)
        nccl.groupEnd()
        be._track(self._charge_halo, "halo", e0, be._record(s), timer, "halo")

    def shift(self, phase, timer) -> None:
        self.post(phase, timer)


TRANSPORTS = {cls.name: cls for cls in (StagedTransport, CudaAwareTransport, NcclTransport)}


def gpu_transport(requested: str, mpi, backend, overlap: bool) -> StagedTransport:
    """Collective: the transport object every rank uses for `requested` (auto: see choose_transport)."""
    name, found = choose_transport(requested, mpi, backend)
    return TRANSPORTS[name](backend, mpi, overlap, found)


def _view(u, region):
    r0, r1, c0, c1 = region
    return u[r0:r1, c0:c1]
