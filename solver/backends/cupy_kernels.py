"""The CuPy kernel variants: names, block shapes, CUDA sources and compile options (no cupy import here).

Variants (`backend.kernel`):
- naive: one thread per point, five global loads (neighbours hit L1/L2). block = [bx, by] threads.
- tiled: a shared-memory tile with a one-cell apron, loaded cooperatively. block = [bx, by] threads.
- rows:  each thread marches down `by` rows of one column, rows held in registers, west/east by warp
         shuffles. block = [bx, by]: bx threads (a multiple of 32) in x, by rows per thread.
- vec:   `rows` with 16-byte accesses: 4 float32 or 2 float64 columns per thread.
- expr:  the same update written as CuPy array expressions (the "mature library" baseline); no block.
- wave:  k steps per launch (time tiling, `backend.time_tile` = k): each warp streams down a strip of
         32 x 16 bytes of columns and a segment of `by` rows, k levels of rows in registers, west/east by
         shuffles, a recomputed apron of ceil(k / columns per thread) lanes at each side (kernels/wave.cu).
         block = [bx, by]: bx threads per block (a multiple of 32; each warp is independent), by rows
         per warp.
- wave2: `wave` with two 16-byte vectors per thread (8 float32 or 4 float64 columns): a narrower apron,
         more registers.
- wave2a: `wave2` with the rows streamed in WAVE_PREFETCH rows ahead by asynchronous copies (cp.async)
         into a per-warp ring in shared memory, so that no row's load stalls its warp. block: as wave2
         (bx at most 256).
- chip:  the whole field on chip (kernels/chip.cu): one persistent launch of up to k steps
         (`backend.time_tile`) keeps every block's tile in registers and shared memory, one block per
         multiprocessor, neighbouring blocks exchanging their edges through L2 at every step; chosen
         when nothing is asked or tuned and the field fits (chip_layout). block = [threads, rows held
         in registers by each thread]; a block of at most 256 threads holds 8 columns a thread, a
         larger one 4 (chip_columns). Compiled per layout (threads, tile rows). Where one block spans
         the grid's columns and tiles have 2+ rows, each pass advances two levels (v7-v8, CHIP_LEVELS;
         the env STENCIL_CHIP_LEVELS=1 or 2 picks one or two for comparisons).
For the tiled variants `by` (the rows of a warp's segment) is a launch argument, not compiled in.
`backend.kernel: null` takes the fastest variant stored by `stencil tune` for this GPU, dtype and
grid size, else DEFAULT_VARIANT; `backend.block: null` likewise takes the tuned block, else the
variant's default (default_block: DEFAULT_BLOCK, a tiled variant's segment rows fitted to the grid);
`backend.time_tile: null` the tuned depth, else DEFAULT_TILE.

Physics as data (solver.core.physics.Weights: a source term; face coefficients in the flux or the Jacobi form; the
flux form's heat capacity fields): every variant but `chip` reads them (DATA_VARIANTS), compiled in by the defines
SRC, FORM and CAP (data_of; options
defines them only where the update reads data, so a plain case compiles today's modules token for token) and
passed after the weights (data_args: u's pitch and alignment). `chip` falls back to the streaming time tiles
(DATA_FALLBACK; the record says so); with face fields the default tiled kernel takes k = DATA_TILE, and the
time-tiled kernels ask L2 for the data rows DATA_PREFETCH rows ahead.

Every variant is compiled with --fmad=false: the terms are rounded in the order of solver/core/physics.py,
so GPU results equal the CPU backends' bitwise (the kernels are memory-bound; BENCHMARKS.md gives the
measured cost of this choice).
"""

from __future__ import annotations

import os
from importlib import resources

import numpy as np

VARIANTS = ("naive", "tiled", "rows", "vec", "expr", "wave", "wave2", "wave2a", "chip")
COMPILED = ("naive", "tiled", "rows", "vec", "wave", "wave2", "wave2a", "chip")
TILED = ("wave", "wave2", "wave2a")  # k steps per launch, streamed through memory (kernels/wave.cu)
ON_CHIP = ("chip",)  # up to k steps per launch, the field held on chip (kernels/chip.cu)
MULTI = TILED + ON_CHIP  # several steps per launch: backend.time_tile applies
STEP_VARIANTS = tuple(v for v in VARIANTS if v not in MULTI)
DEFAULT_VARIANT = "wave2a"  # nothing tuned, field not on chip: the fastest measured (docs/gpu_tiling_notes.md)
DEFAULT_STEP_VARIANT = "vec"  # one step per launch (halo paths, time_tile: 1)
DEFAULT_BLOCK = {"naive": (32, 8), "tiled": (32, 8), "rows": (128, 8), "vec": (128, 8), "wave": (32, 128),
                 "wave2": (32, 128), "wave2a": (32, 128), "chip": (512, 4)}
DEFAULT_TILE = 8  # steps per launch of a tiled variant when nothing is tuned or asked
WAVE_ROWS = (128, 64, 32)  # segment rows a tiled variant's default block may take, most first
WARPS_PER_SM = 8  # resident warps of a tiled kernel when the compiled kernel cannot be asked (244-255 registers)
DEFAULT_WAVES = 4  # a default tiled block's warps fill the GPU's warp slots at least this many times over
WAVE_PREFETCH = 3  # rows `wave2a` has in flight ahead of the one it computes (kernels/wave.cu, PF)
WAVE2A_MAX_THREADS = 256  # its ring is static shared memory: 8 warps x 4 rows x 1 KiB at most
MAX_TILE = 16  # deeper tiles need more registers than a thread has (spills)
CHIP_V = 4  # columns per thread of `chip` (a block of more than CHIP_WIDE_THREADS threads)
CHIP_V_WIDE = 8  # columns per thread of a `chip` block of at most CHIP_WIDE_THREADS threads (255 registers each)
CHIP_WIDE_THREADS = 256
CHIP_ROWS = {4: 8, 8: 4}  # rows in registers per thread, by itemsize: the most without spills at 512 threads (ptxas)
CHIP_STEPS = 1024  # steps per launch of `chip` when nothing is tuned or asked (stops cut batches shorter): at 2048^2
# float64 1024 steps a launch ran 3.75 us a step, 400 3.88, 256 4.00 (docs/gpu_tiling_notes.md v9)
MAX_CHIP_STEPS = 1 << 20
CHIP_RT = 16  # tile rows `chip` is compiled for when no layout is given (2048^2 on 132 multiprocessors)
CHIP_LEVELS = {8: 2, 4: 2}  # levels a `chip` pass advances where the layout allows 2, by itemsize: v7 was faster in
# float64 only, v8 (aprons by the whole warp) in both (docs/gpu_tiling_notes.md, Issue 26 v7, v8); STENCIL_CHIP_LEVELS overrides
SWEEP = {  # block shapes `stencil tune` tries by default
    "naive": [(32, 4), (32, 8), (32, 16), (64, 4), (128, 2), (256, 1)],
    "tiled": [(32, 4), (32, 8), (32, 16), (64, 4), (64, 8), (128, 4)],
    "rows": [(64, 8), (128, 4), (128, 8), (128, 16), (256, 8), (256, 16)],
    "vec": [(32, 8), (64, 4), (64, 8), (128, 4), (128, 8), (128, 16), (256, 4), (256, 8)],
    "expr": [None],
    "wave": [(32, 64), (32, 128), (64, 256)],
    "wave2": [(32, 64), (32, 128), (64, 256)],
    "wave2a": [(32, 64), (32, 128), (64, 256)],
    "chip": [(512, 4), (512, 8), (256, 6), (256, 8), (256, 12)],
}
SWEEP_TILES = (4, 8, 12)  # time tiles `stencil tune` tries for the tiled variants
SWEEP_CHIP_STEPS = (256, 1024)  # steps per launch it tries for `chip`
PLAIN = (0, 0, 0)  # (SRC, FORM, CAP) of an update that reads nothing but u (data_of)
DATA_VARIANTS = ("naive", "tiled", "rows", "vec", "expr", "wave", "wave2", "wave2a")  # read a source and face fields
DATA_FALLBACK = {"chip": "chip holds the field on chip and reads no source or face fields (kernels/chip.cu is the "
                         "plain update): time tiles of the streaming kernel instead"}
DATA_PREFETCH = 4  # kernels/wave.cu DPF: rows ahead of level 1 whose data rows are prefetched into L2 (0: none).
# Measured on an H200 at 8192^2 (2026-12-03, kernel-only, x the copy-bound rate counted with the fields' bytes),
# wave2a k = 8: with face fields 1.52-1.54x against 1.00x without (float64; float32 1.28-1.31x against 0.93x), with
# a source 2.77-2.79x against 2.61x (float32 2.12-2.14x against 2.13-2.16x: even)
DATA_TILE = 4  # the default tiled kernel's k where the update reads face fields: at k = 8 the 8 levels of rows and
# the faces spill (880 B of local memory a thread in float64); measured at 8192^2 with DPF 4, wave2a: faces k = 4
# 2.14x (float64) and 2.05x (float32), k = 6 1.89x and 1.63x, k = 8 1.54x and 1.28x; faces and a source at k = 4
# 1.97x and 1.82x. (`wave`, two columns fewer a thread, at k = 8 measured 2.43x and 2.72x with faces alone: the
# candidate for a default once measured with a source and in the Jacobi form; `stencil tune` or the case can ask it.)
FILES = {"naive": "naive.cu", "tiled": "tiled.cu", "rows": "march.cu", "vec": "march.cu", "wave": "wave.cu",
         "wave2": "wave.cu", "wave2a": "wave.cu", "chip": "chip.cu", "maxdiff": "maxdiff.cu"}
ENTRY = {"naive": "naive", "tiled": "tiled", "rows": "march", "vec": "march", "wave": "wave", "wave2": "wave",
         "wave2a": "wave", "chip": "chip", "maxdiff": "maxdiff"}
MAXDIFF_BLOCK = (256, 1)  # the convergence / NaN check's reduction (kernels/maxdiff.cu)
MAX_THREADS = 1024
MAX_ROWS_PER_THREAD = 32


def lanes(variant: str, dtype) -> int:
    """Columns per thread: 16 bytes' worth for `vec` and `wave`, 32 for `wave2`, one otherwise."""
    per = 16 // np.dtype(dtype).itemsize
    return {"vec": per, "wave": per, "wave2": 2 * per, "wave2a": 2 * per, "chip": CHIP_V}.get(variant, 1)


def apron(variant: str, dtype, k: int) -> int:
    """Lanes a `wave` strip recomputes at each side: ceil(k / columns per thread)."""
    return -(-k // lanes(variant, dtype))


def default_block(variant: str, dtype, interior, sms: int, k: int = DEFAULT_TILE, warps_per_sm: int = WARPS_PER_SM):
    """The block of `variant` when nothing is tuned or asked: DEFAULT_BLOCK, except that `chip` holds
    CHIP_ROWS rows in registers and a tiled variant takes the most segment rows of WAVE_ROWS whose
    warps (strips x segments of the interior) still fill the GPU's warp slots (`warps_per_sm`: the
    compiled kernel's resident warps per multiprocessor) DEFAULT_WAVES times over, else the fewest:
    fewer rows mean more recomputed rows at the segment ends, too few warps a launch whose tail idles
    the GPU. Measured on an H200 (132 SMs): `stencil tune` of `wave2` k = 8 (2026-12-01) found these
    rows best at 4096^2, 8192^2 and 16384^2; for `wave2a` (issue 26) they beat launches fitted to one
    wave of long segments by 17% at 8192^2 and 28-39% at 16384^2, and tie at 4096^2 (BENCHMARKS.md)."""
    if variant in ON_CHIP:
        return DEFAULT_BLOCK[variant][0], CHIP_ROWS[np.dtype(dtype).itemsize]
    if variant not in TILED:
        return DEFAULT_BLOCK.get(variant)
    ny, nx = interior
    strips = wave_strips(variant, dtype, k, (1, ny + 1, 1, nx + 1))[2]
    rows = next((by for by in WAVE_ROWS if strips * -(-ny // by) >= DEFAULT_WAVES * warps_per_sm * sms), WAVE_ROWS[-1])
    return DEFAULT_BLOCK[variant][0], rows


def launch_facts(variant: str, dtype, block, interior, k: int, sms: int, warps_per_sm: int) -> dict:
    """What a tiled launch over the whole interior asks of the GPU: warps launched against the warp
    slots (resident warps x multiprocessors), and the waves that makes (the record's bottleneck)."""
    ny, nx = interior
    strips = wave_strips(variant, dtype, k, (1, ny + 1, 1, nx + 1))[2]
    warps = strips * -(-ny // block[1])
    slots = sms * warps_per_sm
    return {"warps": warps, "slots": slots, "warps_per_sm": warps_per_sm, "waves": warps / slots,
            "segment_rows": block[1], "strips": strips}


# chip: the whole field on chip ----------------------------------------------------------------------

def chip_columns(threads: int) -> int:
    """Columns per thread of a `chip` block of `threads` threads at most (block[0]): CHIP_V_WIDE for
    CHIP_WIDE_THREADS or fewer (fewer threads, more registers each: more rows in registers, fewer
    shuffles a point), else CHIP_V."""
    return CHIP_V_WIDE if threads <= CHIP_WIDE_THREADS else CHIP_V


def chip_smem_bytes(dtype, rt: int, rr: int, threads: int, v: int = CHIP_V, levels: int = 1) -> int:
    """Dynamic shared memory of a `chip` block (kernels/chip.cu): its tile rows rr .. rt-1 (16-byte
    vectors, v columns a thread), then (levels 1) two copies of each warp's west and east neighbour
    columns and of the block's west and east outboxes, or (levels 2) two copies of each warp's first
    and last two columns, rows -1 .. rt, with a ghost slot at each side, and each warp's aprons."""
    item = np.dtype(dtype).itemsize
    tile = max(rt - rr, 0) * v * item * threads
    if levels == 2:  # the pairs, then each warp's aprons: level 2k + 1 just outside its band, rows 0 .. rt-1, both sides
        return tile + 2 * 2 * (threads // 32 + 2) * (rt + 2) * 2 * item + threads // 32 * 2 * rt * item
    return tile + 4 * (threads // 32 + 2) * rt * item


def chip_levels_wanted(dtype) -> int:
    """Levels a pass of `chip` advances where its layout allows two (chip_layout): CHIP_LEVELS, or the
    environment's STENCIL_CHIP_LEVELS (1 or 2; for comparing v6 and v7 with `stencil tune` / run)."""
    value = os.environ.get("STENCIL_CHIP_LEVELS")
    return int(value) if value in ("1", "2") else CHIP_LEVELS[np.dtype(dtype).itemsize]


def chip_layout(dtype, interior, sms: int, block, smem_limit: int, levels: int = 1):
    """(gx, gy, threads, rt, smem bytes) of a `chip` launch holding the whole interior on chip, or None
    when it does not fit: at most `sms` blocks (one per multiprocessor, all resident), each of at most
    block[0] threads (chip_columns(block[0]) columns each) and rt rows (block[1] of them in registers), the rest in
    at most `smem_limit` bytes of shared memory. As many blocks as fit, so the tiles are as short as
    they can be. levels 2 (v7: two levels a pass) also needs one block across and tiles of 2 rows or more."""
    ny, nx = interior
    nt, rr = block
    v = chip_columns(nt)
    gx = -(-nx // (nt * v))
    if gx > sms:
        return None
    threads = -(-(-(-nx // gx)) // (32 * v)) * 32
    gy = min(sms // gx, -(-ny // rr))
    rt = max(-(-ny // gy), rr)
    gy = -(-ny // rt)
    if levels == 2 and (gx > 1 or rt < 2):
        return None
    smem = chip_smem_bytes(dtype, rt, rr, threads, v, levels)
    return None if smem > smem_limit else (gx, gy, threads, rt, smem)


def chip_all_interior(layout, interior, v: int) -> bool:
    """Every tile of a `chip` layout lies inside the interior (no point to keep: the code without the
    mask serves every block)."""
    gx, gy, threads, rt, _ = layout
    return gy * rt == interior[0] and gx * threads * v == interior[1]


def chip_buffer_sizes(layout, v: int = CHIP_V) -> tuple[int, int, int]:
    """Elements of the halo buffers a `chip` launch (v columns a thread) exchanges through (rows,
    columns) and its flags (one per warp, then two per block: kernels/chip.cu). The rows hold four a
    block (v7 publishes two at each side; v6 uses half)."""
    gx, gy, threads, rt, _ = layout
    blocks = gx * gy
    return 2 * blocks * 4 * threads * v, 2 * blocks * 2 * rt, blocks * (threads // 32 + 2)


def tile_problem(variant: str, k: int) -> str | None:
    """Why time tile k does not suit `variant` (a message naming the fix), or None. Within MAX_TILE the
    apron (ceil(k / columns per thread) lanes a side, at least 2 columns per thread) leaves the warp
    at least two lanes to store."""
    if variant in ON_CHIP:
        return None if 1 <= k <= MAX_CHIP_STEPS else f"{k}: kernel {variant} takes 1 to {MAX_CHIP_STEPS} steps per launch"
    if variant not in TILED:
        return None if k == 1 else f"{k}: kernel {variant} computes one step per launch; use kernel wave2, wave2a or chip, or time_tile: 1"
    if not 1 <= k <= MAX_TILE:
        return f"{k}: kernel {variant} takes 1 to {MAX_TILE} steps per launch"
    return None


def block_problem(variant: str, block) -> str | None:
    """Why `block` does not suit `variant` (a message naming the fix), or None."""
    if variant == "expr":
        return None if block is None else "applies to compiled kernels only; remove it or choose another backend.kernel"
    bx, by = block
    if bx < 1 or by < 1:
        return f"{list(block)}: both entries must be >= 1, e.g. {list(DEFAULT_BLOCK[variant])}"
    if variant in TILED:
        most = WAVE2A_MAX_THREADS if variant == "wave2a" else MAX_THREADS
        if bx % 32 or bx > most:
            return f"{list(block)}: for kernel {variant} bx is the threads per block and must be a multiple of 32 up to {most}"
        return None
    if variant in ON_CHIP:
        if bx % 32 or bx > MAX_THREADS or by > MAX_ROWS_PER_THREAD:
            return (f"{list(block)}: for kernel {variant} bx is the threads per block (a multiple of 32 up to 1024) and by "
                    f"the rows each thread holds in registers (at most {MAX_ROWS_PER_THREAD}), e.g. {list(DEFAULT_BLOCK[variant])}")
        return None
    if variant in ("rows", "vec"):
        if bx % 32 or bx > MAX_THREADS:
            return f"{list(block)}: for kernel {variant} bx is the threads per block and must be a multiple of 32 up to 1024"
        if by > MAX_ROWS_PER_THREAD:
            return f"{list(block)}: for kernel {variant} by is the rows per thread, at most {MAX_ROWS_PER_THREAD}"
        return None
    if bx * by > MAX_THREADS:
        return f"{list(block)}: {bx} x {by} = {bx * by} threads per block, more than {MAX_THREADS}; use a smaller block"
    return None


def settings_problem(kernel: str | None, block, time_tile: int | None = None) -> str | None:
    """For config validation: 'backend.<field>: what is wrong; the fix', or None."""
    if kernel is not None and kernel not in VARIANTS:
        return f"backend.kernel: unknown kernel {kernel!r}; use one of {', '.join(VARIANTS)} or null (tuned/default)"
    if time_tile is not None and (kernel is not None or time_tile > 1):
        problem = tile_problem(kernel or "wave", time_tile)
        if problem:
            return f"backend.time_tile: {problem}"
    if block is None:
        return None
    if kernel is None:
        return "backend.block: give backend.kernel too (block shapes mean different things per kernel), or use block: null"
    problem = block_problem(kernel, tuple(block))
    return f"backend.block: {problem}" if problem else None


def source(variant: str) -> str:
    """common.cu followed by the variant's file, as one translation unit."""
    root = resources.files("solver.backends") / "kernels"
    return (root / "common.cu").read_text() + "\n" + (root / FILES[variant]).read_text()


def options(variant: str, dtype, block, fmad: bool = False, k: int = 1, rt: int = CHIP_RT,
            v: int | None = None, levels: int = 1, resid: bool = True, allfast: bool = False,
            data: tuple[int, int, int] = PLAIN) -> tuple[str, ...]:
    """NVRTC options: FMA contraction and the defines (a tiled variant's segment rows and `chip`'s steps
    are launch arguments, so they are not compiled in; `chip` is compiled for its layout's threads,
    block[0], tile rows, rt, columns a thread, v: chip_columns of the block asked for, and levels a pass;
    at levels 2 also whether the residual's pass is compiled in, `resid`, and whether only the code
    without the interior mask is, `allfast`: chip_all_interior). data: (SRC, FORM) of the fields the update
    reads (data_of; kernels/common.cu), defined only where not plain, so a plain case compiles today's module."""
    real = "float" if np.dtype(dtype) == np.float32 else "double"
    bx, by = block
    shape = {"wave2a": (f"-DBX={bx}", f"-DK={k}", f"-DPF={WAVE_PREFETCH}"),
             "chip": (f"-DNT={bx}", f"-DRR={by}", f"-DRT={rt}", f"-DLEVELS={levels}")}
    shape = shape.get(variant, (f"-DBX={bx}", f"-DK={k}") if variant in TILED else (f"-DBX={bx}", f"-DBY={by}"))
    v = v or (chip_columns(bx) if variant in ON_CHIP else lanes(variant, dtype))
    if variant in ON_CHIP and levels == 2:
        shape = (*shape, f"-DCHIP_RESID={int(resid)}", f"-DCHIP_ALLFAST={int(allfast)}")
    if data != PLAIN:
        assert variant in DATA_VARIANTS, f"kernel {variant} reads no data fields"
        shape = (*shape, f"-DSRC={data[0]}", f"-DFORM={data[1]}", *((f"-DCAP={data[2]}",) if data[2] else ()))
        if variant in TILED and data_prefetch():
            shape = (*shape, f"-DDPF={data_prefetch()}")
    return (f"--fmad={'true' if fmad else 'false'}", f"-DREAL={real}", *shape, f"-DV={v}")


# physics as data (solver.core.physics.Weights' fields) ---------------------------------------------------

def data_of(w) -> tuple[int, int, int]:
    """(SRC, FORM, CAP) of the kernels for weights w (kernels/common.cu): SRC 1 where w has a source term; FORM 0 the
    constant weights, 1 the flux form (face coefficients), 2 the Jacobi form; CAP bit 1 the flux form's capacity
    multiplier m, bit 2 its centre weight field cw (the Jacobi form: its diagonal field sg)."""
    field = w.sg if (w.jacobi and w.ax is not None) else w.cw
    return (int(w.s is not None), (0 if w.ax is None else 2 if w.jacobi else 1),
            int(w.m is not None) + 2 * int(field is not None))


def data_tile(data: tuple[int, int, int]) -> int | None:
    """The default tiled kernel's time tile for an update reading `data` (DATA_TILE with face fields), None: the
    plain default's."""
    return DATA_TILE if data[1] else None


def data_words(data: tuple[int, int, int]) -> str:
    """What a kernel with these data reads beside u, in words (the record's kernel entry)."""
    src, form, cap = data
    parts = (["a source term"] if src else []) + ([None, "face coefficients (flux form)",
                                                   "face coefficients (Jacobi form)"][form:form + 1] if form else [])
    parts += (["a heat capacity field"] if cap & 1 else []) + (
        [("a diagonal field" if form == 2 else "a centre weight field")] if cap & 2 else [])
    return " and ".join(parts) or "nothing"


def data_args(w, u, dtype) -> tuple:
    """The arguments after the weights of a kernel reading w's fields (DATA_PARAMS): q, ax, ay, m, cw (a null pointer
    where not read) and sigma in the field's dtype; () where w is plain. The fields must share u's pitch, and its 16-byte
    alignment at equal columns (the vector kernels load them as they load u: CupyBackend.coefficient)."""
    src, form, cap = data_of(w)
    if not (src or form):
        return ()
    null = np.uint64(0)
    fields = (w.s if src else None, w.ax if form else None, w.ay if form else None, w.m if cap & 1 else None,
              (w.sg if form == 2 else w.cw) if cap & 2 else None)
    for f in fields:
        if f is not None:
            assert f.strides == u.strides and f.shape == u.shape, "data fields have u's shape and pitch"
            assert (address(f) - address(u)) % 16 == 0, "data fields have u's 16-byte alignment"
    return (*(null if f is None else f for f in fields), np.dtype(dtype).type(w.sigma))


def step_launch(variant: str, dtype, block, out, u, w, region) -> tuple:
    """(grid, block, args) of one update of `region` of `out` from `u` by a one-step compiled variant: the argument
    list of kernels/naive.cu, tiled.cu and march.cu, the data fields after the weights (data_args). The vector
    kernel aligns its loads on column 1: fields whose column 1 is not 16-byte aligned (multigrid's two-layer
    fields, aligned on their first owned column) are passed from the column that is, the region shifted to match."""
    r0, r1, c0, c1 = region
    shift = misaligned(u) if lanes(variant, dtype) > 1 else 0
    if shift:
        assert misaligned(out) == shift and c0 > shift, "fields aligned differently, or a region on column 0"
        out, u, w, c0, c1 = out[:, shift:], u[:, shift:], cut(w, shift), c0 - shift, c1 - shift
    grid, threads = launch_shape(variant, dtype, block, (r0, r1, c0, c1))
    return grid, threads, (out, u, np.int64(u.strides[0] // u.itemsize), np.int32(r0), np.int32(r1), np.int32(c0),
                           np.int32(c1), w.wc, w.wx, w.wy, *data_args(w, u, dtype))


def tile_launch(variant: str, dtype, block, out, u, w, k: int, region, store, resid) -> tuple:
    """(grid, block, args) of one launch of a time-tiled variant (kernels/wave.cu): k steps updating `region` (C),
    storing `store` (O); resid: the residual's device word, or a null pointer (np.uint64(0))."""
    grid, threads = launch_shape(variant, dtype, block, store, k)
    return grid, threads, (out, u, np.int64(u.strides[0] // u.itemsize), *map(np.int32, region), *map(np.int32, store),
                           np.int32(block[1]), resid, w.wc, w.wx, w.wy, *data_args(w, u, dtype))


def misaligned(a) -> int:
    """Columns from column 1 of a field to the first 16-byte aligned one at or after it (0: column 1 is aligned)."""
    return (-(address(a) + a.itemsize) % 16) // a.itemsize


def cut(w, shift: int):
    """w with its data fields from column `shift` on (passed with u from that column); w itself where it has none."""
    if not shift or data_of(w) == PLAIN:
        return w
    from ..core.operator import view

    return view(w, (slice(None), slice(shift, None)))


def address(a) -> int:
    """The address of a numpy or cupy array's first element."""
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def data_prefetch() -> int:
    """Rows ahead the time-tiled kernels ask L2 for the data level 1 will read (kernels/wave.cu DPF): DATA_PREFETCH,
    or the environment's STENCIL_WAVE_DPF (0 to 16; for comparing them on a GPU)."""
    value = os.environ.get("STENCIL_WAVE_DPF", "")
    return int(value) if value.isdigit() and int(value) <= 16 else DATA_PREFETCH


MAX_GRID_Y = 65535


def wave_strips(variant: str, dtype, k: int, out_region) -> tuple[int, int, int]:
    """(first column of strip 0, columns stored per strip, strips) for a `wave` launch storing
    `out_region`; the same arithmetic as kernels/wave.cu."""
    _, _, p0, p1 = out_region
    v, vw = lanes(variant, dtype), 16 // np.dtype(dtype).itemsize
    a = apron(variant, dtype, k)
    xb = 1 + (p0 - 1) // vw * vw - a * v
    wout = (32 - 2 * a) * v
    return xb, wout, -(-(p1 - (xb + a * v)) // wout)


def tile_region(valid, fixed) -> tuple[int, int, int, int]:
    """C (the region kernels/wave.cu updates at every level) for a time tile whose points `valid` hold
    data at the tile's start, `fixed` per side (south, north, west, east) marking a physical side whose
    ghost just outside holds a constant boundary value (solver.parallel.deep's DeepLayout.valid). C is
    `valid` shrunk by one on every side that is not fixed: its one-cell ring, which the kernel reads but
    never updates, is then valid data (no ghost beyond the received ones is read, and none that an
    exchange may be writing while the tile runs), and level L is exact L points inside a side that is
    not fixed, as the host's shrinking region (numba_kernels.tiled) is."""
    (r0, r1, c0, c1), (fs, fn, fw, fe) = valid, fixed
    return r0 + (not fs), r1 - (not fn), c0 + (not fw), c1 - (not fe)


def maxdiff_shape(region) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) of the maxdiff reduction: up to 4 blocks across a row, up to 2048 rows at a time."""
    r0, r1, c0, c1 = region
    bx = MAXDIFF_BLOCK[0]
    return (max(1, min(-(-(c1 - c0) // bx), 4)), max(1, min(r1 - r0, 2048)), 1), (bx, 1, 1)


def launch_shape(variant: str, dtype, block, region, k: int = 1) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) for a region (tiled variants: the region stored); kernels stride over row tiles when
    the grid's y extent is capped."""
    r0, r1, c0, c1 = region
    bx, by = block
    tiles_y = -(-(r1 - r0) // by)
    if variant in TILED:
        strips = wave_strips(variant, dtype, k, region)[2]
        return (-(-strips // (bx // 32)), min(tiles_y, MAX_GRID_Y), 1), (bx, 1, 1)
    if variant in ON_CHIP:
        raise ValueError("chip launches are laid out by chip_layout")
    if variant in ("rows", "vec"):
        v = lanes(variant, dtype)
        groups = (c1 - 2) // v - (c0 - 1) // v + 1
        return (-(-groups // bx), min(tiles_y, MAX_GRID_Y), 1), (bx, 1, 1)
    return (-(-(c1 - c0) // bx), min(tiles_y, MAX_GRID_Y), 1), (bx, by, 1)


def fill_source() -> str:
    """common.cu followed by boundary.cu: the ghost-layer fill of physical sides (solver/core/boundary.py)."""
    root = resources.files("solver.backends") / "kernels"
    return (root / "common.cu").read_text() + "\n" + (root / "boundary.cu").read_text()


def fill_options(dtype) -> tuple[str, ...]:
    real = "float" if np.dtype(dtype) == np.float32 else "double"
    return ("--fmad=false", f"-DREAL={real}")


FILL_THREADS = 256


FILL_ENTRIES = ("fill_sides", "fill_rules")  # boundary.cu: numbers only (the plain case), every rule


def fill_entry(fill) -> str:
    """The boundary.cu entry for `fill`: fill_sides where every rule is of kind 1-3 with a constant number (today's
    kernel and launch), else fill_rules (convective sides, values or gains along a side)."""
    plain = all(r.kind != "convective" and not r.along for r in fill.rules)
    return FILL_ENTRIES[0] if plain else FILL_ENTRIES[1]


def fill_launches(fill, shape: tuple[int, int]) -> list[tuple[int, int, tuple]]:
    """(blocks, axis, rule arguments) per axis with a rule, y first: the launches of boundary.cu's fill_entry(fill).
    fill_sides: (kind_lo, v_lo, kind_hi, v_hi); fill_rules: (kind_lo, v_lo, g_lo, vs_lo, gs_lo, kind_hi, ...), vs and
    gs the values and gains along the side's padded length as float64 host arrays (None: the number v or g)."""
    rules, d = {r.side: r for r in fill.rules}, fill.depth
    ny, nx = shape[0] - 2 * d, shape[1] - 2 * d
    general = fill_entry(fill) == FILL_ENTRIES[1]
    out = []
    for axis, (lo, hi) in enumerate((("bottom", "top"), ("left", "right"))):
        a, b = rules.get(lo), rules.get(hi)
        if a is None and b is None:
            continue
        length = (nx if axis == 0 else ny) + 2 * d
        total = 2 * d * length
        sides = (_fill_side(a, length) if general else (a.code if a else 0, a.value if a else 0.0)) + \
            (_fill_side(b, length) if general else (b.code if b else 0, b.value if b else 0.0))
        out.append((-(-total // FILL_THREADS), axis, sides))
    return out


def _fill_side(rule, length: int) -> tuple:
    """(kind, v, g, vs, gs) of one side for fill_rules: numbers, or float64 arrays of `length` points."""
    if rule is None:
        return 0, 0.0, 1.0, None, None
    out = [rule.code]
    for x in (rule.value, rule.gain):
        out.append(float(x) if np.ndim(x) == 0 else 0.0)
    for x in (rule.value, rule.gain):
        if np.ndim(x) == 0:
            out.append(None)
        else:
            a = np.ascontiguousarray(x, dtype=np.float64)  # the rule's own array where it is one already
            assert a.shape == (length,), f"{rule.side}: {a.shape[0]} values along a side of {length} points"
            out.append(a)
    return tuple(out)
