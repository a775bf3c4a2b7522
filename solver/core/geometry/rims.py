"""Embedded boundaries (issue 43): where grid lines cross a shape's rim, for the symmetric Shortley-Weller / Gibou
Dirichlet scheme, and cut-cell data for Neumann and Robin rims (Johansen and Colella; AMReX's EB).

A shape is closed: a point on its rim is inside. `crossings` works on the lines through the grid's points,
`cut_cells` on the cells between edges. Disks and polygons (rectangles as polygons) are exact; a mask's rim is its
pixels' outline (a staircase: its length is the staircase's, its normals are +-x and +-y).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import lines
from .fractions import _edges, cell_fractions, piece_cells, polygon_pieces
from .shapes import Disk, Mask, Polygon, Rectangle, as_polygon, transpose


@dataclass(frozen=True, eq=False)
class Crossings:
    """inside: (ny, nx) whether each point lies in the (closed) shape. For the segments between neighbouring
    points along the axis (axis "x": (ny, nx - 1), the segment from (i, j) to (i, j + 1); axis "y": (ny - 1, nx),
    from (i, j) to (i + 1, j)): cut, whether the segment meets the rim (a tangent touch is not a crossing);
    first, the distance from the segment's first point to the rim point nearest it, as a fraction of the segment
    in [0, 1]; last, the same from its second point (both NaN where not cut). A point outside the shape never
    lies on the rim, so its fraction is in (0, 1]: Gibou's theta. A grid line that only touches a disk (a tangent)
    meets no rim, and a point at that touch counts as outside."""

    inside: np.ndarray
    cut: np.ndarray
    first: np.ndarray
    last: np.ndarray


def crossings(shape, xs, ys, axis: str) -> Crossings:
    """Rim crossings of the grid lines through the points (xs[j], ys[i]) along `axis` (Crossings)."""
    if axis == "y":
        c = crossings(transpose(shape), ys, xs, "x")
        return Crossings(c.inside.T, c.cut.T, c.first.T, c.last.T)
    if axis != "x":
        raise ValueError(f"axis must be 'x' or 'y', not {axis!r}")
    xs, ys = _edges(xs, "xs"), np.asarray(ys, dtype=np.float64)
    ny, nx = len(ys), len(xs)
    line, a, b = lines.runs(shape, ys, np.full(ny, -np.inf), np.full(ny, np.inf), "closed")
    diff = np.zeros((ny, nx + 1), dtype=np.int64)
    np.add.at(diff, (line, np.searchsorted(xs, a, side="left")), 1)
    np.add.at(diff, (line, np.searchsorted(xs, b, side="right")), -1)
    inside = np.cumsum(diff[:, :-1], axis=1) > 0
    rim_line, x = np.concatenate([line, line]), np.concatenate([a, b])
    seg = np.searchsorted(xs, x, side="right") - 1                      # xs[seg] <= x < xs[seg + 1]
    at_point = (seg >= 1) & (seg < nx) & (x == xs[np.clip(seg, 0, nx - 1)])
    rim_line = np.concatenate([rim_line, rim_line[at_point]])          # a rim point on a grid point ends the
    x = np.concatenate([x, x[at_point]])                                # segment before it too
    seg = np.concatenate([seg, seg[at_point] - 1])
    ok = (seg >= 0) & (seg < nx - 1)
    rim_line, x, seg = rim_line[ok], x[ok], seg[ok]
    t = (x - xs[seg]) / (xs[seg + 1] - xs[seg])
    lo = np.full((ny, nx - 1), np.inf)
    hi = np.full((ny, nx - 1), -np.inf)
    np.minimum.at(lo, (rim_line, seg), t)
    np.maximum.at(hi, (rim_line, seg), t)
    cut = np.isfinite(lo)
    return Crossings(inside, cut, np.where(cut, lo, np.nan), np.where(cut, 1.0 - hi, np.nan))


@dataclass(frozen=True, eq=False)
class CutCells:
    """For the cells [xe[j], xe[j + 1]] x [ye[i], ye[i + 1]] and the part of them outside the shape (the material
    around a hole; the open part):

    volume: (ny, nx) the open fraction of each cell's area (1 - cell_fractions). aperture_x: (ny, nx + 1) the open
    fraction of each vertical face x = xe[j], y in [ye[i], ye[i + 1]]; aperture_y: (ny + 1, nx) of each horizontal
    face y = ye[i]. A face along the rim is closed (the rim belongs to the shape). rim_length: (ny, nx) the length
    of the rim inside each cell (a rim along a cell's side belongs to the open cell beside it). normal_x,
    normal_y: (ny, nx) the integral over that rim of the shape's outward unit normal (pointing into the open part):
    its direction is the cell's mean normal, its length the rim's chord (<= rim_length; equal for a straight rim).
    Divergence theorem, which the values satisfy to rounding: normal_x = (aperture_x[:, 1:] - aperture_x[:, :-1])
    * cell height, normal_y = (aperture_y[1:] - aperture_y[:-1]) * cell width."""

    volume: np.ndarray
    aperture_x: np.ndarray
    aperture_y: np.ndarray
    rim_length: np.ndarray
    normal_x: np.ndarray
    normal_y: np.ndarray


def cut_cells(shape, xe, ye) -> CutCells:
    """Cut-cell data of the shape on the cells between edges xe and ye (CutCells)."""
    xe, ye = _edges(xe, "xe"), _edges(ye, "ye")
    volume = 1.0 - cell_fractions(shape, xe, ye)
    aperture_x = 1.0 - _inside_fraction(transpose(shape), xe, ye).T
    aperture_y = 1.0 - _inside_fraction(shape, ye, xe)
    if isinstance(shape, Rectangle):
        shape = as_polygon(shape)
    if isinstance(shape, Disk):
        i, j, length, nx_, ny_ = _disk_rim(shape, xe, ye, volume)
    elif isinstance(shape, Polygon):
        i, j, length, nx_, ny_ = _polygon_rim(shape, xe, ye)
    else:
        i, j, length, nx_, ny_ = _mask_rim(shape, xe, ye)
    out = [np.zeros(volume.shape) for _ in range(3)]
    for arr, val in zip(out, (length, nx_, ny_)):
        np.add.at(arr, (i, j), val)
    return CutCells(volume, aperture_x, aperture_y, *out)


def _inside_fraction(shape, at, edges) -> np.ndarray:
    """(len(at), len(edges) - 1): the fraction of each segment [edges[k], edges[k + 1]] of the lines y = at[i]
    inside the (closed) shape."""
    n = len(at)
    line, a, b = lines.runs(shape, at, np.full(n, edges[0]), np.full(n, edges[-1]), "closed")
    return lines.segment_lengths(line, a, b, edges, n) / np.diff(edges)[None, :]


def _disk_rim(d: Disk, xe, ye, volume):
    """The arcs of the circle inside each cell it crosses: (row, column, length, normal integral x, y)."""
    i, j = np.nonzero((volume > 0.0) & (volume < 1.0))
    r = d.r
    a, b, c, dd = xe[j] - d.cx, xe[j + 1] - d.cx, ye[i] - d.cy, ye[i + 1] - d.cy     # relative to the centre
    us, vs = [], []
    for side, lo, hi, vertical in ((a, c, dd, True), (b, c, dd, True), (c, a, b, False), (dd, a, b, False)):
        h = np.sqrt(np.maximum((r - np.abs(side)) * (r + np.abs(side)), 0.0))
        for sign in (-1.0, 1.0):
            other = sign * h
            ok = (np.abs(side) < r) & (other >= lo) & (other <= hi)
            us.append(np.where(ok, side if vertical else other, np.nan))
            vs.append(np.where(ok, other if vertical else side, np.nan))
    u, v = np.stack(us, axis=1), np.stack(vs, axis=1)
    ang = np.arctan2(v, u)
    order = np.argsort(ang, axis=1)                                   # NaN last
    ang, u, v = (np.take_along_axis(t, order, axis=1) for t in (ang, u, v))
    count = np.isfinite(ang).sum(axis=1)
    length, nxv, nyv = np.zeros(len(i)), np.zeros(len(i)), np.zeros(len(i))
    rows = np.arange(len(i))
    for m in range(ang.shape[1]):
        live = m < count
        nxt = np.where(m + 1 < count, m + 1, 0)
        t1, t2 = ang[:, m], ang[rows, nxt] + np.where(m + 1 < count, 0.0, 2.0 * np.pi)
        tm = 0.5 * (t1 + t2)
        um, vm = r * np.cos(tm), r * np.sin(tm)
        within = live & (um >= a) & (um <= b) & (vm >= c) & (vm <= dd)
        length += np.where(within, r * (t2 - t1), 0.0)
        nxv += np.where(within, v[rows, nxt] - v[:, m], 0.0)
        nyv -= np.where(within, u[rows, nxt] - u[:, m], 0.0)
    whole = (count == 0) & (r <= b) & (r >= a) & (0.0 >= c) & (0.0 <= dd)     # the circle lies in the cell
    length = np.where(whole, 2.0 * np.pi * r, length)
    return i, j, length, nxv, nyv


def _polygon_rim(p: Polygon, xe, ye):
    """The polygon's edges split at the grid lines, each piece in its cell; one along a grid line in the cell its
    outward normal points into."""
    _, xs, ys, xt, yt = polygon_pieces(p, xe, ye)
    i, j = piece_cells(xe, ye, xs, ys, xt, yt)
    nxv, nyv = p.orientation * (yt - ys), -p.orientation * (xt - xs)
    on_x = (xs == xt) & (j + 1 < len(xe)) & (j + 1 >= 0) & (xe[np.clip(j + 1, 0, len(xe) - 1)] == xs)
    on_y = (ys == yt) & (i + 1 < len(ye)) & (i + 1 >= 0) & (ye[np.clip(i + 1, 0, len(ye) - 1)] == ys)
    j = np.where(on_x & (nxv > 0), j + 1, j)
    i = np.where(on_y & (nyv > 0), i + 1, i)
    ok = (i >= 0) & (i < len(ye) - 1) & (j >= 0) & (j < len(xe) - 1)
    return i[ok], j[ok], np.hypot(xt - xs, yt - ys)[ok], nxv[ok], nyv[ok]


def _mask_rim(m: Mask, xe, ye):
    """The pixels' outline: horizontal pixel edges between a set and a clear pixel, and vertical ones (the same
    on the transposed mask), split at the grid's lines."""
    i, j, length, normal = _horizontal_rim(m.bits, *m.edges, xe, ye)
    jt, it, lt, nt = _horizontal_rim(m.bits.T, *m.edges[::-1], ye, xe)
    zero = np.zeros
    return (np.concatenate([i, it]), np.concatenate([j, jt]), np.concatenate([length, lt]),
            np.concatenate([zero(len(i)), nt]), np.concatenate([normal, zero(len(it))]))


def _horizontal_rim(bits, px, py, xe, ye):
    """(row, column, length, normal y) of the pixel edges y = py[q] between a set and a clear pixel, as runs split
    at the columns' edges; one on a grid line y = ye[k] goes to the cell its normal points into."""
    pad = np.zeros((bits.shape[0] + 2, bits.shape[1] + 2), dtype=np.int8)
    pad[1:-1, 1:-1] = bits
    step = np.diff(pad, axis=0)[:, 1:-1]                     # row q: bits[q] - bits[q - 1] across y = py[q]
    out = []
    for sign in (1, -1):                                     # +1: set above, the normal points down
        edge = np.zeros((step.shape[0], step.shape[1] + 2), dtype=np.int8)
        edge[:, 1:-1] = step == sign
        change = np.diff(edge, axis=1)
        q, p0 = np.nonzero(change == 1)
        _, p1 = np.nonzero(change == -1)
        y, xa, xb = py[q], px[p0], px[p1]
        run, col = lines.ragged(np.searchsorted(xe, xa, side="right") - 1, np.searchsorted(xe, xb, side="left"))
        ok = (col >= 0) & (col < len(xe) - 1)
        run, col = run[ok], col[ok]
        length = np.minimum(xb[run], xe[col + 1]) - np.maximum(xa[run], xe[col])
        row = np.searchsorted(ye, y[run], side="left") - 1
        on_line = (row + 1 < len(ye)) & (ye[np.clip(row + 1, 0, len(ye) - 1)] == y[run])
        row = np.where(on_line & (sign < 0), row + 1, row)
        keep = (row >= 0) & (row < len(ye) - 1) & (length > 0)
        out.append((row[keep], col[keep], length[keep], -sign * length[keep]))
    return tuple(np.concatenate(v) for v in zip(*out))
