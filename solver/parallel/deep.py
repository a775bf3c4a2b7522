"""Deep halos: k ghost layers exchanged once every k steps, k steps computed per sweep (time tiling
under MPI; backend.time_tile = k; Ding and He's ghost-cell expansion tied to temporal blocking).

Layout. Each field is allocated with k ghost layers on every side that faces a neighbour and one on a
physical side (the boundary value, constant in time). The loop, the outputs and the checks see the
usual one-layer padded block: a view of it (`adopt`), so nothing else changes.

Exchange at depth d (2 <= d <= k): rows decomposition, one phase: d rows each way, over the owned
columns. Process grid, two phases: d columns each way over the owned rows, then d rows each way over
the owned columns plus the d ghost columns just received, which brings the corners from the diagonal
neighbours without naming them (so neighbours come from the decomposition as given, periodic or not).
Messages per step: 1/d of the one-layer exchange (two phases of a grid count as the four messages of
one step's exchange each way).

Compute (solver.backends.numba_kernels.tiled): after the exchange every point within d of the owned
block is valid at time t, so level L (t + L) is known on the block grown by d - L on each neighbour
side (the shrinking region); level d is the owned block. Each value is computed by the step's own
expression, so the result is bitwise equal to d single steps for every decomposition, dtype and
equation. Halo modes keep their meaning:
- blocking: every phase with MPI_Sendrecv, then the whole tile;
- nonblocking: persistent requests per phase, Waitall, unpack (then the next phase), then the tile;
- overlap: start the exchange; compute the part of the tile that needs no ghost (the owned block
  shrunk by d on each neighbour side, whose levels shrink inside the owned points) in bands with
  MPI_Testall between them (the second phase of a grid starts there as soon as the first is in);
  finish; compute the frame around it (its levels read the ghosts).

Schedule between stops (solver.core.loop): the n steps up to the next stop are cut into
ceil(n' / k) tiles as equal as possible (n' = n, or n - 1 when the stop checks convergence and NaN:
that check compares the last two fields, so the last step is a plain one-layer step). Stops therefore
fall on exactly the steps the case names (check_every, output.every, checkpoint_every, balance) and
a converged Laplace run stops at the same step as the per-step run; signals are polled at
the loop's poll period rounded up to a multiple of k (10 steps: every 16 for k = 8), and the ranks'
vote on them is read one poll later (solver.core.loop.TimeLoop._vote: no rank waits at a poll).

GPU fields (solver.backends.cupy_backend): the deep fields are the backend's pitched allocations with
the owned block's first column aligned (so the one-layer views meet the one-step kernels' alignment),
copied and filled on its stream; the mode classes run over the GPU transport they are given (staged,
CUDA-aware or NCCL: solver.parallel.gpu_exchange), one for every depth's phases; `backend.tiled`
launches the time-tiled kernel on the stream the transport made active (main; the frame of the overlap
mode on the high-priority edge stream, after the receives) and charges its GPU time to compute from
CUDA events. The inner part is one launch (the host waits in MPI while the GPU computes it).

Thin blocks: a ghost layer d deep must come from the nearest neighbour, so d is capped to the thinnest
block along each axis that has neighbours (plain data: every rank computes the same cap from the same
blocks, so all agree without a message; after a rebalance the cap is computed again).
"""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np

from ..core.decomp import Block
from .halo import Exchange, Side, bands


def capped_depth(k: int, blocks: list[Block]) -> int:
    """k, capped to the rows (columns) of the thinnest block along an axis on which ranks have neighbours."""
    for b in blocks:
        if b.south is not None or b.north is not None:
            k = min(k, b.ny)
        if b.west is not None or b.east is not None:
            k = min(k, b.nx)
    return max(1, k)


class DeepLayout:
    """Where the owned block and the ghost layers sit in a field with k ghost layers towards neighbours."""

    def __init__(self, block: Block, k: int, physical: int = 1):
        """physical: ghost layers on the sides without a neighbour (1: the boundary value; multigrid's
        fields take k everywhere, so that a boundary fill of depth k applies to them)."""
        self.block, self.k = block, k
        n = block.neighbours
        self.has = {side: n[side] is not None for side in n}
        gs, gn, gw, ge = (k if self.has[s] else physical for s in ("south", "north", "west", "east"))
        self.shape = (gs + block.ny + gn, gw + block.nx + ge)
        self.owned = (gs, gs + block.ny, gw, gw + block.nx)  # (R0, R1, C0, C1)
        r0, r1, c0, c1 = self.owned
        self.view = (slice(r0 - 1, r1 + 1), slice(c0 - 1, c1 + 1))  # the one-layer padded block

    def phases(self, d: int) -> list[list[Side]]:
        """The exchange of d ghost layers (module docstring): columns first, then rows with the corners."""
        r0, r1, c0, c1 = self.owned
        nb, has = self.block.neighbours, self.has
        cols = [Side("west", nb["west"], (r0, r1, c0, c0 + d), (r0, r1, c0 - d, c0))] if has["west"] else []
        cols += [Side("east", nb["east"], (r0, r1, c1 - d, c1), (r0, r1, c1, c1 + d))] if has["east"] else []
        w0, w1 = c0 - d * has["west"], c1 + d * has["east"]
        rows = [Side("south", nb["south"], (r0, r0 + d, w0, w1), (r0 - d, r0, w0, w1))] if has["south"] else []
        rows += [Side("north", nb["north"], (r1 - d, r1, w0, w1), (r1, r1 + d, w0, w1))] if has["north"] else []
        return [p for p in (cols, rows) if p]

    def valid(self, d: int, after_exchange: bool) -> tuple[tuple[int, int, int, int], tuple[bool, bool, bool, bool]]:
        """((ylo, yhi, xlo, xhi), fixed per side) for tiled(): the points valid at the tile's start. Before
        the exchange only the owned points are; after it also d layers towards each neighbour."""
        r0, r1, c0, c1 = self.owned
        g = d if after_exchange else 0
        h = self.has
        return ((r0 - g * h["south"], r1 + g * h["north"], c0 - g * h["west"], c1 + g * h["east"]),
                (not h["south"], not h["north"], not h["west"], not h["east"]))

    def inner(self, d: int) -> tuple[int, int, int, int]:
        """The owned points whose d-step value needs no ghost: the block shrunk by d on neighbour sides."""
        r0, r1, c0, c1 = self.owned
        h = self.has
        return (r0 + d * h["south"], r1 - d * h["north"], c0 + d * h["west"], c1 - d * h["east"])

    def frame(self, d: int) -> list[tuple[int, int, int, int]]:
        """The owned points outside inner(d): full-width row strips, then column strips between them."""
        r0, r1, c0, c1 = self.owned
        i0, i1, j0, j1 = self.inner(d)
        if i0 >= i1 or j0 >= j1:
            return [self.owned]
        parts = [(r0, i0, c0, c1), (i1, r1, c0, c1), (i0, i1, c0, j0), (i0, i1, j1, c1)]
        return [p for p in parts if p[0] < p[1] and p[2] < p[3]]


class DeepTiles:
    """The exchanger of a time-tiled run: per-step verbs (for the plain steps) and tiles of k steps. fill(block,
    field, owned): the ghost layer of a field whose first owned point is at local `owned` on the physical sides,
    along their whole length (the deep rows towards neighbours included: solver.core.boundary.make_fill's frame)."""

    BANDS = 4  # overlap: bands of the inner part, with MPI_Testall between them

    def __init__(self, mode_cls, block: Block, blocks: list[Block], mpi, backend, timer, k: int, fill, transport=None):
        self.mode_cls, self.block, self.mpi, self.backend, self.fill = mode_cls, block, mpi, backend, fill
        self.tx = transport  # GPU fields: the transport every depth's exchanger shares (None: host)
        self.requested = k
        self.k = capped_depth(k, blocks)
        self.step_ex = mode_cls(block, mpi, backend, timer, transport=transport)  # one layer, on the one-layer views
        if hasattr(backend, "plan_tiles"):  # GPU: compile every depth a tile may take, before the loop
            backend.plan_tiles(range(2, self.k + 1))
        self.mode, self.overlap = self.step_ex.mode, self.step_ex.overlap
        self.schedule = (f"time tiles of up to {self.k} steps with a {self.k}-deep halo exchanged once per tile "
                         f"({self.mode}: {self.step_ex.schedule}); see solver/parallel/deep.py")
        self.layout = DeepLayout(block, self.k)
        self.plans: dict[int, Exchange] = {}  # depth -> exchanger of that many layers on the deep fields
        self.deep: list[np.ndarray] = []
        self.views: list[np.ndarray] = []
        self.carried = 0  # messages sent by the exchangers this one replaced (rebalance)
        self._timer = timer

    # the one-layer exchange, for the loop's plain steps -----------------------------------------
    trivial = False

    @property
    def depth(self) -> int:
        return self.k

    @property
    def timer(self):
        return self._timer

    @timer.setter
    def timer(self, timer) -> None:
        self._timer = self.step_ex.timer = timer
        for ex in self.plans.values():
            ex.timer = timer

    @property
    def before(self):
        return self.step_ex.before

    @property
    def after(self):
        return self.step_ex.after

    def start(self, u):
        return self.step_ex.start(u)

    def progress(self, pending) -> None:
        self.step_ex.progress(pending)

    def finish(self, pending) -> None:
        self.step_ex.finish(pending)

    def close(self) -> None:
        for ex in (self.step_ex, *self.plans.values()):
            ex.close()

    # fields -------------------------------------------------------------------------------------
    def adopt(self, u, u_new):
        """Copy the two one-layer fields into fields with k-deep ghost layers; returns their one-layer views."""
        be = self.backend
        self.deep = [_zeros(be, self.layout, u.dtype) for _ in range(2)]
        self.views = [d[self.layout.view] for d in self.deep]
        be.synchronize()
        with getattr(be, "main", None) or nullcontext():  # GPU: the array assignments run on its main stream
            for view, deep, src in zip(self.views, self.deep, (u, u_new)):
                view[...] = src
                self.fill(self.block, deep, (self.layout.owned[0], self.layout.owned[2]))  # the physical sides' ghosts,
                # along their whole length (the deep rows and columns towards neighbours too: solver.core.boundary)
        be.synchronize()
        return self.views[0], self.views[1]

    def _deep_of(self, view) -> np.ndarray:
        return self.deep[0] if view is self.views[0] else self.deep[1]

    # time tiles ---------------------------------------------------------------------------------
    def advance(self, s, n: int, w, timer, step, keep_previous: bool) -> None:
        """n steps: tiles of up to k steps (module docstring), the last one a plain `step` when the stop
        needs the previous field."""
        plain = 1 if keep_previous else 0
        m = n - plain
        tiles = -(-m // self.k) if m > 0 else 0
        for i in range(tiles):
            d = (i + 1) * m // tiles - i * m // tiles
            if d == 1:
                step(s, timer)
            else:
                self.tile(s, d, w, timer)
        for _ in range(plain):
            step(s, timer)

    def _plan(self, d: int) -> Exchange:
        if d not in self.plans:
            self.plans[d] = self.mode_cls(self.block, self.mpi, self.backend, self._timer, self.layout.phases(d),
                                          transport=self.tx)
        return self.plans[d]

    def tile(self, s, d: int, w, timer) -> None:
        """d steps from s.u into s.u_new with one exchange of d layers."""
        timer.step = s.step
        u, out = self._deep_of(s.u), self._deep_of(s.u_new)
        ex = self._plan(d)
        ex.timer = timer
        if ex.overlap and self.backend.on_gpu:  # the strips sent may hold points the last inner part wrote (main)
            self.backend.edge_waits_main()
        pending = ex.start(u)
        if ex.overlap:
            valid, fixed = self.layout.valid(d, after_exchange=False)
            for i, band in enumerate(bands(self.layout.inner(d), 1 if self.backend.on_gpu else self.BANDS)):
                if i:
                    ex.progress(pending)
                self._compute(out, u, w, d, band, valid, fixed, timer)
        ex.finish(pending)
        valid, fixed = self.layout.valid(d, after_exchange=True)
        for region in (self.layout.frame(d) if ex.overlap else [self.layout.owned]):
            self._compute(out, u, w, d, region, valid, fixed, timer)
        t = time.perf_counter()
        s.u, s.u_new = s.u_new, s.u
        s.step += d
        timer.add("other", t)

    def _compute(self, out, u, w, d, target, valid, fixed, timer) -> None:
        if self.backend.on_gpu:  # CUDA events charge compute, the host's launch goes to other
            return self.backend.tiled(out, u, w, d, target, valid, fixed, timer)
        t = time.perf_counter()
        self.backend.tiled(out, u, w, d, target, valid, fixed)
        timer.add("compute", t)

    # the record ---------------------------------------------------------------------------------
    def sent(self) -> int:
        return self.carried + self.step_ex.messages + sum(ex.messages for ex in self.plans.values())

    def stats(self) -> dict:
        return {**self.step_ex.stats(), "messages": self.sent(), "halo_depth": self.k}


def _zeros(backend, layout: DeepLayout, dtype):
    """A zeroed field of the deep layout: host memory, or the GPU backend's pitched allocation with the
    owned block's first column (column 1 of the one-layer view) aligned as its kernels need."""
    if backend.on_gpu:
        return backend.zeros(layout.shape, aligned=layout.owned[2])
    return np.zeros(layout.shape, dtype=dtype)
