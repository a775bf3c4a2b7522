"""The record's energy balance in words (solver.core.balance computes it): one table row for the run summary,
a section for record.md."""

from __future__ import annotations


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
                                  f"leave {e['imbalance']:+.3g} ({e['relative']:.1e} of the terms" +
                                  (f"; {bound_text(e)})" if "total_bound" in e else ": the residual's share)"))
    unit = f" {u['energy']}" if u else ""
    head = f"change{unit} {e['change']:+.4g} = sources {e['sources']:+.4g}"
    if not e["sides_observed"]:
        return ("energy balance", f"{head} + sides {e['sides_total']:+.4g} (sides not seen step by step: batched "
                                  "steps; their sum is what the change leaves)")
    sides = ", ".join(f"{s} {v:+.4g}" for s, v in e["sides"].items()) + faces
    return ("energy balance", f"{head} + sides ({sides or 'none'}); left over {e['imbalance']:+.2e} ({bound_text(e)})")


def bound_text(e: dict) -> str:
    """What bounds the left-over of the balance, and whether it holds: rounding alone (explicit steps: 8 ulps of
    sum |u| a step), or rounding plus what the solves' residuals can leave (solver.results.record.energy_bounds)."""
    if "total_bound" in e:
        what = "the final residual" if e["kind"] == "steady" else "the solves' residuals"
        return (f"bound {e['total_bound']:.2e} = rounding {e['rounding_bound']:.1e} + {what} "
                f"{e['residual_bound']:.1e} ({e['residual_bound_how']}): " + ("holds" if e["holds"] else "EXCEEDED"))
    if e.get("closed") is None:
        return f"rounding bound {e['bound']:.1e}; what the solves' residuals leave is not bounded in this record"
    return f"bound {e['bound']:.1e}, rounding: " + ("holds, closes to rounding" if e["closed"] else
                                                    "EXCEEDED, does NOT close to rounding")


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
                "closed", "residual_bound", "rounding_bound", "total_bound", "holds", "steps", "sides_observed"):
        if key in e and e[key] is not None:
            lines.append(f"| {key} | {e[key]} |")
    for side, v in (e.get("sides") or {}).items():
        lines.append(f"| side {side} | {v} |")
    for label, v in (e.get("rims") or {}).items():
        lines.append(f"| rim {label} | {v} |")
    if e.get("note"):
        lines += ["", e["note"]]
    return lines + [""]
