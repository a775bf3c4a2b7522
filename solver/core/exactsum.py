"""An order-free sum for the probes' mean: the same bits whatever order, grouping, thread, tile or rank adds the values.

A float sum's bits depend on the order of its additions; a mean summed inside time tiles, threads or ranks would
change with them. So a mean is taken of values truncated to one grid: with amax the largest |x| of the region and P
its position (below), every finite x counts as trunc(x / g) g, g = 2^(W (P - 2) + B0), at least 2W = 64 bits below
amax's leading bit (its error is under 2^-64 amax, against a float sum's n 2^-53). Each x is split into three
W-bit digits at fixed positions (d_j of |x| at 2^(W j + B0), signed as x); a group of values (a row's segment)
takes its digits relative to its own largest |x|, whose position is at most P, so each position's integer sum is the
same exact number whichever groups added it (positions below P - 2 are dropped at the end). The mean is that exact
sum over the count, rounded once (Python's int division is correctly rounded).

Kernels add the digits (solver.backends.numba_kernels: sample_row, masked_mean); this module holds the grid and
turns the sums into the value. `reference` is the definition written plainly, for tests.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

W = 32  # bits a digit
B0 = -1152  # the weight 2^B0 of position 0's lowest bit: the least subnormal's position is 2 (-1074 - B0 = 78 = 2 W + 14)
NPOS = 68  # positions 0..67: the largest double's is (1023 - B0) // W = 67
NAN, POS_INF, NEG_INF = 1, 2, 4  # flags: a NaN, +inf or -inf among the values
# max and min compare doubles as ordered int64 keys, bits ^ ((bits >> 63) & MAG) (an involution; -0.0 below +0.0,
# NaNs beyond the infinities): solver.backends.numba_kernels._key in the kernels, solver.io.probes._flip on the host
MAG = np.int64(0x7FFFFFFFFFFFFFFF)  # a double's bits less its sign
LOWEST, HIGHEST = np.int64(-(2 ** 63)), np.int64(2 ** 63 - 1)  # the least and largest key: a max's and a min's start


def position(a: float) -> int:
    """The position of the digit holding a's leading bit (a > 0, finite)."""
    return (math.frexp(a)[1] - 1 - B0) // W


def value(digits, amax: float, count: int, flags: int) -> float:
    """The mean from the summed digits (NPOS int64 sums), the largest |x|, the number of values and their flags:
    NaN where a value is NaN or both infinities occur, an infinity where one does (numpy's sum's rules)."""
    if flags & NAN or (flags & POS_INF and flags & NEG_INF):
        return math.nan
    if flags & POS_INF:
        return math.inf
    if flags & NEG_INF:
        return -math.inf
    if count == 0:
        return math.nan
    if amax == 0.0:
        return 0.0
    lo = position(amax) - 2
    kept = np.asarray(digits[lo:NPOS], dtype=np.int64).tolist()  # positions lo.. as Python ints
    num = sum(d << (W * k) for k, d in enumerate(kept))
    e = W * lo + B0
    return (num << e) / count if e >= 0 else num / (count << -e)


def reference(values) -> float:
    """The mean as defined above, in exact rational arithmetic (tests compare the kernels' bits with it)."""
    v = [float(x) for x in np.asarray(values, dtype=np.float64).reshape(-1)]
    flags = (NAN if any(x != x for x in v) else 0) | (POS_INF if math.inf in v else 0) | (NEG_INF if -math.inf in v
                                                                                           else 0)
    finite = [x for x in v if math.isfinite(x)]
    amax = max((abs(x) for x in finite), default=0.0)
    if flags or not v or amax == 0.0:
        return value(np.zeros(NPOS, np.int64), amax, len(v), flags)
    g = Fraction(2) ** (W * (position(amax) - 2) + B0)
    total = sum((math.floor(Fraction(abs(x)) / g) * (1 if x > 0 else -1) for x in finite), 0) * g
    return float(total / len(v))
