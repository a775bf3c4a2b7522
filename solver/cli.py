"""The `stencil` command line: parse and validate, then call one library function.

Exit codes: 0 ok, 1 internal error, 2 bad input, 3 verification failed, 4 NaN/Inf in the field,
5 output failed (disk full, unwritable), 75 stopped by SIGTERM/SIGINT after a checkpoint.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperGroup

from .errors import EXIT_INPUT, EXIT_INTERNAL, EXIT_VERIFY, StencilError


def _is(exc: BaseException, name: str) -> bool:
    """Match click's exception classes by name: typer vendors click in some versions, not in others."""
    return any(c.__name__ == name for c in type(exc).__mro__)


def echo_err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Group(TyperGroup):
    """Usage errors as one line with exit 2 (instead of a usage panel), StencilErrors as their exit code."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                              standalone_mode=False, **extra)
        except StencilError as exc:
            if exc.report:
                echo_err(f"error: {exc}")
            sys.exit(exc.exit_code)
        except Exception as exc:
            ctx = getattr(exc, "ctx", None)
            if _is(exc, "NoArgsIsHelpError") and ctx is not None:
                print(ctx.get_help())
                sys.exit(0)
            if _is(exc, "UsageError"):
                cmd = ctx.command_path if ctx else "stencil"
                echo_err(f"{cmd}: {exc.format_message()}; see `{cmd} --help`")
                sys.exit(EXIT_INPUT)
            if _is(exc, "Abort"):
                echo_err("aborted")
                sys.exit(130)
            raise
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(cls=Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="A verifiable 2D heat / Jacobi solver: numpy, numba, CuPy, MPI and MPI+GPU.")


def main() -> None:
    app()


# helpers ---------------------------------------------------------------------------------------

def _overrides(**kw) -> dict:
    return {f"--{k}": v for k, v in kw.items() if v is not None}


def fail(exc: BaseException, comm) -> None:
    """Report once and end the job: cleanly when every rank knows, by MPI_Abort when only this one does."""
    code = exc.exit_code if isinstance(exc, StencilError) else EXIT_INTERNAL
    agreed = isinstance(exc, StencilError) and exc.agreed
    prefix = f"[rank {comm.rank}] " if comm.size > 1 and not agreed else ""
    if not isinstance(exc, StencilError):
        traceback.print_exc()
        echo_err(f"{prefix}internal error: {type(exc).__name__}: {exc}")
    elif exc.report:
        echo_err(f"{prefix}error: {exc}")
    if comm.size > 1 and not agreed:
        comm.abort(code)
    sys.exit(code)


# commands --------------------------------------------------------------------------------------

@app.command()
def run(
    case: Path = typer.Argument(..., help="case file (YAML)"),
    backend: Optional[str] = typer.Option(None, help="numpy | numba | cupy"),
    steps: Optional[int] = typer.Option(None, help="override run.steps"),
    dtype: Optional[str] = typer.Option(None, help="float32 | float64"),
    threads: Optional[int] = typer.Option(None, help="numba threads per rank"),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="override output.dir"),
    halo: Optional[str] = typer.Option(None, help="blocking | nonblocking | overlap"),
    decomposition: Optional[str] = typer.Option(None, help="rows | cart"),
    kernel: Optional[str] = typer.Option(None, help="cupy kernel variant"),
    verify: Optional[bool] = typer.Option(None, "--verify/--no-verify", help="check the result; exit 3 on failure"),
    overwrite: bool = typer.Option(False, help="replace results already in the output directory"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    restart: Optional[Path] = typer.Option(None, help="continue from this checkpoint.h5"),
    mpi: Optional[bool] = typer.Option(None, "--mpi/--no-mpi", help="default: use MPI when started by mpirun/srun"),
) -> None:
    """Run a case: fields.h5, record.json/.md, timings.csv in the output directory."""
    from .comm import Comm, agree
    from .config import load_case
    from .run import Options, Run

    comm = Comm.world(mpi)
    try:
        over = _overrides(backend=backend, steps=steps, dtype=dtype, threads=threads, output=output, halo=halo,
                          decomposition=decomposition, kernel=kernel)
        cfg = agree(comm, lambda: load_case(case, over))
        opts = Options(overwrite=overwrite, quiet=quiet, verify=verify, restart=str(restart) if restart else None)
        record = Run(cfg, comm, opts).execute()
    except Exception as exc:  # noqa: BLE001 - every failure must end every rank
        fail(exc, comm)
    if comm.rank == 0:
        from .summary import print_summary

        print_summary(record)
    c = record["correctness"]
    if c.get("passed") is False:
        if comm.rank == 0:
            echo_err(f"error: verification failed: relative error {c['relative_error']:.3e} > tolerance "
                       f"{c['tolerance']:.1e} against the {c['reference']}")
        sys.exit(EXIT_VERIFY)


@app.command()
def validate(
    case: Path = typer.Argument(..., help="case file (YAML)"),
    ranks: int = typer.Option(1, min=1, help="plan for this many MPI ranks"),
    backend: Optional[str] = typer.Option(None), steps: Optional[int] = typer.Option(None),
    dtype: Optional[str] = typer.Option(None), threads: Optional[int] = typer.Option(None),
    output: Optional[str] = typer.Option(None, "--output", "-o"),
) -> None:
    """Print the resolved case (dt, weights, stability, memory, bytes per step) or the errors."""
    from .config import load_case
    from .summary import print_plan

    cfg = load_case(case, _overrides(backend=backend, steps=steps, dtype=dtype, threads=threads, output=output))
    print_plan(cfg, ranks)


@app.command()
def schema() -> None:
    """Print the case file's JSON Schema (for editor completion and checking)."""
    from .config import schema as case_schema

    typer.echo(json.dumps(case_schema(), indent=2))


@app.command()
def info() -> None:
    """Print the environment: CPU, cores, memory, MPI library, GPUs, library versions."""
    from .summary import print_info

    print_info()


@app.command()
def backends() -> None:
    """List every backend, whether it is available here, and why not."""
    from .summary import print_backends

    print_backends()


@app.command()
def tune(
    case: Path = typer.Argument(..., help="case file (YAML): its grid, dtype and weights are timed"),
    kernel: Optional[list[str]] = typer.Option(None, "--kernel", "-k", help="variants to sweep (default: all)"),
    blocks: Optional[str] = typer.Option(None, help="block shapes, e.g. 32x8,128x16 (default: a set per variant)"),
    dtype: Optional[str] = typer.Option(None, help="override numerics.dtype"),
    repeats: int = typer.Option(5, min=1, help="timed repeats; the median is reported"),
    steps: int = typer.Option(20, min=2, help="steps per repeat"),
    save: bool = typer.Option(True, "--save/--no-save", help="store the fastest choices for runs with block: null"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
) -> None:
    """Time every CuPy kernel variant and block shape on the case's grid (one GPU); keep the fastest."""
    from .config import load_case
    from .errors import InputError
    from .gpu_kernels import VARIANTS
    from .tune import parse_blocks, print_tune
    from .tune import tune as run_tune

    bad = [k for k in kernel or [] if k not in VARIANTS]
    if bad:
        raise InputError(f"--kernel: unknown kernel {bad[0]!r}; use one of {', '.join(VARIANTS)}")
    cfg = load_case(case, _overrides(backend="cupy", dtype=dtype))
    res = run_tune(cfg, kernel or None, parse_blocks(blocks), repeats, steps, save)
    print_tune(res)
    if json_out:
        json_out.write_text(json.dumps(res, indent=1))


@app.command()
def bench(
    size: int = typer.Option(4096, help="interior points per side"),
    dtype: str = typer.Option("float64", help="float32 | float64"),
    threads: Optional[int] = typer.Option(None, help="numba threads (default: all cores)"),
    backend: list[str] = typer.Option(["numpy", "numba"], "--backend", "-b", help="backends to measure"),
    repeats: int = typer.Option(5, min=1, help="timed repeats; the median is reported"),
    steps: int = typer.Option(10, min=1, help="steps per repeat"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
) -> None:
    """Stencil benchmark: copy bandwidth, then each backend's MLUP/s and fraction of that ceiling."""
    from .bench import print_bench, stencil_bench

    from .errors import InputError

    if dtype not in ("float32", "float64"):
        raise InputError(f"--dtype: {dtype!r} is not supported; use float32 or float64")
    results = stencil_bench(size, dtype, threads, backend, repeats, steps)
    print_bench(results)
    if json_out:
        json_out.write_text(json.dumps(results, indent=1))
