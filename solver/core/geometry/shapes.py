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

checks.problem(shape) says what is wrong with a shape (None when it is fine); the other functions of the package
assume a shape without a problem.
"""

from __future__ import annotations

import functools
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
        return float(np.pi) * shape.r ** 2
    if isinstance(shape, Polygon):
        return abs(signed_area(shape.array))
    px, py = shape.edges
    return float(np.count_nonzero(shape.bits)) * (px[-1] - px[0]) / (len(px) - 1) * (py[-1] - py[0]) / (len(py) - 1)


def rim_distance(shape, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The distance from each point (y[i], x[j]) to the shape's rim, (len(y), len(x)): exact for rectangles, disks
    and polygons; zero for a mask (its pixel staircase has no rim to measure to at better than a pixel)."""
    X, Y = np.meshgrid(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    if isinstance(shape, Disk):
        return np.abs(np.hypot(X - shape.cx, Y - shape.cy) - shape.r)
    if isinstance(shape, Mask):
        return np.zeros(X.shape)
    p = as_polygon(shape).array if isinstance(shape, Rectangle) else shape.array
    out = np.full(X.shape, np.inf)
    for a, b in zip(p, np.roll(p, -1, axis=0)):
        d = b - a
        t = np.clip(((X - a[0]) * d[0] + (Y - a[1]) * d[1]) / max(float(d @ d), 1e-300), 0.0, 1.0)
        out = np.minimum(out, np.hypot(X - a[0] - t * d[0], Y - a[1] - t * d[1]))
    return out
