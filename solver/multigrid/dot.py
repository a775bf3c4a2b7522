"""Dot products with the same bits on every rank count, decomposition, thread count and backend.

A sum of floating-point numbers depends on the order of its additions, and MPI_Allreduce, threads and GPUs
each choose their own. So the terms are first split at fixed boundaries (Demmel and Nguyen's pre-rounding,
the idea behind ReproBLAS): with M the largest |term| over every rank and N the number of terms,
s1 = 2^(ceil(log2 M) + ceil(log2 N) + 2); each term t gives q1 = (t + s1) - s1, a multiple of s1's last
bit, and the rest r = t - q1 (exact); r splits again at s2 = s1 2^(ceil(log2 N) + 2 - 53). Sums of the q1
(and of the q2) are multiples of one bit no larger than s1 / 4 in any order, so they are exact, whatever the
order: every rank adds its own in any order, the ranks' partial sums add exactly, and the result is
q1-sum + q2-sum, rounded once. About 2 (53 - log2 N - 3) bits of the largest term survive: full double
precision up to N = 2^22 points, 44 bits at 2^31. The terms are products in float64 (exact for float32
fields); two passes (the largest product, then the sums) and two collectives per dot.
"""

from __future__ import annotations

import math
import time


def boundaries(largest: float, count: int) -> tuple[float, float]:
    """(s1, s2) for terms no larger than `largest` in magnitude, `count` of them."""
    e = math.frexp(largest)[1]  # largest < 2^e
    n = max(1, (count - 1).bit_length())  # count <= 2^n
    s1 = math.ldexp(1.0, e + n + 2)
    return s1, math.ldexp(s1, n + 2 - 53)


def dot(backend, comm, a, b, region, count: int, timer, largest: float | None = None) -> float:
    """sum of a*b over every rank's region (collective), the same bits on every rank count; `count`: the
    number of terms over all ranks. NaN when a product is not finite. The passes are charged to compute,
    the collectives to wait. largest: the largest |a*b| over every rank where the caller knows it (a square's:
    the largest |a| squared, rounding being monotone), which saves the first pass and its collective."""
    t = time.perf_counter()
    if largest is None:
        local = backend.products_max(a, b, region)
        t = timer.add("compute", t)
        largest = comm.allmax(local)
        t = timer.add("wait", t)
    if largest == 0.0 or not math.isfinite(largest):
        return largest if largest == 0.0 else float("nan")
    s1, s2 = boundaries(largest, count)
    mine = backend.folded_sums(a, b, region, s1, s2)
    t = timer.add("compute", t)
    parts = comm.allgather(mine)
    timer.add("wait", t)
    return math.fsum(p[0] for p in parts) + math.fsum(p[1] for p in parts)
