"""The data a case puts into the update, drawn beside the field it gave: alpha (the material map, on a log
scale where it is a field) and the source q (the terms on at the last snapshot), for `stencil report`."""

from __future__ import annotations

import numpy as np

from ..config import validate_case
from ..core import sources
from ..core.grid import positions
from ..core.materials import alpha_at

PIXELS = 512


def has_maps(rec: dict) -> bool:
    physics = (rec.get("case") or {}).get("physics") or {}
    return not isinstance(physics.get("alpha", 1.0), (int, float)) or bool(physics.get("source"))


def sampled(case, pixels: int = PIXELS):
    """Global row and column indices of about pixels x pixels points of the grid (strided)."""
    ny, nx = case.shape
    return np.arange(0, ny, max(1, ny // pixels)), np.arange(0, nx, max(1, nx // pixels))


def fig_maps(rec: dict, views: dict):
    """alpha, q and the last snapshot side by side (y up, as in ParaView)."""
    from matplotlib.colors import LogNorm

    from .report import new_figure, suptitle

    case = validate_case(rec["case"])
    rows, cols = sampled(case)
    y, x = positions(case, rows, cols)
    extent = (x[0], x[-1], y[0], y[-1])
    alpha = alpha_at(case, rows, cols)
    t_last = views["times"][1]
    terms = sources.active(case, t_last) if case.physics.equation == "heat" else sources.every_term(case)
    q = sources.q_at(case, terms, rows, cols)
    fig, axes = new_figure(3, 4.4)
    a = axes[0].imshow(alpha, origin="lower", extent=extent, cmap="viridis", interpolation="nearest",
                       norm=LogNorm() if alpha.max() > alpha.min() else None)
    fig.colorbar(a, ax=axes[0], label="alpha (log scale)" if alpha.max() > alpha.min() else "alpha", shrink=0.8)
    axes[0].set(title="material map: alpha", xlabel="x (case units)", ylabel="y (case units)")
    s = axes[1].imshow(q, origin="lower", extent=extent, cmap="magma", interpolation="nearest")
    fig.colorbar(s, ax=axes[1], label="q (u per unit time)", shrink=0.8)
    axes[1].set(title=f"source q at t = {t_last:.3g}" if case.physics.equation == "heat" else "source q",
                xlabel="x (case units)")
    from .report import full_view

    u = axes[2].imshow(full_view(views["last"], PIXELS), origin="lower", extent=views["extent"], cmap="inferno",
                       interpolation="nearest")
    fig.colorbar(u, ax=axes[2], label="u (case units)", shrink=0.8)
    when = f"at step {views['steps'][1]}" if case.physics.equation == "heat" else f"after {views['steps'][1]} iterations"
    axes[2].set(title=f"u {when}", xlabel="x (case units)")
    suptitle(fig, f"{rec['input']['name']}: what the update reads (alpha, q) and the field it gave", fontsize=9)
    return fig
