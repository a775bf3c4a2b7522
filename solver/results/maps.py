"""The data a case puts into the update, sampled for a picture: alpha (the material map) and the source q (the
terms on at a time), on about PIXELS x PIXELS of the grid's points (solver.results.report draws them)."""

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
            or bool(physics.get("regions")))


def sampled(case, pixels: int = PIXELS):
    """Global row and column indices of about pixels x pixels points of the grid (strided)."""
    ny, nx = case.shape
    return np.arange(0, ny, max(1, ny // pixels)), np.arange(0, nx, max(1, nx // pixels))


def maps(rec: dict, t: float) -> dict:
    """alpha and q (the terms on at t; every term for laplace) at sampled points, with their extent and the case, and
    the labels of the pictures: the material form's conductivity k in W/(m K) and power density in W/m^3 (SI), the
    diffusivity form's alpha and heating rate; lengths and temperatures in the case's units."""
    case = validate_case(rec["case"])
    rows, cols = sampled(case)
    y, x = positions(case, rows, cols)
    terms = sources.active(case, t) if case.physics.equation == "heat" else sources.every_term(case)
    alpha, q = alpha_at(case, rows, cols), sources.q_at(case, terms, rows, cols)
    labels = {"material": "alpha", "q": "q (temperature per time)"}
    if case.physics.material is not None:
        from ..case.units import UnitSystem, to_si
        from ..core.medium import medium

        c0, system = medium(case).c0, UnitSystem(case.units.length, case.units.time, case.units.temperature)
        alpha, q = alpha * c0 * to_si(1.0, "conductivity", system), q * c0 * to_si(1.0, "power_density", system)
        labels = {"material": "k, W/(m K)", "q": "power density, W/m^3"}
    return {"case": case, "alpha": alpha, "q": q, "extent": (x[0], x[-1], y[0], y[-1]), "labels": labels,
            "length": case.units.length, "temperature": case.units.temperature}
