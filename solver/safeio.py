"""Files that are never half-written in place, and output failures that every rank agrees on.

Write, then rename: a file written whole (checkpoint.h5, VTK pieces, .pvti, .pvd, .xdmf, timings.h5)
is written under a hidden temporary name in its own directory and renamed over the old one with
os.replace (atomic on POSIX), so a crash or a full disk leaves the previous version intact and no
temporary file behind. `durable=True` (checkpoints) also fsyncs the file and its directory first, so
the rename survives a power loss.

Collective failures: an output step runs on every rank; a rank whose writing fails keeps taking part
in the step's communication, then `collective` tells every rank, and every rank raises the same
OutputError (exit 5), so none is left waiting in MPI.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError


class WriteFailed(OSError):
    """Writing `path` failed; `reason` says why (strerror of the underlying OSError)."""

    def __init__(self, path: Path, exc: BaseException):
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0] or type(exc).__name__
        super().__init__(getattr(exc, "errno", None), reason)
        self.path, self.reason = Path(path), reason


@contextmanager
def writing(path: Path):
    """Turn an OSError raised while writing `path` into WriteFailed(path) (which names the file)."""
    try:
        yield
    except WriteFailed:
        raise
    except OSError as exc:
        raise WriteFailed(path, exc) from exc


def temporary_name(path: Path) -> Path:
    """A hidden name beside `path` with the same suffix (VTK writers choose the format by suffix)."""
    return path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")


@contextmanager
def replaced(path: Path, durable: bool = False):
    """Yield a temporary path beside `path`; when the block ends without error, rename it to `path`.

    On any error the temporary file is removed and `path` is left as it was.
    """
    path = Path(path)
    tmp = temporary_name(path)
    with writing(path):
        try:
            yield tmp
            if durable:
                _fsync(tmp)
            os.replace(tmp, path)
            if durable:
                _fsync(path.parent)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def write_text(path: Path, text: str) -> None:
    with replaced(path) as tmp:
        tmp.write_text(text)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def collective(comm, fn, advice: str = ""):
    """Run fn on every rank; if it raised OSError on any rank, raise the first one's OutputError everywhere.

    fn must complete its own communication even when its writing fails (see fields.for_each_block).
    `advice` is appended to the message (e.g. where the last good checkpoint is).
    """
    message, result = None, None
    try:
        result = fn()
    except OSError as exc:
        message = describe(exc)
    messages = [message] if comm.mpi is None else comm.mpi.allgather(message)
    failed = [r for r, m in enumerate(messages) if m]
    if not failed:
        return result
    err = OutputError(f"{messages[failed[0]]}{advice}")
    err.agreed, err.report = True, comm.rank == failed[0]
    raise err


def describe(exc: OSError) -> str:
    path = getattr(exc, "path", None) or exc.filename
    reason = getattr(exc, "reason", None) or exc.strerror or str(exc)
    where = f"cannot write {path}" if path else "writing output failed"
    return f"output.dir: {where} ({reason}); free disk space or choose a writable --output"
