"""Shapes against grid cells: the fraction of each point's cell a shape covers (the material form's capacities and
deposited powers, solver.core.medium).

TEMPORARY: rectangles exact, disks by sub-sampling cut cells; to be replaced by solver.core.geometry (exact).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Rectangle:
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class Disk:
    cx: float
    cy: float
    r: float


def cell_fractions_of(shape, x0, x1, y0, y1) -> np.ndarray:
    """Fraction of each cell [x0[j], x1[j]] x [y0[i], y1[i]] covered by shape: (len(y0), len(x0))."""
    w, h = x1 - x0, y1 - y0
    if isinstance(shape, Rectangle):
        fx = np.clip(np.minimum(x1, shape.x1) - np.maximum(x0, shape.x0), 0.0, None) / np.where(w > 0, w, 1.0)
        fy = np.clip(np.minimum(y1, shape.y1) - np.maximum(y0, shape.y0), 0.0, None) / np.where(h > 0, h, 1.0)
        return np.outer(fy, fx)
    out = np.zeros((len(y0), len(x0)))
    n = 32
    t = (np.arange(n) + 0.5) / n
    for i in range(len(y0)):
        if y1[i] < shape.cy - shape.r or y0[i] > shape.cy + shape.r:
            continue
        ys = y0[i] + t * h[i]
        xs = x0[:, None] + t[None, :] * w[:, None]  # (cols, n)
        inside = ((xs[:, None, :] - shape.cx) ** 2 + (ys[None, :, None] - shape.cy) ** 2) <= shape.r ** 2
        out[i] = inside.mean(axis=(1, 2))
    return out
