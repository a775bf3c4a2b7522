"""Development probe for the time-tiled `wave` kernels (one device call): registers and local memory
of every configuration, bitwise check against k steps of `vec` (16384^2 and an odd 1001 x 777 grid),
and the time per step of wave/wave2 x k x block beside `vec` and the device-to-device copy, all
measured in the same process (CUDA events, median of repeats). Prints one table row per
configuration; `--json F` keeps every figure.

    python tools/gpu_wave_probe.py --dtype float32 --size 16384 --tiles 4 8 12 16 --json F
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser()
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
    a = p.parse_args()
    import cupy as cp

    from solver.backends import cupy_kernels as gk
    from solver.backends.cupy_backend import CupyBackend
    from solver.bench.tune import random_field
    from solver.config import BackendSettings
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


if __name__ == "__main__":
    main()
