"""The multigrid cycle on this rank's part of every level: the same code for every backend and rank count.

A cycle at level l (V: once, W: twice, F: an F-cycle then a V-cycle on the level below):

    smooth (the level's pre-sweep weights)     each sweep: halo exchange, the Jacobi kernel, boundary fill
    r = g - A u                                exchange, residual kernel
    g' = (d / d') R r,  u' = 0                 exchange r two layers deep, restriction kernel
                                               (a shared level: each rank's part gathered onto every rank)
    cycle at level l + 1                       the coarsest level: u' = u' + M (g' - A u'), M its inverse
    u = u + P u'                               exchange u' one layer with corners, prolongation kernel
    smooth (the same weights, reverse order)

Fields: every level has u (the iterate: on the finest level the solution, below the correction), t (the
other buffer of a sweep), g (right-hand side; None on the finest level of Laplace) and r (residual), each
with DEPTH ghost layers on every side (grids.py). The finest level's u and t are the run's fields: the
loop, outputs and checkpoints see their one-layer views (`views`).

Halo exchanges come from the existing registry for every level (solver.parallel.exchange, the case's
halo mode and transport): a sweep runs the mode's schedule (overlap: the interior in bands while the
messages travel); the residual's exchange is two layers deep (the restriction reads them) and the
correction's one layer with corners (the prolongation reads diagonal neighbours), both the deep-halo
phases of solver.parallel.deep. Exchanges refill the neighbours' ghosts, the boundary fill the physical
sides' afterwards (so corners come out as on one process).

Time: every part is charged to the run's timer as the time loop's steps are (compute, comm, wait,
other), and to the level it worked on (timer.level: the record's per-level table).
"""

from __future__ import annotations

import functools
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import numpy as np

from ..core import operator, stops
from ..core.boundary import Fill, homogeneous_fill, make_fill, periodic_axes
from ..core.loop import halo_step
from ..core.physics import Weights, time_step as case_dt
from ..parallel.deep import DeepLayout
from ..parallel.exchange import exchanger, transport_for
from . import coefficients, opdep
from .graphs import cycle_graphs
from .grids import DEPTH, Place, down_tables, places, up_tables
from .krylov import ConjugateGradient
from .levels import Level, Settings, coarsest_inverse, hierarchy, retimed
from .sides import dense_gains, level_fill

TAIL_POINTS = 1100  # the coarse tail (Multigrid._tail): levels of at most this many points (STENCIL_MG_TAIL sets it;
# on an H200 from 31 x 31 down 20 us a cycle faster than a launch per verb, from 63 x 63 down 15 us: one block's
# steps wait on memory round trips as launches do, so the larger levels gain less: docs/bench/2026-12-03-issue35/call11)


@dataclass
class Grid:
    """One level on this rank (plain fields; the cycle's verbs below act on it)."""

    place: Place
    layout: DeepLayout
    u: object
    t: object
    g: object
    r: object
    fill: Fill  # the boundary rules of u (the case's on the finest level, homogeneous below)
    zero_fill: Fill  # homogeneous rules (the residual's periodic wrap)
    w: Weights  # the operator, unit diagonal (wc unused)
    pre: list = field(default_factory=list)  # (Weights, omega) per sweep before the coarse correction
    post: list = field(default_factory=list)  # and after it
    ex: object = None  # one layer, no corners, on the one-layer views (sweeps, residual)
    ex_r: object = None  # two layers with corners (the residual, before restriction)
    ex_e: object = None  # one layer with corners (the correction, before prolongation)
    down: tuple | None = None  # restriction tables into the next level (device)
    up: tuple | None = None  # prolongation tables from the next level (device)
    part: object = None  # shared next level: this rank's block of it, restricted before the gather
    fresh: bool = False  # u is to start from zero after the restriction: the level's first tiled pass takes it as
    # zeros, or the tail's program clears it first
    tail: bool = False  # the level is one of the coarse tail's, run in one launch (Multigrid._tail)

    @property
    def owned(self) -> tuple[int, int, int, int]:
        return self.layout.owned

    def view(self, a):
        return a[self.layout.view]


def _uniform(ax: np.ndarray, ay: np.ndarray, owned, dtype):
    """(ax, ay) as numbers of the dtype where each holds one value on every face the owned block's sweeps read, else
    None (solver.core.physics.Weights.uniform)."""
    r0, r1, c0, c1 = owned
    fx, fy = ax[r0:r1, c0 - 1:c1].astype(dtype), ay[r0 - 1:r1, c0:c1].astype(dtype)
    if not fx.size or not fy.size or (fx != fx.flat[0]).any() or (fy != fy.flat[0]).any():
        return None
    return fx.flat[0], fy.flat[0]


class Multigrid:
    """The solver: levels, fields, exchangers and tables, built once; cycle() and residual_norm()."""

    def __init__(self, layout, comm, backend, settings: Settings, cycle: str, t: float = 0.0, sigma=None):
        """t: the time of the first step (side values that vary in time fill the finest level's ghosts). sigma: the
        finest level's diagonal beside the faces as a global float64 array, which puts every level in the equation's
        units with face fields even where alpha is a number (Newton's linear steps, solver.nonlinear: set_sigma
        changes it); None: the case's own."""
        case = layout.case
        self.case, self.comm, self.backend, self.kind = case, comm, backend, cycle
        self.dtype = np.dtype(case.numerics.dtype)
        self.settings = settings
        self.theta, self.dt = settings_theta(case), None  # an implicit step's implicit share, its length (retime)
        self.levels = hierarchy(case, settings)
        self.places = places(self.levels, layout.blocks, layout.rank, comm.size)
        fielded = case.alpha_field or sigma is not None  # (a sigma given: Newton's linear steps, set_sigma)
        self.faces, self.held = (coefficients.faces_and_held(case, self.levels) if fielded
                                 else (None, None))  # per level, global; held: where the plate has shapes
        self.rims = coefficients.rim_levels(case, self.levels, self.held)  # per level, global: the transfers' rims
        # transfers that follow the coefficients where the faces vary or rims cut them; where only a diagonal makes
        # the levels fields (Newton's sigma on a plate of one constant reference k) the faces are uniform, opdep's
        # weights would be the linear ones (opdep.py), and the plain transfers read no weight fields
        self.opdep = self.faces is not None and (self.held is not None or self.rims is not None
                                                 or not all(_constant(k) for k in self.faces[0])
                                                 or os.environ.get("STENCIL_MG_OPDEP") == "1")  # (A/B: forced)
        self.own_sigmas = sigma is None  # (the case's: retime rebuilds them for a step of another length)
        self.sigma_dt = case_dt(case) if case.implicit else None  # the step length the sigmas were made for
        self.sigmas = (coefficients.sigmas(case, self.levels, self.held, theta=self.theta) if sigma is None else
                       coefficients.coarsened(case, self.levels, sigma, self.held))  # per level, global: the
        # diagonal's part beside the faces
        # where it varies (an implicit step's heat capacity, the plate's shapes, a Newton step's sinks), or None
        p = case.parallel
        self.tx = transport_for(p.halo, comm.mpi, backend, p.transport)
        self.mode = p.halo
        self.t = t
        fine_g = case.implicit or operator.needs_source(case)  # the finest level has a right-hand side
        self.grids = [self._grid(i, pl, fine_g) for i, pl in enumerate(self.places)]
        self._tables()
        self.minv = backend.table(comm.bcast(self._coarsest() if comm.rank == 0 else None), weights=True)
        self.last = None  # implicit heat: the relative residual the last step's solve reached
        self.cg = ConjugateGradient(self) if case.krylov == "cg" else None
        self.sources: dict = {}  # the finest level's source fields by the terms they sum (solver.core.sources)
        self.tiles = backend.mg_tiles and os.environ.get("STENCIL_MG_TILES", "1") != "0"  # (_tiled)
        self.tail = self._tail_start()  # the first level of the coarse tail (_tail), or None
        self._tails: dict = {}  # (cycle kind, from zero, the tail's fields) -> (its program, the fields it leaves)
        self._recording = False
        self.graphs = cycle_graphs(self)  # whole cycles as graph replays (one GPU: graphs.py), or None

    # construction ------------------------------------------------------------------------------------
    def _grid(self, i: int, place: Place, fine_g: bool) -> Grid:
        be, lev, block = self.backend, place.level, place.block
        lay = DeepLayout(block, DEPTH, physical=DEPTH)
        fields = [be.zeros(lay.shape, aligned=lay.owned[2]) for _ in range(4 if (i or fine_g) else 3)]
        fill = make_fill(self.case, block, DEPTH, t=self.t) if i == 0 else level_fill(self.case, lev, block, DEPTH)
        zero = homogeneous_fill(fill)
        w, pre, post = self._operator(place, lay)
        grid = Grid(place, lay, fields[0], fields[1], fields[3] if len(fields) == 4 else None, fields[2],
                    fill if i == 0 else zero, zero, w, pre, post)
        if not place.shared:
            mpi = self.comm.mpi
            grid.ex = exchanger(self.mode, block, mpi, be, None, tx=self.tx)
            grid.ex_r = exchanger(self.mode, block, mpi, be, None, lay.phases(DEPTH), tx=self.tx)
            grid.ex_e = exchanger(self.mode, block, mpi, be, None, lay.phases(1), tx=self.tx)
        return grid

    def _operator(self, place: Place, lay: DeepLayout) -> tuple:
        """(w, pre, post) of a level: its operator and its smoothing sweeps' (Weights, omega), from the level's
        numbers and (alpha a field) its face coefficients."""
        lev, t = place.level, self.dtype.type
        data = self._faces(lev, place.block, lay)
        w = Weights(t(0.0), t(lev.wx), t(lev.wy), **data)
        pre, post = [[(Weights(t(1.0 - om), t(om * lev.wx), t(om * lev.wy), **data), t(om)) for om in oms]
                     for oms in (lev.pre, lev.post)]
        return w, pre, post

    def retime(self, dt: float) -> None:
        """The one place where the step's length enters the solver. An implicit step's operator is sigma - kappa L
        with kappa = theta dt alpha (solver.core.physics.implicit_operator): a step of another length changes every
        level's weights and smoothing sweeps, the coarse right-hand sides' scale (the diagonals' ratio), the face
        coefficients' scaling (alpha a field), the coarsest level's inverse and the right-hand sides' weights; the
        coarse tail's recorded programs and the GPU's cycle graphs hold the old numbers and are made again. The
        transfers and the placement of the levels do not depend on it. Collective (the coarsest inverse is rank 0's)."""
        from ..core.physics import implicit_operator

        sigma, kappa = implicit_operator(self.case, dt, self.theta)
        self.dt = dt
        stale = self.sigmas is not None and self.own_sigmas and self.sigma_dt != dt  # c + theta dt (beta + d)
        if (sigma, kappa) == (self.settings.sigma, self.settings.kappa) and not stale:
            return
        self.settings = replace(self.settings, sigma=sigma, kappa=kappa)
        self.levels = retimed(self.levels, self.settings)
        if stale:  # a capacity or shapes
            self.sigmas = coefficients.sigmas(self.case, self.levels, self.held, dt, self.theta)
            self.sigma_dt = dt
        self.places = [replace(pl, level=self.levels[pl.level.index]) for pl in self.places]
        for g, pl in zip(self.grids, self.places):
            g.place = pl
            g.w, g.pre, g.post = self._operator(pl, g.layout)
        if self.faces is None:  # the coarse right-hand side's scale d_fine / d_coarse (_tables)
            for fine, coarse in zip(self.grids, self.grids[1:]):
                fine.down = (*fine.down[:-1], self.dtype.type(coarse.place.level.scale))
        self.minv = self.backend.table(self.comm.bcast(self._coarsest() if self.comm.rank == 0 else None), weights=True)
        self.__dict__.pop("_diagonal", None)
        self.sources, self._tails = {}, {}
        if self.graphs is not None:
            self.graphs = cycle_graphs(self)

    def _faces(self, lev: Level, block, lay: DeepLayout) -> dict:
        """The level's face coefficients on this block's fields (alpha a field), over the squared spacings and
        times kappa: {ax, ay, sigma} for Weights, or {} (alpha a number: the scalar weights are the operator)."""
        if self.faces is None:
            return {}
        fx, fy = self._scaled_faces(lev)
        origin = (lay.owned[0], lay.owned[2])
        ax = coefficients.local(fx, lev.x, lev.y, block.cols[0], block.rows[0], lay.shape, origin)
        ay = coefficients.local(fy.T, lev.y, lev.x, block.rows[0], block.cols[0], lay.shape, origin, transpose=True)
        be = self.backend
        out = {"ax": be.coefficient(ax, lay.owned[2]), "ay": be.coefficient(ay, lay.owned[2]),
               "sigma": self.dtype.type(self.settings.sigma), "uniform": _uniform(ax, ay, lay.owned, self.dtype)}
        if self.sigmas is not None:  # sigma a field (solver.core.operator.sigma_field)
            c = coefficients.local_points(self.sigmas[lev.index], lev, block, lay.shape, origin)
            out["sg"] = be.coefficient(c, lay.owned[2])
        return out

    def _scaled_faces(self, lev: Level) -> tuple[np.ndarray, np.ndarray]:
        """(kappa kx / hx^2, kappa ky / hy^2) of a level, global, float64."""
        kx, ky = self.faces[lev.index]
        kappa = self.settings.kappa
        return kappa * kx / lev.x.h ** 2, kappa * ky / lev.y.h ** 2

    def _op_tables(self, fine: Grid, coarse: Grid, target, d, u) -> None:
        be, lay = self.backend, fine.layout
        i = fine.place.level.index
        t = opdep.tables(fine.place.level, coarse.place.level, self.faces[i], fine.place.block, target, lay.shape,
                         None if self.held is None else self.held[i], None if self.rims is None else self.rims[i])
        w = tuple(be.coefficient(a, lay.owned[2]) for a in t.w)
        fine.down = (be.table(d.ys), be.table(d.yc), be.table(d.xs), be.table(d.xc), be.table(t.ty), be.table(t.tx),
                     t.origin, self.dtype.type(t.area), *w)
        fine.up = (be.table(u.ys), be.table(u.xs), *w)

    def _coarsest(self) -> np.ndarray:
        """The coarsest level's inverse: unit-diagonal (alpha a number) or in the equation's units (a field)."""
        lev = self.places[-1].level
        faces = self._scaled_faces(lev) if self.faces is not None else None
        sigma = self.sigmas[lev.index] if self.sigmas is not None else self.settings.sigma
        return coarsest_inverse(lev, dense_gains(self.case, lev), faces, sigma)

    def _tables(self) -> None:
        be = self.backend
        for fine, coarse in zip(self.grids, self.grids[1:]):
            target = coarse.place.gather[self.comm.rank] if coarse.place.gather else coarse.place.block
            d = down_tables(fine.place.block, target, coarse.place.level)
            scale = 1.0 if self.faces is not None else d.scale  # a field's levels: the equation's units throughout
            fine.down = (be.table(d.ys), be.table(d.yc), be.table(d.yw, True), be.table(d.xs), be.table(d.xc),
                         be.table(d.xw, True), self.dtype.type(scale))
            u = up_tables(fine.place.block, coarse.place.block, coarse.place.level)
            fine.up = (be.table(u.ys), be.table(u.yw, True), be.table(u.xs), be.table(u.xw, True))
            if self.opdep:  # transfers that follow the coefficients (opdep.py)
                self._op_tables(fine, coarse, target, d, u)
            if coarse.place.gather:
                fine.part = DeepLayout(target, DEPTH, physical=DEPTH)
                fine.part_field = be.zeros(fine.part.shape, aligned=fine.part.owned[2])

    def adopt(self, u, u_new):
        """Take the run's one-layer fields into the finest level's deep ones; returns their views."""
        g0, be = self.grids[0], self.backend
        be.synchronize()
        with getattr(be, "main", None) or nullcontext():  # GPU: the assignments on the backend's stream
            for view, src in ((g0.view(g0.u), u), (g0.view(g0.t), u_new)):
                view[...] = src
        for a in (g0.u, g0.t):
            be.fill(a, g0.fill)
        be.synchronize()
        if self.case.physics.equation == "laplace" and g0.g is not None:  # Poisson: the source is the right-hand side
            lay = g0.layout
            w = operator.host_weights(self.case, g0.place.block, lay.shape, (lay.owned[0], lay.owned[2]))
            r0, r1, c0, c1 = g0.owned
            self.backend.put(g0.g, g0.owned, w.s[r0:r1, c0:c1])
        if self.graphs is not None:  # the first cycle captured now, with the set-up (graphs.py)
            self.graphs.ahead()
        return self.views()

    def state(self) -> dict:
        """The solver's own fields beyond u that decide the next cycle, this rank's owned blocks by name (what a
        checkpoint keeps): laplace with conjugate gradients, its residual and direction; otherwise none (a
        cycle starts from u alone, and an implicit step's solve starts afresh)."""
        return self.cg.state() if self.cg is not None and not self.case.implicit else {}

    def restore(self, fields: dict) -> None:
        """A restart: the fields `state` gave, read back from the checkpoint (none: nothing to restore)."""
        if fields and self.cg is not None and not self.case.implicit:
            self.cg.restore(fields)

    def views(self):
        """The finest level's (current, other) one-layer views."""
        g0 = self.grids[0]
        return g0.view(g0.u), g0.view(g0.t)

    @property
    def rhs(self):
        """The finest level's right-hand side field (implicit heat steps write it), or None."""
        return self.grids[0].g

    def set_sigma(self, first: np.ndarray, device=None) -> None:
        """A new diagonal beside the faces on the finest level (a global float64 array; the Multigrid was built with
        one): every level's sg and the coarsest inverse, written into the arrays the cycle already reads (captured
        programs and graphs stay valid). device: the GPU's kernels (solver.backends.cupy_nl) where `first` is a
        device array (one rank): coarsened and gathered there, only the coarsest level read back."""
        held = self.held
        if device is not None and held is not None:
            if getattr(self, "_held_device", None) is None:
                self._held_device = [device.cp.asarray(h) for h in held]
            held = self._held_device
        self.sigmas = coefficients.coarsened(self.case, self.levels, first, held, device)
        be = self.backend
        for g in self.grids:
            lev, lay = g.place.level, g.layout
            c = coefficients.local_points(self.sigmas[lev.index], lev, g.place.block, lay.shape,
                                          (lay.owned[0], lay.owned[2]), device)
            be.put(g.w.sg, (0, c.shape[0], 0, c.shape[1]), c.astype(self.dtype, copy=False))
        if device is not None:
            last = self.sigmas[-1]
            self.sigmas[-1] = last.get() if hasattr(last, "get") else last  # (_coarsest reads it on the host)
        inverse = self.comm.bcast(self._coarsest() if self.comm.rank == 0 else None)
        be.put(self.minv, (0, inverse.shape[0], 0, inverse.shape[1]), inverse.astype(self.dtype))
        self.__dict__.pop("_diagonal", None)

    # the cycle -----------------------------------------------------------------------------------------
    def cycle(self, timer) -> None:
        """One cycle; with krylov cg, one iteration of conjugate gradients preconditioned by a cycle (krylov.py)."""
        if self.cg is not None:
            self.cg.iterate(timer)
        elif self.graphs is not None:  # with the stop test's residual, read by residual_norm()
            self.graphs.cycle(timer, norm=True)
        else:
            self._cycle(0, self.kind, timer)
        timer.level = None

    # what conjugate gradients asks of the finest level (krylov.py) -------------------------------------
    def apply(self, out, p, timer) -> None:
        """out = -A p on the finest level, p taking the homogeneous boundary rules."""
        grid, be = self._at(0, timer), self.backend
        if grid.ex is not None:
            _exchange(grid.ex, grid.view(p))
        if grid.zero_fill.rules:
            be.timed(timer, lambda: be.fill(p, grid.zero_fill))
        be.timed(timer, lambda: be.residual(out, p, None, grid.w, grid.owned))

    def true_residual(self, out, timer) -> None:
        """out = g - A u on the finest level (u the iterate, with the case's boundary rules)."""
        grid, be = self._at(0, timer), self.backend
        if grid.ex is not None:
            _exchange(grid.ex, grid.view(grid.u))
        be.timed(timer, lambda: be.residual(out, grid.u, grid.g, grid.w, grid.owned))

    def refill(self, timer) -> None:
        """The finest level's ghosts from its u (after conjugate gradients moved it)."""
        grid, be = self._at(0, timer), self.backend
        if grid.fill.rules and not grid.fill.constant:
            be.timed(timer, lambda: be.fill(grid.u, grid.fill))

    def precondition(self, z, spare, r, timer):
        """z = one cycle from zero with right-hand side r and the homogeneous boundary rules; returns (z, spare)
        as the cycle leaves them (its sweeps swap the finest level's two fields)."""
        g0, be = self.grids[0], self.backend
        saved = (g0.u, g0.t, g0.g, g0.fill)
        be.timed(timer, lambda: (be.clear(z), be.clear(spare)))
        g0.u, g0.t, g0.g, g0.fill = z, spare, r, g0.zero_fill
        try:
            if self.graphs is not None:
                self.graphs.cycle(timer, norm=False)
            else:
                self._cycle(0, self.kind, timer)
        finally:
            out = (g0.u, g0.t)
            g0.u, g0.t, g0.g, g0.fill = saved
        return out

    def _cycle(self, i: int, kind: str, timer, norm=None) -> bool:
        """A cycle at level i. norm (level 0 only): the stop test, folded into the last sweep's pass where the level's
        sweeps run tiled (`_tiled`): ("max", keep r); returns whether it was (else the caller computes it)."""
        grid = self.grids[i]
        if i == self.tail and not self._recording:
            self._tail(i, kind, timer)
            return False
        if i + 1 == len(self.grids):
            self._solve(grid, timer)
            return False
        if not self._smooth(i, grid.pre, timer, "residual"):
            self._residual(i, timer)
        self._restrict(i, timer)
        if kind == "W":
            self._cycle(i + 1, "W", timer)
            self._cycle(i + 1, "W", timer)
        elif kind == "F":
            self._cycle(i + 1, "F", timer)
            self._cycle(i + 1, "V", timer)
        else:
            self._cycle(i + 1, "V", timer)
        return self._smooth(i, grid.post, timer, norm, self._prolong(i, timer))

    def _at(self, i: int, timer):
        timer.level = i
        grid = self.grids[i]
        for ex in (grid.ex, grid.ex_r, grid.ex_e):
            if ex is not None:
                ex.timer = timer
        return grid

    def _smooth(self, i: int, sweeps, timer, tail=None, carried=None) -> bool:
        """The sweeps of level i; tail: what their last pass also computes where they run tiled: "residual" (into r,
        before the restriction) or ("max", keep r) (the stop test). carried: the prolongation _prolong left to the
        first tiled pass. Returns whether the tail was computed."""
        grid = self._at(i, timer)
        if sweeps and self._tiled(grid):
            return self._smooth_tiled(grid, sweeps, timer, tail, carried)
        be, shift = self.backend, _shift
        for w, om in sweeps:
            u, t, g = grid.u, grid.t, grid.g

            def compute(regions, u=u, t=t, g=g, w=w, om=om):
                be.timed(timer, lambda: [be.smooth(t, u, g, w, om, shift(r)) for r in regions])

            if grid.ex is not None:
                halo_step(grid.ex, grid.view(u), compute)
            else:
                compute([_view_region(grid)])
            if grid.fill.rules and not grid.fill.constant:
                be.timed(timer, lambda t=t: be.fill(t, grid.fill))
            t0 = time.perf_counter()
            grid.u, grid.t = grid.t, grid.u
            timer.add("other", t0)
        return False

    def _tiled(self, grid: Grid) -> bool:
        """Whether the level's sweeps run two at a time in one pass (the backend's `sweeps`: a GPU's tiles): a `_plain`
        level above the coarse tail (whose one block runs the verbs one by one)."""
        return self.tiles and not grid.tail and _plain(grid)

    def _smooth_tiled(self, grid: Grid, sweeps, timer, tail, carried) -> bool:
        be = self.backend
        for k in range(0, len(sweeps), 2):
            pair, last = sweeps[k:k + 2], k + 2 >= len(sweeps)
            extra = None
            if last and tail == "residual":
                extra = ("residual", grid.r, grid.w)
            elif last and tail is not None:
                extra = ("max", grid.r if tail[1] else None, grid.w)
            u, t, g, up, zero = grid.u, grid.t, grid.g, (carried if k == 0 else None), grid.fresh
            grid.fresh = False
            be.timed(timer, lambda: be.sweeps(t, u, g, pair, grid.owned, extra, up, zero))  # noqa: B023 - at once
            t0 = time.perf_counter()
            grid.u, grid.t = grid.t, grid.u
            timer.add("other", t0)
        return tail is not None

    def _residual(self, i: int, timer) -> None:
        grid = self._at(i, timer)
        if grid.ex is not None:
            _exchange(grid.ex, grid.view(grid.u))
        self.backend.timed(timer, lambda: self.backend.residual(grid.r, grid.u, grid.g, grid.w, grid.owned))

    def _restrict(self, i: int, timer) -> None:
        grid, coarse = self._at(i, timer), self.grids[i + 1]
        be = self.backend
        if grid.ex_r is not None:
            _exchange(grid.ex_r, grid.r)
        if grid.zero_fill.rules and not grid.zero_fill.constant:
            be.timed(timer, lambda: be.fill(grid.r, grid.zero_fill))
        restrict = be.restrict_op if self.opdep else be.restrict
        if grid.part is not None:  # restrict this rank's part, then gather the level onto every rank
            be.timed(timer, lambda: restrict(grid.part_field, grid.r, grid.part.owned, grid.down))
            self._gather(grid, coarse, timer)
        else:
            be.timed(timer, lambda: restrict(coarse.g, grid.r, coarse.owned, grid.down))
        timer.level = i + 1
        tiled = i + 2 < len(self.grids) and coarse.pre and self._tiled(coarse)  # (its first pass reads no u)
        if tiled or (i + 1 == self.tail and not self._recording):  # (or the tail's program clears it first): no clear
            coarse.fresh = True
        else:
            be.timed(timer, lambda: be.clear(coarse.u))

    def _gather(self, grid: Grid, coarse: Grid, timer) -> None:
        """Every rank's restricted part onto every rank (MPI_Allgatherv), into the shared level's g."""
        be, comm = self.backend, self.comm
        t = time.perf_counter()
        mine = be.get(grid.part_field, grid.part.owned) if grid.part.block.ny and grid.part.block.nx else None
        t = timer.add("comm", t)
        parts = comm.allgather(mine)
        t = timer.add("wait", t)
        full = np.zeros(coarse.place.level.shape, dtype=self.dtype)
        for b, data in zip(coarse.place.gather, parts):
            if data is not None:
                full[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = data
        be.put(coarse.g, coarse.owned, full)
        timer.add("comm", t)

    def _prolong(self, i: int, timer):
        """u = u + P u' on level i, or (u', tables) where the level's first tiled post-sweep takes it in its pass."""
        coarse = self._at(i + 1, timer)
        be = self.backend
        if coarse.ex_e is not None:
            _exchange(coarse.ex_e, coarse.u)
        if coarse.fill.rules and not coarse.fill.constant:  # (constant rules: the ghosts hold their values already)
            be.timed(timer, lambda: be.fill(coarse.u, coarse.fill))
        grid = self._at(i, timer)
        if grid.post and self._tiled(grid):  # the first post-sweep's pass corrects u as it loads (plain weights only)
            return coarse.u, grid.up
        prolong = be.prolong_op if self.opdep else be.prolong
        be.timed(timer, lambda: prolong(grid.u, coarse.u, grid.owned, grid.up))
        if grid.fill.rules and not grid.fill.constant:
            be.timed(timer, lambda: be.fill(grid.u, grid.fill))
        return None

    def _solve(self, grid: Grid, timer) -> None:
        """The coarsest level (shared, or the only one on one process): u = u + M (g - A u)."""
        i = len(self.grids) - 1
        self._residual(i, timer)
        be = self.backend
        be.timed(timer, lambda: be.solve(grid.u, grid.r, self.minv, grid.owned))
        if grid.fill.rules and not grid.fill.constant:
            be.timed(timer, lambda: be.fill(grid.u, grid.fill))

    # the coarse tail in one launch ---------------------------------------------------------------------------
    def _tail_start(self) -> int | None:
        """The first level of the coarse tail: the levels from there down have at most STENCIL_MG_TAIL points each
        (TAIL_POINTS unless set; 0: no tail), nothing to exchange or gather, constant ghost rules and plain weights,
        and the backend runs recorded verbs in one block (mg_tails). None where there is no such level below the
        finest."""
        value = os.environ.get("STENCIL_MG_TAIL", "")
        limit = int(value) if value.isdigit() else TAIL_POINTS  # (a tuning knob: anything else keeps the default)
        if not self.backend.mg_tails or limit <= 0:
            return None
        start = None
        for i in range(len(self.grids) - 1, 0, -1):
            g = self.grids[i]
            if not _plain(g) or g.part is not None or g.place.block.ny * g.place.block.nx > limit:
                break
            start = i
        for g in self.grids[start or len(self.grids):]:
            g.tail = True
        return start

    def _tail(self, i: int, kind: str, timer) -> None:
        """The cycle from level i down (i: the tail's first level) as one launch: the verbs the cycle would launch
        there (a clear of u first, right after the restriction: `fresh`; a W-cycle's second visit goes on from the
        first's u), recorded once for these fields, this kind and clear, run by the backend's mg_tail in one block.
        Its time goes to level i."""
        grid = self.grids[i]
        clear, grid.fresh = grid.fresh, False
        program = self._tail_program(kind, clear)
        self._at(i, timer)
        self.backend.timed(timer, lambda: self.backend.mg_tail(program))

    def _tail_program(self, kind: str, clear: bool):
        """The recorded program for the tail's current fields, `kind` and `clear`; leaves the fields where it leaves
        them."""
        key = (kind, clear, _ids(self._tail_fields()))
        if key not in self._tails:
            from ..core.timing import Timer

            grid, be = self.grids[self.tail], self.backend
            self._recording = True
            try:
                program = be.mg_record(lambda: (clear and be.clear(grid.u), self._cycle(self.tail, kind, Timer())))
            finally:
                self._recording = False
            self._tails[key] = (program, self._tail_fields())
        program, after = self._tails[key]
        self._set_tail_fields(after)
        return program

    def tail_ready(self) -> None:
        """Record every program the tail can need before anything is captured (graphs.py: a capture cannot upload
        one): for each cycle kind the tail is entered with, from zero and not, from every place its fields can be in
        (a tail's sweeps swap each level's two fields the same way every time, so a few), and leave the fields as
        they were."""
        if self.tail is None:
            return
        kinds = ("F", "V") if self.kind == "F" else (self.kind,)
        start = self._tail_fields()
        todo, seen = [start], set()
        while todo:
            fields = todo.pop()
            if _ids(fields) in seen:
                continue
            seen.add(_ids(fields))
            for kind in kinds:
                for clear in (True, False):
                    self._set_tail_fields(fields)
                    self._tail_program(kind, clear)
                    todo.append(self._tail_fields())
        self._set_tail_fields(start)

    def _tail_fields(self) -> list:
        return [(g.u, g.t) for g in self.grids[self.tail:]]

    def _set_tail_fields(self, fields) -> None:
        for g, (u, t) in zip(self.grids[self.tail:], fields):
            g.u, g.t = u, t

    # implicit heat steps -----------------------------------------------------------------------------------
    def time_step(self, span, tol: float, most: int, timer) -> tuple[int, float, float, str]:
        """One implicit step `span` (solver.core.events.Span) from u^n (the finest level's u): the operator for the
        step's length (retime); g = the explicit part of u^n and the source (one update with the weights of
        rhs_weights: over the operator's diagonal where alpha is a number, in the equation's units where it is a
        field); the ghosts then take the sides' values at t_{n+1} where they vary in time; then `solve`.
        Returns solve's (cycles, max|g - A u^n|, the relative residual reached, why the solve ended); collective."""
        self.retime(span.dt)
        self._rhs(self.rhs_weights(span), timer)
        if self.timed_sides:
            self._refill(span.t1, timer)
        return self.solve(tol, most, timer)

    def solve(self, tol: float, most: int, timer) -> tuple[int, float, float, str]:
        """Cycles from the finest level's u towards g until the relative residual max|g - A u| / max|g - A u^n|
        (the initial residual as the unit: what the step has to change) is below tol, a stop rule of
        solver.core.stops holds (the rounding floor, divergence, a stall), or `most` cycles are done. Returns
        (cycles, max|g - A u^n|, the relative residual reached, why the solve ended: "tolerance", "max_cycles" or
        a stop rule); collective.

        Units tried and dropped (docs/multigrid.md): max|g|, and the normwise backward error
        max|r| / (max|g| + |A| max|u|). With dt far past the explicit limit, g = u^n / d with d ~ 10^4, and
        u^n itself already has a backward error below 1e-5: a test in those units ends the step with no
        cycle at all, and the field does not move."""
        if self.cg is not None:
            self.cg.reset()
        r0 = self._reduced(self.residual_norm(timer), timer)
        rel, history, why = (0.0 if r0 == 0 else 1.0), [], None
        floor = lambda: stops.rounding_floor(self.dtype, self._reduced(self.scale(), timer)) / r0  # noqa: E731
        while rel >= tol and why is None:
            if len(history) == most:
                why = "max_cycles"
                break
            self.cycle(timer)
            rel = self._reduced(self.residual_norm(timer), timer) / r0
            history.append(rel)
            if rel != rel or rel == float("inf"):
                why = "overflow"  # the loop's check reports it (NumericalError)
                break
            why = stops.ending(history, floor)
        self.last = rel
        return len(history), r0, rel, why or "tolerance"

    def _rhs(self, w: Weights, timer, u=None) -> None:
        """g = one update of u (default the finest level's u) with the weights w."""
        grid = self._at(0, timer)
        be, g = self.backend, grid.g
        u = grid.u if u is None else u
        compute = lambda regions: be.timed(timer, lambda: [be.step(g, u, w, _shift(r)) for r in regions])  # noqa: E731
        if w.wx == 0 and w.wy == 0 and w.ax is None:  # backward Euler: u^n / d (+ the source), no neighbours read
            compute([_view_region(grid)])
        else:
            halo_step(grid.ex, grid.view(u), compute)

    def rhs_weights(self, span, theta: float | None = None, build=None) -> Weights:
        """The weights of an implicit step's right-hand side for the step `span`: the explicit part (none for
        backward Euler) and the source's integral over the step (solver.core.operator.implicit_rhs), on the finest
        level, on the device; kept while the step's length and its source weights stay (retime forgets them).
        theta: the explicit part's share (default the scheme's); build(block, shape, owned): other host weights
        (TR-BDF2's stages, solver.multigrid.adaptive) under the key `theta`."""
        from ..core import sources

        key = (span.dt, theta, sources.step_weights(self.case, span))
        if key not in self.sources:
            g0 = self.grids[0]
            lay = g0.layout
            where = (g0.place.block, lay.shape, (lay.owned[0], lay.owned[2]))
            host = build(*where) if build else operator.implicit_rhs(self.case, *where, span, theta)
            if len(self.sources) > 8:  # a few per step length (TR-BDF2: its two stages and the estimate's)
                self.sources = {}
            self.sources[key] = operator.on_device(self.backend, host, self.dtype, aligned=lay.owned[2])
        return self.sources[key]

    @property
    def timed_sides(self) -> bool:
        from ..core.sides import varies_in_time

        return varies_in_time(self.case)

    def _refill(self, t: float, timer, field=None) -> None:
        """The finest level's ghost rules at time t (side values that vary in time), applied to its u (or field)."""
        grid = self._at(0, timer)
        grid.fill = make_fill(self.case, grid.place.block, DEPTH, t=t)
        a = grid.u if field is None else field
        self.backend.timed(timer, lambda: self.backend.fill(a, grid.fill))

    def _reduced(self, local: float, timer) -> float:
        t = time.perf_counter()
        r = self.comm.allmax(local)
        timer.add("wait", t)
        return r

    # the stop test ---------------------------------------------------------------------------------------
    def scale(self) -> float:
        """This rank's largest value the finest level's residual is computed from: max |u| with its ghost
        layer (boundary values, neighbours' points) times the operator's largest diagonal, plus max |g| (the
        scale of the rounding floor)."""
        grid, be = self.grids[0], self.backend
        r0, r1, c0, c1 = grid.owned
        g = be.max_abs(grid.g, grid.owned) if grid.g is not None else 0.0
        return be.max_abs(grid.u, (r0 - 1, r1 + 1, c0 - 1, c1 + 1)) * self._diagonal + g

    @functools.cached_property
    def _diagonal(self) -> float:
        """The largest diagonal of the finest level's operator: 1 (unit diagonal) where alpha is a number; in the
        equation's units, sigma plus the largest face coefficients, where it is a field."""
        if self.faces is None:
            return 1.0
        fx, fy = self._scaled_faces(self.levels[0])
        sigma = float(self.sigmas[0].max()) if self.sigmas is not None else self.settings.sigma
        return float(sigma + 2.0 * (np.max(fx) + np.max(fy)))

    def residual_norm(self, timer) -> float:
        """This rank's max |g - A u| on the finest level (the loop reduces it over ranks)."""
        if self.graphs is not None:  # right after a graphed cycle: the value its replay computed
            m = self.graphs.norm(timer)
            if m is not None:
                return m
        grid, be = self._at(0, timer), self.backend
        if grid.ex is not None:
            _exchange(grid.ex, grid.view(grid.u))
        r = grid.r if self.case.output.residual else None  # (kept where the run writes the final residual field)
        be.timed(timer, lambda: be.residual_max(r, grid.u, grid.g, grid.w, grid.owned))  # residual and max: one pass
        be.settle(timer)  # (a device's wait: its events count it as compute, not `other` as well)
        t = time.perf_counter()
        m = be.norm()
        timer.add("other", t)
        timer.level = None
        return m

    # what the loop and the record ask of an exchanger -----------------------------------------------
    depth = 1  # no deep halos: every sweep has its own weights, so each needs a fresh one-layer halo

    @property
    def trivial(self) -> bool:
        return self.grids[0].ex.trivial

    @property
    def schedule(self) -> str:
        return (f"multigrid {self.kind}-cycles over {len(self.grids)} levels; each sweep: {self.grids[0].ex.schedule}; "
                "residuals exchanged two layers deep before restriction, corrections one layer with corners before "
                "prolongation (solver/multigrid/cycle.py); "
                + ("each cycle and its stop test one graph replay (solver/multigrid/graphs.py)" if self.graphs else
                   "cycles launched verb by verb (graphs: one process on a GPU, sides constant in time)"))

    def sent(self) -> int:
        return self.messages()

    def stats(self) -> dict:
        return {"messages": self.messages(), "halo_depth": 1}

    # the record ------------------------------------------------------------------------------------------
    def describe(self) -> list[dict]:
        """One row per level: size, spacing, where it lives, smoothing weights, how its verbs are passes (`_tiled`);
        level 0 says where the stop test's residual is computed when it is folded into a pass."""
        rows = []
        for g in self.grids:
            lev, pl = g.place.level, g.place
            tiled = self._tiled(g) and g is not self.grids[-1]
            passes = "two sweeps a pass" if tiled else "a pass a verb"
            if g.tail:
                passes = f"one launch for levels {self.tail}-{len(self.grids) - 1}, a pass a verb inside it"
            rows.append({"level": len(rows), "nx": lev.x.n, "ny": lev.y.n, "hx": lev.x.h, "hy": lev.y.h,
                         "placement": "shared" if pl.shared else "distributed",
                         "block": [pl.block.ny, pl.block.nx], "pre": list(lev.pre), "post": list(lev.post),
                         "solve": "direct (dense inverse)" if g is self.grids[-1] else "smoothing", "passes": passes})
        if len(rows) > 1 and self.graphs is not None and self.grids[0].post and self._tiled(self.grids[0]):
            rows[0]["stop_test"] = "in the last sweep's pass"  # (graphs.py: the stop test folded into the cycle)
        return rows

    def close(self) -> None:
        for g in self.grids:
            for ex in (g.ex, g.ex_r, g.ex_e):
                if ex is not None:
                    ex.close()

    def messages(self) -> int:
        return sum(ex.sent() for g in self.grids for ex in (g.ex, g.ex_r, g.ex_e) if ex is not None)


def warm_up(case, backend, settings: Settings, cycle: str) -> None:
    """Compile every kernel a cycle uses (numba's JIT, CUDA modules) before the timed loop: one cycle (implicit
    heat: one step's solve of one cycle) of the same case on a 9 x 7 grid, one process, the same backend and
    dtype (kernels compile per type, not size)."""
    from ..core.decomp import decompose
    from ..core.layout import Layout
    from ..core.timing import Timer
    from ..parallel.comm import Comm

    tiny = tiny_case(case)
    block = decompose(tiny.shape, (1, 1), 0, periodic_axes(case))
    lay = Layout(case=tiny, dt=1.0, spacing=(0.0, 0.0), w=None, dims=(1, 1), rank=0, blocks=[block], outdir=None)
    mg = Multigrid(lay, Comm(), backend, replace(settings, coarsest=9), cycle)
    timer = Timer()
    from ..core.events import Span
    from ..core.physics import time_step

    if case.implicit and case.run.time_tolerance is not None:  # its stages, estimate and copies too
        from .adaptive import Stepper

        dt = time_step(tiny)
        Stepper(mg).step(Span(0, 0.0, dt, dt), 1e-300, 1, timer)
    elif case.implicit:
        dt = time_step(tiny)
        mg.time_step(Span(0, 0.0, dt, dt), 1e-300, 1, timer)
    else:
        mg.cycle(timer)
    mg.residual_norm(timer)
    backend.synchronize()


def tiny_case(case):
    """The case on a 9 x 7 grid with the same kinds of data (fields where it has fields), none read from files
    (their shapes are the grid's): what compiles the same kernels."""
    from ..case.materials import AlphaRegions
    from ..case.sources import ConstantSource

    physics = {}
    if case.alpha_field and case.physics.material is None:
        physics["alpha"] = AlphaRegions(background=1.0)
    if case.physics.source:
        physics["source"] = [ConstantSource(kind="constant", value=1.0)]
    sides = {}
    for side in ("bottom", "top", "left", "right"):
        spec = getattr(case.boundary, side)
        files = {k: 1.0 for k in ("value", "flux", "h", "ambient") if hasattr(getattr(spec, k, None), "file")}
        sides[side] = spec.model_copy(update=files)
    return case.model_copy(update={"grid": case.grid.model_copy(update={"nx": 9, "ny": 7}),
                                   "physics": case.physics.model_copy(update=physics),
                                   "boundary": case.boundary.model_copy(update=sides)})


def _plain(grid: Grid) -> bool:
    """Whether the level's sweeps need nothing between them: nothing to exchange (one process or a shared level), no
    ghost to refill (constant rules), plain weights (no coefficient fields)."""
    return (grid.ex is None or grid.ex.trivial) and not grid.w.fields and not (grid.fill.rules and not grid.fill.constant)


def _constant(a) -> bool:
    """Whether a global array holds one value."""
    a = np.asarray(a)
    return a.size == 0 or bool(np.all(a == a.flat[0]))


def _ids(fields) -> tuple:
    return tuple(id(a) for pair in fields for a in pair)


def _shift(region):
    """A region of a one-layer view as a region of its DEPTH-padded field."""
    r0, r1, c0, c1 = region
    d = DEPTH - 1
    return (r0 + d, r1 + d, c0 + d, c1 + d)


def _view_region(grid: Grid):
    """The owned points in the one-layer view's coordinates (a shared level has no exchanger)."""
    r0, r1, c0, c1 = grid.owned
    d = DEPTH - 1
    return (r0 - d, r1 - d, c0 - d, c1 - d)


def _exchange(ex, a) -> None:
    ex.finish(ex.start(a))


def settings_theta(case) -> float | None:
    """The implicit share of an implicit heat step's operator: the scheme's theta, TR-BDF2's gamma / 2 with adaptive
    steps (solver.multigrid.adaptive); None for laplace."""
    if not case.implicit:
        return None
    if case.run.time_tolerance is not None:
        from ..core.trbdf2 import D

        return D
    from ..core.physics import THETA

    return THETA[case.physics.scheme]


def settings_of(case, sigma: float = 0.0, kappa: float = 1.0) -> Settings:
    """The hierarchy's settings for the operator sigma - kappa Laplacian (solver.core.physics.implicit_operator or
    steady_operator)."""
    m = case.multigrid
    from ..core.physics import alpha_of

    return Settings(sigma=sigma, kappa=kappa, pre=m.pre, post=m.post, smoother=m.smoother, omega=m.omega,
                    coarsest=m.coarsest, symmetric=case.krylov == "cg",
                    alpha_scale=alpha_of(case) if case.alpha_field else 1.0)


def operator_of(case, dt: float | None = None) -> tuple[float, float]:
    """(sigma, kappa) of the case's solve: an implicit step's (of length dt, default the case's; theta: settings_theta),
    or the steady state's."""
    from ..core.physics import implicit_operator, steady_operator

    return implicit_operator(case, dt, settings_theta(case)) if case.implicit else steady_operator(case)
