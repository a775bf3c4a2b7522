"""The record's energy balance in words (solver.core.balance computes it): one table row for the run summary,
a section for record.md."""

from __future__ import annotations


def units(case) -> dict | None:
    """The units of the balance's terms: J and W in the material form (per unit thickness without physics.thickness),
    None in the diffusivity form (temperature x area, and per time)."""
    if getattr(case.physics, "material", None) is None:
        return None
    per = "" if case.physics.thickness else f" per {case.units.length} of thickness"
    power = "W" if case.units.time == "s" else f"J/{case.units.time}"
    return {"energy": "J" + per, "power": power + per}


def energy_row(e: dict | None) -> tuple[str, str] | None:
    """("energy balance", text) for the summary table, or None."""
    if not e:
        return None
    u = e.get("units") or {}
    faces = (f", faces {e['faces']:+.4g}" if e.get("faces") is not None else "") + "".join(
        f", rim {k} {v:+.4g}" for k, v in (e.get("rims") or {}).items())
    if e["kind"] == "steady":
        sides = ", ".join(f"{s} {v:+.4g}" for s, v in e["sides"].items())
        unit = f" {u['power']}" if u else ""
        return ("energy balance", f"rates{unit}: sources {e['sources']:+.4g}, sides {sides or 'none'}{faces}; they "
                                  f"leave {e['imbalance']:+.3g} ({e['relative']:.1e} of the terms: the residual's share)")
    unit = f" {u['energy']}" if u else ""
    head = f"change{unit} {e['change']:+.4g} = sources {e['sources']:+.4g}"
    if not e["sides_observed"]:
        return ("energy balance", f"{head} + sides {e['sides_total']:+.4g} (sides not seen step by step: batched "
                                  "steps; their sum is what the change leaves)")
    sides = ", ".join(f"{s} {v:+.4g}" for s, v in e["sides"].items()) + faces
    closes = ("closes to rounding" if e["closed"] else "does NOT close to rounding") if e["closed"] is not None else \
        "closes to the solves' tolerance"
    return ("energy balance", f"{head} + sides ({sides or 'none'}); left over {e['imbalance']:+.2e} "
                              f"(bound {e['bound']:.1e}: {closes})")


def energy_lines(e: dict | None) -> list[str]:
    """record.md's section."""
    if not e:
        return []
    u = e.get("units")
    what = (f"E = the heat content sum(C u) dx dy times the thickness, in {u['energy']} (rates in {u['power']})" if u
            else "E = sum(u) dx dy")
    lines = ["## Energy balance", "", f"{what}; sources, sides and faces add to it (solver/core/balance.py).", "",
             "| term | value |", "|---|---|"]
    for key in ("initial", "final", "change", "sources", "faces", "sides_total", "imbalance", "relative", "bound",
                "closed", "steps", "sides_observed"):
        if key in e and e[key] is not None:
            lines.append(f"| {key} | {e[key]} |")
    for side, v in (e.get("sides") or {}).items():
        lines.append(f"| side {side} | {v} |")
    for label, v in (e.get("rims") or {}).items():
        lines.append(f"| rim {label} | {v} |")
    if e.get("note"):
        lines += ["", e["note"]]
    return lines + [""]
