"""The `stencil` command line: parse and validate, then call one library function.

Exit codes: 0 ok, 1 internal error, 2 bad input, 3 verification failed, 4 NaN/Inf in the field,
5 output failed (disk full, quota, read-only, a full stdout), 75 stopped by SIGTERM/SIGINT after a checkpoint.
A closed stdout (`| head`) ends quietly with the command's own code (solver.cli.stdout).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperGroup

from ..core.errors import EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, InputError, StencilError, VerificationError
from ..core.limits import MAX_RANKS, MAX_THREADS, MAX_TIME_TILE
from . import stdout


def _is(exc: BaseException, name: str) -> bool:
    """Match click's exception classes by name: typer vendors click in some versions, not in others."""
    return any(c.__name__ == name for c in type(exc).__mro__)


def echo_err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Group(TyperGroup):
    """Usage errors as one line with exit 2 (instead of a usage panel), StencilErrors as their exit code."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        with stdout.guarded():  # a full or closed stdout: solver.cli.stdout
            self._main(args, prog_name, complete_var, **extra)

    def _main(self, args, prog_name, complete_var, **extra):
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                              standalone_mode=False, **extra)
        except StencilError as exc:
            if exc.report:
                echo_err(f"error: {exc}")
            _exit(exc.exit_code)
        except stdout.StdoutFailed as exc:
            _exit(stdout.exit_code(exc, 0, echo_err))
        except Exception as exc:
            ctx = getattr(exc, "ctx", None)
            if _is(exc, "NoArgsIsHelpError") and ctx is not None:
                print(ctx.get_help())
                sys.exit(0)
            if _is(exc, "UsageError"):
                cmd = ctx.command_path if ctx else "stencil"
                echo_err(f"{cmd}: {exc.format_message().rstrip('.')}; see `{cmd} --help`")
                sys.exit(EXIT_INPUT)
            if _is(exc, "Abort"):
                echo_err("aborted")
                sys.exit(130)
            raise
        _exit(rv if isinstance(rv, int) else EXIT_OK)


def _exit(code: int) -> None:
    sys.exit(stdout.flush_or_exit_code(code, echo_err))


# Plain (click) help: it wraps long option names at any terminal width, where the rich panels cut them.
HELP = {"rich_markup_mode": None, "context_settings": {"max_content_width": 120}}
app = typer.Typer(cls=Group, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="A verifiable 2D heat / Jacobi solver: numpy, numba, CuPy, MPI and MPI+GPU.", **HELP)


def main() -> None:
    try:
        app(prog_name="stencil")
    finally:
        if "solver.io.outputs" in sys.modules:  # `stencil run` installed the signal policy: its exit code stands
            sys.modules["solver.io.outputs"].StopSignals.settle()


def _version(value: bool) -> None:
    if value:
        from .. import __version__
        from ..results.environment import git_commit

        commit = git_commit()
        print(f"stencil {__version__}" + (f" (git {commit})" if commit else ""))
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """A verifiable 2D heat / Jacobi solver: numpy, numba, CuPy, MPI and MPI+GPU."""


# helpers ---------------------------------------------------------------------------------------

def _check_dtype(dtype: str) -> None:
    if dtype not in ("float32", "float64"):
        raise InputError(f"--dtype: {dtype!r} is not supported; use float32 or float64")


def _check_fields_fit(option: str, size: int, dtype: str) -> None:
    """Two (size + 2)^2 fields of `dtype` in the memory available here, or an InputError naming the option."""
    import numpy as np

    from ..core.machine import memory_bytes

    need = 2 * (size + 2) ** 2 * np.dtype(dtype).itemsize
    _, available = memory_bytes()
    if available and need > available:
        raise InputError(f"{option}: {size}^2 points of {dtype} need {need / 2**30:.1f} GiB for two fields but "
                         f"{available / 2**30:.1f} GiB are available here; use a smaller {option}")


MAX_REPEATS = 1000  # timed repeats of a benchmark: a median of more says nothing new
MAX_BATCH = 100_000  # steps per timed batch of a benchmark (a batch is a measurement, not a run)
MAX_LOCK_ELEMENTS = 1 << 22  # bench reduction's lock-per-add variant: Python threads taking a lock per element


def _check_elements_fit(option: str, n: int, dtype: str, extra: int = 8) -> None:
    """n elements of `dtype` (and `extra` bytes each for their making) in the memory available here."""
    import numpy as np

    from ..core.machine import memory_bytes

    need = n * (np.dtype(dtype).itemsize + extra)
    _, available = memory_bytes()
    if available and need > available:
        raise InputError(f"{option}: {n} elements of {dtype} need {need / 2**30:.1f} GiB but {available / 2**30:.1f} GiB "
                         f"are available here; use a smaller {option}")


def _shapes_fit(text: str, option: str, dtype: str, ranks: int) -> list[tuple[int, int]]:
    """NYxNX,... block shapes: whole numbers >= 3 each, whose two fields per rank fit the memory here."""
    from ..bench.model_probe import shapes

    try:
        out = shapes(text)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a list of NYxNX shapes; e.g. 256x4096,1024x1024") from None
    if not out or any(len(s) != 2 or min(s) < 3 for s in out):
        raise InputError(f"{option}: {text!r}: give shapes NYxNX of at least 3 x 3 each; e.g. 256x4096,1024x1024")
    for ny, nx in out:
        _check_elements_fit(option, 2 * (ny + 2) * (nx + 2) * ranks, dtype, extra=0)
    return out


def _check_backends(names: list[str]) -> list[str]:
    """--backend names: each a known backend, or an InputError listing them."""
    from ..backends import registry

    known = registry()
    bad = [n for n in names if n not in known]
    if bad:
        raise InputError(f"--backend: unknown backend {bad[0]!r}; use one of {', '.join(known)}")
    return names


def _overrides(sets: Optional[list[str]] = None, **kw) -> dict:
    """The options that set case fields, then --set PATH=VALUE (which wins), as load_case takes them."""
    from ..case import parse_sets

    return {**{f"--{k.replace('_', '-')}": v for k, v in kw.items() if v is not None}, **parse_sets(sets)}


_SET = typer.Option(None, "--set", metavar="PATH=VALUE", help=(
    "set any case field by its dotted path (repeatable; lists by index): --set physics.alpha=0.5 "
    "--set physics.source.0.amplitude=5 --set grid.nx=1024"))


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
    case: Optional[Path] = typer.Argument(None, help="case file (YAML); leave it out with --restart DIR to continue with the case saved in the checkpoint"),
    backend: Optional[str] = typer.Option(None, help="numpy | numba | cupy"),
    steps: Optional[int] = typer.Option(None, help="override run.steps (with --restart: may extend the run)"),
    dtype: Optional[str] = typer.Option(None, help="float32 | float64"),
    threads: Optional[int] = typer.Option(None, help="numba threads per rank"),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="override output.dir"),
    halo: Optional[str] = typer.Option(None, help="blocking | nonblocking | overlap"),
    decomposition: Optional[str] = typer.Option(None, help="rows | cart"),
    balance: Optional[str] = typer.Option(None, help="none | dynamic (rows moved by measured rank speed)"),
    kernel: Optional[str] = typer.Option(None, help="cupy kernel variant"),
    time_tile: Optional[int] = typer.Option(None, "--time-tile", help="numba steps per sweep and halo depth (1 = off)"),
    solver: Optional[str] = typer.Option(None, help="laplace: jacobi | multigrid"),
    scheme: Optional[str] = typer.Option(None, help="heat: explicit | backward-euler | crank-nicolson (rings on "
                                                    "sharp features past 5x the explicit limit)"),
    tolerance: Optional[float] = typer.Option(None, help="laplace: stop at this relative residual"),
    verify: Optional[bool] = typer.Option(None, "--verify/--no-verify", help="check the result; exit 3 on failure"),
    overwrite: bool = typer.Option(False, help="replace results already in the output directory"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or progress lines"),
    restart: Optional[Path] = typer.Option(None, help="continue from this checkpoint.h5 or run directory; without "
                                                      "CASE, the run's own case (overrides included) into that directory"),
    mpi: Optional[bool] = typer.Option(None, "--mpi/--no-mpi", help="default: use MPI when started by mpirun/srun"),
    sets: Optional[list[str]] = _SET,
) -> None:
    """Run a case: fields.h5, record.json/.md, timings.csv in the output directory."""
    from ..io.outputs import StopSignals

    StopSignals.install()  # one signal policy for the rest of this process (solver.io.outputs.StopSignals)
    from ..parallel.comm import Comm, agree
    from ..run import Options, run_case

    comm = Comm.world(mpi)
    try:
        over = _overrides(sets, backend=backend, steps=steps, dtype=dtype, threads=threads, output=output, halo=halo,
                          decomposition=decomposition, balance=balance, kernel=kernel, time_tile=time_tile,
                          solver=solver, scheme=scheme, tolerance=tolerance)
        cfg = agree(comm, lambda: _run_case(case, restart, over, comm))
        opts = Options(overwrite=overwrite, quiet=quiet, verify=verify, restart=str(restart) if restart else None,
                       case_file=str(case) if case else None)
        record = run_case(cfg, comm, opts)
    except Exception as exc:  # noqa: BLE001 - every failure must end every rank
        fail(exc, comm)
    if comm.rank == 0:
        from ..results.summary import print_summary

        stdout.to_stdout(print_summary, record)
    c = record["correctness"]
    if c.get("passed") is False:
        exc = VerificationError(f"verification failed: relative error {c['relative_error']:.3e} > tolerance "
                                f"{c['tolerance']:.1e} against the {c['reference']}")
        exc.report = comm.rank == 0  # every rank has the record; one reports
        raise exc


def _run_case(case: Optional[Path], restart: Optional[Path], over: dict, comm):
    """The case file with its overrides, or with --restart alone the checkpoint's own case, continued in the
    checkpoint's directory (unless --output says otherwise) on this job's ranks."""
    from ..case import case_from_data, load_case

    if case is not None:
        return load_case(case, over)
    if restart is None:
        raise InputError("case: give a case file (stencil run CASE), or --restart DIR to continue a run")
    from ..io.checkpoint import saved_case

    data, directory = saved_case(restart)
    data.setdefault("output", {})["dir"] = str(directory)
    note = _free_saved_dims(data, comm.size, over)
    cfg = case_from_data(data, f"{restart} (the checkpoint's case)", over)
    if note and comm.rank == 0:
        echo_err(note)
    return cfg


def _free_saved_dims(data: dict, ranks: int, over: dict) -> str | None:
    """The saved parallel.dims were the process grid of the run that wrote the checkpoint; a restart on
    another rank count (or with --decomposition rows) chooses its own, as a restart may use any (the
    field is the same bitwise). Returns the note saying so, or None when the saved grid is kept."""
    parallel = data.get("parallel")
    dims = parallel.get("dims") if isinstance(parallel, dict) else None
    if not (isinstance(dims, list) and len(dims) == 2 and all(isinstance(d, int) for d in dims)):
        return None
    cart = over.get("--decomposition", parallel.get("decomposition")) == "cart"
    if cart and dims[0] * dims[1] == ranks:
        return None
    parallel["dims"] = None
    return (f"note: parallel.dims: the checkpoint's process grid {dims[0]} x {dims[1]} does not fit "
            f"{ranks} rank(s){'' if cart else ' with decomposition rows'}; the grid is chosen for them "
            "(the result is the same bitwise)")


@app.command()
def validate(
    case: Path = typer.Argument(..., help="case file (YAML)"),
    ranks: int = typer.Option(1, min=1, max=MAX_RANKS, help="plan for this many MPI ranks"),
    backend: Optional[str] = typer.Option(None, help="numpy | numba | cupy"),
    steps: Optional[int] = typer.Option(None, help="override run.steps"),
    dtype: Optional[str] = typer.Option(None, help="float32 | float64"),
    threads: Optional[int] = typer.Option(None, help="numba threads per rank"),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="override output.dir"),
    sets: Optional[list[str]] = _SET,
) -> None:
    """Print the resolved case (dt, weights, stability, memory, bytes per step) or the errors."""
    from ..case import load_case
    from ..results.summary import print_plan

    from ..core.inputs import check_inputs

    cfg = load_case(case, _overrides(sets, backend=backend, steps=steps, dtype=dtype, threads=threads, output=output))
    check_inputs(cfg)  # what `run` reads before it writes anything: its data files and the products of its data
    print_plan(cfg, ranks)


@app.command()
def schema() -> None:
    """Print the case file's JSON Schema (for editor completion and checking)."""
    from ..case import schema as case_schema

    typer.echo(json.dumps(case_schema(), indent=2))


@app.command()
def docs(
    directory: Path = typer.Option(Path("docs"), "--dir", help="where the pages go"),
    check: bool = typer.Option(False, "--check", help="write nothing; exit 1 when a page differs from the code"),
) -> None:
    """Write the case-file and command-line references (docs/case_file.md, docs/command_line.md) from the code."""
    from . import reference as pages

    if check:
        stale = pages.stale(directory)
        if stale:
            echo_err(f"out of date in {directory}: {', '.join(stale)}; run `stencil docs` and commit them")
            sys.exit(1)
        print(f"{directory}: {', '.join(pages.PAGES)} match the code")
        return
    if not directory.is_dir():
        raise InputError(f"--dir: {directory} is not a directory; run from the repository root or give --dir")
    for path in pages.write(directory):
        print(f"wrote {path}")


@app.command()
def info() -> None:
    """Print the environment: CPU, cores, memory, MPI library, GPUs, library versions."""
    from ..results.summary import print_info

    print_info()


@app.command()
def backends() -> None:
    """List every backend, whether it is available here, and why not."""
    from ..results.summary import print_backends

    print_backends()


@app.command()
def tune(
    case: Path = typer.Argument(..., help="case file (YAML): its grid, dtype and weights are timed"),
    kernel: Optional[list[str]] = typer.Option(None, "--kernel", "-k", help="variants to sweep (default: all)"),
    blocks: Optional[str] = typer.Option(None, help="block shapes, e.g. 32x8,128x16 (default: a set per variant)"),
    dtype: Optional[str] = typer.Option(None, help="override numerics.dtype"),
    repeats: int = typer.Option(5, min=1, max=MAX_REPEATS, help="timed repeats; the median is reported"),
    steps: int = typer.Option(20, min=2, max=MAX_BATCH, help="steps per timed batch"),
    save: bool = typer.Option(True, "--save/--no-save", help="store the fastest choices for runs with block: null"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
    time_tile: Optional[list[int]] = typer.Option(None, "--time-tile", help="steps per launch for wave/wave2/wave2a (default 4 8 12)"),
    chip_steps: Optional[list[int]] = typer.Option(None, "--chip-steps", help="steps per launch for chip (default 64 256)"),
    sets: Optional[list[str]] = _SET,
) -> None:
    """Time every CuPy kernel variant, block shape and time tile on the case's grid (one GPU); keep the fastest."""
    from ..backends.cupy_kernels import VARIANTS, tile_problem
    from ..bench.tune import parse_blocks, print_tune
    from ..bench.tune import tune as run_tune
    from ..case import load_case

    bad = [k for k in kernel or [] if k not in VARIANTS]
    if bad:
        raise InputError(f"--kernel: unknown kernel {bad[0]!r}; use one of {', '.join(VARIANTS)}")
    bad_tile = [t for t in time_tile or [] if tile_problem("wave", t)]
    if bad_tile:
        raise InputError(f"--time-tile: {tile_problem('wave', bad_tile[0])}")
    bad_tile = [t for t in chip_steps or [] if tile_problem("chip", t)]
    if bad_tile:
        raise InputError(f"--chip-steps: {tile_problem('chip', bad_tile[0])}")
    if blocks is not None and not blocks.strip():
        raise InputError("--blocks: '' names no block shape; write e.g. --blocks 32x8,128x16, or leave it out")
    shapes = parse_blocks(blocks)  # the options first, then the case and the GPU
    cfg = load_case(case, _overrides(sets, backend="cupy", dtype=dtype))
    res = run_tune(cfg, kernel or None, shapes, repeats, steps, save, tiles=time_tile or None,
                   chip_steps=chip_steps or None)
    print_tune(res)
    if json_out:
        json_out.write_text(json.dumps(res, indent=1))


bench_app = typer.Typer(help="Benchmarks: the stencil (default), and the ladder's bandwidth, reduction, vectorize, "
                             "access; the machine's balance; the scaling model's inputs.", **HELP)
app.add_typer(bench_app, name="bench")


@bench_app.callback(invoke_without_command=True)
def bench(
    ctx: typer.Context,
    size: int = typer.Option(4096, min=3, help="interior points per side"),
    dtype: str = typer.Option("float64", help="float32 | float64"),
    threads: Optional[int] = typer.Option(None, min=1, max=MAX_THREADS, help="numba threads (default: all cores)"),
    backend: list[str] = typer.Option(["numpy", "numba"], "--backend", "-b", help="backends to measure"),
    repeats: int = typer.Option(5, min=1, max=MAX_REPEATS, help="timed repeats; the median is reported"),
    steps: int = typer.Option(50, min=2, max=MAX_BATCH, help="steps per batch (a one-process run's batch between polls is 50)"),
    time_tile: list[int] = typer.Option([1, 0], "--time-tile", help="numba time tiles to measure (1 = plain kernel, "
                                        "0 = the default: stored by --tune, else chosen per block)"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
    tune: bool = typer.Option(False, "--tune", help="numba: measure time tiles x cache tiles, store the fastest "
                              "as this machine's default (backend.time_tile null)"),
) -> None:
    """Stencil benchmark: copy bandwidth, then each backend's MLUP/s and fraction of that ceiling.

    With a subcommand (bandwidth, reduction, vectorize), that benchmark runs instead."""
    if ctx.invoked_subcommand is not None:
        return
    from ..bench.stencil import print_bench, stencil_bench

    _check_dtype(dtype)
    _check_backends(backend)
    _check_fields_fit("--size", size, dtype)
    bad = [t for t in time_tile if not 0 <= t <= MAX_TIME_TILE]
    if bad:
        raise InputError(f"--time-tile: {bad[0]} is not a time tile; use 0 (the default) or 1 to {MAX_TIME_TILE}")
    if tune:
        from ..bench.cpu_tune import print_tune_cpu, tune_cpu

        results = tune_cpu(size, dtype, threads, repeats, steps)
        print_tune_cpu(results)
    else:
        results = stencil_bench(size, dtype, threads, backend, repeats, steps, time_tile)
        print_bench(results)
    if json_out:
        json_out.write_text(json.dumps(results, indent=1))


# the ladder, sweeps and reports ----------------------------------------------------------------

def _counts(text: Optional[str], option: str, default: list[int], most: int | None = None) -> list[int]:
    """A list option given as text ('1,2,4'): parsed and checked (an empty one is refused), else `default`."""
    from ..sweep import parse_counts

    if text is None:
        return default
    counts = parse_counts(text, option)
    if most is not None and counts[-1] > most:
        raise InputError(f"{option}: {counts[-1]} is more than {most}; use smaller counts")
    return counts


def _powers_of_two(limit: int) -> list[int]:
    return sorted({1 << k for k in range(limit.bit_length()) if 1 << k <= limit} | {limit})


def _write_json(path: Optional[Path], data: dict, comm=None) -> None:
    if path and (comm is None or comm.rank == 0):
        path.write_text(json.dumps(data, indent=1, default=str))


@bench_app.command("bandwidth")
def bench_bandwidth(
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b", help="default: every available backend"),
    threads: Optional[str] = typer.Option(None, help="numba threads per rank, e.g. 1,2,4,8 (default: powers of two "
                                                     "up to the cores per rank)"),
    repeats: int = typer.Option(5, min=1, max=MAX_REPEATS, help="timed repeats; the median is reported"),
    refresh: bool = typer.Option(False, help="measure again and replace the cached entries"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
    mpi: Optional[bool] = typer.Option(None, "--mpi/--no-mpi", help="default: use MPI when started by mpirun/srun"),
) -> None:
    """Copy and SAXPY bandwidth per backend (every MPI rank at once); cached per machine for runs and sweeps."""
    from ..backends import registry
    from ..bench.bandwidth import bandwidth_bench, print_bandwidth
    from ..parallel.comm import Comm

    comm = Comm.world(mpi)
    names = _check_backends(backend) if backend else [n for n, cls in registry().items() if cls.unavailable() is None]
    from ..parallel.comm import default_threads

    per_rank = default_threads(comm.node_cores(), comm.node()[0])
    res = bandwidth_bench(names, _counts(threads, "--threads", _powers_of_two(per_rank), MAX_THREADS), comm, refresh,
                          repeats)
    if comm.rank == 0:
        print_bandwidth(res)
    _write_json(json_out, res, comm)


@bench_app.command("reduction")
def bench_reduction(
    size: int = typer.Option(1 << 25, min=1, help="elements per rank"),
    lock_size: int = typer.Option(1 << 17, min=1, max=MAX_LOCK_ELEMENTS,
                                  help="elements for the lock-per-add variant (it is slow)"),
    threads: Optional[int] = typer.Option(None, min=1, max=MAX_THREADS, help="threads per rank (default: cores / ranks per node)"),
    dtype: str = typer.Option("float64", help="float32 | float64 (sums accumulate in float64)"),
    gpu: Optional[bool] = typer.Option(None, "--gpu/--no-gpu", help="GPU variants (default: when cupy and a GPU are here)"),
    repeats: int = typer.Option(5, min=1, max=MAX_REPEATS, help="timed repeats; the median is reported"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
    mpi: Optional[bool] = typer.Option(None, "--mpi/--no-mpi", help="default: use MPI when started by mpirun/srun"),
) -> None:
    """Sum an array the ways the textbooks contrast (lock, partials, GPU atomics, block tree, MPI); exit 3 on a wrong sum."""
    from ..backends import registry
    from ..bench.reduce import print_reduction, reduction_bench
    from ..parallel.comm import Comm

    _check_dtype(dtype)
    _check_elements_fit("--size", size, dtype)
    comm = Comm.world(mpi)
    reason = registry()["cupy"].unavailable()
    if gpu and reason:
        raise InputError(f"--gpu: the GPU variants need cupy and a GPU: {reason}; or pass --no-gpu")
    from ..parallel.comm import default_threads

    threads = threads or default_threads(comm.node_cores(), comm.node()[0])
    res = reduction_bench(size, min(lock_size, size), threads, dtype, gpu if gpu is not None else reason is None,
                          comm, repeats)
    if comm.rank == 0:
        print_reduction(res)
    _write_json(json_out, res, comm)
    bad = [r["variant"] for r in res["results"] if not r["passed"]]
    bad += [f"MPI_Allreduce of {r['bytes']} B" for r in res.get("allreduce_by_size", []) if not r["passed"]]
    if bad:
        exc = VerificationError(f"wrong sums beyond the stated tolerance: {', '.join(bad)}")
        exc.report = comm.rank == 0
        raise exc


@bench_app.command("balance")
def bench_balance(
    block: int = typer.Option(1024, min=3, help="side of every rank's square block (float64)"),
    steps: int = typer.Option(200, min=2, help="steps per timed repeat, and of the lockstep loop"),
    repeats: int = typer.Option(5, min=1, help="timed repeats; the medians are reported"),
    copy_mib: int = typer.Option(64, "--copy-mib", min=1, help="MiB each rank copies for its copy rate"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
    mpi: Optional[bool] = typer.Option(None, "--mpi/--no-mpi", help="default: use MPI when started by mpirun/srun"),
) -> None:
    """Is the machine balanced? Each rank's own kernel and copy speed with no messages, then the wait of a
    lockstep loop with empty messages: what equal blocks on these cores pay in any halo mode (run under mpirun)."""
    from ..bench.balance import balance_bench, report_lines
    from ..parallel.comm import Comm

    comm = Comm.world(mpi)
    _check_fields_fit("--block", block, "float64")
    res = balance_bench(comm.mpi, block, steps, repeats, copy_mib)
    if comm.rank == 0:
        print("\n".join(report_lines(res)))
    _write_json(json_out, res, comm)


@bench_app.command("vectorize")
def bench_vectorize(
    dtype: str = typer.Option("float64", help="float32 | float64"),
    threads: int = typer.Option(1, min=1, max=MAX_THREADS, help="numba threads (1 shows SIMD alone)"),
    sizes: Optional[str] = typer.Option(None, help="grid sides, e.g. 176,4096 (default: one in L2, one far beyond L3)"),
    repeats: int = typer.Option(5, min=1, max=MAX_REPEATS, help="timed repeats; the median is reported"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
) -> None:
    """SIMD evidence in the numba kernel's assembly, and its speed with LLVM's loop vectoriser on and off."""
    from ..bench.vectorize import print_vectorize, vectorize_bench

    _check_dtype(dtype)
    sides = _counts(sizes, "--sizes", None)
    for n in sides or []:
        _check_fields_fit("--sizes", n, dtype)
    res = vectorize_bench(dtype, threads, sides, repeats)
    print_vectorize(res)
    _write_json(json_out, res)


@bench_app.command("access")
def bench_access(
    backend: Optional[list[str]] = typer.Option(None, "--backend", "-b", help="numba | cupy (default: numba, and cupy "
                                                                                "where cupy and a GPU are here)"),
    threads: int = typer.Option(1, min=1, max=MAX_THREADS, help="numba threads, each reading its own slice (1: one core's caches)"),
    sizes: Optional[str] = typer.Option(None, help="array sizes, powers of two: 4K,64K,1M or a range 4K-256M "
                                                   "(default: 4K to at least 4x the last-level cache)"),
    strides: Optional[str] = typer.Option(None, help="strides in elements, e.g. 2,8,64 (default: 2,4,8,16,64,512)"),
    repeats: int = typer.Option(5, min=1, max=MAX_REPEATS, help="timed rounds; the median is reported"),
    min_time: float = typer.Option(0.02, min=1e-4, max=60, help="seconds one timed call lasts at least"),
    clock: str = typer.Option("wall", help="wall | cpu: the CPU clock (process CPU time / threads) for a machine "
                                           "shared with other jobs; both are recorded"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the results here"),
) -> None:
    """Read bandwidth by access order (contiguous, strided, random, rows/columns) and size, caches marked."""
    from ..bench.access import DEFAULT_STRIDES, access_bench, check_options, parse_sizes, print_access, wrong_sums

    names = check_options(backend, clock)
    res = access_bench(names, threads, parse_sizes(sizes) if sizes is not None else None,
                       _counts(strides, "--strides", list(DEFAULT_STRIDES)), repeats, min_time, clock)
    print_access(res)
    _write_json(json_out, res)
    if wrong_sums(res):
        raise VerificationError(f"a pattern did not read every element once: {', '.join(wrong_sums(res))}")


sweep_app = typer.Typer(help="Scaling sweeps: each point a normal run; sweep.csv, sweep.md; then `stencil report DIR`.",
                        no_args_is_help=True, **HELP)
app.add_typer(sweep_app, name="sweep")

_LAUNCHER = typer.Option(None, help="mpirun | mpiexec | srun | none, or a path (default: mpirun; threads: none)")
_LAUNCHER_ARGS = typer.Option("", "--launcher-args", help="extra launcher arguments as one string, e.g. "
                                                          "'--bind-to core' or '--oversubscribe'")
_REPEATS = typer.Option(1, min=1, max=MAX_REPEATS, help="runs per point; the median time per step is reported")
_OUTPUT = typer.Option(None, "--output", "-o", help="sweep directory (default: output/sweep-KIND-CASE)")
_BACKEND = typer.Option(None, help="override backend.name")
_STEPS = typer.Option(None, help="override run.steps")
_DTYPE = typer.Option(None, help="override numerics.dtype")
_HALO = typer.Option(None, help="override parallel.halo")
_DECOMP = typer.Option(None, help="override parallel.decomposition (weak: rows grows ny, cart grows both)")
_BALANCE = typer.Option(None, help="override parallel.balance (none | dynamic)")
_TIME_TILE = typer.Option(None, "--time-tile", help="override backend.time_tile (1 = per-step kernel and halo)")
_VERIFY = typer.Option(None, "--verify/--no-verify", help="default: the case's verify")
_OVERWRITE = typer.Option(False, help="replace a sweep already in the directory")
_TIMEOUT = typer.Option(None, min=1, help="seconds before a point is stopped and reported as failed")
_FIELDS = typer.Option(False, "--fields", help="keep every point's fields.h5 (default: records and timings only)")
_MODEL = typer.Option(True, "--model/--no-model", help="predict every point with the scaling model (stencil model)")
_NETWORK = typer.Option(None, help="the model's network between nodes: a preset, 'measured' or a YAML file")


def _sets(sets: Optional[list[str]]) -> dict:
    from ..case import parse_sets

    return parse_sets(sets)


def _sweep(kind: str, case: Path, counts: list[int], **kw) -> None:
    from ..sweep import Settings, exit_code, print_sweep, say_point, sweep

    res = sweep(Settings(kind=kind, case=case, counts=counts, argv=sys.argv[3:], **kw), say=say_point,
                note=lambda line: print(line, flush=True))
    print_sweep(res)
    code = exit_code(res)
    if code:
        echo_err(f"error: some sweep points failed (see {res['dir']}/sweep.md); the others are in sweep.csv")
        sys.exit(code)


def _rank_sweep(kind: str, case_help: str, doc: str):
    """The `sweep strong` and `sweep weak` commands: the same options, a different grid rule."""

    def command(
        case: Path = typer.Argument(..., help=case_help),
        ranks: str = typer.Option(..., help="rank counts, e.g. 1,2,4,8"),
        threads_per_rank: Optional[int] = typer.Option(None, min=1, max=MAX_THREADS, help="numba threads per rank (default: the case's, else 1)"),
        launcher: Optional[str] = _LAUNCHER, launcher_args: str = _LAUNCHER_ARGS, repeats: int = _REPEATS,
        output: Optional[Path] = _OUTPUT, backend: Optional[str] = _BACKEND, steps: Optional[int] = _STEPS,
        dtype: Optional[str] = _DTYPE, halo: Optional[str] = _HALO, decomposition: Optional[str] = _DECOMP,
        balance: Optional[str] = _BALANCE, verify: Optional[bool] = _VERIFY, overwrite: bool = _OVERWRITE,
        timeout: Optional[float] = _TIMEOUT, time_tile: Optional[int] = _TIME_TILE, fields: bool = _FIELDS,
        model: bool = _MODEL, network: Optional[str] = _NETWORK, sets: Optional[list[str]] = _SET,
    ) -> None:
        _sweep(kind, case, _counts(ranks, "--ranks", [], MAX_RANKS), threads_per_rank=threads_per_rank, launcher=launcher,
               launcher_args=launcher_args, repeats=repeats, output=output, backend=backend, steps=steps, dtype=dtype,
               halo=halo, decomposition=decomposition, balance=balance, verify=verify, overwrite=overwrite,
               timeout=timeout, time_tile=time_tile, fields=fields, model=model, network=network, sets=_sets(sets))

    command.__doc__ = doc
    sweep_app.command(kind)(command)


_rank_sweep("strong", "case file (YAML)", "Strong scaling: the global grid stays, the ranks vary.")
_rank_sweep("weak", "case file (YAML); its grid is the grid of one rank",
            "Weak scaling: each rank keeps the case's grid; the global grid grows (rows: ny; cart: both).")


@sweep_app.command("threads")
def sweep_threads(
    case: Path = typer.Argument(..., help="case file (YAML), backend numba"),
    threads: str = typer.Option(..., help="numba thread counts, e.g. 1,2,4,8"),
    launcher: Optional[str] = _LAUNCHER, launcher_args: str = _LAUNCHER_ARGS, repeats: int = _REPEATS,
    output: Optional[Path] = _OUTPUT, backend: Optional[str] = _BACKEND, steps: Optional[int] = _STEPS,
    dtype: Optional[str] = _DTYPE, verify: Optional[bool] = _VERIFY, overwrite: bool = _OVERWRITE,
    timeout: Optional[float] = _TIMEOUT, fields: bool = _FIELDS, sets: Optional[list[str]] = _SET,
) -> None:
    """Thread scaling: one process, numba threads vary."""
    _sweep("threads", case, _counts(threads, "--threads", [], MAX_THREADS), launcher=launcher, launcher_args=launcher_args,
           repeats=repeats, output=output, backend=backend, steps=steps, dtype=dtype, verify=verify,
           overwrite=overwrite, timeout=timeout, fields=fields, sets=_sets(sets))


@app.command()
def report(
    directory: Path = typer.Argument(..., help="a run's output directory or a sweep directory"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="where report.md and the PNGs go (default: DIRECTORY)"),
) -> None:
    """Plots (PNG) and report.md for a run or a sweep."""
    from ..results.report import make_report

    path = make_report(directory, output)
    print(f"report: {path}")


@app.command()
def model(
    case: Optional[Path] = typer.Argument(None, help="case file (YAML); not needed with --validate"),
    ranks: Optional[int] = typer.Option(None, min=1, max=MAX_RANKS, help="MPI ranks (default: nodes x ranks per node, else 1)"),
    nodes: Optional[int] = typer.Option(None, min=1, max=MAX_RANKS, help="nodes (default: as many as --ranks needs)"),
    ranks_per_node: Optional[int] = typer.Option(None, "--ranks-per-node", min=1, max=MAX_RANKS,
                                                 help="ranks per node (default: the cores here; with --gpus 1)"),
    gpus: bool = typer.Option(False, "--gpus", help="one GPU per rank (cupy backend)"),
    network: Optional[str] = typer.Option(None, help="between nodes: a preset (infiniband-hdr, infiniband-ndr, "
                                                      "slingshot, ethernet-10g/25g/100g, ...), 'measured', or a YAML file"),
    time_tile: Optional[int] = typer.Option(None, "--time-tile", min=1, help="override backend.time_tile"),
    halo: Optional[str] = typer.Option(None, help="override parallel.halo"),
    decomposition: Optional[str] = typer.Option(None, help="override parallel.decomposition (rows | cart)"),
    balance: Optional[str] = typer.Option(None, help="override parallel.balance (none | dynamic)"),
    steps: Optional[int] = typer.Option(None, help="override run.steps"),
    dtype: Optional[str] = typer.Option(None, help="override numerics.dtype"),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="measured inputs from a file (a model_probe JSON) "
                                                                  "instead of this machine's own measurements"),
    validate: Optional[Path] = typer.Option(None, "--validate", help="a sweep directory: error of every point"),
    launcher: Optional[str] = typer.Option(None, help="the launcher that measures the inputs (default: mpirun)"),
    launcher_args: str = typer.Option("", "--launcher-args", help="its extra arguments, e.g. '--bind-to core'"),
    refresh: bool = typer.Option(False, help="measure the inputs again"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the result here"),
    sets: Optional[list[str]] = _SET,
) -> None:
    """Predicted seconds per step and its parts for any rank and node count (solver/model; docs/scaling_model.md)."""
    from ..core.errors import InputError
    from ..model import text

    if validate is not None:
        from ..model.sweeps import validate as check

        res = check(validate, inputs, network)
        print("\n".join(text.validation_lines(res)))
        _write_json(json_out, res)
        return
    if case is None:
        raise InputError("case: give a case file (stencil model CASE), or --validate SWEEP_DIR")
    from ..case import load_case
    from ..core.machine import cpu_count
    from ..model import calibrate
    from ..model.here import model_case
    from ..model.inputs import Inputs
    from ..model.problem import Problem, placement

    over = _overrides(sets, backend="cupy" if gpus else None, time_tile=time_tile, halo=halo, balance=balance,
                      steps=steps, dtype=dtype, decomposition=decomposition)
    problem = Problem.from_case(load_case(case, over).model_dump(mode="json"))
    if problem.outside():
        raise InputError(problem.outside())
    cores = Inputs.from_file(inputs).node_ranks() if inputs else cpu_count()  # a node like the one measured
    place = placement(ranks, nodes, ranks_per_node, cores, gpus)
    say = lambda line: print(line, flush=True)  # noqa: E731
    res = model_case(problem, place, cores, network=network, inputs_file=inputs, refresh=refresh, say=say,
                     launcher=calibrate.launcher(launcher, launcher_args) if (launcher or launcher_args) else None)
    print("\n".join(text.prediction_lines(res)))
    _write_json(json_out, res)


@bench_app.command("model")
def bench_model(
    case: Path = typer.Argument(..., help="case file (YAML): its dtype and halo mode"),
    ranks: Optional[int] = typer.Option(None, min=1, max=MAX_RANKS, help="ranks of the probe launch (default: the cores here)"),
    gpu: Optional[str] = typer.Option(None, help="GPU sizes to measure, e.g. 4096,8192,16384 (square)"),
    shapes: Optional[str] = typer.Option(None, help="CPU block shapes NYxNX, e.g. 256x4096,1024x1024 (default: a grid)"),
    time_tile: str = typer.Option("1,8", "--time-tile", help="time tiles to measure"),
    launcher: Optional[str] = typer.Option(None, help="default: mpirun beside this Python, else on PATH"),
    launcher_args: str = typer.Option("", "--launcher-args", help="e.g. '--bind-to core'"),
    refresh: bool = typer.Option(False, help="measure everything again"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the measured inputs here (for --inputs)"),
) -> None:
    """Measure the scaling model's inputs (kernel by block and tile, messages, MPI_Allreduce; GPU) and cache them."""
    from ..bench.model_probe import SHAPES
    from ..case import load_case
    from ..core.machine import cpu_count
    from ..model import calibrate

    cfg = load_case(case)
    n = ranks or cpu_count()
    sizes = _counts(gpu, "--gpu", [], 1 << 17)
    blocks = _shapes_fit(shapes, "--shapes", cfg.numerics.dtype, n) if shapes is not None else None
    got = calibrate.measure(calibrate.launcher(launcher, launcher_args), n, cfg.numerics.dtype, cfg.parallel.halo,
                            blocks if blocks is not None else ([] if sizes else list(SHAPES)),
                            _counts(time_tile, "--time-tile", [1]), [], [(s, s) for s in sizes], refresh,
                            say=lambda line: print(line, flush=True))
    print("\n".join(got.describe()))
    _write_json(json_out, {"entry": got.entry})
