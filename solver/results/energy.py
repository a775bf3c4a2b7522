"""The record's energy balance in words (solver.core.balance computes it): one table row for the run summary,
a section for record.md."""

from __future__ import annotations


def energy_row(e: dict | None) -> tuple[str, str] | None:
    """("energy balance", text) for the summary table, or None."""
    if not e:
        return None
    if e["kind"] == "steady":
        sides = ", ".join(f"{s} {v:+.4g}" for s, v in e["sides"].items())
        return ("energy balance", f"rates: sources {e['sources']:+.4g}, sides {sides or 'none'}; they leave "
                                  f"{e['imbalance']:+.3g} ({e['relative']:.1e} of the terms: the residual's share)")
    head = f"change {e['change']:+.4g} = sources {e['sources']:+.4g}"
    if not e["sides_observed"]:
        return ("energy balance", f"{head} + sides {e['sides_total']:+.4g} (sides not seen step by step: batched "
                                  "steps; their sum is what the change leaves)")
    sides = ", ".join(f"{s} {v:+.4g}" for s, v in e["sides"].items())
    closes = ("closes to rounding" if e["closed"] else "does NOT close to rounding") if e["closed"] is not None else \
        "closes to the solves' tolerance"
    return ("energy balance", f"{head} + sides ({sides or 'none'}); left over {e['imbalance']:+.2e} "
                              f"(bound {e['bound']:.1e}: {closes})")


def energy_lines(e: dict | None) -> list[str]:
    """record.md's section."""
    if not e:
        return []
    lines = ["## Energy balance", "", "E = sum(u) dx dy; sources and sides add to it (solver/core/balance.py).", "",
             "| term | value |", "|---|---|"]
    for key in ("initial", "final", "change", "sources", "sides_total", "imbalance", "relative", "bound", "closed",
                "steps", "sides_observed"):
        if key in e and e[key] is not None:
            lines.append(f"| {key} | {e[key]} |")
    for side, v in (e.get("sides") or {}).items():
        lines.append(f"| side {side} | {v} |")
    if e.get("note"):
        lines += ["", e["note"]]
    return lines + [""]
