"""The Python API: a case from a file or a mapping, fields overridden by their dotted path, a run in this
process (one process, or every rank of an `mpirun` job), and back the final field and the snapshots as
arrays with their coordinates (an xarray Dataset where xarray is installed), with the run's record.

    from solver import api

    case = api.load_case("cases/quickstart.yaml", {"physics.alpha": 0.5, "output.dir": "output/a05"})
    result = api.run(case)
    result.field          # the final field, (ny, nx) numpy array (rank 0; None on the other ranks)
    result.snapshots      # fields.h5 as an xarray.Dataset u(time, y, x) (a dict of arrays without xarray)
    result.probes         # probes.h5 (output.probes) as an xarray.Dataset, one variable a probe over time
    result.record         # record.json as a dict (every rank)
    api.open("output/a05")  # a run's fields.h5 (any run's, any time later) as an xarray.Dataset, read lazily

The distribution is `stencil`, the package `solver` (docs/python.md). Bad input raises
solver.core.errors.InputError (the message names the field and the fix) before anything is written; a
failed verification (verify=True) raises VerificationError. Error messages use the API's words
(overwrite=True, output.dir), not the command line's options. Nothing here initialises MPI unless the process was started by
an MPI launcher (or `mpi=True`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .case import Case, case_from_data, load_case  # noqa: F401 - load_case is part of this API

__all__ = ["Case", "Result", "build_case", "load_case", "open", "probes", "read_snapshots", "run", "with_fields"]


def build_case(data: dict, overrides: dict[str, Any] | None = None) -> Case:
    """A case from a mapping laid out as a case file (`grid` required, `name` defaults to "case"), with
    `overrides` (dotted field paths -> values) applied; validated as a file is."""
    import copy

    from .core.errors import InputError

    if not isinstance(data, dict):
        raise InputError(f"case: {type(data).__name__} is not a mapping; give a case laid out as a case file, e.g. "
                         "{'grid': {'nx': 64, 'ny': 64}}")
    data = copy.deepcopy(data)
    data.setdefault("name", "case")
    return case_from_data(data, "case", overrides)


def with_fields(case: Case, overrides: dict[str, Any]) -> Case:
    """A copy of `case` with fields changed by dotted path, e.g. {"physics.alpha": 2.0, "run.steps": 100},
    validated again (`output.dir` keeps its value unless overridden)."""
    return case_from_data(_case(case).model_dump(mode="json"), case.name, overrides)


def _case(case) -> Case:
    """`case` itself when it is a Case, else the InputError that says how to make one."""
    if not isinstance(case, Case):
        from .core.errors import InputError

        raise InputError(f"case: a {type(case).__name__} is not a case; make one with api.load_case(path) or "
                         "api.build_case(mapping)")
    return case


@dataclass
class Result:
    """What a run gives back. `field` and the snapshots live on rank 0 (None on the other ranks); `field` is NaN at
    the points outside the plate (holes, held objects, outside the outline), as in fields.h5."""

    record: dict
    dir: Path
    field: np.ndarray | None
    x: np.ndarray  # x of each column (case units): origin + j dx
    y: np.ndarray  # y of each row: origin + i dy
    rank: int = 0
    _snapshots: Any = field(default=None, repr=False)

    @property
    def snapshots(self):
        """fields.h5 read back: an xarray.Dataset with u(time, y, x) and step(time) where xarray is installed,
        else a dict of numpy arrays u, time, step, x, y. None on ranks other than 0, or without fields.h5
        (output.fields: false)."""
        if self._snapshots is None and self.rank == 0 and (self.dir / "fields.h5").exists():
            self._snapshots = read_snapshots(self.dir / "fields.h5")
        return self._snapshots

    @property
    def probes(self):
        """probes.h5 read back (output.probes): an xarray.Dataset with one variable a probe over `time` and `step`
        where xarray is installed, else a dict of numpy arrays. None on ranks other than 0, or without probes."""
        if self.rank == 0 and (self.dir / "probes.h5").exists():
            return probes(self.dir)
        return None


def probes(directory):
    """The probes a run wrote (its directory, or a probes.h5): an xarray.Dataset, one variable a probe over `time`
    (with `step`; attributes `kind` and `description`), or a dict of numpy arrays without xarray."""
    from .io.probes import read_probes

    return read_probes(Path(directory))


def run(case: Case, *, overwrite: bool = False, progress: bool | Callable = True, verify: bool | None = None,
        ceiling: bool = True, mpi: bool | None = None, comm=None) -> Result:
    """Run `case` in this process and return its Result (collective under mpirun: every rank calls it).

    overwrite: replace results already in case.output.dir (refused otherwise, as on the command line).
    progress: True (rank 0 prints `step N/M` lines, a bar on a terminal), False (silent), or a callable
      progress(step, total, elapsed_s, mlups) called instead (e.g. to update a notebook widget).
    verify: check the result (None: the case's `verify`); a failure raises VerificationError.
    ceiling: look up (measure once, then cached) the copy bandwidth and compute peak for the record.
    mpi / comm: by default MPI is used when an MPI launcher started this process; or pass a
      solver.parallel.comm.Comm (e.g. Comm(MPI.COMM_WORLD)).
    """
    from .core.errors import StencilError, VerificationError
    from .core.physics import origin, spacing
    from .io.fields import gather_field, owned
    from .io.outputs import blank
    from .parallel.comm import Comm
    from .run import Options, Run

    case = _case(case)
    comm = comm or Comm.world(mpi)
    opts = Options(overwrite=overwrite, quiet=progress is False, verify=verify, ceiling=ceiling,
                   progress=progress if callable(progress) else None)
    try:
        r = Run(case, comm, opts)
        record = r.execute()
    except StencilError as exc:
        exc.args = tuple(api_words(a) if isinstance(a, str) else a for a in exc.args)
        raise
    final = gather_field(comm, r.layout.blocks, blank(case, r.layout.block, owned(r.backend, r.state.u), {}))
    (dx, dy), (x0, y0) = spacing(case), origin(case)
    result = Result(record, Path(case.output.dir), final, x0 + dx * np.arange(case.grid.nx),
                    y0 + dy * np.arange(case.grid.ny), comm.rank)
    c = record["correctness"]
    if c.get("passed") is False:
        raise VerificationError(f"verification failed: relative error {c['relative_error']:.3e} > tolerance "
                                f"{c['tolerance']:.1e} against the {c['reference']}")
    return result


# The library's messages name the command line's options; the API's arguments and fields instead (longest first).
API_WORDS = {"--overwrite": "overwrite=True", "--output": "output.dir", "--verify": "verify=True",
             "--no-verify": "verify=False", "--quiet": "progress=False"}


def api_words(message: str) -> str:
    """`message` with the command line's option names replaced by the API's words (run's arguments, fields)."""
    import re

    return re.sub(r"--[a-z][a-z-]*", lambda m: API_WORDS.get(m.group(0), m.group(0)), message)


def read_snapshots(path: Path):
    """fields.h5 (or residual.h5) read whole: an xarray.Dataset u(time, y, x) and step(time) with the coordinates
    time, y and x where xarray is installed, else a dict of numpy arrays u, time, step, x, y. Reads files of every
    stencil version (those before the netCDF layout have no /x and /y: their coordinates come from dx, dy and
    origin)."""
    import h5py

    with h5py.File(path, "r") as f:
        u, steps, times = f["u"][()], f["step"][()], f["time"][()]
        dx, dy, (x0, y0) = float(f.attrs["dx"]), float(f.attrs["dy"]), f.attrs["origin"]
    x, y = x0 + dx * np.arange(u.shape[2]), y0 + dy * np.arange(u.shape[1])
    try:
        import xarray as xr
    except ImportError:
        return {"u": u, "time": times, "step": steps, "x": x, "y": y}
    return xr.Dataset({"u": (("time", "y", "x"), u), "step": ("time", steps)},
                      coords={"time": times, "y": y, "x": x}, attrs={"source": str(path)})


def open(path):  # noqa: A001 - the API's verb, as xarray.open_dataset's
    """A run's fields as an xarray.Dataset read lazily (values are read as they are used): `path` a run's output
    directory (its fields.h5) or an HDF5 file stencil wrote (fields.h5, residual.h5). The file is netCDF-4 / CF
    (solver.io.fields), so this is xarray.open_dataset(path, engine="h5netcdf"): u(time, y, x), step(time), the
    coordinates time, y, x and the file's attributes (the resolved case among them). Files written before that
    layout are read whole (read_snapshots). Needs xarray and h5netcdf (the `xarray` extra); InputError for a path
    that holds no such file."""
    from .core.errors import InputError

    p = Path(path)
    if p.is_dir():
        p = p / "fields.h5"
    if not p.is_file():
        raise InputError(f"{path}: no fields.h5 there; give a run's output directory or its fields.h5 (runs with "
                         "output.fields: false write none)")
    try:
        import h5netcdf  # noqa: F401 - xarray's engine for the file
        import h5py
        import xarray as xr

        with h5py.File(p, "r") as f:
            layered = "x" in f and "u" in f
    except ImportError:
        raise InputError("api.open needs xarray and h5netcdf: pip install 'stencil[xarray]' (or use "
                         "api.read_snapshots, which needs h5py alone)") from None
    except OSError as exc:
        raise InputError(f"{p}: not an HDF5 file stencil wrote ({str(exc).splitlines()[0][:80]})") from None
    if not layered:
        return read_snapshots(p)
    return xr.open_dataset(p, engine="h5netcdf")
