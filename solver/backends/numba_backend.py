"""numba: prange over rows, a unit-stride inner loop LLVM vectorises; `threads: 1` is the compiled scalar baseline."""

from __future__ import annotations

import os
import time

import numpy as np

from ..core.errors import InputError
from ..core.machine import cpu_count
from . import Backend, register

DEFAULT_TIME_TILE = 4  # steps fused per sweep on one process; measured in BENCHMARKS.md


@register
class NumbaBackend(Backend):
    name = "numba"
    summary = "numba parallel CPU (prange over rows, SIMD inner loop)"

    def __init__(self, settings, dtype: str, threads: int = 1, **node):
        super().__init__(settings, dtype, threads, **node)
        _ensure_thread_pool(threads)
        import numba

        numba.set_num_threads(threads)
        from . import numba_kernels

        self.k = numba_kernels

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import numba  # noqa: F401
        except ImportError as exc:
            return f"numba does not import ({exc}); install it with `pip install numba`"
        return None

    def compile_note(self) -> str | None:
        """Said when numba's on-disk cache holds none of the kernels prepare() needs (first run, new source)."""
        kernels = [self.k.step, self.k.max_update] + ([self.k.fused] if self.time_tile > 1 else [])
        try:
            cold = any(not k._cache._cache_file._load_index() for k in kernels)  # numba's index; {} when stale
        except Exception:  # noqa: BLE001 - numba internals moved: say it anyway
            cold = True
        return "compiling kernels: about 30 s the first time (numba caches them for later runs)" if cold else None

    def prepare(self, u, u_new, w) -> None:
        """Compile (or load from cache) for this dtype on a tiny array, outside the timed loop."""
        tiny = np.zeros((3, 3), dtype=self.dtype)
        self.k.step(tiny.copy(), tiny, w.wc, w.wx, w.wy, 1, 2, 1, 2)
        self.k.max_update(tiny, tiny, 1, 2, 1, 2)
        if self.time_tile > 1:
            self.k.fused(tiny.copy(), tiny, w.wc, w.wx, w.wy, 2, 1)

    def step(self, out, u, w, region) -> None:
        self.k.step(out, u, w.wc, w.wx, w.wy, *region)

    def advance(self, u, u_new, w, n: int, region):
        """n steps on one process: time tiles of `time_tile` steps per sweep, then plain steps, so that
        the last step is always a plain one and `u_new` holds the previous field (for the checks)."""
        k = self.time_tile
        full = region == (1, u.shape[0] - 1, 1, u.shape[1] - 1)
        tiles = (n - 1) // k if (k > 1 and full and n > 1) else 0
        for _ in range(tiles):
            self.k.fused(u_new, u, w.wc, w.wx, w.wy, k, self.threads)
            u, u_new = u_new, u
        return super().advance(u, u_new, w, n - tiles * k, region)

    @property
    def time_tile(self) -> int:
        t = getattr(self.settings, "time_tile", None)
        return DEFAULT_TIME_TILE if t is None else t

    def max_update(self, a, b, region) -> float:
        return float(self.k.max_update(a, b, *region))

    def describe(self) -> dict:
        import numba

        return {"backend": self.name, "threads": self.threads, "device": "cpu", "time_tile": self.time_tile,
                "threading_layer": _threading_layer(), "numba": numba.__version__}

    def copy_bandwidth(self, nbytes: int, repeats: int = 5) -> float:
        a = np.random.default_rng(0).random(max(nbytes // 8, 1))
        b = np.empty_like(a)
        self.k.copy(b, a, 1.0)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            self.k.copy(b, a, 1.0)
            times.append(time.perf_counter() - t)
        return 2 * a.nbytes / float(np.median(times))


def _ensure_thread_pool(threads: int) -> None:
    """numba sizes its pool at import from NUMBA_NUM_THREADS (default: all cores); asking for more
    threads than cores (oversubscription, on purpose) needs a larger pool before numba is imported."""
    import sys

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
