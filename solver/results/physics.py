"""The record's `physics` section: what the update read beyond u and how the run took its steps (the paths the
new physics forces or keeps), in plain words and figures."""

from __future__ import annotations

import numpy as np

SIDES = ("bottom", "top", "left", "right")


def physics_record(case, resources: dict, tiles: bool) -> dict:
    """Sources, alpha (a number or a field: its range and contrast), each side's kind and how its values vary,
    the update's form, the steps' path and, for float32 with a large contrast, a note on what it resolves."""
    from ..core.materials import alpha_range

    lo, hi = alpha_range(case)
    out = {"sources": [_term(t) for t in case.physics.source],
           "alpha": {"field": case.alpha_field, "min": lo, "max": hi, "contrast": hi / lo},
           "sides": {s: _side(getattr(case.boundary, s)) for s in SIDES},
           "update": _form(case), "steps": _path(case, resources, tiles)}
    eps = float(np.finfo(case.numerics.dtype).eps)
    if hi / lo * eps > 1e-3:
        out["note"] = (f"{case.numerics.dtype} with alpha's contrast {hi / lo:.3g}: fluxes through the weakest faces are "
                       f"resolved to about contrast x eps = {hi / lo * eps:.1e} of the field; use numerics.dtype: float64")
    if case.uses_multigrid:
        out["multigrid"] = {"krylov": case.krylov, "coarse operators": "face coefficients averaged: harmonic along the "
                            "flux, overlap-weighted across" if case.alpha_field else "re-discretised (one alpha)",
                            "transfers": "following the coefficients (resistance-linear)" if case.alpha_field else "linear"}
    return out


def _term(t) -> str:
    window = f", on for {t.active[0]:g} <= t < {t.active[1]:g}" if t.active else ""
    where = f" {t.path}" + (f" over {t.extent}" if getattr(t, "extent", None) else "") if t.kind == "file" else ""
    return f"{t.kind}{where}{window}"


def _side(spec, case=None) -> str:
    if spec.kind == "periodic":
        return "periodic"
    keys = {"dirichlet": ("value",), "neumann": ("flux",), "convective": ("h", "ambient")}[spec.kind]
    text = spec.kind + "".join(f", {k} {_how(getattr(spec, k), _si(case, k))}" for k in keys)
    if getattr(spec, "emissivity", 0.0) > 0:
        to = "the ambient" if spec.surroundings is None else f"{spec.surroundings:g}"
        text += f", radiating: emissivity {spec.emissivity:g} to {to}"
    return text


def _si(case, key: str):
    """(factor to SI, SI unit) of a side value shown in SI (the material form's h and flux), or None."""
    if case is None or getattr(case.physics, "material", None) is None or key not in ("h", "flux"):
        return None
    from ..case.units import UnitSystem, to_si

    system = UnitSystem(case.units.length, case.units.time, case.units.temperature)
    dim, unit = ("heat_transfer", "W/(m^2 K)") if key == "h" else ("heat_flux", "W/m^2")
    return to_si(1.0, dim, system), unit


def _how(v, si=None) -> str:
    if isinstance(v, float) and si is not None:
        return f"{v * si[0]:g} {si[1]}"
    if isinstance(v, float):
        return f"{v:g}"
    if hasattr(v, "time"):
        return f"a table in time ({len(v.time)} points)"
    if hasattr(v, "along"):
        return f"a profile along the side ({len(v.along)} points)"
    return f"from {v.file}"


def _form(case) -> str:
    parts = ["flux form with face coefficients (alpha a field)" if case.alpha_field else "constant coefficients"]
    if case.physics.source:
        parts.append("a source term added last")
    return ", ".join(parts)


def _path(case, resources: dict, tiles: bool) -> str:
    """How the steps were taken, and why where the physics decided it."""
    from ..core.sides import varies_in_time

    if case.uses_multigrid:
        return "multigrid solves (every sweep a plain step with a halo exchange)"
    k = resources.get("time_tile") or 1
    if k > 1 or tiles:
        return f"time tiles of up to {k} steps (the source and coefficient fields read at every level)"
    if varies_in_time(case):
        return "plain steps, one at a time: side values vary in time (the ghosts change every step)"
    kinds = {getattr(case.boundary, s).kind for s in SIDES}
    if kinds & {"neumann", "convective"}:
        return "plain steps: Neumann and convective sides refill their ghosts from every new field"
    return "plain steps"


def physics_rows(case) -> list[tuple[str, str]]:
    """`stencil validate`'s rows for the data the update will read (none for a plain case); the material form's in
    SI (materials, each source's power and the total, the faces' cooling)."""
    if getattr(case.physics, "material", None) is not None:
        return material_rows(case) + _side_rows(case)
    rows = []
    if case.physics.source:
        rows.append(("sources", "; ".join(_term(t) for t in case.physics.source)))
    if case.alpha_field:
        from ..core.materials import alpha_range

        lo, hi = alpha_range(case)
        rows.append(("alpha", f"a field from {lo:g} to {hi:g} (contrast {hi / lo:.3g}); faces take harmonic means"))
    return rows + _side_rows(case)


def _side_rows(case) -> list[tuple[str, str]]:
    rows = []
    sides = {s: _side(getattr(case.boundary, s), case) for s in SIDES}
    if any(not v.startswith(("dirichlet, value", "neumann, flux", "periodic")) or "table" in v or "profile" in v
           or "from" in v for v in sides.values()) or getattr(case.physics, "material", None) is not None:
        rows.append(("sides", "; ".join(f"{s}: {v}" for s, v in sides.items())))
    if case.uses_multigrid and (case.alpha_field or case.krylov == "cg"):
        rows.append(("krylov", f"{case.krylov} (multigrid.krylov {case.multigrid.krylov})"))
    return rows


def material_rows(case) -> list[tuple[str, str]]:
    """The material form in SI: each material used (k, C = rho c_p), the plate's thickness, each source's power
    as the grid deposits it and the total, the faces' cooling."""
    from ..case.units import UnitSystem, to_si
    from ..core.medium import medium, source_power, stated_power

    system = UnitSystem(case.units.length, case.units.time, case.units.temperature)
    table, med = case.material_table(), medium(case)
    laws = case.conductivity_laws()
    mats = "; ".join(f"{name} k {to_si(k, 'conductivity', system):.4g} W/(m K)"
                     + (f" at 300 K (k(T): {laws[name].describe(case.units.temperature)})" if name in laws else "")
                     + f", C {to_si(c, 'heat_capacity', system):.4g} J/(m^3 K)" for name, (k, c) in table.items())
    differ = len({c for _, c in table.values()}) > 1
    why = "capacities differ" if differ else "cut cells' open volumes"
    rows = [("materials", mats + (f" (a capacity field: {why})" if med.capacity_field else ""))]
    thick = (f"{to_si(case.physics.thickness, 'length', system) * 1e3:.4g} mm" if case.physics.thickness
             else "none given: powers and heat flows per unit thickness")
    rows.append(("thickness", thick))
    if case.physics.source:
        unit = "W" if case.physics.thickness else f"W per {case.units.length} of thickness"
        per = []
        total = 0.0
        for k, t in enumerate(case.physics.source):
            watts = to_si(source_power(case, k), "power", system)
            total += watts
            stated = stated_power(t)
            said = f" (stated {to_si(stated, 'power', system):.6g})" if stated is not None else ""
            per.append(f"{t.name or f'{t.kind} {k}'} {watts:.6g}{said}{_window(t)}")
        rows.append(("power", f"{total:.6g} {unit} in all: " + "; ".join(per)))
    if case.physics.regions or case.physics.outline is not None:
        rows.append(("shapes", shape_text(case)))
    if case.physics.faces is not None:
        f = case.physics.faces
        rows.append(("faces", f"{f.faces} face(s) cooled, h {to_si(f.h, 'heat_transfer', system):.4g} W/(m^2 K) to "
                              f"{f.ambient:g} {case.units.temperature}"))
    return rows


def shape_text(case) -> str:
    """Each region and the outline as the grid takes it: role, area on the grid against the shape's exact area,
    the smallest cut fraction (solver.core.plate.shape_table)."""
    from ..core.plate import shape_table

    L = case.units.length
    parts = []
    for r in shape_table(case):
        exact = f" (exact {r['area']:.6g})" if r["area"] is not None else " (the shape reaches beyond the plate)"
        what = "theta" if r["role"] == "held" or r["role"] == "outline" and r["index"] < 0 and _fixed(case) else \
            "fraction"
        cut = f", smallest cut {what} {r['fraction']:.3g}" if r["fraction"] is not None else ""
        name = r["label"] if r["label"] == r["role"] else f"{r['label']} {r['role']}"
        parts.append(f"{name}: {r['grid_area']:.6g} {L}^2 on the grid{exact}{cut}")
    return "; ".join(parts)


def _fixed(case) -> bool:
    return case.physics.outline is not None and case.physics.outline.rim.kind == "dirichlet"


def _window(t) -> str:
    return f", on for {t.active[0]:g} <= t < {t.active[1]:g}" if t.active else ""
