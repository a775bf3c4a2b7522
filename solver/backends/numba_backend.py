"""numba: prange over rows, a unit-stride inner loop LLVM vectorises; `threads: 1` is the compiled scalar baseline."""

from __future__ import annotations

import os
import time

import numpy as np

from ..core import cache
from ..core.errors import InputError
from ..core.limits import MAX_TIME_TILE
from ..core.machine import cpu_count, cpu_model
from . import Backend, register

MAX_DEFAULT_TILE = 8  # without a stored choice: the most steps fused per sweep (and halo depth under MPI) ...
RECOMPUTE_SHARE = 0.125  # ... such that the row updates a block recomputes stay within this share of its own
RING_BYTES = 1 << 20  # per thread: a time tile's ring buffer (k levels x 3 rows x tile width) fits in L2
THREAD_POINTS = 16384  # the points a kernel gives each thread at least: a smaller region (a small grid, a coarse
# multigrid level) runs on fewer threads, one below 2 x this, since waking a thread then costs more than it saves
# (BENCHMARKS.md, "First runs and shared cores"); STENCIL_THREAD_POINTS overrides it (0: every thread, always)


@register
class NumbaBackend(Backend):
    name = "numba"
    summary = "numba parallel CPU (prange over rows, SIMD inner loop)"

    def __init__(self, settings, dtype: str, threads: int = 1, **node):
        super().__init__(settings, dtype, threads, **node)
        _ensure_thread_pool(threads)
        import numba

        numba.set_num_threads(threads)
        self.active = threads  # the threads the next kernel gets (fit)
        self.thread_points = thread_points()
        from . import numba_kernels

        self.k = numba_kernels
        self.tuned: dict | None = None  # the stored `stencil bench --tune` choice (run.py looks it up)
        self.ring_bytes: int | None = None
        self.chosen: int | None = None  # the time tile of the fused sweeps taken, or of deep halos (tile_for)

    @classmethod
    def reserve_threads(cls, threads: int) -> None:
        _ensure_thread_pool(threads)

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import numba  # noqa: F401
        except ImportError as exc:
            return f"numba does not import ({exc}); install it with `pip install numba`"
        return None

    def compile_note(self) -> str | None:
        """Said when numba's on-disk cache holds none of the kernels prepare() needs (first run, new source)."""
        kernels = [self.k.step, self.k.max_update, self.k.tiled]  # prepare() compiles all three
        try:
            cold = any(not k._cache._cache_file._load_index() for k in kernels)  # numba's index; {} when stale
        except Exception:  # noqa: BLE001 - numba internals moved: say it anyway
            cold = True
        return ("compiling kernels: 5-40 s the first time (numba caches them for later runs; `make venv` compiles the "
                "shipped cases' kernels: tools/warm_cache.py)") if cold else None

    def prepare(self, u, u_new, w) -> None:
        """Compile (or load from cache) for this dtype and the fields w carries, on a tiny array, outside the
        timed loop."""
        tiny = np.zeros((3, 3), dtype=self.dtype)
        small = _tiny_fields(w, tiny)
        self.step(tiny.copy(), tiny, small, (1, 2, 1, 2))
        self.k.max_update(tiny, tiny, 1, 2, 1, 2)
        if not small.jacobi:  # one compiled kernel serves every tile
            self.k.fused(tiny.copy(), tiny, w.wc, w.wx, w.wy, 2, 1, 1, small.s, small.ax, small.ay, small.m, small.cw)
        if self.refills:
            from .numba_fill import fill_sides

            fill_sides(tiny.copy(), 1, *self._tables(u.shape))

    def fit(self, region) -> None:
        """The threads for a kernel over `region` (r0, r1, c0, c1): at least THREAD_POINTS points each (set only when
        it changes: numba.set_num_threads holds for this thread's next parallel regions). Results do not depend on
        it (every kernel is bitwise the same on any thread count)."""
        points = max(0, region[1] - region[0]) * max(0, region[3] - region[2])
        n = max(1, min(self.threads, points // self.thread_points)) if self.thread_points else self.threads
        if n != self.active:
            import numba

            numba.set_num_threads(n)
            self.active = n

    def tiled(self, out, u, w, k: int, target, valid, fixed) -> None:
        """k steps of `target` in one sweep (numba_kernels.tiled): a row block per thread, column blocks
        as wide as the ring buffer's share of cache allows."""
        r0, r1, c0, c1 = target
        if r0 >= r1 or c0 >= c1:
            return
        self.fit(target)
        self.k.tiled(out, u, w.wc, w.wx, w.wy, k, *target, *valid, *fixed, min(self.threads, r1 - r0),
                     self.column_blocks(c1 - c0, k), w.s, w.ax, w.ay, w.m, w.cw)

    def column_blocks(self, width: int, k: int) -> int:
        """Column tiles per row block: ring buffers of k x 3 rows x tile width within RING_BYTES (or the
        tuned cache tile), tiles at least 8k columns wide (recomputed columns stay a small fraction)."""
        budget = getattr(self, "ring_bytes", None) or RING_BYTES
        cols = max(8 * k, budget // (3 * k * self.dtype.itemsize))
        return max(1, -(-width // cols))

    def step(self, out, u, w, region) -> None:
        self.fit(region)
        if w.jacobi:  # Jacobi with coefficient fields: the smoother's form with om = 1 (solver.core.physics)
            return self._mg().vsmooth(out, u, w.s, w.ax, w.ay, w.wc, self.dtype.type(1), w.sigma, *region, w.sg)
        self.k.step(out, u, w.wc, w.wx, w.wy, *region, w.s, w.ax, w.ay, w.m, w.cw)

    def fill_boundary(self, u, timer=None) -> None:
        """The boundary rules in one compiled call (backends/numba_fill.py), the time charged to compute."""
        if self.refills:
            from .numba_fill import fill_sides

            t = time.perf_counter()
            fill_sides(u, self.boundary.depth, *self._tables(u.shape))
            if timer is not None:
                timer.add("compute", t)

    def _tables(self, shape):
        if getattr(self, "_tabled", (None, None))[:2] != (self.boundary, shape):
            self._tabled = (self.boundary, shape, self.boundary.tables(shape))
        return self._tabled[2]

    def tile_steps(self, shape) -> int:
        """The time tile of one process: the loop's polls fall on multiples of it, so that the steps
        between two stops are whole tiles (advance), not a tile and a few plain steps."""
        return 1 if self.refills else self._tile(max(1, (shape[0] - 2) // self.threads))

    def advance_timed(self, u, u_new, w, n: int, region, timer, previous: bool = True, tap=None):
        """advance() timed, the last step a plain one only where a check needs the previous field."""
        t = time.perf_counter()
        u, u_new = self.advance(u, u_new, w, n, region, previous, tap)
        timer.add("compute", t)
        return u, u_new

    def advance(self, u, u_new, w, n: int, region, previous: bool = True, tap=None):
        """n steps on one process: time tiles of `time_tile` (k) steps per sweep and one shorter tile for
        the rest (a plain step if one step is left); with `previous` the last step is a plain one, so
        that `u_new` holds the previous field (for the checks that follow). The fused kernel keeps ghost
        layers constant, so sides whose ghosts change between steps (Neumann, periodic: `refills`) take
        plain steps with a boundary fill after each. tap (solver.io.probes.Tap, or None): the steps of the
        batch whose probes are sampled inside the sweeps (numba_kernels.tiled's pr; a sampled step of the rest
        is a sweep of one step, which gives a plain step's bits)."""
        k = self._tile(max(1, (u.shape[0] - 2) // self.threads))
        full = region == (1, u.shape[0] - 1, 1, u.shape[1] - 1)
        m = n - previous if (k > 1 and full and n > 1 and not self.refills and not w.jacobi) else 0
        if m > 1:  # a fused sweep runs: the record's time tile (plain steps, multigrid's among them, leave it unset)
            self.chosen = k
        self.fit(region)
        done = 0
        for d in [k] * (m // k) + ([m % k] if m % k > 1 else []):
            u, u_new = self._sweep(u, u_new, w, d, done, tap)
            done += d
        if tap is not None and k > 1 and full and not self.refills and not w.jacobi:
            for j in range(done, n):  # the rest's sampled steps swept one at a time (tiled: a plain step's bits)
                if j + 1 in tap.offsets:
                    u, u_new = self._sweep(u, u_new, w, 1, j, tap)
                else:
                    u, u_new = super().advance(u, u_new, w, 1, region)
            return u, u_new
        return super().advance(u, u_new, w, n - done, region, tap=tap)  # (a tap left here: refused)

    def _sweep(self, u, u_new, w, d: int, done: int, tap):
        """A fused sweep of d steps after step offset `done`, sampling the tap's steps among them; returns (current,
        previous)."""
        cb = self.column_blocks(u.shape[1] - 2, d)
        rb = self.threads * (tap.bands if tap is not None else 1)  # (a tap's bands: its regions' work split)
        pr, taken = _levels(tap, done, d, rb * cb, self.threads)
        self.k.fused(u_new, u, w.wc, w.wx, w.wy, d, rb if pr is not None else self.threads, cb, w.s, w.ax, w.ay,
                     w.m, w.cw, pr)
        if pr is not None:
            tap.swept(taken, self, u_new)
        return u_new, u

    def samples_inside(self, shape) -> bool:
        """Whether advance() samples probes inside its time tiles (tap): where it fuses steps at all."""
        return not self.refills and self._tile(max(1, (shape[0] - 2) // self.threads)) > 1

    def use_tuned(self, entry: dict | None) -> None:
        """Take a stored choice (time tile, cache tile) where the case leaves backend.time_tile null."""
        self.tuned = entry
        if entry and getattr(self.settings, "time_tile", None) is None:
            self.ring_bytes = entry.get("ring_bytes")

    @property
    def time_tile(self) -> int | None:
        """The case's backend.time_tile, else the stored choice; None: default_time_tile per block."""
        t = getattr(self.settings, "time_tile", None)
        if t is not None:
            return t
        return int(self.tuned["time_tile"]) if self.tuned else None

    def tile_for(self, rows: int) -> int:
        """The time tile of deep halos under MPI, for blocks of `rows` rows per rank (the thinnest): the depth the
        run exchanges, so the record's."""
        self.chosen = self._tile(rows)
        return self.chosen

    def _tile(self, rows: int) -> int:
        """The time tile for blocks of `rows` rows per thread (one process) or per rank (MPI)."""
        return self.time_tile or default_time_tile(rows)

    @property
    def time_tile_source(self) -> str:
        if getattr(self.settings, "time_tile", None) is not None:
            return "case"
        return "tuned (stencil bench --tune)" if self.tuned else "default (default_time_tile)"

    def max_update(self, a, b, region) -> float:
        self.fit(region)
        return float(self.k.max_update(a, b, *region))

    # multigrid verbs: kernels of numba_mg.py (the terms of mg_ops.py) -----------------------------
    def _mg(self):
        from . import numba_mg

        return numba_mg

    def clear(self, a) -> None:
        """Every point to zero, rows on the backend's threads (numba_mg.zero; zeros() too: the pages of a new field are
        taken by the threads that will sweep it)."""
        if a.ndim == 2 and a.size >= self.thread_points * 2:
            self.fit((0, a.shape[0], 0, a.shape[1]))
            return self._mg().zero(a)
        a[...] = 0

    def nonlinear_kernels(self, region):
        from . import numba_nl

        self.fit(region)
        return numba_nl

    def smooth(self, out, u, g, w, om, region) -> None:
        self.fit(region)
        if w.uniform is not None:
            return self._mg().vsmooth_u(out, u, g, *w.uniform, w.wc, om, w.sigma, *region, w.sg)
        if w.fields:
            return self._mg().vsmooth(out, u, g, w.ax, w.ay, w.wc, om, w.sigma, *region, w.sg)
        if g is None:
            return self.k.step(out, u, w.wc, w.wx, w.wy, *region)
        self._mg().smooth(out, u, g, w.wc, w.wx, w.wy, om, *region)

    def residual(self, r, u, g, w, region) -> None:
        self.fit(region)
        if w.uniform is not None:
            return self._mg().vresidual_u(r, u, g, *w.uniform, w.sigma, *region, w.sg)
        if w.fields:
            return self._mg().vresidual(r, u, g, w.ax, w.ay, w.sigma, *region, w.sg)
        if g is None:
            return self._mg().residual(r, u, w.wx, w.wy, *region)
        self._mg().residual_g(r, u, g, w.wx, w.wy, *region)

    def restrict(self, gc, r, region, tables) -> None:
        """The restriction, its columns in vectorised runs where their windows share a shape (numba_mg.restrict_runs)."""
        self.fit(region)
        ys, yc, yw, xs, xc, xw, scale = tables
        cols = self._cached(("plain", region, r.shape), (xs, xw), lambda: _plain_column_runs(xs, xc, xw))
        if cols is not None:
            return self._mg().restrict_runs(gc, r, *region, *tables, *cols)
        self._mg().restrict(gc, r, *region, *tables)

    def prolong(self, u, e, region, tables) -> None:
        self.fit(region)
        ys, yw, xs, xw = tables
        xwt = self._cached(("prolong", region, u.shape), (xw,), lambda: np.ascontiguousarray(xw.T))
        self._mg().prolong(u, e, *region, ys, yw, xs, xwt, self._runs(region, u, xs))

    def prolong_op(self, u, e, region, tables) -> None:
        self.fit(region)
        ys, xs, *w = tables
        sep = self._separable(w, region, None)
        if sep is not None:
            return self._mg().prolong_sep(u, e, *region, ys, xs, *sep[0], self._runs(region, u, xs))
        self._mg().prolong_op(u, e, *region, *tables, self._runs(region, u, xs))

    def _runs(self, region, u, xs):
        """A prolongation's column runs (numba_mg.prolong), found once per table."""
        return self._cached(("prolong runs", region, u.shape), (xs,), lambda: _parity_runs(xs))

    def restrict_op(self, gc, r, region, tables) -> None:
        """The operator-dependent restriction, its columns in vectorised runs where their windows share a shape
        (numba_mg.restrict_sep_runs where the weights are separable, restrict_op_runs where they are per point)."""
        self.fit(region)
        ys, yc, xs, xc, ty, tx, origin, area, *w = tables
        sep = self._separable(w, None, (region, ys, yc, xs, xc, ty, tx, origin))
        if sep is not None:
            cy, wy, cx, wx, cols = sep[1]
            if cols is not None:
                return self._mg().restrict_sep_runs(gc, r, *region, ys, yc, xs, xc, area, cy, wy, cx, wx, *cols)
            return self._mg().restrict_sep(gc, r, *region, ys, yc, xs, xc, area, cy, wy, cx, wx)
        cols = self._cached(("runs", region, r.shape, origin), (xs, tx),
                            lambda: _op_column_runs(region[2], xs, xc, tx, origin[1]))
        if cols is not None:
            return self._mg().restrict_op_runs(gc, r, *region, ys, yc, xs, xc, ty, tx, origin[0], origin[1], area, *w,
                                               *cols)
        self._mg().restrict_op(gc, r, *region, ys, yc, xs, xc, ty, tx, origin[0], origin[1], area, *w)

    def _separable(self, w, region, down):
        """Operator-dependent transfer weights (wy0, wy1, wx0, wx1: per point) that depend on the row alone along y
        and on the column alone along x over the points a kernel reads (uniform faces: solver.multigrid.opdep),
        as (prolong's per-row and per-column vectors, restrict's per-window tables: numba_mg.restrict_sep), or
        None. Found once per table and region (the same bits as the per-point kernels: the same numbers)."""
        key = ("sep", region, w[0].shape, None if down is None else down[0])
        arrays = (w[0],) if down is None else (w[0], down[1])
        return self._cached(key, arrays, lambda: _separable_tables(w, region, down))

    def _cached(self, key, arrays, make):
        """make()'s tables for one transfer (key: its kind, region and field shape), made again when its arrays are
        other than the last call's (a rebuild's new weights): one entry a transfer, which keeps its arrays."""
        if not hasattr(self, "_seps"):
            self._seps = {}
        hit = self._seps.get(key)
        if hit is not None and len(hit[0]) == len(arrays) and all(a is b for a, b in zip(hit[0], arrays)):
            return hit[1]
        self._seps[key] = (arrays, make())
        return self._seps[key][1]

    def solve(self, e, r, minv, region) -> None:
        self.fit(region)
        self._mg().solve(e, r, minv, *region)

    def max_abs(self, a, region) -> float:
        self.fit(region)
        return float(self._mg().max_abs(a, *region))

    def residual_max(self, r, u, g, w, region) -> None:
        """The stop test in one pass (numba_mg.residual_max) where the weights are plain."""
        self.fit(region)
        if w.fields:
            return super().residual_max(r, u, g, w, region)
        self._norm = float(self._mg().residual_max(r, u, g, w.wx, w.wy, *region))

    def axpy(self, y, a, x, region) -> None:
        self.fit(region)
        self._mg().axpy(y, a, x, *region)

    def axpy_max(self, y, a, x, region) -> float:
        self.fit(region)
        return float(self._mg().axpy_max(y, a, x, *region))

    def combine(self, y, x, a, v, region) -> None:
        self.fit(region)
        self._mg().combine(y, x, a, v, *region)

    def scale(self, y, a, x, region) -> None:
        self.fit(region)
        self._mg().scale(y, a, x, *region)

    def xpay(self, y, x, b, region) -> None:
        self.fit(region)
        self._mg().xpay(y, x, b, *region)

    def products_max(self, a, b, region) -> float:
        self.fit(region)
        return float(self._mg().products_max(a, b, *region))

    def folded_sums(self, a, b, region, s1: float, s2: float) -> tuple[float, float]:
        self.fit(region)
        q1, q2 = self._mg().folded_sums(a, b, *region, s1, s2)
        return float(q1), float(q2)

    def fill(self, u, fill) -> None:
        if fill.rules:
            from .numba_fill import fill_sides

            fill_sides(u, fill.depth, *fill.tables(u.shape))

    def describe(self) -> dict:
        import numba

        return {"backend": self.name, "threads": self.threads, "device": "cpu",
                "time_tile": self.chosen or self.time_tile,
                "time_tile_source": self.time_tile_source,
                "threading_layer": _threading_layer(), "numba": numba.__version__,
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "thread_points": self.thread_points}

    def copy_bandwidth(self, nbytes: int, repeats: int = 5) -> float:
        """The copy rate with every thread of the backend (the ceiling is the machine's, whatever fit() chose last)."""
        self.fit((0, 1, 0, self.threads * max(self.thread_points, 1)))
        a = np.random.default_rng(0).random(max(nbytes // 8, 1))
        b = np.empty_like(a)
        self.k.copy(b, a, 1.0)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            self.k.copy(b, a, 1.0)
            times.append(time.perf_counter() - t)
        return 2 * a.nbytes / float(np.median(times))


def _levels(tap, done: int, d: int, tiles: int, threads: int):
    """A sweep's probe arrays (tap.sweep) for the levels 1..d after step offset `done` that the tap samples, and
    those offsets by slot; (None, []) where none is sampled."""
    if tap is None:
        return None, []
    lv = np.full(d + 1, -1, dtype=np.int64)
    taken = [done + level for level in range(1, d + 1) if done + level in tap.offsets]
    for off in taken:
        lv[off - done] = tap.slots[off]
    return (tap.sweep(lv, tiles, threads) if taken else None), taken


def _separable_tables(w, region, down):
    """numba_backend._separable's finding for one table (module-level: plain arrays in, plain arrays out)."""
    wy0, wy1, wx0, wx1 = w
    if down is None:
        rows, cols = np.arange(region[0], region[1]), np.arange(region[2], region[3])
    else:
        _, ys, yc, xs, xc, _, _, _ = down
        rows = np.unique((ys[:, None] + np.arange(max(int(yc.max(initial=0)), 1))[None, :])[
            np.arange(max(int(yc.max(initial=0)), 1))[None, :] < yc[:, None]])
        cols = np.unique((xs[:, None] + np.arange(max(int(xc.max(initial=0)), 1))[None, :])[
            np.arange(max(int(xc.max(initial=0)), 1))[None, :] < xc[:, None]])
    if not rows.size or not cols.size:
        return None
    contiguous = rows[-1] - rows[0] + 1 == rows.size and cols[-1] - cols[0] + 1 == cols.size
    block = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)) if contiguous else np.ix_(rows, cols)
    for a, along_rows in ((wy0, True), (wy1, True), (wx0, False), (wx1, False)):
        part = a[block]
        ref = part[:, :1] if along_rows else part[:1, :]
        if not (part == ref).all():
            return None
    vy0, vy1 = np.zeros(wy0.shape[0], dtype=wy0.dtype), np.zeros(wy0.shape[0], dtype=wy0.dtype)
    vx0, vx1 = np.zeros(wx0.shape[1], dtype=wx0.dtype), np.zeros(wx0.shape[1], dtype=wx0.dtype)
    vy0[rows], vy1[rows] = wy0[rows, cols[0]], wy1[rows, cols[0]]
    vx0[cols], vx1[cols] = wx0[rows[0], cols], wx1[rows[0], cols]
    if down is None:
        return (vy0, vy1, vx0, vx1), None
    region, ys, yc, xs, xc, ty, tx, origin = down
    cy, wy = _window_terms(region[0], ys, yc, ty, origin[0], (vy0, vy1))
    cx, wx = _window_terms(region[2], xs, xc, tx, origin[1], (vx0, vx1))
    return None, (cy, wy, cx, wx, _sep_column_runs(xs, xc, cx, wx))


def _parity_runs(xs):
    """numba_mg.prolong's column runs (qa, count, start): among the columns of one parity, the longest stretches
    whose coarse column xs grows by one a step; every column in one run."""
    out = []
    for p in (0, 1):
        q = np.arange(p, len(xs), 2)
        if q.size:
            s = xs[q]
            cut = np.r_[0, np.flatnonzero(np.diff(s) != 1) + 1, q.size]
            out += [(q[a], b - a, s[a]) for a, b in zip(cut[:-1], cut[1:])]
    return np.array(out, dtype=np.int64).reshape(-1, 3)


def _column_runs(xs, shape):
    """(odd, runs, rep): the columns whose rows of `shape` (their windows' shape) are the most common one, in runs
    (qa, qb, start) of consecutive columns whose windows start 2 apart (start: the first's), the others (odd: the
    ends and a seam), and one column of that shape; None where there are no columns."""
    m = len(xs)
    if m == 0:
        return None
    _, which, counts = np.unique(shape, axis=0, return_inverse=True, return_counts=True)
    common = which.ravel() == np.argmax(counts)
    d = xs - 2 * np.arange(m)
    first = np.flatnonzero(np.r_[True, (common[1:] != common[:-1]) | (d[1:] != d[:-1])])
    last = np.r_[first[1:], m]
    keep = common[first]
    runs = np.stack([first[keep], last[keep], xs[first[keep]]], axis=1).astype(np.int64)
    return np.flatnonzero(~common).astype(np.int64), runs, int(first[keep][0])


def _plain_column_runs(xs, xc, xw):
    """numba_mg.restrict_runs's column tables (odd, runs, cnt, xwt)."""
    found = _column_runs(xs, xc[:, None])
    if found is None:
        return None
    odd, runs, rep = found
    return odd, runs, int(xc[rep]), np.ascontiguousarray(xw.T)


def _sep_column_runs(xs, xc, cx, wx):
    """numba_mg.restrict_sep_runs's column tables (odd, runs, cnt, wxt)."""
    found = _column_runs(xs, np.concatenate([xc[:, None], cx], axis=1))
    if found is None:
        return None
    odd, runs, rep = found
    return odd, runs, np.ascontiguousarray(cx[rep, :xc[rep]]), np.ascontiguousarray(wx.transpose(1, 2, 0))


def _op_column_runs(first: int, xs, xc, tx, offset: int):
    """numba_mg.restrict_op_runs's column tables (odd, runs, cnt, bis): for each column q and window column b, which
    of tx's two targets are q (first + q + offset), in order: the per-point kernel's tests, made once."""
    m, taps = len(xs), int(xc.max(initial=0))
    if m == 0 or taps == 0:
        return None
    q = np.arange(m)
    bis = np.full((m, taps, 2), 2, dtype=np.int64)
    cnt = np.zeros((m, taps), dtype=np.int64)
    for b in range(taps):
        j = np.minimum(xs + b, tx.shape[1] - 1)
        for bi in range(2):
            hit = q[(b < xc) & (tx[bi, j] == first + q + offset)]
            bis[hit, b, cnt[hit, b]] = bi
            cnt[hit, b] += 1
    odd, runs, rep = _column_runs(xs, np.concatenate([xc[:, None], cnt, bis.reshape(m, -1)], axis=1))
    return odd, runs, np.ascontiguousarray(cnt[rep, :xc[rep]]), np.ascontiguousarray(bis[rep, :xc[rep]])


def _window_terms(first: int, starts, counts, target, offset: int, weights):
    """Per coarse index k (first + k) and window position a: how many of the two weights of fine index
    starts[k] + a go to it (target[ai, fine] == first + k + offset, ai in order) and those weights."""
    n, taps = len(starts), max(int(counts.max(initial=0)), 1)
    c = np.zeros((n, taps), dtype=np.int64)
    w = np.zeros((n, taps, 2), dtype=weights[0].dtype)
    for k in range(n):
        for a in range(int(counts[k])):
            i = int(starts[k]) + a
            for ai in range(2):
                if int(target[ai, i]) == first + k + offset:
                    w[k, a, c[k, a]] = weights[ai][i]
                    c[k, a] += 1
    return c, w


def _tiny_fields(w, tiny):
    """w with each field it carries replaced by a tiny array of the same type (what prepare() compiles for)."""
    from dataclasses import replace

    from ..core.physics import FIELDS

    return replace(w, **{k: tiny.copy() for k in FIELDS if getattr(w, k) is not None})


TILE_CACHE = "tiles"  # solver.core.cache file of the `stencil bench --tune` choices (solver.bench.cpu_tune)


def tile_key(dtype: str, threads: int) -> str:
    return f"time_tile|{cpu_model()}|{dtype}|threads={threads}"


def stored_tile(dtype: str, threads: int) -> dict | None:
    """The stored choice for this CPU, dtype and thread count: {'time_tile', 'ring_bytes', ...} or None
    (also when the entry is invalid: the default is used, and said)."""
    instead = "the default time tile is used; `stencil bench --tune` measures it again"
    return cache.load(TILE_CACHE, tile_problem, instead).get(tile_key(dtype, threads))


def tile_problem(key: str, entry) -> str | None:
    """Why a tiles.json entry cannot be used, or None."""
    return cache.problem(entry, [("time_tile", cache.whole(1, MAX_TIME_TILE), f"a whole number from 1 to {MAX_TIME_TILE}"),
                                 ("ring_bytes", cache.whole(1), "a whole number of bytes >= 1")], optional=("ring_bytes",))


def default_time_tile(rows: int) -> int:
    """The safe default without a stored choice: the deepest tile up to MAX_DEFAULT_TILE whose recomputed
    row updates (k - L rows per side at level L: k(k - 1) in all, against the block's k * rows) stay within
    RECOMPUTE_SHARE, i.e. (k - 1) <= RECOMPUTE_SHARE * rows; 2 at least. Measured (BENCHMARKS.md, deep
    halos): on the 16-core node the kernel alone gained most at k = 8 for 64, 128 and 256 rows per thread
    (1.08x, 1.64x, 1.66x the per-step kernel; the older rule's 3, 4, 5 gave 0.96x, 1.53x, 1.52x)."""
    k = MAX_DEFAULT_TILE
    while k > 2 and k - 1 > RECOMPUTE_SHARE * rows:
        k -= 1
    return k


def thread_points() -> int:
    """THREAD_POINTS, or STENCIL_THREAD_POINTS where that is a whole number >= 0 (else the default)."""
    text = os.environ.get("STENCIL_THREAD_POINTS", "")
    return int(text) if text.isdigit() else THREAD_POINTS


def _ensure_thread_pool(threads: int) -> None:
    """numba sizes its pool at import from NUMBA_NUM_THREADS (default: all cores); asking for more
    threads than cores (oversubscription, on purpose) needs a larger pool before numba is imported.
    Its OpenMP pool's idle threads sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE unless set; read when the
    pool starts, at the first parallel kernel): where the cores are shared, spinning threads took the cores from
    the thread every parallel region waits for, and a 600 x 100 multigrid cycle took 44x its one-thread time
    (BENCHMARKS.md, "First runs and shared cores")."""
    import sys

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if "numba" not in sys.modules:
        if threads > cpu_count() and "NUMBA_NUM_THREADS" not in os.environ:
            os.environ["NUMBA_NUM_THREADS"] = str(threads)
        return
    import numba

    if threads > numba.config.NUMBA_NUM_THREADS:
        raise InputError(f"backend.threads: {threads} is more than numba's pool of {numba.config.NUMBA_NUM_THREADS}; "
                         f"set NUMBA_NUM_THREADS={threads} before starting, or use fewer threads")


def _threading_layer() -> str:
    import numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        return "not started"
