"""The conductance of the faces between neighbouring grid points, from the shapes' true extent.

Along a face's segment (between two points) the materials lie in series: k_series = L / sum(l_m / k_m), with l_m
the exact length of the segment in material m after painting in order. Across the face the lines are in
parallel: the face's k is the mean of k_series over its cross-section (Alcouffe, Brandt, Dendy and Painter's
harmonic-along / arithmetic-across rule, which a face between two homogeneous points reduces to today's harmonic
mean of the two points when the interface lies half way).

Exactness: a face whose cross-section no outline crosses takes its material's k bit for bit. A face crossed
only by straight outlines (rectangles, polygons, masks: the lengths are linear in the height between
breakpoints) is integrated in closed form, exact to rounding: a wall of layers gives the exact series value,
so a 1-D layered steady state is exact at the nodes. A face crossed by an arc is integrated by adaptive Gauss-
Legendre to rtol times the largest k (default 1e-12), or to the coordinates' rounding where that is larger
(quadrature). Each face's value depends only on its own segment and cross-section: a block of faces computed
alone gives the whole grid's bits.
"""

from __future__ import annotations

import numpy as np

from .fractions import _edges, fractions_box
from .lines import dot
from .quadrature import integrate
from .shapes import transpose


def face_conductance(shapes, k_values, k_background: float, xs, ys, axis: str, across=None,
                     rtol: float = 1e-12) -> np.ndarray:
    """The conductance of every face of the grid of points (xs[j], ys[i]) (strictly increasing).

    axis "x": (len(ys), len(xs) - 1), the face between (i, j) and (i, j + 1): its segment [xs[j], xs[j + 1]] at
    height ys[i], its cross-section [across[i], across[i + 1]] (len(ys) + 1 strictly increasing edges; by default
    half way to the neighbouring rows and clipped at the first and last row: [ys[0], (ys[0] + ys[1]) / 2, ...,
    ys[-1]]). axis "y": (len(ys) - 1, len(xs)), the face between (i, j) and (i + 1, j), its segment
    [ys[i], ys[i + 1]] at xs[j], its cross-section [across[j], across[j + 1]] (len(xs) + 1 edges).
    shapes are painted in order with conductivities k_values (> 0) over k_background (> 0). Rules and exactness:
    the module docstring."""
    if axis == "y":
        return face_conductance([transpose(s) for s in shapes], k_values, k_background, ys, xs, "x", across, rtol).T
    if axis != "x":
        raise ValueError(f"axis must be 'x' or 'y', not {axis!r}")
    xs, ys = _edges(xs, "xs"), np.asarray(ys, dtype=np.float64)
    if across is None:
        if len(ys) < 2:
            raise ValueError("one row of points has no neighbours to reach half way to: give `across`")
        across = np.concatenate([ys[:1], 0.5 * (ys[:-1] + ys[1:]), ys[-1:]])
    across = _edges(across, "across")
    if len(across) != len(ys) + 1:
        raise ValueError(f"across needs len(ys) + 1 = {len(ys) + 1} edges, not {len(across)}")
    k = np.array([k_background, *k_values], dtype=np.float64)
    if len(k) != len(shapes) + 1 or not (k > 0).all():
        raise ValueError("give one k > 0 per shape (k_values) and k_background > 0")
    top, cut = _classify(shapes, xs, across)
    out = k[top]
    ii, jj = np.nonzero(cut)
    if len(ii):
        out[ii, jj] = _cut_faces(shapes, k, xs[jj], xs[jj + 1], across[ii], across[ii + 1], rtol)
    return out


def _classify(shapes, xe, ye):
    """(top, cut): the layer (0 background, s + 1 shape s) wholly over each face's cross-section, and where an
    outline crosses it (one not hidden by a later shape that covers the whole cross-section)."""
    top = np.zeros((len(ye) - 1, len(xe) - 1), dtype=np.int16 if len(shapes) < 32767 else np.int64)
    cut = np.zeros(top.shape, dtype=bool)
    for s, shape in enumerate(shapes):
        box = fractions_box(shape, xe, ye)
        if box is None:
            continue
        i0, i1, j0, j1, f = box
        t, c = top[i0:i1, j0:j1], cut[i0:i1, j0:j1]
        full = f == 1.0
        t[full], c[full] = s + 1, False
        c[(f > 0.0) & (f < 1.0)] = True
    return top, cut


def _cut_faces(shapes, k, xa, xb, ylo, yhi, rtol):
    inv = 1.0 / k
    length = xb - xa
    def integrand(b, lengths):
        return (length[b] / dot(lengths, inv))[:, None]
    def closed_form(b, l0, l1, dy):
        return (length[b] * dy * inverse_mean(dot(l0, inv), dot(l1, inv)))[:, None]
    total = integrate(shapes, xa, xb, ylo, yhi, integrand, closed_form, np.full(len(xa), k.max()), rtol)
    return total[:, 0] / (yhi - ylo)


def inverse_mean(d0, d1) -> np.ndarray:
    """The mean of 1 / d over a linear change from d0 to d1 (> 0): log(d1 / d0) / (d1 - d0), without cancellation."""
    x = (d1 - d0) / d0
    small = np.abs(x) < 1e-3
    with np.errstate(divide="ignore", invalid="ignore"):
        big = np.log1p(x) / x
    series = 1.0 - x * (0.5 - x * (1.0 / 3.0 - x * (0.25 - x * 0.2)))
    return np.where(small, series, big) / d0
