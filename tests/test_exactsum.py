"""The probes' order-free statistics. The mean (solver.core.exactsum): the kernels' digit sums give the definition's
bits (exact rational arithmetic) whatever the grouping of the values into rows and segments and whatever their order,
for values of every sign and scale, zeros, NaN and infinities, within 2^-64 of the largest |x| of the exact mean. The
max and min: signed zeros and NaN alike in every order."""

import math
from fractions import Fraction

import numpy as np
import pytest

from solver.backends import numba_kernels
from solver.core import exactsum


def kernel_mean(v, mask) -> float:
    digits, amax = numba_kernels.masked_mean(np.ascontiguousarray(v), np.ascontiguousarray(mask))
    return exactsum.value(digits[:exactsum.NPOS], amax, int(mask.sum()), int(digits[exactsum.NPOS]))


def fields(rng):
    yield "uniform", rng.random((9, 31)) * 300.0
    yield "signs", rng.standard_normal((7, 40))
    yield "scales", rng.standard_normal((8, 25)) * 10.0 ** rng.integers(-30, 30, (8, 25))
    yield "cancelling", np.concatenate([np.full((3, 11), 1e16), np.full((3, 11), -1e16), rng.random((1, 11))])
    yield "tiny", rng.random((5, 13)) * 5e-324 * 1e6
    yield "huge", rng.random((4, 17)) * 1e307
    yield "zeros", np.zeros((3, 5))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_kernels_give_the_definitions_bits_in_any_grouping_and_order(seed):
    rng = np.random.default_rng(seed)
    for label, v in fields(rng):
        mask = rng.random(v.shape) < 0.7
        mask[0, 0] = True
        ref = exactsum.reference(v[mask])
        assert kernel_mean(v, mask) == ref, label
        flat = v[mask]
        for shape in ((1, flat.size), (flat.size, 1)):  # one row, one value a row
            assert kernel_mean(flat.reshape(shape), np.ones(shape, bool)) == ref, (label, shape)
        shuffled = rng.permutation(flat)
        assert kernel_mean(shuffled[None, :], np.ones((1, flat.size), bool)) == ref, label
        exact = float(sum(map(Fraction, flat.tolist())) / flat.size)  # (fsum's sum of "huge" overflows)
        assert abs(ref - exact) <= 2.0 ** -64 * np.abs(flat).max() + 2.0 ** -52 * abs(exact), label


def test_segments_of_a_tiles_rows_add_the_same_digits():
    """sample_row's segments (a tile's share of a row) summed over tiles equal one pass over the whole region."""
    rng = np.random.default_rng(7)
    v = rng.standard_normal((6, 50)) * 1e3
    mask = np.ones(v.shape, bool)
    whole = kernel_mean(v, mask)
    acc = np.zeros((3, exactsum.NPOS + 1), np.int64)
    amax = 0.0
    for i in range(v.shape[0]):
        cuts = sorted(rng.choice(np.arange(1, 50), 2, replace=False))
        for t, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, 50])):
            amax = max(amax, numba_kernels._mean_segment(v[i, lo:hi], acc[t]))
    total = acc[:, :exactsum.NPOS].sum(axis=0)
    assert exactsum.value(total, amax, v.size, int(np.bitwise_or.reduce(acc[:, exactsum.NPOS]))) == whole


def test_nan_and_infinities_follow_numpys_sum():
    v = np.array([[1.0, np.inf, 2.0], [3.0, 4.0, 5.0]])
    mask = np.ones(v.shape, bool)
    assert kernel_mean(v, mask) == np.inf
    v[1, 1] = -np.inf
    assert math.isnan(kernel_mean(v, mask))
    v[1, 1] = np.nan
    assert math.isnan(kernel_mean(v, mask)) and math.isnan(exactsum.reference(v))
    v[0, 1] = -np.inf
    v[1, 1] = 0.0
    assert kernel_mean(v, mask) == -np.inf == exactsum.reference(v)


def test_max_and_min_of_signed_zeros_do_not_depend_on_the_order():
    """A region's max and min (the field's pass, the ranks' combination, the sweep's ordered keys) put -0.0 below +0.0
    (IEEE 754's maximum and minimum), whichever comes first; a NaN wins."""
    from solver.io.probes import _extreme

    for row in ([-0.0, 0.0, -0.0], [0.0, -0.0, -0.0]):
        v = np.array([row])
        mask = np.ones(v.shape, bool)
        top, low = numba_kernels.masked_extreme(v, mask, True), numba_kernels.masked_extreme(v, mask, False)
        assert top == 0.0 and math.copysign(1.0, top) == 1.0, row
        assert low == 0.0 and math.copysign(1.0, low) == -1.0, row
        assert math.copysign(1.0, _extreme(row, "max")) == 1.0 and math.copysign(1.0, _extreme(row, "min")) == -1.0
    v = np.array([[1.0, np.nan, 3.0], [-2.0, 5.0, 0.0]])
    assert math.isnan(numba_kernels.masked_extreme(v, np.ones(v.shape, bool), True))
    assert numba_kernels.masked_extreme(v, np.array([[1, 0, 1], [1, 1, 1]], bool), True) == 5.0
    assert numba_kernels.masked_extreme(v, np.array([[1, 0, 1], [1, 0, 0]], bool), False) == -2.0
    assert math.isnan(_extreme([1.0, math.nan, 2.0], "min"))
