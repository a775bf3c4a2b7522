"""Integrals across boxes of what a horizontal line meets: the series conductance of a face's lines, the painted
lengths of a cell's lines. The integrand is a function of the lengths (per shape painted in order) along the
line at height y within [xa, xb]; they change smoothly with y between the heights where a shape's outline turns,
ends or crosses the box's sides (the breakpoints below), so each box is cut there into pieces and:

- a piece whose lengths are linear in y (every outline in it straight: rectangles, polygons, masks) is
  integrated in closed form from the lengths at its two ends (checked at three inner heights first), exactly to
  rounding;
- any other piece (a circle's arc, two outlines crossing inside it) by adaptive Gauss-Legendre (5 points, a
  piece split in halves until the halves agree with the whole to rtol of the box's scale); a piece ending at a
  disk's top or bottom, where lengths grow as a square root, is integrated in t with y = y_end -+ t^2, which
  makes it smooth.

Breakpoints per shape: rectangle y0, y1; disk cy - r, cy, cy + r and where the circle crosses x = xa and x = xb;
polygon its points' heights and where its edges cross x = xa and x = xb; mask its pixel rows' edges.
"""

from __future__ import annotations

import numpy as np

from . import lines
from .fractions import _half_chord
from .shapes import Disk, Mask, Polygon, Rectangle, transpose

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(5)
_NODES, _WEIGHTS = 0.5 * (_NODES + 1.0), 0.5 * _WEIGHTS          # on [0, 1]
_CHECK = np.array([0.25, 0.5, 0.75])                               # inner heights of the linearity check
MAX_DEPTH = 48


def breakpoints(shapes, xa, xb, ylo, yhi):
    """Pieces of the boxes [xa, xb] x [ylo, yhi] between the shapes' breakpoints: (box, y0, y1, kind, anchor)
    sorted by box then height, with kind +1 where y1 is a disk's top or bottom (anchor = y1), -1 where y0 is
    (anchor = y0), else 0."""
    n = len(xa)
    box, ys = [np.arange(n), np.arange(n)], [ylo, yhi]
    anchors = []
    for s in shapes:
        for b, y in _shape_breaks(s, xa, xb, ylo, yhi):
            box.append(b)
            ys.append(y)
        if isinstance(s, Disk):
            anchors += [s.cy - s.r, s.cy + s.r]
    box, ys = np.concatenate(box), np.concatenate(ys)
    keep = (ys >= ylo[box]) & (ys <= yhi[box])
    box, ys = box[keep], ys[keep]
    order = np.lexsort((ys, box))
    box, ys = box[order], ys[order]
    new = np.ones(len(box), dtype=bool)
    new[1:] = (box[1:] != box[:-1]) | (ys[1:] != ys[:-1])
    box, ys = box[new], ys[new]
    same = box[1:] == box[:-1]
    pb, y0, y1 = box[:-1][same], ys[:-1][same], ys[1:][same]
    anchors = np.array(anchors)
    top, bottom = np.isin(y1, anchors), np.isin(y0, anchors)
    both = top & bottom                                            # two disks' ends: split once more
    if both.any():
        mid = 0.5 * (y0[both] + y1[both])
        pb = np.concatenate([pb[~both], pb[both], pb[both]])
        y0, y1 = np.concatenate([y0[~both], y0[both], mid]), np.concatenate([y1[~both], mid, y1[both]])
        order = np.lexsort((y0, pb))
        pb, y0, y1 = pb[order], y0[order], y1[order]
        top, bottom = np.isin(y1, anchors), np.isin(y0, anchors)
    kind = np.where(top, 1, np.where(bottom, -1, 0))
    anchor = np.where(top, y1, y0)
    return pb, y0, y1, kind, anchor


def _shape_breaks(s, xa, xb, ylo, yhi):
    n = len(xa)
    every = np.arange(n)
    if isinstance(s, Rectangle):
        return [(every, np.full(n, s.y0)), (every, np.full(n, s.y1))]
    if isinstance(s, Disk):
        out = [(every, np.full(n, s.cy + d)) for d in (-s.r, 0.0, s.r)]
        for x in (xa, xb):
            near = np.flatnonzero(np.abs(x - s.cx) < s.r)
            h = _half_chord(s.r, x[near] - s.cx)
            out += [(near, s.cy - h), (near, s.cy + h)]
        return out
    if isinstance(s, Polygon):
        heights = np.unique(s.array[:, 1])
        out = [_between(heights, ylo, yhi)]
        t = transpose(s)
        for x in (xa, xb):
            out.append(lines.crossings_on_lines(t, x, "above"))
        return out
    if isinstance(s, Mask):
        return [_between(s.edges[1], ylo, yhi)]
    raise TypeError(f"not a shape: {s!r}")


def _between(sorted_values, lo, hi):
    """(box, value) for every value strictly inside each box's (lo, hi)."""
    b, k = lines.ragged(np.searchsorted(sorted_values, lo, side="right"), np.searchsorted(sorted_values, hi, "left"))
    return b, sorted_values[k]


def integrate(shapes, xa, xb, ylo, yhi, integrand, closed_form, scale, rtol: float = 1e-12) -> np.ndarray:
    """(n_boxes, m): the integral over each box's height of integrand(box, lengths) (N, m), where lengths (N,
    len(shapes) + 1) come from lines.paint_lines on the box's line at that height; closed_form(box, l0, l1, dy)
    gives a piece's integral when the lengths are linear from l0 to l1 over the height dy; scale (n_boxes,) the
    size of the integrand, for the adaptive tolerance rtol * scale * height."""
    pb, y0, y1, kind, anchor = breakpoints(shapes, xa, xb, ylo, yhi)
    def lengths(b, y, rule="above"):
        return lines.paint_lines(shapes, y, xa[b], xb[b], rule)
    l0, l1 = lengths(pb, y0, "above"), lengths(pb, y1, "below")
    dy = y1 - y0
    inner = np.concatenate([lengths(pb, y0 + f * dy) for f in _CHECK]).reshape(len(_CHECK), len(pb), -1)
    chord = l0[None] + _CHECK[:, None, None] * (l1 - l0)[None]
    span = np.maximum(np.abs(xa[pb]), np.abs(xb[pb])) + (xb[pb] - xa[pb])
    linear = np.abs(inner - chord).max(axis=(0, 2)) <= 64 * np.finfo(float).eps * span
    part = closed_form(pb[linear], l0[linear], l1[linear], dy[linear])
    out = np.zeros((len(xa), part.shape[1]))
    np.add.at(out, pb[linear], part)
    rest = ~linear
    _adaptive(out, pb[rest], y0[rest], y1[rest], kind[rest], anchor[rest],
              lambda b, y: integrand(b, lengths(b, y)), scale, rtol)
    return out


def _adaptive(out, pb, y0, y1, kind, anchor, fn, scale, rtol):
    """Adds to out[box] the adaptive Gauss-Legendre integral of fn over each piece (module docstring)."""
    t0 = np.where(kind == 0, y0, 0.0)
    t1 = np.where(kind == 0, y1, np.sqrt(np.where(kind == 1, anchor - y0, y1 - anchor)))
    whole = _gauss(fn, pb, t0, t1, kind, anchor)
    depth = 0
    while len(pb):
        mid = 0.5 * (t0 + t1)
        left, right = _gauss(fn, pb, t0, mid, kind, anchor), _gauss(fn, pb, mid, t1, kind, anchor)
        fine = left + right
        height = np.abs(_y(t1, kind, anchor) - _y(t0, kind, anchor))
        ok = np.abs(fine - whole).max(axis=1) <= rtol * scale[pb] * height
        if depth >= MAX_DEPTH:
            ok[:] = True
        np.add.at(out, pb[ok], fine[ok])
        go = ~ok
        pb = np.concatenate([pb[go], pb[go]])
        t0, t1 = np.concatenate([t0[go], mid[go]]), np.concatenate([mid[go], t1[go]])
        kind, anchor = np.concatenate([kind[go], kind[go]]), np.concatenate([anchor[go], anchor[go]])
        whole = np.concatenate([left[go], right[go]])
        depth += 1


def _y(t, kind, anchor):
    return np.where(kind == 0, t, np.where(kind == 1, anchor - t * t, anchor + t * t))


def _gauss(fn, pb, t0, t1, kind, anchor):
    """5-point Gauss-Legendre of fn(box, y(t)) y'(t) over [t0, t1] per piece."""
    if len(pb) == 0:
        return np.zeros((0, 1))
    w = t1 - t0
    t = t0[None, :] + _NODES[:, None] * w[None, :]                 # (5, N)
    y = _y(t, kind[None, :], anchor[None, :])
    jac = np.where(kind[None, :] == 0, 1.0, 2.0 * t)
    vals = fn(np.tile(pb, len(_NODES)), y.ravel()).reshape(len(_NODES), len(pb), -1)
    return np.einsum("q,qn,qnm->nm", _WEIGHTS, jac * w[None, :], vals)
