"""Shapes along horizontal lines: where each shape lies on a line (its runs), exactly, and what a line crosses
when shapes are painted in order. Lines along y are lines along x of the transposed shapes (shapes.transpose).

A batch of N lines is given as arrays y (the height of each), lo and hi (the part of each line wanted). Runs come
back ragged: (line, a, b) with lo <= a < b <= hi, the shape's intervals on the line clipped to [lo, hi].

Which side of a line decides when the line runs along a shape's boundary (a rectangle's edge, a polygon's point or
horizontal edge, a pixel row's edge) is the `rule`: "above" takes the shape just above the line (y + 0), "below"
just below (y - 0), "closed" both (a boundary on the line belongs to the shape). Away from such heights the three
agree. A disk's runs are the open chords (a line tangent to it has none).
"""

from __future__ import annotations

import functools

import numpy as np

from .shapes import Disk, Mask, Polygon, Rectangle

RULES = ("above", "below", "closed")


def runs(shape, y, lo, hi, rule: str = "above"):
    """(line, a, b): the shape's intervals on the lines (module docstring), a < b, clipped to [lo, hi]; the
    intervals of one line are disjoint (those that touch are merged for rule "closed")."""
    y, lo, hi = (np.asarray(v, dtype=np.float64) for v in (y, lo, hi))
    if isinstance(shape, Rectangle):
        inside = {"above": (shape.y0 <= y) & (y < shape.y1), "below": (shape.y0 < y) & (y <= shape.y1),
                  "closed": (shape.y0 <= y) & (y <= shape.y1)}[rule]
        line = np.flatnonzero(inside)
        return _clip(line, np.full(len(line), shape.x0), np.full(len(line), shape.x1), lo, hi)
    if isinstance(shape, Disk):
        dy = y - shape.cy
        line = np.flatnonzero(np.abs(dy) < shape.r)
        s = np.sqrt((shape.r - dy[line]) * (shape.r + dy[line]))
        return _clip(line, shape.cx - s, shape.cx + s, lo, hi)
    if isinstance(shape, Polygon):
        return _polygon_runs(shape, y, lo, hi, rule)
    return _mask_runs(shape, y, lo, hi, rule)


def _clip(line, a, b, lo, hi):
    a, b = np.maximum(a, lo[line]), np.minimum(b, hi[line])
    keep = a < b
    return line[keep], a[keep], b[keep]


def _closed(one_side, shape, y, lo, hi, on_boundary: np.ndarray):
    """Rule "closed" from the two half-open rules: the union of above and below, on the lines that need it."""
    la, aa, ba = one_side(shape, y, lo, hi, "above")
    need = np.flatnonzero(on_boundary)
    if len(need) == 0:
        return la, aa, ba
    lb, ab, bb = one_side(shape, y[need], lo[need], hi[need], "below")
    return union(np.concatenate([la, need[lb]]), np.concatenate([aa, ab]), np.concatenate([ba, bb]))


# ---------------------------------------------------------------------------------------------- polygons

@functools.lru_cache(maxsize=64)
def _slabs(shape: Polygon):
    """The polygon cut into horizontal slabs between its points' distinct heights: (heights, offsets, edges, xl,
    yl, xh, yh) with edges[offsets[k]:offsets[k + 1]] the edges that cross slab k, each from its lower end
    (xl, yl) to its upper end (xh, yh)."""
    p = shape.array
    q = np.roll(p, -1, axis=0)
    lower = p[:, 1] <= q[:, 1]
    xl, yl = np.where(lower, p[:, 0], q[:, 0]), np.where(lower, p[:, 1], q[:, 1])
    xh, yh = np.where(lower, q[:, 0], p[:, 0]), np.where(lower, q[:, 1], p[:, 1])
    heights = np.unique(p[:, 1])
    k0, k1 = np.searchsorted(heights, yl), np.searchsorted(heights, yh)      # edge spans slabs [k0, k1)
    edge, slab = ragged(k0, k1)
    order = np.argsort(slab, kind="stable")
    edges = edge[order]
    offsets = np.searchsorted(slab[order], np.arange(len(heights)))
    offsets = np.append(offsets, len(edges))
    return heights, offsets, edges, xl, yl, xh, yh


def crossings_on_lines(shape: Polygon, y, rule: str):
    """(line, x) of the polygon's edges crossing each line y (rule "above" or "below"), sorted by line then x:
    an even number per line."""
    heights, offsets, edges, xl, yl, xh, yh = _slabs(shape)
    side = "right" if rule == "above" else "left"
    k = np.searchsorted(heights, y, side=side) - 1
    ok = (k >= 0) & (k < len(heights) - 1)
    line = np.flatnonzero(ok)
    e_line, pos = ragged(offsets[k[ok]], offsets[k[ok] + 1])
    line = line[e_line]
    e = edges[pos]
    t = (y[line] - yl[e]) / (yh[e] - yl[e])
    x = np.where(t <= 0.5, xl[e] + t * (xh[e] - xl[e]), xh[e] - (1.0 - t) * (xh[e] - xl[e]))
    order = np.lexsort((x, line))
    return line[order], x[order]


def _polygon_side(shape, y, lo, hi, rule):
    line, x = crossings_on_lines(shape, y, rule)
    return _clip(line[0::2], x[0::2], x[1::2], lo, hi)


def _polygon_runs(shape, y, lo, hi, rule):
    if rule != "closed":
        return _polygon_side(shape, y, lo, hi, rule)
    heights = _slabs(shape)[0]
    return _closed(_polygon_side, shape, y, lo, hi, np.isin(y, heights))


# ---------------------------------------------------------------------------------------------- masks

@functools.lru_cache(maxsize=16)
def _mask_rows(shape: Mask):
    """The set pixels of each row as runs: (start_key, end_key, p_start, p_end) sorted by row then column, with
    key = row * (mx + 1) + column, so one searchsorted finds a row's runs near a column."""
    bits = shape.bits
    my, mx = bits.shape
    padded = np.zeros((my, mx + 2), dtype=np.int8)
    padded[:, 1:-1] = bits
    change = np.diff(padded, axis=1)
    rs, ps = np.nonzero(change == 1)
    _, pe = np.nonzero(change == -1)
    stride = mx + 1
    return rs * stride + ps, rs * stride + pe, ps, pe


def _mask_side(shape: Mask, y, lo, hi, rule):
    px, py = shape.edges
    my, mx = shape.bits.shape
    q = np.searchsorted(py, y, side="right" if rule == "above" else "left") - 1
    ok = (q >= 0) & (q < my) & (lo < hi)
    line = np.flatnonzero(ok)
    q = q[ok]
    start_key, end_key, ps, pe = _mask_rows(shape)
    stride = mx + 1
    p_lo = np.clip(np.searchsorted(px, lo[line], side="right") - 1, 0, mx)      # the pixel holding lo
    p_hi = np.clip(np.searchsorted(px, hi[line], side="left"), 0, mx)           # one past the pixel holding hi
    first = np.searchsorted(end_key, q * stride + p_lo, side="right")           # runs ending after p_lo
    last = np.searchsorted(start_key, q * stride + p_hi, side="left")           # runs starting before p_hi
    which, run = ragged(first, np.maximum(first, last))
    return _clip(line[which], px[ps[run]], px[pe[run]], lo, hi)


def _mask_runs(shape: Mask, y, lo, hi, rule):
    if rule != "closed":
        return _mask_side(shape, y, lo, hi, rule)
    return _closed(_mask_side, shape, y, lo, hi, np.isin(y, shape.edges[1]))


# ---------------------------------------------------------------------------------------------- helpers

def ragged(start, stop):
    """For ranges [start[n], stop[n]): (n, k) for every k in each range, in order (np.repeat of the ranges)."""
    start = np.asarray(start, dtype=np.int64)
    count = np.maximum(np.asarray(stop, dtype=np.int64) - start, 0)
    n = np.repeat(np.arange(len(start)), count)
    first = np.cumsum(count) - count
    k = np.arange(int(count.sum())) - np.repeat(first, count) + np.repeat(start, count)
    return n, k


def near_pairs(lo_a, hi_a, lo_b, hi_b, size: float):
    """(i, j), unique: the boxes [lo_a[i], hi_a[i]] and [lo_b[j], hi_b[j]] ((n, 2) corners) that share a bucket of
    side `size` (every pair of boxes that overlap is among them). The side grows (doubling) while the boxes
    would fill more than 64 buckets each on average, so long boxes cost memory O(n), not O(length / size)."""
    if len(lo_a) == 0 or len(lo_b) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    origin = np.minimum(lo_a.min(axis=0), lo_b.min(axis=0))
    span = float((np.maximum(hi_a.max(axis=0), hi_b.max(axis=0)) - origin).max())
    size = max(size, span / (1 << 20), 1e-300)
    while True:
        keys_a, idx_a = _bucket_keys(lo_a, hi_a, origin, size)
        keys_b, idx_b = _bucket_keys(lo_b, hi_b, origin, size)
        if len(keys_a) + len(keys_b) <= 64 * (len(lo_a) + len(lo_b)) + (1 << 16):
            break
        size *= 2.0
    order = np.argsort(keys_b, kind="stable")
    keys_b, idx_b = keys_b[order], idx_b[order]
    first, last = np.searchsorted(keys_b, keys_a, "left"), np.searchsorted(keys_b, keys_a, "right")
    k, m = ragged(first, last)
    pairs = np.unique(idx_a[k].astype(np.int64) * len(lo_b) + idx_b[m])
    return pairs // len(lo_b), pairs % len(lo_b)


def _bucket_keys(lo, hi, origin, size):
    c0 = np.floor((lo - origin) / size).astype(np.int64)
    c1 = np.floor((hi - origin) / size).astype(np.int64)
    nx, ny = c1[:, 0] - c0[:, 0] + 1, c1[:, 1] - c0[:, 1] + 1
    box, k = ragged(np.zeros(len(lo), dtype=np.int64), nx * ny)
    cx, cy = c0[box, 0] + k % nx[box], c0[box, 1] + k // nx[box]
    return cy * (1 << 22) + cx, box


def union(line, a, b):
    """The union of intervals per line, as disjoint intervals sorted by line and position (touching ones merged)."""
    if len(line) == 0:
        return line, a, b
    x = np.concatenate([a, b])
    step = np.concatenate([np.ones(len(a), np.int64), -np.ones(len(b), np.int64)])
    ln = np.concatenate([line, line])
    order = np.lexsort((-step, x, ln))                  # at a tie, starts before ends: touching intervals merge
    x, step, ln = x[order], step[order], ln[order]
    depth = np.cumsum(step)
    opens = (step == 1) & (depth == 1)
    closes = (step == -1) & (depth == 0)
    return ln[opens], x[opens], x[closes]


def inside_lengths(shape, y, lo, hi, rule: str = "above") -> np.ndarray:
    """The length of each line's part [lo, hi] inside the shape."""
    line, a, b = runs(shape, y, lo, hi, rule)
    return np.bincount(line, weights=b - a, minlength=len(np.atleast_1d(y)))


def paint_lines(shapes, y, lo, hi, rule: str = "above") -> np.ndarray:
    """(N, len(shapes) + 1): the length of each line's part [lo, hi] whose top shape is each shape (column s + 1),
    painting the shapes in order (a later one hides an earlier one), or none (column 0). Exact: the lengths
    are differences of the shapes' run ends along each line; the lowest visible layer of a line (the last shape
    that covers it whole, or none) gets the line's length less the others'."""
    y, lo, hi = (np.asarray(v, dtype=np.float64) for v in (y, lo, hi))
    n, m = len(y), len(shapes)
    found = [runs(shape, y, lo, hi, rule) for shape in shapes]
    base = np.full(n, -1)                                   # the last shape covering each line whole (-1: none)
    for s, (line, a, b) in enumerate(found):
        whole = np.bincount(line, weights=(a == lo[line]) & (b == hi[line]), minlength=n) > 0
        base[whole] = s
    kept = []                                               # the runs of the shapes above each line's base
    for s, (line, a, b) in enumerate(found):
        above = s > base[line]
        kept.append((line[above], a[above], b[above]))
    reached = np.zeros(n, dtype=np.int64)                   # how many of those shapes have runs on each line
    for line, _, _ in kept:
        reached += np.bincount(line, minlength=n) > 0
    out = np.zeros((n, m + 1))
    for s, (line, a, b) in enumerate(kept):
        alone = reached[line] == 1
        out[:, s + 1] = np.bincount(line[alone], weights=(b - a)[alone], minlength=n)
    shared = np.flatnonzero(reached >= 2)
    if len(shared):
        where = np.full(n, -1)
        where[shared] = np.arange(len(shared))
        sub = []
        for line, a, b in kept:
            mine = where[line] >= 0
            sub.append((where[line][mine], a[mine], b[mine]))
        out[shared, 1:] = _sweep(sub, lo[shared], hi[shared])
    rows = np.arange(n)
    out[rows, base + 1] = (hi - lo) - out[:, 1:].sum(axis=1)
    return out


def _sweep(found, lo, hi) -> np.ndarray:
    """(N, len(found)): the visible length of each shape's runs (line, a, b) on lines [lo, hi] painted in order."""
    n, m = len(lo), len(found)
    ln, xs, who, step = [], [], [], []
    for s, (line, a, b) in enumerate(found):
        ln += [line, line]
        xs += [a, b]
        who.append(np.full(2 * len(line), s))
        step += [np.ones(len(line), np.int64), -np.ones(len(line), np.int64)]
    ln, xs, who, step = (np.concatenate(v) for v in (ln, xs, who, step))
    order = np.lexsort((xs, ln))
    ln, xs, who, step = ln[order], xs[order], who[order], step[order]
    top = np.full(len(xs), -1, dtype=np.int64)               # the top shape after each event (-1: none)
    for s in range(m):
        depth = np.cumsum(np.where(who == s, step, 0))
        top[depth > 0] = s
    length = np.diff(xs)
    use = (ln[1:] == ln[:-1]) & (top[:-1] >= 0)
    out = np.zeros(n * m)
    np.add.at(out, (ln[:-1] * m + top[:-1])[use], length[use])
    return out.reshape(n, m)


def dot(a: np.ndarray, v) -> np.ndarray:
    """a @ v for a (N, m) and v (m,), summed in column order: each row's bits do not depend on N (a BLAS product's
    blocking may), so a block of a grid computed alone matches the whole."""
    out = np.zeros(a.shape[0])
    for m in range(a.shape[1]):
        out += a[:, m] * v[m]
    return out


def segment_lengths(line, a, b, edges, n_lines: int) -> np.ndarray:
    """(n_lines, len(edges) - 1): the length of disjoint intervals (line, a, b) on each segment
    [edges[i], edges[i + 1]] of each line. A segment wholly within one interval gets its own length exactly."""
    nseg = len(edges) - 1
    seg_len = np.diff(edges)
    out = np.zeros((n_lines, nseg))
    a, b = np.clip(a, edges[0], edges[-1]), np.clip(b, edges[0], edges[-1])
    keep = a < b
    line, a, b = line[keep], a[keep], b[keep]
    i1 = np.clip(np.searchsorted(edges, a, side="right") - 1, 0, nseg - 1)   # the segment holding a
    i2 = np.clip(np.searchsorted(edges, b, side="left") - 1, 0, nseg - 1)    # the segment holding b
    one = i1 == i2
    np.add.at(out, (line[one], i1[one]), (b - a)[one])
    two = ~one
    l2, j1, j2 = line[two], i1[two], i2[two]
    whole_a = a[two] == edges[j1]                                           # a segment wholly covered from its start
    whole_b = b[two] == edges[j2 + 1]
    np.add.at(out, (l2[~whole_a], j1[~whole_a]), edges[j1 + 1][~whole_a] - a[two][~whole_a])
    np.add.at(out, (l2[~whole_b], j2[~whole_b]), b[two][~whole_b] - edges[j2][~whole_b])
    full = np.zeros((n_lines, nseg + 1), dtype=np.int64)
    np.add.at(full, (l2, np.where(whole_a, j1, j1 + 1)), 1)
    np.add.at(full, (l2, np.where(whole_b, j2 + 1, j2)), -1)
    covered = np.cumsum(full[:, :-1], axis=1) > 0
    out[covered] = np.broadcast_to(seg_len, out.shape)[covered]
    return out
