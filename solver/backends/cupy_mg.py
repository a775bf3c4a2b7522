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

Graphs (issue 35; solver/multigrid/graphs.py decides when): mg_capture() captures a whole cycle's verbs on `main` as one
CUDA graph (no events, joins or host waits inside: every kernel compiled and every fill table uploaded before, by
mg_ready), and mg_replay() launches it. Each change of the timer's level during the capture records an external
event into the graph (cuEventRecordWithFlags, CU_EVENT_RECORD_EXTERNAL: a node of its own that every replay
records), so a replay's GPU time between two marks reaches `compute` of the level worked on between them, and the
levels still partition the loop. The stop test's residual goes in the same graph: residual_max() computes g - A u
and folds its max |.| into a device word in one pass, copied to pinned host memory by the graph itself; norm()
waits for that copy (the one host synchronisation of a check).

Time: timed() brackets the verbs with CUDA events on the active stream, the start recorded by the first
launch after any wait it needs (a fill's wait for the other stream is not its time); the GPU time goes
to `compute` of the multigrid level that was current when the work was enqueued (Timer.charger), once
the events complete (flush, at the next synchronisation), and the host's launch time to `other`.
"""

from __future__ import annotations

import functools
import os
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
TAIL_THREADS = 512  # mg_tail: the one block's threads
TAIL_WORDS = 20  # mg_tail: words a launch takes in its program (kernels/mg.cu MG_TAIL_WORDS)
TAIL_VERBS = ("mg_smooth", "mg_residual", "mg_restrict", "mg_prolong", "mg_solve", "mg_clear")  # mg.cu's TAIL_* order
FILL = "fill_sides"  # the entry of kernels/boundary.cu for plain rules (numbers, kinds 1-3); gk.FILL_ENTRIES: both
TILES = {8: ((26, 58), 4), 4: ((58, 26), 6)}  # mg_sweeps by the dtype's size: points per tile (columns, rows) and the
# blocks an SM holds at least (its launch bounds); with three layers around, 32 x 64 (64 x 32) in shared memory. On an
# H200, float64: 26 x 58 at 4 blocks 2% faster than 58 x 26, 25% faster than 58 x 58 or 122 x 26 at 2 blocks; float32:
# 58 x 26 at 6 blocks 2% faster than 26 x 58 at 4 (docs/bench/2026-12-03-issue35/call11, call13)
# STENCIL_MG_TILE=COLSxROWS[xMIN_BLOCKS]: one shape for both dtypes (a tuning knob for tools/mg_graphs_bench.py's
# variants; anything else keeps the defaults)
_t = os.environ.get("STENCIL_MG_TILE", "").split("x")
if len(_t) in (2, 3) and all(v.isdigit() and int(v) > 0 for v in _t):
    TILES = dict.fromkeys((8, 4), ((int(_t[0]), int(_t[1])), int(_t[2]) if len(_t) > 2 else 4))


def tile_of(dtype) -> tuple[tuple[int, int], int]:
    """mg_sweeps' (points per tile (columns, rows), blocks an SM at least) for fields of `dtype`."""
    return TILES[np.dtype(dtype).itemsize]


def source() -> str:
    """common.cu followed by mg.cu, as one translation unit."""
    root = resources.files("solver.backends") / "kernels"
    return (root / "common.cu").read_text() + "\n" + (root / "mg.cu").read_text()


def options(dtype) -> tuple[str, ...]:
    real = "float" if np.dtype(dtype) == np.float32 else "double"
    (tx, ty), blocks = tile_of(dtype)
    return ("--fmad=false", f"-DREAL={real}", f"-DMG_BX={BLOCK[0]}", f"-DMG_BY={BLOCK[1]}", f"-DMG_THREADS={THREADS}",
            f"-DMG_TX={tx}", f"-DMG_TY={ty}", f"-DMG_MIN_BLOCKS={blocks}",
            f"-DMG_TAIL_THREADS={TAIL_THREADS}")


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


def sweeps_spec(out, u, g, sweeps, region, r=None, w=None, word=None, prolong=None, zero=False):
    """mg_sweeps: smooth_spec's sweeps (one or two (Weights, om), plain weights) from u into out in one pass, then
    residual_spec(r, out, g, w, region) where r is not None and its max |.| folded into `word` (zeroed before the
    launch) where word is not None; prolong (e, tables): the sweeps start from u as prolong_spec(u, e, region,
    tables) would correct it (u not written); zero: u taken as zeros (a cleared field) without reading it."""
    if _empty(region):
        return None
    assert 1 <= len(sweeps) <= 2 and not any(sw.fields for sw, _ in sweeps), "one or two sweeps of plain weights"
    pu = _pitch(u)
    assert out is not u, "mg_sweeps writes another buffer than it reads"
    u = np.uint64(0) if zero else u  # (a null u: zeros, nothing read)
    r0, r1, c0, c1 = region
    t = out.dtype.type
    gp, pg = _optional(g)
    rp, pr = _optional(r)
    wp = np.uint64(0) if word is None else word
    terms = []
    for sw, om in (sweeps * 2)[:2]:
        terms += [t(sw.wc), t(sw.wx), t(sw.wy), t(0 if om is None else om)]
    rw = (t(0), t(0)) if w is None else (t(w.wx), t(w.wy))
    if prolong is None:
        up = (np.uint64(0), np.int64(0), np.uint64(0), np.uint64(0), np.int32(0), np.uint64(0), np.uint64(0), np.int32(0))
    else:
        e, (ys, yw, xs, xw) = prolong
        _check_tables(out, region, (ys, yw), (xs, xw))  # (out has u's shape; u may be null here)
        assert yw.shape[1] >= 2 and xw.shape[1] >= 2, "the prolongation reads two weights per point"
        up = (e, _pitch(e), ys, yw, np.int32(yw.shape[1]), xs, xw, np.int32(xw.shape[1]))
    (tx, ty), _ = tile_of(out.dtype)
    grid = (-(-(c1 - c0) // tx), -(-(r1 - r0) // ty), 1)
    assert grid[1] <= MAX_GRID_Y, "mg_sweeps: too many rows of tiles"
    return ("mg_sweeps", grid, (*BLOCK, 1), (out, rp, wp, u, gp, _pitch(out), pr, pu, pg, *_ints(region),
                                             np.int32(len(sweeps)), *terms, *rw, *up))


def _faces(w):
    """(ax, ay, their pitch) of weights with coefficient fields (both fields share one pitch, as sg does); null
    pointers for ax and ay where every face along an axis holds one value (w.uniform: _sigma passes the two numbers)."""
    pa = _pitch(w.ax)
    assert _pitch(w.ay) == pa and w.ax.dtype == w.ay.dtype, "ax and ay share one layout"
    assert w.sg is None or _pitch(w.sg) == pa, "sg shares the faces' layout"
    if w.uniform is not None:
        return np.uint64(0), np.uint64(0), pa
    return w.ax, w.ay, pa


def _sigma(w):
    """The diagonal's part beside the faces: (the number, the field or a null pointer), then the uniform faces' two
    numbers (zeros where the faces are fields)."""
    t = w.ax.dtype.type
    ux, uy = w.uniform if w.uniform is not None else (0.0, 0.0)
    return t(w.sigma), _optional(w.sg)[0], t(ux), t(uy)


def vsmooth_spec(out, u, g, w, om, region):
    """mg_ops.vsmooth: one weighted Jacobi sweep with coefficient fields (w.ax, w.ay, w.sigma)."""
    if _empty(region):
        return None
    t = out.dtype.type
    gp, pg = _optional(g)
    ax, ay, pa = _faces(w)
    return ("mg_vsmooth", *_points(region), (out, u, gp, ax, ay, _pitch(out), _pitch(u), pg, pa, *_ints(region),
                                             t(w.wc), t(om), *_sigma(w)))


def vresidual_spec(r, u, g, w, region):
    """mg_ops.vresidual."""
    if _empty(region):
        return None
    t = r.dtype.type
    gp, pg = _optional(g)
    ax, ay, pa = _faces(w)
    return ("mg_vresidual", *_points(region), (r, u, gp, ax, ay, _pitch(r), _pitch(u), pg, pa, *_ints(region),
                                               *_sigma(w)))


def axpy_spec(y, a, x, region):
    """mg_ops.axpy: y = y + a*x."""
    if _empty(region):
        return None
    return ("mg_axpy", *_points(region), (y, x, _pitch(y), _pitch(x), *_ints(region), y.dtype.type(a)))


def axpys_spec(y, coefs, xs, region):
    """Backend.axpys for one to four terms: y + a_0 x_0 + ... in order, one pass."""
    assert 1 <= len(xs) == len(coefs) <= 4, "one to four terms a launch"
    if _empty(region):
        return None
    t, k = y.dtype.type, len(xs)
    fields = (*xs, *(xs[:1] * (4 - k)))  # (unused pointers: the first field, never read)
    return ("mg_axpys", *_points(region), (y, *fields, _pitch(y), *(_pitch(f) for f in fields), *_ints(region),
                                           np.int32(k), *(t(a) for a in coefs), *(t(0),) * (4 - k)))


def scale_spec(y, a, x, region):
    """Backend.scale: y = 0 + a*x over the region, 0 on every other point of y (its clear and axpy in one pass)."""
    rows, cols = y.shape
    r0, r1, c0, c1 = region
    if r1 <= r0 or c1 <= c0:  # (nothing of x: y cleared)
        r0 = r1 = c0 = c1 = 0
    return ("mg_scale", *_points((0, rows, 0, cols)), (y, x, _pitch(y), _pitch(x), np.int32(rows), np.int32(cols),
                                                       *_ints((r0, r1, c0, c1)), y.dtype.type(a)))


def axpy_max_spec(word, y, a, x, region):
    """Backend.axpy_max: y = y + a*x with max |y| folded into `word` (zeroed before the launch)."""
    if _empty(region):
        return None
    return ("mg_axpy_max", *_reduction_grid(region), (word, y, x, _pitch(y), _pitch(x), *_ints(region),
                                                      y.dtype.type(a)))


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


def residual_max_spec(word, r, u, g, w, region):
    """The stop test's one pass (mg_residual_max, mg_vresidual_max with coefficient fields): g - A u over the region,
    stored in r unless r is None, its max |.| folded into `word` (as max_abs_spec's, zeroed before the launch)."""
    if _empty(region):
        return None
    t = u.dtype.type
    gp, pg = _optional(g)
    rp, pr = _optional(r)
    if w.fields:
        ax, ay, pa = _faces(w)
        return ("mg_vresidual_max", *_reduction_grid(region), (word, rp, u, gp, ax, ay, pr, _pitch(u), pg, pa,
                                                              *_ints(region), *_sigma(w)))
    return ("mg_residual_max", *_reduction_grid(region), (word, rp, u, gp, pr, _pitch(u), pg, *_ints(region), t(w.wx),
                                                         t(w.wy)))


def clear_spec(a):
    rows, cols = a.shape
    if not rows or not cols:
        return None
    return ("mg_clear", *_points((0, rows, 0, cols)), (a, _pitch(a), np.int32(rows), np.int32(cols)))


def tail_program(specs, address) -> np.ndarray:
    """The program mg_tail runs for these launch specs (of TAIL_VERBS, in order): a row of TAIL_WORDS int64 words per
    launch, its verb's index and then its arguments one word each: an array as address(array), an integer as it is,
    a real as the bits of a float64 (exact for float32)."""
    rows = np.zeros((len(specs), TAIL_WORDS), dtype=np.int64)
    for row, (entry, _grid, _block, args) in zip(rows, specs):
        assert entry in TAIL_VERBS, f"mg_tail runs {', '.join(TAIL_VERBS)}, not {entry}"
        assert len(args) < TAIL_WORDS, f"{entry}: {len(args)} arguments"
        row[0] = TAIL_VERBS.index(entry)
        for k, x in enumerate(args, 1):
            if isinstance(x, (np.floating, float)):
                row[k] = np.float64(x).view(np.int64)
            elif isinstance(x, (np.integer, int)):
                row[k] = int(x) - (1 << 64 if int(x) >= 1 << 63 else 0)  # (an address as a uint64: its bits)
            else:
                row[k] = address(x)
    return rows


def tail_spec(program, ops: int):
    """mg_tail: the `ops` launches of `program` (tail_program's rows on the device) in one block."""
    if not ops:
        return None
    return ("mg_tail", (1, 1, 1), (TAIL_THREADS, 1, 1), (program, np.int32(ops)))


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

    mg_tiles = True  # sweeps(): two sweeps in one pass (mg_sweeps)
    _mg_timing = False  # inside timed(): the first launch records the start event
    _mg_first = None  # (stream, start event) of the verbs timed() is bracketing
    _mg_functions = None  # entry -> compiled function (this backend's dtype)
    _mg_word_dev = None  # max_abs's device word
    _mg_words = None  # (dtype, count) -> the dot products' device words
    _mg_tables = None  # id(host array) -> its device copy (a fill's values along a side)
    _mg_capturing = False  # inside mg_capture(): verbs only enqueue (no events, joins or host waits)
    _mg_marks = None  # the marks [(event, level)] of the graph being captured (None: not marking)
    _mg_driver = None  # cuEventRecordWithFlags (ctypes), False where it cannot be had
    _mg_norm_bufs = None  # (device word, pinned host word) of residual_max
    _mg_norm_event = None  # recorded after residual_max's copy (or after the replay that made it)
    _mg_kept: set = frozenset()  # ids of the events graphs own (never back to the pool of free events)
    _mg_graph_facts = None  # what the record says about the graphs (describe)
    _mg_tape = None  # inside mg_record(): the launch specs the verbs give, instead of launching them

    def clear(self, a) -> None:
        self._mg_run(clear_spec(a))

    def nonlinear_kernels(self, region):
        """The nonlinear operator's fused sweeps (solver.backends.cupy_nl; STENCIL_CUPY_NL=0: the array expressions)."""
        if os.environ.get("STENCIL_CUPY_NL", "1") == "0":
            return None
        if getattr(self, "_nl", None) is None:
            from .cupy_nl import CupyNonlinear

            self._nl = CupyNonlinear(self.cp, self.dtype)
        return self._nl

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
        column aligned); the same terms in the same order, so the same bits. (A level whose ghost rules are constant
        sweeps two at a time in one pass: sweeps().)"""
        if w.fields:
            return self._mg_run(vsmooth_spec(out, u, g, w, om, region))
        if g is not None:
            return self._mg_run(smooth_spec(out, u, g, w, om, region))
        r0, r1, c0, c1 = region
        if r1 > r0 and c1 > c0:
            self.launch(out[1:-1, 1:-1], u[1:-1, 1:-1], w, (r0 - 1, r1 - 1, c0 - 1, c1 - 1), self._mg_stream())

    def sweeps(self, out, u, g, sweeps, region, tail=None, prolong=None, zero=False) -> None:
        """One or two sweeps (plain weights) from u into out in one pass (kernels/mg.cu's mg_sweeps), for a level whose
        ghost rules are constant; tail: None, ("residual", r, w) (r = g - A out, as residual() stores it), or
        ("max", r or None, w) (residual_max's stop test, its word copied for norm()); prolong: (e, tables), the
        sweeps start from u as prolong() would correct it (u itself not written); zero: from u = 0 (as clear(u)
        would leave it; u not read)."""
        if tail is None or tail[0] == "residual":
            r, w = (None, None) if tail is None else tail[1:]
            return self._mg_run(sweeps_spec(out, u, g, sweeps, region, r, w, prolong=prolong, zero=zero))
        _, r, w = tail
        self._mg_norm_pass(lambda word: sweeps_spec(out, u, g, sweeps, region, r, w, word, prolong, zero))

    def residual(self, r, u, g, w, region) -> None:
        self._mg_run((vresidual_spec if w.fields else residual_spec)(r, u, g, w, region))

    def axpy(self, y, a, x, region) -> None:
        self._mg_run(axpy_spec(y, a, x, region))

    def xpay(self, y, x, b, region) -> None:
        self._mg_run(xpay_spec(y, x, b, region))

    def scale(self, y, a, x, region) -> None:
        self._mg_run(scale_spec(y, a, x, region))

    def axpys(self, y, coefs, xs, region) -> None:
        for k in range(0, len(xs), 4):
            self._mg_run(axpys_spec(y, coefs[k:k + 4], xs[k:k + 4], region))

    def axpy_max(self, y, a, x, region) -> float:
        """y = y + a*x and max |y| over the region (inf for NaN or Inf) in one pass, through a device word."""
        return self._max_word(region, lambda word: axpy_max_spec(word, y, a, x, region))

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
        return self._max_word(region, lambda word: max_abs_spec(word, a, region))

    def _max_word(self, region, spec_of) -> float:
        """The largest |.| a kernel folds into a zeroed device word (spec_of(word): its launch), read back; 0 for an
        empty region, inf for NaN or Inf."""
        if _empty(region):
            return 0.0
        s = self._mg_stream()
        word = self._mg_word(s)
        self._mg_launch(spec_of(word), s)
        m = self._mg_read(word, s)
        return m if np.isfinite(m) else float("inf")

    def residual_max(self, r, u, g, w, region) -> None:
        """Enqueue the stop test in one pass: g - A u over the region (kept in r unless r is None) with its max |.|
        folded into a device word, and the word's copy to pinned host memory; norm() gives the value. Inside a
        capture the three are nodes of the graph."""
        self._mg_norm_pass(lambda word: residual_max_spec(word, r, u, g, w, region))

    def _mg_norm_pass(self, spec_of) -> None:
        """The stop test's steps: the device word zeroed, the pass spec_of(word) folding its max into it, the word's
        copy to pinned host memory (norm() waits for it); inside a capture, nodes of the graph."""
        word, host = self._mg_norm_buffers()
        s = self._mg_stream()
        self._mg_clear_word(word, s)
        spec = spec_of(word)
        if spec is not None:
            self._mg_launch(spec, s)
        self._mg_copy_word(host, word, s)
        if not self._mg_capturing:
            self._mg_norm_done(s)

    # the coarse levels in one block (solver/multigrid/cycle.py `_tail`) --------------------------------------
    mg_tails = True  # mg_record() and mg_tail() below: coarse levels in one block

    def mg_record(self, body):
        """The launches of the verbs body() calls (smooth with g, residual, restrict, prolong, solve, clear: no fill,
        no stream step), not run but kept as mg_tail's program, on the device: returns (program, launches)."""
        assert self._mg_tape is None, "a recording inside a recording"
        self._mg_tape = []
        try:
            body()
        finally:
            specs, self._mg_tape = self._mg_tape, None
        return self.table(tail_program(specs, self._mg_address)), len(specs)

    def mg_tail(self, program) -> None:
        """Run a recorded program (mg_record's value) as one launch of one block: the recorded launches in order."""
        self._mg_run(tail_spec(*program))

    def _mg_address(self, a) -> int:
        return a.data.ptr

    def norm(self) -> float:
        """The value of the last residual_max (or of the graph replay that ran one): waits for its copy."""
        m = self._mg_norm_read()
        return m if np.isfinite(m) else float("inf")

    # graphs (solver/multigrid/graphs.py) -----------------------------------------------------------------
    def mg_captures(self, shape) -> bool:
        """Whether whole cycles on fields of this padded shape can be captured as graphs (CuPy with graphs on, and
        a one-step kernel that is a kernel: `expr` allocates)."""
        return bool(getattr(self, "use_graphs", False)) and self.step_choice(shape)[0] != "expr"

    def mg_ready(self, fills, shape, sweeps) -> None:
        """Before a capture: every multigrid kernel compiled, each (field, fill)'s launch and values along the sides
        on the device, and the one-step kernel for fields of this padded shape and the sweeps' weights compiled."""
        for entry in MG_ENTRIES:
            self._mg_kernel(entry)
        for u, fill in fills:
            if fill.rules:
                for spec in fill_specs(u, fill, self._fill_table):
                    self._mg_kernel(spec[0])
        if any(not w.fields for w in sweeps):  # (the finest level's sweeps without g: smooth() launches it)
            self._compile(shape, None, None, [1], gk.PLAIN)
        self._mg_norm_buffers()
        self._mg_driver_fn()

    def mg_capture(self, body, timer):
        """Capture body(timer) on `main` as one graph (Captured); nothing runs until mg_replay(). With the driver's
        external events, every change of timer.level during the capture marks the graph (LevelMarks)."""
        self.join()  # (outside the capture: main after edge's work)
        marks = [] if self._mg_driver_fn() else None
        seen = LevelMarks(timer, self._mg_mark) if marks is not None else timer
        self._mg_marks, self._mg_capturing = marks, True
        self._mg_begin(self.main)
        try:
            if marks is not None:
                self._mg_mark(timer.level)
            body(seen)
            if marks is not None:
                self._mg_mark(None)
        finally:
            self._mg_capturing, self._mg_marks = False, None
            graph = self._mg_end(self.main)
        facts = self._mg_graph_facts or {}
        self._mg_graph_note("captured", facts.get("captured", 0) + 1)
        if marks is not None:
            self._mg_graph_note("levels", f"each level's compute from external events in the graph ({len(marks)} in "
                                          "the last captured)")
        elif "level 0" not in facts.get("levels", ""):
            self._mg_graph_note("levels", "each replay charged whole to level 0: no external events")
        return Captured(graph, marks)

    def mg_capture_failed(self, why: str) -> None:
        """A capture raised (the graphs module runs the verbs one by one from then on): the record says why."""
        self._mg_graph_note("failed", why)

    def mg_replay(self, cap, timer) -> None:
        """Launch a captured graph on `main`; its GPU time goes to compute of each marked level (without marks, all
        of it to level 0), once the events complete; the host's time to `other`."""
        t = time.perf_counter()
        self._mg_settled(cap)
        if cap.marks is None:
            e0 = self._record(self.main)
        self._mg_graph_launch(cap.graph, self.main)
        if cap.marks is None:
            self._track(functools.partial(timer.charge, level=0), "compute", e0, self._record(self.main), timer, "gpu")
        else:  # one interval to resolve: when the last mark is done, so are the others (_mg_charge_marks)
            charge = functools.partial(self._mg_charge_marks, cap, timer)
            self._track(charge, "compute", cap.marks[0][0], cap.marks[-1][0], timer, "gpu")
        cap.replays += 1
        self._mg_graph_facts["replays"] = self._mg_graph_facts.get("replays", 0) + 1
        self._mg_norm_done(self.main)
        timer.add("other", t)

    def _mg_mark(self, level) -> None:
        """Inside a capture: an external event recorded into the graph, and the level the work after it belongs to
        (None, between cycles: the level before it, so that every interval reaches a level)."""
        if level is None:
            level = self._mg_marks[-1][1] if self._mg_marks else 0
        event = self._mg_event()
        self._mg_driver_fn()(event, self.main)
        self._mg_marks.append((event, level))

    def _mg_charge_marks(self, cap, timer, section, _seconds) -> None:
        """A completed replay's GPU time between consecutive marks, summed per level, to compute of each level."""
        per: dict = {}
        for (e0, level), (e1, _) in zip(cap.marks, cap.marks[1:]):
            per[level] = per.get(level, 0.0) + self._mg_elapsed(e0, e1)
        for level, seconds in per.items():
            timer.charge(section, seconds, level)

    def _mg_elapsed(self, e0, e1) -> float:
        return self.cp.cuda.get_elapsed_time(e0, e1) / 1e3

    def _mg_settled(self, cap) -> None:
        """Before a replay re-records a graph's events: the last replay's intervals read (normally done already)."""
        if cap.replays and cap.marks and any(e is cap.marks[-1][0] for _, _, _, e, *_ in self.pending):
            cap.marks[-1][0].synchronize()
            self.flush()

    def fill(self, u, fill) -> None:
        if not fill.rules:
            return
        s = self._mg_stream(after_all=True)
        for spec in fill_specs(u, fill, self._fill_table):
            self._mg_launch(spec, s)

    def timed(self, timer, fn) -> None:
        """fn's kernels between CUDA events on the active stream: `compute` of the level enqueued now."""
        if self._mg_tape is not None:  # (recording: nothing runs)
            return fn()
        t = time.perf_counter()
        if self._mg_capturing:  # enqueued into the graph: its replays are timed (mg_replay)
            fn()
            timer.add("other", t)
            return
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
        if not isinstance(host, np.ndarray):  # a device array (a Newton rebuild on the device): copied there
            assert host.shape == (r1 - r0, c1 - c0), f"put: {host.shape} into a region of {(r1 - r0, c1 - c0)}"
            self.join()
            with self.main:
                a[r0:r1, c0:c1] = host.astype(self.dtype, copy=False)
            self.main.synchronize()
            return
        host = np.ascontiguousarray(host, dtype=self.dtype)
        assert host.shape == (r1 - r0, c1 - c0), f"put: {host.shape} into a region of {(r1 - r0, c1 - c0)}"
        if host.size:
            self.join()
            self.copy2d(a[r0:r1, c0:c1], host, "h2d", self.main)
            self.main.synchronize()

    # launching -----------------------------------------------------------------------------------------
    def _mg_run(self, spec, after_all: bool = False) -> None:
        if spec is not None and self._mg_tape is not None:
            self._mg_tape.append(spec)
        elif spec is not None:
            self._mg_launch(spec, self._mg_stream(after_all))

    def _mg_launch(self, spec, stream) -> None:
        entry, grid, block, args = spec
        self._mg_kernel(entry)(grid, block, args, stream=stream)

    def _mg_stream(self, after_all: bool = False):
        """The active stream; after_all: made to wait for everything enqueued on the other one. Inside
        timed(), the first call records the start event (after that wait)."""
        assert self._mg_tape is None, "mg_record keeps the verbs' own kernels only (no fill, no stream step)"
        s = self.active
        if self._mg_capturing:
            assert s is self.main, "a captured cycle runs on main"
            return s
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

    def _mg_norm_buffers(self):
        """residual_max's device word (the dtype's bits) and the pinned host word it is copied to, made once."""
        if self._mg_norm_bufs is None:
            word = self.cp.zeros(1, dtype=np.uint32 if self.dtype.itemsize == 4 else np.uint64)
            mem = self.cp.cuda.alloc_pinned_memory(word.nbytes)
            self._mg_norm_bufs = (word, np.frombuffer(mem, word.dtype, 1), mem)
            self._mg_norm_event = self.cp.cuda.Event(disable_timing=True)
        return self._mg_norm_bufs[:2]

    def _mg_clear_word(self, word, stream) -> None:
        self.cp.cuda.runtime.memsetAsync(word.data.ptr, 0, word.nbytes, stream.ptr)

    def _mg_copy_word(self, host, word, stream) -> None:
        rt = self.cp.cuda.runtime
        rt.memcpyAsync(host.ctypes.data, word.data.ptr, word.nbytes, rt.memcpyDeviceToHost, stream.ptr)

    def _mg_norm_done(self, stream) -> None:
        if self._mg_norm_event is not None:
            self._mg_norm_event.record(stream)

    def _mg_norm_read(self) -> float:
        self._mg_norm_event.synchronize()
        self.flush()
        return float(self._mg_norm_bufs[1].view(self.dtype)[0])

    def _mg_begin(self, stream) -> None:
        stream.begin_capture()

    def _mg_end(self, stream):
        return stream.end_capture()

    def _mg_graph_launch(self, graph, stream) -> None:
        graph.launch(stream)

    def _mg_event(self):
        """An event a graph owns (timing on; never returned to the pool of free events)."""
        event = self.cp.cuda.Event()
        if not isinstance(self._mg_kept, set):
            self._mg_kept = set()
        self._mg_kept.add(id(event))
        return event

    def _mg_driver_fn(self):
        """record(event, stream) through the driver's cuEventRecordWithFlags with CU_EVENT_RECORD_EXTERNAL (an
        event node of the graph being captured; the driver refuses the flag outside a capture: CUresult 401), tried
        once on a graph of two such events that must replay and time; None where it cannot be had (or
        STENCIL_MG_MARKS=0)."""
        if self._mg_driver is None:
            self._mg_driver = False
            if os.environ.get("STENCIL_MG_MARKS", "1") == "0":
                self._mg_graph_note("levels", "each replay charged whole to level 0: STENCIL_MG_MARKS=0")
                return None
            try:
                import ctypes

                fn = ctypes.CDLL("libcuda.so.1").cuEventRecordWithFlags
                fn.argtypes, fn.restype = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint), ctypes.c_int

                def record(event, stream):
                    rc = fn(event.ptr, stream.ptr, 1)
                    if rc:
                        raise RuntimeError(f"cuEventRecordWithFlags: CUresult {rc}")

                self._mg_probe(record)
                self._mg_driver = record
            except Exception as exc:  # noqa: BLE001 - no driver symbol: replays are charged whole
                self._mg_graph_note("levels", f"each replay charged whole to level 0: no external events ({exc})")
        return self._mg_driver or None

    def _mg_probe(self, record) -> None:
        """A graph of two external events, captured on a stream of its own, replayed: their interval must time."""
        stream = self.cp.cuda.Stream(non_blocking=True)
        e0, e1 = self.cp.cuda.Event(), self.cp.cuda.Event()
        stream.begin_capture()
        try:
            record(e0, stream)
            record(e1, stream)
        finally:
            graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        if not self.cp.cuda.get_elapsed_time(e0, e1) >= 0.0:
            raise RuntimeError("the external events' interval did not time")

    def _mg_graph_note(self, key: str, value) -> None:
        if self._mg_graph_facts is None:
            self._mg_graph_facts = {}
        self._mg_graph_facts[key] = value


MG_ENTRIES = ("mg_smooth", "mg_residual", "mg_restrict", "mg_prolong", "mg_solve", "mg_max_abs", "mg_clear",
              "mg_vsmooth", "mg_vresidual", "mg_axpy", "mg_axpys", "mg_scale", "mg_axpy_max", "mg_xpay",
              "mg_products_max", "mg_folded_sums", "mg_prolong_op",
              "mg_restrict_op", "mg_residual_max", "mg_vresidual_max", "mg_sweeps", "mg_tail")  # kernels/mg.cu's entries


class Captured:
    """A captured cycle: the backend's graph, its marks [(event, level)] (None: charged whole) and how often it ran."""

    def __init__(self, graph, marks):
        self.graph, self.marks, self.replays = graph, marks, 0


class LevelMarks:
    """The run's timer as a cycle being captured sees it: setting `level` to another level calls mark(level) (an
    event into the graph) first; everything else is the timer's own."""

    def __init__(self, timer, mark):
        object.__setattr__(self, "_timer", timer)
        object.__setattr__(self, "_mark", mark)

    @property
    def level(self):
        return self._timer.level

    def __getattr__(self, name):
        return getattr(self._timer, name)

    def __setattr__(self, name, value):
        if name == "level" and value is not None and value != self._timer.level:
            self._mark(value)
        setattr(self._timer, name, value)
