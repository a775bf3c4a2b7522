"""The shapes the solver refuses, and how thin a shape is.

problem(shape): a phrase saying what is wrong, for the caller to put after the field's name (None if nothing is).
smallest_feature(shape): the narrowest part, for "an object thinner than the grid can resolve".
unresolved(shape, xs, ys): where a grid misses a part of a shape (a link between neighbours crossed twice, or a
shape no grid line meets), for holes and held objects, whose rims the grid's links must see.

Polygons' pair tests (edges that cross; a point near an edge that is not its own) look only at pairs whose boxes
share a bucket of a uniform grid over the polygon (lines.near_pairs), so they cost about O(n) for drawn outlines
(O(n^2) at worst).
"""

from __future__ import annotations

import math

import numpy as np

from .lines import near_pairs
from .shapes import Disk, Mask, Polygon, Rectangle, bbox, signed_area


def problem(shape) -> str | None:
    """What is wrong with the shape, as a phrase the caller puts after the field's name; None if nothing is.

    Rectangle: a coordinate that is not finite, x1 <= x0 or y1 <= y0. Disk: not finite, r <= 0. Polygon: fewer than
    3 points, a coordinate not finite, two consecutive points equal (the last repeating the first too), all points
    on one line, two edges that cross or touch (the message names them: edge k joins point k to point k + 1, the
    last point to point 0; indices from 0). Mask: an array that is not 2-D or is empty, values other than 0 and 1,
    an extent missing or not ((x0, y0), (x1, y1)) of finite numbers with x1 > x0 and y1 > y0."""
    if isinstance(shape, Rectangle):
        v = (shape.x0, shape.y0, shape.x1, shape.y1)
        if not all(math.isfinite(c) for c in v):
            return f"the corners {v} must be finite numbers"
        if shape.x1 <= shape.x0 or shape.y1 <= shape.y0:
            return (f"the upper corner ({shape.x1:g}, {shape.y1:g}) must lie above and right of the lower "
                    f"({shape.x0:g}, {shape.y0:g}): a rectangle of positive width and height")
        return None
    if isinstance(shape, Disk):
        if not all(math.isfinite(c) for c in (shape.cx, shape.cy, shape.r)):
            return "the centre and radius must be finite numbers"
        return None if shape.r > 0 else f"the radius {shape.r:g} must be > 0"
    if isinstance(shape, Polygon):
        return _polygon_problem(shape.array)
    if isinstance(shape, Mask):
        return _mask_problem(shape)
    return f"{type(shape).__name__} is not a shape (Rectangle, Disk, Polygon or Mask)"


def _polygon_problem(p: np.ndarray) -> str | None:
    n = len(p)
    if n < 3:
        return f"a polygon needs at least 3 points; it has {n}"
    if not np.isfinite(p).all():
        return "every point must be a pair of finite numbers"
    same = np.flatnonzero((p == np.roll(p, -1, axis=0)).all(axis=1))
    if len(same):
        k = int(same[0])
        return f"points {k} and {(k + 1) % n} are the same point {tuple(p[k])}: remove one"
    d = p - p[0]
    v = d[np.argmax(np.hypot(d[:, 0], d[:, 1]))]                      # to the point farthest from the first
    span = float(np.hypot(v[0], v[1]))
    if np.abs(d[:, 0] * v[1] - d[:, 1] * v[0]).max() <= 1e-12 * span * span:
        return "the points enclose no area (they lie on one line)"
    hit = self_crossing(p)
    if hit is not None:
        i, j = hit
        return (f"edges {i} (points {i}-{(i + 1) % n}) and {j} (points {j}-{(j + 1) % n}) cross or touch: "
                "a polygon's edges may meet only at their shared points, in order")
    if abs(signed_area(p)) <= 1e-12 * span * span:
        return "the points enclose no area"
    return None


def _mask_problem(m: Mask) -> str | None:
    a = np.asarray(m.array)
    if a.ndim != 2 or a.size == 0:
        return f"the array must be 2-D and not empty; it has shape {a.shape}"
    if a.dtype != bool:
        try:
            bad = ~np.isin(a, (0, 1))
        except TypeError:
            return f"the array must hold 0 and 1 (or booleans); it holds {a.dtype}"
        if bad.any():
            return f"the array must hold only 0 and 1 (or booleans); it holds {a[bad].flat[0]!r}"
    try:
        (x0, y0), (x1, y1) = m.extent
        x0, y0, x1, y1 = float(x0), float(y0), float(x1), float(y1)
    except (TypeError, ValueError):
        return f"the extent must be ((x0, y0), (x1, y1)), the lower and upper corners; it is {m.extent!r}"
    if not all(math.isfinite(c) for c in (x0, y0, x1, y1)):
        return "the extent's corners must be finite numbers"
    if x1 <= x0 or y1 <= y0:
        return (f"the extent's upper corner ({x1:g}, {y1:g}) must lie above and right of its lower "
                f"({x0:g}, {y0:g}): an empty extent")
    return None


# ---------------------------------------------------------------------------------------------- pairs

def _bucket_size(p: np.ndarray) -> float:
    """Twice the median edge's length: a bucket then holds a few edges of a drawn outline."""
    e = np.roll(p, -1, axis=0) - p
    return max(2.0 * float(np.median(np.hypot(e[:, 0], e[:, 1]))), 1e-300)


def _orient(ax, ay, bx, by, cx, cy):
    """Sign of the turn a -> b -> c (positive counter-clockwise), elementwise."""
    return np.sign((bx - ax) * (cy - ay) - (by - ay) * (cx - ax))


def _on_segment(ax, ay, bx, by, cx, cy):
    """Whether c (collinear with a-b) lies within the box of a-b."""
    return ((np.minimum(ax, bx) <= cx) & (cx <= np.maximum(ax, bx))
            & (np.minimum(ay, by) <= cy) & (cy <= np.maximum(ay, by)))


def self_crossing(points) -> tuple[int, int] | None:
    """(i, j), i < j, the first pair (in that order) of edges of a closed polygon that cross or touch where they
    should not (non-neighbours that meet anywhere; neighbours that overlap along a line); None if none do."""
    p = np.asarray(points, dtype=np.float64)
    n = len(p)
    a, b = p, np.roll(p, -1, axis=0)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    i, j = near_pairs(lo, hi, lo, hi, _bucket_size(p))
    keep = i < j
    i, j = i[keep], j[keep]
    adjacent = (j == i + 1) | ((i == 0) & (j == n - 1))
    ax, ay, bx, by = a[i, 0], a[i, 1], b[i, 0], b[i, 1]
    cx, cy, dx, dy = a[j, 0], a[j, 1], b[j, 0], b[j, 1]
    o1, o2 = _orient(ax, ay, bx, by, cx, cy), _orient(ax, ay, bx, by, dx, dy)
    o3, o4 = _orient(cx, cy, dx, dy, ax, ay), _orient(cx, cy, dx, dy, bx, by)
    proper = (o1 * o2 < 0) & (o3 * o4 < 0)
    touch = (((o1 == 0) & _on_segment(ax, ay, bx, by, cx, cy)) | ((o2 == 0) & _on_segment(ax, ay, bx, by, dx, dy))
             | ((o3 == 0) & _on_segment(cx, cy, dx, dy, ax, ay)) | ((o4 == 0) & _on_segment(cx, cy, dx, dy, bx, by)))
    # neighbours share one point: they are wrong only if they fold back along one line
    nxt = j == i + 1
    ux, uy = np.where(nxt, bx - ax, ax - bx), np.where(nxt, by - ay, ay - by)   # from the far end to the shared point
    vx, vy = np.where(nxt, dx - cx, cx - dx), np.where(nxt, dy - cy, cy - dy)   # from the shared point onwards
    fold = adjacent & (o1 == 0) & (o2 == 0) & (ux * vx + uy * vy < 0)
    bad = np.flatnonzero((~adjacent & (proper | touch)) | fold)
    if len(bad) == 0:
        return None
    first = bad[np.lexsort((j[bad], i[bad]))[0]]
    return int(i[first]), int(j[first])


# ---------------------------------------------------------------------------------------------- features

def smallest_feature(shape) -> float:
    """The narrowest part of the shape, to compare with a grid's spacing (a feature narrower than about two
    spacings is not resolved). Rectangle: the smaller side. Disk: the diameter. Polygon: the shortest edge or
    the smallest distance from a point to an edge that is not its own (a thin part, or a narrow gap between two
    parts). Mask: the shortest run of set pixels, or of clear pixels between set ones, along a row or a column,
    times that direction's pixel size."""
    if isinstance(shape, Rectangle):
        return min(shape.x1 - shape.x0, shape.y1 - shape.y0)
    if isinstance(shape, Disk):
        return 2.0 * shape.r
    if isinstance(shape, Polygon):
        return _polygon_feature(shape.array)
    px, py = shape.edges
    return min(_shortest_run(shape.bits) * (px[1] - px[0]), _shortest_run(shape.bits.T) * (py[1] - py[0]))


def _polygon_feature(p: np.ndarray) -> float:
    """The shortest edge or point-to-other-edge distance: pairs within a search radius, doubled until the nearest
    pair found lies within it (then no pair outside it can be nearer)."""
    n = len(p)
    a, b = p, np.roll(p, -1, axis=0)
    e = b - a
    best = float(np.hypot(e[:, 0], e[:, 1]).min())
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    radius = _bucket_size(p)
    span = float(np.ptp(p, axis=0).max())
    while True:
        v, k = near_pairs(p, p, lo - radius, hi + radius, radius)
        own = (k == v) | (k == (v - 1) % n)                        # the two edges that end at the point
        v, k = v[~own], k[~own]
        rel = p[v] - a[k]
        ee = np.maximum((e[k] * e[k]).sum(axis=1), np.finfo(float).tiny)
        t = np.clip((rel * e[k]).sum(axis=1) / ee, 0.0, 1.0)
        d = rel - t[:, None] * e[k]
        near = float(np.hypot(d[:, 0], d[:, 1]).min(initial=np.inf))
        if near <= radius or radius >= 2 * span:
            return min(best, near)
        radius *= 2.0


def _shortest_run(bits: np.ndarray) -> int:
    """The shortest run, along rows, of set pixels or of clear pixels with set ones on both sides."""
    padded = np.zeros((bits.shape[0], bits.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = bits
    change = np.diff(padded, axis=1)                       # +1 where a set run starts, -1 past its end
    r, c = np.nonzero(change)
    if len(c) == 0:
        return bits.shape[1]
    lengths = np.diff(c)
    same_row = np.diff(r) == 0                             # consecutive changes on one row: a run or an inner gap
    return int(lengths[same_row].min()) if same_row.any() else bits.shape[1]


def unresolved(shape, xs: np.ndarray, ys: np.ndarray) -> tuple[float, float] | None:
    """Where the grid of points (xs[j], ys[i]) misses a part of the shape, or None: for a mask, the middle of the
    first link between neighbouring points whose ends lie on the same side of the rim although the rim crosses it
    (a part or a gap narrower than the spacing: a mask's pixel edges run along the grid lines, so only a thin part
    does that); for any shape, its middle where no point lies in it and no link meets it."""
    from .rims import crossings

    seen = False
    for axis in "xy":
        if (len(xs) if axis == "x" else len(ys)) < 2:
            continue
        c = crossings(shape, xs, ys, axis)
        near, far = ((slice(None), slice(None, -1)), (slice(None), slice(1, None))) if axis == "x" else \
            ((slice(None, -1), slice(None)), (slice(1, None), slice(None)))
        twice = c.cut & (c.inside[near] == c.inside[far]) & (c.first > 0) & (c.last > 0)  # not a rim on a point
        if twice.any() and isinstance(shape, Mask):  # (a link past a polygon's corner crosses it twice at any
            # spacing: polygons' widths are thickness()'s)
            i, j = np.argwhere(twice)[0]
            return (0.5 * (xs[j] + xs[j + 1]), float(ys[i])) if axis == "x" else (float(xs[j]), 0.5 * (ys[i] + ys[i + 1]))
        seen = seen or bool(c.cut.any() or c.inside.any())
    if seen:
        return None
    box = bbox(shape)
    return None if box is None else (0.5 * (box[0] + box[2]), 0.5 * (box[1] + box[3]))


ACROSS = 0.26  # |cos| of a chord's angle to an edge it lies across (within 15 degrees of perpendicular)


def thickness(shape) -> float | None:
    """How thin a shape or a gap between its parts is, for "narrower than the grid resolves": a rectangle's smaller
    side, a disk's diameter; a polygon's shortest chord from a point to an edge that is not its own and that lies
    across both (within 15 degrees of perpendicular to that edge and to one of the point's own edges: the width of
    a bar, a slot or a gap, not the length of a drawn outline's short edges); None for a mask (its pixels have no
    such measure: unresolved() checks it on the grid)."""
    if isinstance(shape, (Rectangle, Disk)):
        return smallest_feature(shape)
    if isinstance(shape, Mask):
        return None
    p = shape.array
    n = len(p)
    a, e = p, np.roll(p, -1, axis=0) - p
    length = np.maximum(np.hypot(e[:, 0], e[:, 1]), np.finfo(float).tiny)
    u = e / length[:, None]
    best = np.inf
    for v0 in range(0, n, 256):
        v = np.arange(v0, min(v0 + 256, n))[:, None]
        rel = p[v] - a[None, :]                                           # (vertices, edges, 2)
        t = np.clip((rel * e[None]).sum(axis=2) / length[None] ** 2, 0.0, 1.0)
        chord = rel - t[..., None] * e[None]
        d = np.hypot(chord[..., 0], chord[..., 1])
        c = chord / np.maximum(d, np.finfo(float).tiny)[..., None]
        k = np.arange(n)[None, :]
        own = (k == v) | (k == (v - 1) % n)
        across = np.abs((c * u[None]).sum(axis=2)) < ACROSS
        mine = np.minimum(np.abs((c * u[v[:, 0]][:, None]).sum(axis=2)),
                          np.abs((c * u[(v[:, 0] - 1) % n][:, None]).sum(axis=2)))
        ok = ~own & across & (mine < ACROSS) & (d > 0)
        if ok.any():
            best = min(best, float(d[ok].min()))
    return best if np.isfinite(best) else None
