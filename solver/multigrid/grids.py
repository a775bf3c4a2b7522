"""Where each level lives on this rank: its block, whether the level is shared, and the local tables.

A level is distributed over the process grid while every block keeps at least MIN_BLOCK points along
each axis on which it has neighbours: its blocks are derived from the finer level's (coarse point J
belongs to the rank that owns the fine point nearest to it, so the restriction reads at most two and
the prolongation one ghost layer beyond a block). Below that, and always on the coarsest level when
there are several ranks, the level is shared: every rank holds all of it and computes it alike (the
restricted right-hand side is gathered onto every rank, MPI_Allgatherv; each rank then reads its own
part of the correction, so nothing is spread back). On one process every level is one block.

All of this is plain data computed alike on every rank (no MPI here): the same blocks, tables and
decisions, so every rank takes part in the same collectives.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..core.decomp import Block, decompose
from .levels import Axis, Level, Transfer, _scaled, identity

MIN_BLOCK = 8  # points per axis with neighbours below which a level is shared instead
DEPTH = 2  # ghost layers of every multigrid field (the restriction reads two beyond a block)


@dataclass(frozen=True)
class Place:
    """One level on this rank: its block and blocks (shared: one block of the whole level, on every rank),
    and for a shared level below a distributed one the blocks its right-hand side is restricted on
    before the gather (`gather`, derived as for a distributed level; some may be empty)."""

    level: Level
    block: Block
    blocks: tuple[Block, ...]
    shared: bool
    gather: tuple[Block, ...] | None = None


def places(levels: list[Level], blocks: list[Block], rank: int, size: int) -> list[Place]:
    """Every level's place (module docstring). With several ranks the last place is always shared: where
    the coarsest level is still distributed, a shared copy of it follows (identity transfers); where a
    level's restriction would reach past the ghost layers of the finer blocks (tiny levels), a shared
    copy of the finer level takes the gather and the coarse level follows it, shared."""
    out = [Place(levels[0], blocks[rank], tuple(blocks), shared=False)]
    for lev in levels[1:]:
        fine = out[-1]
        if fine.shared:
            out.append(_shared(lev, fine.block, None))
            continue
        derived = tuple(coarse_block(b, fine.level, lev) for b in fine.blocks)
        reach = all(_reach(f, c, lev) for f, c in zip(fine.blocks, derived))
        if reach and not (size > 1 and lev is levels[-1]) and _large(derived):
            out.append(Place(lev, derived[rank], derived, shared=False))
        elif reach:
            out.append(_shared(lev, fine.block, derived))
        else:
            out.append(_copy(fine))
            out.append(_shared(lev, out[-1].block, None))
    if size > 1 and not out[-1].shared:
        out.append(_copy(out[-1]))
    return out


def _copy(fine: Place) -> Place:
    """A shared copy of a distributed level: its right-hand side is the gathered finer residual."""
    last = fine.level
    copy = replace(last, tx=identity(last.x.n), ty=identity(last.y.n), scale=1.0, pre=(), post=())
    return _shared(copy, fine.block, fine.blocks)


def _shared(level: Level, like: Block, gather) -> Place:
    block = decompose(level.shape, (1, 1), 0, like.periodic)
    return Place(level, block, (block,), shared=True, gather=gather)


def _large(derived: tuple[Block, ...]) -> bool:
    """Every block has at least MIN_BLOCK points along each axis on which it has neighbours."""
    for b in derived:
        if (b.south is not None or b.north is not None) and b.ny < MIN_BLOCK:
            return False
        if (b.west is not None or b.east is not None) and b.nx < MIN_BLOCK:
            return False
    return True


def _reach(fine: Block, coarse: Block, lev: Level) -> bool:
    try:
        down_tables(fine, coarse, lev)
        up_tables(fine, coarse, lev)
    except ValueError:
        return False
    return True


# deriving a coarse block -------------------------------------------------------------------------
def anchors(fine: Axis, coarse: Axis) -> np.ndarray:
    """For each coarse point, the fine point nearest to it (ties to the lower one): coarse J lies at fine
    index s = ((a + 2J) f2 - a c2) / (2 c2) (levels._scaled's integers), the anchor is ceil(s - 1/2)."""
    if fine.n == coarse.n:
        return np.arange(coarse.n)
    a, c2, f2 = _scaled(fine, coarse)
    num = (a + 2 * np.arange(coarse.n, dtype=np.int64)) * f2 - a * c2 - c2
    return -((-num) // (2 * c2))


def coarse_block(block: Block, fine: Level, coarse: Level) -> Block:
    """The coarse points whose nearest fine point this block owns; same place in the process grid."""
    rows = _owned(anchors(fine.y, coarse.y), block.rows)
    cols = _owned(anchors(fine.x, coarse.x), block.cols)
    return replace(block, shape=coarse.shape, rows=rows, cols=cols)


def _owned(anchor: np.ndarray, span: tuple[int, int]) -> tuple[int, int]:
    return int(np.searchsorted(anchor, span[0])), int(np.searchsorted(anchor, span[1]))


# local tables --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Down:
    """The restriction into a coarse block from the fine one, in local indices of DEPTH-padded fields:
    per coarse row (column) of the block the first fine row (column), the count and the weights."""

    ys: np.ndarray
    yc: np.ndarray
    yw: np.ndarray
    xs: np.ndarray
    xc: np.ndarray
    xw: np.ndarray
    scale: float


@dataclass(frozen=True)
class Up:
    """The prolongation onto a fine block from a coarse field holding `coarse` (local indices)."""

    ys: np.ndarray
    yw: np.ndarray
    xs: np.ndarray
    xw: np.ndarray


def down_tables(fine: Block, coarse: Block, lev: Level) -> Down:
    ys, yc, yw = _down_axis(lev.ty, coarse.rows, fine.rows)
    xs, xc, xw = _down_axis(lev.tx, coarse.cols, fine.cols)
    return Down(ys, yc, yw, xs, xc, xw, lev.scale)


def _down_axis(t: Transfer, coarse: tuple[int, int], fine: tuple[int, int]):
    sl = slice(*coarse)
    start = t.r_start[sl] - fine[0] + DEPTH
    count = t.r_count[sl]
    width = fine[1] - fine[0] + 2 * DEPTH
    if len(start) and (start.min() < 0 or (start + count).max() > width):
        raise ValueError("the restriction reaches beyond the ghost layers")
    return start.astype(np.int64), count.astype(np.int64), np.ascontiguousarray(t.r_w[sl])


def up_tables(fine: Block, coarse: Block, lev: Level) -> Up:
    ys, yw = _up_axis(lev.ty, fine.rows, coarse.rows)
    xs, xw = _up_axis(lev.tx, fine.cols, coarse.cols)
    return Up(ys, yw, xs, xw)


def _up_axis(t: Transfer, fine: tuple[int, int], coarse: tuple[int, int]):
    sl = slice(*fine)
    start = t.p_start[sl] - coarse[0] + DEPTH
    width = coarse[1] - coarse[0] + 2 * DEPTH
    if len(start) and (start.min() < 0 or start.max() + 2 > width):
        raise ValueError("the prolongation reaches beyond the ghost layers")
    return start.astype(np.int64), np.ascontiguousarray(t.p_w[sl])
