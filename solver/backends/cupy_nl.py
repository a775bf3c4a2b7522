"""The nonlinear operator's sweeps on one GPU (kernels/nl.cu): solver.backends.numba_nl's kernels, the same
arguments and each point's terms in the same order (compiled with --fmad=false), so the operator (solver.nonlinear.
operator) reads each sweep's inputs once instead of making a CuPy temporary per term. Reached through
CupyBackend.nonlinear_kernels; every launch is on CuPy's current stream (the operator's methods run on the backend's
own). The per-point minima (trial, lowest) are CuPy's reductions (a minimum is exact in any order). With one rank the
Newton solver keeps the levels' diagonal on the device (quotient_device, moved, across: solver.nonlinear.newton)."""

from __future__ import annotations

from importlib import resources

import numpy as np

BLOCK = (32, 8)
APPLY_ROWS = 8  # nl_apply_at: the rows each thread takes from the top down (nl.cu's NL_ROWS)
# ROWWISE: a CuPy ReductionKernel gives each output one block of threads, so a reduction of a whole field to one value
# runs on one block (measured at 8192^2 on an H100: 58-88 ms a call); reduced by rows first (a block a row), and the
# rows' values by CuPy's own max or min (NaN kept by both steps), it is a pass at the copy rate.


def _source() -> str:
    return (resources.files("solver.backends") / "kernels" / "nl.cu").read_text()


def _pitch(a) -> np.int64:
    """Elements between rows (row-major, unit column stride)."""
    assert a.ndim == 2 and a.strides[1] == a.itemsize, "the operator's arrays are row-major with unit column stride"
    return np.int64(a.strides[0] // a.itemsize)


class CupyNonlinear:
    """numba_nl's functions for CuPy arrays of one dtype (a module object per backend and dtype)."""

    def __init__(self, cp, dtype):
        self.cp, self.dtype = cp, np.dtype(dtype)
        self._functions: dict = {}
        self._moved = self._lowest = None  # CuPy reduction kernels, made at their first use
        self._laws: dict = {}  # film(): each set of power laws' parameters on the device

    def _fn(self, entry: str, kap: bool = False, dlin: bool = False, ab: bool = False):
        key = (entry, kap, dlin, ab)
        if key not in self._functions:
            real = "float" if self.dtype == np.float32 else "double"
            opts = ("--fmad=false", f"-DREAL={real}", f"-DNL_KAP={int(kap)}", f"-DNL_DLIN={int(dlin)}",
                    f"-DNL_AB={int(ab)}", f"-DNL_ROWS={APPLY_ROWS}")
            module = self._functions.get(("module", kap, dlin, ab))
            if module is None:
                module = self._functions[("module", kap, dlin, ab)] = self.cp.RawModule(code=_source(), options=opts)
            self._functions[key] = module.get_function(entry)
        return self._functions[key]

    @staticmethod
    def _launch(fn, n: int, m: int, args) -> None:
        """fn over n rows x m columns, a thread a point (BLOCK threads a block)."""
        if n > 0 and m > 0:
            fn(((m + BLOCK[0] - 1) // BLOCK[0], (n + BLOCK[1] - 1) // BLOCK[1], 1), (*BLOCK, 1), args)

    # numba_nl's functions ---------------------------------------------------------------------------------------
    uniform_faces = True  # the sweeps below take the reference faces as two numbers where they are uniform

    def _ref(self, ax, ay) -> tuple:
        """The reference faces' arguments: (ax, its pitch, ay, its pitch, ux, uy); ax and ay arrays, or two numbers
        (Weights.uniform: null pointers, the numbers passed instead)."""
        t = self.dtype.type
        if np.ndim(ax) == 0:
            return np.uint64(0), np.int64(0), np.uint64(0), np.int64(0), t(ax), t(ay)
        return ax, _pitch(ax), ay, _pitch(ay), t(0), t(0)

    def residual(self, out, u, kap, ax, ay, g0, sigma0, d_lin, r0, c0) -> None:
        n, m = g0.shape
        k = kap if kap is not None else g0
        d = d_lin if d_lin is not None else g0
        fn = self._fn("nl_residual", kap=kap is not None, dlin=d_lin is not None)
        self._launch(fn, n, m, (out, _pitch(out), u, _pitch(u), k, _pitch(k), *self._ref(ax, ay), g0, _pitch(g0), sigma0,
                                _pitch(sigma0), d, _pitch(d), np.int32(n), np.int32(m), np.int32(r0), np.int32(c0)))

    def power(self, u, law, kref, out=None):
        """(kappa, kappa') of one power law `law` (solver.core.conductivity.Law) at u (a 2-D array or a view of one
        with unit column stride) in one pass, into `out` (a pair of contiguous arrays of u's shape) or new arrays: the
        terms of Law.evaluate and the division by kref, so the bits of the CuPy expressions."""
        n, m = u.shape
        kap, dkap = out if out is not None else (self.cp.empty((n, m), dtype=self.dtype) for _ in range(2))
        assert kap.shape == (n, m) and kap.flags.c_contiguous and dkap.flags.c_contiguous
        t = self.dtype.type
        self._launch(self._fn("nl_power"), n, m, (kap, dkap, _pitch(kap), u, _pitch(u), t(law.offset), t(law.t0),
                                                  t(law.b), t(law.k0), t(kref), np.int32(n), np.int32(m),
                                                  np.int32(0), np.int32(0)))
        return kap, dkap

    def faces(self, kx, ex_a, ex_b, ky, ny_a, ny_b, kap, dkap, u, ax, ay, r0, c0) -> None:
        n, m = kx.shape[0], ky.shape[1]
        ab = ex_a is not None
        ea, eb, na, nb = (ex_a, ex_b, ny_a, ny_b) if ab else (kx, kx, ky, ky)
        dk = dkap if dkap is not None else kap
        assert _pitch(kap) == _pitch(dk), "kappa and kappa' share a layout"
        fn = self._fn("nl_faces", ab=ab)
        self._launch(fn, n + 1, m + 1, (kx, ea, eb, _pitch(kx), ky, na, nb, _pitch(ky), kap, dk, _pitch(kap), u,
                                        _pitch(u), *self._ref(ax, ay), np.int32(n), np.int32(m), np.int32(r0),
                                        np.int32(c0)))

    def apply(self, out, v, kx, ex_a, ex_b, ky, ny_a, ny_b, diag, r0, c0) -> None:
        n, m = diag.shape
        ab = ex_a is not None
        ea, eb, na, nb = (ex_a, ex_b, ny_a, ny_b) if ab else (kx, kx, ky, ky)
        fn = self._fn("nl_apply", ab=ab)
        self._launch(fn, n, m, (out, _pitch(out), v, _pitch(v), kx, ea, eb, _pitch(kx), ky, na, nb, _pitch(ky), diag,
                                _pitch(diag), np.int32(n), np.int32(m), np.int32(r0), np.int32(c0)))

    def apply_at(self, out, v, u, kap, dkap, ax, ay, diag, r0, c0, ab: bool) -> None:
        """apply's value with each point's faces made from (u, kappa, kappa') where it needs them, as faces() makes them
        (ab: their A and B terms): no faces' arrays."""
        n, m = diag.shape
        dk = dkap if dkap is not None else kap
        assert _pitch(kap) == _pitch(dk), "kappa and kappa' share a layout"
        if n <= 0 or m <= 0:
            return
        rows = APPLY_ROWS * BLOCK[1]  # (a block: a warp of 32 lanes a row, BLOCK[1] of them, each lane APPLY_ROWS rows)
        self._fn("nl_apply_at", ab=ab)(((m + 31) // 32, (n + rows - 1) // rows, 1), (32, BLOCK[1], 1), (
            out, _pitch(out), v, _pitch(v), u, _pitch(u), kap, dk, _pitch(kap), *self._ref(ax, ay), diag, _pitch(diag),
            np.int32(n), np.int32(m), np.int32(r0), np.int32(c0)))

    def diagonal(self, d, scale, sigma0, d_lin, kap, free) -> None:
        n, m = d.shape
        assert _pitch(d) == _pitch(scale)
        dl = d_lin if d_lin is not None else sigma0
        k = kap if kap is not None else sigma0
        fn = self._fn("nl_diagonal", kap=kap is not None, dlin=d_lin is not None)
        self._launch(fn, n, m, (d, scale, _pitch(d), sigma0, _pitch(sigma0), dl, _pitch(dl), k, _pitch(k), free,
                                _pitch(free), np.int32(n), np.int32(m)))

    def quotient(self, out, a, b) -> None:
        """out (a host float64 array) = max(a / b, 0), NaN kept."""
        n, m = a.shape
        assert _pitch(a) == _pitch(b)
        dev = self.cp.empty((n, m), dtype=np.float64)
        self._launch(self._fn("nl_quotient"), n, m, (dev, a, b, _pitch(a), np.int32(n), np.int32(m)))
        self.to_host(dev, out)

    @staticmethod
    def to_host(dev, out) -> None:
        """out (host) = dev (the device's copy waits for the current stream)."""
        if out.flags.c_contiguous:
            dev.get(out=out)
        else:
            out[...] = dev.get()

    def moved(self, new, old, tiny) -> float:
        """max |new - old| / max(|old|, tiny) (0 for no points; NaN where a quotient is NaN): host arrays by numba_nl's
        pass, device ones (a rebuild on the device) by CuPy's (the quotients exact, their maximum in any order)."""
        if isinstance(new, np.ndarray):
            from . import numba_nl

            return numba_nl.moved(new, old, tiny)
        if new.size == 0:
            return 0.0
        if self._moved is None:  # one pass, no temporaries (four whole-field CuPy temporaries before)
            self._moved = self.cp.ReductionKernel(
                "T x, T x0, T tiny", "T y", "abs(x - x0) / max(abs(x0), tiny)", "nl_nanmax(a, b)", "y = a", "0",
                "nl_moved", preamble="template <typename T> __device__ T nl_nanmax(T a, T b) "
                                     "{ return (a != a || a > b) ? a : b; }")
        return float(self.cp.max(self._moved(new, old, new.dtype.type(tiny), axis=1)))  # (rows, then theirs: ROWWISE)

    def film(self, f, u, laws, jacobian: bool, most: int):
        """(Q, dQ/du, the radiated part or None) at a film's points (solver.nonlinear.films.wall_flux: its terms in its
        order, one thread a point, one launch): f a film on this device, u the field, laws the operator's k(T) laws
        as (offset, t0, b, k0, kref) tuples, every one a power law (empty: no k(T)); most: the wall's iterations at
        most (films.MAX_WALL_ITERATIONS)."""
        cp, t, n = self.cp, self.dtype.type, int(f.w.size)
        q, dq = cp.empty(n, dtype=self.dtype), cp.empty(n, dtype=self.dtype)
        rad = cp.empty(n, dtype=self.dtype) if f.radiates else q  # (without radiation nl_film writes no rad)
        key = tuple(laws)
        if key not in self._laws:
            self._laws[key] = cp.asarray(np.array([v for law in laws for v in law] or [0.0], dtype=self.dtype))
        eps = 4.0 * float(np.finfo(self.dtype).eps)
        if n:
            self._fn("nl_film")(((n + 127) // 128, 1, 1), (128, 1, 1), (
                q, dq, rad, u, _pitch(u), f.rows, f.cols, f.a, f.delta, f.h, f.ta, f.ts4, f.code, t(f.e), t(4.0 * f.e),
                t(f.offset), t(eps), self._laws[key], np.int32(len(laws)), np.int32(f.radiates),
                np.int32(jacobian), np.int32(most), np.int32(n)))
        return q, dq, (rad if f.radiates else None)

    def quotient_device(self, a, b, out=None):
        """quotient's values in a device float64 array (out: one to reuse), for a rebuild on the device."""
        n, m = a.shape
        assert _pitch(a) == _pitch(b)
        out = self.cp.empty((n, m), dtype=np.float64) if out is None else out
        assert out.shape == (n, m) and out.flags.c_contiguous
        self._launch(self._fn("nl_quotient"), n, m, (out, a, b, _pitch(a), np.int32(n), np.int32(m)))
        return out

    def across(self, k, rows, w, wsum, axis: int):
        """solver.multigrid.coefficients._across of a device float64 array (the tables from the host)."""
        cp = self.cp
        k = cp.ascontiguousarray(k, dtype=np.float64)
        rows, w, wsum = (cp.asarray(np.ascontiguousarray(a)) for a in (rows, w, wsum))
        m, taps = rows.shape
        n, c = k.shape
        if axis == 0:
            out = cp.empty((m, c), dtype=np.float64)
            self._launch(self._fn("nl_across_rows"), m, c, (out, k, rows, w, wsum, np.int32(m), np.int32(c),
                                                            np.int32(taps)))
        else:
            out = cp.empty((n, m), dtype=np.float64)
            self._launch(self._fn("nl_across_cols"), n, m, (out, k, rows, w, wsum, np.int32(n), np.int32(c),
                                                            np.int32(m), np.int32(taps)))
        return out

    def trial(self, y, x, a, v, free, r0, c0) -> float:
        n, m = free.shape
        self._launch(self._fn("nl_trial"), n, m, (y, _pitch(y), x, _pitch(x), self.dtype.type(a), v, _pitch(v),
                                                  np.int32(n), np.int32(m), np.int32(r0), np.int32(c0)))
        return self.lowest(y, free, r0, c0)

    def lowest(self, u, free, r0, c0) -> float:
        n, m = free.shape
        if n == 0 or m == 0:
            return float("inf")
        if self._lowest is None:  # one pass, no temporary (a whole-field where() before)
            self._lowest = self.cp.ReductionKernel(
                "bool f, T u", "T y", "f ? u : (T)__longlong_as_double(0x7ff0000000000000LL)", "nl_nanmin(a, b)", "y = a",
                "(T)__longlong_as_double(0x7ff0000000000000LL)", "nl_lowest",
                preamble="template <typename T> __device__ T nl_nanmin(T a, T b) { return (a != a || a < b) ? a : b; }")
        return float(self.cp.min(self._lowest(free, u[r0:r0 + n, c0:c0 + m], axis=1)))  # (ROWWISE)

    def divide(self, out, y, k, r0, c0) -> None:
        n, m = k.shape
        self._launch(self._fn("nl_divide"), n, m, (out, _pitch(out), y, _pitch(y), k, _pitch(k), np.int32(n),
                                                   np.int32(m), np.int32(r0), np.int32(c0)))
