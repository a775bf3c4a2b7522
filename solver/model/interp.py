"""Interpolation of measured tables: log-log between points, clamped (or linear in size) beyond them."""

from __future__ import annotations

import math


def loglog(table, x: float) -> float:
    """y at x from sorted (x, y) points: log-log between neighbours; below the first, its y (latency); above
    the last, y grows in proportion to x (a rate)."""
    pts = sorted(table)
    if x <= pts[0][0]:
        return pts[0][1]
    if x >= pts[-1][0]:
        return pts[-1][1] * x / pts[-1][0]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            f = math.log(x / x0) / math.log(x1 / x0)
            return math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))
    raise AssertionError("unreachable")


def loglin(table, x: float) -> float:
    """y at x from sorted (x, y) points, linear in log x between neighbours, clamped at both ends."""
    pts = sorted(table)
    if x <= pts[0][0]:
        return pts[0][1]
    if x >= pts[-1][0]:
        return pts[-1][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * math.log(x / x0) / math.log(x1 / x0)
    raise AssertionError("unreachable")
