"""The nonlinear steady operator as data on one rank's finest multigrid level: its residual R(u), its Jacobian (exact,
or Picard's), and the diagonal of the multigrid operator that preconditions it.

In the equation's units divided by the reference capacity C0 (solver.core.medium), at each point P that is plate:

    R(u)_P = g0 + sum over P's four faces of K_f(u) (u_Q - u_P) - beta u - kappa(m)(d_G u - f_G) - d_L u
             - sum over P's films of w Q(u) - e_f ((u + T0)^4 - T_s^4)        [+ b - s u: an implicit step]

- K_f(u) = K_f_ref H(kappa_P, kappa_Q): the face's reference conductance over its spacing squared (the multigrid's own
  finest faces, built once from the materials' reference k: solver.core.plate) times the harmonic mean H(a, b) =
  2 a b / (a + b) of the two points' factors kappa = k(u) / k_ref (solver.core.conductivity). Within one material
  that is the harmonic mean of the two points' k at their own temperatures; a constant-k material has kappa = 1 and
  H = 1 exactly. A Dirichlet wall's ghost holds the wall's value, and its kappa is the first point's law there.
- g0: the sources and the faces' ambient (solver.core.operator.source_density), the Neumann rims' fluxes and the
  Neumann sides' (flux / spacing: those walls are closed, their flux added here, whatever k is).
- beta: the faces' sink; d_G, f_G: the links to held objects and fixed rims (Gibou's k_P / (theta h^2), with the
  point's own k: scaled by kappa at m, the mean of the point's and the rim's temperatures); d_L: convective rims
  that do not radiate (their reference k: linear).
- films: convective sides and radiating rims (solver.nonlinear.films): each point loses w Q(u); e_f: the faces'
  radiation (faces eps sigma / thickness, normalised).
- held and inactive points: R = hd (T - u), hd the held diagonal (their faces are closed; their kappa is 1: a hole's
  0 K is no material's temperature).
- an implicit step (solver.nonlinear.newton.time_step): s = c / (theta dt) and b on the plate's points.

The Jacobian J = dR/du, applied to v: each face's linearised flux K (v_Q - v_P) + A v_P + B v_Q with
A = K_ref dH/da kappa'_P (u_Q - u_P), B = K_ref dH/db kappa'_Q (u_Q - u_P) (Picard: A = B = 0), minus the diagonal
D v, D = beta + d_L + kappa(m) d_G + kappa'(m) (d_G u - f_G) / 2 + sum w dQ/du + 4 e_f (u + T0)^3 [+ s].

The preconditioner (solver.nonlinear.newton): to first order in a face's temperature difference both A + K and
K + B are K_ref kappa of the point they multiply (the Kirchhoff transform's Jacobian), so -J v ~ (A_ref + D / kappa)
(kappa v), A_ref the multigrid's own operator: one multigrid cycle with the diagonal sigma = D / kappa, and the result
divided by kappa, approximates -J^-1. The faces of every level stay those built once; only sigma changes per step.

Every array expression below runs on the backend's array module (numpy, or CuPy on a GPU), term by term in a fixed
order: numpy and numba give the same bits, and every rank count the same (a point's value depends only on its own
and its neighbours' data).
"""

from __future__ import annotations

import functools
from contextlib import nullcontext

import numpy as np

from ..core import operator as lin_operator
from ..core.boundary import AXIS_SIDES, BLOCK_SIDE, SIDES
from ..core.conductivity import law_index, law_names, laws
from ..core.grid import geometry, window
from ..core.medium import medium
from ..core.sides import value_at
from . import films as film_mod


def on_stream(fn):
    """Run a method's array expressions on the backend's own stream (a GPU's `main`, where its multigrid verbs run:
    CuPy's default stream would not wait for them); on the CPU, as they are."""
    @functools.wraps(fn)
    def wrapped(self, *args, **kwargs):
        with self.stream:
            return fn(self, *args, **kwargs)

    return wrapped


class Operator:
    def __init__(self, case, lincase, grid, block, backend, t: float = 0.0):
        """case: the nonlinear case; lincase: the linear case the multigrid was built on (solver.nonlinear.linear);
        grid: the multigrid's finest level on this rank (its faces, layout and fills); t: the time of side data."""
        from ..case.units import kelvin_offset, stefan_boltzmann, UnitSystem

        self.case, self.grid, self.block, self.backend = case, grid, block, backend
        self.dtype = np.dtype(case.numerics.dtype)
        self.xp = np if not backend.on_gpu else __import__("cupy")
        self.stream = getattr(backend, "main", None) or nullcontext()
        lay = grid.layout
        self.owned = grid.owned
        r0, r1, c0, c1 = self.owned
        rows, cols = window(case, block, lay.shape, (lay.owned[0], lay.owned[2]))
        self.rows_g, self.cols_g = rows, cols
        med = medium(case)
        self.c0 = med.c0
        self.offset = kelvin_offset(case.units.temperature)
        self.sigma_sb = stefan_boltzmann(UnitSystem(case.units.length, case.units.time, case.units.temperature))
        self.laws = [laws(case)[name] for name in law_names(case)]
        table = case.material_table()
        self.kref = [table[name][0] for name in law_names(case)]
        box = (slice(r0 - 1, r1 + 1), slice(c0 - 1, c1 + 1))  # the one-layer box around the owned block
        self.box = box
        code = law_index(case, rows[box[0]], cols[box[1]]) if self.laws else None
        self.code = None if code is None else self._dev(code, np.int32)
        self.inert = None  # held and inactive points of the box: kappa 1 there (their faces are closed; their values,
        # a held temperature or a hole's 0, are no material's: a power law at 0 K would put NaN into 0-conductance faces)
        if self.laws and not _plain(lincase):
            from ..core.plate import cells

            inert = cells(lincase, rows[box[0]], cols[box[1]])["held"] > 0
            self.inert = self._dev(inert, bool) if inert.any() else None
        self._point_data(lincase, rows[r0:r1], cols[c0:c1])
        films = (film_mod.side_films(case, block, self.owned, self.c0, self.sigma_sb, self.offset, t)
                 + film_mod.rim_films(case, block, self.owned, self.c0, self.sigma_sb, self.offset))
        self.films = [f.on(backend, self.dtype) for f in films]
        self.host_films = None if self.xp is np else {id(d): f.on(None, self.dtype) for d, f in zip(self.films, films)}
        # (a GPU's films solved on the host where a table gives k: _film)
        self.film_laws = None if any(law.kind != "power" for law in self.laws) else tuple(
            (law.offset, law.t0, law.b, law.k0, kref) for law, kref in zip(self.laws, self.kref))
        # (every law a power law, or none: the GPU's films in one kernel a film)
        faces = case.physics.faces
        self.face_e = 0.0  # the faces' radiation: faces eps sigma / (thickness C0), per unit volume
        if faces is not None and faces.emissivity > 0:
            ts = faces.ambient if faces.surroundings is None else faces.surroundings
            self.face_e = faces.faces * faces.emissivity * self.sigma_sb / (case.physics.thickness * self.c0)
            self.face_ts4 = (ts + self.offset) ** 4
        self.absolute = bool(self.films and any(f.radiates for f in self.films)) or any(
            law.kind == "power" for law in self.laws) or self.face_e > 0  # some term needs u above absolute zero
        self.single = None  # (law, k_ref) where one law covers the whole box: kappa without selecting by code
        if len(self.laws) == 1 and self.inert is None and bool(np.all(code == 1)):
            self.single = (self.laws[0], self.kref[0])
        self.lin = None  # the linearisation at the last field linearise() saw
        self.last_kappa = None  # (kappa, kappa') of the last residual's field
        self.bufs = None  # the fused path's linearisation arrays, made once (solver.backends.numba_nl)
        self.threads = max(1, int(getattr(backend, "threads", 1) or 1)) if self.xp is np else 1
        self.pool = None  # threads for kappa's numpy terms on row blocks (made at the first use)
        self.scratch = None
        self.shift = self.extra = None  # an implicit step's s = c / (theta dt) and b (owned points), or None

    # set-up ------------------------------------------------------------------------------------------------
    def _dev(self, host, dtype=None):
        return self.xp.asarray(np.ascontiguousarray(host, dtype=dtype or self.dtype))

    def _point_data(self, lincase, rows: np.ndarray, cols: np.ndarray) -> None:
        """g0, sigma0 (beta, or the held diagonal), d_L, d_G, f_G on the owned points (module docstring)."""
        case, c0 = self.case, self.c0
        shape = (len(rows), len(cols))
        self.points = (rows, cols)
        g0 = self._neumann_sides(shape)
        d_lin, d_g, f_g = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        held = np.zeros(shape, dtype=bool)
        sigma0 = np.full(shape, medium(case).beta)
        self.rims = {}  # label -> (d, f, held link: scaled by kappa) on the owned points, host float64
        if not _plain(lincase):
            from ..core import plate

            cl = plate.cells(lincase, rows, cols)
            held_labels = {plate.label_of(lincase, k) for k, *_ in plate.roles(lincase).held}
            for label, (d, fr) in cl["rims"].items():
                link = label in held_labels
                self.rims[label] = (d / c0, fr / c0, link)
                if link:
                    d_g += d / c0
                    f_g += fr / c0
                else:
                    d_lin += d / c0
                    g0 += fr / c0
            held = cl["held"] > 0
            hd = lin_operator.held_diagonal(lincase)
            sigma0 = np.where(held, hd, sigma0)
            self.held_rhs = hd * cl["value"]
        self.held_host = held
        self.g_rest = g0  # g0 but the sources (set_source adds them)
        self.sigma0 = self._dev(sigma0)
        self.set_source(None)
        self.d_lin = self._dev(d_lin) if d_lin.any() else None
        self.d_g = self._dev(d_g) if d_g.any() else None
        self.f_g = self._dev(f_g) if d_g.any() else None
        self.t_g = self._dev(np.where(d_g > 0, f_g / np.where(d_g > 0, d_g, 1.0), 0.0)) if d_g.any() else None
        self.free = self._dev(~held, bool)

    @on_stream
    def set_source(self, span) -> None:
        """g0 with the sources of the step `span` (solver.core.events.Span; None: a steady state, every term; a term on
        for part of the step weighs that part: solver.core.sources.step_weights)."""
        f = lin_operator.source_density(self.case, *self.points, span)
        g0 = self.g_rest if f is None else f + self.g_rest
        if self.held_host.any():
            g0 = np.where(self.held_host, self.held_rhs, g0)
        self.g0 = self._dev(g0)

    def _neumann_sides(self, shape) -> np.ndarray:
        """The Neumann sides' heat fluxes into the plate over the spacing, at the first owned row or column of each
        physical side (their walls are closed in this operator)."""
        out = np.zeros(shape)
        for side in SIDES:
            out += self._neumann_side(side, shape)
        return out

    def _neumann_side(self, side: str, shape) -> np.ndarray:
        """One side's part of _neumann_sides (zeros where the side is not a physical Neumann side of this block)."""
        case, block, c0 = self.case, self.block, self.c0
        out = np.zeros(shape)
        spec = getattr(case.boundary, side)
        if block.neighbours[BLOCK_SIDE[side]] is not None or spec.kind != "neumann":
            return out
        from ..core.boundary import along_positions

        (dx, dy), _ = geometry(case)
        on_y = side in AXIS_SIDES["y"]
        along = np.arange(*block.cols) if on_y else np.arange(*block.rows)
        n = case.grid.nx if on_y else case.grid.ny
        q = np.asarray(value_at(spec, side, "flux", 0.0, along, along_positions(case, side, along), n)) / c0
        if on_y:
            out[0 if side == "bottom" else -1, :] += q / dy
        else:
            out[:, 0 if side == "left" else -1] += q / dx
        return np.where(self.held_host, 0.0, out) if hasattr(self, "held_host") else out

    # kappa ---------------------------------------------------------------------------------------------------
    def kappa_buffers(self):
        """A (kappa, kappa') pair of box arrays for kappa(into=...), or None (no k(T), or not on the host)."""
        if not self.laws or self.single is None or self.xp is not np:
            return None
        shape = (self.owned[1] - self.owned[0] + 2, self.owned[3] - self.owned[2] + 2)
        if self.scratch is None:
            self.scratch = np.empty(shape, dtype=self.dtype)
        pair = np.empty(shape, dtype=self.dtype), np.empty(shape, dtype=self.dtype)
        for a in (*pair, self.scratch):  # written once now: their pages taken at set-up, not in the first iteration
            self._by_rows(shape[0], lambda lo, hi, a=a: a[lo:hi].fill(0.0))
        return pair

    def kappa(self, u_box, into=None, part=None):
        """(kappa, kappa') on the one-layer box: k(u) / k_ref of each point's law (1 and 0 for constant k). into: a
        pair from kappa_buffers to write them in (one law on the host: the terms by row blocks, on the backend's
        threads; the same bits); part: a (rows, columns) pair of slices of the box, kappa there alone."""
        xp = self.xp
        if not self.laws:
            return None, None
        where = (slice(None), slice(None)) if part is None else part
        u = u_box[where]
        if self.single is None:  # each point's law by its code, held and inactive points 1
            return self._kappa_points(u, self.code[where], inert=None if self.inert is None else self.inert[where])
        law, kref = self.single  # (what the selection gives where every code is 1)
        if into is not None:
            kap, dkap = into
            if self.scratch is None:
                self.scratch = np.empty_like(kap)
            tmp = self.scratch
            self._by_rows(kap.shape[0], lambda a, b: law.factors_into(u[a:b], kref, kap[a:b], dkap[a:b], tmp[a:b]))
            return kap, dkap
        fused = self.backend.nonlinear_kernels(self.owned) if xp is not np and law.kind == "power" else None
        if fused is not None:  # one pass on the GPU, no temporary a term (the same bits)
            return fused.power(u, law, kref)
        k, dk = law.evaluate(u, xp)
        return k / kref, dk / kref

    def _by_rows(self, rows: int, work, block: int = 16) -> None:
        """work(a, b) over rows [0, rows) in blocks of `block` rows (a block's arrays stay in cache across the terms),
        the blocks split into one contiguous range per thread."""
        def run(lo, hi):
            for a in range(lo, hi, block):
                work(a, min(a + block, hi))

        if self.threads == 1 or rows < 2 * block * self.threads:
            return run(0, rows)
        from concurrent.futures import ThreadPoolExecutor

        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.threads)
        cuts = [rows * t // self.threads for t in range(self.threads + 1)]
        for f in [self.pool.submit(run, lo, hi) for lo, hi in zip(cuts, cuts[1:])]:
            f.result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None

    def _faces(self, kap, dkap, u_box, jacobian: bool):
        """Per face of the owned block (east faces: rows r0..r1, the face west of c0 to east of c1 - 1; north: the
        face south of r0 to north of r1 - 1, columns c0..c1): (K, A, B) (module docstring); A, B None without k(T) or
        for Picard."""
        r0, r1, c0, c1 = self.owned
        ax = self.grid.w.ax[r0:r1, c0 - 1:c1]
        ay = self.grid.w.ay[r0 - 1:r1, c0:c1]
        if kap is None:
            return (ax, None, None), (ay, None, None)
        out = []
        for kref, (p, q) in ((ax, ((slice(1, -1), slice(0, -1)), (slice(1, -1), slice(1, None)))),
                             (ay, ((slice(0, -1), slice(1, -1)), (slice(1, None), slice(1, -1))))):
            a, b = kap[p], kap[q]
            s = a + b
            k = kref * ((2.0 * a * b) / s)
            if not jacobian:
                out.append((k, None, None))
                continue
            du = u_box[q] - u_box[p]
            s2 = s * s
            out.append((k, kref * ((2.0 * b * b) / s2) * dkap[p] * du, kref * ((2.0 * a * a) / s2) * dkap[q] * du))
        return out[0], out[1]

    # the residual ---------------------------------------------------------------------------------------------
    @on_stream
    def residual(self, out, u, into=None) -> None:
        """out = R(u) on the owned points (u's ghost layers filled and exchanged); into: kappa's (kappa_buffers)."""
        xp = self.xp
        r0, r1, c0, c1 = self.owned
        u_box = u[self.box]
        kap, dkap = self.kappa(u_box, into)
        self.last_kappa = (kap, dkap)  # (a Newton iteration linearises at the u whose residual it has: no second pow)
        uo = u_box[1:-1, 1:-1]
        fused, in_place = self.backend.nonlinear_kernels(self.owned), None
        if fused is not None:  # the same terms in one sweep (solver.backends.numba_nl.residual)
            fused.residual(out, u, kap, *self._reference(fused), self.g0, self.sigma0, self.d_lin, r0, c0)
            v = in_place = out[r0:r1, c0:c1]
        else:
            (kx, _, _), (ky, _, _) = self._faces(kap, None, u_box, jacobian=False)
            fe = kx * (u_box[1:-1, 1:] - u_box[1:-1, :-1])
            fn = ky * (u_box[1:, 1:-1] - u_box[:-1, 1:-1])
            v = self.g0 + ((fe[:, 1:] - fe[:, :-1]) + (fn[1:, :] - fn[:-1, :])) - self.sigma0 * uo
            if self.d_lin is not None:
                v = v - self.d_lin * uo
        if self.d_g is not None:
            kp, _ = self._held_kappa(uo)
            v = v - kp * (self.d_g * uo - self.f_g)
        if self.face_e:
            v = v - self._face_loss(uo)
        if self.shift is not None:  # an implicit step's -s u + b (solver.nonlinear.newton.time_step)
            v = (v - self.shift * uo) + self.extra
        if v is not in_place:  # (the fused sweep wrote out's block and no term followed: no copy onto itself)
            out[r0:r1, c0:c1] = v
        for f in self.films:
            q, _, _ = self._film(f, u, jacobian=False)
            out[f.rows, f.cols] = out[f.rows, f.cols] - f.w * q

    def _film(self, f, u, jacobian: bool):
        """(Q, dQ/du, radiated) at a film's points. On a GPU one kernel a film (solver.backends.cupy_nl.film: the
        terms of films.wall_flux, a thread a point) where every k(T) law is a power law; with a table, on the host
        (numpy, the same expressions, so the bits of the numpy backend). A film is a line of points: its bracketed
        Newton iterations as CuPy expressions were some 30 launches an iteration with a synchronisation (at 8192^2
        on one H100: 0.245 s of Newton's 0.59 s), and on the host about 6-9 ms a call (13 calls)."""
        if self.host_films is not None and self.film_laws is not None:  # one launch a film on the GPU (cupy_nl.film)
            fused = self.backend.nonlinear_kernels(self.owned)
            if fused is not None:
                return fused.film(f, u, self.film_laws, jacobian, film_mod.MAX_WALL_ITERATIONS)
        uf = u[f.rows, f.cols]
        if self.host_films is None:
            at = None if not self.laws else (lambda t: self._kappa_points(t, f.code))
            return film_mod.wall_flux(f, uf, at, self.xp, jacobian)
        h = self.host_films[id(f)]
        at = None if not self.laws else (lambda t: self._kappa_points(t, h.code, np))
        out = film_mod.wall_flux(h, self.xp.asnumpy(uf), at, np, jacobian)
        return tuple(None if a is None else self.xp.asarray(a) for a in out)

    def _face_loss(self, uo, rows=slice(None)):
        """The faces' radiation per unit volume at the owned points (0 where not plate); rows: uo's rows of them."""
        theta = uo + self.offset
        t2 = theta * theta
        return self.xp.where(self.free[rows], self.face_e * (t2 * t2 - self.face_ts4), 0.0)

    def _face_slope(self, uo):
        theta = uo + self.offset
        return self.xp.where(self.free, (4.0 * self.face_e) * (theta * theta * theta), 0.0)

    def _held_kappa(self, uo):
        """(kappa, kappa') of the links to held objects: at the middle of the point's and the rim's temperatures (the
        films' rule); (1, 0) without k(T)."""
        if not self.laws:
            return 1.0, 0.0
        kap, dkap = self._kappa_points(0.5 * (uo + self.t_g), self.code[1:-1, 1:-1])
        return self.xp.where(self.free, kap, 1.0), self.xp.where(self.free, dkap, 0.0)  # (held points: no link)

    def _kappa_points(self, t, code, xp=None, inert=None):
        """(kappa, kappa') of the laws `code` at temperatures t (arrays of one shape); xp: the arrays' module (the
        operator's); inert: where kappa is 1 and kappa' 0 (held and inactive points)."""
        xp = self.xp if xp is None else xp
        kap, dkap = xp.ones(t.shape, dtype=self.dtype), xp.zeros(t.shape, dtype=self.dtype)
        for m, (law, kref) in enumerate(zip(self.laws, self.kref)):
            k, dk = law.evaluate(t, xp)
            mine = code == m + 1
            kap = xp.where(mine, k / kref, kap)
            dkap = xp.where(mine, dk / kref, dkap)
        if inert is not None:
            kap, dkap = xp.where(inert, 1.0, kap), xp.where(inert, 0.0, dkap)
        return kap, dkap

    # the Jacobian ---------------------------------------------------------------------------------------------
    @on_stream
    def linearise(self, u, jacobian: bool = True, kappa=None) -> None:
        """The Jacobian's data at u (ghosts filled): the faces' (K, A, B), the diagonal D, and kappa (held points 1).
        kappa: (kappa, kappa') on the box at this u where the caller has them (`last_kappa` of u's residual)."""
        xp = self.xp
        u_box = u[self.box]
        kap, dkap = self.kappa(u_box) if kappa is None else kappa
        uo = u_box[1:-1, 1:-1]
        fused = self.backend.nonlinear_kernels(self.owned)
        # A GPU's Newton steps keep no faces (cupy_nl.apply_at): apply() makes each point's from (u, kappa, kappa')
        # where it needs them (the same terms: six fields fewer, a GPU's memory being what limits its grid, and no
        # pass to make them)
        at = (u, kap, dkap) if hasattr(fused, "apply_at") and jacobian and kap is not None else None
        if fused is not None:  # the same terms, a sweep for the faces and one for d and kappa (numba_nl)
            ex, ny, d, scale = self._buffers(jacobian and kap is not None, kap is not None and at is None)
            if at is not None:
                ex = ny = None
            elif kap is not None:
                fused.faces(*ex, *ny, kap, dkap, u, *self._reference(fused), self.owned[0], self.owned[2])
            else:
                ex, ny = self._faces(None, None, u_box, jacobian)
            fused.diagonal(d, scale, self.sigma0, self.d_lin, kap, self.free)
        else:
            ex, ny = self._faces(kap, dkap, u_box, jacobian)
            d = self.sigma0 + (0.0 if self.d_lin is None else self.d_lin)
        if self.d_g is not None:
            kp, dkp = self._held_kappa(uo)
            d = d + kp * self.d_g
            if jacobian and kap is not None:
                d = d + (0.5 * dkp) * (self.d_g * uo - self.f_g)
        if self.face_e:
            d = d + self._face_slope(uo)
        if self.shift is not None:
            d = d + self.shift
        if fused is None:
            d = xp.array(xp.broadcast_to(d, uo.shape), dtype=self.dtype)
        r0, c0 = self.owned[0], self.owned[2]
        for f in self.films:
            _, dq, _ = self._film(f, u, jacobian)
            i, j = f.rows - r0, f.cols - c0
            d[i, j] = d[i, j] + f.w * dq
        if fused is None:
            scale = xp.ones(uo.shape, dtype=self.dtype) if kap is None else xp.where(self.free, kap[1:-1, 1:-1], 1.0)
        self.lin = {"east": ex, "north": ny, "diag": d, "kappa": scale.astype(self.dtype, copy=False), "at": at}

    def _buffers(self, jacobian: bool, faces: bool):
        """The fused path's ((K, A, B) east, (K, A, B) north, d, scale), made at the first linearisation (A, B None
        without jacobian; the faces None without faces)."""
        xp = self.xp
        r0, r1, c0, c1 = self.owned
        if self.bufs is None:
            n, m = r1 - r0, c1 - c0
            new = lambda shape: xp.zeros(shape, dtype=self.dtype)  # noqa: E731
            self.bufs = {"east": [new((n, m + 1)) for _ in range(3)] if faces else None,
                         "north": [new((n + 1, m)) for _ in range(3)] if faces else None,
                         "d": new((n, m)), "scale": new((n, m))}
        b = self.bufs
        pick = lambda k: None if b[k] is None else (b[k][0], *(b[k][1:] if jacobian else (None, None)))  # noqa: E731
        return pick("east"), pick("north"), b["d"], b["scale"]

    @on_stream
    def apply(self, out, v) -> None:
        """out = -J v on the owned points (v's ghost layers filled by the homogeneous rules and exchanged)."""
        r0, r1, c0, c1 = self.owned
        fused = self.backend.nonlinear_kernels(self.owned)
        if self.lin["at"] is not None:
            u, kap, dkap = self.lin["at"]
            fused.apply_at(out, v, u, kap, dkap, *self._reference(fused), self.lin["diag"], r0, c0, True)
            return
        if fused is not None:
            fused.apply(out, v, *self.lin["east"], *self.lin["north"], self.lin["diag"], r0, c0)
            return
        v_box = v[self.box]
        fe = self._linear_flux(self.lin["east"], v_box[1:-1, :-1], v_box[1:-1, 1:])
        fn = self._linear_flux(self.lin["north"], v_box[:-1, 1:-1], v_box[1:, 1:-1])
        vo = v_box[1:-1, 1:-1]
        out[r0:r1, c0:c1] = self.lin["diag"] * vo - ((fe[:, 1:] - fe[:, :-1]) + (fn[1:, :] - fn[:-1, :]))

    def _reference(self, fused) -> tuple:
        """The reference faces (ax, ay) as the fused sweeps take them: two numbers where every face the owned block reads
        holds one value and the sweeps read numbers (cupy_nl: two fields fewer a sweep), else the fields."""
        w = self.grid.w
        return w.uniform if w.uniform is not None and getattr(fused, "uniform_faces", False) else (w.ax, w.ay)

    @staticmethod
    def _linear_flux(face, vp, vq):
        k, a, b = face
        flux = k * (vq - vp)
        return flux if a is None else flux + (a * vp + b * vq)

    @on_stream
    def sigma(self, out=None, device=None):
        """The multigrid's diagonal beside its faces for this linearisation: D / kappa (held points: D), at least 0,
        float64 on the host (owned points); out: a host array to write it in (the numba backend's). device: the GPU's
        kernels (solver.backends.cupy_nl): a device array instead (out: one of its)."""
        if device is not None:
            return device.quotient_device(self.lin["diag"], self.lin["kappa"], out)
        fused = self.backend.nonlinear_kernels(self.owned)
        if fused is not None:
            out = np.empty(self.lin["diag"].shape) if out is None else out
            fused.quotient(out, self.lin["diag"], self.lin["kappa"])
            return out
        d = self.xp.maximum(self.lin["diag"] / self.lin["kappa"], 0.0)
        return np.asarray(d.get() if hasattr(d, "get") else d, dtype=np.float64)

    @on_stream
    def moved(self, mine: np.ndarray, sent: np.ndarray) -> float:
        """max |mine - sent| / |sent| over this rank's points (host arrays: the levels' diagonal now and when built)."""
        fused = self.backend.nonlinear_kernels(self.owned)
        if fused is not None and mine.size:
            return float(fused.moved(mine, sent, 1e-300))
        return float(np.max(np.abs(mine - sent) / np.maximum(np.abs(sent), 1e-300), initial=0.0))

    @on_stream
    def capacity(self, scale: float):
        """scale c at the owned points (c = C / C0: solver.core.medium.capacity_at), 0 where not plate, on the device."""
        from ..core.medium import capacity_at, medium

        c = capacity_at(self.case, *self.points) if medium(self.case).capacity_field else np.ones(self.held_host.shape)
        return self._dev(np.where(self.held_host, 0.0, scale * c))

    @on_stream
    def explicit_weight(self, dt: float):
        """dt / c at the plate's points, 1 / hd at held ones (an explicit step's multiplier of R)."""
        from ..core.medium import capacity_at, medium

        c = capacity_at(self.case, *self.points) if medium(self.case).capacity_field else np.ones(self.held_host.shape)
        hd = self.sigma0.get() if hasattr(self.sigma0, "get") else np.asarray(self.sigma0)
        return self._dev(np.where(self.held_host, 1.0 / np.where(self.held_host, hd, 1.0), dt / c))

    @on_stream
    def stiffest(self) -> float:
        """max over this rank's plate points of (the four faces' K + D) / c at the last linearisation: 1 / the explicit
        step's limit there (0 where there is no point)."""
        from ..core.medium import capacity_at, medium

        xp, lin = self.xp, self.lin
        if self.held_host.size == 0:
            return 0.0
        (ke, _, _), (kn, _, _) = lin["east"], lin["north"]
        total = ((ke[:, 1:] + ke[:, :-1]) + (kn[1:, :] + kn[:-1, :])) + lin["diag"]
        if not hasattr(self, "_inverse_c"):
            c = capacity_at(self.case, *self.points) if medium(self.case).capacity_field else np.ones(self.held_host.shape)
            self._inverse_c = self._dev(np.where(self.held_host, 0.0, 1.0 / c))
        return float(xp.max(total * self._inverse_c))

    @on_stream
    def explicit_update(self, out, u, r, weight) -> None:
        """out = u + weight R on the owned points."""
        r0, r1, c0, c1 = self.owned
        out[r0:r1, c0:c1] = u[r0:r1, c0:c1] + weight * r[r0:r1, c0:c1]

    def owned_part(self, a):
        r0, r1, c0, c1 = self.owned
        return a[r0:r1, c0:c1]

    @on_stream
    def unscale(self, out, y) -> None:
        """out = y / kappa on the owned points (the preconditioner's change of variable)."""
        r0, r1, c0, c1 = self.owned
        fused = self.backend.nonlinear_kernels(self.owned)
        if fused is not None:
            return fused.divide(out, y, self.lin["kappa"], r0, c0)
        out[r0:r1, c0:c1] = y[r0:r1, c0:c1] / self.lin["kappa"]

    # what the run reports ----------------------------------------------------------------------------------------
    @on_stream
    def trial(self, out, u, lam, v) -> float:
        """out = u + lam v on the owned points; returns lowest_kelvin(out) (one pass on the numba backend)."""
        fused = self.backend.nonlinear_kernels(self.owned)
        if fused is not None and self.absolute:
            r0, c0 = self.owned[0], self.owned[2]
            return float(fused.trial(out, u, lam, v, self.free, r0, c0)) + self.offset
        self.backend.combine(out, u, lam, v, self.owned)
        return self.lowest_kelvin(out)

    @on_stream
    def lowest_kelvin(self, u) -> float:
        """The lowest absolute temperature over the owned plate points (inf where no term needs one)."""
        if not self.absolute:
            return float("inf")
        r0, r1, c0, c1 = self.owned
        xp = self.xp
        fused = self.backend.nonlinear_kernels(self.owned)
        if fused is not None:
            return float(fused.lowest(u, self.free, r0, c0)) + self.offset
        lo = xp.min(xp.where(self.free, u[r0:r1, c0:c1], xp.inf)) if r1 > r0 and c1 > c0 else xp.inf
        return float(lo) + self.offset

    @on_stream
    def largest_term(self, u, kappa=None) -> float:
        """The largest magnitude R is computed from here (max |u| times the largest diagonal, plus max |g0| and the
        films' largest loss): the scale of its rounding floor. kappa: as linearise's."""
        xp, (r0, r1, c0, c1) = self.xp, self.owned
        if r1 <= r0 or c1 <= c0:
            return 0.0
        w, be = self.grid.w, self.backend  # (be.max_abs: on the backend's threads or device; inf where not finite)
        if getattr(self, "_fixed_max", None) is None:  # (the reference faces and sigma0 do not change)
            whole = (0, w.ax.shape[0], 0, w.ax.shape[1])  # (the faces' padded fields: strided views on a GPU)
            t = self.dtype.type  # (the sum in the fields' dtype, as the arrays' own maxima added)
            faces = float((t(be.max_abs(w.ax, whole)) + t(be.max_abs(w.ay, whole))) * t(2.0))
            self._fixed_max = (faces, float(xp.max(self.sigma0)))
        faces, sink = self._fixed_max
        kap, _ = self.kappa(u[self.box]) if kappa is None else kappa
        # kappa > 0: its max is its max |.|. (Not xp.max of the view: CuPy reduces a strided array to one value on one
        # block of threads, tens of ms for a field at 8192^2.)
        kmax = 1.0 if kap is None else be.max_abs(kap, (1, kap.shape[0] - 1, 1, kap.shape[1] - 1))
        big = be.max_abs(u, (r0 - 1, r1 + 1, c0 - 1, c1 + 1)) * (faces * kmax + sink)
        big += be.max_abs(self.g0, (0, r1 - r0, 0, c1 - c0))  # (owned points: the box's corners hold no point)
        for f in self.films:
            q, _, _ = self._film(f, u, jacobian=False)
            big = max(big, float(xp.max(xp.abs(f.w * q))) if q.size else 0.0)
        return big

    @on_stream
    def rates(self, u) -> dict:
        """The heat each wall, film and term puts into this rank's owned plate per unit time (normalised units, summed
        over points; the caller multiplies by the cell's area, C0 and depth): per physical side (a Dirichlet wall's
        conduction, a film's loss with its radiated part), the faces' sink, each rim, the sources."""
        xp, (r0, r1, c0, c1) = self.xp, self.owned
        u_box = u[self.box]
        out, radiated = {}, {}
        for side in SIDES:
            spec = getattr(self.case.boundary, side)
            if self.block.neighbours[BLOCK_SIDE[side]] is not None or spec.kind != "dirichlet":
                continue
            k = self._wall_faces(side, u_box)
            if side == "bottom":
                flux = -(k * (u_box[1, 1:-1] - u_box[0, 1:-1]))
            elif side == "top":
                flux = k * (u_box[-1, 1:-1] - u_box[-2, 1:-1])
            elif side == "left":
                flux = -(k * (u_box[1:-1, 1] - u_box[1:-1, 0]))
            else:
                flux = k * (u_box[1:-1, -1] - u_box[1:-1, -2])
            out[side] = float(xp.sum(flux))
        rims = {}
        for f in self.films:
            q, _, rad = self._film(f, u, jacobian=False)
            target = out if f.label in SIDES else rims
            target[f.label] = target.get(f.label, 0.0) - float(xp.sum(f.w * q))
            if rad is not None:
                radiated[f.label] = -float(xp.sum(f.w * rad))
        shape = (r1 - r0, c1 - c0)
        for side in SIDES:
            spec = getattr(self.case.boundary, side)
            if self.block.neighbours[BLOCK_SIDE[side]] is None and spec.kind == "neumann":
                out[side] = float(np.sum(self._neumann_side(side, shape)))
        uo = u_box[1:-1, 1:-1]
        if self.rims:  # (the field on the host only for rims: a whole field's copy, 0.54 GB at 8192^2)
            self._rim_rates(uo, rims)
        if self.face_e:
            radiated["faces"] = -self._face_total(uo)
        return {"sides": out, "rims": rims, "radiated": radiated}

    def _rim_rates(self, uo, rims: dict) -> None:
        """Each rim's rate into `rims` (on the host)."""
        host_u = np.asarray(uo.get() if hasattr(uo, "get") else uo, dtype=np.float64)
        kp = 1.0
        if self.d_g is not None and self.laws:
            k_dev, _ = self._held_kappa(uo)
            kp = np.asarray(k_dev.get() if hasattr(k_dev, "get") else k_dev)
        for label, (d, f, link) in self.rims.items():
            scale = kp if link else 1.0
            rims[label] = rims.get(label, 0.0) + float(np.sum(np.where(self.held_host, 0.0, scale * (f - d * host_u))))

    # (rates: the walls' lines alone, so that the balance makes no whole-field temporaries: on a GPU its memory is
    # what limits the grid)
    def _wall_faces(self, side: str, u_box):
        """K of the faces between a Dirichlet side's wall and the first line of points (the terms of _faces, point
        by point, on the two lines alone)."""
        r0, r1, c0, c1 = self.owned
        line, pair = {"bottom": (self.grid.w.ay[r0 - 1, c0:c1], (slice(0, 2), slice(1, -1))),
                      "top": (self.grid.w.ay[r1 - 1, c0:c1], (slice(-2, None), slice(1, -1))),
                      "left": (self.grid.w.ax[r0:r1, c0 - 1], (slice(1, -1), slice(0, 2))),
                      "right": (self.grid.w.ax[r0:r1, c1 - 1], (slice(1, -1), slice(-2, None)))}[side]
        kap, _ = self.kappa(u_box, part=pair)
        if kap is None:
            return line
        a, b = (kap[0, :], kap[1, :]) if side in ("bottom", "top") else (kap[:, 0], kap[:, 1])
        s = a + b
        return line * ((2.0 * a * b) / s)

    def _face_total(self, uo) -> float:
        """The faces' radiation summed over the owned points: on a GPU by blocks of rows (no whole-field temporaries)."""
        xp = self.xp
        if xp is np:
            return float(xp.sum(self._face_loss(uo)))
        step = max(1, (1 << 22) // max(uo.shape[1], 1))
        return sum(float(xp.sum(self._face_loss(uo[a:a + step], slice(a, a + step))))
                   for a in range(0, uo.shape[0], step))


def _plain(case) -> bool:
    from ..core.plate import is_plain

    return getattr(case.physics, "material", None) is None or is_plain(case)
