"""The multigrid hierarchy as plain data: sizes, spacings, operators and transfer tables of every level.

Nothing here knows ranks, backends or MPI: the hierarchy is a function of the case alone, so every rank
count builds the same levels, tables and weights (what makes results bitwise equal across rank counts).

The operator of every level, in the unit-diagonal form the Jacobi kernel already uses:

    u - wx (u_W + u_E) - wy (u_S + u_N) = g,   wx = kappa / (hx^2 d),  wy = kappa / (hy^2 d),
    d = sigma + kappa (2 / hx^2 + 2 / hy^2)

the 5-point discretisation of (sigma - kappa Laplacian) u = f divided by its diagonal d (g = f / d):
Laplace sigma = 0, kappa = 1; an implicit heat step sigma = 1, kappa = dt alpha (backward Euler) or
dt alpha / 2 (Crank-Nicolson). Ghost layers carry the boundary rules (solver.core.boundary): the case's
on the finest level, the same kinds with zero values and fluxes on the coarse ones (they solve for the
error, whose boundary data are zero).

Coarsening an axis (solver.core.boundary's geometry: n points, sides lo and hi, wall offsets o_lo, o_hi
in spacings, length L = (n - 1 + o_lo + o_hi) h): the coarse axis has m = floor((n + 1 - o_lo - o_hi) / 2)
points on the same length with the same side kinds, so H >= 2h, and H = 2h exactly where the sizes nest
(2^k - 1 with Dirichlet sides, 2^k with Neumann or periodic ones). Other sizes coarsen the same way
(4096 Dirichlet points: 2047, then 1023, ... nested from there; 4097 Neumann: 2048, 1024, ...): the
transfers below interpolate by the true positions, so nothing needs nested points. An axis stops
coarsening below MIN_POINTS points. Semi-coarsening: where one spacing is more than sqrt(2) times the
other, only the finer axis coarsens (point smoothers damp only the strongly coupled direction; hypre's
PFMG does the same), so levels stay nearly isotropic.

Transfers, per axis (a level's 2-D transfer is the product of its two axes'): prolongation P is linear
interpolation at the fine points' positions from the two coarse points around them, reading coarse ghost
layers (zero beyond a Dirichlet wall, the mirror beyond a Neumann wall, the wrap across a periodic one);
restriction R is P's transpose with those ghost rules folded in, each row normalised to sum 1 (full
weighting [1/4, 1/2, 1/4] where the points nest at H = 2h; [1/8, 3/8, 3/8, 1/8] on a cell-centred axis).
The coarse right-hand side is (d_fine / d_coarse) R r, the operator's scaling carried across. Weights are
computed in exact rational arithmetic, so nested sizes get exactly 1/4, 1/2, ...

Smoothing: sweeps of the Jacobi kernel with weights omega (wc = 1 - omega, omega wx, omega wy, and
omega g): `chebyshev` (default) takes the nu weights that minimise the largest amplification over the
high frequencies of the level (the Chebyshev polynomial of degree nu on [a, b]; nu = 1 gives the
textbook omega = 4/5 for the isotropic Laplacian), `jacobi` a constant omega.
The coarsest level is solved exactly: the inverse of its dense operator (at most `coarsest` points),
computed once in float64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from ..core.boundary import AXIS_SIDES, OFFSET, kinds as side_kinds

MIN_POINTS = 2  # an axis stops coarsening below this many points (a depth-2 mirror or wrap needs 2)
ANISOTROPY = math.sqrt(2.0)  # semi-coarsening: an axis this much coarser than the other waits
MAX_LEVELS = 40
MIRRORED = ("neumann", "convective")  # sides whose coarse ghost mirrors the first coarse point
LOW_REACH = 0.7  # the smoother's interval starts at this fraction of the high-frequency bound a (smoothing_weights)
SLOW_SMOOTHING = 0.9  # a sweep that leaves more than this of some high frequency smooths slowly (a note before the run)


@dataclass(frozen=True)
class Axis:
    """One axis of a level: n points, the side kinds (lo, hi), the physical length."""

    n: int
    kinds: tuple[str, str]
    length: float

    @property
    def offsets(self) -> tuple[Fraction, Fraction]:
        return tuple(Fraction(OFFSET[k]).limit_denominator(2) for k in self.kinds)

    @property
    def spans(self) -> Fraction:
        """The length in spacings: n - 1 + o_lo + o_hi."""
        lo, hi = self.offsets
        return self.n - 1 + lo + hi

    @property
    def h(self) -> float:
        return self.length / float(self.spans)

    @property
    def periodic(self) -> bool:
        return self.kinds[0] == "periodic"

    def coarse(self) -> Axis | None:
        lo, hi = self.offsets
        m = math.floor((self.n + 1 - lo - hi) / 2)
        return Axis(m, self.kinds, self.length) if m >= MIN_POINTS else None


@dataclass(frozen=True)
class Transfer:
    """The 1-D transfers between a fine axis and the next coarser one, in global indices.

    Prolongation: fine point j = p_w[j, 0] * coarse[p_start[j]] + p_w[j, 1] * coarse[p_start[j] + 1]
    (p_start in -1 .. m - 1: -1 and m are coarse ghost layers). Restriction: coarse point J =
    sum over b < r_count[J] of r_w[J, b] * fine[r_start[J] + b] (fine indices may reach one or two ghost
    layers across a periodic wrap). An axis that is not coarsened has the identity for both."""

    p_start: np.ndarray  # (n_fine,) int64
    p_w: np.ndarray  # (n_fine, 2) float64
    r_start: np.ndarray  # (n_coarse,) int64
    r_count: np.ndarray  # (n_coarse,) int64
    r_w: np.ndarray  # (n_coarse, K) float64

    @property
    def taps(self) -> int:
        return self.r_w.shape[1]


@dataclass(frozen=True)
class Level:
    """One level: its axes, spacings, operator weights (unit diagonal) and diagonal, the transfers from
    the next finer level (None on the finest), the factor that carries the finer residual's scale over,
    and the smoothing weights (pre-sweeps; post-sweeps take them in reverse order)."""

    index: int
    x: Axis
    y: Axis
    wx: float
    wy: float
    diag: float
    tx: Transfer | None
    ty: Transfer | None
    scale: float
    pre: tuple[float, ...]  # smoothing weights of the sweeps before the coarse correction
    post: tuple[float, ...]  # and after it

    @property
    def shape(self) -> tuple[int, int]:
        return (self.y.n, self.x.n)

    @property
    def points(self) -> int:
        return self.x.n * self.y.n


@dataclass(frozen=True)
class Settings:
    """What shapes the hierarchy (the case's multigrid section and the operator)."""

    sigma: float = 0.0
    kappa: float = 1.0
    pre: int = 2  # smoothing sweeps before the coarse correction (the Chebyshev degree)
    post: int = 2  # and after it (the same polynomial of this degree, its weights in reverse order)
    smoother: str = "chebyshev"
    omega: float = 0.8
    coarsest: int = 64  # most points of the coarsest level (solved directly)
    alpha_scale: float = 1.0  # alpha a field: its largest value, so the weights (and the smoother's interval) are
    # those of the most strongly coupled points (kappa then carries no alpha: the face coefficients do)
    symmetric: bool = False  # the same weights after the coarse correction as before it, reversed (a symmetric
    # cycle: conjugate gradients' preconditioner); else one polynomial of degree pre + post dealt to both


def axes_of(case) -> tuple[Axis, Axis]:
    """(x, y) axes of the case's grid with its side kinds."""
    k, g = side_kinds(case), case.grid
    x = Axis(g.nx, tuple(k[s] for s in AXIS_SIDES["x"]), g.lx)
    y = Axis(g.ny, tuple(k[s] for s in AXIS_SIDES["y"]), g.ly)
    return x, y


def operator(hx: float, hy: float, sigma: float, kappa: float) -> tuple[float, float, float]:
    """(wx, wy, d) of the unit-diagonal operator (module docstring). sigma = 0 keeps the Jacobi weights of
    solver.core.physics.weights bit for bit: hy^2 / (2 (hx^2 + hy^2)), hx^2 / (2 (hx^2 + hy^2))."""
    d = sigma + kappa * (2.0 / hx**2 + 2.0 / hy**2)
    if sigma == 0.0:
        s = 2.0 * (hx**2 + hy**2)
        return hy**2 / s, hx**2 / s, d
    return kappa / hx**2 / d, kappa / hy**2 / d, d


def hierarchy(case, settings: Settings) -> list[Level]:
    """Every level, finest first (module docstring)."""
    x, y = axes_of(case)
    levels = [_level(0, x, y, settings, None, None, None)]
    while levels[-1].points > settings.coarsest and len(levels) < MAX_LEVELS:
        fine = levels[-1]
        cx, cy = _coarsening(fine.x, fine.y)
        if not (cx or cy):
            break
        x = fine.x.coarse() if cx else fine.x
        y = fine.y.coarse() if cy else fine.y
        levels.append(_level(len(levels), x, y, settings, fine, transfer(fine.x, x) if cx else identity(fine.x.n),
                             transfer(fine.y, y) if cy else identity(fine.y.n)))
    return _with_smoothers(levels, settings)


def retimed(levels: list[Level], settings: Settings) -> list[Level]:
    """The levels for another operator (settings' sigma and kappa: an implicit step of another length): the same
    axes and transfers, each level's weights, diagonal, scale and smoothing weights as hierarchy() gives them."""
    out = []
    for lev in levels:
        wx, wy, d = operator(lev.x.h, lev.y.h, settings.sigma, settings.kappa * settings.alpha_scale)
        out.append(replace(lev, wx=wx, wy=wy, diag=d, scale=out[-1].diag / d if out else 1.0, pre=(), post=()))
    return _with_smoothers(out, settings)


def _coarsening(x: Axis, y: Axis) -> tuple[bool, bool]:
    """Which axes coarsen next: those that can, but not one more than ANISOTROPY times coarser than the other."""
    cx, cy = x.coarse() is not None, y.coarse() is not None
    if cx and cy:
        cx, cy = x.h <= ANISOTROPY * y.h, y.h <= ANISOTROPY * x.h
    return cx, cy


def _level(index: int, x: Axis, y: Axis, settings: Settings, fine, tx, ty) -> Level:
    wx, wy, d = operator(x.h, y.h, settings.sigma, settings.kappa * settings.alpha_scale)
    scale = fine.diag / d if fine is not None else 1.0
    return Level(index, x, y, wx, wy, d, tx, ty, scale, pre=(), post=())


def _with_smoothers(levels: list[Level], settings: Settings) -> list[Level]:
    """Each level but the coarsest gets its smoothing weights, from which axes the next level coarsens."""
    out = []
    for i, lev in enumerate(levels):
        pre = post = ()
        if i + 1 < len(levels):
            nxt = levels[i + 1]
            coarsened = (nxt.x.n != lev.x.n, nxt.y.n != lev.y.n)
            if settings.symmetric:
                pre = smoothing_weights(lev.wx, lev.wy, coarsened, settings, settings.pre)
                post = tuple(reversed(pre))
            else:
                pre, post = split_weights(smoothing_weights(lev.wx, lev.wy, coarsened, settings,
                                                            settings.pre + settings.post), settings.pre)
        out.append(replace(lev, pre=pre, post=post))
    return out


def split_weights(weights: tuple[float, ...], pre: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The weights of one polynomial of degree pre + post, dealt alternately to the sweeps before and after
    the coarse correction (so the pair together damps as the whole polynomial does; development runs on the
    255^2 lid, docs/multigrid.md: V(2,2) factor 0.124 against 0.139 for one degree-2 polynomial each side)."""
    order = list(range(0, len(weights), 2)) + list(range(1, len(weights), 2))
    dealt = [weights[k] for k in order]
    return tuple(dealt[:pre]), tuple(dealt[pre:])


def smoothing_weights(wx: float, wy: float, coarsened: tuple[bool, bool], settings: Settings,
                      nu: int) -> tuple[float, ...]:
    """The omegas of nu smoothing sweeps. The iteration matrix of a sweep is I - omega D^-1 A, and
    D^-1 A has eigenvalues 1 - 2 wx cos(theta_x) - 2 wy cos(theta_y); those the coarse level cannot
    represent (theta >= pi/2 along a coarsened axis) lie in [a, b] with a = 1 - 2 max(w of the other axis)
    and b = 1 + 2 (wx + wy). Chebyshev: 1/omega_i are the Chebyshev nodes of degree nu on [LOW_REACH a, b]:
    reaching below a also damps the frequencies near pi/2, which the coarse level represents poorly
    (development runs on the 255^2 lid, V(2,2), docs/multigrid.md: factor 0.124 with a itself, 0.105 with
    0.7 a, 0.12 with 0.5 a)."""
    if nu == 0:
        return ()
    if settings.smoother == "jacobi":
        return (settings.omega,) * nu
    a, b = high_band(wx, wy, coarsened)
    a *= LOW_REACH
    centre, radius = (a + b) / 2, (b - a) / 2
    return tuple(1.0 / (centre + radius * math.cos(math.pi * (2 * i + 1) / (2 * nu))) for i in range(nu))


def high_band(wx: float, wy: float, coarsened: tuple[bool, bool]) -> tuple[float, float]:
    """[a, b]: the eigenvalues of D^-1 A of the frequencies the next level cannot represent (smoothing_weights)."""
    other = [wy if coarsened[0] else 0.0, wx if coarsened[1] else 0.0]
    b = 1.0 + 2.0 * (wx + wy)
    return max(1.0 - 2.0 * max(other), 0.05 * b), b


def smoothing_factor(levels: list[Level]) -> float | None:
    """The most one smoothing sweep of the finest level leaves of a frequency the next level cannot represent:
    max over its band [a, b] of |prod (1 - omega_i lambda)|, per sweep (the geometric mean over the pre- and
    post-sweeps); None with a single level. Weighted Jacobi at the textbook omega = 0.8: 0.6."""
    if len(levels) < 2:
        return None
    fine, nxt = levels[0], levels[1]
    a, b = high_band(fine.wx, fine.wy, (nxt.x.n != fine.x.n, nxt.y.n != fine.y.n))
    lam = np.linspace(a, b, 2001)
    weights = fine.pre + fine.post
    left = np.abs(np.prod([1.0 - om * lam for om in weights], axis=0)).max()
    return float(left ** (1.0 / len(weights)))


def smoothing_note(levels: list[Level]) -> str | None:
    """A line for the user before the run when the sweeps smooth slowly (smoothing_factor > SLOW_SMOOTHING)."""
    f = smoothing_factor(levels)
    if f is None or f <= SLOW_SMOOTHING:
        return None
    return (f"note: multigrid: each smoothing sweep leaves up to {f:.3g} of the high frequencies (the textbook weight "
            "0.8 leaves 0.6): the cycles will converge slowly; use multigrid.omega near 0.8 or smoother: chebyshev")


# transfers ---------------------------------------------------------------------------------------
def identity(n: int) -> Transfer:
    idx = np.arange(n, dtype=np.int64)
    return Transfer(idx, np.column_stack([np.ones(n), np.zeros(n)]), idx.copy(), np.ones(n, dtype=np.int64),
                    np.ones((n, 1)))


def _scaled(fine: Axis, coarse: Axis) -> tuple[int, int, int]:
    """(a, c2, f2): with lo = a / 2 the first point's wall offset and c2, f2 twice the coarse and fine spans,
    fine point j lies at coarse index ((a + 2j) c2 - a f2) / (2 f2): exact integers, no rounding."""
    a = int(2 * fine.offsets[0])
    return a, int(2 * coarse.spans), int(2 * fine.spans)


def _position(fine: Axis, coarse: Axis, j) -> tuple:
    """Fine point(s) j in coarse index units, as (numerator, denominator) integers: coarse point J lies at J."""
    a, c2, f2 = _scaled(fine, coarse)
    return (a + 2 * np.asarray(j, dtype=np.int64)) * c2 - a * f2, 2 * f2


def transfer(fine: Axis, coarse: Axis) -> Transfer:
    m, n = coarse.n, fine.n
    num, q = _position(fine, coarse, np.arange(n))
    p_start = num // q
    frac = num - p_start * q
    p_w = np.column_stack([(q - frac) / q, frac / q])
    starts, counts, w = _restriction_rows(fine, coarse)
    r_w = w / w.sum(axis=1, keepdims=True)  # integers: the division rounds once, as float(Fraction) would
    return Transfer(p_start, p_w, starts, counts, r_w)


def _restriction_rows(fine: Axis, coarse: Axis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every coarse point's row of P^T at once (_restriction_row's rule, vectorised): (first fine index, count,
    integer weights padded with zeros), the end rows' ghosts folded as _restriction_row folds them."""
    n, m = fine.n, coarse.n
    a, c2, f2 = _scaled(fine, coarse)
    centre = np.arange(m, dtype=np.int64)
    lo = ((centre - 1) * 2 * f2 + a * f2) // (2 * c2) - a - 1
    hi = ((centre + 1) * 2 * f2 + a * f2) // (2 * c2) + 3
    j = lo[:, None] + np.arange(int((hi - lo).max()))[None, :]
    num, q = _position(fine, coarse, j)
    w = np.where(j < hi[:, None], q - np.abs(num - centre[:, None] * q), 0)
    if not fine.periodic:
        w = np.where((j >= 0) & (j < n), w, 0)
    w = np.clip(w, 0, None)
    for J in {0, m - 1} & set(range(m)):  # a mirrored end: the ghost's weights go to the point it mirrors
        first, row = _restriction_row(fine, coarse, J)
        w[J] = 0
        j[J] = first + np.arange(j.shape[1])
        w[J, :len(row)] = row
    hit = w > 0
    first_tap = hit.argmax(axis=1)
    last_tap = j.shape[1] - 1 - hit[:, ::-1].argmax(axis=1)
    counts = last_tap - first_tap + 1
    starts = j[centre, first_tap]
    taps = int(counts.max())
    out = np.zeros((m, taps))
    for t in range(taps):
        col = np.clip(first_tap + t, 0, j.shape[1] - 1)
        out[:, t] = np.where(t < counts, w[centre, col], 0)
    return starts.astype(np.int64), counts.astype(np.int64), out


def _window(fine: Axis, coarse: Axis, centre: int) -> np.ndarray:
    """The fine indices within one coarse spacing of coarse index `centre` (a superset: weights decide)."""
    a, c2, f2 = _scaled(fine, coarse)
    lo = ((centre - 1) * 2 * f2 + a * f2) // (2 * c2) - a  # fine index near coarse position centre - 1
    hi = ((centre + 1) * 2 * f2 + a * f2) // (2 * c2) + 1
    return np.arange(lo - 1, hi + 2, dtype=np.int64)


def _restriction_row(fine: Axis, coarse: Axis, J: int) -> tuple[int, np.ndarray]:
    """(first fine index, integer weights) of coarse point J's row of P^T, ghost rules folded in, not yet
    normalised.

    A fine point contributes 1 - |t - J| where |t - J| < 1. Beyond a Dirichlet wall the coarse ghost is
    zero (no contribution); beyond a Neumann wall it mirrors the first coarse point (the ghost's weight
    goes to it); across a periodic wrap the fine points are taken from the periodic images (indices -1
    or n: ghost layers the exchange or the wrap fills)."""
    n, m = fine.n, coarse.n
    weights: dict[int, int] = {}

    def add(centre: int, periodic: bool = False) -> None:
        j = _window(fine, coarse, centre)
        if not periodic:
            j = j[(j >= 0) & (j < n)]
        num, q = _position(fine, coarse, j)
        w = q - np.abs(num - centre * q)
        for jj, ww in zip(j.tolist(), w.tolist()):
            if ww > 0:
                weights[jj] = weights.get(jj, 0) + ww

    add(J, periodic=fine.periodic)
    if J == 0 and fine.kinds[0] in MIRRORED:
        add(-1)  # the ghost at -1 mirrors coarse point 0 (a convective one: times its gain, near 1 on fine grids)
    if J == m - 1 and fine.kinds[1] in MIRRORED:
        add(m)  # the ghost at m mirrors coarse point m - 1
    first, last = min(weights), max(weights)
    return first, np.array([weights.get(j, 0) for j in range(first, last + 1)], dtype=np.float64)


# the coarsest level --------------------------------------------------------------------------------
def dense_operator(level: Level, gains: dict | None = None, faces=None, sigma: float = 0.0) -> np.ndarray:
    """The level's operator as a dense matrix (row-major points), homogeneous ghost rules: a Dirichlet neighbour
    drops out, a Neumann one mirrors onto the point itself, a convective one adds its gain times the point
    itself (gains: side -> the gain at each point along it, or a number), a periodic one wraps.
    faces None: the unit-diagonal form (weights wx, wy). faces = (Fx, Fy), the level's face coefficients over
    the squared spacing (solver.multigrid.coefficients' layout): the equation's own units, diagonal sigma (a number,
    or an array of the level's points) + the point's four faces."""
    ny, nx = level.shape
    a = np.zeros((ny * nx, ny * nx))
    for i in range(ny):
        for j in range(nx):
            p = i * nx + j
            links = _links(level, faces, i, j)
            a[p, p] = 1.0 if faces is None else (sigma if np.ndim(sigma) == 0 else sigma[i, j]) + sum(
                link[1] for link in links)
            for (ii, jj), w, axis, horizontal in links:
                q = _neighbour(ii, jj, ny, nx, axis, horizontal)
                if q is None:
                    continue
                if q == "self":
                    a[p, p] -= w * _gain(gains, level, ii, jj, ny, nx, horizontal)
                else:
                    a[p, q[0] * nx + q[1]] -= w
    return a


def _links(level: Level, faces, i: int, j: int):
    """((neighbour), weight, axis, horizontal) of point (i, j)'s four neighbours: W, E, S, N."""
    if faces is None:
        wx, wy = level.wx, level.wy
        w = (wx, wx, wy, wy)
    else:
        fx, fy = faces
        px, py = level.x.periodic, level.y.periodic
        w = (fx[i, j], fx[i, (j + 1) % level.x.n if px else j + 1], fy[i, j], fy[(i + 1) % level.y.n if py else i + 1, j])
    return (((i, j - 1), w[0], level.x, True), ((i, j + 1), w[1], level.x, True),
            ((i - 1, j), w[2], level.y, False), ((i + 1, j), w[3], level.y, False))


def _gain(gains, level: Level, i: int, j: int, ny: int, nx: int, horizontal: bool) -> float:
    """The ghost's gain onto the point it mirrors (1 for Neumann; a convective side's gain at that point)."""
    k, n = (j, nx) if horizontal else (i, ny)
    side = ("left" if k < 0 else "right") if horizontal else ("bottom" if k < 0 else "top")
    g = (gains or {}).get(side, 1.0)
    if np.ndim(g) == 0:
        return float(g)
    return float(g[i if horizontal else j])


def _neighbour(i: int, j: int, ny: int, nx: int, axis: Axis, horizontal: bool):
    """The neighbour's (row, column), "self" where a mirror (Neumann, convective) folds it onto the point itself,
    None beyond a Dirichlet wall."""
    k, n = (j, nx) if horizontal else (i, ny)
    if 0 <= k < n:
        return i, j
    side = axis.kinds[0] if k < 0 else axis.kinds[1]
    if side == "dirichlet":
        return None
    if side != "periodic":
        return "self"
    k = k % n
    return (i, k) if horizontal else (k, j)


def coarsest_inverse(level: Level, gains: dict | None = None, faces=None, sigma: float = 0.0) -> np.ndarray:
    """The inverse of the coarsest level's operator, float64 (the exact coarse solve)."""
    return np.linalg.inv(dense_operator(level, gains, faces, sigma))
