"""The answers a run gives in the problem's own units: the hottest and coldest point and where, each material's and
each named region's mean and maximum, the power of each source, the heat through each side and the faces, and (from
solver.core.balance) the energy terms. Temperatures in the case's temperature unit; powers in W and energies in J
in the material form (the diffusivity form has no heat capacity: its powers are in temperature x area per time).

Each rank reduces its own block (`partial`), rank 0 merges the parts (`merge`) and writes them out (`section`).
"""

from __future__ import annotations

import numpy as np

from ..core.grid import positions


def partial(case, block, u: np.ndarray) -> dict:
    """This rank's part: the field's extremes with their positions, and per material and named region the sums a mean
    needs and the extremes (a point belongs to the material at its centre; a region holds the points it covers)."""
    rows, cols = np.arange(*block.rows), np.arange(*block.cols)
    if u.size == 0:
        return {"groups": {}}
    from ..core.plate import blanked

    off = blanked(case, rows, cols) if getattr(case.physics, "material", None) is not None else None
    plate = np.ones(u.shape, bool) if off is None else ~off
    if not plate.any():
        return {"groups": {}}
    y, x = positions(case, rows, cols)
    out = {"min": _extreme(np.where(plate, u, np.inf), np.argmin, x, y),
           "max": _extreme(np.where(plate, u, -np.inf), np.argmax, x, y), "groups": {}}
    for name, mask in _groups(case, rows, cols, x, y):
        mask = mask & plate
        if mask.any():
            v = u[mask]
            out["groups"][name] = {"sum": float(v.sum()), "count": int(v.size), "max": float(v.max()),
                                   "min": float(v.min())}
    return out


def _extreme(u, pick, x, y) -> dict:
    i, j = np.unravel_index(int(pick(u)), u.shape)
    return {"value": float(u[i, j]), "x": float(x[j]), "y": float(y[i])}


def _groups(case, rows, cols, x, y):
    """(name, mask) of every material (material form) and every named region or source, by the points' centres."""
    from ..core.medium import covers_points

    p = case.physics
    if getattr(p, "material", None) is not None:
        owner = np.full((len(rows), len(cols)), -1, dtype=np.int64)  # the material region that painted each point last
        for k, r in enumerate(p.regions):
            if r.material is not None:
                owner[covers_points(r, x, y)] = k
        names = [p.material] + [r.material or "" for r in p.regions]  # names[k + 1]: the material of owner k
        for name in dict.fromkeys(n for n in names if n):
            yield f"material {name}", np.isin(owner, [k - 1 for k, n in enumerate(names) if n == name])
        for k, r in enumerate(p.regions):
            if r.name and r.material is not None:
                yield f"region {r.name}", owner == k
    for t in p.source:
        if getattr(t, "name", None) and t.kind in ("rectangle", "disk"):
            yield f"source {t.name}", covers_points(t, x, y)


def merge(parts: list[dict]) -> dict:
    """Rank 0: the parts of every rank as one."""
    parts = [p for p in parts if "min" in p]
    out = {"min": min((p["min"] for p in parts), key=lambda e: e["value"]),
           "max": max((p["max"] for p in parts), key=lambda e: e["value"]), "groups": {}}
    for p in parts:
        for name, g in p["groups"].items():
            acc = out["groups"].setdefault(name, {"sum": 0.0, "count": 0, "max": -np.inf, "min": np.inf})
            acc["sum"] += g["sum"]
            acc["count"] += g["count"]
            acc["max"], acc["min"] = max(acc["max"], g["max"]), min(acc["min"], g["min"])
    return out


def section(case, merged: dict, energy: dict | None) -> dict:
    """The record's `answers`: temperatures in the case's unit, powers in W, energies in J (material form)."""
    from ..core.medium import medium, source_power, stated_power

    med = medium(case)
    unit_t = case.units.temperature
    out = {"temperature_unit": unit_t,
           "max": {**merged["max"], "unit": unit_t}, "min": {**merged["min"], "unit": unit_t},
           "length_unit": case.units.length,
           "groups": {name: {"mean": g["sum"] / g["count"], "max": g["max"], "min": g["min"], "points": g["count"]}
                      for name, g in merged["groups"].items()}}
    if med.form != "material":
        return out
    power = _to_watts(case)
    out["per_unit_thickness"] = med.thickness is None
    out["power_unit"] = "W" if med.thickness else "W per " + case.units.length + " of thickness"
    out["sources"] = [{"term": k, "name": getattr(t, "name", None), "kind": t.kind,
                       "power": power * source_power(case, k),
                       "stated": None if stated_power(t) is None else power * stated_power(t),
                       "active": t.active} for k, t in enumerate(case.physics.source)]
    out["total_power"] = sum(s["power"] for s in out["sources"])
    rates = (energy or {}).get("final_rates") if energy else None
    if rates:
        out["heat_flows"] = {k: power * v for k, v in rates.items()}
        out["heat_flows_note"] = "the heat entering through each side and the faces (negative: leaving), at the final field"
    return out


def _to_watts(case) -> float:
    """One case unit of power (J per the case's time unit) in W."""
    from ..case.units import UnitSystem

    system = UnitSystem(case.units.length, case.units.time, case.units.temperature)
    return 1.0 if case.units.time == "s" else system.factor("power", "W")


def rows(answers: dict | None) -> list[tuple[str, str]]:
    """The run summary's rows (solver.results.summary)."""
    if not answers:
        return []
    t = answers["temperature_unit"]
    hi, lo = answers["max"], answers["min"]
    L = answers["length_unit"]
    out = [("temperature", f"{lo['value']:.6g} to {hi['value']:.6g} {t}; hottest at (x, y) = ({hi['x']:.4g}, "
                           f"{hi['y']:.4g}) {L}")]
    mats = {k[len("material "):]: g for k, g in answers["groups"].items() if k.startswith("material ")}
    if len(mats) > 1:
        out.append(("materials", "; ".join(f"{n} mean {g['mean']:.4g}, max {g['max']:.4g}" for n, g in mats.items())
                    + f" {t}"))
    named = {k: g for k, g in answers["groups"].items() if not k.startswith("material ")}
    if named:
        out.append(("named", "; ".join(f"{n} mean {g['mean']:.4g}, max {g['max']:.4g}" for n, g in named.items())
                    + f" {t}"))
    if "sources" in answers and answers["sources"]:
        unit = answers["power_unit"]
        out.append(("power", f"{answers['total_power']:.6g} {unit} in: " + "; ".join(
            f"{s['name'] or s['kind'] + ' ' + str(s['term'])} {s['power']:.4g}" for s in answers["sources"])))
    if answers.get("heat_flows"):
        unit = answers["power_unit"]
        out.append(("heat flows", ", ".join(f"{k} {v:+.4g}" for k, v in answers["heat_flows"].items())
                    + f" {unit} (in > 0, final field)"))
    return out


def lines(answers: dict | None) -> list[str]:
    """record.md's section."""
    if not answers:
        return []
    t, L = answers["temperature_unit"], answers["length_unit"]
    out = ["## Answers", "", f"Temperatures in {t}, positions in {L}"
           + (f", powers in {answers['power_unit']}." if "power_unit" in answers else "."), "",
           "| quantity | value | where |", "|---|---|---|",
           f"| hottest | {answers['max']['value']:.6g} | ({answers['max']['x']:.5g}, {answers['max']['y']:.5g}) |",
           f"| coldest | {answers['min']['value']:.6g} | ({answers['min']['x']:.5g}, {answers['min']['y']:.5g}) |", ""]
    if answers["groups"]:
        out += ["| group | mean | min | max | points |", "|---|---|---|---|---|"]
        out += [f"| {n} | {g['mean']:.6g} | {g['min']:.6g} | {g['max']:.6g} | {g['points']} |"
                for n, g in answers["groups"].items()]
        out.append("")
    if answers.get("sources"):
        out += ["| source | kind | deposited | stated |", "|---|---|---|---|"]
        out += [f"| {s['name'] or s['term']} | {s['kind']} | {s['power']:.6g} | "
                f"{'' if s['stated'] is None else format(s['stated'], '.6g')} |" for s in answers["sources"]]
        out.append("")
    if answers.get("heat_flows"):
        out += ["| heat flow in (final field) | value |", "|---|---|"]
        out += [f"| {k} | {v:+.6g} |" for k, v in answers["heat_flows"].items()] + [""]
    return out
