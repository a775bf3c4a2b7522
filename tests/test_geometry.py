"""solver.core.geometry (issues 42 and 43): exact cell fractions, painting in order, face conductances, rim
crossings and cut cells, the checks on bad shapes. Every value is checked against a reference written here
independently: Sutherland-Hodgman clipping and the shoelace for polygons, Gauss-Legendre in the angle for disks,
dense pixel-overlap matrices for masks, point sampling for everything, closed forms for layers and chords."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver.core.geometry import (Disk, Mask, Polygon, Rectangle, area, cell_fractions, crossings, cut_cells,
                                  cut_counts, face_conductance, paint, problem, self_crossing, smallest_feature,
                                  transpose)

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------- references

def shoelace(p) -> float:
    p = np.asarray(p, dtype=float)
    return 0.5 * float(np.sum(p[:, 0] * np.roll(p[:, 1], -1) - np.roll(p[:, 0], -1) * p[:, 1]))


def clip_area(points, x0, y0, x1, y1) -> float:
    """|polygon ∩ box| by Sutherland-Hodgman against the box's four sides, then the shoelace (about the box's
    corner, so a small box far from the origin keeps its digits)."""
    poly = [(p[0] - x0, p[1] - y0) for p in points]
    x0, y0, x1, y1 = 0.0, 0.0, x1 - x0, y1 - y0
    for axis, val, keep in ((0, x0, 1), (0, x1, -1), (1, y0, 1), (1, y1, -1)):
        def inside(p, axis=axis, val=val, keep=keep):
            return (p[axis] - val) * keep >= 0

        def cut(a, b, axis=axis, val=val):
            t = (val - a[axis]) / (b[axis] - a[axis])
            return (a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]))
        out = []
        for k in range(len(poly)):
            a, b = poly[k - 1], poly[k]
            if inside(b):
                if not inside(a):
                    out.append(cut(a, b))
                out.append(b)
            elif inside(a):
                out.append(cut(a, b))
        poly = out
        if not poly:
            return 0.0
    return abs(shoelace(poly))


_GX, _GW = np.polynomial.legendre.leggauss(40)


def disk_box_area(cx, cy, r, a, b, c, d) -> float:
    """|disk ∩ box| by Gauss-Legendre in phi, x = cx + r sin(phi), split where the chord meets y = c and y = d."""
    lo, hi = max(a, cx - r), min(b, cx + r)
    if lo >= hi:
        return 0.0
    p0, p1 = math.asin(max(-1.0, (lo - cx) / r)), math.asin(min(1.0, (hi - cx) / r))
    cuts = [p0, p1]
    for y in (c, d):
        if abs(y - cy) < r:
            ph = math.acos(abs(y - cy) / r)
            cuts += [t for t in (-ph, ph) if p0 < t < p1]
    cuts = sorted(cuts)
    total = 0.0
    for u, v in zip(cuts[:-1], cuts[1:]):
        phi = 0.5 * (u + v) + 0.5 * (v - u) * _GX
        h = r * np.cos(phi)
        length = np.maximum(np.minimum(d, cy + h) - np.maximum(c, cy - h), 0.0)
        total += 0.5 * (v - u) * float(np.sum(_GW * length * r * np.cos(phi)))
    return total


def mask_overlaps(m: Mask, xe, ye) -> np.ndarray:
    """F = Oy M Ox^T / cell areas with dense 1-D overlap matrices."""
    (x0, y0), (x1, y1) = m.extent
    my, mx = np.asarray(m.array).shape
    px, py = np.linspace(x0, x1, mx + 1), np.linspace(y0, y1, my + 1)

    def overlap(e, p):
        return np.maximum(np.minimum(e[1:, None], p[None, 1:]) - np.maximum(e[:-1, None], p[None, :-1]), 0.0)
    f = overlap(ye, py) @ (np.asarray(m.array) != 0).astype(float) @ overlap(xe, px).T
    return f / (np.diff(ye)[:, None] * np.diff(xe)[None, :])


def contains(shape, x, y) -> np.ndarray:
    """Point membership, written independently of the package (ray casting for polygons)."""
    if isinstance(shape, Rectangle):
        return (x >= shape.x0) & (x <= shape.x1) & (y >= shape.y0) & (y <= shape.y1)
    if isinstance(shape, Disk):
        return (x - shape.cx) ** 2 + (y - shape.cy) ** 2 <= shape.r ** 2
    if isinstance(shape, Polygon):
        p = np.array(shape.points)
        inside = np.zeros(np.broadcast_shapes(np.shape(x), np.shape(y)), dtype=bool)
        for (ax, ay), (bx, by) in zip(p, np.roll(p, -1, axis=0)):
            crosses = (ay > y) != (by > y)
            with np.errstate(divide="ignore", invalid="ignore"):
                xc = ax + (y - ay) * (bx - ax) / (by - ay)
            inside ^= crosses & (x < xc)
        return inside
    (x0, y0), (x1, y1) = shape.extent
    a = np.asarray(shape.array) != 0
    my, mx = a.shape
    p = np.floor((x - x0) / (x1 - x0) * mx).astype(int)
    q = np.floor((y - y0) / (y1 - y0) * my).astype(int)
    ok = (p >= 0) & (p < mx) & (q >= 0) & (q < my)
    p, q, ok = np.broadcast_arrays(p, q, ok)
    out = np.zeros(ok.shape, dtype=bool)
    out[ok] = a[q[ok], p[ok]]
    return out


def sampled(shape, xe, ye, n=64) -> np.ndarray:
    """Each cell's fraction by n x n midpoint samples."""
    t = (np.arange(n) + 0.5) / n
    xs = (xe[:-1, None] + t[None, :] * np.diff(xe)[:, None]).ravel()
    ys = (ye[:-1, None] + t[None, :] * np.diff(ye)[:, None]).ravel()
    inside = contains(shape, xs[None, :], ys[:, None]).astype(float)
    return inside.reshape(len(ye) - 1, n, len(xe) - 1, n).mean(axis=(1, 3))


def star(rng, n, cx=0.5, cy=0.5, r0=0.15, r1=0.45) -> Polygon:
    """A simple polygon, star-shaped about its centre (concave in general): points at increasing angles, no two
    more than 0.9 pi apart (a wider gap's edge could cross the others)."""
    while True:
        ang = np.sort(rng.uniform(0, 2 * np.pi, n))
        gaps = np.diff(np.append(ang, ang[0] + 2 * np.pi))
        if gaps.min() > 1e-3 and gaps.max() < 0.9 * np.pi:
            break
    rad = rng.uniform(r0, r1, n)
    p = Polygon(tuple(zip(cx + rad * np.cos(ang), cy + rad * np.sin(ang))))
    assert problem(p) is None
    return p


def random_edges(rng, n, lo=0.0, hi=1.0) -> np.ndarray:
    e = np.sort(rng.uniform(lo, hi, n + 1))
    while np.diff(e).min() <= 1e-9:
        e = np.sort(rng.uniform(lo, hi, n + 1))
    return e


def areas(xe, ye) -> np.ndarray:
    return np.diff(ye)[:, None] * np.diff(xe)[None, :]


def area_error(f, ref, xe, ye) -> float:
    """The largest difference of covered areas per unit of cell perimeter: what rounding of the coordinates
    allows (about 1e-16 |x| per unit of outline), whatever the cell's aspect."""
    return float((np.abs(f - ref) * areas(xe, ye) / (np.diff(ye)[:, None] + np.diff(xe)[None, :])).max())


seeds = st.integers(0, 2 ** 32 - 1)


# ---------------------------------------------------------------------------------------------- fractions

@FAST
@given(seeds)
def test_rectangle_fractions_are_products_of_overlaps_and_sum_to_the_area(seed):
    rng = np.random.default_rng(seed)
    xe, ye = random_edges(rng, rng.integers(1, 30), -0.5, 1.5), random_edges(rng, rng.integers(1, 30), -0.5, 1.5)
    x0, x1 = np.sort(rng.uniform(-0.7, 1.7, 2))
    y0, y1 = np.sort(rng.uniform(-0.7, 1.7, 2))
    f = cell_fractions(Rectangle(x0, y0, x1, y1), xe, ye)
    inside = max(0.0, min(x1, xe[-1]) - max(x0, xe[0])) * max(0.0, min(y1, ye[-1]) - max(y0, ye[0]))
    assert (f * areas(xe, ye)).sum() == pytest.approx(inside, rel=1e-13, abs=1e-15)
    ref = np.array([[clip_area([(x0, y0), (x1, y0), (x1, y1), (x0, y1)], xe[j], ye[i], xe[j + 1], ye[i + 1])
                     for j in range(len(xe) - 1)] for i in range(len(ye) - 1)]) / areas(xe, ye)
    assert area_error(f, ref, xe, ye) < 1e-14
    whole = (xe[:-1] >= x0)[None, :] & (xe[1:] <= x1)[None, :] & (ye[:-1] >= y0)[:, None] & (ye[1:] <= y1)[:, None]
    assert (f[whole] == 1.0).all()


@FAST
@given(seeds)
def test_disk_fractions_match_an_independent_quadrature_cell_by_cell(seed):
    rng = np.random.default_rng(seed)
    xe, ye = random_edges(rng, rng.integers(1, 14)), random_edges(rng, rng.integers(1, 14))
    d = Disk(*rng.uniform(0.0, 1.0, 2), rng.uniform(0.02, 0.6))
    f = cell_fractions(d, xe, ye)
    ref = np.array([[disk_box_area(d.cx, d.cy, d.r, xe[j], xe[j + 1], ye[i], ye[i + 1])
                     for j in range(len(xe) - 1)] for i in range(len(ye) - 1)]) / areas(xe, ye)
    assert area_error(f, ref, xe, ye) < 1e-14
    assert f.min() >= 0.0 and f.max() <= 1.0


@FAST
@given(seeds)
def test_disk_fractions_sum_to_pi_r_squared_on_random_grids(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    xe, ye = random_edges(rng, n), random_edges(rng, int(rng.integers(5, 300)))
    r = rng.uniform(0.01, 0.3)
    d = Disk(rng.uniform(xe[0] + r, xe[-1] - r) if xe[-1] - xe[0] > 2 * r else 0.5, rng.uniform(0.3, 0.7), r)
    if d.cx - r < xe[0] or d.cx + r > xe[-1] or d.cy - r < ye[0] or d.cy + r > ye[-1]:
        return                                                      # only disks wholly on the grid here
    f = cell_fractions(d, xe, ye)
    assert (f * areas(xe, ye)).sum() == pytest.approx(math.pi * r * r, rel=1e-13)


def test_tiny_cells_far_from_the_origin_lose_no_digits():
    """Cells 1e-6 wide on the rim of a disk of radius 1 centred at (1000, -500): areas taken as differences of
    quadrant areas (~1) would lose 1e12 of a cell; here each cell keeps the digits its coordinates carry (the
    reference: Gauss-Legendre in the angle, in coordinates about the centre, which are exact differences here)."""
    d = Disk(1000.0, -500.0, 1.0)
    h = 1e-6
    xe = 1000.0 + math.sqrt(0.5) + h * np.arange(-8, 9)
    ye = -500.0 + math.sqrt(0.5) + h * np.arange(-8, 9)
    f = cell_fractions(d, xe, ye)
    ref = np.array([[disk_box_area(0.0, 0.0, 1.0, xe[j] - 1000.0, xe[j + 1] - 1000.0, ye[i] + 500.0, ye[i + 1] + 500.0)
                     for j in range(16)] for i in range(16)]) / areas(xe, ye)
    assert ((f > 0) & (f < 1)).sum() >= 16                         # the rim crosses the block
    assert np.abs(f - ref).max() < 1e-9                           # 1e-16 * 0.7 / 1e-6 = 1e-10: the inputs' own


@FAST
@given(seeds, st.booleans(), st.booleans())
def test_polygon_fractions_match_clipping_cell_by_cell(seed, clockwise, convex):
    rng = np.random.default_rng(seed)
    xe, ye = random_edges(rng, rng.integers(1, 16), -0.1, 1.1), random_edges(rng, rng.integers(1, 16), -0.1, 1.1)
    p = star(rng, int(rng.integers(3, 14)), cx=rng.uniform(0.2, 0.8), cy=rng.uniform(0.2, 0.8))
    assert problem(p) is None
    pts = np.array(p.points)
    if convex:
        pts = pts[_hull(pts)]
    if clockwise:
        pts = pts[::-1]
    p = Polygon(tuple(map(tuple, pts)))
    f = cell_fractions(p, xe, ye)
    ref = np.array([[clip_area(pts, xe[j], ye[i], xe[j + 1], ye[i + 1]) for j in range(len(xe) - 1)]
                    for i in range(len(ye) - 1)]) / areas(xe, ye)
    assert area_error(f, ref, xe, ye) < 1e-14
    if pts[:, 0].min() > xe[0] and pts[:, 0].max() < xe[-1] and pts[:, 1].min() > ye[0] and pts[:, 1].max() < ye[-1]:
        assert (f * areas(xe, ye)).sum() == pytest.approx(abs(shoelace(pts)), rel=1e-12)


def _hull(p) -> list[int]:
    order = sorted(range(len(p)), key=lambda k: (p[k][0], p[k][1]))

    def half(idx):
        out = []
        for k in idx:
            while len(out) >= 2 and ((p[out[-1]][0] - p[out[-2]][0]) * (p[k][1] - p[out[-2]][1])
                                     - (p[out[-1]][1] - p[out[-2]][1]) * (p[k][0] - p[out[-2]][0])) <= 0:
                out.pop()
            out.append(k)
        return out
    lower, upper = half(order), half(order[::-1])
    hull = lower[:-1] + upper[:-1]
    return hull if len(hull) >= 3 else order[:3]


def test_polygon_with_edges_on_grid_lines_and_points_on_grid_corners():
    """A concave L-shape whose every edge lies on a grid line: each cell wholly in or out, exactly."""
    xe = ye = np.arange(11) / 10                                         # k / 10: exactly the points' 0.1, 0.3, ...
    L = Polygon(((0.1, 0.1), (0.7, 0.1), (0.7, 0.4), (0.3, 0.4), (0.3, 0.9), (0.1, 0.9)))
    f = cell_fractions(L, xe, ye)
    ref = sampled(L, xe, ye, n=4)
    assert np.array_equal(f, ref)
    assert set(np.unique(f)) == {0.0, 1.0}


@FAST
@given(seeds)
def test_mask_fractions_match_dense_overlap_matrices(seed):
    rng = np.random.default_rng(seed)
    xe, ye = random_edges(rng, rng.integers(1, 40)), random_edges(rng, rng.integers(1, 40))
    my, mx = int(rng.integers(1, 50)), int(rng.integers(1, 50))
    bits = rng.random((my, mx)) < rng.uniform(0.1, 0.9)
    (x0, x1), (y0, y1) = np.sort(rng.uniform(-0.2, 1.2, 2)), np.sort(rng.uniform(-0.2, 1.2, 2))
    m = Mask(bits.astype(np.uint8), ((x0, y0), (x1, y1)))
    f = cell_fractions(m, xe, ye)
    assert area_error(f, mask_overlaps(m, xe, ye), xe, ye) < 1e-14
    if x0 >= xe[0] and x1 <= xe[-1] and y0 >= ye[0] and y1 <= ye[-1]:
        assert (f * areas(xe, ye)).sum() == pytest.approx(area(m), rel=1e-12)


def test_a_mask_on_its_own_pixel_grid_is_its_pixels():
    rng = np.random.default_rng(5)
    bits = rng.random((12, 17)) < 0.5
    xe, ye = 1.7 * (np.arange(18) / 17), 1.2 * (np.arange(13) / 12)      # the pixels' edges (shapes.Mask)
    f = cell_fractions(Mask(bits, ((0.0, 0.0), (1.7, 1.2))), xe, ye)
    assert np.array_equal(f, bits.astype(float))
    g = cell_fractions(Mask(bits, ((0.0, 0.0), (1.7, 1.2))), np.linspace(0, 1.7, 18), np.linspace(0, 1.2, 13))
    assert np.abs(g - bits).max() < 1e-14                                 # edges that differ by rounding


@pytest.mark.parametrize("shape", [Rectangle(0.13, 0.21, 0.77, 0.58), Disk(0.47, 0.52, 0.31),
                                   Polygon(((0.1, 0.15), (0.85, 0.1), (0.45, 0.5), (0.8, 0.9), (0.2, 0.75))),
                                   Mask(np.array([[0, 1, 1, 0], [1, 1, 0, 0], [0, 1, 1, 1]]), ((0.1, 0.2), (0.9, 0.8)))])
def test_fractions_agree_with_sampling_and_uncut_cells_are_exactly_zero_or_one(shape):
    rng = np.random.default_rng(3)
    xe, ye = random_edges(rng, 17), random_edges(rng, 13)
    f = cell_fractions(shape, xe, ye)
    ref = sampled(shape, xe, ye, n=256)
    assert np.abs(f - ref).max() < 2.5 / 256                       # a cut costs sampling at most ~1/n per side
    exact = (ref == 0.0) | (ref == 1.0)                               # no sample disagrees: taken as uncut
    assert np.abs(f[exact] - ref[exact]).max() < 1e-5                 # (a sliver thinner than a sample may cut one)
    assert ((f == 0.0) | (f == 1.0)).sum() >= 0.9 * exact.sum()       # and the uncut ones are 0.0 or 1.0 exactly


@pytest.mark.parametrize("shape", [Disk(0.41, 0.57, 0.3), star(np.random.default_rng(9), 40),
                                   Mask(np.random.default_rng(2).random((30, 40)) < 0.5, ((0.1, 0.1), (0.9, 0.8)))])
def test_a_block_of_the_grid_gives_the_same_bits_as_the_whole(shape):
    rng = np.random.default_rng(4)
    xe, ye = random_edges(rng, 60), random_edges(rng, 50)
    whole = cell_fractions(shape, xe, ye)
    for (i0, i1, j0, j1) in ((10, 30, 5, 40), (0, 17, 33, 60), (25, 50, 0, 21)):
        part = cell_fractions(shape, xe[j0:j1 + 1], ye[i0:i1 + 1])
        assert np.array_equal(part, whole[i0:i1, j0:j1])


def test_mirror_and_translation_symmetries():
    n = 40
    xe = np.linspace(-1.0, 1.0, n + 1)
    d = Disk(0.0, 0.0, 0.63)
    f = cell_fractions(d, xe, xe)
    assert np.abs(f - f[::-1]).max() < 1e-13 and np.abs(f - f[:, ::-1]).max() < 1e-13
    assert np.abs(f - f.T).max() < 1e-13
    shift = (0.37, -0.81)
    g = cell_fractions(Disk(shift[0], shift[1], 0.63), xe + shift[0], xe + shift[1])
    assert np.abs(f - g).max() < 1e-12
    p = star(np.random.default_rng(1), 25, cx=0.0, cy=0.0)
    rot = Polygon(tuple((-y, x) for x, y in p.points))                 # rotated by 90 degrees
    fp, fr = cell_fractions(p, xe, xe), cell_fractions(rot, xe, xe)
    assert np.abs(fr - fp.T[:, ::-1]).max() < 1e-12
    assert np.array_equal(cell_fractions(transpose(p), xe, xe[:21]), cell_fractions(p, xe[:21], xe).T) or \
        np.abs(cell_fractions(transpose(p), xe, xe[:21]) - cell_fractions(p, xe[:21], xe).T).max() < 1e-13


def test_a_disks_area_is_exact_and_its_second_moment_converges_at_order_2():
    """Fractions put the area where it is: the polar moment sum(f A r_c^2) of cell centres tends to pi r^4 / 2 at
    order 2, while the area is exact on every grid (point sampling: order 1 or worse)."""
    r, c = 0.3, (0.5123, 0.4871)
    errs, sampled_errs = [], []
    for n in (32, 64, 128, 256):
        e = np.linspace(0.0, 1.0, n + 1)
        f = cell_fractions(Disk(c[0], c[1], r), e, e)
        a = areas(e, e)
        assert (f * a).sum() == pytest.approx(math.pi * r * r, rel=1e-13)
        mid = 0.5 * (e[:-1] + e[1:])
        r2 = (mid[None, :] - c[0]) ** 2 + (mid[:, None] - c[1]) ** 2
        errs.append(abs((f * a * r2).sum() - math.pi * r ** 4 / 2))
        sampled_errs.append(abs((r2 <= r * r).sum() * a[0, 0] - math.pi * r * r))
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert orders.min() > 1.6 and orders[-1] > 1.9, orders


# ---------------------------------------------------------------------------------------------- painting

def test_coincident_edges_paint_exactly():
    """A die over a spreader, their edges coincident and off the grid lines: every cell's shares exact (the
    independent-coverage rule would put spreader into cells the die covers)."""
    xe, ye = np.linspace(0.0, 1.0, 23), np.linspace(0.0, 1.0, 19)
    spreader, die = Rectangle(0.211, 0.3, 0.777, 0.712), Rectangle(0.211, 0.3, 0.5, 0.5)
    p = paint([spreader, die], ["cu", "si"], "air", xe, ye)
    ox = lambda lo, hi: np.maximum(np.minimum(xe[1:], hi) - np.maximum(xe[:-1], lo), 0) / np.diff(xe)  # noqa: E731
    oy = lambda lo, hi: np.maximum(np.minimum(ye[1:], hi) - np.maximum(ye[:-1], lo), 0) / np.diff(ye)  # noqa: E731
    si = oy(0.3, 0.5)[:, None] * ox(0.211, 0.5)[None, :]
    cu = oy(0.3, 0.712)[:, None] * ox(0.211, 0.777)[None, :] - si
    assert np.abs(p.fraction("si") - si).max() < 1e-14
    assert np.abs(p.fraction("cu") - cu).max() < 1e-14
    assert np.abs(p.fraction("air") - (1 - si - cu)).max() < 1e-14
    assert p.multi_cut > 0 and p.materials == ("air", "cu", "si")


def test_painting_totals_and_bitwise_means():
    """A disk over a plate over a board: each material's area exact; a cell of one material gets its value bit for
    bit from mean()."""
    xe, ye = random_edges(np.random.default_rng(0), 37), random_edges(np.random.default_rng(1), 29)
    board, plate, pipe = Rectangle(0.0, 0.0, 1.0, 1.0), Rectangle(0.15, 0.25, 0.8, 0.6), Disk(0.6, 0.55, 0.2)
    p = paint([board, plate, pipe], ["fr4", "cu", "steel"], "air", xe, ye)
    a = areas(xe, ye)
    inside = (xe[-1] - xe[0]) * (ye[-1] - ye[0])
    overlap = cell_fractions(pipe, [0.15, 0.8], [0.25, 0.6])[0, 0] * 0.65 * 0.35
    assert (p.fraction("steel") * a).sum() == pytest.approx(math.pi * 0.04, rel=1e-12)
    assert (p.fraction("cu") * a).sum() == pytest.approx(0.65 * 0.35 - overlap, rel=1e-12)
    total = sum((p.fraction(m) * a).sum() for m in p.materials)
    assert total == pytest.approx(inside, rel=1e-13)
    assert np.abs(p.shares.sum(axis=1) - 1.0).max() < 1e-13
    k = {"air": 0.026, "fr4": 0.3, "cu": 398.0, "steel": 16.2}
    mean = p.mean(k)
    for name, value in k.items():
        alone = p.fraction(name) == 1.0
        assert (mean[alone] == value).all()
    assert np.allclose(mean, sum(p.fraction(m) * k[m] for m in p.materials), rtol=1e-14, atol=0)


def test_crossing_outlines_in_one_cell_and_thin_layers_are_integrated():
    """Two polygons whose edges cross inside cells, and a layer thinner than a cell: shares against clipping
    (the visible part of the lower shape = its area less the overlap, computed by clipping the upper one)."""
    xe, ye = np.linspace(0.0, 1.0, 6), np.linspace(0.0, 1.0, 5)
    tri = Polygon(((0.05, 0.05), (0.93, 0.12), (0.4, 0.9)))
    layer = Polygon(((0.0, 0.43), (1.0, 0.47), (1.0, 0.52), (0.0, 0.49)))     # 0.05 thick, cells 0.25 high
    p = paint([tri, layer], ["a", "b"], "bg", xe, ye)
    assert p.multi_cut > 0
    lay = np.array([[clip_area(layer.points, xe[j], ye[i], xe[j + 1], ye[i + 1]) for j in range(5)]
                    for i in range(4)]) / areas(xe, ye)
    tri_all = cell_fractions(tri, xe, ye)
    both = np.array([[_clip_both(tri.points, layer.points, xe[j], ye[i], xe[j + 1], ye[i + 1]) for j in range(5)]
                     for i in range(4)]) / areas(xe, ye)
    assert np.abs(p.fraction("b") - lay).max() < 1e-12
    assert np.abs(p.fraction("a") - (tri_all - both)).max() < 1e-10


def _clip_both(a, b, x0, y0, x1, y1) -> float:
    """|a ∩ b ∩ box| for convex b: a clipped by the box, then by each edge of b."""
    poly = [tuple(p) for p in a]
    bb = np.array(b)
    if shoelace(bb) < 0:
        bb = bb[::-1]
    edges = [(x0, y0, x1, y0), (x1, y0, x1, y1), (x1, y1, x0, y1), (x0, y1, x0, y0)]
    edges += [(*bb[k], *bb[(k + 1) % len(bb)]) for k in range(len(bb))]
    for ax, ay, bx, by in edges:
        def side(p, ax=ax, ay=ay, bx=bx, by=by):
            return (bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax)
        out = []
        for k in range(len(poly)):
            p, q = poly[k - 1], poly[k]
            sp, sq = side(p), side(q)
            if sq >= 0:
                if sp < 0:
                    t = sp / (sp - sq)
                    out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
                out.append(q)
            elif sp >= 0:
                t = sp / (sp - sq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
        poly = out
        if not poly:
            return 0.0
    return abs(shoelace(poly))


def test_a_polygon_over_a_mask_paints_exactly():
    """A triangle over a mask finer than the cells: the mask's visible share = its pixels' overlap with the cell
    less, pixel by pixel, the triangle's part of that overlap (clipping); the triangle's edges cross the pixels'
    vertical edges inside the cells (breakpoints there keep it exact)."""
    xe, ye = np.linspace(0.0, 1.0, 5), np.linspace(0.0, 1.0, 4)
    bits = np.random.default_rng(41).random((9, 11)) < 0.6
    m = Mask(bits, ((0.03, 0.07), (0.93, 0.88)))
    tri = Polygon(((0.1, 0.2), (0.85, 0.35), (0.4, 0.8)))
    p = paint([m, tri], ["m", "t"], "bg", xe, ye)
    assert p.multi_cut > 0
    px, py = np.linspace(0.03, 0.93, 12), np.linspace(0.07, 0.88, 10)
    mask_f = cell_fractions(m, xe, ye)
    for i in range(len(ye) - 1):
        for j in range(len(xe) - 1):
            hidden = 0.0
            for q, c in zip(*np.nonzero(bits)):
                x0, x1 = max(px[c], xe[j]), min(px[c + 1], xe[j + 1])
                y0, y1 = max(py[q], ye[i]), min(py[q + 1], ye[i + 1])
                if x0 < x1 and y0 < y1:
                    hidden += clip_area(tri.points, x0, y0, x1, y1)
            cell = (xe[j + 1] - xe[j]) * (ye[i + 1] - ye[i])
            assert p.fraction("m")[i, j] == pytest.approx(mask_f[i, j] - hidden / cell, abs=1e-13)


def test_paint_with_arcs_in_multi_cut_cells_matches_sampling():
    xe = ye = np.linspace(0.0, 1.0, 9)
    ring = [Disk(0.5, 0.5, 0.31), Disk(0.5, 0.5, 0.27)]            # a ring 0.04 thick, cells 0.125
    p = paint(ring, ["tim", "die"], "air", xe, ye)
    assert p.multi_cut > 0
    outer, inner = cell_fractions(ring[0], xe, ye), cell_fractions(ring[1], xe, ye)
    assert np.abs(p.fraction("tim") - (outer - inner)).max() < 1e-10
    assert np.abs(p.fraction("die") - inner).max() < 1e-12


# ---------------------------------------------------------------------------------------------- face conductance

def test_homogeneous_faces_take_their_k_bit_for_bit():
    xs, ys = random_edges(np.random.default_rng(2), 30), random_edges(np.random.default_rng(3), 20)
    shapes = [Rectangle(-1.0, -1.0, 2.0, 2.0), Disk(0.5, 0.5, 0.2), Rectangle(0.05, 0.1, 0.3, 0.4)]
    k = [0.1 + 0.2, 7.3, 1.0 / 3.0]
    for axis in ("x", "y"):
        K = face_conductance(shapes, k, 5.0, xs, ys, axis)
        crossed = np.zeros(K.shape, dtype=bool)
        for s in shapes[1:]:
            f = cell_fractions(s, xs, _across(ys)) if axis == "x" else cell_fractions(s, _across(xs), ys)
            crossed |= f > 0
        assert (K[~crossed] == k[0]).all()
        inner = cell_fractions(shapes[1], xs, _across(ys)) if axis == "x" else cell_fractions(shapes[1], _across(xs), ys)
        assert (K[inner == 1.0] == k[1]).all()
    plain = face_conductance([], [], 2.5, xs, ys, "x")
    assert plain.shape == (20 + 1, 30) and (plain == 2.5).all()


def _across(v):
    return np.concatenate([v[:1], 0.5 * (v[:-1] + v[1:]), v[-1:]])


@pytest.mark.parametrize("axis", ["x", "y"])
def test_a_layered_wall_gives_the_exact_series_value_and_exact_nodes(axis):
    """Layers whose interfaces fall between grid points: each face = L / sum(l_m / k_m), and the 1-D steady state
    u(x) = R(x) / R(1), R(x) = integral of 1 / k, is exact at the nodes."""
    xs = np.sort(np.concatenate([[0.0, 1.0], np.random.default_rng(7).uniform(0, 1, 23)]))
    bounds, ks = [0.0, 0.137, 0.21, 0.2101, 0.66, 1.0], [1.5, 400.0, 0.02, 3.0, 17.0]
    layers = [Rectangle(a, -1.0, b, 2.0) for a, b in zip(bounds[:-1], bounds[1:])]
    ys = np.array([0.0, 0.3, 1.0])
    if axis == "x":
        K = face_conductance(layers, ks, 1.0, xs, ys, "x")[1]
    else:
        K = face_conductance([transpose(s) for s in layers], ks, 1.0, ys, xs, "y")[:, 1]

    def resistance(x):
        return sum(max(0.0, min(x, b) - a) / k for a, b, k in zip(bounds[:-1], bounds[1:], ks))
    exact = np.array([(b - a) / (resistance(b) - resistance(a)) for a, b in zip(xs[:-1], xs[1:])])
    assert np.abs(K / exact - 1).max() < 1e-12                       # the 1e-4 layer's length costs 1e-12
    u = np.concatenate([[0.0], np.cumsum(np.diff(xs) / K)])
    assert np.abs(u / u[-1] - np.array([resistance(x) for x in xs]) / resistance(1.0)).max() < 1e-13


def disk_face_reference(d: Disk, k_in, k_out, xa, xb, ylo, yhi, n=40000) -> float:
    """The mean over n midpoint lines of the series k, each line's chord in the disk in closed form."""
    y = ylo + (np.arange(n) + 0.5) / n * (yhi - ylo)
    h = np.sqrt(np.maximum(d.r ** 2 - (y - d.cy) ** 2, 0.0))
    inside = np.maximum(np.minimum(xb, d.cx + h) - np.maximum(xa, d.cx - h), 0.0)
    return float(np.mean((xb - xa) / (inside / k_in + (xb - xa - inside) / k_out)))


def test_a_polygon_wedge_face_is_the_closed_form():
    """One face crossed by a sloped edge: l(y) linear, so k = mean of L / (l / k1 + (L - l) / k0) in closed form."""
    wedge = Polygon(((0.0, 0.0), (0.3, 0.0), (0.9, 1.0), (0.0, 1.0)))      # x < 0.3 + 0.6 y
    xs, ys = np.array([0.25, 0.75]), np.array([0.2, 0.4])
    across = np.array([0.1, 0.3, 0.5])
    K = face_conductance([wedge], [50.0], 0.5, xs, ys, "x", across=across)
    for i in range(2):
        lo, hi = across[i], across[i + 1]
        ell = lambda y: np.clip(0.3 + 0.6 * y - 0.25, 0, 0.5)  # noqa: E731
        # D(y) = l / 50 + (0.5 - l) / 0.5 is linear on [lo, hi] (no clipping there)
        d0, d1 = ell(lo) / 50 + (0.5 - ell(lo)) / 0.5, ell(hi) / 50 + (0.5 - ell(hi)) / 0.5
        exact = 0.5 * math.log(d1 / d0) / (d1 - d0)
        assert K[i, 0] == pytest.approx(exact, rel=1e-13)


def test_a_disk_inclusions_faces_match_a_fine_reference_and_converge():
    """Faces cut by a disk of k 100 in k 1 against line sampling; and the grid's total face conductance
    sum(K * face area) tends to the integral of the same field under refinement (first order: the cut faces)."""
    d = Disk(0.5, 0.5, 0.3)
    xs = ys = np.linspace(0.0, 1.0, 9)
    K = face_conductance([d], [100.0], 1.0, xs, ys, "x")
    across = _across(ys)
    cut = (cell_fractions(d, xs, across) > 0) & (cell_fractions(d, xs, across) < 1)
    worst = 0.0
    for i, j in zip(*np.nonzero(cut)):
        ref = disk_face_reference(d, 100.0, 1.0, xs[j], xs[j + 1], across[i], across[i + 1])
        worst = max(worst, abs(K[i, j] / ref - 1))
    assert worst < 1e-6                                         # the midpoint reference's own error
    sums = []
    for n in (16, 32, 64, 128):
        xs = np.linspace(0.0, 1.0, n + 1)
        K = face_conductance([d], [100.0], 1.0, xs, xs, "x")
        sums.append((K * areas(xs, _across(xs))).sum())
    diffs = np.abs(np.diff(sums))
    assert (diffs[1:] < 0.7 * diffs[:-1]).all(), sums


def polygon_runs(points, y) -> list[tuple[float, float]]:
    """The intervals of the horizontal line y inside a simple polygon, from its edges' crossings (even-odd)."""
    p = np.asarray(points, dtype=float)
    xs = []
    for (ax, ay), (bx, by) in zip(p, np.roll(p, -1, axis=0)):
        if (ay > y) != (by > y):
            xs.append(ax + (y - ay) * (bx - ax) / (by - ay))
    xs = sorted(xs)
    return list(zip(xs[0::2], xs[1::2]))


def test_polygon_and_mask_faces_match_references():
    """Faces crossed by a concave polygon's slanted edges (closed form) and by a mask (piecewise constant across)
    against line-by-line references written here."""
    poly = star(np.random.default_rng(21), 9)
    xs, ys = np.linspace(0.0, 1.0, 7), np.linspace(0.0, 1.0, 6)
    K = face_conductance([poly], [20.0], 0.5, xs, ys, "x")
    across = _across(ys)
    n = 200
    for i in range(len(ys)):
        for j in range(len(xs) - 1):
            L = xs[j + 1] - xs[j]
            ks = []
            for y in across[i] + (np.arange(n) + 0.5) / n * (across[i + 1] - across[i]):
                inside = sum(max(0.0, min(b, xs[j + 1]) - max(a, xs[j])) for a, b in polygon_runs(poly.points, y))
                ks.append(L / (inside / 20.0 + (L - inside) / 0.5))
            assert K[i, j] == pytest.approx(np.mean(ks), rel=1e-3)     # 200 midpoint lines, kinks: O(1 / n^2)
    # the exact value of one face, by Simpson on each piece between the polygon's heights (L / D is smooth there)
    i, j = 2, 2
    cuts = np.unique(np.clip(np.concatenate([[across[i], across[i + 1]], np.array(poly.points)[:, 1]]),
                             across[i], across[i + 1]))
    total = 0.0
    for a, b in zip(cuts[:-1], cuts[1:]):
        ygrid = np.linspace(a, b, 2001)
        vals = []
        for y in ygrid:
            inside = sum(max(0.0, min(bb, xs[j + 1]) - max(aa, xs[j])) for aa, bb in polygon_runs(poly.points, y))
            vals.append((xs[j + 1] - xs[j]) / (inside / 20.0 + (xs[j + 1] - xs[j] - inside) / 0.5))
        vals = np.array(vals)
        total += (b - a) / 6000 * (vals[0] + vals[-1] + 4 * vals[1:-1:2].sum() + 2 * vals[2:-1:2].sum())
    assert K[i, j] == pytest.approx(total / (across[i + 1] - across[i]), rel=1e-9)

    bits = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 0, 1]], dtype=bool)
    m = Mask(bits, ((0.05, 0.1), (0.85, 0.7)))
    xs, ys = np.array([0.0, 0.3, 0.55, 1.0]), np.array([0.12, 0.35, 0.5, 0.9])
    K = face_conductance([m], [4.0], 1.0, xs, ys, "x")
    across = _across(ys)
    px, py = np.linspace(0.05, 0.85, 5), np.linspace(0.1, 0.7, 4)
    for i in range(len(ys)):
        for j in range(len(xs) - 1):
            cuts = np.unique(np.clip(np.concatenate([across[i:i + 2], py]), across[i], across[i + 1]))
            total = 0.0
            for a, b in zip(cuts[:-1], cuts[1:]):
                q = np.searchsorted(py, 0.5 * (a + b)) - 1
                inside = 0.0
                if 0 <= q < 3:
                    inside = sum(max(0.0, min(px[c + 1], xs[j + 1]) - max(px[c], xs[j])) for c in range(4) if bits[q, c])
                L = xs[j + 1] - xs[j]
                total += (b - a) * L / (inside / 4.0 + (L - inside) / 1.0)
            assert K[i, j] == pytest.approx(total / (across[i + 1] - across[i]), rel=1e-13)


def test_shapes_off_the_grid_and_empty_masks_change_nothing():
    xe = ye = np.linspace(0.0, 1.0, 8)
    gone = [Rectangle(2, 2, 3, 3), Disk(-5, 0.5, 1), Polygon(((1.5, 0), (2, 0), (2, 1))),
            Mask(np.zeros((4, 4)), ((0, 0), (1, 1))), Mask(np.ones((2, 2)), ((1.0, 0.0), (2.0, 1.0)))]
    for s in gone:
        assert (cell_fractions(s, xe, ye) == 0).all()
    assert (face_conductance(gone, [2.0] * 5, 0.7, xe, ye, "x") == 0.7).all()
    p = paint(gone, ["a"] * 5, "b", xe, ye)
    assert (p.fraction("b") == 1).all() and len(p.mixed) == 0
    c = crossings(gone[0], xe, ye, "y")
    assert not c.cut.any() and not c.inside.any()
    cc = cut_cells(gone[3], xe, ye)
    assert (cc.volume == 1).all() and (cc.aperture_x == 1).all() and (cc.rim_length == 0).all()


@FAST
@given(seeds)
def test_polygon_crossings_against_edge_intersections(seed):
    rng = np.random.default_rng(seed)
    p = star(rng, int(rng.integers(3, 12)))
    xs, ys = random_edges(rng, int(rng.integers(2, 15))), random_edges(rng, int(rng.integers(2, 15)))
    c = crossings(p, xs, ys, "x")
    assert np.array_equal(c.inside, contains(p, xs[None, :], ys[:, None]))
    for i, y in enumerate(ys):
        hits = [x for run in polygon_runs(p.points, y) for x in run]
        for j in range(len(xs) - 1):
            ts = [(x - xs[j]) / (xs[j + 1] - xs[j]) for x in hits if xs[j] <= x <= xs[j + 1]]
            assert c.cut[i, j] == bool(ts)
            if ts:
                assert c.first[i, j] == pytest.approx(min(ts), abs=1e-12)
                assert c.last[i, j] == pytest.approx(1 - max(ts), abs=1e-12)
    cy = crossings(p, xs, ys, "y")
    for j, x in enumerate(xs):
        tp = [(q, pt) for q, pt in enumerate(p.points)]
        hits = [v for run in polygon_runs([(b, a) for _, (a, b) in tp], x) for v in run]
        for i in range(len(ys) - 1):
            ts = [(v - ys[i]) / (ys[i + 1] - ys[i]) for v in hits if ys[i] <= v <= ys[i + 1]]
            assert cy.cut[i, j] == bool(ts)
            if ts:
                assert cy.first[i, j] == pytest.approx(min(ts), abs=1e-12)


def test_blocks_of_faces_and_of_a_painting_give_the_bits_of_the_whole():
    """What a rank computes for its block (its points' faces, its cells) equals the whole grid's bits."""
    shapes = [Rectangle(0.1, 0.2, 0.9, 0.55), Disk(0.45, 0.5, 0.27), star(np.random.default_rng(31), 15),
              Mask(np.random.default_rng(32).random((13, 17)) < 0.5, ((0.3, 0.05), (0.8, 0.5)))]
    k = [3.0, 40.0, 0.3, 7.0]
    xs, ys = random_edges(np.random.default_rng(33), 40), random_edges(np.random.default_rng(34), 36)
    across = _across(ys)
    whole = face_conductance(shapes, k, 1.0, xs, ys, "x", across=across)
    painted = paint(shapes, ["a", "b", "c", "d"], "e", xs, ys).mean({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    for i0, i1, j0, j1 in ((0, 15, 0, 20), (15, 37, 20, 40), (7, 29, 11, 33)):
        part = face_conductance(shapes, k, 1.0, xs[j0:j1 + 1], ys[i0:i1], "x", across=across[i0:i1 + 1])
        assert np.array_equal(part, whole[i0:i1, j0:j1])
        p = paint(shapes, ["a", "b", "c", "d"], "e", xs[j0:j1 + 1], ys[i0:i1 + 1])
        assert np.array_equal(p.mean({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}), painted[i0:i1, j0:j1])
    counts = cut_counts(shapes, xs, ys)
    assert counts.max() >= 2 and (counts >= 2).sum() >= paint(shapes, list("abcd"), "e", xs, ys).multi_cut


def test_faces_along_y_are_faces_along_x_of_the_transposed_shapes():
    shapes = [Disk(0.4, 0.6, 0.25), star(np.random.default_rng(8), 12), Rectangle(0.1, 0.05, 0.3, 0.95)]
    xs, ys = random_edges(np.random.default_rng(5), 14), random_edges(np.random.default_rng(6), 11)
    a = face_conductance(shapes, [3.0, 0.2, 40.0], 1.0, xs, ys, "y")
    b = face_conductance([transpose(s) for s in shapes], [3.0, 0.2, 40.0], 1.0, ys, xs, "x").T
    assert a.shape == (len(ys) - 1, len(xs)) and np.array_equal(a, b)


def test_face_conductance_refuses_bad_arguments():
    with pytest.raises(ValueError, match="k > 0"):
        face_conductance([Disk(0, 0, 1)], [0.0], 1.0, [0, 1], [0, 1], "x")
    with pytest.raises(ValueError, match="strictly increasing"):
        face_conductance([], [], 1.0, [0, 1, 1], [0, 1], "x")
    with pytest.raises(ValueError, match="axis"):
        face_conductance([], [], 1.0, [0, 1], [0, 1], "z")


# ---------------------------------------------------------------------------------------------- rims

def test_disk_crossings_are_the_chords_ends():
    d = Disk(0.523, 0.487, 0.31)
    xs, ys = np.linspace(0, 1, 17), np.linspace(0, 1, 13)
    c = crossings(d, xs, ys, "x")
    assert np.array_equal(c.inside, contains(d, xs[None, :], ys[:, None]))
    for i, y in enumerate(ys):
        hits = []
        if abs(y - d.cy) < d.r:
            h = math.sqrt(d.r ** 2 - (y - d.cy) ** 2)
            hits = [d.cx - h, d.cx + h]
        for j in range(len(xs) - 1):
            ts = [(x - xs[j]) / (xs[j + 1] - xs[j]) for x in hits if xs[j] <= x <= xs[j + 1]]
            assert c.cut[i, j] == bool(ts)
            if ts:
                assert c.first[i, j] == pytest.approx(min(ts), abs=1e-13)
                assert c.last[i, j] == pytest.approx(1 - max(ts), abs=1e-13)
    cy = crossings(d, xs, ys, "y")
    cyt = crossings(transpose(d), ys, xs, "x")
    assert np.array_equal(cy.cut, cyt.cut.T) and np.array_equal(np.nan_to_num(cy.first), np.nan_to_num(cyt.first.T))
    out = ~c.inside[:, :-1] & c.cut                    # from an outside point, Gibou's theta lies in (0, 1]
    assert (c.first[out] > 0).all() and (c.first[out] <= 1).all()


def test_polygon_crossings_first_and_last_of_several():
    """A comb whose teeth are narrower than a segment: a segment crosses several rims; first and last are the
    nearest to each end."""
    comb = Polygon(((0.0, 0.0), (1.0, 0.0), (1.0, 0.6), (0.83, 0.6), (0.83, 0.2), (0.78, 0.2), (0.78, 0.6),
                    (0.52, 0.6), (0.52, 0.2), (0.47, 0.2), (0.47, 0.6), (0.0, 0.6)))
    xs, ys = np.array([-0.5, 0.3, 0.9, 1.5]), np.array([0.1, 0.4, 0.6, 0.8])
    c = crossings(comb, xs, ys, "x")
    assert c.cut[1].tolist() == [True, True, True]
    assert c.first[1, 1] == pytest.approx((0.47 - 0.3) / 0.6) and c.last[1, 1] == pytest.approx((0.9 - 0.83) / 0.6)
    assert c.first[1, 0] == pytest.approx(0.5 / 0.8) and c.last[1, 0] == pytest.approx(0.3 / 0.8)
    assert not c.cut[0, 1] and c.inside[0].tolist() == [False, True, True, False]
    assert c.inside[2].tolist() == [False, True, True, False]          # on the top edge: inside (closed)
    assert not c.cut[3].any() and not c.inside[3].any()


def test_a_rim_on_a_grid_point_ends_both_segments():
    r = Rectangle(0.25, 0.0, 0.75, 1.0)
    c = crossings(r, np.linspace(0, 1, 5), np.array([0.5]), "x")
    assert c.inside[0].tolist() == [False, True, True, True, False]
    assert c.cut[0].tolist() == [True, True, True, True]
    assert c.last[0, 0] == 0.0 and c.first[0, 1] == 0.0 and c.last[0, 2] == 0.0 and c.first[0, 3] == 0.0


def test_mask_crossings_lie_on_pixel_edges():
    m = Mask(np.array([[0, 1, 1, 0, 1]]), ((0.0, 0.0), (1.0, 1.0)))
    c = crossings(m, np.array([0.1, 0.5, 0.7, 0.9]), np.array([0.5]), "x")
    assert c.cut[0].tolist() == [True, True, True]
    assert c.first[0, 0] == pytest.approx(0.1 / 0.4) and c.last[0, 1] == pytest.approx(0.1 / 0.2)
    assert c.first[0, 2] == pytest.approx(0.1 / 0.2) and c.inside[0].tolist() == [False, True, False, True]


@pytest.mark.parametrize("shape", [Disk(0.47, 0.52, 0.31), Disk(0.5, 0.5, 0.02), Rectangle(0.2, 0.3, 0.6, 0.7),
                                   star(np.random.default_rng(11), 30),
                                   Mask(np.random.default_rng(12).random((20, 25)) < 0.5, ((0.05, 0.1), (0.9, 0.95)))])
def test_cut_cells_obey_the_divergence_theorem_and_rims_have_their_length(shape):
    rng = np.random.default_rng(13)
    xe, ye = random_edges(rng, 23), random_edges(rng, 19)
    cc = cut_cells(shape, xe, ye)
    hx, hy = np.diff(xe)[None, :], np.diff(ye)[:, None]
    assert np.abs(cc.normal_x - (cc.aperture_x[:, 1:] - cc.aperture_x[:, :-1]) * hy).max() < 1e-13
    assert np.abs(cc.normal_y - (cc.aperture_y[1:] - cc.aperture_y[:-1]) * hx).max() < 1e-13
    assert np.array_equal(cc.volume, 1.0 - cell_fractions(shape, xe, ye))
    assert (cc.rim_length >= np.hypot(cc.normal_x, cc.normal_y) - 1e-14).all()
    if isinstance(shape, Disk):
        assert cc.rim_length.sum() == pytest.approx(2 * math.pi * shape.r, rel=1e-12)
    elif isinstance(shape, Rectangle):
        assert cc.rim_length.sum() == pytest.approx(2 * (shape.x1 - shape.x0 + shape.y1 - shape.y0), rel=1e-13)
    elif isinstance(shape, Polygon):
        p = np.array(shape.points)
        assert cc.rim_length.sum() == pytest.approx(np.hypot(*(np.roll(p, -1, 0) - p).T).sum(), rel=1e-13)
    else:
        b = np.pad(np.asarray(shape.array) != 0, 1).astype(int)
        (x0, y0), (x1, y1) = shape.extent
        dx, dy = (x1 - x0) / b.shape[1] * b.shape[1] / (b.shape[1] - 2), (y1 - y0) / (b.shape[0] - 2)
        stairs = np.abs(np.diff(b, axis=1)).sum() * dy + np.abs(np.diff(b, axis=0)).sum() * dx
        assert cc.rim_length.sum() == pytest.approx(stairs, rel=1e-13)


def test_a_rim_along_a_grid_line_belongs_to_the_open_cell_and_closes_the_face():
    xe = ye = np.linspace(0.0, 1.0, 5)
    hole = Rectangle(0.25, 0.25, 0.75, 0.5)
    cc = cut_cells(hole, xe, ye)
    assert (cc.aperture_y[1, 1:3] == 0.0).all() and (cc.aperture_y[2, 1:3] == 0.0).all()
    assert cc.rim_length[0, 1] == 0.25 and cc.normal_y[0, 1] == -0.25      # the open cell below the hole
    assert cc.rim_length[1, 1] == 0.0 and cc.volume[1, 1] == 0.0


# ---------------------------------------------------------------------------------------------- bad shapes

@pytest.mark.parametrize("shape, words", [
    (Rectangle(0, 0, 0, 1), "positive width"),
    (Rectangle(0, 0, math.inf, 1), "finite"),
    (Disk(0, 0, 0), "radius 0 must be > 0"),
    (Disk(math.nan, 0, 1), "finite"),
    (Polygon(((0, 0), (1, 1))), "at least 3 points; it has 2"),
    (Polygon(((0, 0), (1, 0), (2, 0))), "no area"),
    (Polygon(((0, 0), (1, 0), (1, 0), (0, 1))), "points 1 and 2 are the same"),
    (Polygon(((0, 0), (1, 1), (1, 0), (0, 1))), "edges 0 (points 0-1) and 2 (points 2-3) cross"),
    (Polygon(((0, 0), (2, 0), (2, 2), (1, 0), (0, 2))), "edges 0 (points 0-1) and 2 (points 2-3) cross or touch"),
    (Polygon(((0, 0), (2, 0), (1, 0), (1, 1))), "cross or touch"),
    (Mask(np.zeros((0, 3)), ((0, 0), (1, 1))), "2-D and not empty"),
    (Mask(np.ones((2, 2, 2)), ((0, 0), (1, 1))), "2-D"),
    (Mask(np.array([[0, 2]]), ((0, 0), (1, 1))), "only 0 and 1"),
    (Mask(np.ones((2, 2)), None), "extent must be ((x0, y0), (x1, y1))"),
    (Mask(np.ones((2, 2)), ((0, 0), (0, 1))), "empty extent"),
])
def test_bad_shapes_are_named(shape, words):
    assert words in problem(shape)


def test_good_shapes_have_no_problem():
    for s in (Rectangle(0, 0, 1, 2), Disk(0, 0, 1), star(np.random.default_rng(0), 50),
              Polygon(((0, 0), (2, 0), (2, 2), (1, 0.5), (0, 2))), Mask(np.eye(3, dtype=bool), ((0, 0), (1, 1)))):
        assert problem(s) is None, problem(s)


def _segments_meet(p, q, r, s) -> bool:
    """Whether segments p-q and r-s share a point (plain orientation tests, one pair at a time)."""
    def orient(a, b, c):
        v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
        return int(v > 0) - int(v < 0)

    def within(a, b, c):
        return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])
    o1, o2, o3, o4 = orient(p, q, r), orient(p, q, s), orient(r, s, p), orient(r, s, q)
    if o1 * o2 < 0 and o3 * o4 < 0:
        return True
    return ((o1 == 0 and within(p, q, r)) or (o2 == 0 and within(p, q, s)) or (o3 == 0 and within(r, s, p))
            or (o4 == 0 and within(r, s, q)))


@FAST
@given(seeds, st.booleans())
def test_self_crossing_and_feature_match_all_pairs(seed, grid_points):
    """The bucketed pair search against every pair: random polygons (mostly crossing themselves), on a coarse
    lattice too (collinear and touching edges)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    pts = rng.integers(0, 6, (n, 2)).astype(float) if grid_points else rng.uniform(0, 1, (n, 2))
    keep = np.ones(n, dtype=bool)
    keep[1:] = (pts[1:] != pts[:-1]).any(axis=1)
    pts = pts[keep]
    if len(pts) < 3 or (pts[0] == pts[-1]).all():
        return
    n = len(pts)
    expected = None
    for i in range(n):
        for j in range(i + 1, n):
            a, b, c, d = pts[i], pts[(i + 1) % n], pts[j], pts[(j + 1) % n]
            if j == i + 1 or (i == 0 and j == n - 1):
                shared, far_i, far_j = (b, a, d) if j == i + 1 else (a, b, c)
                u, v = shared - far_i, far_j - shared
                if abs(u[0] * v[1] - u[1] * v[0]) == 0 and u @ v < 0:
                    expected = (i, j)
            elif _segments_meet(a, b, c, d):
                expected = (i, j)
            if expected:
                break
        if expected:
            break
    assert self_crossing(pts) == expected
    if expected is None:
        e = np.roll(pts, -1, axis=0) - pts
        brute = min(float(np.hypot(*e.T).min()), min(
            float(np.hypot(*(pts[v] - pts[k] - np.clip((pts[v] - pts[k]) @ e[k] / (e[k] @ e[k]), 0, 1) * e[k])))
            for v in range(n) for k in range(n) if k not in (v, (v - 1) % n)))
        assert smallest_feature(Polygon(tuple(map(tuple, pts)))) == pytest.approx(brute, rel=1e-12)


def test_smallest_features():
    assert smallest_feature(Rectangle(0, 0, 3, 0.2)) == pytest.approx(0.2)
    assert smallest_feature(Disk(0, 0, 0.3)) == 0.6
    strip = Polygon(((0, 0), (1, 0), (1, 0.01), (0, 0.01)))
    assert smallest_feature(strip) == pytest.approx(0.01)
    notch = Polygon(((0, 0), (1, 0), (1, 1), (0.51, 1), (0.5, 0.2), (0.49, 1), (0, 1)))
    assert smallest_feature(notch) == pytest.approx(0.02, rel=1e-3)    # the gap at the notch's mouth
    m = Mask(np.array([[1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1]]), ((0, 0), (6, 4)))
    assert smallest_feature(m) == 1.0                                   # the one-pixel gap, 1 wide
    assert smallest_feature(Mask(np.ones((4, 8)), ((0, 0), (8, 2)))) == 2.0
