"""The exact fraction of each cell of a tensor grid that a shape covers.

Cells: [xe[j], xe[j + 1]] x [ye[i], ye[i + 1]] for edges xe, ye strictly increasing (spacings may vary).
Only the cells the shape's bounding box touches are computed; a cell that the shape's boundary does not cross
gets exactly 0.0 or 1.0. A cut cell's value depends only on its own edges and the shape (never on the rest of
the grid), so a block of the grid computed alone gives the same bits as the whole grid.

- Rectangle: products of 1-D overlaps.
- Disk: cut cells by the exact integral of the chord, with the arc's integral written so that it loses no digits
  to cancellation; the error is rounding relative to the coordinates (about 1e-16 |x| / h relative to a cell).
- Polygon: Green's theorem per cut cell: the polygon's edges split at the grid lines, each piece contributing
  the area between it and the cell's right side, plus the cell's width times the length of its left side inside
  the polygon (which accounts for every edge left of the cell). Concave polygons too.
- Mask: the cell's overlap with each set pixel, summed separably over sub-intervals between the cell's and the
  pixels' edges (all terms positive: no cancellation).
"""

from __future__ import annotations

import functools

import numpy as np

from . import lines
from .shapes import Disk, Mask, Polygon, Rectangle, bbox, mask_box, transpose


def cell_fractions(shape, xe, ye) -> np.ndarray:
    """(len(ye) - 1, len(xe) - 1) float64: the fraction of each cell's area the shape covers, in [0, 1]
    (module docstring: exactness, locality)."""
    xe, ye = _edges(xe, "xe"), _edges(ye, "ye")
    out = np.zeros((len(ye) - 1, len(xe) - 1))
    box = fractions_box(shape, xe, ye)
    if box is not None:
        i0, i1, j0, j1, f = box
        out[i0:i1, j0:j1] = f
    return out


def _edges(e, name: str) -> np.ndarray:
    e = np.asarray(e, dtype=np.float64)
    if e.ndim != 1 or len(e) < 2 or not np.all(np.diff(e) > 0) or not np.isfinite(e).all():
        raise ValueError(f"{name} must be at least two finite, strictly increasing edges")
    return e


def index_box(shape, xe, ye):
    """(i0, i1, j0, j1): the rows [i0, i1) and columns [j0, j1) of cells that the shape's bounding box overlaps
    with positive area; None if there are none."""
    box = bbox(shape)
    if box is None:
        return None
    x0, y0, x1, y1 = box
    j0, j1 = int(np.searchsorted(xe, x0, side="right")) - 1, int(np.searchsorted(xe, x1, side="left"))
    i0, i1 = int(np.searchsorted(ye, y0, side="right")) - 1, int(np.searchsorted(ye, y1, side="left"))
    j0, i0 = max(j0, 0), max(i0, 0)
    j1, i1 = min(j1, len(xe) - 1), min(i1, len(ye) - 1)
    if j0 >= j1 or i0 >= i1:
        return None
    return i0, i1, j0, j1


def fractions_box(shape, xe, ye):
    """(i0, i1, j0, j1, f): cell_fractions restricted to the block index_box (None when that is empty)."""
    box = index_box(shape, xe, ye)
    if box is None:
        return None
    i0, i1, j0, j1 = box
    x, y = xe[j0:j1 + 1], ye[i0:i1 + 1]
    if isinstance(shape, Rectangle):
        f = _rectangle(shape, x, y)
    elif isinstance(shape, Disk):
        f = _disk(shape, x, y)
    elif isinstance(shape, Polygon):
        f = _polygon(shape, x, y)
    else:
        f = _mask(shape, x, y)
    return i0, i1, j0, j1, f


def overlap_1d(e: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The fraction of each interval [e[j], e[j + 1]] inside [lo, hi] (exactly 1.0 for one wholly inside)."""
    return np.maximum(np.minimum(e[1:], hi) - np.maximum(e[:-1], lo), 0.0) / np.diff(e)


def _rectangle(r: Rectangle, xe, ye) -> np.ndarray:
    return overlap_1d(ye, r.y0, r.y1)[:, None] * overlap_1d(xe, r.x0, r.x1)[None, :]


# ---------------------------------------------------------------------------------------------- disks

def _disk(d: Disk, xe, ye) -> np.ndarray:
    r = d.r
    u, v = xe - d.cx, ye - d.cy                                   # edges relative to the centre
    c, dd = v[:-1], v[1:]
    near = np.where((c <= 0) & (dd >= 0), 0.0, np.minimum(np.abs(c), np.abs(dd)))
    far = np.maximum(np.abs(c), np.abs(dd))
    w_out = _half_chord(r, near)                                  # the disk's widest half-chord in each row
    w_in = np.where(far < r, _half_chord(r, far), -1.0)           # within +-w_in every height of the row is inside
    a, b = u[:-1], u[1:]
    t_lo = np.searchsorted(b, -w_out, side="right")               # first column with b > -w_out
    t_hi = np.searchsorted(a, w_out, side="left")                 # past the last column with a < w_out
    f_lo = np.searchsorted(a, -w_in, side="left")                 # first column with a >= -w_in
    f_hi = np.searchsorted(b, w_in, side="right")                 # past the last column with b <= w_in
    has_full = f_lo < f_hi
    f_lo, f_hi = np.where(has_full, f_lo, t_hi), np.where(has_full, f_hi, t_hi)
    out = np.zeros((len(c), len(a)))
    col = np.arange(len(a))[None, :]
    out[(col >= f_lo[:, None]) & (col < f_hi[:, None])] = 1.0
    left_i, left_j = lines.ragged(t_lo, np.maximum(t_lo, np.minimum(f_lo, t_hi)))
    right_i, right_j = lines.ragged(np.maximum(f_hi, t_lo), np.maximum(t_hi, np.maximum(f_hi, t_lo)))
    i = np.concatenate([left_i, right_i])
    j = np.concatenate([left_j, right_j])
    cell = disk_box_area(r, a[j], b[j], c[i], dd[i])
    out[i, j] = np.clip(cell / ((b[j] - a[j]) * (dd[i] - c[i])), 0.0, 1.0)
    return out


def _half_chord(r: float, v) -> np.ndarray:
    """sqrt(r^2 - v^2) for |v| <= r (0 beyond), without losing digits near |v| = r."""
    v = np.abs(v)
    return np.sqrt(np.maximum((r - v) * (r + v), 0.0))


def disk_box_area(r: float, a, b, c, d) -> np.ndarray:
    """The area of the disk of radius r about the origin within each box [a, b] x [c, d] (arrays): the integral
    over u of the length of [c, d] inside the chord [-s(u), s(u)], split where the circle crosses y = c and y = d,
    so that each piece is a constant or the arc's integral."""
    a, b, c, d = (np.asarray(t, dtype=np.float64) for t in (a, b, c, d))
    lo, hi = np.maximum(a, -r), np.minimum(b, r)
    pc, pd = _half_chord(r, c), _half_chord(r, d)
    cuts = [lo, hi]
    for p, v in ((pc, c), (pd, d)):
        valid = np.abs(v) < r
        cuts += [np.where(valid, np.clip(p, lo, hi), lo), np.where(valid, np.clip(-p, lo, hi), lo)]
    pts = np.sort(np.stack(cuts, axis=1), axis=1)
    area = np.zeros(len(a))
    for k in range(pts.shape[1] - 1):
        u1, u2 = pts[:, k], pts[:, k + 1]
        live = (u2 > u1) & (hi > lo)
        um = 0.5 * (u1 + u2)
        sm = _half_chord(r, um)
        top_arc, bottom_arc = sm < d, -sm > c
        positive = np.minimum(d, sm) > np.maximum(c, -sm)
        const = np.where(top_arc, 0.0, d) - np.where(bottom_arc, 0.0, c)
        n_arc = top_arc.astype(np.float64) + bottom_arc
        piece = (u2 - u1) * const + n_arc * arc_integral(r, u1, u2)
        area += np.where(live & positive, piece, 0.0)
    return area


def arc_integral(r: float, u1, u2) -> np.ndarray:
    """The integral of sqrt(r^2 - u^2) from u1 to u2 (|u| <= r), as 1/2 [u s]_{u1}^{u2} + r^2/2 (asin(u2/r) -
    asin(u1/r)) with both differences factored by (u2 - u1), so a short interval keeps its digits."""
    s1, s2 = _half_chord(r, u1), _half_chord(r, u2)
    du = u2 - u1
    ssum = s1 + s2
    with np.errstate(invalid="ignore", divide="ignore"):
        k = np.where(ssum > 0, u1 * (u1 + u2) / ssum, 0.0)
    sin_diff = np.where(ssum > 0, du * (s1 + k), u2 * s1 - u1 * s2)     # r^2 sin(t2 - t1)
    us_diff = np.where(ssum > 0, du * (s2 - k), u2 * s2 - u1 * s1)      # u2 s2 - u1 s1
    angle = np.arctan2(sin_diff, u1 * u2 + s1 * s2)
    return 0.5 * (us_diff + r * r * angle)


# ---------------------------------------------------------------------------------------------- polygons

def polygon_pieces(shape: Polygon, xe, ye):
    """The polygon's edges split at every grid line they cross: (edge, xs, ys, xt, yt) per piece, from (xs, ys) to
    (xt, yt) in the edge's direction, sorted by edge then position; pieces of zero length are left out. A piece's
    ends on a grid line lie exactly on it."""
    p = shape.array
    q = np.roll(p, -1, axis=0)
    x1, y1, x2, y2 = p[:, 0], p[:, 1], q[:, 0], q[:, 1]
    edge = [np.arange(len(p)), np.arange(len(p))]
    t = [np.zeros(len(p)), np.ones(len(p))]
    px = [x1, x2]
    py = [y1, y2]
    for lines_at, a1, a2, b1, b2, into in ((xe, x1, x2, y1, y2, "x"), (ye, y1, y2, x1, x2, "y")):
        lo, hi = np.minimum(a1, a2), np.maximum(a1, a2)
        e, k = lines.ragged(np.searchsorted(lines_at, lo, side="right"), np.searchsorted(lines_at, hi, side="left"))
        at = lines_at[k]
        tt = (at - a1[e]) / (a2[e] - a1[e])
        other = np.where(tt <= 0.5, b1[e] + tt * (b2[e] - b1[e]), b2[e] - (1.0 - tt) * (b2[e] - b1[e]))
        edge.append(e)
        t.append(tt)
        px.append(at if into == "x" else other)
        py.append(other if into == "x" else at)
    edge, t, px, py = (np.concatenate(v) for v in (edge, t, px, py))
    order = np.lexsort((t, edge))
    edge, px, py = edge[order], px[order], py[order]
    same = edge[1:] == edge[:-1]
    xs, ys, xt, yt = px[:-1][same], py[:-1][same], px[1:][same], py[1:][same]
    keep = (xs != xt) | (ys != yt)
    return edge[:-1][same][keep], xs[keep], ys[keep], xt[keep], yt[keep]


def piece_cells(xe, ye, xs, ys, xt, yt):
    """(row, column) of each piece by its midpoint; a piece along a grid line takes the cell below / left of it."""
    xm, ym = 0.5 * (xs + xt), 0.5 * (ys + yt)
    return np.searchsorted(ye, ym, side="left") - 1, np.searchsorted(xe, xm, side="left") - 1


def _polygon(shape: Polygon, xe, ye) -> np.ndarray:
    ny, nx = len(ye) - 1, len(xe) - 1
    out = _centres_inside(shape, xe, ye)
    _, xs, ys, xt, yt = polygon_pieces(shape, xe, ye)
    i, j = piece_cells(xe, ye, xs, ys, xt, yt)
    ok = (i >= 0) & (i < ny) & (j >= 0) & (j < nx)
    i, j, xs, ys, xt, yt = i[ok], j[ok], xs[ok], ys[ok], xt[ok], yt[ok]
    cell = i * nx + j
    cut = np.unique(cell)
    # pieces: the area between each and the cell's right side, signed by the winding (+ going down, ccw)
    within = np.bincount(np.searchsorted(cut, cell), minlength=len(cut),
                         weights=shape.orientation * (ys - yt) * (xe[j + 1] - 0.5 * (xs + xt)))
    ci, cj = cut // nx, cut % nx
    # every edge left of the cell: the length of its left side inside the polygon (seen just right of that side)
    left = lines.inside_lengths(transpose(shape), xe[cj], ye[ci], ye[ci + 1], rule="above")
    w, h = xe[cj + 1] - xe[cj], ye[ci + 1] - ye[ci]
    out[ci, cj] = np.clip((w * left + within) / (w * h), 0.0, 1.0)
    return out


def _centres_inside(shape: Polygon, xe, ye) -> np.ndarray:
    """1.0 where a cell's centre lies inside the polygon, else 0.0 (right for every cell no edge crosses)."""
    ny, nx = len(ye) - 1, len(xe) - 1
    yc, xc = 0.5 * (ye[:-1] + ye[1:]), 0.5 * (xe[:-1] + xe[1:])
    line, a, b = lines.runs(shape, yc, np.full(ny, xe[0]), np.full(ny, xe[-1]))
    diff = np.zeros((ny, nx + 1), dtype=np.int64)
    np.add.at(diff, (line, np.searchsorted(xc, a, side="left")), 1)
    np.add.at(diff, (line, np.searchsorted(xc, b, side="right")), -1)
    return (np.cumsum(diff[:, :-1], axis=1) > 0).astype(np.float64)


# ---------------------------------------------------------------------------------------------- masks

def _mask(shape: Mask, xe, ye) -> np.ndarray:
    q0, q1, p0, p1 = mask_box(shape)
    px, py = shape.edges
    pad = _padded(shape.bits[q0:q1, p0:p1])
    kx, sx, wx_sub = _slots(xe, px[p0:p1 + 1])
    ky, sy, wy_sub = _slots(ye, py[q0:q1 + 1])
    wx, hy = np.diff(xe), np.diff(ye)
    n_rows = len(hy)
    out = np.empty((n_rows, len(wx)))
    cols = pad[:, kx + 1]                                   # (pixel rows + 2, sub-columns)
    rows_per = max(1, (1 << 20) // (len(kx) * sy.shape[1]))
    for r0 in range(0, n_rows, rows_per):                  # blocks of cell rows
        r1 = min(n_rows, r0 + rows_per)
        gathered = [cols[ky[sy[r0:r1, k]] + 1] for k in range(sy.shape[1])]
        along_y = sum(g * wy_sub[r0:r1, k][:, None] for k, g in enumerate(gathered))
        all_y = functools.reduce(np.minimum, gathered)
        any_y = functools.reduce(np.maximum, gathered)
        along = sum(along_y[:, sx[:, k]] * wx_sub[:, k][None, :] for k in range(sx.shape[1]))
        frac = np.clip(along / (hy[r0:r1, None] * wx[None, :]), 0.0, 1.0)
        frac[functools.reduce(np.minimum, [all_y[:, sx[:, k]] for k in range(sx.shape[1])]) == 1] = 1.0
        frac[functools.reduce(np.maximum, [any_y[:, sx[:, k]] for k in range(sx.shape[1])]) == 0] = 0.0
        out[r0:r1] = frac
    return out


def _padded(bits: np.ndarray) -> np.ndarray:
    """The pixels with a clear border (index 0 and -1: outside the mask), as uint8."""
    pad = np.zeros((bits.shape[0] + 2, bits.shape[1] + 2), dtype=np.uint8)
    pad[1:-1, 1:-1] = bits
    return pad


def _slots(e: np.ndarray, pe: np.ndarray):
    """Split the cells [e[j], e[j + 1]] at the pixel edges pe inside them into sub-intervals: (the pixel of each
    sub-interval: -1 before the first pixel, len(pe) - 1 past the last; slots (cells, K), each cell's
    sub-intervals, padded by repeating its last; their lengths (cells, K), 0.0 in the padding)."""
    cuts = np.union1d(e, pe[(pe > e[0]) & (pe < e[-1])])
    mid = 0.5 * (cuts[:-1] + cuts[1:])
    pixel = np.clip(np.searchsorted(pe, mid, side="right") - 1, -1, len(pe) - 1)
    first = np.searchsorted(cuts, e[:-1])
    count = np.diff(np.append(first, len(mid)))
    k = np.arange(count.max())[None, :]
    slots = first[:, None] + np.minimum(k, count[:, None] - 1)
    return pixel, slots, np.where(k < count[:, None], np.diff(cuts)[slots], 0.0)
