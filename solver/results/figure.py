"""The report's figures' one frame (solver.results.report draws the run's, solver.results.probes the probes')."""

from __future__ import annotations


def new_figure(ncols: int = 1, width: float = 6.4):
    """A constrained-layout figure of `ncols` panels in a row (matplotlib's object API: no pyplot state)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols if ncols > 1 else width, 4.4), layout="constrained")
    axes = [fig.add_subplot(1, ncols, k + 1) for k in range(ncols)]
    return fig, axes
