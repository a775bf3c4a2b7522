"""`stencil bench vectorize`: is the numba stencil kernel vectorised, and when does SIMD pay?

Evidence: the kernel (numba_kernels.step, compiled afresh with its own options but without the
on-disk cache, whose code numba refuses to disassemble) is disassembled with `inspect_asm()`, the
parallel region's gufunc included, and its floating-point arithmetic is counted by kind: packed on
zmm (AVX-512, 512-bit), ymm (AVX/AVX2, 256-bit) or xmm (SSE/AVX-128) registers, and scalar
(`...sd`/`...ss`); gathers are counted apart (a vectorised loop that gathers is usually a sign of
an index numba could not prove non-negative). The instruction set is the widest register packed
arithmetic uses.

Speed: LLVM's loop vectoriser is read by numba at import (NUMBA_LOOP_VECTORIZE), so each setting runs
in its own process (`python -m solver.bench.vectorize worker ...`), which also counts its own packed
instructions: the "off" process must show none. Sizes: a cache-resident grid (two padded arrays in half
of one core's L2) and a memory-bound one (two arrays at least 4x the L3, and at least 4096^2). Time per
step: median of `repeats`, each repeat enough steps for >= 20 ms. The copy bandwidth with the same
threads at the memory-bound size is measured in the "on" process for the fraction-of-ceiling column.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np

ARITH = r"(?:add|sub|mul|div|fmadd\w*|fmsub\w*|fnmadd\w*|fnmsub\w*|min|max)"
PACKED = re.compile(rf"^\s*v?{ARITH}p[sd]\s+(.*)$", re.M)
SCALAR = re.compile(rf"^\s*v?{ARITH}s[sd]\s+", re.M)
ISA = {"zmm": "AVX-512 (512-bit zmm)", "ymm": "AVX/AVX2 (256-bit ymm)", "xmm": "SSE/AVX-128 (128-bit xmm)"}


def count_simd(asm: str) -> dict:
    """Packed FP arithmetic by register width, scalar FP arithmetic, and the widest width used."""
    packed = {"zmm": 0, "ymm": 0, "xmm": 0}
    for operands in PACKED.findall(asm):
        for reg in ("zmm", "ymm", "xmm"):
            if f"%{reg}" in operands:
                packed[reg] += 1
                break
    widest = next((r for r in ("zmm", "ymm", "xmm") if packed[r]), None)
    mnemonics = sorted(set(re.findall(rf"^\s*(v?{ARITH}[ps][sd])\s", asm, re.M)))
    return {"packed": packed, "scalar": len(SCALAR.findall(asm)), "isa": ISA.get(widest, "scalar only (no packed SIMD)"),
            "mnemonics": mnemonics, "gathers": len(re.findall(r"^\s*v(?:p)?gather\w*\s", asm, re.M))}


def fresh_kernel():
    """numba_kernels.step compiled anew with its own target options, minus the disk cache."""
    import numba

    from ..backends import numba_kernels

    opts = {k: v for k, v in numba_kernels.step.targetoptions.items() if k not in ("cache", "nopython")}
    return numba.njit(**opts)(numba_kernels.step.py_func)


def kernel_asm(kernel, dtype: str) -> str:
    u = np.zeros((6, 6), dtype=dtype)
    w = np.dtype(dtype).type
    kernel(u.copy(), u, w(0.1), w(0.2), w(0.2), 1, 5, 1, 5)
    return "\n".join(kernel.inspect_asm().values())


def time_step(kernel, n: int, dtype: str, repeats: int) -> float:
    """Median seconds per step on an n x n random field (two buffers swapped)."""
    u = np.random.default_rng(1).random((n + 2, n + 2)).astype(dtype)
    v = u.copy()
    w = np.dtype(dtype).type
    args = (w(0.1), w(0.225), w(0.225), 1, n + 1, 1, n + 1)
    t = time.perf_counter()
    kernel(v, u, *args)
    steps = max(2, math.ceil(0.02 / max(time.perf_counter() - t, 1e-9)))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(steps // 2):
            kernel(v, u, *args)
            kernel(u, v, *args)
        times.append((time.perf_counter() - t) / (2 * (steps // 2)))
    return float(np.median(times))


def worker(sizes: list[int], dtype: str, threads: int, repeats: int, copy: bool) -> dict:
    """Run inside the subprocess whose environment fixed NUMBA_LOOP_VECTORIZE."""
    import numba

    numba.set_num_threads(threads)
    kernel = fresh_kernel()
    out = {"loop_vectorize": bool(numba.config.LOOP_VECTORIZE), "slp_vectorize": bool(numba.config.SLP_VECTORIZE),
           "asm": count_simd(kernel_asm(kernel, dtype)), "cpu_name": numba.config.CPU_NAME or _host_cpu(),
           "seconds_per_step": {str(n): time_step(kernel, n, dtype, repeats) for n in sizes}}
    if copy:
        from ..parallel.comm import Comm
        from .stream import concurrent_rate, make_stream

        n = (max(sizes) + 2) ** 2
        s = make_stream("numba", n, dtype, threads)
        out["copy_gbs"] = concurrent_rate(Comm(), s.copy, s.synchronize, s.nbytes("copy"), repeats)["gbs"]
    return out


def _host_cpu() -> str:
    import llvmlite.binding as ll

    return ll.get_host_cpu_name()


def cpu_features() -> list[str]:
    import llvmlite.binding as ll

    feats = ll.get_host_cpu_features()
    return [f for f in ("sse2", "avx", "avx2", "fma", "avx512f", "avx512vl") if feats.get(f)]


def cache_bytes(level: int, default: int) -> int:
    """Size of this CPU's cache at `level` (data/unified), from sysfs; `default` when unknown."""
    from ..core.machine import cpu_caches

    return next((c["bytes"] for c in cpu_caches() if c["level"] == level), default)


def default_sizes(dtype: str) -> tuple[int, int]:
    """(cache-resident n, memory-bound n) for n x n grids of this dtype (rules in the module docstring)."""
    b = np.dtype(dtype).itemsize
    l2, l3 = cache_bytes(2, 512 << 10), cache_bytes(3, 32 << 20)
    small = int(math.sqrt(l2 / 2 / (2 * b))) - 2
    large = max(4096, int(math.sqrt(4 * l3 / (2 * b))))
    return max(16, small // 8 * 8), -(-large // 512) * 512


def fits(nbytes: int) -> str:
    """Where two arrays of `nbytes` in all live: 'L2', 'L3' or 'DRAM' (caches of this machine)."""
    if nbytes <= cache_bytes(2, 0):
        return "L2"
    return "L3" if nbytes <= cache_bytes(3, 0) else "DRAM"


def run_worker(vectorize: bool, sizes: list[int], dtype: str, threads: int, repeats: int, copy: bool) -> dict:
    env = {**os.environ, "NUMBA_LOOP_VECTORIZE": "1" if vectorize else "0",
           "NUMBA_NUM_THREADS": str(max(threads, int(os.environ.get("NUMBA_NUM_THREADS", "0") or 0)))}
    cmd = [sys.executable, "-m", "solver.bench.vectorize", "worker", ",".join(map(str, sizes)), dtype, str(threads),
           str(repeats), "1" if copy else "0"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"vectorize worker failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def vectorize_bench(dtype: str, threads: int, sizes: list[int] | None, repeats: int) -> dict:
    from ..core.machine import cpu_count, cpu_model

    sizes = sizes or list(default_sizes(dtype))
    on = run_worker(True, sizes, dtype, threads, repeats, copy=True)
    off = run_worker(False, sizes, dtype, threads, repeats, copy=False)
    bytes_per_update = 2 * np.dtype(dtype).itemsize
    rows = []
    for n in sizes:
        t_on, t_off = on["seconds_per_step"][str(n)], off["seconds_per_step"][str(n)]
        gbs_on = n * n * bytes_per_update / t_on / 1e9
        ws = 2 * (n + 2) ** 2 * np.dtype(dtype).itemsize
        rows.append({"n": n, "working_set_mib": ws / 2**20, "fits": fits(ws),
                     "seconds_on": t_on, "seconds_off": t_off, "mlups_on": n * n / t_on / 1e6,
                     "mlups_off": n * n / t_off / 1e6, "speedup": t_off / t_on, "gbs_on": gbs_on,
                     "gbs_off": n * n * bytes_per_update / t_off / 1e9})
    return {"dtype": dtype, "threads": threads, "repeats": repeats, "cpu": cpu_model(), "cores": cpu_count(),
            "llvm_cpu": on["cpu_name"], "cpu_features": cpu_features(), "asm_on": on["asm"], "asm_off": off["asm"],
            "copy_gbs": on.get("copy_gbs"), "l2_bytes": cache_bytes(2, 0), "l3_bytes": cache_bytes(3, 0),
            "date": time.strftime("%Y-%m-%d %H:%M"), "results": rows}


def print_vectorize(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=140)
    a, b = res["asm_on"], res["asm_off"]
    con.print(f"[bold]numba stencil kernel[/bold] on {res['cpu']} (LLVM target {res['llvm_cpu']}; features "
              f"{', '.join(res['cpu_features'])}), {res['dtype']}, {res['threads']} thread(s)")
    for label, c in (("loop vectoriser on ", a), ("loop vectoriser off", b)):
        con.print(f"  {label}: packed FP arithmetic zmm {c['packed']['zmm']}, ymm {c['packed']['ymm']}, xmm "
                  f"{c['packed']['xmm']}; scalar {c['scalar']}; gathers {c['gathers']}; instruction set: {c['isa']}; "
                  f"{' '.join(c['mnemonics'])}")
    t = Table(title=f"time per step, median of {res['repeats']}; copy bandwidth {res['copy_gbs']:.1f} GB/s "
                    f"({res['threads']} thread(s)); L2 {res['l2_bytes'] >> 10} KiB, L3 {res['l3_bytes'] >> 20} MiB")
    for col in ("grid", "arrays MiB", "fits in", "ms on", "ms off", "MLUP/s on", "MLUP/s off", "SIMD speedup", "GB/s on",
                "of copy"):
        t.add_column(col, justify="right")
    for r in res["results"]:
        t.add_row(f"{r['n']}^2", f"{r['working_set_mib']:.1f}", r["fits"], f"{r['seconds_on'] * 1e3:.4f}",
                  f"{r['seconds_off'] * 1e3:.4f}", f"{r['mlups_on']:.0f}", f"{r['mlups_off']:.0f}",
                  f"{r['speedup']:.2f}x", f"{r['gbs_on']:.1f}", _of_copy(r, res))
    con.print(t)
    con.print(conclusion(res))


def _of_copy(r: dict, res: dict) -> str:
    """Fraction of the DRAM copy ceiling; only meaningful when the arrays live in DRAM."""
    return f"{r['gbs_on'] / res['copy_gbs']:.0%}" if r["fits"] == "DRAM" and res.get("copy_gbs") else "-"


def conclusion(res: dict) -> str:
    """What the numbers say, one clause per size (no claim the measurement does not support)."""
    parts = []
    for r in res["results"]:
        where = f"arrays in {r['fits']}"
        if r["fits"] == "DRAM" and res.get("copy_gbs"):
            frac = r["gbs_on"] / res["copy_gbs"]
            where += f", {frac:.0%} of the copy ceiling" + (": memory-bound" if frac >= 0.6 else "")
        parts.append(f"{r['n']}^2 ({where}): SIMD speedup {r['speedup']:.2f}x")
    return "; ".join(parts) + "."

if __name__ == "__main__" and len(sys.argv) == 7 and sys.argv[1] == "worker":
    _, _, sizes_arg, dtype_arg, threads_arg, repeats_arg, copy_arg = sys.argv
    print(json.dumps(worker([int(s) for s in sizes_arg.split(",")], dtype_arg, int(threads_arg), int(repeats_arg),
                            copy_arg == "1")))
