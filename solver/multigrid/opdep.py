"""Transfers that follow the coefficients, where alpha is a field (Alcouffe, Brandt, Dendy and Painter 1981).

Linear interpolation of a coarse correction across a jump of alpha is wrong by the jump's ratio: the error
of the fine equations is flat where alpha is large and steep where it is small, and a straight line puts
the slope everywhere (on a wall of five layers with contrast 10^4 the two-grid factor exceeds 100). In 1-D
the exact interpolant between two coarse points is linear in the resistance R(x) = integral of dx / alpha,
not in x. So here each fine point interpolates along x linearly in its own row's resistance and along y in
its own column's (solver.multigrid.coefficients' face coefficients), with the same two coarse neighbours
per axis as the linear transfer (solver.multigrid.levels.Transfer.p_start): weights per point,

    u[i, j] += wy0 (wx0 e[s, t] + wx1 e[s, t + 1]) + wy1 (wx0 e[s + 1, t] + wx1 e[s + 1, t + 1])

(with `0 +` first terms, as mg_ops.prolong), and with constant alpha they are the linear weights. The
restriction is that prolongation's transpose scaled by the cells' area ratio (hx hy) / (Hx Hy): a coarse
point gathers every fine point of its window, each times the weight with which that fine point interpolates
from it (coarse ghosts folded: a Dirichlet wall's dropped, a Neumann or convective wall's onto the point it
mirrors, a periodic one's wrapped). A conjugate-gradient preconditioner stays symmetric so.

Beside a held object's rim or a fixed rim (their Gibou links: solver.core.plate) the error is not carried across: it
falls to zero at the rim, a fraction theta of a spacing away. So a fine point between two coarse points along an
axis takes its weights times (a_W + a_E) / (a_W + a_E + d): its stencil collapsed onto the axis (Dendy's black-box
multigrid, 1982), a_W, a_E its faces' coefficients along the axis and d the links' diagonal (`rims`:
solver.multigrid.coefficients.rim_levels). Next to a held point at theta that is theta / (1 + theta), the linear
interpolant that vanishes at the rim; a fine point on a coarse point's line keeps weight 1, and so does every point
without such a link (bit for bit). Measured on pipe_plate's plate with its held pipe (CG iterations to 1e-10): 18,
20, 26 and 31 at 401, 1201, 2001 and 3001 columns before, 12 to 14 at every size with the factors (the plain lid:
9). Cooled rims keep their weights: see rim_levels.

Tables are computed from the global face arrays alike on every rank, for the points a block's kernels read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .grids import DEPTH
from .levels import Axis, Transfer


def weights_1d(k: np.ndarray, fine: Axis, coarse: Axis, t: Transfer, points: np.ndarray):
    """(w0, w1) of shape (rows of k, len(points)): the weights of fine points `points` (global indices along the
    axis) on their coarse neighbours p_start and p_start + 1, linear in each row's resistance (k: that row's
    faces along the axis, solver.multigrid.coefficients' layout)."""
    if fine.n == coarse.n:
        return np.ones((k.shape[0], len(points))), np.zeros((k.shape[0], len(points)))
    from .coefficients import open_faces

    k = open_faces(k)
    h, hc, lo, lo_c = fine.h, coarse.h, float(fine.offsets[0]), float(coarse.offsets[0])
    x0 = (lo - 1) * h
    if fine.periodic:
        k = np.concatenate([k, k, k], axis=1)
        x0 -= fine.length
    shift = fine.n if fine.periodic else 0  # point j ends face j's interval: cum index j + 1 (a period later if wrapped)
    coarse_at = np.arange(-1, coarse.n + 1)  # every coarse point a fine point may interpolate from, ghosts included
    tc = ((lo_c + coarse_at) * hc - x0) / h
    w0 = np.empty((k.shape[0], len(points)))
    w1 = np.empty_like(w0)
    _resistance_weights(np.ascontiguousarray(k), h, shift, tc, t.p_start[points].astype(np.int64),
                        points.astype(np.int64), w0, w1)
    return w0, w1


_KERNEL = None


def _resistance_weights(k, h, shift, tc, start, points, w0, w1) -> None:
    """Per row: the cumulated resistance R at every face end (cum[f] = sum of h / k over the faces before f, in
    order), R at the coarse points (linear between face ends, extended with the end faces), and each point's
    weights (R_hi - R_j) / (R_hi - R_lo) and (R_j - R_lo) / (R_hi - R_lo). Compiled once (numba), one pass a row."""
    global _KERNEL
    if _KERNEL is None:
        from numba import njit, prange

        @njit(parallel=True, cache=True)
        def kernel(k, h, shift, tc, start, points, w0, w1):
            faces = k.shape[1]
            for r in prange(k.shape[0]):
                cum = np.empty(faces + 1)
                cum[0] = 0.0
                for f in range(faces):
                    cum[f + 1] = cum[f] + h / k[r, f]
                rc = np.empty(len(tc))
                for c in range(len(tc)):
                    i = min(max(int(np.floor(tc[c])), 0), faces - 1)
                    rc[c] = cum[i] + (tc[c] - i) * (cum[i + 1] - cum[i])
                for p in range(len(points)):
                    rj = cum[points[p] + 1 + shift]
                    lo = rc[start[p] + 1]
                    hi = rc[start[p] + 2]
                    w0[r, p] = (hi - rj) / (hi - lo)
                    w1[r, p] = (rj - lo) / (hi - lo)

        _KERNEL = kernel
    _KERNEL(k, h, shift, tc, start, points, w0, w1)


def folded_targets(t: Transfer, fine: Axis, coarse: Axis, points: np.ndarray) -> np.ndarray:
    """(2, len(points)): the coarse points each fine point's two neighbours stand for, global, ghosts folded
    (-1: a Dirichlet ghost, which drops out)."""
    out = np.stack([t.p_start[points], t.p_start[points] + 1])
    m = coarse.n
    if coarse.periodic:
        return np.mod(out, m)
    lo, hi = coarse.kinds
    out = np.where(out < 0, -1 if lo == "dirichlet" else 0, out)
    return np.where(out >= m, -1 if hi == "dirichlet" else m - 1, out)


@dataclass(frozen=True)
class Tables:
    """A fine block's per-point transfer weights on its DEPTH-padded layout (wy0, wy1, wx0, wx1: the fine
    level's fields) and, for the restriction, every local fine row's and column's two folded coarse targets
    (global), the coarse target block's first global row and column, and the area ratio."""

    w: tuple  # (wy0, wy1, wx0, wx1), host arrays of the fine layout's shape
    ty: np.ndarray  # (2, fine layout rows) int64
    tx: np.ndarray  # (2, fine layout columns) int64
    origin: tuple[int, int]  # global coarse (row, column) of the coarse field's local (0, 0)
    area: float


def tables(fine_level, coarse_level, faces, fine_block, coarse_block, shape, held=None, rims=None) -> Tables:
    """The tables of a fine block (its DEPTH-padded layout of `shape`) towards the coarse level (coarse_block:
    where the restricted values go: the coarse block, or this rank's part of a gathered level). held: the fine
    level's held and inactive points (solver.multigrid.coefficients.held_levels), whose weights are zero: a coarse
    correction does not reach them (their equation is u = T, which the sweeps keep) and their residual does not
    reach the coarse level (measured on a convective outline: with them, a two-grid cycle amplified the plate's
    near-constant error 200-fold; without, at most 1.4). rims: the fine level's Gibou links' diagonal (global, the
    faces' units; None: none), which scales the weights of the points between coarse lines (collapsed)."""
    kx, ky = faces
    fx, fy, cx, cy = fine_level.x, fine_level.y, coarse_level.x, coarse_level.y
    rows = _along(fine_block.rows[0], shape[0], fy)
    cols = _along(fine_block.cols[0], shape[1], fx)
    wx0, wx1 = weights_1d(kx[rows], fx, cx, coarse_level.tx, cols)
    wy0, wy1 = weights_1d(ky.T[cols], fy, cy, coarse_level.ty, rows)
    wy0, wy1 = wy0.T, wy1.T
    if held is not None:
        plate = ~held[np.ix_(rows, cols)]
        wy0, wy1 = wy0 * plate, wy1 * plate
    if rims is not None:
        d = rims[np.ix_(rows, cols)]
        along_x = collapsed(kx, fx, coarse_level.tx, d, rows, cols)
        along_y = collapsed(ky.T, fy, coarse_level.ty, d.T, cols, rows).T
        wx0, wx1, wy0, wy1 = wx0 * along_x, wx1 * along_x, wy0 * along_y, wy1 * along_y
    return Tables((wy0, wy1, wx0, wx1), folded_targets(coarse_level.ty, fy, cy, rows),
                  folded_targets(coarse_level.tx, fx, cx, cols),
                  (coarse_block.rows[0] - DEPTH, coarse_block.cols[0] - DEPTH),
                  fy.h * fx.h / (cy.h * cx.h))


def collapsed(k: np.ndarray, axis: Axis, t: Transfer, d: np.ndarray, rows: np.ndarray,
              points: np.ndarray) -> np.ndarray:
    """(len(rows), len(points)): the factor (a_W + a_E) / (a_W + a_E + d) of each point's weights along an axis (k: the
    level's faces along it, rows across, solver.multigrid.coefficients' layout; d: the links' diagonal at the points);
    1 on a coarse point's line (its weight 1 stays injection) and where nothing conducts or sinks."""
    west = k[np.ix_(rows, points)]
    east = k[np.ix_(rows, np.mod(points + 1, k.shape[1]) if axis.periodic else points + 1)]
    a = (west + east) / axis.h ** 2
    on_line = t.p_w[points, 1] == 0  # (an axis not coarsened: every point)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(a + d > 0, a / (a + d), 1.0)
    return np.where(on_line[None, :] | (d <= 0), 1.0, f)


def _along(start: int, count: int, axis: Axis) -> np.ndarray:
    """Global indices of a DEPTH-padded layout's elements along an axis (wrapped, or clamped beyond walls)."""
    g = start - DEPTH + np.arange(count)
    return np.mod(g, axis.n) if axis.periodic else np.clip(g, 0, axis.n - 1)
