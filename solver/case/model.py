"""The whole case: every section, and the checks that need more than one of them."""

from __future__ import annotations

import math

from pydantic import Field, model_validator

from ..core.boundary import AXIS_SIDES
from .base import MAX_LENGTH, Section
from .boundary import Boundary
from .grid import Grid
from .initial import Initial, Sine, _check_wave_number
from .physics import Physics
from .settings import BackendSettings, Multigrid, Numerics, Output, Parallel, Run
from .base import VTK_AUTO_MAX_POINTS
from .timing import check_time
from .values import in_time, varying_values


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
        from ..core.physics import stable_dt  # local: physics imports nothing from here at import time

        if set(self.name) == {"."}:
            raise ValueError(f"name: {self.name!r} names a directory itself or its parent; use letters or digits")
        _check_alpha(self.physics.alpha)
        _check_ranges(self)
        check_time(self)  # run.steps or run.t_end, adaptive steps, output times, probes (solver.case.timing)
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
            from ..backends.cupy_kernels import settings_problem  # pure Python: cupy is not imported here

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
    from ..core.grid import positions, whole
    from ..core.materials import _covers_any

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

    from ..core.physics import stable_dt, weights

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


