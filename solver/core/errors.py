"""Exceptions that map to the documented exit codes (docs/exit_codes.md)."""

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_INPUT = 2
EXIT_VERIFY = 3
EXIT_NUMERICS = 4
EXIT_IO = 5
EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: stopped by a signal after writing a checkpoint; restart to continue


class StencilError(Exception):
    """Base class: an error with a one-line message and an exit code.

    `agreed`: every rank knows about this error (raised collectively, or agreed on after set-up), so
    the job can exit cleanly; otherwise the other ranks may be blocked in MPI and the job is aborted.
    `report`: this rank prints the message (one rank per error).
    """

    exit_code = EXIT_INTERNAL
    agreed = False
    report = True


class PeerFailed(StencilError):
    """Another rank reported an error during set-up; this rank exits with its code, silently."""

    report = False
    agreed = True

    def __init__(self, code: int):
        super().__init__(f"another rank failed with exit code {code}")
        self.exit_code = code


class InputError(StencilError):
    """Bad input: case file, CLI option, file on disk. Exit 2, nothing written."""

    exit_code = EXIT_INPUT


class VerificationError(StencilError):
    """The result does not match the exact solution or the reference backend. Exit 3."""

    exit_code = EXIT_VERIFY


class NumericalError(StencilError):
    """NaN or Inf appeared in the field. Exit 4."""

    exit_code = EXIT_NUMERICS


class OutputError(StencilError):
    """Writing output failed (disk full, unwritable directory). Exit 5."""

    exit_code = EXIT_IO


class Interrupted(StencilError):
    """SIGTERM/SIGINT: the run stopped after a checkpoint. Exit 75."""

    exit_code = EXIT_INTERRUPTED
