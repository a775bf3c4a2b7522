"""The multigrid verbs of the CuPy backend: kernels/mg.cu (the terms and order of mg_ops.py, compiled with
--fmad=false, so every level's arithmetic equals numpy's bit for bit) and kernels/boundary.cu for the fills.

Physics as data: with coefficient fields the sweeps and residuals are mg_vsmooth and mg_vresidual, the transfers
that follow the coefficients mg_restrict_op and mg_prolong_op (solver.multigrid.opdep), conjugate gradients' updates
mg_axpy and mg_xpay, and a dot product's two passes (solver.multigrid.dot) mg_products_max and mg_folded_sums,
reduced on the device into words read back as Python floats (each folded sum is exact, so the order of the atomic
additions changes no bit); fills take boundary.cu's fill_rules where a side is convective or its values vary along
it (their arrays uploaded once: _fill_table).

Launch specs: the functions below turn a verb's arguments into (entry, grid, block, args) or None when
there is nothing to do; they import no cupy, so tests/test_mg_emulated.py runs the same specs through
the CPU emulator (tests/cuda_emu). CupyMultigrid launches them and is mixed into CupyBackend.

Streams: every verb launches on `active`, the stream the exchanger chose (main unless the overlap mode
has just computed edge strips on `edge`), so each verb follows the one before it in stream order; the
exchanges order the two streams between sweeps. A boundary fill reads owned points that both streams
may have just written (the interior on main, the edge strips on edge), so it first makes the active
stream wait for the other. get/put copy on `main` after joining `edge`, and wait for the copy.

Time: timed() brackets the verbs with CUDA events on the active stream, the start recorded by the first
launch after any wait it needs (a fill's wait for the other stream is not its time); the GPU time goes
to `compute` of the multigrid level that was current when the work was enqueued (Timer.charger), once
the events complete (flush, at the next synchronisation), and the host's launch time to `other`.
"""

from __future__ import annotations

import time
import weakref
from importlib import resources

import numpy as np

from . import cupy_kernels as gk

BLOCK = (32, 8)  # point kernels (smooth, residual, restrict, prolong, clear): threads over columns, rows
THREADS = 256  # one-dimensional kernels (solve, max_abs): threads per block, a multiple of 32
MAX_GRID_Y = 65535  # point kernels stride over rows beyond this many row tiles
MAX_ABS_GRID = (4, 2048)  # max_abs: at most this many blocks across a row and rows at a time (as maxdiff)
MAX_ABS_POINTS = 16  # max_abs: points a thread reads at least (fewer blocks, each warp folds once)
FILL = "fill_sides"  # the entry of kernels/boundary.cu for plain rules (numbers, kinds 1-3); gk.FILL_ENTRIES: both


def source() -> str:
    """common.cu followed by mg.cu, as one translation unit."""
    root = resources.files("solver.backends") / "kernels"
    return (root / "common.cu").read_text() + "\n" + (root / "mg.cu").read_text()


def options(dtype) -> tuple[str, ...]:
    real = "float" if np.dtype(dtype) == np.float32 else "double"
    return ("--fmad=false", f"-DREAL={real}", f"-DMG_BX={BLOCK[0]}", f"-DMG_BY={BLOCK[1]}", f"-DMG_THREADS={THREADS}")


# launch specs ----------------------------------------------------------------------------------------
def _pitch(a) -> np.int64:
    """Elements between rows of a 2-D array with unit column stride (numpy or cupy)."""
    assert a.ndim == 2 and a.strides[1] == a.itemsize, "multigrid fields are row-major with unit column stride"
    return np.int64(a.strides[0] // a.itemsize)


def _empty(region) -> bool:
    r0, r1, c0, c1 = region
    return r1 <= r0 or c1 <= c0


def _points(region):
    """(grid, block) of a point kernel over the region: one thread per point."""
    r0, r1, c0, c1 = region
    bx, by = BLOCK
    return (-(-(c1 - c0) // bx), min(-(-(r1 - r0) // by), MAX_GRID_Y), 1), (bx, by, 1)


def _ints(region) -> tuple:
    return tuple(np.int32(v) for v in region)


def _optional(g):
    """(pointer argument, pitch) of an optional field: a null pointer stands for no right-hand side."""
    return (np.uint64(0), np.int64(0)) if g is None else (g, _pitch(g))


def smooth_spec(out, u, g, w, om, region):
    if _empty(region):
        return None
    t = out.dtype.type
    gp, pg = _optional(g)
    return ("mg_smooth", *_points(region), (out, u, gp, _pitch(out), _pitch(u), pg, *_ints(region), t(w.wc), t(w.wx),
                                            t(w.wy), t(0 if om is None else om)))


def residual_spec(r, u, g, w, region):
    if _empty(region):
        return None
    t = r.dtype.type
    gp, pg = _optional(g)
    return ("mg_residual", *_points(region), (r, u, gp, _pitch(r), _pitch(u), pg, *_ints(region), t(w.wx), t(w.wy)))


def _faces(w):
    """(ax, ay, their pitch) of weights with coefficient fields (both fields share one pitch)."""
    pa = _pitch(w.ax)
    assert _pitch(w.ay) == pa and w.ax.dtype == w.ay.dtype, "ax and ay share one layout"
    return w.ax, w.ay, pa


def vsmooth_spec(out, u, g, w, om, region):
    """mg_ops.vsmooth: one weighted Jacobi sweep with coefficient fields (w.ax, w.ay, w.sigma)."""
    if _empty(region):
        return None
    t = out.dtype.type
    gp, pg = _optional(g)
    ax, ay, pa = _faces(w)
    return ("mg_vsmooth", *_points(region), (out, u, gp, ax, ay, _pitch(out), _pitch(u), pg, pa, *_ints(region),
                                             t(w.wc), t(om), t(w.sigma)))


def vresidual_spec(r, u, g, w, region):
    """mg_ops.vresidual."""
    if _empty(region):
        return None
    t = r.dtype.type
    gp, pg = _optional(g)
    ax, ay, pa = _faces(w)
    return ("mg_vresidual", *_points(region), (r, u, gp, ax, ay, _pitch(r), _pitch(u), pg, pa, *_ints(region),
                                               t(w.sigma)))


def axpy_spec(y, a, x, region):
    """mg_ops.axpy: y = y + a*x."""
    if _empty(region):
        return None
    return ("mg_axpy", *_points(region), (y, x, _pitch(y), _pitch(x), *_ints(region), y.dtype.type(a)))


def xpay_spec(y, x, b, region):
    """mg_ops.xpay: y = x + b*y."""
    if _empty(region):
        return None
    return ("mg_xpay", *_points(region), (y, x, _pitch(y), _pitch(x), *_ints(region), y.dtype.type(b)))


def _reduction_grid(region):
    """The grid of a reduction over the region (max_abs, the dot products' passes): as maxdiff."""
    r0, r1, c0, c1 = region
    gx = min(-(-(c1 - c0) // THREADS), MAX_ABS_GRID[0])
    gy = min(r1 - r0, MAX_ABS_GRID[1], -(-(r1 - r0) * (c1 - c0) // (gx * THREADS * MAX_ABS_POINTS)))
    return (gx, gy, 1), (THREADS, 1, 1)


def products_max_spec(word, a, b, region):
    """word: one uint64 device word (the bits of a non-negative double), zeroed before the launch."""
    if _empty(region):
        return None
    return ("mg_products_max", *_reduction_grid(region), (word, a, b, _pitch(a), _pitch(b), *_ints(region)))


def folded_sums_spec(sums, a, b, region, s1: float, s2: float):
    """sums: two float64 device words, zeroed before the launch (solver.multigrid.dot's boundaries s1, s2)."""
    if _empty(region):
        return None
    return ("mg_folded_sums", *_reduction_grid(region), (sums, a, b, _pitch(a), _pitch(b), *_ints(region),
                                                         np.float64(s1), np.float64(s2)))


def restrict_spec(gc, r, region, tables):
    """tables: (ys, yc, yw, xs, xc, xw, scale), as Backend.restrict."""
    if _empty(region):
        return None
    ys, yc, yw, xs, xc, xw, scale = tables
    _check_tables(gc, region, (ys, yc, yw), (xs, xc, xw))
    return ("mg_restrict", *_points(region), (gc, r, _pitch(gc), _pitch(r), *_ints(region), ys, yc, yw,
                                              np.int32(yw.shape[1]), xs, xc, xw, np.int32(xw.shape[1]),
                                              gc.dtype.type(scale)))


def prolong_spec(u, e, region, tables):
    """tables: (ys, yw, xs, xw), as Backend.prolong (two taps per axis)."""
    if _empty(region):
        return None
    ys, yw, xs, xw = tables
    _check_tables(u, region, (ys, yw), (xs, xw))
    assert yw.shape[1] >= 2 and xw.shape[1] >= 2, "the prolongation reads two weights per point"
    return ("mg_prolong", *_points(region), (u, e, _pitch(u), _pitch(e), *_ints(region), ys, yw, np.int32(yw.shape[1]),
                                             xs, xw, np.int32(xw.shape[1])))


def _weights(ws):
    """(wy0, wy1, wx0, wx1, their one pitch) of the per-point transfer weights (solver.multigrid.opdep)."""
    pw = _pitch(ws[0])
    assert all(_pitch(a) == pw and a.shape == ws[0].shape for a in ws), "the four weight fields share one layout"
    return (*ws, pw)


def prolong_op_spec(u, e, region, tables):
    """mg_ops.prolong_op; tables (ys, xs, wy0, wy1, wx0, wx1), as Backend.prolong_op."""
    if _empty(region):
        return None
    ys, xs, *ws = tables
    _check_tables(u, region, (ys,), (xs,))
    *w, pw = _weights(ws)
    return ("mg_prolong_op", *_points(region), (u, e, *w, _pitch(u), _pitch(e), pw, *_ints(region), ys, xs))


def restrict_op_spec(gc, r, region, tables):
    """mg_ops.restrict_op; tables (ys, yc, xs, xc, ty, tx, origin, area, wy0, wy1, wx0, wx1), as Backend.restrict_op."""
    if _empty(region):
        return None
    ys, yc, xs, xc, ty, tx, origin, area, *ws = tables
    _check_tables(gc, region, (ys, yc), (xs, xc))
    assert ty.dtype == tx.dtype == np.int64 and ty.shape[0] == tx.shape[0] == 2 and ty.flags.c_contiguous \
        and tx.flags.c_contiguous, "targets: two rows of int64"
    *w, pw = _weights(ws)
    return ("mg_restrict_op", *_points(region), (gc, r, *w, _pitch(gc), _pitch(r), pw, *_ints(region), ys, yc, xs, xc,
                                                 ty, np.int64(ty.shape[1]), tx, np.int64(tx.shape[1]),
                                                 np.int64(origin[0]), np.int64(origin[1]), gc.dtype.type(area)))


def _check_tables(field, region, rows, cols) -> None:
    r0, r1, c0, c1 = region
    for tables, n in ((rows, r1 - r0), (cols, c1 - c0)):
        for a in tables:
            assert a.shape[0] == n, f"a table has {a.shape[0]} rows for {n} points"
            assert a.dtype == (field.dtype if a.ndim == 2 else np.int64), "index tables int64, weights the field's dtype"
            assert a.ndim == 1 or a.strides == (a.shape[1] * a.itemsize, a.itemsize), "weight tables are row-major"


def solve_spec(e, r, minv, region):
    if _empty(region):
        return None
    r0, r1, c0, c1 = region
    n = (r1 - r0) * (c1 - c0)
    assert minv.shape == (n, n) and minv.dtype == e.dtype and minv.strides[1] == minv.itemsize, "minv: n x n, row-major"
    assert minv.strides[0] == n * minv.itemsize
    return ("mg_solve", (-(-n // THREADS), 1, 1), (THREADS, 1, 1), (e, r, minv, _pitch(e), _pitch(r), *_ints(region)))


def max_abs_spec(word, a, region):
    """word: one device word (uint32 for float32, uint64 for float64), zeroed before the launch."""
    if _empty(region):
        return None
    return ("mg_max_abs", *_reduction_grid(region), (word, a, _pitch(a), *_ints(region)))


def clear_spec(a):
    rows, cols = a.shape
    if not rows or not cols:
        return None
    return ("mg_clear", *_points((0, rows, 0, cols)), (a, _pitch(a), np.int32(rows), np.int32(cols)))


def fill_specs(u, fill, upload=lambda host: host) -> list:
    """The launches of kernels/boundary.cu for `fill` (solver.core.boundary.Fill, its depth u's ghost layers): its
    entry gk.fill_entry(fill); upload(host array) gives the device copy of values along a side (the emulator
    passes host arrays)."""
    d = fill.depth
    ny, nx = u.shape[0] - 2 * d, u.shape[1] - 2 * d
    entry = gk.fill_entry(fill)
    head = (u, _pitch(u), np.int32(ny), np.int32(nx), np.int32(d))
    out = []
    for blocks, axis, rule in gk.fill_launches(fill, u.shape):
        if entry == FILL:
            k0, v0, k1, v1 = rule
            tail = (np.int32(k0), np.float64(v0), np.int32(k1), np.float64(v1))
        else:
            tail = tuple(x for side in (rule[:5], rule[5:]) for x in _fill_side_args(side, upload))
        out.append((entry, (blocks, 1, 1), (gk.FILL_THREADS, 1, 1), (*head, np.int32(axis), *tail)))
    return out


def _fill_side_args(side, upload) -> tuple:
    kind, v, g, vs, gs = side
    arrays = tuple(np.uint64(0) if a is None else upload(a) for a in (vs, gs))
    return (np.int32(kind), np.float64(v), np.float64(g), *arrays)


# the verbs -------------------------------------------------------------------------------------------
class CupyMultigrid:
    """Backend's multigrid verbs for CupyBackend (which has zeros, the streams, events and copies). The
    device-facing steps are _mg_stream, _mg_kernel, _mg_word, _mg_read, _mg_zeroed, _mg_fetch and _fill_table (the
    emulated tests replace them)."""

    _mg_timing = False  # inside timed(): the first launch records the start event
    _mg_first = None  # (stream, start event) of the verbs timed() is bracketing
    _mg_functions = None  # entry -> compiled function (this backend's dtype)
    _mg_word_dev = None  # max_abs's device word
    _mg_words = None  # (dtype, count) -> the dot products' device words
    _mg_tables = None  # id(host array) -> its device copy (a fill's values along a side)

    def clear(self, a) -> None:
        self._mg_run(clear_spec(a))

    def table(self, a: np.ndarray, weights: bool = False):
        host = np.ascontiguousarray(a, dtype=self.dtype if weights else np.int64)
        with self.main:
            dev = self.cp.asarray(host)
        self.main.synchronize()
        return dev

    def smooth(self, out, u, g, w, om, region) -> None:
        """With coefficient fields: kernels/mg.cu's mg_vsmooth. With g: its sweep. Without (the finest level of
        laplace): the backend's own one-step kernel (vec: 99.7% of the copy rate) on the fields' one-layer views,
        whose column 1 the pitched allocation aligns (multigrid.cycle allocates with the owned block's first
        column aligned); the same terms in the same order, so the same bits."""
        if w.fields:
            return self._mg_run(vsmooth_spec(out, u, g, w, om, region))
        if g is not None:
            return self._mg_run(smooth_spec(out, u, g, w, om, region))
        r0, r1, c0, c1 = region
        if r1 > r0 and c1 > c0:
            self.launch(out[1:-1, 1:-1], u[1:-1, 1:-1], w, (r0 - 1, r1 - 1, c0 - 1, c1 - 1), self._mg_stream())

    def residual(self, r, u, g, w, region) -> None:
        self._mg_run((vresidual_spec if w.fields else residual_spec)(r, u, g, w, region))

    def axpy(self, y, a, x, region) -> None:
        self._mg_run(axpy_spec(y, a, x, region))

    def xpay(self, y, x, b, region) -> None:
        self._mg_run(xpay_spec(y, x, b, region))

    def products_max(self, a, b, region) -> float:
        """max |a*b| over the region, the products in float64 (inf for NaN or Inf): a reduction into a device word."""
        if _empty(region):
            return 0.0
        s = self._mg_stream()
        word = self._mg_zeroed(s, np.uint64, 1)
        self._mg_launch(products_max_spec(word, a, b, region), s)
        m = float(self._mg_fetch(word, s).view(np.float64)[0])
        return m if np.isfinite(m) else float("inf")

    def folded_sums(self, a, b, region, s1: float, s2: float) -> tuple[float, float]:
        """solver.multigrid.dot's two exact sums, reduced on the device in any order (each partial sum is exact)."""
        if _empty(region):
            return 0.0, 0.0
        s = self._mg_stream()
        sums = self._mg_zeroed(s, np.float64, 2)
        self._mg_launch(folded_sums_spec(sums, a, b, region, s1, s2), s)
        q = self._mg_fetch(sums, s)
        return float(q[0]), float(q[1])

    def restrict(self, gc, r, region, tables) -> None:
        self._mg_run(restrict_spec(gc, r, region, tables))

    def prolong(self, u, e, region, tables) -> None:
        self._mg_run(prolong_spec(u, e, region, tables))

    def prolong_op(self, u, e, region, tables) -> None:
        self._mg_run(prolong_op_spec(u, e, region, tables))

    def restrict_op(self, gc, r, region, tables) -> None:
        self._mg_run(restrict_op_spec(gc, r, region, tables))

    def solve(self, e, r, minv, region) -> None:
        self._mg_run(solve_spec(e, r, minv, region))

    def max_abs(self, a, region) -> float:
        """max |a| over the region (inf when any value there is NaN or Inf), through a device word."""
        if _empty(region):
            return 0.0
        s = self._mg_stream()
        word = self._mg_word(s)
        self._mg_launch(max_abs_spec(word, a, region), s)
        m = self._mg_read(word, s)
        return m if np.isfinite(m) else float("inf")

    def fill(self, u, fill) -> None:
        if not fill.rules:
            return
        s = self._mg_stream(after_all=True)
        for spec in fill_specs(u, fill, self._fill_table):
            self._mg_launch(spec, s)

    def timed(self, timer, fn) -> None:
        """fn's kernels between CUDA events on the active stream: `compute` of the level enqueued now."""
        t = time.perf_counter()
        self._mg_timing, self._mg_first = True, None
        try:
            fn()
        finally:
            self._mg_timing = False
        if self._mg_first is not None:
            s, e0 = self._mg_first
            self._mg_first = None
            self._track(timer.charger(), "compute", e0, self._record(s), timer, "gpu")
        timer.add("other", t)  # the host's time launching

    def get(self, a, region) -> np.ndarray:
        r0, r1, c0, c1 = region
        out = np.empty((max(r1 - r0, 0), max(c1 - c0, 0)), dtype=self.dtype)
        if out.size:
            self.join()
            self.copy2d(out, a[r0:r1, c0:c1], "d2h", self.main)
            self.main.synchronize()
        return out

    def put(self, a, region, host: np.ndarray) -> None:
        r0, r1, c0, c1 = region
        host = np.ascontiguousarray(host, dtype=self.dtype)
        assert host.shape == (r1 - r0, c1 - c0), f"put: {host.shape} into a region of {(r1 - r0, c1 - c0)}"
        if host.size:
            self.join()
            self.copy2d(a[r0:r1, c0:c1], host, "h2d", self.main)
            self.main.synchronize()

    # launching -----------------------------------------------------------------------------------------
    def _mg_run(self, spec, after_all: bool = False) -> None:
        if spec is not None:
            self._mg_launch(spec, self._mg_stream(after_all))

    def _mg_launch(self, spec, stream) -> None:
        entry, grid, block, args = spec
        self._mg_kernel(entry)(grid, block, args, stream=stream)

    def _mg_stream(self, after_all: bool = False):
        """The active stream; after_all: made to wait for everything enqueued on the other one. Inside
        timed(), the first call records the start event (after that wait)."""
        s = self.active
        self._edge_used |= s is self.edge
        if after_all:
            if s is self.edge:
                self.edge_waits_main()
            else:
                self.join()
        if self._mg_timing and self._mg_first is None:
            self._mg_first = (s, self._record(s))
        return s

    def _mg_kernel(self, entry: str):
        if entry in gk.FILL_ENTRIES:
            return self._fill_function(entry)
        if self._mg_functions is None:
            self._mg_functions = {}
        if entry not in self._mg_functions:
            module = self._mg_functions.get(None)
            if module is None:
                module = self._mg_functions[None] = self.cp.RawModule(code=source(), options=options(self.dtype))
            self._mg_functions[entry] = module.get_function(entry)
        return self._mg_functions[entry]

    def _mg_word(self, stream):
        """max_abs's device word, zeroed on `stream`."""
        if self._mg_word_dev is None:
            self._mg_word_dev = self.cp.zeros(1, dtype=np.uint32 if self.dtype.itemsize == 4 else np.uint64)
        w = self._mg_word_dev
        self.cp.cuda.runtime.memsetAsync(w.data.ptr, 0, w.nbytes, stream.ptr)
        return w

    def _mg_read(self, word, stream) -> float:
        value = float(word.get(stream=stream).view(self.dtype)[0])
        self.flush()
        return value

    def _mg_zeroed(self, stream, dtype, count: int):
        """`count` device words of `dtype` (the dot products' reductions), zeroed on `stream`."""
        key = (np.dtype(dtype).name, count)
        if self._mg_words is None:
            self._mg_words = {}
        if key not in self._mg_words:
            self._mg_words[key] = self.cp.zeros(count, dtype=dtype)
        w = self._mg_words[key]
        self.cp.cuda.runtime.memsetAsync(w.data.ptr, 0, w.nbytes, stream.ptr)
        return w

    def _mg_fetch(self, words, stream) -> np.ndarray:
        """A host copy of device words, after the work enqueued on `stream`."""
        host = words.get(stream=stream)
        self.flush()
        return host

    def _fill_table(self, host: np.ndarray):
        """The device copy of a fill's values along a side (float64), uploaded once while the host array lives (the
        rule keeps it: a side's profile or file), before any capture that replays it (CupyBackend._graph)."""
        if self._mg_tables is None:
            self._mg_tables = {}
        key = id(host)
        if key not in self._mg_tables:
            with self.main:
                self._mg_tables[key] = self.cp.asarray(host)
            self.main.synchronize()
            weakref.finalize(host, self._mg_tables.pop, key, None)
        return self._mg_tables[key]
