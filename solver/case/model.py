"""The whole case: every section, and the checks that need more than one of them."""

from __future__ import annotations

import difflib
import math
from typing import Annotated

from pydantic import Field, PrivateAttr, StringConstraints, ValidationInfo, model_validator

from ..core.boundary import AXIS_SIDES
from .base import MAX_LENGTH, Section
from .boundary import Boundary
from .grid import Grid
from .initial import Initial, Sine, _check_wave_number
from .materials import NAME, Material, library_material
from .physics import Physics
from .nonlinear import Newton
from .settings import BackendSettings, Multigrid, Numerics, Output, Parallel, Run
from .base import VTK_AUTO_MAX_POINTS
from .timing import check_time
from .units import Units
from .values import in_time, varying_values


class Case(Section):
    """A whole run. Every section has defaults except the grid."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.+-]+$", max_length=100)
    units: Units = Field(default_factory=Units, description=(
        "the case's unit system: plain numbers are in it, strings carry their own units ('40 mm', '25 W/(m^2 K)', "
        "'80 degC'), results are reported in it (powers in W, energies in J)"))
    materials: dict[Annotated[str, StringConstraints(pattern=NAME, max_length=100)], Material] = Field(
        default_factory=dict, max_length=1000, description=(
            "the case's own materials by name: {k, rho, c_p} or {k, C}; the built-in library (copper, aluminium, "
            "silicon, steel, fr4, tim, ...: docs/materials.md) needs no entry, and a name here overrides it"))
    grid: Grid
    physics: Physics = Field(default_factory=Physics)
    initial: Initial = Field(default_factory=lambda: Sine(kind="sine"))
    boundary: Boundary = Field(default_factory=Boundary)
    run: Run = Field(default_factory=Run)
    multigrid: Multigrid = Field(default_factory=Multigrid)
    newton: Newton = Field(default_factory=Newton, description=(
        "nonlinear cases (k(T), radiation): Newton's method, each step a GMRES solve preconditioned by multigrid"))
    numerics: Numerics = Field(default_factory=Numerics)
    backend: BackendSettings = Field(default_factory=BackendSettings)
    parallel: Parallel = Field(default_factory=Parallel)
    output: Output = Field(default_factory=Output)
    verify: bool = Field(False, description="check the result (exact solution or numpy reference); exit 3 on failure")
    _table: dict = PrivateAttr(default_factory=dict)  # material name -> (k, C) in the case's units (material form)
    _laws: dict = PrivateAttr(default_factory=dict)  # material name -> its k(T) (solver.core.conductivity.Law) or None
    _memo: dict = PrivateAttr(default_factory=dict)  # what the solver derives from the case once (solver.core.plate's
    # cells of a block: the case does not change after validation)

    @model_validator(mode="after")
    def _cross_checks(self, info: ValidationInfo) -> Case:
        from ..core.physics import stable_dt  # local: physics imports nothing from here at import time

        if set(self.name) == {"."}:
            raise ValueError(f"name: {self.name!r} names a directory itself or its parent; use letters or digits")
        self._resolve_materials(info)
        _check_alpha(self.physics.alpha)
        _check_ranges(self)
        check_time(self)  # run.steps or run.t_end, adaptive steps, output times, probes (solver.case.timing)
        self._check_time_data()
        if self.nonlinear and self.run.time_tolerance is not None:
            raise ValueError("run.time_tolerance: adaptive steps are not offered with k(T) or radiation yet (Newton's "
                             "method takes steps of physics.dt, shortened only to land on events); remove it")
        if self.nonlinear and self.run.until != "end":
            raise ValueError("run.until: steady is not offered with k(T) or radiation yet; remove it (or solve the "
                             "steady state itself: physics.equation: laplace)")
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
        self._check_nonlinear()
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
        _check_sources_add(self)
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
        if self.physics.equation == "laplace" and not any(_fixes_level(s) for s in sides.values()) and \
                not _shapes_fix_level(self):
            raise ValueError("boundary: laplace with no Dirichlet side and no convective side with h > 0 is singular "
                             "(u + any constant also solves it, and fluxes and sources that do not balance admit no "
                             "solution); make at least one side a number, {kind: dirichlet, value: V} or {kind: "
                             "convective, h: H} with H > 0, or use physics.equation: heat")
        if self.initial.kind == "sine":
            for k, axis, n in zip(self.initial.k, "xy", (self.grid.nx, self.grid.ny)):
                _check_wave_number(k, axis, n, *(sides[side].kind for side in AXIS_SIDES[axis]))

    def _resolve_materials(self, info: ValidationInfo) -> None:
        """Every material the case names, from its own table or the library (in the case's units): (k, C)."""
        p = self.physics
        if p.material is None:
            if self.materials:
                raise ValueError("materials: the case defines materials but uses none; set physics.material (the plate) "
                                 "and regions with material: NAME, or remove materials")
            return
        names = [("physics.material", p.material)] + [(f"physics.regions.{k}.material", r.material)
                                                       for k, r in enumerate(p.regions) if r.material is not None]
        for where, name in names:
            if name in self._table:
                continue
            m = self.materials.get(name) or _library(name, info)
            if m is None:
                raise ValueError(f"{where}: unknown material {name!r}; {_known_materials(name, self.materials)}")
            scale = self.units.temperature
            self._table[name] = (m.reference_k(scale), m.capacity)
            self._laws[name] = m.law(scale)

    def _check_nonlinear(self) -> None:
        """Radiation needs the material form (watts, an absolute scale); a nonlinear case needs a method that handles
        it (solver.nonlinear) and temperatures at or above absolute zero."""
        from .nonlinear import check_nonlinear

        check_nonlinear(self)

    def notes(self) -> list[str]:
        """Lines for the user before a run (`stencil validate`, `stencil run`): values that are valid but unlike any
        solid, the usual sign of a plain number in the wrong units (a conductivity of 401 in a case in mm is 401
        W/(mm K))."""
        from .library import PLAUSIBLE
        from .units import UnitSystem, to_si

        system = UnitSystem(self.units.length, self.units.time, self.units.temperature)
        out = []
        for name, (k, c) in self._table.items():
            for what, value, dim, unit in (("k", k, "conductivity", "W/(m K)"), ("C", c, "heat_capacity", "J/(m^3 K)")):
                si = to_si(value, dim, system)
                lo, hi = PLAUSIBLE[what]
                if not lo <= si <= hi:
                    out.append(f"note: material {name}: {what} = {si:.4g} {unit} is outside what solids have ({lo:g} to "
                               f"{hi:g}); plain numbers are in the case's units ({system.unit(dim)}): give the value "
                               f"with its unit, e.g. '{what}: \"{'401 W/(m K)' if what == 'k' else '3.4e6 J/(m^3 K)'}\"'")
        return out + (self._h_notes(system) if self.physics.material is not None else []) + self._step_notes()

    def _step_notes(self) -> list[str]:
        """A note where snapshots by step count make adaptive steps keep every step's error small (any step may be a
        snapshot: solver.core.events.seen_every_step)."""
        if self.run.time_tolerance is None or self.output.every is None:
            return []
        return ["note: output.every: with adaptive steps any step may be a snapshot, so each step's error is judged "
                "where it arises and the steps stay short; output.times or output.interval let them grow between "
                "snapshots (docs/output.md)"]

    def _h_notes(self, system) -> list[str]:
        """Notes for transfer coefficients (faces, convective sides and rims) unlike any convection: a plain h of 10
        in a case in mm is 10 W/(mm^2 K), 1e7 W/(m^2 K)."""
        from .library import PLAUSIBLE
        from .units import to_si

        p, found = self.physics, []
        if p.faces is not None:
            found.append(("physics.faces.h", p.faces.h))
        for side in ("bottom", "top", "left", "right"):
            spec = getattr(self.boundary, side)
            if spec.kind == "convective" and isinstance(spec.h, float):
                found.append((f"boundary.{side}.h", spec.h))
        rims = [(f"physics.regions.{k}.hole.h", r.hole) for k, r in enumerate(p.regions)
                if getattr(r, "hole", None) is not None]
        rims += [("physics.outline.rim.h", p.outline.rim)] if p.outline is not None else []
        found += [(where, rim.h) for where, rim in rims if rim.kind == "convective"]
        lo, hi = PLAUSIBLE["h"]
        out = []
        for where, h in found:
            si = to_si(h, "heat_transfer", system)
            if h > 0 and not lo <= si <= hi:
                out.append(f"note: {where} = {si:.4g} W/(m^2 K) is outside what convection gives ({lo:g} to {hi:g}); "
                           f"plain numbers are in the case's units ({system.unit('heat_transfer')}): give the value "
                           "with its unit, e.g. 'h: \"10 W/(m^2 K)\"'")
        return out

    def material_table(self) -> dict:
        """name -> (k, C) of every material the case uses, in its units (the material form; empty otherwise): a k(T)
        material's reference k (its k at 300 K: solver.core.conductivity)."""
        return dict(self._table)

    def conductivity_laws(self) -> dict:
        """name -> k(T) (solver.core.conductivity.Law) of the materials whose conductivity depends on temperature."""
        return {name: law for name, law in self._laws.items() if law is not None}

    @property
    def radiating(self) -> bool:
        """Some side or rim radiates (an emissivity > 0)."""
        from .nonlinear import radiating_parts

        return bool(radiating_parts(self))

    def nonlinear_limit(self, linear: float) -> float:
        """The explicit step's limit of a nonlinear case from its linear one (solver.case.nonlinear.explicit_limit)."""
        from .nonlinear import explicit_limit

        return explicit_limit(self, linear)

    @property
    def nonlinear(self) -> bool:
        """k depends on temperature somewhere, or something radiates: Newton's method (solver.nonlinear)."""
        return bool(self._laws) and any(v is not None for v in self._laws.values()) or self.radiating

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
        """The kernels read coefficient fields: physics.alpha is a field (regions or a file), or the materials differ
        in conductivity or heat capacity (solver.core.medium)."""
        from ..core.medium import medium

        return medium(self).fields

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
    return side.kind == "convective" and (any(v > 0 for v in varying_values(side.h)) or not varying_values(side.h)
                                          or side.emissivity > 0)


def _shapes_fix_level(case) -> bool:
    from ..core.plate import shapes_fix_level

    return shapes_fix_level(case)


def _shape_words(case, k: int) -> tuple[str, str]:
    """(the field, what it is) of region k, or of the outline where k < 0, as the shapes' errors name them."""
    if k < 0:
        return "physics.outline", "the outline"
    role = case.physics.regions[k].role
    return f"physics.regions.{k}", {"hole": "a hole", "material": "a material region"}.get(role, "a held object")


def _check_resolved(case) -> None:
    """Holes, held objects and the outline the grid resolves (solver.core.plate.unresolved); a steady state's
    pieces each with a fixed level (plate.unfixed_piece)."""
    from ..core import plate

    g = case.grid
    for k, why, need in plate.unresolved(case):
        where, what = _shape_words(case, k)
        fix = "widen it" if need is None else (f"refine the grid to a spacing of {min(need):.4g} or less (grid.nx: "
                                               f"{_points_for(g.nx, min(need), case)}, grid.ny: "
                                               f"{_points_for(g.ny, min(need), case, 'y')}) or widen it")
        raise ValueError(f"{where}: {what} {why}; {fix}")
    for k, sides in sorted(plate.seam_crossings(case)):
        where, what = _shape_words(case, k)
        raise ValueError(f"{where}: {what} crosses the periodic sides {sides} (its edge passes between the first and "
                         "last points): shapes are not repeated across a periodic side, and the faces and links there "
                         "do not see it; move it off those sides, or give them another kind")
    if case.physics.equation == "laplace" and (case.physics.outline is not None or any(
            r.role != "material" for r in case.physics.regions)):
        fixing = tuple(side for side in ("bottom", "top", "left", "right") if _fixes_level(getattr(case.boundary, side)))
        at = plate.unfixed_piece(case, fixing)
        if at is not None:
            raise ValueError(f"physics.regions: the holes cut the plate into pieces, and the piece around x = "
                             f"{at[0]:.4g}, y = {at[1]:.4g} has nothing that fixes its steady level (a fixed or "
                             "convective side or rim, a held object); give it one, or use physics.equation: heat")


def _points_for(n: int, h: float, case, axis: str = "x") -> int:
    """The number of points along an axis that gives a spacing of h or less (its sides' kinds kept)."""
    from ..core.grid import geometry as spacing_and_origin

    (dx, dy), _ = spacing_and_origin(case)
    length = case.grid.lx if axis == "x" else case.grid.ly
    extra = length / (dx if axis == "x" else dy) - n  # spacing = length / (n + extra): extra 1, 1/2 or 0
    return int(math.ceil(length / h - extra - 1e-9))


def _check_material_shapes(case) -> None:
    """The material form: a region or a shaped source whose shape holds no part of the grid's cells is a mistake
    (it changes nothing, or a power would have nowhere to go): say which."""
    from ..core.medium import covered_area, shape_of

    g = case.grid
    where = f"(the plate spans x = 0 .. {g.lx:g}, y = 0 .. {g.ly:g})"
    holes = case.physics.outline is not None or any(r.role != "material" for r in case.physics.regions)
    for k, r in enumerate(case.physics.regions):
        if covered_area(case, shape_of(r)) <= 0:
            raise ValueError(f"physics.regions.{k}: covers no part of the plate {where}; move or widen it, or remove it")
    for k, t in enumerate(case.physics.source):
        if t.kind in ("rectangle", "disk") and covered_area(case, shape_of(t)) <= 0:
            raise ValueError(f"physics.source.{k}: lies outside the plate {where} and would put nothing in; move it "
                             "onto the plate or remove it")
        if t.kind in ("rectangle", "disk") and holes and covered_area(case, shape_of(t), plate=True) <= 0:
            raise ValueError(f"physics.source.{k}: lies wholly in holes or held objects (physics.regions, "
                             "physics.outline), so the plate would receive none of it; move it onto the plate or remove it")
        if t.kind == "file" and t.extent is not None:
            (x0, y0), (x1, y1) = t.extent
            if x1 <= 0 or y1 <= 0 or x0 >= g.lx or y0 >= g.ly:
                raise ValueError(f"physics.source.{k}.extent: lies outside the plate {where}; move the map onto it")
    _check_resolved(case)


def _check_regions(case) -> None:
    """A region of alpha that covers no grid point is a mistake (it changes nothing): say which. Parts outside the
    domain are simply not grid points (clipped)."""
    if case.physics.material is not None:
        return _check_material_shapes(case)
    alpha = case.physics.alpha
    if isinstance(alpha, float) or getattr(alpha, "kind", None) == "file":
        return
    from ..core.grid import positions, whole
    from ..core.materials import _covers_any

    import numpy as np

    y, x = positions(case, *whole(case))
    for k, region in enumerate(alpha.regions):
        with np.errstate(over="ignore"):  # a centre far outside: its distances overflow to inf (no point covered)
            covers = _covers_any(region, x, y)
        if not covers:
            raise ValueError(f"physics.alpha.regions.{k}: covers no grid point (points lie at x = {x[0]:g} .. {x[-1]:g}, "
                             f"y = {y[0]:g} .. {y[-1]:g}); move or widen it, or remove it")


def _check_sources_add(case) -> None:
    """A source term that adds nothing at any grid point (a rectangle or map outside the plate, a gaussian that
    underflows to 0 at every point) is a mistake, as an alpha region that covers no point is: say which. A term of
    value 0 is off, not a mistake; a file of one value per point covers every point. q is evaluated by the run's
    own solver.core.sources.q_at where the term can be nonzero (_support): first the points nearest the middle
    of that box (a term that adds something answers there), then, if they are all 0, the whole box in bands of
    rows."""
    import numpy as np

    from ..core.sources import q_at

    for k, term in enumerate(case.physics.source):
        strength = term.amplitude if term.kind == "gaussian" else term.scale if term.kind == "file" else term.value
        box = _support(term)
        if strength == 0 or box is None:
            continue
        rows, cols = (_points_within(case, axis, *box[i]) for i, axis in ((1, "y"), (0, "x")))
        if term.kind == "file":  # a map with extent: its cells cover the points inside it (its values: a data file's)
            adds = len(rows) > 0 and len(cols) > 0
        else:
            near = [a[max(0, len(a) // 2 - 32):len(a) // 2 + 32] for a in (rows, cols)]
            band = max(1, (1 << 20) // max(len(cols), 1))
            with np.errstate(over="ignore", under="ignore"):
                adds = len(rows) > 0 and len(cols) > 0 and (
                    q_at(case, (k,), *near).any()
                    or any(q_at(case, (k,), rows[i:i + band], cols).any() for i in range(0, len(rows), band)))
        if not adds:
            (nx, x0, dx), (ny, y0, dy) = _axis(case, "x"), _axis(case, "y")
            raise ValueError(f"physics.source.{k}: adds nothing at any grid point (q = 0 at every point; points lie at "
                             f"x = {x0:g} .. {x0 + (nx - 1) * dx:g}, y = {y0:g} .. {y0 + (ny - 1) * dy:g}); move or "
                             "widen it, or remove it")


def _axis(case, axis: str) -> tuple[int, float, float]:
    """(points, position of the first, spacing) along `axis` (solver.core.grid.positions)."""
    import numpy as np

    from ..core.grid import positions

    first = positions(case, np.array([0, 1]), np.array([0, 1]))[axis == "x"]
    return (case.grid.nx if axis == "x" else case.grid.ny), float(first[0]), float(first[1] - first[0])


def _points_within(case, axis: str, lo: float, hi: float):
    """The grid indices along `axis` whose points lie in [lo, hi] (from the spacing: no array of the whole axis)."""
    import numpy as np

    from ..core.grid import positions

    n, p0, h = _axis(case, axis)
    with np.errstate(over="ignore", invalid="ignore"):
        a, b = np.clip([np.floor((lo - p0) / h) - 1, np.ceil((hi - p0) / h) + 1], 0, n - 1)
    j = np.arange(int(a), int(b) + 1)
    p = positions(case, j, j)[axis == "x"]
    return j[(p >= lo) & (p <= hi)]


GAUSSIAN_REACH = 38.61  # widths: beyond, exp(-r^2 / (2 width^2)) is 0 in float64 (exp(-745.2) underflows)


def _support(term):
    """((x0, x1), (y0, y1)) outside which source term `term` is 0 (None: everywhere, or one value per point)."""
    if term.kind == "rectangle":
        return (term.lower[0], term.upper[0]), (term.lower[1], term.upper[1])
    if term.kind == "gaussian":
        (cx, cy), reach = term.center, GAUSSIAN_REACH * term.width
        return (cx - reach, cx + reach), (cy - reach, cy + reach)
    if term.kind == "file" and term.extent is not None:
        return (term.extent[0][0], term.extent[1][0]), (term.extent[0][1], term.extent[1][1])
    return None


def _check_alpha(alpha) -> None:
    if isinstance(alpha, float) and not 1 / MAX_LENGTH <= alpha <= MAX_LENGTH:
        raise ValueError(f"physics.alpha: {alpha:g} is outside [{1 / MAX_LENGTH:g}, {MAX_LENGTH:g}]; a diffusivity is > 0 "
                         "(use a value in that range)")


def _check_ranges(case: Case) -> None:
    """Values every field accepts alone but that together overflow or underflow in the case dtype."""
    import numpy as np

    from ..core.physics import alpha_of, stable_dt, weights

    big = float(np.finfo(case.numerics.dtype).max)
    init = case.initial
    values = {f"boundary.{side}" + ("" if key == "value" else f".{key}"): v for side in ("bottom", "top", "left", "right")
              for key in ("value", "flux", "h", "ambient") for v in varying_values(getattr(getattr(case.boundary, side), key, None))}
    values.update({f"physics.source.{k}.{key}": getattr(t, key) for k, t in enumerate(case.physics.source)
                   for key in ("value", "amplitude", "scale", "power") if getattr(t, key, None) is not None})
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
            raise ValueError(f"physics.dt: {case.physics.dt:g} (alpha up to {alpha_of(case):g}) on this grid gives weights "
                             f"wx = {float(w.wx):g}, wy = {float(w.wy):g} outside {case.numerics.dtype}'s range; use a "
                             f"dt nearer the explicit limit {stable_dt(case):.3g} (or dt: null), or numerics.dtype: float64")
        raise ValueError(f"grid: lx = {case.grid.lx:g}, ly = {case.grid.ly:g} on {case.grid.nx} x {case.grid.ny} points "
                         f"give weights wx = {float(w.wx):g}, wy = {float(w.wy):g} outside {case.numerics.dtype}'s range; "
                         "bring lx/nx and ly/ny closer to each other (or dt and alpha into range)")




def _library(name: str, info: ValidationInfo):
    """A built-in material in the case's units (solver.case.library), or None."""
    from .units import SI, system_of

    m = library_material(name)
    if m is None or system_of(info) == SI:
        return m
    from .units import to_case

    return Material(k=to_case(m.k, "conductivity", info), C=to_case(m.capacity, "heat_capacity", info), note=m.note)


def _known_materials(name: str, own: dict) -> str:
    from .library import LIBRARY

    known = sorted(own) + sorted(LIBRARY)
    close = difflib.get_close_matches(name, known, n=1)
    head = f"did you mean {close[0]!r}? " if close else ""
    return (head + f"define it in materials: {{{name}: {{k, rho, c_p}}}} or use one of the library's: "
            + ", ".join(sorted(LIBRARY)))
