"""Decomposition as plain data: every rank simulated in a loop, no MPI."""

import itertools

import numpy as np
import pytest

from solver.core.decomp import all_blocks, choose_dims, decompose, split
from solver.core.errors import InputError


@pytest.mark.parametrize("n,parts", [(10, 3), (67, 4), (101, 6), (5, 5), (7, 1)])
def test_split_is_balanced_and_covers(n, parts):
    ranges = [split(n, parts, k) for k in range(parts)]
    sizes = [b - a for a, b in ranges]
    assert max(sizes) - min(sizes) <= 1
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(ranges[k][1] == ranges[k + 1][0] for k in range(parts - 1))


@pytest.mark.parametrize("shape,dims", [((67, 101), (3, 1)), ((67, 101), (4, 1)), ((67, 101), (2, 3)),
                                        ((17, 23), (3, 2)), ((5, 3), (5, 1)), ((9, 8), (1, 4))])
def test_blocks_tile_the_grid_once_and_neighbours_agree(shape, dims):
    blocks = all_blocks(shape, dims)
    owner = np.full(shape, -1)
    for b in blocks:
        assert (owner[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] == -1).all()
        owner[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = b.rank
    assert (owner >= 0).all()
    for b in blocks:
        for side, other in (("south", "north"), ("west", "east")):
            n = getattr(b, side)
            if n is not None:
                assert getattr(blocks[n], other) == b.rank
        assert (b.south is None) == (b.rows[0] == 0) and (b.north is None) == (b.rows[1] == shape[0])
        assert (b.west is None) == (b.cols[0] == 0) and (b.east is None) == (b.cols[1] == shape[1])


@pytest.mark.parametrize("shape,dims", [((67, 101), (3, 1)), ((17, 23), (3, 2)), ((4, 4), (4, 1)), ((6, 2), (3, 2)),
                                        ((3, 3), (1, 1))])
def test_interior_and_edges_partition_the_owned_points(shape, dims):
    for b in all_blocks(shape, dims):
        count = np.zeros(b.padded, dtype=int)
        r0, r1, c0, c1 = b.interior()
        if r0 < r1 and c0 < c1:
            count[r0:r1, c0:c1] += 1
        for (a0, a1, d0, d1) in b.edges():
            count[a0:a1, d0:d1] += 1
        assert (count[1:-1, 1:-1] == 1).all(), b
        assert count[0].sum() == count[-1].sum() == count[:, 0].sum() == count[:, -1].sum() == 0
        # interior points read no ghost that a neighbour fills
        if r0 < r1 and c0 < c1:
            assert r0 - 1 >= (1 if b.south is not None else 0) and r1 <= b.ny + (0 if b.north is not None else 1)


def test_choose_dims():
    assert choose_dims(4, (100, 100), "rows") == (4, 1)
    assert choose_dims(4, (100, 100), "cart") == (2, 2)
    assert choose_dims(6, (10, 1000), "cart") == (1, 6)  # wide grid: split the long side
    assert choose_dims(6, (101, 67), "cart", [3, 2]) == (3, 2)
    with pytest.raises(InputError, match="parallel.dims"):
        choose_dims(6, (101, 67), "cart", [4, 2])
    with pytest.raises(InputError, match="at most 5 ranks"):
        choose_dims(8, (5, 100), "rows")


def test_rank_order_matches_mpi_cart_row_major():
    dims = (3, 4)
    for rank, (cy, cx) in enumerate(itertools.product(range(3), range(4))):
        b = decompose((30, 40), dims, rank)
        assert b.coords == (cy, cx) and b.rank == rank


def test_default_threads_never_oversubscribe_a_node():
    from solver.parallel.comm import threads_per_rank

    shared = [set(range(8))] * 3  # unbound ranks: all see the node's 8 cores
    assert [threads_per_rank(shared, r) for r in range(3)] == [2, 2, 2]
    bound = [{0, 1, 2, 3}, {4, 5, 6, 7}]  # srun --cpus-per-task=4: each rank has cores of its own
    assert [threads_per_rank(bound, r) for r in range(2)] == [4, 4]
    sockets = [set(range(4)), set(range(4)), set(range(4, 8)), set(range(4, 8))]  # bound to sockets
    assert [threads_per_rank(sockets, r) for r in range(4)] == [2, 2, 2, 2]
    assert threads_per_rank([{0}] * 4, 0) == 1


# dynamic balancing: plain data -------------------------------------------------------------------

def test_split_by_speed_is_proportional_contiguous_and_keeps_min_rows():
    from solver.parallel.balance import split_by_speed

    assert split_by_speed(100, [1, 1, 1, 1]) == [(0, 25), (25, 50), (50, 75), (75, 100)]
    assert split_by_speed(90, [2, 1]) == [(0, 60), (60, 90)]
    rows = split_by_speed(50, [1, 1e-6, 1], min_rows=2)
    assert rows[1][1] - rows[1][0] == 2 and rows[0][0] == 0 and rows[-1][1] == 50
    for ny, speeds in ((7, [1, 5, 1]), (1000, [3, 0.5, 0.5, 2, 1]), (6, [1, 1, 1])):
        r = split_by_speed(ny, speeds)
        assert r[0][0] == 0 and r[-1][1] == ny and all(a[1] == b[0] for a, b in zip(r, r[1:]))
        assert min(b - a for a, b in r) >= min(2, ny // len(speeds))


def test_transfers_move_every_row_exactly_once():
    from solver.parallel.balance import transfers

    old = [(0, 25), (25, 50), (50, 75), (75, 100)]
    new = [(0, 40), (40, 45), (45, 80), (80, 100)]
    received = {}
    for rank in range(4):
        send, recv = transfers(old, new, rank)
        for dest, (a, b) in enumerate(send):  # what rank sends dest is what dest receives from rank
            ra, rb = transfers(old, new, dest)[1][rank]
            assert b - a == rb - ra and (a == ra or a == b)
        got = sorted((a, b) for a, b in recv if a < b)
        assert got[0][0] == new[rank][0] and got[-1][1] == new[rank][1]
        assert all(x[1] == y[0] for x, y in zip(got, got[1:]))
        received[rank] = got
    assert sum(b - a for g in received.values() for a, b in g) == 100


def test_overlap_bands_cover_the_interior_in_whole_rows():
    from solver.parallel.exchange import bands

    assert bands((2, 10, 1, 5), 4) == [(2, 4, 1, 5), (4, 6, 1, 5), (6, 8, 1, 5), (8, 10, 1, 5)]
    assert bands((2, 4, 1, 5), 4) == [(2, 3, 1, 5), (3, 4, 1, 5)]  # fewer rows than bands
    assert bands((3, 3, 1, 5), 4) == []  # a block one row high has no interior
    got = bands((1, 68, 2, 40), 4)
    assert got[0][0] == 1 and got[-1][1] == 68 and all(a[1] == b[0] for a, b in zip(got, got[1:]))
