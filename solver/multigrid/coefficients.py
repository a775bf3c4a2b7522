"""Face coefficients of every multigrid level where alpha is a field: plain data from the case and the levels.

The finest level's faces are solver.core.materials' (harmonic means of neighbouring points). A coarse face
stands for the fine faces it spans (Alcouffe, Brandt, Dendy and Painter 1981): along the flux the fine faces
lie in series, so the coarse one takes the harmonic average of alpha over its length (the resistance of
each fine face's interval, added: R = integral of dx / alpha); across the flux they lie side by side, so
it takes the arithmetic average of the fine rows its cell overlaps (weighted by the overlap of the fine
and coarse cells). A coarse level's conductance between two points is then what the fine one has between
them, which keeps cycles fast across jumps of alpha of many orders; plain sampling of alpha at the coarse
points does not.

Arrays are global, per level, in alpha's units (float64): kx of shape (ny, faces_x) with face f between
points f - 1 and f (f = 0: the low wall's face, f = nx: the high wall's; a periodic axis has nx faces, face
f between points f - 1 and f mod nx), ky of shape (faces_y, nx) likewise. Every rank computes the same arrays
(the whole grid on every rank: memory of about three fields per level), then takes its block's part
(`local`): so the coefficients, like the levels, are independent of the rank count.
"""

from __future__ import annotations

import numpy as np

from ..core.grid import whole
from ..core.materials import alpha_at, harmonic
from .levels import Axis, Level


def faces_of(axis: Axis) -> int:
    return axis.n if axis.periodic else axis.n + 1


def finest(case) -> tuple[np.ndarray, np.ndarray]:
    """(kx, ky) of the finest level: harmonic means of the points' alpha, a wall's face the first point's (the
    material form: the faces at the materials' true place, solver.core.plate, through solver.core.materials.faces)."""
    rows, cols = whole(case)
    if getattr(case.physics, "material", None) is not None:
        from ..core.materials import faces

        px, py = case.boundary.left.kind == "periodic", case.boundary.bottom.kind == "periodic"
        ny, nx = case.shape
        cx = np.concatenate([[nx - 1], cols]) if px else np.concatenate([[0], cols, [nx - 1]])
        ry = np.concatenate([[ny - 1], rows]) if py else np.concatenate([[0], rows, [ny - 1]])
        kx = faces(case, np.concatenate([rows, [ny - 1]]), cx)[0]
        ky = faces(case, ry, np.concatenate([cols, [nx - 1]]))[1]
        return kx, ky
    a = alpha_at(case, rows, cols)
    px, py = case.boundary.left.kind == "periodic", case.boundary.bottom.kind == "periodic"
    ax = np.concatenate([a[:, -1:], a], axis=1) if px else np.concatenate([a[:, :1], a, a[:, -1:]], axis=1)
    ay = np.concatenate([a[-1:], a], axis=0) if py else np.concatenate([a[:1], a, a[-1:]], axis=0)
    return harmonic(ax[:, :-1], ax[:, 1:]), harmonic(ay[:-1], ay[1:])


def hierarchy(case, levels: list[Level]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(kx, ky) of every level, finest first; a coarse level's faces at its held points closed (held_levels)."""
    return faces_and_held(case, levels)[0]


def faces_and_held(case, levels: list[Level]) -> tuple[list, list[np.ndarray] | None]:
    """(hierarchy's faces, held_levels' points) in one pass: a coarse level's held points need its faces (a point
    none of whose faces conducts is held), and its faces close at its held points."""
    out = [finest(case)]
    held = _held_by_plate(case, levels)
    for k, (fine, coarse) in enumerate(zip(levels, levels[1:])):
        kx, ky = out[-1]
        kx = _across(_along(kx, fine.x, coarse.x), fine.y, coarse.y)
        ky = _across(_along(ky.T, fine.y, coarse.y), fine.x, coarse.x).T
        if held is not None:
            held[k + 1] = held[k + 1] | _isolated(kx, ky, coarse)
            kx, ky = _shut(kx, ky, held[k + 1], coarse)
        out.append((kx, ky))
    return out, held


MIN_PLATE = 1e-6  # a coarse cell with less of the plate than this (none, to rounding) stands for held points


def held_levels(case, levels: list[Level]) -> list[np.ndarray] | None:
    """Per level, which points stand for held or inactive points (in a hole, a held object, outside the outline):
    the finest level's own; a coarse cell with no plate (less than MIN_PLATE of its area, area-weighted from the
    finest), or whose plate reaches no neighbour (every face of the coarse point closed: a sliver cut off by the
    level's coarsened faces, whose equation would have a diagonal of CLOSED's size; its correction, a residual over
    that, made V-cycles diverge 1e7-fold in four cycles with a slanted hole on 101 x 67 points). None without
    shapes. Their faces are closed and the transfers skip them (opdep.tables), so a coarse point that holds only a
    sliver of the plate still stands for that sliver alone (measured on a heat sink's fins: counting cells with
    under 25% plate as held took 35 cycles, none 19). Computes the faces (faces_and_held gives both at once)."""
    from ..core.medium import medium

    return faces_and_held(case, levels)[1] if medium(case).shapes else None


def _held_by_plate(case, levels: list[Level]) -> list[np.ndarray] | None:
    """held_levels by the plate's share of each cell alone."""
    from ..core.operator import shape_terms

    terms = shape_terms(case, *whole(case))
    if terms is None:
        return None
    out = [terms[2]]
    plate = 1.0 - terms[2]
    for fine, coarse in zip(levels, levels[1:]):
        plate = _across(_across(plate, fine.y, coarse.y), fine.x, coarse.x, axis=1)
        out.append(plate < MIN_PLATE)
    return out


def _isolated(kx: np.ndarray, ky: np.ndarray, level: Level) -> np.ndarray:
    """The points of a level none of whose four faces conducts (_closed; a wall's face counts as the wall's)."""
    top = max(float(np.max(kx)), float(np.max(ky)))
    cx, cy = _closed(kx, top), _closed(ky, top)
    west, east = (cx, np.roll(cx, -1, axis=1)) if level.x.periodic else (cx[:, :-1], cx[:, 1:])
    south, north = (cy, np.roll(cy, -1, axis=0)) if level.y.periodic else (cy[:-1], cy[1:])
    return west & east & south & north


def _shut(kx: np.ndarray, ky: np.ndarray, held: np.ndarray, level: Level) -> tuple[np.ndarray, np.ndarray]:
    """A coarse level's faces with those of its held points closed (CLOSED of the largest)."""
    kx, ky = kx.copy(), ky.copy()
    top = CLOSED * max(float(np.max(kx)), float(np.max(ky)))
    px, py = level.x.periodic, level.y.periodic
    hx = np.concatenate([held[:, -1:], held], axis=1) if px else np.concatenate([held[:, :1], held, held[:, -1:]], 1)
    hy = np.concatenate([held[-1:], held], axis=0) if py else np.concatenate([held[:1], held, held[-1:]], 0)
    kx[hx[:, :-1] | hx[:, 1:]] = top
    ky[hy[:-1] | hy[1:]] = top
    return kx, ky


def _along(k: np.ndarray, fine: Axis, coarse: Axis) -> np.ndarray:
    """Each row's faces along the flux, coarsened: the harmonic average of alpha over each coarse face's span."""
    if fine.n == coarse.n:
        return k
    h, hc = fine.h, coarse.h
    lo = float(fine.offsets[0])
    x0 = (lo - 1) * h  # faces f over [x_{f-1}, x_f]: f = 0..n with walls (x_{-1}, x_n on the ghosts), 0..n-1 periodic
    if fine.periodic:  # three periods, from one before: every coarse span lies inside them
        k = np.concatenate([k, k, k], axis=1)
        x0 -= fine.length
    closed = _closed(k)
    k = open_faces(k)
    cum = np.concatenate([np.zeros((k.shape[0], 1)), np.cumsum(h / k, axis=1)], axis=1)  # R at x0 + f h
    ends = (float(coarse.offsets[0]) - 1 + np.arange(faces_of(coarse) + 1)) * hc  # coarse face spans' ends
    t = (ends - x0) / h
    if not closed.any():
        resist = _interp(cum, k, t)
        return (ends[1:] - ends[:-1]) / (resist[:, 1:] - resist[:, :-1])
    ta, tb = _trimmed(closed, t[:-1], t[1:])
    shut = ta >= tb
    ta, tb = np.where(shut, t[:-1], ta), np.where(shut, t[1:], tb)
    ra, rb = _interp_at(cum, k, ta), _interp_at(cum, k, tb)
    out = (tb - ta) * h / (rb - ra)
    return np.where(shut, CLOSED * float(np.max(k)), out)


def _closed(k: np.ndarray, top: float | None = None) -> np.ndarray:
    """Faces closed by a hole or a held object's rim: zero on the finest level, a coarse level's at most a few
    times CLOSED (of the largest face: k's own, or `top`)."""
    top = float(np.max(k)) if top is None else top
    return k <= 16.0 * CLOSED * top if top > 0 else np.ones(k.shape, dtype=bool)


def _trimmed(closed: np.ndarray, ta: np.ndarray, tb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each coarse span [ta, tb] (fractional fine face positions) per row, with the closed faces at an end left out
    where the row has plate in that end's half of the span: a coarse point that stands for a cut cell's plate but
    lies beyond the rim reaches its neighbours through the plate, not through the hole; a coarse point with no plate
    on the row stays shut from it (closed faces between two open stretches still count, in series: a slot or a gap
    between fins keeps its parts apart). ta >= tb where the span has no open face."""
    rows, n = closed.shape
    pos = np.arange(n)
    nxt = np.minimum.accumulate(np.where(closed, n, pos)[:, ::-1], axis=1)[:, ::-1]  # first open face >= f
    prv = np.maximum.accumulate(np.where(closed, -1, pos), axis=1)  # last open face <= f
    i0 = np.clip(np.floor(ta).astype(np.int64), 0, n - 1)
    i1 = np.clip(np.ceil(tb).astype(np.int64) - 1, 0, n - 1)
    first, last = nxt[:, i0], prv[:, i1]
    mid = 0.5 * (ta + tb)[None, :]
    a = np.where(first < mid, np.maximum(ta[None, :], first), ta[None, :])  # plate in the first point's half: trim
    b = np.where(last + 1.0 > mid, np.minimum(tb[None, :], last + 1.0), tb[None, :])
    return a, np.where(first > last, a, b)


def _interp_at(cum: np.ndarray, k: np.ndarray, t: np.ndarray) -> np.ndarray:
    """R at per-row fractional face positions t (rows, m): _interp with a position per row."""
    idx = np.clip(np.floor(t).astype(np.int64), 0, k.shape[1] - 1)
    frac = t - idx
    lo = np.take_along_axis(cum, idx, axis=1)
    return lo + frac * (np.take_along_axis(cum, idx + 1, axis=1) - lo)


def _interp(cum: np.ndarray, k: np.ndarray, t: np.ndarray) -> np.ndarray:
    """R at fractional face positions t (in fine spacings from the first face's start), per row, extended past
    either end with the end faces' alpha."""
    idx = np.clip(np.floor(t).astype(np.int64), 0, k.shape[1] - 1)
    frac = t - idx
    return cum[:, idx] + frac[None, :] * (cum[:, idx + 1] - cum[:, idx])


def _across(k: np.ndarray, fine: Axis, coarse: Axis, axis: int = 0, device=None) -> np.ndarray:
    """Rows (axis 1: columns) coarsened across the flux: each coarse row the overlap-weighted mean of the fine rows
    its cell covers, the taps summed in order (a handful per coarse row: banded, not a dense product; one numba pass,
    solver.backends.numba_mg.across_rows: a whole level's diagonal is coarsened at each Newton rebuild)."""
    from ..backends import numba_mg

    if fine.n == coarse.n:
        return k
    rows, w = _overlaps(fine, coarse)
    wsum = np.ascontiguousarray(w.sum(axis=1))
    if device is not None:  # (a device array: coarsened's)
        return device.across(k, rows, w, wsum, axis)
    k = np.ascontiguousarray(k, dtype=np.float64)
    if axis == 0:
        return numba_mg.across_rows(k, np.ascontiguousarray(rows), np.ascontiguousarray(w), wsum)
    return numba_mg.across_cols(k, np.ascontiguousarray(rows), np.ascontiguousarray(w), wsum)


def _overlaps(fine: Axis, coarse: Axis) -> tuple[np.ndarray, np.ndarray]:
    """(rows, weights), each (m, T): the fine cells each coarse cell I overlaps and the lengths they share (cells:
    a point's half spacings either side; walls clip them; a periodic axis wraps, rows taken mod n)."""
    h, hc = fine.h, coarse.h
    lo_f, lo_c = float(fine.offsets[0]), float(coarse.offsets[0])
    yc = (lo_c + np.arange(coarse.n)) * hc
    first = np.floor((yc - hc / 2) / h - lo_f).astype(np.int64) - 1  # a fine cell just before the coarse cell
    taps = int(np.ceil(hc / h)) + 3
    idx = first[:, None] + np.arange(taps)[None, :]
    yf = (lo_f + idx) * h
    lo = np.maximum(yc[:, None] - hc / 2, yf - h / 2)
    hi = np.minimum(yc[:, None] + hc / 2, yf + h / 2)
    w = np.clip(hi - lo, 0.0, None)
    if fine.periodic:
        return np.mod(idx, fine.n), w
    w = np.where((idx >= 0) & (idx < fine.n), w, 0.0)
    return np.clip(idx, 0, fine.n - 1), w


def local(k: np.ndarray, axis_faces: Axis, axis_rows: Axis, start_faces: int, start_rows: int, shape,
          origin: tuple[int, int], transpose: bool = False) -> np.ndarray:
    """A block's part of a face array on its padded layout: element (i, j) gets the face east of (or, transposed,
    north of) the point it stands for; face indices wrap along a periodic axis and are clamped beyond walls
    (those faces are never read), rows likewise. shape: the layout's (R, C); origin: where the owned block
    starts in it; start_*: the block's first global row and column."""
    rows_n, cols_n = shape if not transpose else shape[::-1]
    o_rows, o_cols = origin if not transpose else origin[::-1]
    g_rows = start_rows - o_rows + np.arange(rows_n)
    g_faces = start_faces - o_cols + np.arange(cols_n) + 1  # the face east of point j
    g_rows = np.mod(g_rows, axis_rows.n) if axis_rows.periodic else np.clip(g_rows, 0, axis_rows.n - 1)
    g_faces = np.mod(g_faces, k.shape[1]) if axis_faces.periodic else np.clip(g_faces, 0, k.shape[1] - 1)
    if k.dtype == np.float64 and k.size > 1 << 16:  # (the finest levels: on threads)
        from ..backends import numba_mg

        part = numba_mg.gather(np.ascontiguousarray(k), g_rows.astype(np.int64), g_faces.astype(np.int64))
        return part.T if transpose else part
    part = k[np.ix_(g_rows, g_faces)]
    return part.T if transpose else part


def sigmas(case, levels: list[Level], held: list[np.ndarray] | None = None, dt: float | None = None,
           theta: float | None = None) -> list[np.ndarray] | None:
    """The diagonal's part beside the faces of every level where it varies (solver.core.operator.sigma_field: an
    implicit step's heat capacity, the rims' and held objects' terms), finest first, global arrays; None where it is
    one number. A coarse cell takes the area-weighted mean of the fine cells it overlaps (for a capacity, the lumped
    mass of the Galerkin product P^T M P: a coarse level holds the same heat per degree as the fine cells it stands
    for). held: held_levels' (found here where not given). dt, theta: an implicit step's (default the case's)."""
    from ..core.operator import sigma_field

    first = sigma_field(case, *whole(case), dt, theta)
    return None if first is None else coarsened(case, levels, first, held)


def coarsened(case, levels: list[Level], first: np.ndarray, held: list[np.ndarray] | None = None,
              device=None) -> list[np.ndarray]:
    """Every level's diagonal part beside the faces from the finest level's (a global array): sigmas' averaging, for a
    diagonal the caller computed (solver.nonlinear: a Newton step's linearised sinks). held: held_levels' (found here
    where not given). device: the GPU's kernels (solver.backends.cupy_nl: its array module `cp` and `across`) where
    `first` and held are device arrays (one rank's Newton rebuild): the same terms, the same bits, on the device."""
    held = held_levels(case, levels) if held is None else held
    xp = np if device is None else device.cp
    out = [first]
    for k, (fine, coarse) in enumerate(zip(levels, levels[1:])):
        mean = lambda a: _across(_across(a, fine.y, coarse.y, device=device), fine.x, coarse.x,  # noqa: E731
                                 axis=1, device=device)
        if held is None:
            out.append(mean(out[-1]))
            continue
        plate, inert = mean(xp.where(held[k], 0.0, out[-1])), mean(xp.where(held[k], out[-1], 0.0))
        out.append(xp.where(held[k + 1], xp.maximum(inert, plate), plate))
    return out


def rim_levels(case, levels: list[Level], held: list[np.ndarray] | None) -> list[np.ndarray] | None:
    """The diagonal that held objects' and fixed rims' Gibou links make on every level (solver.core.operator.held_links:
    k / (theta h^2) beside a rim where the error vanishes; per unit time, the faces' units), finest first, global
    arrays, coarsened as sigmas are; None without such links. The transfers' collapsed weights read it
    (solver.multigrid.opdep). Not the cooled rims' terms: those are small beside a point's faces (h dx / k, 1e-5 on
    cases/heat_sink.yaml), and weights scaled by 1 - 1e-3 there no longer carry a constant onto the fine level, which
    stalled CG on that nearly insulated plate at 3e-4 (its coarse levels are re-discretised, not Galerkin products
    of the transfers, so nothing makes up for the loss)."""
    from ..core.operator import held_links

    if held is None:  # (no shapes)
        return None
    first = held_links(case, *whole(case))
    return None if first is None or not np.any(first > 0) else coarsened(case, levels, first, held)


def local_points(a: np.ndarray, level: Level, block, shape, origin: tuple[int, int], device=None) -> np.ndarray:
    """A block's part of a per-point array of a level on its padded layout: element (i, j) the value of the point it
    stands for (indices wrapped along a periodic axis, clamped beyond walls). device: as coarsened's (a device
    array gathered on the device)."""
    rows = block.rows[0] - origin[0] + np.arange(shape[0])
    cols = block.cols[0] - origin[1] + np.arange(shape[1])
    rows = np.mod(rows, level.y.n) if level.y.periodic else np.clip(rows, 0, level.y.n - 1)
    cols = np.mod(cols, level.x.n) if level.x.periodic else np.clip(cols, 0, level.x.n - 1)
    if device is not None:
        cp = device.cp
        return a[cp.ix_(cp.asarray(rows), cp.asarray(cols))]
    if a.dtype == np.float64 and a.ndim == 2 and a.size > 1 << 16:  # (a Newton rebuild's finest level: threads)
        from ..backends import numba_mg

        return numba_mg.gather(np.ascontiguousarray(a), rows.astype(np.int64), cols.astype(np.int64))
    return a[np.ix_(rows, cols)]


CLOSED = 1e-8  # a closed face (a cut link, a hole's): as conductive as this times the largest face, in resistances
# summed along a row (small enough to close it for a coarse level, large enough that sums past it keep 8 digits)


def open_faces(k: np.ndarray) -> np.ndarray:
    """k with its closed (zero) faces given a resistance finite but enormous (CLOSED times the largest face), for the
    resistances summed along a row (coarse faces in series, operator-dependent transfers); the finest level's own
    operator keeps its zeros."""
    if not (k <= 0).any():
        return k
    return np.maximum(k, CLOSED * float(np.max(k)))


def level_contrast(k: tuple[np.ndarray, np.ndarray]) -> float:
    """max / min of a level's faces (the record's contrast)."""
    lo = min(float(k[0].min()), float(k[1].min()))
    hi = max(float(k[0].max()), float(k[1].max()))
    return hi / lo
