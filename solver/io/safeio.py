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

import errno
import os
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import OutputError


class WriteFailed(OSError):
    """Writing `path` failed; `reason` says why (strerror of the underlying OSError)."""

    def __init__(self, path: Path, exc: BaseException):
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0] or type(exc).__name__
        super().__init__(getattr(exc, "errno", None), reason)
        self.path, self.reason = Path(path), reason


@contextmanager
def writing(path: Path):
    """Turn an error raised while writing `path` into WriteFailed(path) (which names the file).

    h5py reports most failed writes as OSError but a failed flush as RuntimeError; inside this block
    only file I/O happens, so both mean the write failed.
    """
    try:
        yield
    except WriteFailed:
        raise
    except (OSError, RuntimeError) as exc:
        raise WriteFailed(path, exc) from exc


def reserve(path: Path, end: int) -> None:
    """Make sure the blocks of `path` up to byte `end` exist on disk (posix_fallocate), so that writes
    below `end` cannot fail for want of space. A full disk (ENOSPC) or a file-size limit (EFBIG) shows
    here, before anything is written, and the file keeps its size. Filesystems that cannot reserve
    (EOPNOTSUPP, EINVAL) are left as they are."""
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if end > size:
            try:
                os.posix_fallocate(fd, size, end - size)
            except OSError as exc:
                if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    return
                os.ftruncate(fd, size)  # undo a partial reservation (shrinking needs no space)
                raise
    finally:
        os.close(fd)


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


def collective(comm, fn, context: str = ""):
    """Run fn on every rank; if it raised OSError on any rank, raise the first one's OutputError everywhere.

    fn must complete its own communication even when its writing fails (see fields.for_each_block).
    The message is describe(error) + context (what was being written, the fix, the last checkpoint).
    """
    message, result = None, None
    try:
        result = fn()
    except OSError as exc:
        message = describe(exc)
    messages = comm.allgather(message)
    failed = [r for r, m in enumerate(messages) if m]
    if not failed:
        return result
    err = OutputError(f"{messages[failed[0]]}{context}")
    err.agreed, err.report = True, comm.rank == failed[0]
    raise err


def describe(exc: OSError) -> str:
    path = getattr(exc, "path", None) or exc.filename
    reason = getattr(exc, "reason", None) or exc.strerror or str(exc)
    return f"output.dir: cannot write {path} ({reason})" if path else f"output.dir: writing output failed ({reason})"
