"""The probes' chart of a run report (`stencil report DIR`): each probe of probes.h5 against time.

Values of the field (points, a region's max, min or mean) share one panel, heat flows through the sides (another
unit: W in the material form, u x area per unit time in the diffusivity form) a second one, each axis with the
unit probes.h5 gives; a series of few samples is drawn with its points marked, and the line styles cycle with the colours (a heater's point
and the plate's maximum often coincide).
"""

from __future__ import annotations

from pathlib import Path

CAPTION = "Each probe against time (probes.h5): values of u, and heat entering through sides per unit time"
STYLES = ("-", "--", ":", "-.")  # line styles in turn with the colours, so that coinciding probes stay apart


def probe_figures(d: Path) -> dict:
    """{"probes.png": the figure} where the run in `d` wrote probes.h5 with samples, else {}."""
    path = Path(d) / "probes.h5"
    if not path.exists():
        return {}
    from ..io.probes import read_probes_arrays

    data = read_probes_arrays(path)
    if not len(data["time"]):
        return {}
    return {"probes.png": fig_probes(data)}


def fig_probes(data: dict):
    """data: read_probes_arrays's time, step, and per probe (kind, values)."""
    from .figure import new_figure

    flows = {k: v for k, v in data["probes"].items() if v[0] == "heat_flow"}
    values = {k: v for k, v in data["probes"].items() if v[0] != "heat_flow"}
    units = data.get("units", {})

    def unit(group) -> str:
        found = {units.get(name, "") for name in group} - {""}
        return f" ({found.pop()})" if len(found) == 1 else ""

    panels = [(name + unit(group), group) for name, group in
              ((("temperature" if unit(values) else "u"), values),
               (("heat in" if unit(flows) else "heat in per unit time"), flows)) if group]
    fig, axes = new_figure(len(panels), 5.2 if len(panels) > 1 else 6.4)
    t = data["time"]
    marker = "o" if len(t) <= 40 else None
    for ax, (label, group) in zip(axes, panels):
        for k, (name, (kind, v)) in enumerate(group.items()):  # (styles cycle too: a curve that lies on another,
            ax.plot(t, v, STYLES[k % len(STYLES)], marker=marker, markersize=3, label=f"{name} ({kind})")  # shows)
        ax.set_xlabel("time" + (f" ({units['time']})" if units.get("time") else ""))
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return fig
