"""The data a case puts into the update, sampled for a picture: alpha (the material map) and the source q (the
terms on at a time), on about PIXELS x PIXELS of the grid's points (solver.results.report draws them).

A heat run's sources may switch on and off (`active: [t_start, t_end]`): `phases` cuts the run's time into the
stretches over which the same terms are on, so that each is drawn at a time when it is on (a heater on for
2 <= t < 5 is drawn at t = 2, not at the run's end, when it is off)."""

from __future__ import annotations

import numpy as np

from ..case import validate_case
from ..core import sources
from ..core.grid import positions
from ..core.materials import alpha_at

PIXELS = 512


def has_maps(rec: dict) -> bool:
    physics = (rec.get("case") or {}).get("physics") or {}
    return (not isinstance(physics.get("alpha", 1.0), (int, float)) or bool(physics.get("source"))
            or bool(physics.get("regions")) or bool(physics.get("outline")))


def sampled(case, pixels: int = PIXELS):
    """Global row and column indices of about pixels x pixels points of the grid (strided)."""
    ny, nx = case.shape
    return np.arange(0, ny, max(1, ny // pixels)), np.arange(0, nx, max(1, nx // pixels))


def phases(case, t_end: float) -> list[tuple[float, float, tuple[int, ...]]]:
    """(t0, t1, the terms on for t0 <= t < t1) for every stretch of [0, t_end] over which the same terms are on,
    in time order, stretches with no term on left out; laplace: one stretch with every term. A run that ends at 0
    (no step) gives the terms on at 0."""
    if case.physics.equation != "heat":
        return [(0.0, t_end, sources.every_term(case))]
    cuts = sorted({0.0, t_end} | {t for term in case.physics.source if term.active for t in term.active
                                   if 0.0 < t < t_end})
    out: list[tuple[float, float, tuple[int, ...]]] = []
    for t0, t1 in zip(cuts, cuts[1:]) if len(cuts) > 1 else [(0.0, 0.0)]:
        terms = sources.active(case, t0)
        if out and out[-1][2] == terms and out[-1][1] == t0:
            out[-1] = (out[-1][0], t1, terms)
        elif terms:
            out.append((t0, t1, terms))
    return out


def maps(rec: dict, t: float) -> dict:
    """alpha and, for each phase of the run up to t (`phases`), q from the terms on then, at sampled points, with
    their extent and the case; `q` is the first phase's (zero where no term is ever on); and the labels of the
    pictures: the material form's conductivity k in W/(m K) and power density in W/m^3 (SI), the diffusivity form's
    alpha and heating rate; lengths and temperatures in the case's units."""
    case = validate_case(rec["case"])
    rows, cols = sampled(case)
    y, x = positions(case, rows, cols)
    alpha, scale = alpha_at(case, rows, cols), 1.0
    labels = {"material": "alpha", "q": "q (temperature per time)"}
    if case.physics.material is not None:
        from ..case.units import UnitSystem, to_si
        from ..core.medium import medium

        c0, system = medium(case).c0, UnitSystem(case.units.length, case.units.time, case.units.temperature)
        alpha, scale = alpha * c0 * to_si(1.0, "conductivity", system), c0 * to_si(1.0, "power_density", system)
        labels = {"material": "k, W/(m K)", "q": "power density, W/m^3"}
    found = [(t0, t1, scale * sources.q_at(case, terms, rows, cols)) for t0, t1, terms in phases(case, t)]
    q = found[0][2] if found else np.zeros((len(rows), len(cols)))
    return {"case": case, "alpha": alpha, "q": q, "phases": found, "extent": (x[0], x[-1], y[0], y[-1]),
            "labels": labels, "length": case.units.length, "temperature": case.units.temperature}


def outlines(rec: dict) -> tuple:
    """The plate's shapes (regions and outline: solver.case.regions) as the pictures draw their rims: ("disk",
    (cx, cy, r)), ("polygon", points (n, 2)) or ("mask", (pixels, (x0, y0, x1, y1))), case units; () in the
    diffusivity form or without shapes."""
    case = validate_case(rec["case"])
    p = case.physics
    if getattr(p, "material", None) is None:
        return ()
    from ..core import geometry as geo
    from ..core.plate import shape_of

    out = []
    for region in [*p.regions, *([p.outline] if p.outline is not None else [])]:
        s = shape_of(region)
        if isinstance(s, geo.Disk):
            out.append(("disk", (s.cx, s.cy, s.r)))
        elif isinstance(s, geo.Rectangle):
            out.append(("polygon", np.array([[s.x0, s.y0], [s.x1, s.y0], [s.x1, s.y1], [s.x0, s.y1]])))
        elif isinstance(s, geo.Polygon):
            out.append(("polygon", np.asarray(s.array)))
        else:
            (x0, y0), (x1, y1) = s.extent
            out.append(("mask", (s.bits.astype(float), (x0, y0, x1, y1))))
    return tuple(out)
