"""Every input a case reads beyond its own numbers, checked whole before a run writes anything and by `stencil
validate` (the same function, so `validate` refuses what `run` refuses):

- each data file the case names (solver.core.datafile.named), read whole: real numbers, finite, the array's
  shape, and in range (alpha in the range a number may take, a convective h >= 0, values that fit the dtype);
- the products of physical data that can overflow in the run's dtype, each error naming the side, source or file
  and the fix: a convective side's ghost terms (h x spacing with ambient: solver.core.sides.convective_terms),
  a Neumann side's flux x spacing, the sources' sum (a file's values x scale) and that sum x dt;
- a steady case (laplace) needs a side that fixes the level; the case model refuses h = 0 given as numbers
  (solver.case.model), this the same for an h read from a file of zeros.

The case model (solver.case) checks what needs no file and no derived quantity; a NaN or Inf that appears later
is the field's own growth (solver.core.loop), not data that could not be represented.
"""

from __future__ import annotations

import numpy as np

from . import datafile, sources
from .boundary import SIDES, geometry
from .errors import InputError
from .limits import MAX_LENGTH
from .physics import time_step


def check_inputs(case) -> None:
    """InputError (one line: the field, the file or value, the fix) for the first input a run would refuse or that
    would overflow inside it."""
    ranges = {f.field: _checked(case, _with_blank(case, f)) for f in datafile.named(case)}
    _steady_level(case, ranges)
    for side in SIDES:
        _side(case, side, ranges)
    _sources(case, ranges)
    _probes(case)


def _probes(case) -> None:
    """Probes that read the plate's material: a point with a plate point around it, a region covering one (holes,
    held objects and the outside of an outline are not the plate's); heat flows through sides with linear rules
    (a nonlinear case's walls conduct with k(T) and radiate: its balance has their rates, the probes do not)."""
    from .probe_points import region_mask, stencil
    from .grid import whole

    for k, p in enumerate(case.output.probes):
        if p.kind == "point" and not stencil(case, p.at):
            raise InputError(f"output.probes.{k}.at: [{p.at[0]:g}, {p.at[1]:g}] lies off the plate's material (in a "
                             "hole, a held object or outside the outline); move it onto the plate")
        if p.kind in ("max", "min", "mean") and not region_mask(case, p.region, *whole(case)).any():
            raise InputError(f"output.probes.{k}.region: covers no point of the plate's material (only holes, held "
                             "objects or the outside of the outline); move or widen it")
        if p.kind == "heat_flow" and getattr(case, "nonlinear", False):
            raise InputError(f"output.probes.{k}: heat_flow probes are not offered for nonlinear cases (k(T), "
                             "radiation) yet; the record's energy balance gives each side's heat flow at the end")


def _with_blank(case, f):
    """The initial field's file with the points outside the plate, where it may hold NaN (solver.core.initial)."""
    if f.field != "initial":
        return f
    from dataclasses import replace

    from .initial import outside_plate

    return replace(f, blank=outside_plate(case))


def _checked(case, f) -> tuple[float, float]:
    """(smallest, largest) value of one named file, in the range its field takes."""
    lo, hi = datafile.extremes(f)
    big = float(np.finfo(case.numerics.dtype).max)
    if f.field == "physics.alpha" and not (1 / MAX_LENGTH <= lo and hi <= MAX_LENGTH):
        bad = lo if lo < 1 / MAX_LENGTH else hi
        raise InputError(f"{f.name}: {f.path} holds {bad:g}; every diffusivity must lie in [{1 / MAX_LENGTH:g}, "
                         f"{MAX_LENGTH:g}] (a material's alpha > 0)")
    if f.field.endswith(".h") and lo < 0:
        raise InputError(f"{f.name}: {f.path} holds {lo:g}; a transfer coefficient is >= 0 (0 = insulated)")
    if not f.field.startswith("physics.") and max(-lo, hi) > big:
        raise InputError(f"{f.name}: {f.path} holds {lo if -lo > hi else hi:g}, which does not fit in "
                         f"{case.numerics.dtype} (largest {big:.3g}); scale the file's values into range")
    return lo, hi


def span(case, side: str, key: str, ranges: dict) -> tuple[float, float] | None:
    """(smallest, largest) of a side value over time and along the side (None: the side has no such value)."""
    v = getattr(getattr(case.boundary, side), key, None)
    if v is None:
        return None
    if hasattr(v, "file"):
        return ranges[f"boundary.{side}.{key}"]
    values = [v] if isinstance(v, float) else [row[1] for row in getattr(v, "time", None) or v.along]
    return min(values), max(values)


def _side(case, side: str, ranges: dict) -> None:
    """The ghost terms of a side fit the dtype at every combination of its extremes (they are monotonic in each)."""
    spec = getattr(case.boundary, side)
    (dx, dy), _ = geometry(case)
    s = dy if side in ("bottom", "top") else dx
    big, dtype = float(np.finfo(case.numerics.dtype).max), case.numerics.dtype
    with np.errstate(over="ignore", invalid="ignore"):
        if spec.kind == "neumann":
            g = max(abs(x) for x in span(case, side, "flux", ranges)) * s * 3.0  # layers m = 0, 1 add (2m + 1) G h
            if not g <= big:
                raise InputError(f"boundary.{side}.flux: flux x spacing = {g / 3.0:g} does not fit in {dtype} (largest "
                                 f"{big:.3g}; spacing {s:g}); use a smaller flux")
        if spec.kind != "convective":
            return
        from .sides import convective_terms

        h, t = span(case, side, "h", ranges), span(case, side, "ambient", ranges)
        hh, tt = np.meshgrid(np.array(h), np.array(t))
        a, b = convective_terms(hh.ravel(), tt.ravel(), s)
        if not (np.all(np.isfinite(a)) and np.all(np.abs(b) <= big)):
            raise InputError(f"boundary.{side}: h up to {h[1]:g} x spacing {s:g} with ambient up to {max(map(abs, t)):g} "
                             f"gives a ghost value outside {dtype}'s range (largest {big:.3g}); use a smaller h (h x "
                             f"spacing >> 1 already holds the side at ambient) or a smaller ambient")


def _steady_level(case, ranges: dict) -> None:
    """laplace: some side fixes the level (Dirichlet, or convective with h > 0 somewhere); the case model checked
    numbers and profiles, this the files: an h read from a file of zeros is h = 0."""
    if case.physics.equation != "laplace":
        return
    kinds = {side: getattr(case.boundary, side).kind for side in SIDES}
    if any(k == "dirichlet" or (k == "convective" and span(case, side, "h", ranges)[1] > 0) for side, k in kinds.items()):
        return
    from .plate import shapes_fix_level

    if shapes_fix_level(case):
        return
    side = next(s for s, k in kinds.items() if k == "convective" and f"boundary.{s}.h" in ranges)
    f = getattr(case.boundary, side).h.file
    raise InputError(f"boundary.{side}.h.file: {f} holds only zeros (h = 0: insulated), so no side fixes the steady "
                     "state's level: laplace is then singular (u + any constant also solves it); give h > 0 somewhere, "
                     "make a side Dirichlet, or use physics.equation: heat")


def term_bound(case, k: int, ranges: dict) -> float:
    """The largest |q| source term k takes at any point (a file: its largest value x scale); the material form's as
    the update reads it, a power density over C0 (a power over the volume it is spread over)."""
    t = case.physics.source[k]
    if getattr(case.physics, "material", None) is not None:
        return _material_bound(case, k, t, ranges)
    if t.kind == "file":
        lo, hi = ranges[f"physics.source.{k}"]
        with np.errstate(over="ignore"):
            return float(abs(t.scale) * np.float64(max(-lo, hi)))
    return abs(t.amplitude if t.kind == "gaussian" else t.value)


def _material_bound(case, k: int, t, ranges: dict) -> float:
    from . import medium as M

    med = M.medium(case)
    with np.errstate(over="ignore", divide="ignore"):
        if t.kind == "file":
            lo, hi = ranges[f"physics.source.{k}"]
            bound = abs(t.factor) * np.float64(max(-lo, hi))
            if t.powers:  # a power per map cell or grid point: over the smallest cell it goes to
                (dx, dy), _ = geometry(case)
                if t.extent is not None:
                    shape = datafile.read_map(t.path, t.dataset, f"physics.source.{k}").shape
                    (x0, y0), (x1, y1) = t.extent
                    area = (x1 - x0) / shape[1] * (y1 - y0) / shape[0]
                else:
                    area = 0.25 * dx * dy  # a corner cell's quarter at the least
                bound = bound / (area * med.depth)
        elif getattr(t, "power", None) is not None:
            spread = M._bell_power(case, t) if t.kind == "gaussian" else M.deposited_volume(case, k)
            bound = abs(t.power) / spread if spread > 0 else np.inf
        else:
            bound = abs(t.amplitude if t.kind == "gaussian" else t.value)
        return float(bound / med.c0)


def _sources(case, ranges: dict) -> None:
    """Each term's values, their sum over the terms on together, and that sum x dt (heat) fit the dtype."""
    terms = case.physics.source
    if not terms:
        return
    big, dtype = float(np.finfo(case.numerics.dtype).max), case.numerics.dtype
    bound = [term_bound(case, k, ranges) for k in range(len(terms))]
    for k, q in enumerate(bound):
        if not q <= np.finfo(np.float64).max:
            lo, hi = ranges[f"physics.source.{k}"]
            raise InputError(f"physics.source.{k}.scale: {terms[k].scale:g} x the file's largest value {max(-lo, hi):g} "
                             "overflows float64; use a smaller scale or scale the file")
    heat = case.physics.equation == "heat"
    dt = time_step(case) if heat else 1.0
    factor, by = _update_factor(case, dt)
    for weighted in _sets(case, dt):
        with np.errstate(over="ignore"):
            total = float(np.sum([w * bound[k] for k, w in weighted], dtype=np.float64))
            per_step = total * factor
        if not (total <= big and per_step <= big):
            which = (f"term {weighted[0][0]} reaches" if len(weighted) == 1 else
                     f"terms {', '.join(str(k) for k, _ in weighted)} (on together) add up to")
            what = f"{by} gives {per_step:g} in the update, which" if total <= big else "which"
            raise InputError(f"physics.source: {which} {total:g} at most, {what} does not fit in {dtype} (largest "
                             f"{big:.3g}); use smaller values or amplitudes")


def _update_factor(case, dt: float) -> tuple[float, str]:
    """(what q is multiplied by in the update's source field, in words): dt (heat), 1 / (alpha (2/dx^2 + 2/dy^2))
    (laplace with one alpha: solver.core.operator.host_weights), 1 (laplace with an alpha field)."""
    if case.physics.equation == "heat":
        return dt, f"x dt = {dt:g}"
    if case.alpha_field:
        return 1.0, "as it is"
    (dx, dy), _ = geometry(case)
    with np.errstate(over="ignore", divide="ignore"):
        f = float(1.0 / (case.physics.alpha * (2.0 / dx**2 + 2.0 / dy**2)))
    return f, f"/ (alpha (2/dx^2 + 2/dy^2)) = x {f:g}"


def _sets(case, dt: float) -> set:
    """Every set of (term, weight) a step reads (solver.core.sources.step_weights): at the first step and wherever
    the weights change (solver.core.events.Plan.changes); adaptive steps: every term at once (a bound)."""
    from .events import plan_of

    plan = plan_of(case)
    if case.physics.equation != "heat" or plan.adaptive:
        return {sources.every_weight(case)}
    return {sources.step_weights(case, plan.span(s)) for s in [0, *plan.changes()]}
