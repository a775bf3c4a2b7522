"""The numba backend beside pystencils (an established stencil code generator) on the same problem,
in one process, against a copy bandwidth measured in the same run.

    pip install pystencils     # not a dependency of stencil
    python tools/compare_pystencils.py [--size 4096] [--threads N] [--repeats 7] [--steps 20]

pystencils generates C with OpenMP and explicit SIMD (the widest x86 target this CPU supports) for
the same 5-point update and weights, compiled by the system C compiler; OMP_NUM_THREADS is set to the
same thread count as numba before anything is compiled. Every variant runs on a random field and is
checked against the numpy backend (pystencils is free to reassociate, so that check is 1e-12 relative).
"""

import argparse
import os
import time

import numpy as np


def median_step(fn, u, v, repeats, steps):
    fn(u, v)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps):
            fn(u, v)
            u, v = v, u
        times.append((time.perf_counter() - t) / steps)
    return float(np.median(times)), float(min(times)), float(max(times))


def pystencils_kernel(w, u):
    """pystencils' generated 5-point kernel with weights (wc, wx, wy), OpenMP on, for the widest SIMD
    target that compiles here (tried on a copy of u); (kernel, target name or None for scalar)."""
    import pystencils as ps

    src, dst = ps.fields("src, dst: double[2D]", layout="c")
    upd = ps.Assignment(dst.center, w[0] * src.center + w[1] * (src[0, -1] + src[0, 1]) + w[2] * (src[-1, 0] + src[1, 0]))
    for target in ("X86_AVX512", "X86_AVX", "X86_SSE", None):
        try:
            cfg = ps.CreateKernelConfig(target=getattr(ps.Target, target) if target else ps.Target.CPU)
            cfg.cpu.openmp.enable = True
            if target:
                cfg.cpu.vectorize.enable = True
                cfg.cpu.vectorize.assume_inner_stride_one = True
            kern = ps.create_kernel(upd, cfg).compile()
            kern(src=u, dst=u.copy())
            return kern, target
        except Exception as exc:  # noqa: BLE001 - this CPU or version lacks that target; try the next
            print(f"pystencils target {target}: {type(exc).__name__}; trying the next")
    raise SystemExit("pystencils: no target compiled")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import numba

    from solver.backends import numba_kernels as k
    from solver.bench.stencil import bench_weights

    numba.set_num_threads(a.threads)
    n = a.size
    w = bench_weights("float64")
    rng = np.random.default_rng(0)
    u0 = rng.random((n + 2, n + 2))

    x = rng.random((n + 2) ** 2)
    y = np.empty_like(x)

    results = {}
    kern, target = pystencils_kernel((w.wc, w.wx, w.wy), u0)
    results[f"pystencils ({target or 'scalar'}, OpenMP)"] = (lambda s, d: kern(src=s, dst=d), 1)

    def plain(s, d):
        k.step(d, s, w.wc, w.wx, w.wy, 1, n + 1, 1, n + 1)

    def tiled(s, d, depth=4):
        k.fused(d, s, w.wc, w.wx, w.wy, depth, a.threads)

    results["numba time_tile=1"] = (plain, 1)
    results["numba time_tile=4"] = (tiled, 4)  # one call = 4 steps

    ref = u0.copy()
    from solver.backends.numpy_backend import NumpyBackend

    out = u0.copy()
    for _ in range(4):
        NumpyBackend.step(None, out, ref, w, (1, n + 1, 1, n + 1))
        ref, out = out, ref
    # Round-robin: every repeat times the copy and each variant back to back, so a noisy neighbour on a
    # shared machine slows all of them alike; medians are taken afterwards.
    timings = {name: [] for name in ["copy", *results]}
    fields = {name: (u0.copy(), u0.copy()) for name in results}
    for name, (fn, _) in results.items():
        fn(*fields[name])  # compile / warm up
    for _ in range(a.repeats):
        timings["copy"].append(median_step(lambda s, d: k.copy(d, s, 1.0), x, y, 1, 1)[0])
        for name, (fn, per_call) in results.items():
            timings[name].append(median_step(fn, *fields[name], 1, a.steps // per_call)[0] / per_call)
    copy_gbs = 2 * x.nbytes / float(np.median(timings["copy"])) / 1e9
    print(f"{n}x{n} float64, {a.threads} threads, median of {a.repeats} rounds (copy, then {a.steps} steps of each "
          f"variant); copy (numba, same threads) {copy_gbs:.1f} GB/s; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'variant':34s} {'ms/step':>8s} {'MLUP/s':>8s} {'GB/s':>7s} {'of copy':>8s}  check")
    for name, (fn, per_call) in results.items():
        med, lo, hi = float(np.median(timings[name])), min(timings[name]), max(timings[name])
        got, tmp = u0.copy(), u0.copy()
        for _ in range(4 // per_call):
            fn(got, tmp)
            got, tmp = tmp, got
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
        gbs = n * n * 16 / med / 1e9
        print(f"{name:34s} {med * 1e3:8.3f} {n * n / med / 1e6:8.0f} {gbs:7.1f} {gbs / copy_gbs:8.2f}  "
              f"rel. error {err:.1e} (spread {lo * 1e3:.3f}-{hi * 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
