"""Case files: one strict pydantic model per concern, YAML in, one-line errors out.

Orientation (the one place it is written down): a field has shape (ny, nx); row i lies at
y = (i+1)*dy and column j at x = (j+1)*dx, with dx = lx/(nx+1), dy = ly/(ny+1). So `bottom` is the
boundary at y = 0, `top` at y = ly, `left` at x = 0 and `right` at x = lx (ParaView's y-up view).
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from .config_terms import UNION_TAGS, Alpha, Source, SOURCE_KINDS, REGION_KINDS, Varying, in_time, varying_values
from .core.boundary import AXIS_SIDES, wave_numbers
from .core.errors import InputError
from .core.limits import MAX_THREADS, MAX_TIME_TILE

VTK_AUTO_MAX_POINTS = 2048 * 2048  # output.vtk: null writes VTK up to this many points per snapshot
# Input limits (hostile or mistaken case files end with exit 2, never a traceback):
MAX_CASE_BYTES = 1 << 20  # a case file is a few hundred bytes; 1 MiB is far beyond any real one
MAX_DEPTH = 16  # mappings and lists nested in a case file (a real one nests 3 deep)
MAX_NODES = 10_000  # values, mappings and lists in a case file with its aliases expanded (a real one: about 60)
MAX_VALUE_CHARS = 4096  # one key or scalar value (paths included)
MAX_COUNT = 2**62  # steps, intervals: counted in int64 by the kernels and the files
MAX_LENGTH = 1e100  # lx, ly, alpha, dt between 1/MAX_LENGTH and MAX_LENGTH: their squares stay normal floats
QUOTE_CHARS = 80  # errors quote at most this much of a value


def quote(value) -> str:
    """repr(value), cut to about QUOTE_CHARS characters (a 2 MB string is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= QUOTE_CHARS else f"{text[:QUOTE_CHARS - 3]}... ({len(text)} characters)"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)  # every number finite


class Grid(Section):
    """Interior points; the Dirichlet boundary sits one spacing outside them."""

    nx: int = Field(ge=3, le=MAX_COUNT, description="interior points along x (columns)")
    ny: int = Field(ge=3, le=MAX_COUNT, description="interior points along y (rows)")
    lx: float = Field(1.0, ge=1 / MAX_LENGTH, le=MAX_LENGTH, description="domain length along x; dx = lx/(nx+1)")
    ly: float = Field(1.0, ge=1 / MAX_LENGTH, le=MAX_LENGTH, description="domain length along y; dy = ly/(ny+1)")


class Physics(Section):
    equation: Literal["heat", "laplace"] = "heat"
    solver: Literal["jacobi", "multigrid"] = Field("jacobi", description=(
        "laplace: jacobi (one sweep per iteration) or multigrid (cycles with Jacobi sweeps as smoother; the "
        "multigrid section sets them)"))
    alpha: Alpha = Field(1.0, description=(
        "diffusivity: a number, or a field {background: A, regions: [{kind: rectangle, lower, upper, value}, {kind: "
        "disk, center, radius, value}]} (later regions win) or {kind: file, path, dataset} (a (ny, nx) array); the "
        "flux between two points uses the harmonic mean of their values. Heat: u_t = div(alpha grad u) + q; laplace: "
        "0 = div(alpha grad u) + q"))
    source: list[Source] = Field(default_factory=list, max_length=1000, description=(
        "heat sources q(x, y), summed: {kind: constant, value}, {kind: gaussian, center, width, amplitude}, {kind: "
        "rectangle, lower, upper, value}, {kind: file, path, dataset, scale}; each may carry active: [t_start, t_end] "
        "(heat). Units: u per unit time (heat), so laplace solves 0 = div(alpha grad u) + q"))
    dt: float | None = Field(None, ge=1 / MAX_LENGTH, le=MAX_LENGTH, description=(
        "time step; null = safety x the explicit stability limit (explicit), cfl x that limit (implicit schemes)"))
    safety: float = Field(0.9, gt=0, le=1, description="fraction of the stable dt used when dt is null")
    scheme: Literal["explicit", "backward-euler", "crank-nicolson"] = Field("explicit", description=(
        "heat: explicit (FTCS, dt up to the stability limit), backward-euler or crank-nicolson (implicit: each "
        "step one multigrid solve, any dt)"))
    cfl: float = Field(100.0, gt=0, le=MAX_LENGTH, description=(
        "implicit schemes with dt null: dt = cfl x the explicit stability limit"))


class Sine(Section):
    """A discrete eigenmode of the update for the case's boundary kinds: an exact solution is known.

    Along an axis with Dirichlet sides sin(pi k (j+1)/(n+1)), Neumann sides cos(pi k (j+1/2)/n), periodic
    cos(2 pi k (j+1/2)/n), Dirichlet on one side and Neumann on the other sin(pi (k-1/2) (j+1)/(n+1/2))
    (mirrored for Neumann-Dirichlet). Exact with zero Dirichlet values and zero fluxes."""

    kind: Literal["sine"]
    value: float = Field(1.0, description="amplitude")
    k: list[int] = Field(default_factory=lambda: [1, 1], min_length=2, max_length=2, description=(
        "wave numbers [kx, ky]: 1 to n along an axis with a Dirichlet side, 0 to n - 1 between Neumann sides, "
        "0 to (n - 1) // 2 along a periodic axis (n the points along that axis)"))


def _check_wave_number(k: int, axis: str, n: int, lo: str, hi: str) -> None:
    """initial.k along one axis: a wave number whose mode exists on the axis's n points and its side kinds."""
    allowed = wave_numbers(lo, hi, n)
    if k in allowed:
        return
    sides = {("dirichlet", "dirichlet"): "Dirichlet sides", ("neumann", "neumann"): "Neumann sides",
             ("periodic", "periodic"): "periodic sides"}.get((lo, hi), "a Dirichlet and a Neumann side")
    why = (" (higher ones repeat lower modes or vanish)" if k > allowed[-1] else
           " (a Dirichlet side admits no constant mode)" if k == 0 else "")
    raise ValueError(f"initial.k: k{axis} = {k} but the {axis} axis ({sides}, n{axis} = {n} points) has modes "
                     f"k{axis} = {allowed[0]} to {allowed[-1]}{why}; use a k{axis} in that range")


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
    """Uniform in [low, high); the same field for any rank count (rows of cells are seeded by global index)."""

    kind: Literal["random"]
    seed: int = Field(0, ge=0, le=2**64 - 1, description="numpy's random seed (with the global row index)")
    low: float = 0.0
    high: float = 1.0
    cell: int = Field(1, ge=1, le=MAX_COUNT, description=(
        "side of the square cells (cell x cell points, from the first point) that share one random value: a "
        "mosaic whose edges diffuse; 1 = a value per point"))


class FromFile(Section):
    """A .npy file, or an HDF5 file's `dataset` (default /u: a fields.h5 gives its last snapshot), shape (ny, nx)."""

    kind: Literal["file"]
    path: str = Field(min_length=1, max_length=MAX_VALUE_CHARS)
    dataset: str | None = Field(None, max_length=MAX_VALUE_CHARS)


Initial = Annotated[Union[Sine, Hotspot, Constant, Random, FromFile], Field(discriminator="kind")]


_VARYING = ("a number, {time: [[t, v], ...]} (linear in time), {along: [[s, v], ...]} (linear along the side, s "
             "in case units) or {file: PATH} (one value per point of the side)")


class Dirichlet(Section):
    """A fixed value on the side; the wall lies one spacing outside the first interior point."""

    kind: Literal["dirichlet"]
    value: Varying = Field(0.0, description=f"the boundary value u on this side: {_VARYING}")


class Neumann(Section):
    """A fixed normal derivative; the wall lies half a spacing outside the first interior point."""

    kind: Literal["neumann"]
    flux: Varying = Field(0.0, description=(
        "outward normal derivative du/dn at the wall (0 = insulated); the ghost is the first interior point "
        "+ flux x spacing, so flux > 0 lets heat in (inward heat flux alpha x flux), flux < 0 draws it out; "
        f"{_VARYING}"))


class Convective(Section):
    """Newton cooling (a Robin condition): -du/dn = h (u - ambient) at the wall, half a spacing outside the
    first interior point (as Neumann): the ghost is (u0 (1 - h s/2) + h s ambient) / (1 + h s/2), s the spacing."""

    kind: Literal["convective"]
    h: Varying = Field(0.0, description=(
        f"transfer coefficient per unit length (>= 0): 0 = insulated, large = tends to Dirichlet at ambient; {_VARYING}"))
    ambient: Varying = Field(0.0, description=f"the temperature the side exchanges heat with; {_VARYING}")

    @model_validator(mode="after")
    def _non_negative(self) -> Convective:
        for v in varying_values(self.h):
            if v < 0:
                raise ValueError(f"h: {v:g} is negative; a transfer coefficient is >= 0 (0 = insulated)")
        return self


class Periodic(Section):
    """The side wraps to the opposite one (give both sides of the axis); the period is nx (or ny) points."""

    kind: Literal["periodic"]


SideKind = Annotated[Union[Dirichlet, Neumann, Convective, Periodic], Field(discriminator="kind")]
BOUNDARY_KINDS = {"dirichlet": Dirichlet, "neumann": Neumann, "convective": Convective, "periodic": Periodic}


def _number_is_dirichlet(v: Any) -> Any:
    """`top: 1.5` (a plain number, as in older case files) means {kind: dirichlet, value: 1.5}."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return {"kind": "dirichlet", "value": float(v)}
    return v


Side = Annotated[SideKind, BeforeValidator(_number_is_dirichlet, json_schema_input_type=Union[float, SideKind])]
_SIDE_HELP = ("a number (Dirichlet value), or {kind: dirichlet, value: V}, {kind: neumann, flux: G} "
              "(G = outward du/dn; 0 = insulated), {kind: convective, h: H, ambient: T} (-du/dn = H (u - T)), "
              "{kind: periodic} (on both sides of the axis)")


def _dirichlet(value: float = 0.0) -> Dirichlet:
    return Dirichlet(kind="dirichlet", value=value)


class Boundary(Section):
    """One kind per side; they never change during a run (docs/discretisation.md, solver/core/boundary.py)."""

    top: Side = Field(default_factory=_dirichlet, description=f"side y = ly: {_SIDE_HELP}")
    bottom: Side = Field(default_factory=_dirichlet, description=f"side y = 0: {_SIDE_HELP}")
    left: Side = Field(default_factory=_dirichlet, description=f"side x = 0: {_SIDE_HELP}")
    right: Side = Field(default_factory=_dirichlet, description=f"side x = lx: {_SIDE_HELP}")

    @model_validator(mode="after")
    def _periodic_in_pairs(self) -> Boundary:
        for a, b, axis in (("left", "right", "x"), ("bottom", "top", "y")):
            ka, kb = getattr(self, a).kind, getattr(self, b).kind
            if (ka == "periodic") != (kb == "periodic"):
                one, other = (a, b) if ka == "periodic" else (b, a)
                raise ValueError(f"boundary.{other}: boundary.{one} is periodic, so {other} must be too (the period "
                                 f"runs along {axis}); set both to {{kind: periodic}} or neither")
        return self


class Run(Section):
    steps: int = Field(1000, ge=0, le=MAX_COUNT, description="steps (heat) or the most iterations or cycles (laplace)")
    tolerance: float | None = Field(None, gt=0, lt=1, description=(
        "laplace: stop when the relative residual max|g - A u| / max|g - A u_0| (max norm, the initial field's "
        "residual as the unit) falls below it; null: jacobi runs all steps, multigrid until the residual stops "
        "falling (the floating-point floor). Implicit heat: the relative residual each step's solve reaches "
        "(the step's own initial residual as the unit); null: 1e-8"))
    check_every: int = Field(100, ge=1, le=MAX_COUNT, description="steps between convergence and NaN/Inf checks")
    warmup: int = Field(1, ge=0, le=MAX_COUNT, description="first steps timed apart and excluded from the solve time")


class Multigrid(Section):
    """physics.solver: multigrid (solver/multigrid): cycles of weighted Jacobi sweeps on coarser grids."""

    cycle: Literal["V", "W", "F"] = Field("V", description="V, W or F cycles (F: an F-cycle then a V-cycle below)")
    pre: int = Field(2, ge=0, le=16, description="smoothing sweeps before the coarse-grid correction")
    post: int = Field(2, ge=0, le=16, description="smoothing sweeps after it")
    coarsest: int = Field(64, ge=1, le=4096, description=(
        "most points of the coarsest level, which is solved directly (its operator's inverse)"))
    smoother: Literal["chebyshev", "jacobi"] = Field("chebyshev", description=(
        "chebyshev: per-sweep weights that damp the level's high frequencies best (one sweep: 4/5); "
        "jacobi: every sweep weighted by omega"))
    omega: float = Field(0.8, gt=0, lt=2, description="smoother jacobi: the weight of every sweep")
    max_cycles: int = Field(50, ge=1, le=10000, description="implicit heat: the most cycles one step's solve may take")
    krylov: Literal["auto", "none", "cg"] = Field("auto", description=(
        "cg: conjugate gradients preconditioned by one cycle per iteration (symmetric cycles: pre = post, V or W), "
        "robust across large jumps of alpha; none: plain cycles; auto: cg where alpha is a field, none otherwise"))


class Numerics(Section):
    dtype: Literal["float32", "float64"] = "float64"


class BackendSettings(Section):
    name: Literal["numpy", "numba", "cupy"] = "numba"
    threads: int | None = Field(None, ge=1, le=MAX_THREADS, description="numba threads per rank; null = cores / ranks on the node")
    time_tile: int | None = Field(None, ge=1, le=MAX_TIME_TILE, description=(
        "steps fused per pass (temporal blocking). numba: one sweep through memory; under MPI also the halo "
        "depth, exchanged once per tile; null = the stored `stencil bench --tune` choice, else the deepest tile "
        "up to 8 whose recomputed rows stay within 1/8 of a block's. cupy: steps per launch of wave/wave2/wave2a, "
        "at most 16 (chip: any), under MPI also the halo depth; null = tuned or 8 (chip: 256). Neumann sides and a periodic axis one rank spans take "
        "plain steps. 1 = off"))
    kernel: str | None = Field(None, max_length=100, description=(
        "cupy only: naive | tiled | rows | vec | expr | wave | wave2 | wave2a | chip; null = tuned, else wave2a (chip "
        "where the field fits on the chip, vec with time_tile 1)"))
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
    balance_every: int = Field(50, ge=1, le=MAX_COUNT, description="steps between balance checks (balance: dynamic)")


class Output(Section):
    dir: str | None = Field(None, max_length=MAX_VALUE_CHARS, description="result directory; null = output/<name>")
    every: int | None = Field(None, ge=1, le=MAX_COUNT, description="steps between snapshots; null = first and last only")
    fields: bool = Field(True, description="write the snapshots to fields.h5 (and fields.xdmf); false: the record "
                                           "and timings only (what sweep points write unless `--fields`)")
    vtk: bool | None = Field(None, description=f"null = on up to {VTK_AUTO_MAX_POINTS} points per snapshot")
    checkpoint_every: int | None = Field(None, ge=1, le=MAX_COUNT)
    trace: bool = False
    residual: bool = Field(False, description=(
        "laplace: also write the final residual g - A u (unit diagonal: what one Jacobi sweep would add) to "
        "residual.h5, laid out as fields.h5 (one snapshot), for ParaView or h5py"))


class Case(Section):
    """A whole run. Every section has defaults except the grid."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$", max_length=100)
    grid: Grid
    physics: Physics = Field(default_factory=Physics)
    initial: Initial = Field(default_factory=lambda: Sine(kind="sine"))
    boundary: Boundary = Field(default_factory=Boundary)
    run: Run = Field(default_factory=Run)
    multigrid: Multigrid = Field(default_factory=Multigrid)
    numerics: Numerics = Field(default_factory=Numerics)
    backend: BackendSettings = Field(default_factory=BackendSettings)
    parallel: Parallel = Field(default_factory=Parallel)
    output: Output = Field(default_factory=Output)
    verify: bool = Field(False, description="check the result (exact solution or numpy reference); exit 3 on failure")

    @model_validator(mode="after")
    def _cross_checks(self) -> Case:
        from .core.physics import stable_dt  # local: physics imports nothing from here at import time

        if set(self.name) == {"."}:
            raise ValueError(f"name: {self.name!r} names a directory itself or its parent; use letters or digits")
        _check_alpha(self.physics.alpha)
        _check_ranges(self)
        self._check_time_data()
        if self.physics.equation == "laplace" and self.physics.scheme != "explicit":
            raise ValueError("physics.scheme: applies to equation heat (laplace has no time steps); remove it or "
                             "set physics.equation: heat")
        if self.physics.equation == "heat" and self.physics.dt is not None and self.physics.scheme == "explicit":
            limit = stable_dt(self)
            if self.physics.dt > limit:
                raise ValueError(
                    f"physics.dt: {self.physics.dt:g} is above the stability limit {limit:.6g} for this grid "
                    f"and alpha; use dt <= {limit:.6g}, dt: null (safety x limit), or an implicit physics.scheme "
                    "(backward-euler, crank-nicolson) for larger steps"
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
        if self.uses_multigrid:
            self._check_multigrid()
        if self.output.residual and self.physics.equation != "laplace":
            raise ValueError("output.residual: applies to equation laplace (the steady state's residual); remove it "
                             "or set physics.equation: laplace")
        if self.physics.equation == "heat" and self.run.tolerance is not None and not self.implicit:
            raise ValueError("run.tolerance: applies to equation laplace and to implicit heat schemes; remove it or "
                             "set physics.equation: laplace or physics.scheme: backward-euler")
        self._check_boundary_kinds()
        if self.output.dir is None:
            self.output.dir = f"output/{self.name}"
        return self

    def _check_multigrid(self) -> None:
        if self.physics.equation != "laplace" and not self.implicit:
            raise ValueError("physics.solver: multigrid solves laplace and implicit heat steps; set physics.equation: "
                             "laplace, an implicit physics.scheme, or physics.solver: jacobi")
        if self.backend.time_tile not in (None, 1):
            raise ValueError("backend.time_tile: multigrid exchanges halos before every sweep (its sweeps change "
                             "weights); remove backend.time_tile or set it to 1")
        if self.parallel.balance != "none":
            raise ValueError("parallel.balance: dynamic applies to the jacobi solver and heat; set balance: none "
                             "for multigrid")
        m = self.multigrid
        if m.pre + m.post == 0:
            raise ValueError("multigrid.pre: pre: 0 and post: 0 leave the cycles without smoothing, and the coarse levels "
                             "cannot remove the error they do not see; use at least one sweep (the default: pre: 2, post: 2)")
        if m.smoother == "jacobi" and m.omega >= 1:
            raise ValueError(f"multigrid.omega: {m.omega:g} does not smooth: a weighted Jacobi sweep multiplies the "
                             f"checkerboard mode by 1 - 2 omega = {1 - 2 * m.omega:g}, which does not shrink it; use "
                             "0 < omega < 1 (0.8 is the textbook weight) or smoother: chebyshev")
        if m.krylov == "cg" and (m.pre != m.post or m.cycle == "F"):
            raise ValueError(f"multigrid.krylov: cg needs symmetric cycles (pre = post, V or W); here pre = {m.pre}, post "
                             f"= {m.post}, cycle {m.cycle}: set pre and post equal and cycle V or W, or krylov: none")

    def _check_time_data(self) -> None:
        """Side values in time and source windows belong to heat (laplace has no time); a convective h in time
        would change an implicit step's operator every step (its coarse levels and inverse are built once)."""
        for side in ("bottom", "top", "left", "right"):
            if self.implicit and in_time(getattr(getattr(self.boundary, side), "h", None)):
                raise ValueError(f"boundary.{side}.h: a table in time with an implicit scheme (the operator would change "
                                 "every step); give h a number, {along: ...} or {file: ...}, or use physics.scheme: explicit")
        _check_regions(self)
        if self.physics.equation != "laplace":
            return
        for k, term in enumerate(self.physics.source):
            if term.active is not None:
                raise ValueError(f"physics.source.{k}.active: laplace is a steady state (no time); remove the window "
                                 "or use physics.equation: heat")
        for side in ("bottom", "top", "left", "right"):
            spec = getattr(self.boundary, side)
            for key in ("value", "flux", "h", "ambient"):
                if in_time(getattr(spec, key, None)):
                    raise ValueError(f"boundary.{side}.{key}: a table in time, but laplace is a steady state; give a "
                                     "number, {along: ...} or {file: ...}, or use physics.equation: heat")

    def _check_boundary_kinds(self) -> None:
        b = self.boundary
        sides = {name: getattr(b, name) for name in ("bottom", "top", "left", "right")}
        if self.physics.equation == "laplace" and not any(_fixes_level(s) for s in sides.values()):
            raise ValueError("boundary: laplace with no Dirichlet side and no convective side with h > 0 is singular "
                             "(u + any constant also solves it, and fluxes and sources that do not balance admit no "
                             "solution); make at least one side a number, {kind: dirichlet, value: V} or {kind: "
                             "convective, h: H} with H > 0, or use physics.equation: heat")
        if self.initial.kind == "sine":
            for k, axis, n in zip(self.initial.k, "xy", (self.grid.nx, self.grid.ny)):
                _check_wave_number(k, axis, n, *(sides[side].kind for side in AXIS_SIDES[axis]))

    # Derived values used everywhere -------------------------------------------------------------
    @property
    def implicit(self) -> bool:
        """Heat with an implicit scheme: every step a multigrid solve."""
        return self.physics.equation == "heat" and self.physics.scheme != "explicit"

    @property
    def uses_multigrid(self) -> bool:
        return self.physics.solver == "multigrid" or self.implicit

    @property
    def shape(self) -> tuple[int, int]:
        return (self.grid.ny, self.grid.nx)

    @property
    def alpha_field(self) -> bool:
        """physics.alpha is a field (regions or a file), not one number: the kernels read coefficient fields."""
        return not isinstance(self.physics.alpha, float)

    @property
    def krylov(self) -> str:
        """multigrid.krylov resolved: cg or none (auto: cg where alpha is a field)."""
        k = self.multigrid.krylov
        return ("cg" if self.alpha_field else "none") if k == "auto" else k

    @property
    def vtk_enabled(self) -> bool:
        if self.output.vtk is not None:
            return self.output.vtk
        return self.grid.nx * self.grid.ny <= VTK_AUTO_MAX_POINTS


def _fixes_level(side) -> bool:
    """A side that fixes the steady state's level: Dirichlet, or convective with some h > 0."""
    if side.kind == "dirichlet":
        return True
    return side.kind == "convective" and (any(v > 0 for v in varying_values(side.h)) or not varying_values(side.h))


def _check_regions(case) -> None:
    """A region of alpha that covers no grid point is a mistake (it changes nothing): say which. Parts outside the
    domain are simply not grid points (clipped)."""
    alpha = case.physics.alpha
    if isinstance(alpha, float) or getattr(alpha, "kind", None) == "file":
        return
    from .core.grid import positions, whole
    from .core.materials import _covers_any

    y, x = positions(case, *whole(case))
    for k, region in enumerate(alpha.regions):
        if not _covers_any(region, x, y):
            raise ValueError(f"physics.alpha.regions.{k}: covers no grid point (points lie at x = {x[0]:g} .. {x[-1]:g}, "
                             f"y = {y[0]:g} .. {y[-1]:g}); move or widen it, or remove it")


def _check_alpha(alpha) -> None:
    if isinstance(alpha, float) and not 1 / MAX_LENGTH <= alpha <= MAX_LENGTH:
        raise ValueError(f"physics.alpha: {alpha:g} is outside [{1 / MAX_LENGTH:g}, {MAX_LENGTH:g}]; a diffusivity is > 0 "
                         "(use a value in that range)")


def _check_ranges(case: Case) -> None:
    """Values every field accepts alone but that together overflow or underflow in the case dtype."""
    import numpy as np

    from .core.physics import stable_dt, weights

    big = float(np.finfo(case.numerics.dtype).max)
    init = case.initial
    values = {f"boundary.{side}" + ("" if key == "value" else f".{key}"): v for side in ("bottom", "top", "left", "right")
              for key in ("value", "flux", "h", "ambient") for v in varying_values(getattr(getattr(case.boundary, side), key, None))}
    values.update({f"physics.source.{k}.{key}": getattr(t, key) for k, t in enumerate(case.physics.source)
                   for key in ("value", "amplitude", "scale") if hasattr(t, key)})
    values.update({f"initial.{k}": getattr(init, k) for k in ("value", "background", "low", "high") if hasattr(init, k)})
    for name, v in values.items():
        if abs(v) > big:
            raise ValueError(f"{name}: {v:g} does not fit in {case.numerics.dtype} (largest {big:.3g}); use a smaller value")
    if init.kind == "random" and not math.isfinite(init.high - init.low):
        raise ValueError(f"initial.high: the range [{init.low:g}, {init.high:g}) is too wide to draw from (its width "
                         "overflows); narrow it")
    with np.errstate(over="ignore", under="ignore"):  # a cast out of range is the finding, said below (no warning)
        w = weights(case).cast(case.numerics.dtype)
    if not all(math.isfinite(float(x)) for x in (w.wc, w.wx, w.wy)) or float(w.wx) <= 0 or float(w.wy) <= 0:
        if case.physics.equation == "heat" and case.physics.dt is not None:
            raise ValueError(f"physics.dt: {case.physics.dt:g} (alpha {case.physics.alpha:g}) on this grid gives weights "
                             f"wx = {float(w.wx):g}, wy = {float(w.wy):g} outside {case.numerics.dtype}'s range; use a "
                             f"dt nearer the explicit limit {stable_dt(case):.3g} (or dt: null), or numerics.dtype: float64")
        raise ValueError(f"grid: lx = {case.grid.lx:g}, ly = {case.grid.ly:g} on {case.grid.nx} x {case.grid.ny} points "
                         f"give weights wx = {float(w.wx):g}, wy = {float(w.wy):g} outside {case.numerics.dtype}'s range; "
                         "bring lx/nx and ly/ny closer to each other (or dt and alpha into range)")


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
    "--time-tile": ("backend", "time_tile"),
    "--solver": ("physics", "solver"),
    "--scheme": ("physics", "scheme"),
    "--tolerance": ("run", "tolerance"),
}


def read_yaml(path: str | Path) -> dict:
    """The raw mapping of a case file, or an InputError that names the file and the line.

    Refused before any value is built: files over MAX_CASE_BYTES, nesting deeper than MAX_DEPTH, keys or
    values over MAX_VALUE_CHARS characters, aliases that expand past MAX_NODES, duplicate keys.
    """
    import yaml

    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a case file; give a .yaml file")
    if path.exists() and not path.is_file():
        raise InputError(f"{path}: is not a regular file (a device or a pipe); give a .yaml case file")
    if not path.is_file():
        raise InputError(f"{path}: case file not found; check the path")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CASE_BYTES + 1)
        if len(raw) > MAX_CASE_BYTES:
            raise InputError(f"{path}: larger than {MAX_CASE_BYTES >> 20} MiB; a case file is a short YAML mapping "
                             "(see cases/quickstart.yaml)")
        text = raw.decode("utf-8")
        _check_events(path, text)
        data = yaml.load(text, Loader=_case_loader())  # noqa: S506 - a SafeLoader subclass
    except OSError as exc:
        raise InputError(f"{path}: cannot read the case file ({exc.strerror}); check its permissions") from None
    except yaml.YAMLError as exc:
        if type(exc).__name__ == "DuplicateKey":
            raise InputError(f"{path}:{_where(exc)}: {exc.problem}") from None
        raise InputError(f"{path}:{_where(exc)}: YAML syntax error: {_problem(exc)}; fix the YAML at that line") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file; give a YAML case file") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a case file must be a YAML mapping with a 'grid' section (see cases/quickstart.yaml)")
    return data


def _where(exc) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _problem(exc) -> str:
    text = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= QUOTE_CHARS * 2 else text[:QUOTE_CHARS * 2] + "..."


def _check_events(path: Path, text: str) -> None:
    """One pass over the YAML events (iterative: no recursion, whatever the nesting).

    Anchors and aliases (`&a`, `*a`: what yaml.safe_dump writes for a mapping used twice) are accepted with
    their expansion bounded: every node counts with its anchor's whole subtree for each alias to it, and
    depth counts through aliases too, so a document that would expand past MAX_NODES nodes or MAX_DEPTH
    levels (a "billion laughs") is refused before anything is built."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    open_nodes: list[list] = []  # per open mapping or sequence: [anchor, nodes inside, height below it]
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height) of its subtree
    for ev in yaml.parse(text, Loader=loader):
        line = f" line {ev.start_mark.line + 1}" if ev.start_mark else ""
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            open_nodes.append([ev.anchor, 1, 1])
            if len(open_nodes) > MAX_DEPTH:
                raise InputError(f"{path}:{line}: nested more than {MAX_DEPTH} levels deep; a case file nests "
                                 "sections a few levels deep (see cases/quickstart.yaml)")
            continue
        if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, nodes, height = open_nodes.pop()
        elif isinstance(ev, yaml.AliasEvent):
            if ev.anchor not in sizes:
                raise InputError(f"{path}:{line}: alias *{ev.anchor} refers to no complete node before it (an "
                                 "undefined anchor, or one that contains the alias: a cycle); write the values out")
            anchor, (nodes, height) = None, sizes[ev.anchor]
            if len(open_nodes) + height > MAX_DEPTH:
                raise InputError(f"{path}:{line}: alias *{ev.anchor} nests the document more than {MAX_DEPTH} "
                                 "levels deep; write the values out")
        elif isinstance(ev, yaml.ScalarEvent):
            if len(ev.value) > MAX_VALUE_CHARS:
                raise InputError(f"{path}:{line}: a value of {len(ev.value)} characters (at most {MAX_VALUE_CHARS}); "
                                 f"it starts {quote(ev.value[:QUOTE_CHARS])}")
            anchor, nodes, height = ev.anchor, 1, 0
        else:
            continue
        if anchor:
            sizes[anchor] = (nodes, height)
        if open_nodes:
            open_nodes[-1][1] += nodes
            open_nodes[-1][2] = max(open_nodes[-1][2], height + 1)
        if nodes > MAX_NODES or (open_nodes and open_nodes[-1][1] > MAX_NODES):
            raise InputError(f"{path}:{line}: the aliases (*) expand this document to more than {MAX_NODES} nodes; "
                             "a case file has a few dozen: write the values out")


@functools.lru_cache(maxsize=1)
def _case_loader():
    import yaml
    from yaml.constructor import ConstructorError

    class DuplicateKey(ConstructorError):
        pass

    class CaseLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        """A SafeLoader that refuses a key given twice in one mapping (YAML would keep the last silently)."""

        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # the base class reports an unhashable key
                if key in seen:
                    raise DuplicateKey(None, None, f"key {quote(key)} is given twice in one mapping (first on line "
                                       f"{seen[key] + 1}); keep one of them", key_node.start_mark)
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep)

    # YAML 1.2 floats: `1e-5` is a number (YAML 1.1, PyYAML's default, reads it as the string '1e-5')
    CaseLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
        r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"), list("-+0123456789."))
    return CaseLoader




def load_case(path: str | Path, overrides: dict[str, Any] | None = None) -> Case:
    """Read, apply overrides, validate. Errors are InputError lines.

    overrides: field paths (`{"physics.alpha": 0.5}`, any field, None included: `{"physics.dt": None}`) or
    CLI options (`{"--steps": 10}`; None there means "not given")."""
    path = Path(path)
    data = read_yaml(path)
    data.setdefault("name", path.stem)
    return case_from_data(data, str(path), overrides)


def case_from_data(data: dict, source: str, overrides: dict[str, Any] | None = None) -> Case:
    """A case mapping (a file's, or a checkpoint's saved case) with overrides applied (see load_case), validated."""
    if overrides is not None and not isinstance(overrides, dict):
        raise InputError(f"{source}: overrides: {quote(overrides)} is not a mapping; give field paths and values, e.g. "
                         "{'physics.alpha': 0.5}")
    for name, value in (overrides or {}).items():
        if isinstance(name, str) and name.startswith("--"):
            if name not in OPTION_FIELDS:
                raise InputError(f"{source}: {name}: not an option that sets a case field; use one of "
                                 f"{', '.join(OPTION_FIELDS)}, or a field path such as 'physics.alpha'")
            if value is None:
                continue
            name = ".".join(OPTION_FIELDS[name])
        set_field(data, name, value, source)
    return validate_case(data, source=source, options=overrides)


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    """--set PATH=VALUE options as overrides: the value read as YAML (a number, true, null, [1, 2], {kind: ...})."""
    import yaml

    out: dict[str, Any] = {}
    for item in items or []:
        path, eq, text = item.partition("=")
        if not eq or not path.strip():
            raise InputError(f"--set: {quote(item)} is not PATH=VALUE; e.g. --set physics.alpha=0.5 or --set "
                             "physics.source.0.amplitude=5")
        try:
            out[path.strip()] = yaml.load(text, Loader=_case_loader()) if text.strip() else None  # noqa: S506 - SafeLoader
        except yaml.YAMLError as exc:
            raise InputError(f"--set: {path.strip()}: {quote(text)} is not a YAML value ({_problem(exc)}); e.g. 0.5, "
                             "[0.5, 0.5] or {kind: constant, value: 1}") from None
    return out


def set_field(data: dict, path: str, value: Any, source: str = "case") -> None:
    """data[a][b] = value for path 'a.b' (missing sections are made); a number picks an entry of a list
    ('physics.source.0.value'); validation judges the field itself."""
    keys = path.split(".") if isinstance(path, str) else []
    if not keys or not all(keys):
        raise InputError(f"{source}: {path!r}: a field path is names joined by dots, e.g. 'physics.alpha' or "
                         "'physics.source.0.value'")
    node = data
    for depth, key in enumerate(keys):
        last = depth == len(keys) - 1
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise InputError(f"{source}: {path}: {'.'.join(keys[:depth])} is a list of {len(node)} entries; pick "
                                 f"one by its index, 0 to {len(node) - 1} (e.g. {'.'.join(keys[:depth])}.0)")
            key = int(key)
            if last:
                node[key] = value
            else:
                node = node[key]
            continue
        if not isinstance(node, dict):
            raise InputError(f"{source}: {path}: {'.'.join(keys[:depth])} is a value, not a section; give a path to "
                             "a field, e.g. 'physics.alpha'")
        if last:
            node[key] = value
        else:
            node = node.setdefault(key, {})


def validate_case(data: dict, source: str = "case", options: dict | None = None) -> Case:
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise InputError("\n".join(format_errors(exc, source, options or {}))) from None


def format_errors(exc: ValidationError, source: str, options: dict) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc, message = _field_path(err["loc"]), _message(err)
        head, sep, rest = message.partition(": ")
        if err["type"] == "value_error" and sep and " " not in head and head.startswith(loc):
            loc, message = head, rest  # cross-field checks name their field themselves
        elif err["type"] == "value_error" and sep and " " not in head and "." not in head and loc:
            loc, message = f"{loc}.{head}", rest  # a section's check names its field within the section
        option = _option_for(loc, options)
        where = f"{option} (field {loc})" if option else (loc or "case")
        if err["type"] == "extra_forbidden":
            message = _unknown_field(loc, _union_tag(err["loc"]))
        lines.append(f"{source}: {where}: {message}")
    return lines


def _field_path(loc: tuple) -> str:
    parts = [str(p) if len(str(p)) <= QUOTE_CHARS else quote(str(p)) for p in loc]
    return ".".join(p for k, p in enumerate(parts) if not _is_tag(parts, k))


def _is_tag(parts: list[str], k: int) -> bool:
    """Whether location part k is the tag a union chose (a kind, or a form of a side value or of alpha)."""
    p, before = parts[k], parts[:k]
    if p in UNION_TAGS:
        return True
    if before == ["initial"] and p in _INITIAL_KINDS:
        return True
    if len(before) == 2 and before[0] == "boundary" and p in BOUNDARY_KINDS:
        return True
    if len(before) == 3 and before[:2] == ["physics", "source"] and p in SOURCE_KINDS:
        return True
    return len(before) >= 4 and before[-2] == "regions" and before[0] == "physics" and p in REGION_KINDS


def _union_tag(loc: tuple) -> str | None:
    """The kind a discriminated union chose, from an error location (initial.<kind>..., boundary.<side>.<kind>...,
    physics.source.<n>.<kind>...), for naming the fields of that kind."""
    parts = [str(p) for p in loc]
    if parts[0] == "initial" and len(parts) > 2:
        return parts[1]
    if parts[0] == "boundary" and len(parts) > 3:
        return parts[2]
    if parts[:2] == ["physics", "source"] and len(parts) > 4:
        return parts[3]
    return None


def _kinds_at(loc: tuple) -> set[str]:
    parts = [str(p) for p in loc]
    if parts[:1] == ["boundary"]:
        return set(BOUNDARY_KINDS)
    if parts[:2] == ["physics", "source"]:
        return set(SOURCE_KINDS)
    if parts[:1] == ["physics"] and "regions" in parts:
        return set(REGION_KINDS)
    return _INITIAL_KINDS


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
    kinds = ", ".join(sorted(_kinds_at(err["loc"])))
    if kind == "union_tag_invalid":
        return f"unknown kind {quote(err['ctx'].get('tag'))}; use one of {kinds}"
    if kind == "union_tag_not_found":
        return f"needs a 'kind'; use one of {kinds}"
    if kind == "model_attributes_type" and err["loc"][:1] == ("boundary",):
        return f"give {_SIDE_HELP}"
    fix = _FIXES.get(kind, "")
    ctx = err.get("ctx") or {}
    bounds = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if kind in bounds:
        op, limit = bounds[kind], next(iter(ctx.values()), "")
        limit = f"{limit:g}" if isinstance(limit, float) else limit
        msg, fix = f"{msg.rsplit(' ', 1)[0]} {limit}", f"use a value {op} {limit}"
    elif kind == "literal_error":
        fix = f"use {ctx.get('expected', 'one of the listed values')}"
    elif kind in ("too_short", "too_long"):
        fix = f"give exactly {ctx.get('min_length', ctx.get('max_length'))} values, e.g. [2, 2]"
    shown = "" if isinstance(got, (dict, list)) else f" (got {quote(got)})"
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
    own_models = BOUNDARY_KINDS if section.startswith("boundary.") else SOURCE_KINDS if section.startswith(
        "physics.source.") else {}
    if kind in own_models:
        own = list(own_models[kind].model_fields)
        close = difflib.get_close_matches(name, own, n=1)
        return f"unknown field '{name}' for kind {kind}; " + (f"did you mean '{close[0]}'?" if close else
                                                               f"fields of {kind}: {', '.join(own)}")
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


# Descriptions for the schema where a field gives none (editors show them on hover); Field(description=...)
# takes precedence, and tests/test_cli.py checks that every property of the schema ends up with one.
DESCRIPTIONS = {
    "Case.name": "run name: the output directory's default (output/<name>); default: the case file's stem",
    "Case.grid": "the grid: interior points and domain size (required)",
    "Case.physics": "the equation and its coefficients",
    "Case.initial": "the initial field (heat) or first iterate (laplace), chosen by `kind`",
    "Case.boundary": "the four sides, each a kind (dirichlet, neumann, periodic) with its value",
    "Case.run": "steps, convergence and checks",
    "Case.multigrid": "multigrid cycles (physics.solver: multigrid): cycle type, smoothing, coarsest level",
    "Case.numerics": "floating-point type",
    "Case.backend": "where the steps run: numpy, numba (CPU threads) or cupy (GPU)",
    "Case.parallel": "MPI decomposition, halo exchange and load balance",
    "Case.output": "result directory, snapshots, VTK, checkpoints and trace",
    "BackendSettings.name": "numpy (reference) | numba (CPU threads, SIMD) | cupy (NVIDIA GPU)",
    "Dirichlet.kind": "dirichlet: a fixed value u on the side",
    "Neumann.kind": "neumann: a fixed outward normal derivative du/dn (flux) on the side; flux 0 = insulated",
    "Convective.kind": "convective: Newton cooling, -du/dn = h (u - ambient) at the wall (a Robin condition)",
    "ConstantSource.kind": "constant: q = value everywhere",
    "GaussianSource.kind": "gaussian: q = amplitude exp(-r^2 / (2 width^2)) around center",
    "RectangleSource.kind": "rectangle: q = value on the points inside [lower, upper]",
    "FileSource.kind": "file: q read from a .npy or HDF5 array (one value per point, or a map over extent)",
    "RectangleRegion.kind": "rectangle: alpha = value on the points inside [lower, upper]",
    "DiskRegion.kind": "disk: alpha = value on the points within radius of center",
    "AlphaFile.kind": "file: alpha read from a .npy or HDF5 array of shape (ny, nx)",
    "Periodic.kind": "periodic: the side wraps to the opposite one (give both sides of the axis)",
    "Constant.kind": "constant: the same value everywhere",
    "Constant.value": "the value of every interior point",
    "FromFile.kind": "file: read the field from a .npy or HDF5 file",
    "FromFile.path": "the file: .npy, or HDF5 with `dataset`; relative to the working directory",
    "FromFile.dataset": "HDF5 only: the dataset holding the (ny, nx) array, or a (snapshots, ny, nx) series (its last "
                        "snapshot is read); null = /u, the field of a file stencil wrote (fields.h5, checkpoint.h5)",
    "Hotspot.kind": "hotspot: a hot disc on a uniform background",
    "Hotspot.value": "u inside the disc",
    "Hotspot.radius": "disc radius, physical units",
    "Hotspot.center": "disc centre [x, y], physical units",
    "Hotspot.background": "u outside the disc",
    "Numerics.dtype": "float64 (bitwise equal across backends) or float32 (half the bytes per update)",
    "Output.checkpoint_every": "steps between checkpoints (checkpoint.h5, for --restart); null = none",
    "Output.trace": "write trace.json: every rank's per-step sections (Chrome trace format, open in Perfetto)",
    "Parallel.decomposition": "rows: blocks of whole rows; cart: a 2D process grid (shorter halos per rank)",
    "Parallel.halo": "blocking (Sendrecv) | nonblocking (Isend/Irecv, Waitall) | overlap (interior computed "
                     "while the messages move)",
    "Physics.equation": "heat: time steps of u_t = alpha (u_xx + u_yy) (physics.scheme); laplace: its steady state "
                        "u_xx + u_yy = 0 (physics.solver)",
    "Random.kind": "random: uniform values, the same for any rank count",
    "Random.seed": "random generator seed",
    "Random.low": "lower bound (included)",
    "Random.high": "upper bound (excluded)",
    "Sine.kind": "sine: a discrete eigenmode for the boundary kinds, wave numbers k (exact solution known: use it to verify)",
}


def schema() -> dict:
    """The case file's JSON Schema: every property described; `name` optional (it defaults to the file's stem)."""
    out = Case.model_json_schema()
    for model, section in [("Case", out), *out.get("$defs", {}).items()]:
        for key, prop in section.get("properties", {}).items():
            text = DESCRIPTIONS.get(f"{model}.{key}")
            if text and "description" not in prop:
                prop["description"] = text
    out["required"] = [k for k in out.get("required", []) if k != "name"]
    return out
