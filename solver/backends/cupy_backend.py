"""CuPy backend: the field lives on one NVIDIA GPU and is updated by CUDA C kernels (solver/backends/kernels/*.cu).

Device: the node-local rank picks the GPU (local_rank % GPUs visible); more ranks per node than GPUs
needs parallel.share_gpus (check_placement).

Memory: every 2-D field is a view into a pitched allocation: rows padded to a multiple of 128 bytes,
column 1 (the first owned column) aligned to 128 bytes, and at least 4 spare columns after the last,
so the vector kernels load 16 bytes at a time without misalignment. Uploads happen in asarray()
(timed as host-to-device), downloads only in to_host() (device-to-host): output, checkpoints, verify.

Streams: `main` carries the kernels, reductions and copies; `edge` (highest priority) carries the edge
strips and their halo traffic in the overlap halo mode. The GPU exchanger (solver/parallel/gpu_exchange.py)
sets `active`, the stream compute() launches on, and orders the two with events.

Batching: advance() replays CUDA graphs of GRAPH_STEPS captured steps (plus a two-step graph and a
single launch for the remainder), so the host touches the GPU once per GRAPH_STEPS steps. With the
on-chip kernel (`chip`: the whole field held in registers and shared memory) advance(n) is one
persistent launch per k steps (the first loads the field, the last stores it; no graph). With a
time-tiled kernel (`wave`, `wave2`, `wave2a`: k steps per launch) advance(n) is one graph of n // k tiles, a
tile of n % k steps when that is 2 or more, or one single step when it is 1; when a check follows
(advance(previous=True)) the last tile also folds max |level k - level k-1| into a device word (the
fused residual), so the convergence / NaN check after it reads one number instead of reducing two
fields (folding costs 17% of a tile, so batches that end at a poll leave it out).

Physics as data (solver.core.physics.Weights: a source term, face coefficients in the flux or the Jacobi
form): coefficient() puts each field on the device with u's pitch and alignment, and every one-step variant
and the streaming time-tiled ones (wave, wave2, wave2a) read them, compiled in by defines (cupy_kernels.options:
a plain case compiles today's modules). `chip` reads none: advance() then runs the time tiles of tiled_choice,
and describe() says which kernel took the data and why (the record's kernel entry, `with_data`).

Deep halos (several ranks, solver.parallel.deep): tile_for() gives the depth, plan_tiles() compiles
every depth, tiled() launches the tiled kernel on a deep-halo field for the region it is given. Single steps (step/compute: the
halo paths) use a one-step kernel even when the chosen variant is tiled.

Checks: max_update() runs kernels/maxdiff.cu (a coalesced reduction, about one copy of two fields);
CuPy's ReductionKernel on the pitched 2-D views took 0.22 s at 16384^2 (the constant in the timed
loop of issue 12).

Timing: kernels are bracketed by CUDA events; their durations reach the Timer (section `compute`)
when the events have completed, at the next synchronisation (max_update, to_host, synchronize).
The host's own wait for the GPU (settle(), before checks and output) is charged to no section: the
events already count that interval as compute, so the sections add up to the loop.
With output.trace they also appear on a `gpu` track of the trace, placed on the host clock through an
anchor event recorded in prepare().
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from ..core.errors import InputError
from ..core.physics import update
from . import Backend, register
from . import cupy_kernels as gk
from .cupy_mg import CupyMultigrid, fill_specs

ALIGN = 128  # bytes: row pitch multiple and alignment of column 1
SPARE = 4  # columns left after the last one (vector loads past the region edge stay in the allocation)
GRAPH_STEPS = 32  # steps per replay of the large CUDA graph (even)


@register
class CupyBackend(CupyMultigrid, Backend):
    name = "cupy"
    summary = "CuPy RawKernels on one NVIDIA GPU (naive, tiled, rows, vec, expr)"
    on_gpu = True

    def __init__(self, settings, dtype: str, threads: int = 1, local_rank: int = 0, local_size: int = 1):
        super().__init__(settings, dtype, threads, local_rank=local_rank, local_size=local_size)
        import cupy

        self.cp = cupy
        rt = cupy.cuda.runtime
        self.device_index = local_rank % rt.getDeviceCount()
        cupy.cuda.Device(self.device_index).use()
        props = rt.getDeviceProperties(self.device_index)
        self.gpu_name = props["name"].decode()
        self.sms = props["multiProcessorCount"]
        self.pci = f"{props['pciDomainID']:04x}:{props['pciBusID']:02x}:{props['pciDeviceID']:02x}"
        self.main = cupy.cuda.Stream(non_blocking=True)
        self.edge = cupy.cuda.Stream(non_blocking=True, priority=_highest_priority(rt))
        self.active = self.main
        self.requested = (settings.kernel, tuple(settings.block) if settings.block else None,
                          getattr(settings, "time_tile", None))
        self.fmad = False
        self.use_graphs = True
        self._kernels: dict = {}  # (variant, block, fmad, k) -> compiled function
        self._choice: dict = {}  # local interior shape -> (variant, block, k, source)
        self._step: dict = {}  # local interior shape -> (variant, block) for single steps
        self._shape = None  # padded shape of the run's fields (asarray, prepare): plan() and tile_for() use it
        self.chosen: int | None = None  # the time tile tile_for() chose (deep halos under MPI)
        self._tile_used = 1  # the deepest time tile advance() has launched (the record's time_tile)
        self._graphs: dict = {}
        self._events: list = []  # free CUDA events
        self.pending: list = []  # (charge, section, e0, e1, timer, step, track)
        self._anchor = None
        self._edge_used = False
        self._joined = cupy.cuda.Event(disable_timing=True)
        self._main_mark = cupy.cuda.Event(disable_timing=True)
        self.transfer = {"h2d_s": 0.0, "h2d_bytes": 0, "d2h_s": 0.0, "d2h_bytes": 0}
        self.smem_optin = props.get("sharedMemPerBlockOptin") or _attribute(rt, 97, self.device_index)  # a block's most
        self.l2_bytes = props.get("l2CacheSize", 0)
        self._chip: dict = {}  # chip layout -> (row halos, column halos, flags): device scratch of `chip`
        self._plans: dict = {}  # padded shape -> ChipPlan: what a `chip` launch needs, worked out once
        self._word = cupy.zeros(1, dtype=np.uint32 if self.dtype.itemsize == 4 else np.uint64)  # max |a - b| bits
        self._resid = None  # (current ptr, other ptr, region) whose max_update is in _word (fused residual)
        self._tail = cupy.cuda.Event(disable_timing=True)  # the end of the last batch (advance_timed): busy()
        self._tailed = False
        self._check_words = cupy.zeros(0, dtype=self._word.dtype)  # NaN/Inf flags of heat's checks in a `chip` batch
        self._pinned: list = []  # (event, pinned host memory, device words) of copies in flight: kept until the event
        self._data = gk.PLAIN  # (SRC, FORM, CAP) of the weights prepare() was given: plan() compiles for them
        self._data_paths: dict = {}  # local interior shape -> {data: what took it} (the record's kernel entries)

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import cupy
        except ImportError:
            return ("cupy is not installed; install the wheel for your CUDA version, e.g. `pip install cupy-cuda12x` "
                    "(or `pip install -e .[gpu]`), on a machine with an NVIDIA GPU")
        try:
            n = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001 - any CUDA failure means no usable GPU
            return f"no usable CUDA GPU ({str(exc).splitlines()[0]}); run on a machine with an NVIDIA GPU and driver"
        return None if n > 0 else "no CUDA GPU found; run on a machine with an NVIDIA GPU"

    @classmethod
    def check_placement(cls, ranks_on_node: int, parallel) -> None:
        """More ranks on a node than GPUs visible is an error unless the case allows sharing."""
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        if ranks_on_node > n and not parallel.share_gpus:
            raise InputError(f"parallel.share_gpus: {ranks_on_node} ranks on this node but {n} GPU(s) visible; "
                             f"start at most {n} rank(s) per node, or set parallel.share_gpus: true to let ranks share a GPU")

    # memory ------------------------------------------------------------------------------------
    def zeros(self, shape: tuple[int, int], aligned: int = 1):
        """A zeroed (rows, cols) view into a pitched allocation (see the module docstring); column `aligned`
        on 128 bytes (deep-halo fields: the owned block's first column, i.e. column 1 of their one-layer
        views), at least 16 bytes of the allocation before column 0 (vector loads of C's ring, wave.cu)."""
        rows, cols = shape
        per = ALIGN // self.dtype.itemsize
        off = (-aligned) % per
        off += per if off * self.dtype.itemsize < 16 else 0
        pitch = -(-(off + cols + SPARE) // per) * per
        with self.main:
            base = self.cp.zeros((rows, pitch), dtype=self.dtype)
        self.main.synchronize()
        view = base[:, off:off + cols]
        assert cols <= aligned or view[:, aligned:].data.ptr % ALIGN == 0, "pitched allocation is not aligned"
        return view

    def asarray(self, host: np.ndarray):
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.ndim != 2:
            return self.cp.asarray(host)
        a = self.zeros(host.shape)
        self._shape = host.shape  # the run's fields: tile_for() chooses for them
        t = time.perf_counter()
        self.copy2d(a, host, "h2d", self.main)
        self.main.synchronize()
        self.transfer["h2d_s"] += time.perf_counter() - t
        self.transfer["h2d_bytes"] += host.nbytes
        return a

    def coefficient(self, host: np.ndarray, aligned: int = 1):
        """A field the kernels read beside u (a source term, face coefficients): the host array rounded to the
        dtype, in a pitched allocation made as zeros(shape, aligned) makes u's, so pitch and alignment are u's
        (the vector kernels load it as they load u)."""
        host = np.ascontiguousarray(host, dtype=self.dtype)
        a = self.zeros(host.shape, aligned)
        t = time.perf_counter()
        self.copy2d(a, host, "h2d", self.main)
        self.main.synchronize()
        self.transfer["h2d_s"] += time.perf_counter() - t
        self.transfer["h2d_bytes"] += host.nbytes
        return a

    def to_host(self, a) -> np.ndarray:
        self.join()
        t = time.perf_counter()
        if a.ndim == 2 and a.strides[1] == a.itemsize:
            out = np.empty(a.shape, dtype=a.dtype)
            self.copy2d(out, a, "d2h", self.main)
            self.main.synchronize()
        else:
            out = self.cp.asnumpy(a, stream=self.main)
            self.main.synchronize()
        self.transfer["d2h_s"] += time.perf_counter() - t
        self.transfer["d2h_bytes"] += out.nbytes
        return out

    def copy2d(self, dst, src, kind: str, stream) -> None:
        """Asynchronous 2-D copy on `stream` between row-major arrays with unit column stride (any row pitch).
        kind: h2d, d2h or d2d; host arrays must be pinned for the copy to be asynchronous."""
        rt = self.cp.cuda.runtime
        kinds = {"h2d": rt.memcpyHostToDevice, "d2h": rt.memcpyDeviceToHost, "d2d": rt.memcpyDeviceToDevice}
        rows, cols = src.shape if src.ndim == 2 else (1, src.shape[0])
        rt.memcpy2DAsync(_ptr(dst), _pitch(dst), _ptr(src), _pitch(src), cols * src.itemsize, rows, kinds[kind],
                         stream.ptr)

    def halo_buffer(self, n: int):
        """Pinned host memory, so device copies into it are asynchronous and MPI can read it."""
        import cupyx

        return cupyx.empty_pinned((n,), dtype=self.dtype)

    def pack(self, u, region, buf) -> None:
        r0, r1, c0, c1 = region
        self.join()
        self.copy2d(buf.reshape(r1 - r0, c1 - c0), u[r0:r1, c0:c1], "d2h", self.main)
        self.main.synchronize()

    def unpack(self, buf, u, region) -> None:
        r0, r1, c0, c1 = region
        self.join()
        self.copy2d(u[r0:r1, c0:c1], buf.reshape(r1 - r0, c1 - c0), "h2d", self.main)
        self.main.synchronize()

    # kernels -----------------------------------------------------------------------------------
    def configure(self, kernel: str | None, block=None, fmad: bool = False, time_tile: int | None = None) -> None:
        """Choose the variant/block/time tile (None: tuned or default) and FMA contraction; drops cached graphs."""
        problem = gk.settings_problem(kernel, block, time_tile)
        if problem:
            raise InputError(problem)
        self.requested = (kernel, tuple(block) if block else None, time_tile)
        self.fmad = fmad
        self._choice.clear()
        self._step.clear()
        self._graphs.clear()
        self._plans.clear()

    def choice(self, shape: tuple[int, int]) -> tuple[str, tuple | None, int, str]:
        """(variant, block, steps per launch, source) for a padded array of this shape; source: case,
        tuned or default."""
        key = (shape[0] - 2, shape[1] - 2)
        if key not in self._choice:
            self._choice[key] = self._resolve(key)
        return self._choice[key]

    def tile_steps(self, shape) -> int:
        """Steps one launch of advance() computes for a padded array of this shape (1: untiled, and with
        ghosts that change between steps: the tiled kernels keep ghost layers constant; 1 for `chip`,
        whose launches take any number of steps, so the loop's polls need not fall on multiples of k)."""
        variant, _, k, _ = self.choice(shape)
        return 1 if self.refills or variant in gk.ON_CHIP else k

    def _resolve(self, interior: tuple[int, int]):
        """What the case fixes, else the tune's entry for this grid, else `chip` where the field fits
        on chip, else the tune's entry for the nearest grid (a tiled variant's segment rows refitted
        to this one), else the defaults."""
        from .tuned import lookup

        variant, block, k = self.requested
        if variant is not None and variant not in gk.MULTI:
            k = 1
        if variant is not None and (block is not None or variant == "expr") and k is not None:
            return self._checked(variant, block, k, "case", interior)
        skip = () if self.chip_layout(interior) else gk.ON_CHIP
        tuned = lookup(self.gpu_name, self.dtype.name, interior, variant, k, exact=True, skip=skip)
        if tuned is not None:
            return tuned[0], block or tuned[1], tuned[2], "tuned"
        if variant in gk.ON_CHIP or (variant is None and k is None and not skip):
            return self._checked("chip", block, k or gk.CHIP_STEPS, "default", interior)
        tuned = lookup(self.gpu_name, self.dtype.name, interior, variant, k, skip=skip)
        if tuned is not None:
            refit = tuned[0] in gk.TILED and block is None  # segment rows belong to the grid they were tuned on
            return tuned[0], block or (None if refit else tuned[1]) or self._default_block(tuned[0], interior, tuned[2]), \
                tuned[2], "tuned"
        if variant is None:
            variant = gk.DEFAULT_STEP_VARIANT if k == 1 else gk.DEFAULT_VARIANT
        if k is None:
            k = gk.DEFAULT_TILE if variant in gk.TILED else 1
        return variant, block or self._default_block(variant, interior, k), k, "default"

    def _checked(self, variant, block, k, source, interior):
        """`chip` must fit the grid on chip (a one-line error naming the way out otherwise)."""
        block = block or self._default_block(variant, interior, k)
        if variant in gk.ON_CHIP and self.chip_layout(interior, block) is None:
            mib = interior[0] * interior[1] * self.dtype.itemsize / 2**20
            raise InputError(f"backend.kernel: chip: the {interior[0]} x {interior[1]} field ({mib:.0f} MiB) does not fit in "
                             f"the registers and shared memory of {self.sms} multiprocessors with block {list(block)}; "
                             "use kernel wave2 (or null: chosen by size)")
        return variant, block, k, source

    def _default_block(self, variant, interior, k):
        return gk.default_block(variant, self.dtype, interior, self.sms, k, self._warps_per_sm(variant, k))

    def _warps_per_sm(self, variant, k) -> int:
        """Resident warps per multiprocessor of a tiled variant's compiled kernel (from its registers:
        they bound it, at most 2 KiB of shared memory a warp), else WARPS_PER_SM."""
        if variant not in gk.TILED:
            return gk.WARPS_PER_SM
        bx = gk.DEFAULT_BLOCK[variant][0]
        fn = self._function(variant, (bx, 1), k)
        regs = getattr(fn, "num_regs", 0)  # registers are allocated 8 a thread at a time
        return min(64, 65536 // (-(-regs // 8) * 8 * 32)) if regs else gk.WARPS_PER_SM

    def chip_layout(self, interior, block=None):
        """chip_layout for this GPU: (gx, gy, threads, rows per tile, shared memory bytes) or None; for
        two levels a pass (v7) where chip_levels says so."""
        block = block or gk.default_block("chip", self.dtype, interior, self.sms)
        return gk.chip_layout(self.dtype, interior, self.sms, block, self.smem_optin or 48 * 1024,
                              self.chip_levels(interior, block))

    def chip_levels(self, interior, block=None) -> int:
        """Levels a pass of `chip` advances: 2 (v7) where gk.chip_levels_wanted asks for it and its
        layout fits (one block across, tiles of 2 rows or more, its shared memory), else 1 (v6)."""
        block = block or gk.default_block("chip", self.dtype, interior, self.sms)
        if gk.chip_levels_wanted(self.dtype) == 2 and gk.chip_layout(self.dtype, interior, self.sms, block,
                                                           self.smem_optin or 48 * 1024, 2) is not None:
            return 2
        return 1

    def step_choice(self, shape) -> tuple[str, tuple | None]:
        """(variant, block) for single steps: the choice itself unless it takes several steps per
        launch, then the tuned (else default) one-step kernel."""
        variant, block, _, _ = self.choice(shape)
        if variant not in gk.MULTI:
            return variant, block
        key = (shape[0] - 2, shape[1] - 2)
        if key not in self._step:
            from .tuned import lookup

            tuned = lookup(self.gpu_name, self.dtype.name, key, None, 1)
            self._step[key] = tuned[:2] if tuned else (gk.DEFAULT_STEP_VARIANT, gk.DEFAULT_BLOCK[gk.DEFAULT_STEP_VARIANT])
        return self._step[key]

    def tiled_choice(self, shape, data: tuple[int, int, int] = gk.PLAIN) -> tuple[str, tuple, int]:
        """(variant, block, k) of the time tiles that stream through memory (tile(), deep halos): the
        choice, or the default tiled variant where the choice is `chip` (which takes no regions). With face
        fields (`data`: gk.data_of) and no time tile asked for, the default's k is gk.data_tile's (its block
        refitted), a tuned one's k its own."""
        variant, block, k, source = self.choice(shape)
        interior = (shape[0] - 2, shape[1] - 2)
        if variant in gk.ON_CHIP:
            variant, block, k, source = gk.DEFAULT_VARIANT, None, gk.DEFAULT_TILE, "default"
        fitted = gk.data_tile(data)
        if fitted and source == "default" and self.requested[2] is None and variant in gk.TILED:
            block, k = None, fitted
        return variant, block or self._default_block(variant, interior, k), k

    def _function(self, variant: str, block, k: int = 1, data: tuple[int, int, int] = gk.PLAIN):
        """The compiled kernel of a variant for a block, time tile and the data it reads (gk.data_of)."""
        if variant in gk.TILED:
            block = (block[0], 0)  # segment rows are a launch argument
        key = (variant, block, self.fmad, k) + ((data,) if data != gk.PLAIN else ())
        if key not in self._kernels:
            opts = gk.options(variant, self.dtype, block, self.fmad, k, data=data)
            module = self.cp.RawModule(code=gk.source(variant), options=opts)
            self._kernels[key] = module.get_function(gk.ENTRY[variant])
        return self._kernels[key]

    def tile(self, out, u, w, k: int, region, store=None, stream=None, resid: bool = False, shape=None) -> None:
        """k steps in one launch of the chosen tiled kernel: every point of `region` is updated at each
        level, every other point keeps its value; `store` (default: region, else a block inside it) is
        written to `out`. Ghost depth k: with `region` the owned block grown by k halo rows/columns
        received from neighbours and `store` the owned block, this is the k steps between two
        exchanges (kernels/wave.cu). resid: fold max |level k - level k-1| over `store` into the
        device word (zeroed first). shape: the padded shape whose kernel choice applies (default u's)."""
        store = store or region
        stream = stream or self.main
        if store[1] <= store[0] or store[3] <= store[2]:
            return
        variant, block, _ = self.tiled_choice(shape or u.shape, gk.data_of(w))
        fn = self._function(variant, block, k, gk.data_of(w))
        if resid:
            self._zero_word(stream)
        fn(*gk.tile_launch(variant, self.dtype, block, out, u, w, k, region, store, self._word if resid else np.uint64(0)),
           stream=stream)
        self._resid = None

    # deep halos (solver.parallel.deep: k-deep halos exchanged once every k steps) ---------------------
    def tile_for(self, rows: int) -> int:
        """The time tile of this run's fields (the choice for their shape: case, tuned or default; 1 for a
        one-step kernel): the depth of deep halos under MPI, which DeepTiles caps to the thinnest block."""
        self.chosen = self.tiled_choice(self._shape)[2] if self._shape is not None and not self.refills else 1
        return self.chosen

    def plan_tiles(self, depths) -> None:
        """Compile the tiled kernel at every depth a deep-halo tile may take, before the timed loop."""
        variant, block, _ = self.tiled_choice(self._shape)
        for d in depths:
            if d > 1 and variant in gk.TILED:
                self._function(variant, block, d)

    def tiled(self, out, u, w, d: int, target, valid, fixed, timer=None) -> None:
        """d steps of `target` in one launch on the active stream (solver.parallel.deep's verb, as the
        numba backend's): `valid` holds data at the tile's start, `fixed` marks physical sides (constant
        ghosts). Launches `tile` with C = tile_region(valid, fixed) and O = target. The kernel aligns
        its vectors on column 1, a deep field on the owned block's first column (zeros(aligned=)): both
        fields are passed from the column that makes column 1 16-byte aligned, regions shifted to match.
        GPU time reaches `compute` through CUDA events, the host's launch time `other` (as compute())."""
        r0, r1, c0, c1 = target
        if r1 <= r0 or c1 <= c0:
            return
        t = time.perf_counter()
        shift = (-(u.data.ptr + u.itemsize) % 16) // u.itemsize
        assert shift == (-(out.data.ptr + out.itemsize) % 16) // out.itemsize, "deep fields aligned differently"
        s = self.active
        self._edge_used |= s is self.edge
        self._tile_used = max(self._tile_used, d)
        e0 = self._record(s)
        move = lambda r: (r[0], r[1], r[2] - shift, r[3] - shift)  # noqa: E731
        self._note_data(self._shape, w, self.tiled_choice(self._shape, gk.data_of(w))[0], d)
        self.tile(out[:, shift:], u[:, shift:], gk.cut(w, shift), d, move(gk.tile_region(valid, fixed)), move(target),
                  stream=s, shape=self._shape)
        if timer is not None:
            self._track(timer.charge, "compute", e0, self._record(s), timer, "gpu")
            timer.add("other", t)

    def _zero_word(self, stream) -> None:
        rt = self.cp.cuda.runtime
        rt.memsetAsync(self._word.data.ptr, 0, self._word.nbytes, stream.ptr)

    def launch(self, out, u, w, region, stream) -> None:
        """One update of `region` of `out` from `u` (and w's fields), enqueued on `stream` (gk.step_launch: the
        arguments, and the vector kernel's alignment)."""
        r0, r1, c0, c1 = region
        if r1 <= r0 or c1 <= c0:
            return
        self._resid = None
        variant, block = self.step_choice(u.shape)
        data = gk.data_of(w)
        if data != gk.PLAIN:
            self._note_data(u.shape, w, variant, 1)
        with stream:
            if variant == "expr":
                return update(out, u, w, region)
            self._function(variant, block, 1, data)(*gk.step_launch(variant, self.dtype, block, out, u, w, region))

    def _note_data(self, shape, w, kernel: str, k: int) -> None:
        """Record which kernel a batch or step with data fields took (describe(): the record's kernel entry), and
        why, where the choice for the shape cannot read them (gk.DATA_FALLBACK)."""
        data = gk.data_of(w)
        if data == gk.PLAIN:
            return
        seen = self._data_paths.setdefault((shape[0] - 2, shape[1] - 2), {})
        key = (gk.data_words(data), kernel, k)
        if key not in seen:
            chosen = self.choice(shape)[0]
            seen[key] = {"reads": key[0], "kernel": kernel, "time_tile": k,
                         "fallback": gk.DATA_FALLBACK.get(chosen) if chosen != kernel and k > 1 else None}

    # boundary ----------------------------------------------------------------------------------
    def fill_boundary(self, u, timer=None) -> None:
        """The ghost layers of physical sides (Neumann, one-rank periodic) by kernels/boundary.cu on `main`,
        after everything enqueued on `edge` (the edge strips it reads); kernel time from events."""
        if not self.refills:
            return
        self.join()
        if timer is None:
            return self._fill(u, self.main)
        t = time.perf_counter()
        e0 = self._record(self.main)
        self._fill(u, self.main)
        self._track(timer.charge, "compute", e0, self._record(self.main), timer, "gpu")
        timer.add("other", t)

    def _fill(self, u, stream) -> None:
        """The boundary rules' launches (cupy_mg.fill_specs: plain numbers, or values and gains along the sides,
        uploaded once) on `stream`."""
        for entry, grid, threads, args in fill_specs(u, self.boundary, self._fill_table):
            self._fill_function(entry)(grid, threads, args, stream=stream)

    def _fill_function(self, entry: str = gk.FILL_ENTRIES[0]):
        key = ("fill", self.dtype.name, entry)
        if key not in self._kernels:
            module = self._kernels.get(("fill", self.dtype.name))
            if module is None:
                module = self._kernels[("fill", self.dtype.name)] = self.cp.RawModule(code=gk.fill_source(),
                                                                                       options=gk.fill_options(self.dtype))
            self._kernels[key] = module.get_function(entry)
        return self._kernels[key]

    # numerics ----------------------------------------------------------------------------------
    def prepare(self, u, u_new, w) -> None:
        """Compile (or load from CuPy's cache) and load the kernels (one-step, tiled, the check's
        reduction, the boundary fill); anchor GPU event times to the host clock."""
        self._data = gk.data_of(w)
        if self.refills:
            self._fill_function(gk.fill_entry(self.boundary))
        self.launch(u_new, u, w, (1, 2, 1, 2), self.main)  # u_new is overwritten by the first step
        variant, block, k, _ = self.choice(u.shape)
        if (variant in gk.TILED and k > 1) or (variant in gk.ON_CHIP and self._data != gk.PLAIN and not self.refills):
            self.tile(u_new, u, w, self.tiled_choice(u.shape, self._data)[2], (1, 2, 1, 2))  # (chip with data: its fallback)
        if variant in gk.ON_CHIP and not self.refills and self._data == gk.PLAIN:
            self._chip_plan(u.shape)  # scratch, both modules (the plain passes', the residual's)
        self.max_update(u, u_new, (1, 2, 1, 2))
        self._shape = u.shape
        self.synchronize()
        anchor = self._record(self.main)
        anchor.synchronize()
        self._anchor = (anchor, time.perf_counter())

    def step(self, out, u, w, region) -> None:
        self.launch(out, u, w, region, self.active)

    def compute(self, out, u, w, regions, timer) -> None:
        regions = [r for r in regions if r[1] > r[0] and r[3] > r[2]]
        if not regions:
            return
        t = time.perf_counter()
        s = self.active
        self._edge_used |= s is self.edge
        e0 = self._record(s)
        for region in regions:
            self.launch(out, u, w, region, s)
        self._track(timer.charge, "compute", e0, self._record(s), timer, "gpu")
        timer.add("other", t)  # host time spent launching

    def advance_timed(self, u, u_new, w, n: int, region, timer, previous: bool = True, checks=()):
        t = time.perf_counter()
        e0 = self._record(self.main)
        u, u_new = self.advance(u, u_new, w, n, region, previous, checks)
        self._track(timer.charge, "compute", e0, self._record(self.main), timer, "gpu")
        self.charge_host(timer, "other", t)
        self._tail.record(self.main)
        self._tailed = True
        return u, u_new

    def checks_inside(self, shape) -> bool:
        return self.choice(shape)[0] in gk.ON_CHIP and not self.refills

    def advance_checked(self, u, u_new, w, n: int, region, timer, previous: bool, checks):
        """`chip`: heat's checks in the batch folded by its launches (_advance_chip: NaN / Inf only, each value
        0 or inf), their words copied to the host after it. Weights with data fields take chip's fallback (one
        batch a check: Backend.advance_checked)."""
        if not (checks and self._on_chip(u, u_new, region, w)):
            return super().advance_checked(u, u_new, w, n, region, timer, previous, checks)
        checks = list(checks)
        u, u_new = self.advance_timed(u, u_new, w, n, region, timer, previous, checks)
        read = self._read_later(self._check_words, len(checks))
        return u, u_new, [functools.partial(read, j) for j in range(len(checks))]

    def busy(self) -> bool:
        """Whether the GPU still runs the batch advance_timed() enqueued last (the host's work now hides
        behind it)."""
        return self._tailed and not self._tail.done

    def charge_host(self, timer, section: str, start: float) -> None:
        """Host work since `start`: charged to `section`, or to none when the GPU ran the last batch all
        along (the batch's events count the interval as compute; the loop enqueues the next batch and
        starts a check while one runs, core.loop's lagged checks)."""
        if self.busy():
            timer.cursor = time.perf_counter()
        else:
            timer.add(section, start)

    def plan(self, lengths) -> None:
        """Before the timed loop: compile the tile depths advance(n) will need for these n (a graph is
        captured at its first replay, inside the loop: about a millisecond per distinct n)."""
        if self._shape is None or self.choice(self._shape)[0] in gk.ON_CHIP:
            return
        variant, block, k = self.tiled_choice(self._shape, self._data)
        if variant in gk.TILED and k > 1 and not self.refills:
            for n in {n for n in lengths if n >= 2}:
                self._compile(self._shape, variant, block, self._depths(n, k), self._data)

    def advance(self, u, u_new, w, n: int, region, previous: bool = True, checks=()):
        """n steps without exchange, enqueued on `main` (graph replays); returns (current, previous),
        except after a time tile: then `previous` is scratch and max_update(current, previous, region)
        returns the tile's fused residual (max |update| of its last step), which the last tile folds
        only when `previous` is asked for (a check follows: core.loop's keep_previous). `checks`: see
        advance_checked (`chip` only)."""
        self.join()
        if self._on_chip(u, u_new, region, w):
            return self._advance_chip(u, u_new, w, n, self.choice(u.shape)[2], previous, checks)
        assert not checks, "checks inside a batch: chip only"
        variant, _, k = self.tiled_choice(u.shape, gk.data_of(w))
        if variant in gk.TILED and k > 1 and n >= 2 and not self.refills:
            self._note_data(u.shape, w, variant, k)
            return self._advance_tiled(u, u_new, w, n, region, k, previous)
        graphs = self.use_graphs and self.step_choice(u.shape)[0] != "expr"
        if graphs:
            for _ in range(n // GRAPH_STEPS):
                self._graph(u, u_new, w, region, GRAPH_STEPS).launch(self.main)
            for _ in range(n % GRAPH_STEPS // 2):
                self._graph(u, u_new, w, region, 2).launch(self.main)
            left = n % 2
        else:
            left = n
        for _ in range(left):
            self.launch(u_new, u, w, region, self.main)
            if self.refills:
                self._fill(u_new, self.main)
            u, u_new = u_new, u
        return u, u_new

    # chip: the whole field on chip ---------------------------------------------------------------
    def _on_chip(self, u, u_new, region, w) -> bool:
        """advance() runs `chip` launches for these fields (and weights: chip reads no data fields; with them,
        the streaming time tiles of tiled_choice, gk.DATA_FALLBACK)."""
        return (self.choice(u.shape)[0] in gk.ON_CHIP and self._whole(u, u_new, region) and not self.refills
                and gk.data_of(w) == gk.PLAIN)

    @staticmethod
    def _whole(u, u_new, region) -> bool:
        """`region` is u's whole interior, both fields have one pitch and column 1 16-byte aligned (the
        on-chip kernel's tiles)."""
        aligned = all((a.data.ptr + a.itemsize) % 16 == 0 for a in (u, u_new))
        return tuple(region) == (1, u.shape[0] - 1, 1, u.shape[1] - 1) and u.strides == u_new.strides and aligned

    def _advance_chip(self, u, u_new, w, n: int, k: int, resid: bool, checks=()):
        """n steps as persistent launches of at most k steps each (kernels/chip.cu); the last folds the
        check's residual when `resid` (a separate short launch for it measured no faster: docs/gpu_tiling_notes.md
        v9). Heat's checks at the steps `checks` (offsets in (0, n], evenly spaced: core.loop's checks inside
        a batch) set _check_words[j] to inf where the field has a NaN or Inf then, in the plain module: at the
        end of a pass (an even offset in its launch) or at a launch's end (a launch ends there)."""
        if resid:
            self._zero_word(self.main)
        words = self._zeroed_check_words(len(checks))
        shape, block = u.shape, self.choice(u.shape)[1]
        two = self.chip_levels((shape[0] - 2, shape[1] - 2), block) == 2  # (v6 launches: a check ends a launch)
        start, depths = 0, []
        while start < n:
            end = min(start + k, n)
            cut = next((c for c in checks if start < c < end and ((c - start) % 2 or not two)), None)
            end = cut or end
            inner = [c for c in checks if start < c <= end]
            folds = (words[checks.index(inner[0]):], inner[0] - start, inner[1] - inner[0] if len(inner) > 1 else 2) \
                if inner else None
            self._chip_launch(u_new, u, w, end - start, resid and end == n, folds)
            u, u_new = u_new, u
            depths.append(end - start)
            start = end
        self._tile_used = max(self._tile_used, max(depths, default=1))
        self._resid = (u.data.ptr, u_new.data.ptr, (1, u.shape[0] - 1, 1, u.shape[1] - 1)) if resid and depths else None
        return u, u_new

    def _zeroed_check_words(self, count: int):
        """The words of a batch's checks inside it, zeroed on `main` (after the copies of the last batch's)."""
        if len(self._check_words) < count:
            self._check_words = self.cp.zeros(count, self._word.dtype)
        if count:
            self.cp.cuda.runtime.memsetAsync(self._check_words.data.ptr, 0, count * self._word.itemsize, self.main.ptr)
        return self._check_words

    def _chip_launch(self, out, u, w, steps: int, resid: bool, folds=None) -> None:
        """One launch of `steps` steps; `resid`: its last level's residual folded into _word (zeroed);
        `folds`: (words, first, every) for heat's checks in it (kernels/chip.cu run2)."""
        p = self._chip_plan(u.shape)
        fn = p.resid if resid else p.plain
        hrow, hcol, flags = p.scratch
        self.cp.cuda.runtime.memsetAsync(flags.data.ptr, 0, flags.nbytes, self.main.ptr)
        words, first, every = folds or (np.uint64(0), 0, 0)
        args = (out, u, np.int64(u.strides[0] // u.itemsize), *p.args, np.int32(steps), hrow, hcol, flags,
                self._word if resid else np.uint64(0), words, np.int32(first), np.int32(every), w.wc, w.wx, w.wy)
        try:  # cooperative: every block resident at once, or an error instead of a hang
            fn(p.grid, p.threads, args, shared_mem=p.smem, stream=self.main, enable_cooperative_groups=True)
        except TypeError:  # a CuPy without the keyword: the grid is at most one block per multiprocessor
            fn(p.grid, p.threads, args, shared_mem=p.smem, stream=self.main)
        self._resid = None

    def _chip_plan(self, shape) -> ChipPlan:
        """What a `chip` launch on a padded array of this shape needs, worked out at its first launch (the
        layout, the scratch, both modules allowed their shared memory): a launch then costs the host no
        layout arithmetic."""
        if shape not in self._plans:
            _, block, _, _ = self.choice(shape)
            interior = (shape[0] - 2, shape[1] - 2)
            gx, gy, threads, rt, smem = self.chip_layout(interior, block)
            plain, resid = self._chip_function(block, interior), self._chip_function(block, interior, True)
            for fn in (plain, resid):
                self._allow_shared(fn, smem)
            self._plans[shape] = ChipPlan(
                grid=(gx, gy, 1), threads=(threads, 1, 1), smem=smem, args=(np.int32(interior[0]), np.int32(interior[1]),
                                                                          np.int32(rt)),
                scratch=self._chip_scratch(shape), plain=plain, resid=resid)
        return self._plans[shape]

    def _chip_function(self, block, interior, resid: bool = False):
        """`chip` compiled for its layout on this grid: the threads and tile rows are compiled in; at
        two levels a pass (v7) one module without the residual's pass and one with it (`resid`), and
        only the code without the mask where every tile is interior."""
        layout = self.chip_layout(interior, block)
        gx, gy, threads, rt, smem = layout
        v = gk.chip_columns(block[0])
        levels = self.chip_levels(interior, block)
        if levels == 2:
            extra = dict(resid=resid, allfast=gk.chip_all_interior(layout, interior, v))
        else:
            extra = {}
        key = ("chip", (threads, block[1]), self.fmad, rt, v, levels, tuple(extra.items()))
        if key not in self._kernels:
            opts = gk.options("chip", self.dtype, (threads, block[1]), self.fmad, rt=rt, v=v, levels=levels, **extra)
            self._kernels[key] = self.cp.RawModule(code=gk.source("chip"), options=opts).get_function(gk.ENTRY["chip"])
        return self._kernels[key]

    def _allow_shared(self, fn, nbytes: int) -> None:
        """Let `fn` take `nbytes` of dynamic shared memory (more than 48 KiB must be asked for)."""
        if nbytes <= 48 * 1024 or self._kernels.get(("smem", id(fn)), 0) >= nbytes:
            return
        fn.max_dynamic_shared_size_bytes = nbytes  # CuPy's RawKernel sets the function's attribute
        self._kernels[("smem", id(fn))] = nbytes

    def launch_facts(self, shape) -> dict:
        """What the chosen kernel's launch over the whole interior asks of the GPU (the record's
        bottleneck line names it): for a tiled variant the warps launched against the warp slots, for
        `chip` the blocks and their tiles; the two fields' bytes against the L2 cache."""
        variant, block, k, _ = self.choice(shape)
        interior = (shape[0] - 2, shape[1] - 2)
        facts = {"field_bytes": interior[0] * interior[1] * self.dtype.itemsize, "l2_bytes": self.l2_bytes,
                 "sms": self.sms}
        if variant in gk.ON_CHIP and not self.refills:
            gx, gy, threads, rt, smem = self.chip_layout(interior, block)
            facts.update(on_chip=True, blocks=gx * gy, threads=threads, columns=gk.chip_columns(block[0]), tile_rows=rt,
                         shared_bytes=smem, levels_a_pass=self.chip_levels(interior, block),
                         registers=getattr(self._chip_function(block, interior), "num_regs", None))
        elif variant in gk.TILED and not self.refills:
            facts.update(gk.launch_facts(variant, self.dtype, block, interior, k, self.sms, self._warps_per_sm(variant, k)))
            facts["registers"] = getattr(self._function(variant, block, k), "num_regs", None)
        return facts

    def _chip_scratch(self, shape):
        """The halo buffers and flags of the chip layout for this padded shape (allocated once)."""
        interior = (shape[0] - 2, shape[1] - 2)
        block = self.choice(shape)[1]
        layout = self.chip_layout(interior, block)
        v = gk.chip_columns(block[0])
        if (layout, v) not in self._chip:
            rows, cols, flags = gk.chip_buffer_sizes(layout, v)
            with self.main:
                self._chip[(layout, v)] = (self.cp.zeros(rows, self.dtype), self.cp.zeros(cols, self.dtype),
                                           self.cp.zeros(flags, np.uint32))
        return self._chip[(layout, v)]

    def _advance_tiled(self, u, u_new, w, n: int, region, k: int, resid: bool = True):
        depths = self._depths(n, k)
        self._tile_used = max(self._tile_used, k)
        variant, block, _ = self.tiled_choice(u.shape, gk.data_of(w))
        self._compile(u.shape, variant, block, depths, gk.data_of(w))
        if self.use_graphs:
            self._tile_graph(u, u_new, w, depths, region, resid).launch(self.main)
        else:
            self._tiles(u, u_new, w, depths, region, resid)
        if len(depths) % 2:
            u, u_new = u_new, u
        self._resid = (u.data.ptr, u_new.data.ptr, tuple(region)) if depths[-1] > 1 and resid else None
        return u, u_new

    @staticmethod
    def _depths(n: int, k: int) -> list[int]:
        """Steps per launch for n steps: whole tiles, then the rest as one shorter tile (or one step)."""
        return [k] * (n // k) + ([n % k] if n % k else [])

    def _compile(self, shape, variant, block, depths, data=gk.PLAIN) -> None:
        """Compile before any capture: module loads have no place in a graph."""
        for d in set(depths):
            if d > 1:
                self._function(variant, block, d, data)
            elif self.step_choice(shape)[0] != "expr":
                self._function(*self.step_choice(shape), 1, data)

    def _tile_graph(self, u, u_new, w, depths, region, resid: bool = True):
        """The CUDA graph of these tiles from (u, u_new), captured on first use."""
        key = ("tiles", u.data.ptr, u_new.data.ptr, u.shape, u.strides, tuple(region), w, tuple(depths),
               self.choice(u.shape), self.fmad, resid)
        if key not in self._graphs:
            s = self.main
            s.begin_capture()
            try:
                self._tiles(u, u_new, w, depths, region, resid)
            finally:
                graph = s.end_capture()
            self._graphs[key] = graph
        return self._graphs[key]

    def _tiles(self, u, u_new, w, depths, region, resid: bool = True) -> None:
        """Enqueue the tiles on `main`, swapping buffers; the last one, unless a single step, folds its
        residual (when `resid`)."""
        for i, d in enumerate(depths):
            if d == 1:
                self.launch(u_new, u, w, region, self.main)
            else:
                self.tile(u_new, u, w, d, region, resid=resid and i == len(depths) - 1)
            u, u_new = u_new, u

    def _graph(self, u, u_new, w, region, steps: int):
        key = (u.data.ptr, u_new.data.ptr, u.shape, u.strides, region, w, steps, self.choice(u.shape), self.fmad,
               self.boundary if self.refills else None)
        if key not in self._graphs:
            self._compile(u.shape, None, None, [1], gk.data_of(w))
            if self.refills:
                fill_specs(u, self.boundary, self._fill_table)  # values along the sides on the device before the capture
                self._fill_function(gk.fill_entry(self.boundary))
            s = self.main
            s.begin_capture()
            try:
                a, b = u, u_new
                for _ in range(steps):
                    self.launch(b, a, w, region, s)
                    if self.refills:  # the boundary fill is part of every captured step
                        self._fill(b, s)
                    a, b = b, a
            finally:
                graph = s.end_capture()
            self._graphs[key] = graph
        return self._graphs[key]

    def max_update(self, a, b, region) -> float:
        """max |a - b| over region (inf for NaN/Inf); after a time tile that produced (a, b), the tile's
        fused residual."""
        return self.start_max_update(a, b, region)()

    def start_max_update(self, a, b, region):
        """max_update enqueued on `main`, with the copy of its word to the host: returns a function that
        waits for the copy and gives the value."""
        self.join()
        if self._resid != (a.data.ptr, b.data.ptr, tuple(region)):
            self._zero_word(self.main)
            fn = self._function("maxdiff", gk.MAXDIFF_BLOCK)
            pa, pb = (np.int64(x.strides[0] // x.itemsize) for x in (a, b))
            fn(*gk.maxdiff_shape(region), (self._word, a, b, pa, pb, *map(np.int32, region)), stream=self.main)
        read = self._read_later(self._word, 1)
        return lambda: read(0)

    def _read_later(self, words, count: int):
        """Copy `count` words (max |update| bits) to pinned host memory after the work enqueued on `main`
        so far; returns value(j): waits for the copy, then word j as a value (inf for NaN/Inf)."""
        rt = self.cp.cuda.runtime
        while self._pinned and self._pinned[0][0].done:  # copies done: their memory goes back to the pool
            self._pinned.pop(0)
        mem = self.cp.cuda.alloc_pinned_memory(count * words.itemsize)
        host = np.frombuffer(mem, words.dtype, count)
        rt.memcpyAsync(host.ctypes.data, words.data.ptr, count * words.itemsize, rt.memcpyDeviceToHost, self.main.ptr)
        done = self.cp.cuda.Event(disable_timing=True)
        done.record(self.main)
        self._pinned.append((done, mem, words))  # (words too: a grown _check_words must outlive the copy of the old)

        def value(j: int) -> float:
            done.synchronize()
            self.flush()
            v = float(host[j:j + 1].view(self.dtype)[0])
            return v if np.isfinite(v) else float("inf")
        return value

    def settle(self, timer) -> None:
        """Wait for the GPU without charging the wait to a host section (the CUDA events count that
        interval as compute): called before checks and output, so the sections add up to the loop."""
        self.join()
        self.main.synchronize()
        self.edge.synchronize()
        if timer is not None and timer.cursor is not None:
            timer.cursor = time.perf_counter()

    def join(self) -> None:
        """Make `main` wait for everything enqueued on `edge` so far."""
        if self._edge_used:
            self._joined.record(self.edge)  # re-recording later is safe: a wait uses the state at wait time
            self.main.wait_event(self._joined)

    def edge_waits_main(self) -> None:
        """Make `edge` wait for everything enqueued on `main` so far (the overlap mode's deep-halo strips,
        copied out on edge, reach into the part of the field the last tile's inner launch wrote on main)."""
        self._main_mark.record(self.main)
        self.edge.wait_event(self._main_mark)

    def synchronize(self) -> None:
        self.join()
        self.main.synchronize()
        self.edge.synchronize()
        self.flush()

    # events ------------------------------------------------------------------------------------
    def _event(self):
        return self._events.pop() if self._events else self.cp.cuda.Event()

    def _record(self, stream):
        e = self._event()
        e.record(stream)
        return e

    def _track(self, charge, section: str, e0, e1, timer, track: str) -> None:
        """Charge the time between two events to `charge(section, seconds)` once they complete."""
        self.pending.append((charge, section, e0, e1, timer if timer is not None and timer.trace else None,
                             getattr(timer, "step", 0), track))
        if len(self.pending) > 4096:
            self.flush()

    def flush(self) -> None:
        """Resolve completed event pairs (all of them after a synchronisation) in order."""
        done = 0
        for charge, section, e0, e1, timer, step, track in self.pending:
            if not e1.done:
                break
            ms = self.cp.cuda.get_elapsed_time(e0, e1)
            charge(section, ms / 1e3)
            if timer is not None and self._anchor is not None:
                start = self._anchor[1] + self.cp.cuda.get_elapsed_time(self._anchor[0], e0) / 1e3 - timer.epoch
                timer.events.append((section, start, start + ms / 1e3, step, track))
            self._events += [e for e in (e0, e1) if id(e) not in self._mg_kept]  # (a graph's own events stay its own)
            done += 1
        del self.pending[:done]

    # reporting ---------------------------------------------------------------------------------
    def describe(self) -> dict:
        import cupy

        rt = cupy.cuda.runtime
        choices = {f"{k[0]}x{k[1]}": {"kernel": v, "block": list(b) if b else None, "time_tile": t, "source": src,
                                      "launch": self.launch_facts((k[0] + 2, k[1] + 2)),
                                      **({"with_data": list(self._data_paths[k].values())} if k in self._data_paths else {})}
                   for k, (v, b, t, src) in self._choice.items()}
        return {"backend": self.name, "threads": self.threads, "device": self.gpu_name, "gpu_index": self.device_index,
                "gpu_name": self.gpu_name, "pci_bus_id": self.pci, "kernels": choices, "fmad": self.fmad,
                "time_tile": self._tile_used,
                "cuda_graphs": self.use_graphs, **({"multigrid_graphs": self._mg_graph_facts} if self._mg_graph_facts else {}),
                "cupy": cupy.__version__, "cuda_runtime": rt.runtimeGetVersion(),
                "cuda_driver": rt.driverGetVersion(), **self.transfer}

    def copy_bandwidth(self, nbytes: int, repeats: int = 5) -> float:
        """cudaMemcpyAsync device to device, bytes read + written per second (median of repeats, CUDA events)."""
        cp = self.cp
        n = max(int(nbytes), 1 << 20)
        with self.main:
            a = cp.ones(n, dtype=cp.uint8)
            b = cp.empty_like(a)
        rt = cp.cuda.runtime
        times = []
        for _ in range(repeats + 1):
            e0 = self._record(self.main)
            rt.memcpyAsync(b.data.ptr, a.data.ptr, n, rt.memcpyDeviceToDevice, self.main.ptr)
            e1 = self._record(self.main)
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1) / 1e3)
            self._events += [e0, e1]
        del a, b
        return 2 * n / float(np.median(times[1:]))


@dataclass(frozen=True)
class ChipPlan:
    """A `chip` launch's fixed part for one padded shape: grid, block, shared bytes, (ny, nx, rows a tile),
    (row halos, column halos, flags), the module of plain launches and the one that folds the residual."""
    grid: tuple
    threads: tuple
    smem: int
    args: tuple
    scratch: tuple
    plain: object
    resid: object


def _attribute(rt, attr: int, device: int) -> int:
    """cudaDeviceGetAttribute (97: cudaDevAttrMaxSharedMemoryPerBlockOptin), 0 where it cannot be read."""
    try:
        return rt.deviceGetAttribute(attr, device)
    except Exception:  # noqa: BLE001 - a CuPy without it: the caller falls back to 48 KiB
        return 0


def _highest_priority(rt) -> int:
    """The greatest stream priority (numerically lowest); -1 where the range cannot be queried."""
    try:
        return rt.deviceGetStreamPriorityRange()[1]
    except AttributeError:
        return -1


def _ptr(a) -> int:
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def _pitch(a) -> int:
    """Bytes between rows (a 1-D array is one row)."""
    return a.strides[0] if a.ndim == 2 else a.nbytes
