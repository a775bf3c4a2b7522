"""The boundary rules of every multigrid level: the case's on the finest (solver.core.boundary.make_fill), the
error's on the coarse ones: the same kinds with zero values and fluxes, and on a convective side the gain of
the level's own spacing, -du/dn = h u at its wall (h evaluated at the level's points along the side)."""

from __future__ import annotations

import numpy as np

from ..core.boundary import AXIS_SIDES, BLOCK_SIDE, SIDES, Fill, Rule, along_positions
from ..core.sides import at_positions, convective_terms, per_conductivity, wall_conductivity_at
from .levels import Axis, Level


def level_fill(case, level: Level, block, depth: int, t: float = 0.0) -> Fill:
    """Homogeneous rules for `block` of `level` (ghost layers `depth` deep)."""
    rules = []
    for side in SIDES:
        if block.neighbours[BLOCK_SIDE[side]] is not None:
            continue
        spec = getattr(case.boundary, side)
        gain = 1.0
        if spec.kind == "convective":
            along, across = (level.x, level.y) if side in AXIS_SIDES["y"] else (level.y, level.x)
            start, count = (block.cols[0], block.nx) if side in AXIS_SIDES["y"] else (block.rows[0], block.ny)
            idx = np.clip(start - depth + np.arange(count + 2 * depth), 0, along.n - 1)
            gain = side_gain(case, side, spec, along, across, idx, t)
        rules.append(Rule(side, spec.kind, 0.0, gain))
    return Fill(tuple(rules), case.numerics.dtype, depth)


def side_gain(case, side: str, spec, along: Axis, across: Axis, idx: np.ndarray, t: float):
    """A convective side's gain at points `idx` of the level's axis along the side (its spacing across)."""
    s = (float(along.offsets[0]) + idx) * along.h
    n = case.grid.nx if side in AXIS_SIDES["y"] else case.grid.ny
    grid_s = along_positions(case, side, np.arange(n))
    h = at_positions(spec, side, "h", t, s, grid_s)
    if per_conductivity(case, side, "h"):
        h = h / wall_conductivity_at(case, side, s, grid_s)
    return convective_terms(h, 0.0, across.h)[0]


def dense_gains(case, level: Level, t: float = 0.0) -> dict:
    """side -> the gain at each point along it (the coarsest level's dense operator)."""
    out = {}
    for side in SIDES:
        spec = getattr(case.boundary, side)
        if spec.kind == "convective":
            along, across = (level.x, level.y) if side in AXIS_SIDES["y"] else (level.y, level.x)
            out[side] = side_gain(case, side, spec, along, across, np.arange(along.n), t)
    return out
