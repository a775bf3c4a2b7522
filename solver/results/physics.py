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


def _side(spec) -> str:
    if spec.kind == "periodic":
        return "periodic"
    keys = {"dirichlet": ("value",), "neumann": ("flux",), "convective": ("h", "ambient")}[spec.kind]
    return spec.kind + "".join(f", {k} {_how(getattr(spec, k))}" for k in keys)


def _how(v) -> str:
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
    """`stencil validate`'s rows for the data the update will read (none for a plain case)."""
    rows = []
    if case.physics.source:
        rows.append(("sources", "; ".join(_term(t) for t in case.physics.source)))
    if case.alpha_field:
        from ..core.materials import alpha_range

        lo, hi = alpha_range(case)
        rows.append(("alpha", f"a field from {lo:g} to {hi:g} (contrast {hi / lo:.3g}); faces take harmonic means"))
    sides = {s: _side(getattr(case.boundary, s)) for s in SIDES}
    if any(not v.startswith(("dirichlet, value", "neumann, flux", "periodic")) or "table" in v or "profile" in v
           or "from" in v for v in sides.values()):
        rows.append(("sides", "; ".join(f"{s}: {v}" for s, v in sides.items())))
    if case.uses_multigrid and (case.alpha_field or case.krylov == "cg"):
        rows.append(("krylov", f"{case.krylov} (multigrid.krylov {case.multigrid.krylov})"))
    return rows
