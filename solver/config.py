"""Case files: one strict pydantic model per concern, YAML in, one-line errors out.

Orientation (the one place it is written down): a field has shape (ny, nx); row i lies at
y = (i+1)*dy and column j at x = (j+1)*dx, with dx = lx/(nx+1), dy = ly/(ny+1). So `bottom` is the
boundary at y = 0, `top` at y = ly, `left` at x = 0 and `right` at x = lx (ParaView's y-up view).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .core.errors import InputError

VTK_AUTO_MAX_POINTS = 2048 * 2048  # output.vtk: null writes VTK up to this many points per snapshot


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Grid(Section):
    """Interior points; the Dirichlet boundary sits one spacing outside them."""

    nx: int = Field(ge=3, description="interior points along x (columns)")
    ny: int = Field(ge=3, description="interior points along y (rows)")
    lx: float = Field(1.0, gt=0, description="domain length along x; dx = lx/(nx+1)")
    ly: float = Field(1.0, gt=0, description="domain length along y; dy = ly/(ny+1)")


class Physics(Section):
    equation: Literal["heat", "laplace"] = "heat"
    alpha: float = Field(1.0, gt=0, description="diffusivity (heat)")
    dt: float | None = Field(None, gt=0, description="time step; null = safety x stable limit")
    safety: float = Field(0.9, gt=0, le=1, description="fraction of the stable dt used when dt is null")


class Sine(Section):
    """The lowest discrete eigenmode with zero boundaries: an exact solution is known."""

    kind: Literal["sine"]
    value: float = Field(1.0, description="amplitude")


class Hotspot(Section):
    """`value` inside a disc of `radius` around `center` = [x, y] (physical units), `background` outside."""

    kind: Literal["hotspot"]
    value: float = 100.0
    radius: float = Field(0.1, gt=0)
    center: list[float] = Field(default_factory=lambda: [0.5, 0.5], min_length=2, max_length=2)
    background: float = 0.0


class Constant(Section):
    kind: Literal["constant"]
    value: float = 0.0


class Random(Section):
    """Uniform in [low, high); the same field for any rank count (rows are seeded by global index)."""

    kind: Literal["random"]
    seed: int = 0
    low: float = 0.0
    high: float = 1.0


class FromFile(Section):
    """A .npy file, or an HDF5 file with `dataset`, holding an array of shape (ny, nx)."""

    kind: Literal["file"]
    path: str
    dataset: str | None = None


Initial = Annotated[Union[Sine, Hotspot, Constant, Random, FromFile], Field(discriminator="kind")]


class Boundary(Section):
    """Dirichlet values per side; they never change during a run."""

    top: float = 0.0
    bottom: float = 0.0
    left: float = 0.0
    right: float = 0.0


class Run(Section):
    steps: int = Field(1000, ge=0, description="steps (heat) or the most iterations (laplace)")
    tolerance: float | None = Field(None, gt=0, description="laplace stops when max |update| < tolerance")
    check_every: int = Field(100, ge=1, description="steps between convergence and NaN/Inf checks")
    warmup: int = Field(1, ge=0, description="first steps timed apart and excluded from the solve time")


class Numerics(Section):
    dtype: Literal["float32", "float64"] = "float64"


class BackendSettings(Section):
    name: Literal["numpy", "numba", "cupy"] = "numba"
    threads: int | None = Field(None, ge=1, description="numba threads per rank; null = cores / ranks on the node")
    time_tile: int | None = Field(None, ge=1, le=64, description=(
        "steps fused per pass (temporal blocking) on one process: numba (null = 4) and cupy (kernels wave, "
        "wave2: steps per launch, at most 16; null = tuned or 8); 1 = off"))
    kernel: str | None = Field(None, description=(
        "cupy only: naive | tiled | rows | vec | expr | wave | wave2; null = tuned, else wave2 (vec with time_tile 1)"))
    block: list[int] | None = Field(None, min_length=2, max_length=2, description=(
        "cupy only: [bx, by] threads (naive, tiled), [threads, rows per thread] (rows, vec) or [threads, rows per "
        "warp] (wave, wave2); null = tuned/default"))


class Parallel(Section):
    decomposition: Literal["rows", "cart"] = "rows"
    halo: Literal["blocking", "nonblocking", "overlap"] = "overlap"
    dims: list[int] | None = Field(None, min_length=2, max_length=2, description="cart only: [py, px]")
    transport: Literal["auto", "staged", "cuda-aware", "nccl"] = Field(
        "auto", description="GPU halos: through pinned host memory, device buffers to MPI, or NCCL"
    )
    share_gpus: bool = Field(False, description="allow more ranks per node than GPUs")
    balance: Literal["none", "dynamic"] = Field(
        "none", description="dynamic: move rows between ranks by their measured speed (rows, CPU backends)"
    )
    balance_every: int = Field(50, ge=1, description="steps between balance checks (balance: dynamic)")


class Output(Section):
    dir: str | None = Field(None, description="result directory; null = output/<name>")
    every: int | None = Field(None, ge=1, description="steps between snapshots; null = first and last only")
    vtk: bool | None = Field(None, description=f"null = on up to {VTK_AUTO_MAX_POINTS} points per snapshot")
    checkpoint_every: int | None = Field(None, ge=1)
    trace: bool = False


class Case(Section):
    """A whole run. Every section has defaults except the grid."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$", max_length=100)
    grid: Grid
    physics: Physics = Field(default_factory=Physics)
    initial: Initial = Field(default_factory=lambda: Sine(kind="sine"))
    boundary: Boundary = Field(default_factory=Boundary)
    run: Run = Field(default_factory=Run)
    numerics: Numerics = Field(default_factory=Numerics)
    backend: BackendSettings = Field(default_factory=BackendSettings)
    parallel: Parallel = Field(default_factory=Parallel)
    output: Output = Field(default_factory=Output)
    verify: bool = Field(False, description="check the result (exact solution or numpy reference); exit 3 on failure")

    @model_validator(mode="after")
    def _cross_checks(self) -> Case:
        from .core.physics import stable_dt  # local: physics imports nothing from here at import time

        if self.physics.equation == "heat" and self.physics.dt is not None:
            limit = stable_dt(self)
            if self.physics.dt > limit:
                raise ValueError(
                    f"physics.dt: {self.physics.dt:g} is above the stability limit {limit:.6g} for this grid "
                    f"and alpha; use dt <= {limit:.6g} or dt: null (safety x limit)"
                )
        if self.backend.name != "cupy":
            for key in ("kernel", "block"):
                if getattr(self.backend, key) is not None:
                    raise ValueError(f"backend.{key}: applies to backend cupy only; remove it or use name: cupy")
        if self.backend.name == "cupy":
            from .backends.cupy_kernels import settings_problem  # pure Python: cupy is not imported here

            problem = settings_problem(self.backend.kernel, self.backend.block, self.backend.time_tile)
            if problem:
                raise ValueError(problem)
        elif self.parallel.transport != "auto":
            raise ValueError(f"parallel.transport: {self.parallel.transport} applies to backend cupy only; "
                             "remove it or use backend.name: cupy")
        if self.backend.time_tile is not None and self.backend.name == "numpy":
            raise ValueError("backend.time_tile: applies to backends numba and cupy; remove it or use one of them")
        if self.parallel.dims is not None:
            if self.parallel.decomposition != "cart":
                raise ValueError("parallel.dims: applies to decomposition cart only; remove it or set decomposition: cart")
            if min(self.parallel.dims) < 1:
                raise ValueError("parallel.dims: both entries must be >= 1, e.g. [2, 2]")
        if self.parallel.balance == "dynamic":
            if self.parallel.decomposition != "rows":
                raise ValueError("parallel.balance: dynamic moves whole rows; set decomposition: rows or balance: none")
            if self.backend.name == "cupy":
                raise ValueError("parallel.balance: dynamic applies to CPU backends; use backend numba or balance: none")
        if self.physics.equation == "heat" and self.run.tolerance is not None:
            raise ValueError("run.tolerance: applies to equation laplace only; remove it or set physics.equation: laplace")
        if self.output.dir is None:
            self.output.dir = f"output/{self.name}"
        return self

    # Derived values used everywhere -------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.grid.ny, self.grid.nx)

    @property
    def vtk_enabled(self) -> bool:
        if self.output.vtk is not None:
            return self.output.vtk
        return self.grid.nx * self.grid.ny <= VTK_AUTO_MAX_POINTS


# Loading ---------------------------------------------------------------------------------------

OPTION_FIELDS = {  # CLI override -> case field, so errors name the option the user typed
    "--backend": ("backend", "name"),
    "--steps": ("run", "steps"),
    "--dtype": ("numerics", "dtype"),
    "--threads": ("backend", "threads"),
    "--output": ("output", "dir"),
    "--halo": ("parallel", "halo"),
    "--decomposition": ("parallel", "decomposition"),
    "--balance": ("parallel", "balance"),
    "--kernel": ("backend", "kernel"),
}


def read_yaml(path: str | Path) -> dict:
    """The raw mapping of a case file, or an InputError that names the file and the line."""
    import yaml

    path = Path(path)
    if not path.is_file():
        hint = "check the path" if not path.exists() else "it is a directory, give a .yaml file"
        raise InputError(f"{path}: case file not found; {hint}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{path}:{where}: YAML syntax error: {problem}; fix the YAML at that line") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file; give a YAML case file") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a case file must be a YAML mapping with a 'grid' section (see cases/quickstart.yaml)")
    return data


def load_case(path: str | Path, overrides: dict[str, Any] | None = None) -> Case:
    """Read, apply CLI overrides (option -> value), validate. Errors are InputError lines."""
    path = Path(path)
    data = read_yaml(path)
    data.setdefault("name", path.stem)
    for option, value in (overrides or {}).items():
        if value is None:
            continue
        section, key = OPTION_FIELDS[option]
        if not isinstance(data.get(section, {}), dict):
            break  # validation below reports the malformed section
        data.setdefault(section, {})[key] = value
    return validate_case(data, source=str(path), options=overrides)


def validate_case(data: dict, source: str = "case", options: dict | None = None) -> Case:
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise InputError("\n".join(format_errors(exc, source, options or {}))) from None


def format_errors(exc: ValidationError, source: str, options: dict) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc, message = _field_path(err["loc"]), _message(err)
        if not loc and err["type"] == "value_error":  # cross-field checks name their field themselves
            loc, _, message = message.partition(": ")
        option = _option_for(loc, options)
        where = f"{option} (field {loc})" if option else (loc or "case")
        if err["type"] == "extra_forbidden":
            raw = [str(p) for p in err["loc"]]
            message = _unknown_field(loc, raw[1] if raw[0] == "initial" and len(raw) > 2 else None)
        lines.append(f"{source}: {where}: {message}")
    return lines


def _field_path(loc: tuple) -> str:
    parts = [str(p) for p in loc]
    if len(parts) >= 2 and parts[0] == "initial" and parts[1] in _INITIAL_KINDS:
        del parts[1]  # the discriminated union puts the tag in the location
    return ".".join(parts)


def _option_for(loc: str, options: dict) -> str | None:
    for option, (section, key) in OPTION_FIELDS.items():
        if options.get(option) is not None and loc == f"{section}.{key}":
            return option
    return None


def _message(err: dict) -> str:
    kind, msg, got = err["type"], err["msg"], err.get("input")
    if kind == "missing":
        return "required field is missing; add it (see `stencil schema` or cases/quickstart.yaml)"
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    if kind == "union_tag_invalid":
        return f"unknown kind {err['ctx'].get('tag')!r}; use one of {', '.join(sorted(_INITIAL_KINDS))}"
    if kind == "union_tag_not_found":
        return f"needs a 'kind'; use one of {', '.join(sorted(_INITIAL_KINDS))}"
    fix = _FIXES.get(kind, "")
    ctx = err.get("ctx") or {}
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        op, limit = bounds[kind], next(iter(ctx.values()), "")
        fix = f"use a value {op} {limit}"
    elif kind == "literal_error":
        fix = f"use {ctx.get('expected', 'one of the listed values')}"
    elif kind in ("too_short", "too_long"):
        fix = f"give exactly {ctx.get('min_length', ctx.get('max_length'))} values, e.g. [2, 2]"
    shown = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
    return f"{msg}{shown}{'; ' + fix if fix else ''}"


_FIXES = {
    "int_type": "give a whole number",
    "float_type": "give a number",
    "bool_type": "use true or false",
    "string_type": "give a text value",
    "list_type": "give a list, e.g. [0.5, 0.5]",
    "model_type": "give a mapping of fields (see `stencil schema`)",
    "model_attributes_type": "give a mapping of fields (see `stencil schema`)",
    "string_pattern_mismatch": "use letters, digits, '_', '-', '.' or '+'",
}


def _known_fields() -> dict[str, list[str]]:
    known = {"": list(Case.model_fields)}
    for name, info in Case.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            known[name] = list(ann.model_fields)
    known["initial"] = sorted({f for m in (Sine, Hotspot, Constant, Random, FromFile) for f in m.model_fields})
    return known


_INITIAL_MODELS = {"sine": Sine, "hotspot": Hotspot, "constant": Constant, "random": Random, "file": FromFile}
_INITIAL_KINDS = set(_INITIAL_MODELS)
_KNOWN = _known_fields()


def _unknown_field(loc: str, kind: str | None = None) -> str:
    """'unknown field' with the closest known name; for initial, the fields of the kind in use."""
    section, _, name = loc.rpartition(".")
    known = _KNOWN.get(section, [])
    if kind in _INITIAL_MODELS:
        own = list(_INITIAL_MODELS[kind].model_fields)
        if name in known:
            others = sorted(k for k, m in _INITIAL_MODELS.items() if name in m.model_fields)
            return f"'{name}' does not apply to kind {kind} (it belongs to {', '.join(others)}); fields of {kind}: " \
                   f"{', '.join(own)}"
        known = own
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known fields: {', '.join(known)}"
    return f"unknown field '{name}'; {hint}"


def schema() -> dict:
    return Case.model_json_schema()
