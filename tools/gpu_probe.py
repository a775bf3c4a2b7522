#!/usr/bin/env python3
"""GPU kernel probes for the development of the CuPy kernels (docs/gpu_tiling_notes.md; BENCHMARKS.md, "GPU time
tiling" and "GPU issue 26"): one script, a subcommand per probe. They time or inspect kernels outside a run; what
users time is `stencil tune` and `stencil run`.

    python3 tools/gpu_probe.py chip ITEM ...        kernel-only time per step of `chip` at 2048^2 (one GPU)
    python3 tools/gpu_probe.py chip-ncu ITEM ...    one `chip` launch per ITEM, for Nsight Compute
    python3 tools/gpu_probe.py chip-sass ITEM ...   `chip`'s static instruction mix (nvcc and nvdisasm; no GPU)
    python3 tools/gpu_probe.py wave [OPTIONS]       the time-tiled `wave` kernels against `vec` and the copy

chip: Kernel-only time per step of `chip` at 2048^2 (one GPU; issue 26's diagnosis, docs/gpu_tiling_notes.md v6-v9):
    median of 5 x 2048 steps in launches of 256, CUDA events. Each argument DTYPE:THREADSxROWS:LEVELS[:DEFINE,...]
    is one kernel: LEVELS 1 (v6) or 2 (the two-level pass, STENCIL_CHIP_LEVELS), DEFINEs added to the compile. Two
    are the probe's own: steps=N (launches of N steps instead of 256, 2048 steps in all), resid (every launch
    folds the check's residual, in the module a check's batch runs) and every=N (each launch also flags NaN /
    Inf at heat checks every N steps inside it, as core.loop's checks inside a batch). Others compile parts of the two-level pass
    out: -DCHIP_EXP_NOWAIT (no wait for the blocks above / below), -DCHIP_EXP_NOSYNC (no barrier a pass): those
    compute wrong results on purpose, only their time counts; -DCHIP_EXP_NOFENCE (a chip.cu up to cbe2efe: no
    __threadfence before a pass's release, as the package's kernel releases since a0e581e). A suffix @PATH
    compiles another chip.cu instead of the package's (an earlier version, to compare in the same call).

        python3 tools/gpu_probe.py chip float64:512x4:1 float64:512x4:2 float64:256x5:2:-DCHIP_EXP_NOWAIT,-DCHIP_EXP_NOSYNC
        python3 tools/gpu_probe.py chip float64:512x4:2@old/chip.cu float64:512x4:2 float64:512x4:2:steps=1024

    One JSON line per kernel; all of them in $OUT/kt.json (or ./kt.json).

chip-ncu: One `chip` launch of 64 steps per DTYPE:THREADSxROWS argument at 2048^2, for Nsight Compute (issue 26):

        ncu --clock-control none -k regex:^chip$ --section SpeedOfLight ... python3 tools/gpu_probe.py chip-ncu float64:512x4 float32:512x8

    STENCIL_CHIP_LEVELS=1 or 2 picks one or two levels a pass (v6, or v8; docs/gpu_tiling_notes.md).

chip-sass: Static instruction mix of `chip`'s pass loop at 2048^2 on 132 multiprocessors (issue 26; no GPU needed):
    each argument DTYPE:THREADSxROWS:LEVELS[@PATH] is compiled as the backend compiles its hot module (no residual,
    every tile interior) with `nvcc -arch=sm_90 -cubin` and disassembled with `nvdisasm` (on PATH, or from the
    `nvidia-cuda-nvdisasm` wheel: `pip install nvidia-cuda-nvdisasm`); PATH compiles another chip.cu. Printed:
    the registers and spills (ptxas), and per backward branch of at least 200 instructions (the pass loop; the
    longest first) the instructions a warp issues per iteration by opcode. docs/gpu_tiling_notes.md (v8).

        python3 tools/gpu_probe.py chip-sass float64:512x4:2 float64:512x4:2@old_chip.cu


wave: Development probe for the time-tiled `wave` kernels (one device call): registers and local memory
    of every configuration, bitwise check against k steps of `vec` (16384^2 and an odd 1001 x 777 grid),
    and the time per step of wave/wave2 x k x block beside `vec` and the device-to-device copy, all
    measured in the same process (CUDA events, median of repeats). Prints one table row per
    configuration; `--json F` keeps every figure.

        python3 tools/gpu_probe.py wave --dtype float32 --size 16384 --tiles 4 8 12 16 --json F

"""

import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

# chip: the probe's own compile of chip.cu ------------------------------------------------------------

EXTRA = []  # defines added to the compile (-DCHIP_EXP_...)
SRC = []  # the chip.cu compiled now, with the probe's switches
SOURCE = ["package"]  # where it came from (the row says)


def _kernels():
    return resources.files("solver.backends") / "kernels"


def _patch_chip() -> None:
    """Compile `chip` from SRC with EXTRA defines (the package's cupy_kernels, patched in this process only)."""
    from solver.backends import cupy_kernels as gk

    if SRC:
        return
    root = _kernels()
    SRC.append(probe_source((root / "chip.cu").read_text()))
    opts, src = gk.options, gk.source
    gk.options = lambda *a, **k: opts(*a, **k) + tuple(EXTRA)
    gk.source = lambda v: (root / "common.cu").read_text() + "\n" + SRC[0] if v == "chip" else src(v)


def probe_source(src: str) -> str:
    """chip.cu with the switches that compile out the neighbour waits and the barrier of a pass."""
    src = src.replace("__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)\n{",
                      "__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)\n{\n#ifdef CHIP_EXP_NOWAIT\n    return;\n#endif")
    fenced = "        __syncthreads();\n        if (c.tid == 0) {\n            __threadfence();\n"  # (v8 and before)
    plain = "        __syncthreads();\n        if (c.tid == 0) flag_release(c.flags + c.b, (unsigned)k + 2);"
    assert (fenced in src or plain in src) and "{\n#ifdef CHIP_EXP_NOWAIT" in src
    src = src.replace(fenced, "#ifndef CHIP_EXP_NOSYNC\n        __syncthreads();\n#endif\n        if (c.tid == 0) {\n"
                      "#ifndef CHIP_EXP_NOFENCE\n            __threadfence();\n#endif\n")
    return src.replace(plain, "#ifndef CHIP_EXP_NOSYNC\n" + plain.replace("\n        if", "\n#endif\n        if"))


def run(dtype, block, levels, extra, total=2048):
    from solver.backends.cupy_backend import CupyBackend
    from solver.bench.gpu import make_case
    from solver.bench.tune import random_field
    from solver.core.physics import weights

    steps = next((int(e[6:]) for e in extra if e.startswith("steps=")), 256)
    every = next((int(e[6:]) for e in extra if e.startswith("every=")), 0)
    checks = list(range(every, steps, every)) if every else []
    resid = "resid" in extra
    EXTRA[:] = [e for e in extra if e != "resid" and not e.startswith(("steps=", "every="))]
    os.environ["STENCIL_CHIP_LEVELS"] = str(levels)
    case = make_case(2048, 2048, dtype)
    be = CupyBackend(case.backend, dtype)
    be.configure("chip", block, False, steps)
    be.use_graphs = False
    cp = be.cp
    shape = (2050, 2050)
    a, b = random_field(be, shape), be.zeros(shape)
    w = weights(case).cast(dtype)
    region = (1, 2049, 1, 2049)
    a, b = be.advance(a, b, w, steps, region, resid, checks)  # compiled and loaded before the timing
    be.synchronize()
    ts = []
    for _ in range(5):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(be.main)
        for _ in range(total // steps):  # one advance a launch: with `resid` each launch folds the residual
            a, b = be.advance(a, b, w, steps, region, resid, checks)
        e.record(be.main)
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3 / (total // steps * steps))
    fn = be._chip_function(block, (2048, 2048), resid)
    row = {"dtype": dtype, "block": block, "levels": levels, "extra": extra, "steps_a_launch": steps, "resid": resid, "checks_inside": len(checks), "source": SOURCE[0], "us_per_step": float(np.median(ts)) * 1e6,
           "registers": getattr(fn, "num_regs", None), "local_bytes": getattr(fn, "local_size_bytes", None)}
    print(json.dumps(row), flush=True)
    return row


def parse(item: str):
    item, _, path = item.partition("@")
    SRC[0] = probe_source(open(path).read() if path else (_kernels() / "chip.cu").read_text())
    SOURCE[0] = path or "package"
    dtype, shape, levels, *extra = item.split(":")
    return dtype, tuple(int(x) for x in shape.split("x")), int(levels), extra[0].split(",") if extra else []


def chip_main(items: list[str]) -> None:
    _patch_chip()
    out = []
    for item in items:
        try:
            out.append(run(*parse(item)))
        except Exception as e:  # noqa: BLE001 - one kernel's failure (e.g. too many registers) ends only its row
            print("FAILED", item, repr(e)[:300], flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), "kt.json"), "w") as f:
            json.dump(out, f, indent=1)


# chip-ncu ---------------------------------------------------------------------------------------------

def chip_ncu_main(items: list[str]) -> None:
    from solver.backends.cupy_backend import CupyBackend
    from solver.bench.gpu import make_case
    from solver.bench.tune import random_field
    from solver.core.physics import weights

    for item in items:
        dtype, shape = item.split(":")
        block = tuple(int(x) for x in shape.split("x"))
        case = make_case(2048, 2048, dtype)
        be = CupyBackend(case.backend, dtype)
        be.configure("chip", block, False, 64)
        be.use_graphs = False
        u = random_field(be, (2050, 2050))
        v = be.zeros(u.shape)
        be.advance(u, v, weights(case).cast(dtype), 64, (1, 2049, 1, 2049), False)
        be.synchronize()
        print("ncu_chip:", item, be.launch_facts(u.shape), flush=True)
        del be, u, v


# chip-sass --------------------------------------------------------------------------------------------

def nvdisasm() -> str:
    found = shutil.which("nvdisasm") or next(iter(glob.glob(sysconfig.get_paths()["purelib"] + "/nvidia/*/bin/nvdisasm")), None)
    if found is None:
        sys.exit("gpu_probe chip-sass: no nvdisasm on PATH or in the nvidia-cuda-nvdisasm wheel; pip install nvidia-cuda-nvdisasm")
    return found


def build(item: str, tmp: Path) -> tuple[str, str]:
    """(ptxas's register line, the SASS) of one DTYPE:THREADSxROWS:LEVELS[@PATH]."""
    from solver.backends import cupy_kernels as gk

    root = Path(gk.__file__).parent / "kernels"
    item, _, path = item.partition("@")
    dtype, shape, levels = item.split(":")
    block = tuple(int(x) for x in shape.split("x"))
    layout = gk.chip_layout(dtype, (2048, 2048), 132, block, 232448, int(levels))
    v = gk.chip_columns(block[0])
    opts = gk.options("chip", dtype, (layout[2], block[1]), rt=layout[3], v=v, levels=int(levels), resid=False,
                      allfast=gk.chip_all_interior(layout, (2048, 2048), v))
    src = tmp / "chip.cu"
    src.write_text((root / "common.cu").read_text() + "\n" + (Path(path) if path else root / "chip.cu").read_text())
    cubin = tmp / "chip.cubin"
    p = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(cubin), "-Xptxas", "-v", *opts, str(src)],
                       capture_output=True, text=True, check=True)
    regs = "; ".join(line.split(":")[-1].strip() for line in p.stderr.splitlines() if "registers" in line or "spill" in line)
    return regs, subprocess.run([nvdisasm(), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout


def loops(sass: str, least: int = 200) -> list[collections.Counter]:
    """Opcode counts of each backward branch's body of at least `least` instructions, longest first."""
    ins, labels = [], {}
    for line in sass.splitlines():
        if m := re.match(r"^\s*(\.L_x_\d+):", line):
            labels[m.group(1)] = len(ins)
        elif m := re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line):
            ins.append(re.sub(r"^@!?U?P\w+\s+", "", m.group(1).strip()).split()[0].split(".")[0])
    bodies = []
    for i, text in enumerate(re.findall(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", sass)):
        if (m := re.search(r"BRA\s+`\((\.L_x_\d+)\)", text)) and labels.get(m.group(1), i + 1) <= i:
            if i + 1 - labels[m.group(1)] >= least:
                bodies.append(collections.Counter(ins[labels[m.group(1)]:i + 1]))
    return sorted(bodies, key=lambda c: -sum(c.values()))


def chip_sass_main(items: list[str]) -> None:
    for item in items:
        with tempfile.TemporaryDirectory() as tmp:
            regs, sass = build(item, Path(tmp))
        print(f"{item}: {regs}")
        for body in loops(sass)[:1]:
            print(f"  pass loop: {sum(body.values())} instructions a warp:", ", ".join(f"{k} {n}" for k, n in body.most_common()))


# wave -------------------------------------------------------------------------------------------------

def wave_main(argv: list[str]) -> None:
    import argparse

    p = argparse.ArgumentParser(prog="gpu_probe.py wave")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--size", type=int, default=16384)
    p.add_argument("--tiles", type=int, nargs="+", default=[4, 8, 12, 16])
    p.add_argument("--variants", nargs="+", default=["wave", "wave2"])
    p.add_argument("--blocks", nargs="+", default=["32x256", "64x256", "128x128"])
    p.add_argument("--steps", type=int, default=192)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json")
    p.add_argument("--source", help="a wave.cu to compare instead of the packaged one")
    p.add_argument("--skip-checks", action="store_true", help="only the tiled configurations (no maxdiff comparison)")
    a = p.parse_args(argv)
    import cupy as cp

    from solver.backends import cupy_kernels as gk
    from solver.backends.cupy_backend import CupyBackend
    from solver.bench.tune import random_field
    from solver.case import BackendSettings
    from solver.core.physics import Weights

    be = CupyBackend(BackendSettings(name="cupy"), a.dtype)
    w = Weights(0.1, 0.2, 0.25).cast(a.dtype)
    n = a.size
    shape, region = (n + 2, n + 2), (1, n + 1, 1, n + 1)
    u0 = random_field(be, shape)
    x, y = be.zeros(shape), be.zeros(shape)
    copy = be.copy_bandwidth(u0.shape[0] * u0.strides[0], a.repeats)
    print(f"{be.gpu_name} {a.dtype} {n}^2: copy {copy / 1e9:.0f} GB/s", flush=True)
    be.configure("vec", (128, 8))

    def vec_steps(src, k):
        ref, other = be.zeros(src.shape), be.zeros(src.shape)
        reg = (1, src.shape[0] - 1, 1, src.shape[1] - 1)
        with be.main:
            ref[...] = src
            other[...] = src
        for _ in range(k):
            be.launch(other, ref, w, reg, be.main)
            ref, other = other, ref
        return ref, other

    def timed(fn, launches, k):
        fn(2)
        times = []
        for _ in range(a.repeats):
            e0 = be._record(be.main)
            fn(launches)
            e1 = be._record(be.main)
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1) / 1e3 / (launches * k))
        return float(np.median(times)), [float(min(times)), float(max(times))]

    rows = []

    def vec_loop(m):
        for i in range(m):
            be.launch(y if i % 2 == 0 else x, x if i % 2 == 0 else y, w, region, be.main)

    with be.main:
        x[...] = u0
        y[...] = u0
    t, spread = timed(vec_loop, a.steps, 1)
    vec_t = t
    rows.append({"kernel": "vec", "block": [128, 8], "k": 1, "s": t, "spread": spread, "regs": None, "bitwise": True})
    print(f"vec 128x8 k=1: {t * 1e3:.4f} ms/step {n * n / t / 1e9:.0f} GUP/s", flush=True)
    if not a.skip_checks:
        rows.append(compare_reductions(be, cp, gk, x, y, u0, region, timed, a.dtype))
    small = (1001, 777)
    host = np.random.default_rng(3).uniform(-1, 1, (small[0] + 2, small[1] + 2)).astype(a.dtype)
    su = be.asarray(host)
    sregion = (1, small[0] + 1, 1, small[1] + 1)
    refs = {}
    resid = cp.zeros(1, dtype=np.uint32 if a.dtype == "float32" else np.uint64)
    for k in a.tiles:
        refs[k] = vec_steps(u0, k)
        sref = be.to_host(vec_steps(su, k)[0])
        for variant in a.variants:
            for b in a.blocks:
                block = tuple(int(v) for v in b.split("x"))
                t0 = time.perf_counter()
                try:
                    code = gk.source(variant)
                    if a.source:  # common.cu followed by the given file
                        code = code[:code.index("\n// wave (variants")] + "\n" + open(a.source).read()
                    mod = cp.RawModule(code=code, options=gk.options(variant, a.dtype, block, False, k))
                    fn = mod.get_function("wave")
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"{variant} {b} k={k}: compile failed: {str(exc)[:2000]}", flush=True)
                    continue
                compile_s = time.perf_counter() - t0

                def go(out, src, reg, res=None):
                    grid, threads = gk.launch_shape(variant, a.dtype, block, reg, k)
                    r0, r1, c0, c1 = reg
                    fn(grid, threads, (out, src, np.int64(src.strides[0] // src.itemsize), *map(np.int32, reg),
                                       *map(np.int32, reg), np.int32(block[1]), res if res is not None else np.uint64(0),
                                       w.wc, w.wx, w.wy),
                       stream=be.main)

                out = be.zeros(shape)
                with be.main:
                    out[...] = np.nan  # poison: every interior point must be written
                    resid[...] = 0
                go(out, u0, region, resid)
                with be.main:
                    same = bool(cp.array_equal(out[1:-1, 1:-1], refs[k][0][1:-1, 1:-1]))
                    d = refs[k][0][1:-1, 1:-1] - refs[k][1][1:-1, 1:-1]
                    want_res = float(cp.max(cp.abs(d)))
                got_res = float(resid.view(a.dtype)[0])
                poisoned = host.copy()
                poisoned[1:-1, 1:-1] = np.nan  # ghosts as the source's, interior poisoned
                sout = be.asarray(poisoned)
                go(sout, su, sregion)
                same_small = bool(np.array_equal(be.to_host(sout), sref))
                del out, sout

                def loop(m):
                    for i in range(m):
                        go(y if i % 2 == 0 else x, x if i % 2 == 0 else y, region)

                launches = max(2, a.steps // k)
                t, spread = timed(loop, launches, k)
                r = {"kernel": variant, "block": list(block), "k": k, "s": t, "spread": spread, "regs": fn.num_regs,
                     "local": fn.local_size_bytes, "bitwise": same and same_small, "bitwise_16k": same,
                     "bitwise_odd": same_small, "resid_ok": got_res == want_res, "compile_s": compile_s,
                     "vs_vec": vec_t / t, "gups": n * n / t / 1e9, "eff_vs_copy": n * n * 2 * be.dtype.itemsize / t / copy}
                rows.append(r)
                print(f"{variant:5} {b:>8} k={k:2}: {t * 1e3:.4f} ms/step {r['gups']:6.0f} GUP/s {r['vs_vec']:.2f}x vec "
                      f"{r['eff_vs_copy']:.2f}x copy regs {fn.num_regs} local {fn.local_size_bytes} bitwise "
                      f"{same}/{same_small} resid {r['resid_ok']} compile {compile_s:.1f}s", flush=True)
    res = {"gpu": be.gpu_name, "dtype": a.dtype, "size": n, "copy_gbs": copy / 1e9, "vec_s": vec_t, "rows": rows,
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    best = min((r for r in rows if r.get("bitwise") and r["kernel"] not in ("vec", "maxdiff")), key=lambda r: r["s"], default=None)
    if best:
        print(f"BEST {a.dtype}: {best['kernel']} {best['block']} k={best['k']} {best['s'] * 1e3:.4f} ms/step "
              f"{best['vs_vec']:.2f}x vec {best['eff_vs_copy']:.2f}x copy", flush=True)


def compare_reductions(be, cp, gk, x, y, u0, region, timed, dtype) -> dict:
    """The check's reduction over the 2-D pitched views: kernels/maxdiff.cu vs a CuPy ReductionKernel
    (what the backend used before: 0.22 s at 16384^2, the constant of issue 12)."""
    md = cp.RawModule(code=gk.source("maxdiff"), options=gk.options("maxdiff", dtype, gk.MAXDIFF_BLOCK)).get_function("maxdiff")
    red = cp.ReductionKernel("T x, T y", "T m", "x > y ? x - y : y - x", "(a > b || a != a) ? a : b", "m = a", "0",
                             "stencil_max_abs_diff")
    word = be._word
    with be.main:
        x[...] = u0
        y[...] = u0
        y[5, 7] += 0.5
    pitch = np.int64(x.strides[0] // x.itemsize)

    def md_run(m):
        for _ in range(m):
            be._zero_word(be.main)
            md(*gk.maxdiff_shape(region), (word, x, y, pitch, pitch, *map(np.int32, region)), stream=be.main)

    def red_run(m):
        with be.main:
            for _ in range(m):
                red(x[1:-1, 1:-1], y[1:-1, 1:-1])

    t_md, _ = timed(md_run, 10, 1)
    got = float(word.get(stream=be.main).view(dtype)[0])
    with be.main:
        want = float(cp.max(cp.abs(x[1:-1, 1:-1] - y[1:-1, 1:-1])))
    t_red, _ = timed(red_run, 3, 1)
    print(f"maxdiff kernel {t_md * 1e3:.3f} ms (equal: {got == want}), CuPy ReductionKernel {t_red * 1e3:.3f} ms", flush=True)
    return {"kernel": "maxdiff", "s": t_md, "reduction_kernel_s": t_red, "equal": got == want}


COMMANDS = {"chip": chip_main, "chip-ncu": chip_ncu_main, "chip-sass": chip_sass_main, "wave": wave_main}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: gpu_probe.py {{{' | '.join(COMMANDS)}}} ARGS (see the docstring)")
    COMMANDS[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
