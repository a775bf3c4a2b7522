"""Standard output that fails: a closed pipe ends quietly, a full one is exit 5 with one line.

`stencil run ... | head`: once head exits, every write to stdout fails with EPIPE; Unix tools then end
quietly, and so does stencil (with the command's own exit code: its results are in their files).
`stencil run ... > /dev/full` (or a full disk): exit 5 and one line on stderr, no traceback.

The CLI wraps sys.stdout for the length of a command (guarded()): a failed write or flush there raises
StdoutFailed, which no other code confuses with a failure to write one of the run's files.
"""

from __future__ import annotations

import errno
import os
import sys
from contextlib import contextmanager

from ..core.errors import EXIT_IO, OutputError

ADVICE = "redirect it to a file on a filesystem with room, or to /dev/null"


class StdoutFailed(OSError):
    """Writing standard output failed (errno EPIPE: the reader has gone)."""


class _Guarded:
    """sys.stdout, with its write and flush failures raised as StdoutFailed (everything else delegated)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise StdoutFailed(exc.errno, exc.strerror or str(exc)) from None

    def flush(self):
        try:
            return self._stream.flush()
        except OSError as exc:
            raise StdoutFailed(exc.errno, exc.strerror or str(exc)) from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextmanager
def guarded():
    original = sys.stdout
    sys.stdout = _Guarded(original) if original is not None else original
    try:
        yield
    finally:
        sys.stdout = original


def silence() -> None:
    """Point fd 1 at /dev/null, so that what is left in Python's buffer does not fail again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def exit_code(exc: StdoutFailed, code: int, report) -> int:
    """After stdout failed: `code` for a closed pipe (quiet), else EXIT_IO with one line through report()."""
    silence()
    if exc.errno == errno.EPIPE:
        return code
    report(f"error: cannot write to standard output ({exc.strerror}); {ADVICE}")
    return EXIT_IO


def flush_or_exit_code(code: int, report) -> int:
    """Flush stdout before exiting; its failure decides the code as exit_code() says."""
    try:
        sys.stdout.flush()
    except StdoutFailed as exc:
        return exit_code(exc, code, report)
    return code


def to_stdout(fn, *args) -> None:
    """Print with fn (rank 0's summary at the end of a run). A closed pipe: nothing more is printed and
    the command goes on (its exit code, a failed verification included, still counts); a full one:
    OutputError (exit 5)."""
    try:
        fn(*args)
        sys.stdout.flush()
    except StdoutFailed as exc:
        silence()
        if exc.errno != errno.EPIPE:
            raise OutputError(f"standard output: cannot write the summary ({exc.strerror}); the results are in "
                              f"the output directory; {ADVICE.replace('it', 'stdout', 1)}") from None
