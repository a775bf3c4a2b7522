"""Halo exchange for fields on GPUs (hybrid MPI + GPU): the protocol of solver.parallel.halo.

    pending = ex.start(u); compute ex.before; ex.finish(pending); compute ex.after

Transports (parallel.transport; the record's per-rank `transport` says which one ran):
- staged: device strips -> pinned host buffers (cudaMemcpy2DAsync) -> MPI -> pinned -> device.
- cuda-aware: device strips -> contiguous device buffers -> MPI on device memory (needs a CUDA-aware MPI).
- nccl: device buffers -> grouped ncclSend/ncclRecv on a CUDA stream (no host copy, no host wait);
  the NCCL communicator is bootstrapped over MPI (unique id broadcast from rank 0).
- auto: nccl when every rank has NCCL and its own GPU, else cuda-aware when the MPI library says it
  is CUDA-aware (MPIX_Query_cuda_support / MPIX_GPU_query_support), else staged.

Schedules (the backend's streams: `main`, and `edge` with the highest priority):
- blocking (MPI): on main: copy out every strip; wait for main; MPI_Sendrecv per direction; copy in;
  compute every owned point on main.
- nonblocking (MPI): on main: copy out; wait for main; start persistent receives and sends;
  [finish] MPI_Waitall; copy in on main; compute everything on main.
- overlap (MPI): record event I on main (last step's interior done) and E on edge (last step's edge
  strips done); main waits E; on edge: copy out; wait for edge; start receives and sends; compute the
  interior on main; [finish] MPI_Waitall; copy in on edge; edge waits I; compute the edge strips on
  edge. MPI and the copies run while the interior kernel runs.
- nccl: the same, except that copy out, send/receive and copy in are all enqueued on the stream in
  start() and nothing waits on the host; blocking and nonblocking are then the same schedule.
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
from .comm import free_all, recv_init, send_init, sendrecv, start_all, wait_all
from .halo import HALO_TAGS, OPPOSITE, Exchange, Side, shifts


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


class GpuExchange(Exchange):
    """Halo exchange between GPU fields; `mode` is blocking, nonblocking or overlap (module docstring)."""

    def __init__(self, mode: str, block, mpi, backend, timer, transport: str = "auto"):
        self.mode, self.overlap = mode, mode == "overlap"
        self.transport, self.found = choose_transport(transport, mpi, backend)
        self.schedule = f"{mode} halo exchange over {self.transport} (see solver/parallel/gpu_exchange.py)"
        self.halo_gpu = 0.0
        self.gpu_wait = 0.0
        super().__init__(block, mpi, backend, timer)
        be = backend
        self.stream = be.edge if self.overlap else be.main
        self.ev_interior = be.cp.cuda.Event(disable_timing=True)
        self.ev_edge = be.cp.cuda.Event(disable_timing=True)
        self.nccl = nccl_comm(mpi) if self.transport == "nccl" else None
        self.pairs = shifts(self.sides)
        self.requests = []
        if self.transport != "nccl" and mode != "blocking":
            self.requests = [recv_init(mpi, s.rbuf, s.rank, HALO_TAGS[OPPOSITE[s.name]]) for s in self.sides]
            self.requests += [send_init(mpi, s.sbuf, s.rank, HALO_TAGS[s.name]) for s in self.sides]

    def _buffers(self, side: Side) -> Side:
        shape = side.shape()
        if self.transport == "staged":
            buf = lambda: self.backend.halo_buffer(shape[0] * shape[1]).reshape(shape)  # noqa: E731
        else:
            buf = lambda: self.backend.cp.zeros(shape, dtype=self.backend.dtype)  # noqa: E731 - contiguous
        side.sbuf, side.rbuf = buf(), buf()
        return side

    def stats(self) -> dict:
        return {"transport": self.transport, "halo_gpu": self.halo_gpu, "gpu_wait": self.gpu_wait, **self.found}

    def _charge_halo(self, section: str, seconds: float) -> None:
        self.halo_gpu += seconds

    # the two verbs -------------------------------------------------------------------------------
    def start(self, u):
        be, s, t = self.backend, self.stream, time.perf_counter()
        if self.overlap:
            self.ev_interior.record(be.main)
            self.ev_edge.record(be.edge)
            be.main.wait_event(self.ev_edge)
            be._edge_used = True
        e0 = be._record(s)
        kind = "d2h" if self.transport == "staged" else "d2d"
        for side in self.sides:
            be.copy2d(side.sbuf, _view(u, side.send), kind, s)
        if self.nccl is not None:
            self._nccl_sendrecv(s)
            self._copy_in(u, s)
            be._track(self._charge_halo, "halo", e0, be._record(s), self.timer, "halo")
        else:
            be._track(self._charge_halo, "halo", e0, be._record(s), self.timer, "halo")
            t = self.timer.add("comm", t)
            s.synchronize()
            t1 = time.perf_counter()
            self.gpu_wait += t1 - t
            t = self.timer.add("other", t, t1)
            self._mpi_start(u, s)
        be.active = be.main
        self.timer.add("comm", t)
        return u

    def finish(self, u) -> None:
        be, s = self.backend, self.stream
        if self.requests:
            t = time.perf_counter()
            wait_all(self.requests)
            t = self.timer.add("wait", t)
            e0 = be._record(s)
            self._copy_in(u, s)
            be._track(self._charge_halo, "halo", e0, be._record(s), self.timer, "halo")
            self.timer.add("comm", t)
        if self.overlap:
            be.edge.wait_event(self.ev_interior)
            be.active = be.edge

    # pieces ----------------------------------------------------------------------------------------
    def _copy_in(self, u, stream) -> None:
        kind = "h2d" if self.transport == "staged" else "d2d"
        for side in self.sides:
            self.backend.copy2d(_view(u, side.ghost), side.rbuf, kind, stream)

    def _mpi_start(self, u, stream) -> None:
        if self.requests:
            n = len(self.sides)
            start_all(self.requests[:n])
            start_all(self.requests[n:])
            return
        for to, frm, direction in self.pairs:  # blocking: one shift per direction (every rank takes part)
            sendrecv(self.mpi, to.sbuf if to else None, to.rank if to else None,
                     frm.rbuf if frm else None, frm.rank if frm else None, HALO_TAGS[direction])
        e0 = self.backend._record(stream)
        self._copy_in(u, stream)
        self.backend._track(self._charge_halo, "halo", e0, self.backend._record(stream), self.timer, "halo")

    def _nccl_sendrecv(self, stream) -> None:
        from cupy.cuda import nccl

        dtype = nccl.NCCL_FLOAT32 if self.backend.dtype.itemsize == 4 else nccl.NCCL_FLOAT64
        nccl.groupStart()
        for side in self.sides:
            n = side.sbuf.size
            self.nccl.send(side.sbuf.data.ptr, n, dtype, side.rank, stream.ptr)
            self.nccl.recv(side.rbuf.data.ptr, n, dtype, side.rank, stream.ptr)
        nccl.groupEnd()

    def close(self) -> None:
        self.backend.synchronize()
        free_all(self.requests)
        self.requests = []


def _view(u, region):
    r0, r1, c0, c1 = region
    return u[r0:r1, c0:c1]
