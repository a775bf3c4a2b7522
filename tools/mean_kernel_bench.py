#!/usr/bin/env python3
"""The probes' exact mean kernel alone (solver.backends.numba_kernels._mean_segment: the magnitudes' pass, then the
digits' pass), ns a value on one thread, over a segment in cache as a time tile's row is: against the plain float sum
of the same segment (np.sum's pairwise sum, a ceiling for any one-pass reduction) measured in the same run.

    python tools/mean_kernel_bench.py [--length 2048] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from numba import njit

    from solver.backends import numba_kernels as nk
    from solver.core import exactsum

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()

    @njit
    def mean_segment(v, acc, calls):
        for _ in range(calls):
            nk._mean_segment(v, acc)

    @njit
    def float_sum(v, calls):
        t = 0.0
        for _ in range(calls):
            t += np.sum(v)
        return t

    v = np.random.default_rng(1).random(args.length) * 300.0 - 20.0
    acc = np.zeros(exactsum.NPOS + 1, dtype=np.int64)
    calls = max(1, 20_000_000 // args.length)
    mean_segment(v, acc, 1), float_sum(v, 1)
    times = {"exact mean (_mean_segment)": [], "float sum (np.sum)": []}
    for _ in range(args.repeats):
        for label in times:
            t = time.perf_counter()
            mean_segment(v, acc, calls) if label.startswith("exact") else float_sum(v, calls)
            times[label].append((time.perf_counter() - t) / calls / args.length * 1e9)
    med = {k: statistics.median(x) for k, x in times.items()}
    print(json.dumps({"length": args.length, "ns_per_value": med}))
    for k, x in med.items():
        print(f"| {k} | {x:.3f} ns a value | {x / med['float sum (np.sum)']:.2f}x the float sum |")


if __name__ == "__main__":
    main()
