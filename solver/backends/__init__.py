"""Backend registry: a class per execution model, registered by decorator, filtered by what imports.

A backend owns the numerics on one device and never imports mpi4py. Regions are local
(r0, r1, c0, c1) index ranges into the padded array (see solver.core.decomp for the convention).
"""

from __future__ import annotations

import importlib
import time
from typing import ClassVar

import numpy as np

from ..core.errors import InputError

Region = tuple[int, int, int, int]
_REGISTRY: dict[str, type[Backend]] = {}
_MODULES = ("numpy_backend", "numba_backend", "cupy_backend")


def register(cls: type[Backend]) -> type[Backend]:
    _REGISTRY[cls.name] = cls
    return cls


def registry() -> dict[str, type[Backend]]:
    for mod in _MODULES:
        importlib.import_module(f"{__name__}.{mod}")
    return dict(_REGISTRY)


def backend_class(name: str, threads: int | None = None) -> type[Backend]:
    """The class for `name`, or an InputError that lists the known ones / says how to install. `threads`:
    the threads per rank the run will ask for, reserved before the availability check imports the library."""
    reg = registry()
    if name not in reg:
        raise InputError(f"backend.name: unknown backend {name!r}; known backends: {', '.join(reg)}")
    if threads:
        reg[name].reserve_threads(threads)
    reason = reg[name].unavailable()
    if reason:
        raise InputError(f"backend.name: backend {name!r} is not available here: {reason}")
    return reg[name]


class Backend:
    """Numerics on one device. Subclasses implement step(); the rest has host-memory defaults."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    on_gpu: ClassVar[bool] = False
    boundary = None  # solver.core.boundary.Fill of this rank's physical sides (set by the run); None: nothing to refill

    def __init__(self, settings, dtype: str, threads: int = 1, local_rank: int = 0, local_size: int = 1):
        """local_rank/local_size: this rank's place among the ranks on its node (GPU choice)."""
        self.settings = settings
        self.dtype = np.dtype(dtype)
        self.threads = threads
        self.local_rank, self.local_size = local_rank, local_size

    @classmethod
    def reserve_threads(cls, threads: int) -> None:
        """Make room for `threads` threads per rank before the library is imported (numba: its pool)."""

    @classmethod
    def unavailable(cls) -> str | None:
        """None when usable here, else the reason and the fix."""
        return None

    def compile_note(self) -> str | None:
        """A line to print before prepare() when it will compile for a long time (a cold cache), else None."""
        return None

    # memory ----------------------------------------------------------------------------------
    def asarray(self, host: np.ndarray):
        return np.array(host, dtype=self.dtype, order="C")

    def to_host(self, a) -> np.ndarray:
        return np.asarray(a)

    def coefficient(self, host: np.ndarray, aligned: int = 1):
        """A field the kernels read beside u (a source term, face coefficients), in this backend's memory with the
        layout of the fields it goes with (aligned: the column a GPU aligns, as zeros() takes it)."""
        return np.array(host, dtype=self.dtype, order="C")

    def halo_buffer(self, n: int):
        """A contiguous buffer MPI can read and write (host memory unless the subclass says otherwise)."""
        return np.empty(n, dtype=self.dtype)

    def pack(self, u, region: Region, buf) -> None:
        r0, r1, c0, c1 = region
        buf.reshape(r1 - r0, c1 - c0)[...] = u[r0:r1, c0:c1]

    def unpack(self, buf, u, region: Region) -> None:
        r0, r1, c0, c1 = region
        u[r0:r1, c0:c1] = buf.reshape(r1 - r0, c1 - c0)

    # numerics --------------------------------------------------------------------------------
    def prepare(self, u, u_new, w) -> None:
        """Compile or load kernels before the timed loop (numba JIT, CUDA modules)."""

    def step(self, out, u, w, region: Region) -> None:
        raise NotImplementedError

    def compute(self, out, u, w, regions: list[Region], timer) -> None:
        """Update `regions` of `out` from `u` and charge the time to the compute section."""
        t = time.perf_counter()
        for region in regions:
            self.step(out, u, w, region)
        timer.add("compute", t)

    def advance_timed(self, u, u_new, w, n: int, region: Region, timer, previous: bool = True, tap=None):
        """advance() timed; previous: a check follows, which needs the previous field (GPU time tiles:
        the fused residual; numba's time tiles: a plain last step; other host backends always leave it); tap: see
        advance (only where samples_inside)."""
        t = time.perf_counter()
        u, u_new = self.advance(u, u_new, w, n, region, tap=tap)
        self.synchronize()
        timer.add("compute", t)
        return u, u_new

    def checks_inside(self, shape) -> bool:
        """Whether advance_checked() computes a batch's checks inside its launches (a GPU's `chip`): the
        loop then ends batches at the other stops only."""
        return False

    def advance_checked(self, u, u_new, w, n: int, region: Region, timer, previous: bool, checks):
        """advance_timed(), with heat's checks at the steps `checks` (offsets in (0, n]): returns (current,
        previous, a function giving each check's value: max |update|, or 0 / inf where only NaN and Inf
        are looked for). Here one batch a check."""
        values, done = [], 0
        for c in checks:
            u, u_new = self.advance_timed(u, u_new, w, c - done, region, timer)
            values.append(self.start_max_update(u, u_new, region))
            done = c
        if done < n:
            u, u_new = self.advance_timed(u, u_new, w, n - done, region, timer, previous)
        return u, u_new, values

    def advance(self, u, u_new, w, n: int, region: Region, tap=None):
        """n steps with no halo exchange (one process); returns (current, previous). tap: refused (probes are sampled
        inside a batch only where samples_inside; here the loop ends a batch at each probe step and reads the
        field after it)."""
        if tap is not None:
            raise RuntimeError(f"{self.name}: advance() samples no probes inside its steps (samples_inside is False)")
        for _ in range(n):
            self.step(u_new, u, w, region)
            self.fill_boundary(u_new)
            u, u_new = u_new, u
        return u, u_new

    def samples_inside(self, shape) -> bool:
        """Whether advance() samples a batch's probes inside its launches (a tap): the loop then ends no batch at
        them. Only where that saves anything (numba's time tiles)."""
        return False

    @property
    def refills(self) -> bool:
        """Whether ghost layers change between steps (a Neumann side, or a periodic one this rank wraps alone)."""
        return self.boundary is not None and not self.boundary.constant

    def fill_boundary(self, u, timer=None) -> None:
        """After a step: refill the ghost layers on physical sides from u's new owned points (host slices;
        the time goes to `compute`). Nothing to do when every physical side is Dirichlet."""
        if self.refills:
            t = time.perf_counter()
            self.boundary.apply(u)
            if timer is not None:
                timer.add("compute", t)

    def tile_steps(self, shape) -> int:
        """Steps one launch of advance() computes (time tiling on a GPU); stops at multiples of it keep
        every launch a whole tile."""
        return 1

    def plan(self, lengths) -> None:
        """Before the timed loop: the batch lengths advance() will be given (GPUs compile tile depths)."""

    def settle(self, timer) -> None:
        """Wait for the device's queued work, charging the wait to no section (device backends time
        their work with events); host backends have nothing queued."""

    def max_update(self, a, b, region: Region) -> float:
        """max |a - b| over the region; inf when any value there is NaN or Inf."""
        r0, r1, c0, c1 = region
        m = float(np.max(np.abs(a[r0:r1, c0:c1] - b[r0:r1, c0:c1]), initial=0.0))
        return m if np.isfinite(m) else float("inf")

    def start_max_update(self, a, b, region: Region):
        """max_update, started: returns a function that gives its value. A device backend enqueues the
        reduction and its copy to the host and returns at once (the function waits for them); a host
        backend reduces now."""
        value = self.max_update(a, b, region)
        return lambda: value

    def charge_host(self, timer, section: str, start: float) -> None:
        """Host work since `start`, charged to `section` (a device backend charges none while its
        kernels, which events time, run all along)."""
        timer.add(section, start)

    def synchronize(self) -> None:
        pass

    # multigrid (solver.multigrid): the verbs of a cycle, as array expressions (mg_ops, the reference) ------
    def zeros(self, shape: tuple[int, int], aligned: int = 1):
        """A zeroed 2-D field in this backend's memory, written now (clear): its pages are taken at set-up, not by the
        first sweep of the timed loop (np.zeros' pages are taken on first use)."""
        a = np.empty(shape, dtype=self.dtype)
        self.clear(a)
        return a

    def clear(self, a) -> None:
        """Set every point of a field, ghost layers included, to zero."""
        a[...] = 0

    def table(self, a: np.ndarray, weights: bool = False):
        """An index (int64) or weight (the field's dtype) table in this backend's memory."""
        return np.ascontiguousarray(a, dtype=self.dtype if weights else np.int64)

    def nonlinear_kernels(self, region: Region):
        """A module of fused sweeps for the nonlinear operator (solver.backends.numba_nl), ready for a kernel over
        `region`, or None: the operator's array expressions (solver.nonlinear.operator) are the reference."""
        return None

    mg_tiles = False  # a backend with `sweeps(out, u, g, sweeps, region, tail)`: two sweeps in one pass (cupy_mg)
    mg_tails = False  # a backend with `mg_record(body)` and `mg_tail(program)`: coarse levels in one block (cupy_mg)

    def smooth(self, out, u, g, w, om, region: Region) -> None:
        """One weighted Jacobi sweep with right-hand side g (None: zero): mg_ops.smooth, or mg_ops.vsmooth where
        w has coefficient fields."""
        from . import mg_ops

        (mg_ops.vsmooth if w.fields else mg_ops.smooth)(out, u, g, w, om, region)

    def residual(self, r, u, g, w, region: Region) -> None:
        from . import mg_ops

        (mg_ops.vresidual if w.fields else mg_ops.residual)(r, u, g, w, region)

    def restrict(self, gc, r, region: Region, tables) -> None:
        """tables: (ys, yc, yw, xs, xc, xw, scale) from table() (solver.multigrid.grids.Down)."""
        from . import mg_ops

        mg_ops.restrict(gc, r, region, *tables)

    def prolong(self, u, e, region: Region, tables) -> None:
        """tables: (ys, yw, xs, xw) from table() (solver.multigrid.grids.Up)."""
        from . import mg_ops

        mg_ops.prolong(u, e, region, *tables)

    def prolong_op(self, u, e, region: Region, tables) -> None:
        """Per-point weights (alpha a field): tables (ys, xs, wy0, wy1, wx0, wx1) (solver.multigrid.opdep)."""
        from . import mg_ops

        mg_ops.prolong_op(u, e, region, *tables)

    def restrict_op(self, gc, r, region: Region, tables) -> None:
        """tables (ys, yc, xs, xc, ty, tx, origin, area, wy0, wy1, wx0, wx1) (solver.multigrid.opdep)."""
        from . import mg_ops

        mg_ops.restrict_op(gc, r, region, *tables)

    def solve(self, e, r, minv, region: Region) -> None:
        from . import mg_ops

        mg_ops.solve(e, r, minv, region)

    def max_abs(self, a, region: Region) -> float:
        from . import mg_ops

        return mg_ops.max_abs(a, region)

    def residual_max(self, r, u, g, w, region: Region) -> None:
        """The stop test: r = g - A u over the region (r None: not kept) and max |r| there (inf for NaN or Inf), which
        norm() gives; backends with a kernel for it make one pass of it (a device enqueues it, norm() waits)."""
        r = np.empty_like(u) if r is None else r
        self.residual(r, u, g, w, region)
        self._norm = self.max_abs(r, region)

    def norm(self) -> float:
        """The value of the last residual_max."""
        return self._norm

    def axpy(self, y, a, x, region: Region) -> None:
        """y = y + a*x (conjugate gradients)."""
        from . import mg_ops

        mg_ops.axpy(y, a, x, region)

    def axpys(self, y, coefs, xs, region: Region) -> None:
        """y = y + a_0 x_0 + a_1 x_1 + ... in that order (axpys one after another; a backend may take several terms
        a pass, the same terms in the same order)."""
        for a, x in zip(coefs, xs):
            self.axpy(y, a, x, region)

    def axpy_max(self, y, a, x, region: Region) -> float:
        """y = y + a*x, and max |y| over the region afterwards (inf for NaN or Inf)."""
        self.axpy(y, a, x, region)
        return self.max_abs(y, region)

    def combine(self, y, x, a, v, region: Region) -> None:
        """y = (0 + x) + a*v over the region (y's other points 0): clear and two axpys, each backend's own (a backend
        may make it one pass with the same terms)."""
        self.clear(y)
        self.axpy(y, y.dtype.type(1.0), x, region)
        self.axpy(y, a, v, region)

    def scale(self, y, a, x, region: Region) -> None:
        """y = 0 + a*x over the region (y's other points 0): clear and an axpy (or one pass, the same terms)."""
        self.clear(y)
        self.axpy(y, a, x, region)

    def xpay(self, y, x, b, region: Region) -> None:
        """y = x + b*y."""
        from . import mg_ops

        mg_ops.xpay(y, x, b, region)

    def products_max(self, a, b, region: Region) -> float:
        from . import mg_ops

        return mg_ops.products_max(a, b, region)

    def folded_sums(self, a, b, region: Region, s1: float, s2: float) -> tuple[float, float]:
        from . import mg_ops

        return mg_ops.folded_sums(a, b, region, s1, s2)

    def fill(self, u, fill) -> None:
        """The ghost layers of `u` by the rules of `fill` (solver.core.boundary.Fill; its depth is u's)."""
        fill.apply(u)

    def timed(self, timer, fn) -> None:
        """Run fn (kernels on this device) and charge its time to `compute`."""
        t = time.perf_counter()
        fn()
        timer.add("compute", t)

    def get(self, a, region: Region) -> np.ndarray:
        """A host copy of a region."""
        r0, r1, c0, c1 = region
        return np.array(self.to_host(a[r0:r1, c0:c1]))

    def put(self, a, region: Region, host: np.ndarray) -> None:
        """Write a host array into a region."""
        r0, r1, c0, c1 = region
        a[r0:r1, c0:c1] = host

    # reporting -------------------------------------------------------------------------------
    def describe(self) -> dict:
        return {"backend": self.name, "threads": self.threads, "device": "cpu"}

    def copy_bandwidth(self, nbytes: int, repeats: int = 5) -> float:
        """STREAM-like copy on this backend, bytes read + written per second (median of repeats)."""
        n = max(nbytes // 8, 1)
        a = np.random.default_rng(0).random(n)
        b = np.empty_like(a)
        times = []
        for _ in range(repeats + 1):
            t = time.perf_counter()
            np.copyto(b, a)
            times.append(time.perf_counter() - t)
        return 2 * a.nbytes / float(np.median(times[1:]))
