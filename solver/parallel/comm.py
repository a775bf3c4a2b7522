"""The communicator, passed in explicitly. One process needs no MPI at all: `Comm()` then stands in.

mpi4py is imported only when the process was started by an MPI launcher (or MPI is asked for), so
`import solver` and a plain `stencil run` never initialise MPI.
"""

from __future__ import annotations

import os
import sys

# Variables that mpirun/mpiexec/srun of the common MPI libraries set in every process they start.
_LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK", "MPI_LOCALNRANKS",
                  "MV2_COMM_WORLD_SIZE", "HYDRA_CONTROL_FD")


# Every message tag of the project, in one table. Halo messages carry the direction they travel (so a
# rank may have the same neighbour on two sides: two ranks in a 1 x 2 grid, or itself when periodic).
TAGS = {"halo": {"north": 0, "south": 1, "east": 2, "west": 3},
        "gather_block": 7001,  # io.fields: a block's rows on their way to rank 0
        "vtk_column": 7101, "vtk_row": 7102,  # io.vtk: the shared points of neighbouring pieces
        "verify": {"north": 7201, "south": 7202, "compare": 7203}}  # results.verify: the reference's own messages

ABORT_GRACE = 0.5  # seconds; without it mpirun (Hydra) sometimes kills the ranks before their stderr is out


def _affinity() -> set[int]:
    from ..core.machine import cpu_cores

    return cpu_cores()


def threads_per_rank(node_cores: list[set[int]], me: int) -> int:
    """Default threads for rank `me` of a node whose ranks may run on `node_cores`: its own cores when
    the launcher gave each rank cores of its own (srun/mpirun binding), else an equal share of the
    cores they all may use, so ranks x threads never exceed the cores."""
    disjoint = sum(len(c) for c in node_cores) == len(set().union(*node_cores))
    if disjoint:
        return max(1, len(node_cores[me]))
    return max(1, len(set().union(*node_cores)) // len(node_cores))


THREAD_VARS = ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")  # in this order, before the cores


def default_threads(node_cores: list[set[int]], me: int, environ=os.environ) -> int:
    """Threads per rank when the case and the command line ask for none: OMP_NUM_THREADS, else
    NUMBA_NUM_THREADS, else threads_per_rank (the cores). NUMBA_NUM_THREADS also sizes numba's pool, so
    a larger OMP_NUM_THREADS is capped at it."""
    asked = [_thread_count(var, environ) for var in THREAD_VARS]
    if asked[0] is not None:
        return min(asked[0], asked[1] or asked[0])
    return asked[1] if asked[1] is not None else threads_per_rank(node_cores, me)


def _thread_count(var: str, environ) -> int | None:
    text = environ.get(var, "").strip().split(",")[0].strip()  # OMP_NUM_THREADS may list nested levels: "4,2"
    if not text:
        return None
    from ..core.errors import InputError
    from ..core.limits import MAX_THREADS
    from ..core.machine import cpu_count

    if not text.isdigit() or int(text) < 1:
        raise InputError(f"{var}: {environ[var]!r} is not a positive whole number of threads; set e.g. {var}=4 "
                         "or unset it")
    if int(text) > MAX_THREADS:
        raise InputError(f"{var}: {int(text)} threads per rank is more than the {MAX_THREADS} stencil accepts; set "
                         f"it to at most the {cpu_count()} cores this process may use, or unset it")
    return int(text)


def launched_by_mpi() -> bool:
    return any(v in os.environ for v in _LAUNCHER_VARS)


def launched_tasks() -> int:
    """How many processes the innermost launcher started: its MPI size variable (mpirun, or srun's PMI-2
    plugin), else srun's task count for the step (set with every --mpi plugin, none included); 1 if none."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


def _check_one_job(comm: Comm) -> Comm:
    """A launcher that started several processes which each see one rank (srun with an --mpi plugin
    this MPI does not speak, or none) would run the same case several times into one directory."""
    n = launched_tasks()
    if comm.size == 1 and n > 1:
        from ..core.errors import InputError

        raise InputError(f"the launcher started {n} processes but MPI sees 1 rank in each: they do not form "
                         "one MPI job; with srun pass --mpi=pmi2 (MPICH, Intel MPI) or --mpi=pmix (Open MPI) "
                         "(docs/clusters.md), or --no-mpi for separate one-process runs")
    return comm


class Comm:
    """A thin layer over an mpi4py communicator (or none, for one process)."""

    def __init__(self, mpi=None):
        self.mpi = mpi
        self.rank = mpi.Get_rank() if mpi is not None else 0
        self.size = mpi.Get_size() if mpi is not None else 1
        self._node = None

    @classmethod
    def world(cls, use_mpi: bool | None = None) -> Comm:
        if use_mpi is None:
            return _check_one_job(cls.world(launched_by_mpi()))
        if not use_mpi:
            return cls()
        try:
            from mpi4py import MPI
        except ImportError as exc:
            from ..core.errors import InputError

            raise InputError(f"started under an MPI launcher but mpi4py does not import ({exc}); "
                             "install it with `pip install -e .[mpi]`") from None
        return cls(MPI.COMM_WORLD)

    def _op(self, name: str):
        from mpi4py import MPI

        return getattr(MPI, name)

    def allmax(self, x: float) -> float:
        return x if self.mpi is None else self.mpi.allreduce(x, op=self._op("MAX"))

    def allsum(self, x):
        return x if self.mpi is None else self.mpi.allreduce(x, op=self._op("SUM"))

    def anytrue(self, flag: bool) -> bool:
        return bool(flag) if self.mpi is None else bool(self.mpi.allreduce(bool(flag), op=self._op("LOR")))

    def start_anytrue(self, flag: bool) -> Vote:
        """anytrue without waiting: MPI_Iallreduce (logical or) of the flag; Vote.result() waits for it."""
        return Vote(self.mpi, flag)

    def gather(self, obj, root: int = 0) -> list | None:
        return [obj] if self.mpi is None else self.mpi.gather(obj, root=root)

    def bcast(self, obj, root: int = 0):
        return obj if self.mpi is None else self.mpi.bcast(obj, root=root)

    def allgather(self, obj) -> list:
        return [obj] if self.mpi is None else self.mpi.allgather(obj)

    def send_block(self, buf, dest: int) -> None:
        """A block of a field to `dest` (rank 0 gathering fields for output), tagged as such."""
        self.mpi.Send(buf, dest=dest, tag=TAGS["gather_block"])

    def recv_block(self, buf, source: int) -> None:
        self.mpi.Recv(buf, source=source, tag=TAGS["gather_block"])

    def barrier(self) -> None:
        if self.mpi is not None:
            self.mpi.Barrier()

    def abort(self, code: int) -> None:
        """End every rank of the job (after this rank reported its error)."""
        sys.stdout.flush()
        sys.stderr.flush()
        if self.mpi is not None and self.size > 1:
            import time

            time.sleep(ABORT_GRACE)  # let the launcher forward the message before MPI_Abort tears the job down
            self.mpi.Abort(code)
        raise SystemExit(code)

    def node(self) -> tuple[int, int]:
        """(rank on this node, ranks on this node), from a shared-memory split."""
        if self._node is None:
            self._split_node()
        return self._node

    def node_cores(self) -> list[set[int]]:
        """The CPU affinity of every rank on this node (collective on first use)."""
        if self._node is None:
            self._split_node()
        return self._node_cores

    def _split_node(self) -> None:
        mine = _affinity()
        if self.mpi is None:
            self._node, self._node_cores = (0, 1), [mine]
            return
        from mpi4py import MPI

        local = self.mpi.Split_type(MPI.COMM_TYPE_SHARED)
        self._node = (local.Get_rank(), local.Get_size())
        self._node_cores = local.allgather(mine)
        local.Free()

    def library(self) -> str | None:
        if self.mpi is None:
            return None
        from mpi4py import MPI

        return MPI.Get_library_version().splitlines()[0].strip()


class Vote:
    """A logical-or over the ranks in flight (one process: the flag itself). Started at one poll and read
    at the next, so no rank waits at a poll for the slowest one to arrive (solver.core.loop)."""

    def __init__(self, mpi, flag: bool):
        import numpy as np

        self.flag = np.array([bool(flag)])
        self.out = self.flag.copy()
        self.request = None if mpi is None else mpi.Iallreduce(self.flag, self.out, op=_mpi().LOR)

    def result(self) -> bool:
        if self.request is not None:
            self.request.Wait()
            self.request = None
        return bool(self.out[0])


# point-to-point: the only MPI calls of the halo exchange ---------------------------------------------
def _mpi():
    from mpi4py import MPI

    return MPI


def sendrecv(mpi, sbuf, dest: int | None, rbuf, source: int | None, tag: int) -> None:
    """MPI_Sendrecv; None for dest/source is MPI_PROC_NULL (a physical edge: nothing sent or received)."""
    null = _mpi().PROC_NULL
    mpi.Sendrecv(sbuf if dest is not None else None, dest=null if dest is None else dest, sendtag=tag,
                 recvbuf=rbuf if source is not None else None, source=null if source is None else source, recvtag=tag)


def recv_init(mpi, buf, source: int, tag: int):
    return mpi.Recv_init(buf, source=source, tag=tag)


def send_init(mpi, buf, dest: int, tag: int):
    return mpi.Send_init(buf, dest=dest, tag=tag)


def start_all(requests) -> None:
    if requests:
        _mpi().Prequest.Startall(requests)


def wait_all(requests) -> None:
    if requests:
        _mpi().Request.Waitall(requests)


def test_all(requests) -> bool:
    """MPI_Testall: lets MPI move messages; True when every request is complete."""
    return bool(_mpi().Request.Testall(requests)) if requests else True


def free_all(requests) -> None:
    for r in requests:
        r.Free()


def agree(comm: Comm, fn):
    """Run fn on every rank; if it fails anywhere, every rank raises the first failing rank's error: the same
    class and message (so one `except InputError` serves every rank), reported by that rank alone.

    For set-up steps, where a rank that fails alone (a file missing on one node) would otherwise
    leave the others waiting in the next collective.
    """
    from ..core.errors import InputError, StencilError

    err, result = None, None
    try:
        result = fn()
    except StencilError as exc:
        err = exc
    except (OSError, MemoryError) as exc:  # name the file where there is one (errors must say which)
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        err = InputError(f"{where}{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}")
    mine = (type(err).__name__, err.exit_code, str(err)) if err else None
    every = [mine] if comm.mpi is None else comm.mpi.allgather(mine)
    first = next((r for r, e in enumerate(every) if e), None)
    if first is None:
        return result
    if err is None:
        err = _peer_error(*every[first])
    err.agreed, err.report = True, comm.rank == first
    raise err


def _peer_error(name: str, code: int, message: str):
    """Another rank's set-up error, as the same class with the same message (PeerFailed for a class of its own)."""
    from ..core import errors

    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.StencilError) and cls is not errors.PeerFailed:
        try:
            return cls(message)
        except TypeError:  # a class whose constructor takes something else
            pass
    return errors.PeerFailed(code)
