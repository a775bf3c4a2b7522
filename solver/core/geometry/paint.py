"""Materials painted in order: each cell's area shares of the materials when shapes are laid over a background one
after the other, a later shape hiding what it covers.

A cell that no shape's outline crosses holds one material. A cell crossed by one shape's outline (every other
shape covering it wholly or not at all) holds two, in the shares that shape's exact fraction gives. A cell that two
or more outlines cross (`multi_cut`: an object or a gap narrower than the cell, or two outlines that meet) is
integrated across its height, line by line, with each line painted exactly (quadrature.integrate): exact to
rounding where every outline in the cell is straight (rectangles, polygons, masks, crossing each other or not),
to the adaptive tolerance (rtol of the cell's area, or the coordinates' rounding) where an arc crosses it.
Every cell's shares depend only on that cell's edges and the shapes: a block of the grid gives the whole's bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .fractions import _edges, fractions_box
from .lines import dot
from .quadrature import integrate


@dataclass(frozen=True, eq=False)
class Painting:
    """materials: the material keys in index order (the background first). top: (ny, nx) the index of each cell's
    material (of a mixed cell: the last shape that reaches it). mixed: the flat indices (row * nx + column) of
    the cells that hold more than one material, sorted; shares: their area shares (len(mixed), len(materials)),
    each row summing to 1 to rounding. multi_cut: how many cells two or more outlines cross."""

    materials: tuple
    top: np.ndarray
    mixed: np.ndarray
    shares: np.ndarray
    multi_cut: int

    def fraction(self, material) -> np.ndarray:
        """(ny, nx): the share of each cell's area that holds `material`."""
        m = self.materials.index(material)
        out = (self.top == m).astype(np.float64)
        out.flat[self.mixed] = self.shares[:, m]
        return out

    def mean(self, values) -> np.ndarray:
        """(ny, nx): each cell's area-weighted mean of a per-material property; `values` maps each material key to
        its value (a dict) or lists them in the order of `materials`. A cell of one material gets its value
        exactly (bit for bit)."""
        v = np.array([values[k] for k in self.materials] if hasattr(values, "keys") else values, dtype=np.float64)
        out = v[self.top]
        out.flat[self.mixed] = dot(self.shares, v)
        return out


def paint(shapes, materials, background, xe, ye, rtol: float = 1e-12) -> Painting:
    """Paint `shapes` in order over `background` on the cells [xe[j], xe[j + 1]] x [ye[i], ye[i + 1]]: materials[s]
    is the material key (any hashable: a name, a number) of shapes[s]. Exactness: the module docstring."""
    xe, ye = _edges(xe, "xe"), _edges(ye, "ye")
    if len(materials) != len(shapes):
        raise ValueError(f"{len(shapes)} shapes but {len(materials)} materials")
    keys = list(dict.fromkeys([background, *materials]))
    label = np.array([keys.index(m) for m in materials], dtype=np.int16)
    ny, nx = len(ye) - 1, len(xe) - 1
    top = np.zeros((ny, nx), dtype=np.int16)
    under = np.zeros((ny, nx), dtype=np.int16)
    phi = np.zeros((ny, nx))                        # the fraction of `top` in a cell one outline crosses
    multi = np.zeros((ny, nx), dtype=bool)
    for s, shape in enumerate(shapes):
        box = fractions_box(shape, xe, ye)
        if box is None:
            continue
        i0, i1, j0, j1, f = box
        t, u, p, mu = top[i0:i1, j0:j1], under[i0:i1, j0:j1], phi[i0:i1, j0:j1], multi[i0:i1, j0:j1]
        full, part = f == 1.0, (f > 0.0) & (f < 1.0)
        clean = (p == 0.0) & ~mu
        first = part & clean
        u[first], p[first] = t[first], f[first]
        mu[part & ~clean] = True
        t[full | part] = label[s]
        p[full], mu[full] = 0.0, False
    one = np.flatnonzero((phi > 0.0) & ~multi)
    shares_one = np.zeros((len(one), len(keys)))
    rows = np.arange(len(one))
    np.add.at(shares_one, (rows, under.flat[one]), 1.0 - phi.flat[one])
    np.add.at(shares_one, (rows, top.flat[one]), phi.flat[one])
    many = np.flatnonzero(multi)
    shares_many = _integrated(shapes, label, len(keys), many, xe, ye, rtol)
    mixed = np.concatenate([one, many])
    order = np.argsort(mixed)
    return Painting(tuple(keys), top, mixed[order], np.concatenate([shares_one, shares_many])[order], len(many))


def cut_counts(shapes, xe, ye) -> np.ndarray:
    """(ny, nx) uint8: how many of the shapes' outlines cross each cell (0 < fraction < 1), whether or not a later
    shape hides them (Painting.multi_cut counts only the cells whose visible materials two outlines divide). A cell
    that two or more cross holds an object or a gap narrower than the cell, or two outlines that meet: the grid
    does not resolve it (compare shapes.smallest_feature with the spacing). Saturates at 255."""
    xe, ye = _edges(xe, "xe"), _edges(ye, "ye")
    out = np.zeros((len(ye) - 1, len(xe) - 1), dtype=np.uint8)
    for shape in shapes:
        box = fractions_box(shape, xe, ye)
        if box is not None:
            i0, i1, j0, j1, f = box
            block = out[i0:i1, j0:j1]
            block += ((f > 0.0) & (f < 1.0)) & (block < 255)
    return out


def _integrated(shapes, label, n_materials: int, cells, xe, ye, rtol) -> np.ndarray:
    """The shares of the cells (flat indices) by integrating painted lines over each cell's height."""
    nx = len(xe) - 1
    i, j = cells // nx, cells % nx
    xa, xb, ylo, yhi = xe[j], xe[j + 1], ye[i], ye[i + 1]
    w = xb - xa
    layers = np.zeros((len(shapes) + 1, n_materials))
    layers[0, 0] = 1.0
    layers[np.arange(1, len(shapes) + 1), label] = 1.0
    def closed_form(b, l0, l1, dy):
        return 0.5 * dy[:, None] * (l0 + l1)
    lengths = integrate(shapes, xa, xb, ylo, yhi, lambda b, l: l, closed_form, w, rtol)
    return np.stack([dot(lengths, layers[:, k]) for k in range(n_materials)], axis=1) / (w * (yhi - ylo))[:, None]
