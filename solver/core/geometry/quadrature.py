"""Integrals across boxes of what a horizontal line meets: the series conductance of a face's lines, the painted
lengths of a cell's lines. The integrand is a function of the lengths (per shape painted in order) along the
line at height y within [xa, xb]; they change smoothly with y between the heights where a shape's outline turns,
ends or crosses the box's sides (the breakpoints below), so each box is cut there into pieces and:

- a piece whose lengths are linear in y (every outline in it straight: rectangles, polygons, masks) is
  integrated in closed form from the lengths at its two ends (checked at three inner heights first), exactly to
  rounding;
- a piece that a circle's arc crosses, by adaptive Gauss-Legendre: 5 points, a piece split in halves until the
  halves agree with it to rtol of the box's scale, or to the rounding of the lengths themselves (about
  1e-16 |x| / L relative, for coordinates |x| and a line of length L: on fine grids the larger, 1e-12 for
  L = 1e-3 |x|); a piece ending at a disk's top or bottom, where lengths grow as a square root, is integrated in
  t with y = y_end -+ t^2, which makes it smooth.

Breakpoints per shape: rectangle y0, y1; disk cy - r, cy, cy + r and where the circle crosses x = xa and x = xb;
polygon its points' heights and where its edges cross x = xa and x = xb; mask its pixel rows' edges; and between
shapes, where the outlines of two of them cross inside the box (straight edges, circles and a mask's vertical pixel
edges with each other), so that no piece holds a kink.
"""

from __future__ import annotations

import functools

import numpy as np

from . import lines
from .fractions import _half_chord
from .shapes import Disk, Mask, Polygon, Rectangle, as_polygon, transpose

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(5)
_NODES, _WEIGHTS = 0.5 * (_NODES + 1.0), 0.5 * _WEIGHTS          # on [0, 1]
_CHECK = np.array([0.25, 0.5, 0.75])                               # inner heights of the linearity check
MAX_DEPTH = 40


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
    kx, ky = _kinks(tuple(shapes))
    b, k = lines.ragged(np.searchsorted(kx, xa, side="left"), np.searchsorted(kx, xb, side="right"))
    box.append(b)
    ys.append(ky[k])
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


@functools.lru_cache(maxsize=16)
def _kinks(shapes: tuple):
    """(x, y), sorted by x: the points where the outlines of two different shapes cross."""
    segs, circles = [], []
    for n, s in enumerate(shapes):
        if isinstance(s, Disk):
            circles.append((n, s.cx, s.cy, s.r))
            continue
        if isinstance(s, Mask):
            ax, ay, bx, by = _mask_verticals(s)
        else:
            p = (as_polygon(s) if isinstance(s, Rectangle) else s).array
            q = np.roll(p, -1, axis=0)
            ax, ay, bx, by = p[:, 0], p[:, 1], q[:, 0], q[:, 1]
        segs.append((np.full(len(ax), n), ax, ay, bx, by))
    seg = [np.concatenate(v) for v in zip(*segs)] if segs else [np.zeros(0)] * 5
    circ = np.array(circles, dtype=np.float64).reshape(-1, 4)
    pts = [_segment_segment(seg), _segment_circle(seg, circ), _circle_circle(circ)]
    x, y = np.concatenate([p[0] for p in pts]), np.concatenate([p[1] for p in pts])
    order = np.argsort(x, kind="stable")
    return x[order], y[order]


def _mask_verticals(m: Mask):
    """A mask's vertical pixel edges between a set and a clear pixel, merged along columns: (ax, ay, bx, by)."""
    px, py = m.edges
    pad = np.zeros((m.bits.shape[0] + 2, m.bits.shape[1] + 2), dtype=np.int8)
    pad[1:-1, 1:-1] = m.bits
    edge = (np.diff(pad, axis=1) != 0)[1:-1].T.astype(np.int8)     # (columns' edges, rows)
    change = np.diff(np.pad(edge, ((0, 0), (1, 1))), axis=1)
    p, q0 = np.nonzero(change == 1)
    _, q1 = np.nonzero(change == -1)
    return px[p], py[q0], px[p], py[q1]


def _pairs(n: int, m: int, limit: int = 1 << 22):
    """Blocks of (i, j) index pairs covering n x m."""
    step = max(1, limit // max(m, 1))
    for i0 in range(0, n, step):
        i = np.arange(i0, min(n, i0 + step))
        yield np.repeat(i, m), np.tile(np.arange(m), len(i))


def _segment_segment(seg):
    """Where straight edges of different shapes cross: pairs whose boxes share a bucket (lines.near_pairs)."""
    who, ax, ay, bx, by = seg
    out = [(np.zeros(0), np.zeros(0))]
    if len(who):
        lo = np.stack([np.minimum(ax, bx), np.minimum(ay, by)], axis=1)
        hi = np.stack([np.maximum(ax, bx), np.maximum(ay, by)], axis=1)
        size = max(2.0 * float(np.median((hi - lo).max(axis=1))), 1e-300)
        i, j = lines.near_pairs(lo, hi, lo, hi, size)
        keep = who[i] < who[j]
        i, j = i[keep], j[keep]
        rx, ry, sx, sy = bx[i] - ax[i], by[i] - ay[i], bx[j] - ax[j], by[j] - ay[j]
        qx, qy = ax[j] - ax[i], ay[j] - ay[i]
        den = rx * sy - ry * sx
        with np.errstate(divide="ignore", invalid="ignore"):
            t, u = (qx * sy - qy * sx) / den, (qx * ry - qy * rx) / den
        hit = (den != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)
        out.append((ax[i][hit] + t[hit] * rx[hit], ay[i][hit] + t[hit] * ry[hit]))
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])


def _segment_circle(seg, circ):
    who, ax, ay, bx, by = seg
    out = [(np.zeros(0), np.zeros(0))]
    for i, j in _pairs(len(who), len(circ)):
        keep = who[i] != circ[j, 0]
        i, j = i[keep], j[keep]
        rx, ry = bx[i] - ax[i], by[i] - ay[i]
        px, py = ax[i] - circ[j, 1], ay[i] - circ[j, 2]
        a, b, c = rx * rx + ry * ry, rx * px + ry * py, px * px + py * py - circ[j, 3] ** 2
        disc = b * b - a * c
        root = np.sqrt(np.maximum(disc, 0.0))
        for t in ((-b - root) / a, (-b + root) / a):
            hit = (disc >= 0) & (t >= 0) & (t <= 1)
            out.append((ax[i][hit] + t[hit] * rx[hit], ay[i][hit] + t[hit] * ry[hit]))
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])


def _circle_circle(circ):
    i, j = np.triu_indices(len(circ), 1)
    dx, dy = circ[j, 1] - circ[i, 1], circ[j, 2] - circ[i, 2]
    d = np.hypot(dx, dy)
    r1, r2 = circ[i, 3], circ[j, 3]
    meet = (d > 0) & (d <= r1 + r2) & (d >= np.abs(r1 - r2))
    d, dx, dy, r1, r2, cx, cy = d[meet], dx[meet], dy[meet], r1[meet], r2[meet], circ[i, 1][meet], circ[i, 2][meet]
    a = (r1 * r1 - r2 * r2 + d * d) / (2 * d)
    h = np.sqrt(np.maximum(r1 * r1 - a * a, 0.0))
    mx, my = cx + a * dx / d, cy + a * dy / d
    return np.concatenate([mx - h * dy / d, mx + h * dy / d]), np.concatenate([my + h * dx / d, my - h * dx / d])


def _between(sorted_values, lo, hi):
    """(box, value) for every value strictly inside each box's (lo, hi)."""
    b, k = lines.ragged(np.searchsorted(sorted_values, lo, side="right"), np.searchsorted(sorted_values, hi, "left"))
    return b, sorted_values[k]


def integrate(shapes, xa, xb, ylo, yhi, integrand, closed_form, scale, rtol: float = 1e-12) -> np.ndarray:
    """(n_boxes, m): the integral over each box's height of integrand(box, lengths) (N, m), where lengths (N,
    len(shapes) + 1) come from lines.paint_lines on the box's line at that height; closed_form(box, l0, l1, dy)
    gives a piece's integral when the lengths are linear from l0 to l1 over the height dy; scale (n_boxes,) the
    size of the integrand, for the adaptive tolerance rtol * scale * height."""
    if len(xa) == 0:
        empty = np.zeros((0, len(shapes) + 1))
        return closed_form(np.zeros(0, dtype=np.int64), empty, empty, np.zeros(0))
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
    noise = 64 * np.finfo(float).eps * (np.maximum(np.abs(xa), np.abs(xb)) + (xb - xa)) / (xb - xa)
    floor = 1e-3 * rtol * (yhi - ylo)
    _adaptive(out, pb[rest], y0[rest], y1[rest], kind[rest], anchor[rest],
              lambda b, y: integrand(b, lengths(b, y)), scale, rtol, noise, floor)
    return out


def _adaptive(out, pb, y0, y1, kind, anchor, fn, scale, rtol, noise, floor):
    """Adds to out[box] the adaptive Gauss-Legendre integral of fn over each piece (module docstring). A piece is
    done when its halves agree with it to rtol * scale * its height; or to the rounding of the lengths themselves
    (noise, per box, relative to the value: the coordinates' rounding over the line's length); or when its error
    or its height is below floor (per box: 1e-3 rtol of the box's height) times the scale: near a disk's top,
    where a height's own rounding moves the chord, the lengths are noisier than rtol, but the pieces there are
    short and few, and together change the box's integral by less than rtol."""
    t0 = np.where(kind == 0, y0, 0.0)
    t1 = np.where(kind == 0, y1, np.sqrt(np.where(kind == 1, anchor - y0, y1 - anchor)))
    whole = _gauss(fn, pb, t0, t1, kind, anchor)
    depth = 0
    while len(pb):
        mid = 0.5 * (t0 + t1)
        left, right = _gauss(fn, pb, t0, mid, kind, anchor), _gauss(fn, pb, mid, t1, kind, anchor)
        fine = left + right
        height = np.abs(_y(t1, kind, anchor) - _y(t0, kind, anchor))
        err = np.abs(fine - whole).max(axis=1)
        ok = ((err <= rtol * scale[pb] * height) | (err <= noise[pb] * np.abs(fine).max(axis=1))
              | (err <= floor[pb] * scale[pb]) | (height <= floor[pb]))
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
    out = np.zeros(vals.shape[1:])
    for q in range(len(_NODES)):                          # in node order: a piece's bits do not depend on the batch
        out += (_WEIGHTS[q] * jac[q] * w)[:, None] * vals[q]
    return out
