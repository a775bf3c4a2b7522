"""The four shapes as plain frozen data, their transposes, bounding boxes and areas, the checks the solver
refuses a shape by, and each shape's smallest feature.

A shape is a closed set of the plane. Coordinates are plain floats in the caller's units; x runs along
columns and y along rows. The caller (the case model) builds these; nothing here knows about it.

- Rectangle(x0, y0, x1, y1): [x0, x1] x [y0, y1].
- Disk(cx, cy, r): the points within r of (cx, cy).
- Polygon(points): a simple polygon (either orientation, convex or not) through ((x, y), ...); the last point
  joins the first. Edge k runs from point k to point k + 1 (mod n).
- Mask(array, extent): a union of pixels: array[q, p] set (non-zero) covers the pixel
  [px[p], px[p + 1]] x [py[q], py[q + 1]] of extent ((x0, y0), (x1, y1)): row 0 lies along y0. The pixels' edges
  are px[p] = x0 + (x1 - x0) * (p / mx) for p < mx and px[mx] = x1 (mx = array.shape[1]; py likewise), so a
  grid whose edges are computed the same way lines up with them exactly. The array is read once (and cached):
  do not change it after making the Mask.

`problem(shape)` says what is wrong with a shape (None when it is fine); the other functions of the package
assume a shape without a problem.
"""

from __future__ import annotations

import functools
import math
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


@dataclass(frozen=True)
class Polygon:
    points: tuple

    def __post_init__(self):
        object.__setattr__(self, "points", tuple((float(x), float(y)) for x, y in self.points))

    @functools.cached_property
    def array(self) -> np.ndarray:
        """The points as a read-only (n, 2) float64 array."""
        a = np.array(self.points, dtype=np.float64).reshape(-1, 2)
        a.flags.writeable = False
        return a

    @functools.cached_property
    def orientation(self) -> float:
        """+1.0 for counter-clockwise points (positive signed area), -1.0 for clockwise."""
        return 1.0 if signed_area(self.array) >= 0 else -1.0


@dataclass(frozen=True, eq=False)
class Mask:
    array: np.ndarray
    extent: tuple

    @functools.cached_property
    def bits(self) -> np.ndarray:
        """The pixels as a read-only bool array (non-zero: set)."""
        b = np.asarray(self.array) != 0
        b.flags.writeable = False
        return b

    @functools.cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(px, py): the pixel columns' and rows' edges (len mx + 1 and my + 1)."""
        (x0, y0), (x1, y1) = self.extent
        my, mx = self.bits.shape
        return _edges(float(x0), float(x1), mx), _edges(float(y0), float(y1), my)


def _edges(a: float, b: float, n: int) -> np.ndarray:
    """n + 1 equally spaced edges from a to b, the last exactly b."""
    e = a + (b - a) * (np.arange(n + 1) / n)
    e[-1] = b
    return e


def transpose(shape):
    """The shape mirrored about the line x = y (x and y swapped): functions along y call those along x on it."""
    if isinstance(shape, Rectangle):
        return Rectangle(shape.y0, shape.x0, shape.y1, shape.x1)
    if isinstance(shape, Disk):
        return Disk(shape.cy, shape.cx, shape.r)
    if isinstance(shape, Polygon):
        return Polygon(tuple((y, x) for x, y in shape.points))
    (x0, y0), (x1, y1) = shape.extent
    return Mask(np.asarray(shape.array).T, ((y0, x0), (y1, x1)))


def as_polygon(rect: Rectangle) -> Polygon:
    """A rectangle's four corners, counter-clockwise."""
    return Polygon(((rect.x0, rect.y0), (rect.x1, rect.y0), (rect.x1, rect.y1), (rect.x0, rect.y1)))


def bbox(shape) -> tuple[float, float, float, float] | None:
    """(xmin, ymin, xmax, ymax) of the shape (of a mask: of its set pixels; None if it has none)."""
    if isinstance(shape, Rectangle):
        return shape.x0, shape.y0, shape.x1, shape.y1
    if isinstance(shape, Disk):
        return shape.cx - shape.r, shape.cy - shape.r, shape.cx + shape.r, shape.cy + shape.r
    if isinstance(shape, Polygon):
        a = shape.array
        return float(a[:, 0].min()), float(a[:, 1].min()), float(a[:, 0].max()), float(a[:, 1].max())
    box = mask_box(shape)
    if box is None:
        return None
    q0, q1, p0, p1 = box
    px, py = shape.edges
    return float(px[p0]), float(py[q0]), float(px[p1]), float(py[q1])


def mask_box(mask: Mask) -> tuple[int, int, int, int] | None:
    """(q0, q1, p0, p1): the rows [q0, q1) and columns [p0, p1) that hold every set pixel (None if none is)."""
    rows = np.flatnonzero(mask.bits.any(axis=1))
    if len(rows) == 0:
        return None
    cols = np.flatnonzero(mask.bits.any(axis=0))
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def signed_area(points: np.ndarray) -> float:
    """The shoelace area of a closed polygon (n, 2): positive counter-clockwise. Taken about the first point,
    so a polygon far from the origin loses no digits."""
    p = points - points[0]
    x, y = p[:, 0], p[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def area(shape) -> float:
    """The shape's area."""
    if isinstance(shape, Rectangle):
        return (shape.x1 - shape.x0) * (shape.y1 - shape.y0)
    if isinstance(shape, Disk):
        return math.pi * shape.r ** 2
    if isinstance(shape, Polygon):
        return abs(signed_area(shape.array))
    px, py = shape.edges
    return float(np.count_nonzero(shape.bits)) * (px[-1] - px[0]) / (len(px) - 1) * (py[-1] - py[0]) / (len(py) - 1)


# ---------------------------------------------------------------------------------------------- checks

def problem(shape) -> str | None:
    """What is wrong with the shape, as a phrase the caller puts after the field's name; None if nothing is.

    Rectangle: a coordinate that is not finite, x1 <= x0 or y1 <= y0. Disk: not finite, r <= 0. Polygon: fewer than
    3 points, a coordinate not finite, two consecutive points equal, zero area, two edges that cross or touch (the
    message names them: edge k joins point k to point k + 1, the last point to point 0; indices from 0). Mask: an
    array that is not 2-D or is empty, values other than 0 and 1, an extent missing or not ((x0, y0), (x1, y1))
    of finite numbers with x1 > x0 and y1 > y0."""
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


def _orient(ax, ay, bx, by, cx, cy):
    """Sign of the turn a -> b -> c (positive counter-clockwise), elementwise."""
    return np.sign((bx - ax) * (cy - ay) - (by - ay) * (cx - ax))


def _on_segment(ax, ay, bx, by, cx, cy):
    """Whether c (collinear with a-b) lies within the box of a-b."""
    return ((np.minimum(ax, bx) <= cx) & (cx <= np.maximum(ax, bx))
            & (np.minimum(ay, by) <= cy) & (cy <= np.maximum(ay, by)))


def self_crossing(points) -> tuple[int, int] | None:
    """(i, j), i < j, the first pair of edges of a closed polygon that cross or touch where they should not
    (non-neighbours that meet anywhere; neighbours that overlap along a line); None if there is none.
    O(n^2) in blocks of rows (a few seconds for 10^4 points)."""
    p = np.asarray(points, dtype=np.float64)
    n = len(p)
    a, b = p, np.roll(p, -1, axis=0)
    step = max(1, (1 << 22) // n)
    for i0 in range(0, n, step):
        i = np.arange(i0, min(n, i0 + step))[:, None]
        j = np.arange(n)[None, :]
        pair = j > i
        adjacent = (j == i + 1) | ((i == 0) & (j == n - 1))
        ax, ay, bx, by = a[i, 0], a[i, 1], b[i, 0], b[i, 1]
        cx, cy, dx, dy = a[j, 0], a[j, 1], b[j, 0], b[j, 1]
        o1, o2 = _orient(ax, ay, bx, by, cx, cy), _orient(ax, ay, bx, by, dx, dy)
        o3, o4 = _orient(cx, cy, dx, dy, ax, ay), _orient(cx, cy, dx, dy, bx, by)
        proper = (o1 * o2 < 0) & (o3 * o4 < 0)
        touch = (((o1 == 0) & _on_segment(ax, ay, bx, by, cx, cy)) | ((o2 == 0) & _on_segment(ax, ay, bx, by, dx, dy))
                 | ((o3 == 0) & _on_segment(cx, cy, dx, dy, ax, ay)) | ((o4 == 0) & _on_segment(cx, cy, dx, dy, bx, by)))
        # neighbours share one point: they are wrong only if they fold back along one line
        fold = adjacent & (o1 == 0) & (o2 == 0) & _folds(ax, ay, bx, by, cx, cy, dx, dy, i, j, n)
        bad = pair & ((~adjacent & (proper | touch)) | fold)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            return int(i[r, 0]), int(j[0, c])
    return None


def _folds(ax, ay, bx, by, cx, cy, dx, dy, i, j, n):
    """For collinear neighbouring edges: whether they overlap (the path turns back by 180 degrees)."""
    # the shared point is b of i and a of j (j = i + 1), or a of i and b of j (i = 0, j = n - 1)
    nxt = j == i + 1
    ux, uy = np.where(nxt, bx - ax, ax - bx), np.where(nxt, by - ay, ay - by)   # from the far end to the shared point
    vx, vy = np.where(nxt, dx - cx, cx - dx), np.where(nxt, dy - cy, cy - dy)   # from the shared point onwards
    return ux * vx + uy * vy < 0


def smallest_feature(shape) -> float:
    """The narrowest part of the shape, to compare with a grid's spacing (a feature narrower than about two
    spacings is not resolved). Rectangle: the smaller side. Disk: the diameter. Polygon: the shortest edge or
    the smallest distance from a point to an edge that is not its own (a thin part, or a narrow gap between two
    parts); O(n^2). Mask: the shortest run of set pixels, or of clear pixels between set ones, along a row or a
    column, times that direction's pixel size."""
    if isinstance(shape, Rectangle):
        return min(shape.x1 - shape.x0, shape.y1 - shape.y0)
    if isinstance(shape, Disk):
        return 2.0 * shape.r
    if isinstance(shape, Polygon):
        return _polygon_feature(shape.array)
    px, py = shape.edges
    return min(_shortest_run(shape.bits) * (px[1] - px[0]), _shortest_run(shape.bits.T) * (py[1] - py[0]))


def _polygon_feature(p: np.ndarray) -> float:
    n = len(p)
    a, b = p, np.roll(p, -1, axis=0)
    e = b - a
    best = float(np.hypot(e[:, 0], e[:, 1]).min())
    ee = np.maximum((e * e).sum(axis=1), np.finfo(float).tiny)
    step = max(1, (1 << 22) // n)
    for v0 in range(0, n, step):
        v = np.arange(v0, min(n, v0 + step))
        rel = p[v][:, None, :] - a[None, :, :]                     # (nv, n, 2)
        t = np.clip((rel * e[None]).sum(axis=2) / ee[None], 0.0, 1.0)
        d = rel - t[..., None] * e[None]
        dist = np.hypot(d[..., 0], d[..., 1])
        k = np.arange(n)[None, :]
        own = (k == v[:, None]) | (k == (v[:, None] - 1) % n)       # the two edges that end at the point
        dist[own] = np.inf
        best = min(best, float(dist.min()))
    return best


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
