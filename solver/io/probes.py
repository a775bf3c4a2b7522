"""Probes (output.probes): named values of the field sampled over time, in probes.csv and probes.h5.

    point       u at (x, y), bilinear between the four grid points around it (solver.core.grid's positions;
                a point within rounding of a grid line or point takes that line's or point's values alone, so
                a probe on a grid point is that point's value bit for bit); between a wall and the first point
                the ghost layer stands in for the missing neighbours (the sides' rules: a Dirichlet wall's value,
                a Neumann or convective mirror)
    max, min    over the grid points a rectangle or disk covers (edges included, as solver.core.materials)
    mean        their sum over their count, the sum order-free (solver.core.exactsum: each value truncated at least
                64 bits below the largest |u|, the integer sums exact, the quotient rounded once)
    heat_flow   the heat entering through a side per unit time: the energy balance's wall terms
                (solver.core.balance.Balance.wall_terms) summed as its fluxes sums them (numpy's sum along the
                side, in the side's order), times dx dy (negative: leaving)

Every rank reads the points it owns (ghost points beyond a wall: the rank owning the point next to them) and
sends rank 0 what it read: point values, a region's local max and min, its mean's digit sums (exact integers) and
largest |u|, a wall's terms and their indices along the side. Rank 0 puts the walls' terms in global order and sums
them as one array, adds the digit sums, and so a probe's value is the same bits on every rank count and
decomposition. When samples are taken: solver.core.loop (output.probe_every steps, every step by default, or at
output.probe_interval's times, which steps land on). Where the backend fuses steps into time tiles (numba, one
process: backend.samples_inside) the steps sampled do not end its sweeps: each tile reads the rows it owns at a
sampled level as it computes them (a Tap: max, min and the mean's digits, the points and the walls' first lines
captured), which gives the same bits as reading the field after the step (tests/test_probes.py).

probes.csv: a header `step,time,NAME,...` then one line a sample, values as Python's repr writes them (the
shortest text that reads back to the same bits). probes.h5: /step (n,) int64, /time (n,) float64 (a dimension scale), one (n,) float64
dataset a probe attached to it (xarray.open_dataset(path, engine="h5netcdf") reads them as variables over time),
each with `kind` and `description` attributes. Rank 0 keeps the samples in memory and appends them at
checkpoints, at the end and every FLUSH_ROWS samples, so a checkpoint's step always has its samples on disk.
Appending (a restart in the directory of its checkpoint at step M): rows after M are dropped first (a run that
went on past its last checkpoint before it died wrote them), then the series continues at the next sample: no
gap, no duplicate.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..core import exactsum
from ..core.balance import wall_lines
from ..core.boundary import periodic_axes
from ..core.physics import spacing
from ..core.probe_points import region_mask, stencil

BANDS = 2  # row bands a thread in a sweep that reads regions (a band's edge recomputes k(k - 1) row updates)
KEPT = 8  # a sampler's arrays kept for batches (Sampler._kept: by shape)
FLUSH_ROWS = 1000  # samples rank 0 keeps before appending them to the files
CSV, H5 = "probes.csv", "probes.h5"


# what each rank reads (solver.core.probe_points: where) ------------------------------------------------------
def _home(i: int, n: int, periodic: bool) -> tuple[int, int]:
    """(the owned index whose rank reads global index i, the local offset of i from it: -1, 0 or 1)."""
    if periodic:
        return i % n, 0
    if i < 0:
        return 0, -1
    if i >= n:
        return n - 1, 1
    return i, 0


class Sampler:
    """What one rank reads for every probe, from its block (rebuilt when the block moves: dynamic balance)."""

    def __init__(self, case, block):
        from ..core.balance import Balance

        self.case, self.block = case, block
        ny, nx = case.shape
        py, px = periodic_axes(case)
        (r0, r1), (c0, c1) = block.rows, block.cols
        self.reads = []  # per probe: what this rank reads (kind-specific)
        for p in case.output.probes:
            if p.kind == "point":
                mine = []
                for n, (i, j, w) in enumerate(stencil(case, p.at)):
                    (hi, di), (hj, dj) = _home(i, ny, py), _home(j, nx, px)
                    if r0 <= hi < r1 and c0 <= hj < c1:
                        mine.append((n, hi - r0 + 1 + di, hj - c0 + 1 + dj))
                self.reads.append(mine)
            elif p.kind == "heat_flow":
                self.reads.append(p.side)
            else:
                mask = region_mask(case, p.region, np.arange(r0, r1), np.arange(c0, c1))
                rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
                if not rows.size:
                    self.reads.append(None)
                    continue
                box = (rows[0] + 1, rows[-1] + 2, cols[0] + 1, cols[-1] + 2)
                cut = np.ascontiguousarray(mask[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1])
                self.reads.append((box, cut, int(cut.sum())))
        self.arrays = {}  # a batch's accumulators and captures by shape (accumulators(), captures(): used again)
        self.sides = {p.side for p in case.output.probes if p.kind == "heat_flow"}
        self.balance = Balance(case, block, 0.0, 0) if self.sides else None
        self.along = {side: np.arange(*(block.cols if side in ("bottom", "top") else block.rows))
                      for side in self.sides}  # this rank's points along each side, in the side's order
        self.whole = {side: self.along[side].size == (nx if side in ("bottom", "top") else ny) for side in self.sides}

    def local(self, backend, u) -> list:
        """This rank's part of every probe at one sample (plain data for rank 0: combine), as a batch of one (the
        parts' forms: Tap.parts)."""
        walls = None
        out = []
        for p, read in zip(self.case.output.probes, self.reads):
            if p.kind == "point":
                out.append([(n, np.array([v])) for n, v in _points(backend, u, read)])
            elif p.kind == "heat_flow":
                if walls is None:
                    walls = self.balance.wall_terms(backend, u, self.sides) if self.balance is not None else {}
                out.append(self._wall(read, walls[read][None, :]) if read in walls else None)
            elif read is None:
                out.append(None)
            else:
                out.append(_region(backend, u, p.kind, read))
        return out

    # inside the sweeps (a Tap) ----------------------------------------------------------------------------------
    def plan(self) -> Plan:
        """The arrays a sweep samples with (solver.backends.numba_kernels.sample_row), built once: region entries
        (probe slot, column span) by row, captured points (a point probe's computed points, each side's first line) by
        row, and the probes they serve."""
        if getattr(self, "_plan", None) is None:
            self._plan = _plan(self)
        return self._plan

    def accumulators(self, tiles: int, slots: int) -> tuple:
        """A batch's region accumulators (numba_kernels.sample_row's fac and iac), the sampler's own (a new array's
        pages would fault in the sweep), set afresh: zeros, a max's and min's first keys."""
        plan = self.plan()
        fac, iac = self._kept(("acc", tiles, slots), lambda: (
            np.empty((tiles, slots, len(plan.kinds))),
            np.empty((tiles, slots, len(plan.kinds), exactsum.NPOS + 1), dtype=np.int64)))
        fac[...] = 0.0
        iac[...] = 0
        iac[..., 0] = plan.init
        return fac, iac

    def captures(self, slots: int) -> tuple:
        """A batch's point captures [capture, slot] (a capture's levels side by side) and walls' first lines [slot,
        point along the sides] (each slot's row padded to a whole number of pages and a cache line, so that a
        front's stores to its levels' rows fall in different cache sets), the sampler's own."""
        plan = self.plan()
        stride = -(-plan.wall_points // 512) * 512 + 8  # (doubles: 4096 bytes a 512)
        return self._kept(("cap", slots), lambda: (np.empty((plan.points, slots)), np.empty((slots, stride))))

    def _kept(self, key, make):
        if key not in self.arrays:
            if len(self.arrays) >= KEPT:  # (batches of many lengths: the oldest let go)
                del self.arrays[next(iter(self.arrays))]
            self.arrays[key] = make()
        return self.arrays[key]

    def ghost_lines(self, backend, u) -> dict:
        """The ghost line of each side a heat flow reads, contiguous on the host (read once a batch: constant in it,
        every side fixed)."""
        return {side: np.ascontiguousarray(_read(backend, u, wall_lines(side, u.shape)[0]), dtype=np.float64)
                for side in self.sides}

    def _wall(self, side: str, lines: np.ndarray) -> Wall:
        """A heat flow's part from its terms at each sample (lines: [sample, point along the side], each row
        contiguous): their sums where this rank holds the whole side, else the lines (copies: `lines` may be used
        again)."""
        if self.whole[side]:
            return Wall(self.along[side], None, np.sum(lines, axis=1).tolist())  # (each row: numpy's sum of it)
        return Wall(self.along[side], [line.copy() for line in lines], None)

    def from_sweep(self, backend, u, ghosts, fac, iac, capv, wv) -> list:
        """local()'s parts for the S levels sweeps sampled, from their accumulators (fac, iac: [tile, level, ...]),
        point captures (capv: [capture, level]) and walls' first lines (wv: [level, point along the sides]); ghost
        values (constant in a batch: every side fixed) from u, the heat flows' from ghosts (ghost_lines)."""
        plan = self.plan()
        levels = capv.shape[1]
        stats = _over_tiles(fac, iac) if plan.regions else None
        points = capv[:plan.points].copy()  # the point probes' captures (a copy: the sweep's arrays are used again)
        out, walls, r = [], {}, 0
        for k, (p, read) in enumerate(zip(self.case.output.probes, self.reads)):
            if p.kind == "point":
                out.append([(n, points[plan.captures[(k, n)]] if (k, n) in plan.captures
                             else np.full(levels, _value(backend, u, i, j))) for n, i, j in read])
            elif p.kind == "heat_flow":
                if read not in walls:
                    first = wv[:, plan.captures[("wall", read)]]  # [level, point along the side]
                    # (the terms in place of the first lines: wv is the batch's, read once)
                    walls[read] = self._wall(read, self.balance.terms(read, ghosts[read], first, first))
                out.append(walls[read])
            elif read is None:
                out.append(None)
            else:  # the r-th region
                if p.kind == "mean":
                    out.append((stats["digits"][:, r], stats["amax"][:, r], read[2]))
                else:
                    out.append(np.where(stats["flags"][:, r] & exactsum.NAN, math.nan, key_values(stats[p.kind][:, r])))
                r += 1
        return out


def _over_tiles(fac, iac) -> dict:
    """Every region's accumulators at each sampled level added over the tiles ([tile, level, region, ...]):
    "digits" ([level, region, NPOS + 1]: the digit sums, then the flags OR-ed), "amax" (largest |u|), "max" and
    "min" (the largest and least ordered keys), "flags" ([level, region])."""
    flags = np.bitwise_or.reduce(iac[..., exactsum.NPOS], axis=0)
    digits = np.sum(iac, axis=0, dtype=np.int64)
    digits[..., exactsum.NPOS] = flags  # (the last slot's sum replaced: flags are OR-ed)
    return {"digits": digits, "amax": fac.max(axis=0), "max": iac[..., 0].max(axis=0),
            "min": iac[..., 0].min(axis=0), "flags": flags}


def _flip(b: np.ndarray) -> np.ndarray:
    """A double's bits to its ordered int64 key and back (solver.core.exactsum.MAG; solver.backends.numba_kernels._key:
    an involution)."""
    return b ^ ((b >> 63) & exactsum.MAG)


def key_values(keys) -> np.ndarray:
    """The doubles ordered int64 keys stand for, elementwise."""
    return _flip(np.asarray(keys, dtype=np.int64)).view(np.float64)


def keys_of(values) -> np.ndarray:
    """The ordered int64 keys of doubles: -0.0 below +0.0, NaNs beyond the infinities."""
    return _flip(np.ascontiguousarray(values, dtype=np.float64).view(np.int64))


class Wall(NamedTuple):
    """A rank's part of a heat flow at a batch's samples: its points' indices along the side, and each sample's terms
    there (lines: an array a sample) or, where the rank holds the whole side, their sums (sums: numpy's sum of each
    sample's line, as combine takes it; lines None)."""
    along: np.ndarray
    lines: list | None
    sums: list | None


class Plan(NamedTuple):
    """Sampler.plan: the sweep's arrays (ent, rstart, kinds, cent, cstart: solver.backends.numba_kernels.sample_row),
    regions: the region probes' kinds in order, captures: {(probe index, stencil index): capture index, ("wall",
    side): its slice of the walls' array}, init: the start of each region probe's iac[..., 0] (a max's or min's
    ordered key: solver.backends.numba_kernels._key), points: the number of point captures, todo: per row whether it
    has entries or point captures, cols and wrows: the walls' first columns and rows (numba_kernels._walls),
    wall_points: the walls' points in all."""
    ent: np.ndarray
    rstart: np.ndarray
    kinds: np.ndarray
    cent: np.ndarray
    cstart: np.ndarray
    regions: list
    captures: dict
    init: np.ndarray
    points: int
    todo: np.ndarray
    cols: np.ndarray
    wrows: np.ndarray
    wall_points: int


def _plan(sampler) -> Plan:
    """Sampler.plan's arrays, built from its reads."""
    ny, nx = sampler.block.padded
    ent, rstart, kinds, init = _region_entries(sampler, ny)
    cent, cstart, captures, points, cols, wrows, wall_points = _captures(sampler, ny, nx)
    todo = ((rstart[1:] > rstart[:-1]) | (cstart[1:] > cstart[:-1])).astype(np.int8)
    return Plan(ent, rstart, np.array(kinds, dtype=np.int64), cent, cstart, kinds, captures,
                np.array(init, dtype=np.int64), points, todo, cols, wrows, wall_points)


def _region_entries(sampler, ny: int) -> tuple:
    """(ent, rstart, kinds, init): each region probe's runs of points by row (probe slot, first column, column after
    the last), where each padded row's start in them, and the region probes' kinds and first keys."""
    rows, spans, kinds, init = [], [], [], []
    for p, read in zip(sampler.case.output.probes, sampler.reads):
        if p.kind in ("point", "heat_flow") or read is None:
            continue
        (r0, r1, c0, c1), mask, _ = read
        r = len(kinds)
        kinds.append({"max": 0, "min": 1, "mean": 2}[p.kind])
        init.append({"max": exactsum.LOWEST, "min": exactsum.HIGHEST, "mean": 0}[p.kind])
        line, lo, hi = _runs(mask)
        rows.append(r0 + line)
        spans.append(np.stack([np.full(line.size, r), c0 + lo, c0 + hi], axis=1))
    rows = np.concatenate([np.zeros(0, dtype=np.int64), *rows])
    order = np.argsort(rows, kind="stable")
    ent = np.concatenate([np.zeros((0, 3), dtype=np.int64), *spans])[order]
    return ent, np.searchsorted(rows[order], np.arange(ny + 1)).astype(np.int64), kinds, init


def _captures(sampler, ny: int, nx: int) -> tuple:
    """(cent, cstart, captures, points, cols, wrows, wall_points): the grid values a sweep copies out. The point
    probes' computed points, as (column, capture index) entries by row; each heat flow side's first line into the
    walls' array (numba_kernels._walls), the sides one after another: a side's column as (column, index less the row),
    a side's row as (row, first column, column after the last, index of the first)."""
    crow, cent, captures = [], [], {}
    for k, (p, read) in enumerate(zip(sampler.case.output.probes, sampler.reads)):
        if p.kind == "point":
            for n, i, j in read:
                if 1 <= i < ny - 1 and 1 <= j < nx - 1:
                    captures[(k, n)] = len(cent)
                    crow.append(i)
                    cent.append((j, len(cent)))
    cols, wrows, at = [], [], 0
    for side in sorted(sampler.sides):
        _, (r0, r1, c0, c1) = wall_lines(side, (ny, nx))
        if r1 - r0 == 1:
            wrows.append((r0, c0, c1, at))
        else:
            cols.append((c0, at - r0))  # row i's value goes to index at + i - r0
        captures[("wall", side)] = slice(at, at + (r1 - r0) * (c1 - c0))
        at += (r1 - r0) * (c1 - c0)
    order = np.argsort(np.array(crow, dtype=np.int64), kind="stable")
    cstart = np.searchsorted(np.array(crow, dtype=np.int64)[order], np.arange(ny + 1)).astype(np.int64)
    return (np.array(cent, dtype=np.int64).reshape(-1, 2)[order], cstart, captures, len(cent),
            np.array(cols, dtype=np.int64).reshape(-1, 2), np.array(wrows, dtype=np.int64).reshape(-1, 4), at)


def _runs(mask) -> tuple:
    """The runs of True along each line of a 2-D mask, in row-major order: (line, first column, column after the
    last), int64 arrays."""
    edges = np.diff(np.pad(mask.view(np.int8), ((0, 0), (1, 1))), axis=1)  # 1: a run starts, -1: it ended
    line, col = np.nonzero(edges)  # along each line a start, its end, the next start, ...
    return line[0::2].astype(np.int64), col[0::2].astype(np.int64), col[1::2].astype(np.int64)


class Tap:
    """The probes of a batch's steps (offsets from its first, in (0, n]) as the backend computes them
    (backend.samples_inside): sweep() gives a sweep the batch's arrays to sample with (each sampled offset its slot),
    swept() notes the offsets it sampled (every one is sampled in a sweep: numba_backend.advance takes a sampled step
    outside the time tiles as a sweep of one step); parts() then turns the sweeps' sums and captures into local()'s
    parts, all at once (once a batch: the host's fixed cost of a sample, cold after a sweep through the field, is
    paid once)."""

    def __init__(self, sampler, offsets):
        self.sampler, self.offsets = sampler, frozenset(offsets)
        self.slots = {o: s for s, o in enumerate(sorted(self.offsets))}  # each sampled offset's slot in the arrays
        # row bands a thread for a sweep that samples: BANDS where regions are read, so that a region in one part of
        # the plate is not one thread's work alone (numba_kernels._interleaved)
        self.bands = BANDS if sampler.plan().kinds.size else 1
        self.arrays = None  # (fac, iac, capv) of the batch: the sampler's own, set afresh at its first sweep
        self.swept_offsets: list[int] = []  # the offsets sampled inside sweeps, in order
        self.where = None  # (backend, a field with the batch's ghost values) of the sweeps
        self.ghosts = None  # the heat flows' ghost lines (Sampler.ghost_lines: read at the batch's first sweep)
        self.seconds = 0.0  # the host's time in swept(), inside the backend's advance

    def sweep(self, lv, tiles: int, threads: int = 1) -> tuple:
        """The arrays of a sweep of `tiles` tiles whose levels lv maps to the batch's slots (numba_kernels.sample_row's
        pr); threads: those its row bands are dealt to."""
        plan = self.sampler.plan()
        if self.arrays is None or self.arrays[0].shape[0] < tiles:
            fac, iac = self.sampler.accumulators(tiles, len(self.slots))
            if self.arrays is None:
                capv, wv = self.sampler.captures(len(self.slots))
            else:  # (a sweep with more tiles than the batch's first: the sums so far carried over)
                old, capv, wv = self.arrays[0].shape[0], self.arrays[2], self.arrays[3]
                fac[:old], iac[:old] = self.arrays[0], self.arrays[1]
            self.arrays = (fac, iac, capv, wv)
        fac, iac, capv, wv = self.arrays
        return (lv, plan.ent, plan.rstart, plan.kinds, fac, iac, plan.cent, plan.cstart, capv, plan.todo, plan.cols,
                np.array([threads], dtype=np.int64), plan.wrows, wv)

    def swept(self, taken, backend, u) -> None:
        """The offsets a sweep sampled (in order); u: a field with the batch's ghost values."""
        t = time.perf_counter()
        if self.ghosts is None:
            self.ghosts = self.sampler.ghost_lines(backend, u)
            self.where = (backend, u)
        self.swept_offsets += taken
        self.seconds += time.perf_counter() - t

    def parts(self) -> tuple[list, list]:
        """(offsets, local parts at them) of every step sampled in the batch, in order: the sweeps' samples turned into
        parts at once (each offset's slot: its place in order, so the arrays are taken whole)."""
        offsets = sorted(self.offsets)
        if self.swept_offsets != offsets:  # (every sampled step is swept, in order: numba_backend.advance)
            raise RuntimeError(f"probes: a batch's samples not all swept in order ({self.swept_offsets}, not {offsets})")
        return offsets, self.sampler.from_sweep(*self.where, self.ghosts, *self.arrays)


def _region(backend, u, kind: str, read):
    """A region probe's part on this rank: the mean's (digit sums and flags, largest |u|, count), the extreme for max
    and min. On the host, one threaded pass over the mask's box (solver.backends.numba_kernels: exact, the sweep's
    rules);
    a device's box is copied to the host first."""
    from ..backends import numba_kernels

    box, mask, count = read
    v = _read(backend, u, box)
    if kind == "mean":
        digits, amax = numba_kernels.masked_mean(v, mask)
        return digits[None, :], np.array([amax]), count
    return np.array([numba_kernels.masked_extreme(v, mask, kind == "max")])


def _read(backend, u, box):
    """A region of u on the host: a view where u is a host array (nothing copied), else the backend's copy."""
    if getattr(backend, "on_gpu", False):
        return backend.get(u, box)
    r0, r1, c0, c1 = box
    return np.asarray(u[r0:r1, c0:c1])


def _value(backend, u, i: int, j: int) -> float:
    """u[i, j] on the host."""
    return float(_read(backend, u, (i, i + 1, j, j + 1))[0, 0])


def _points(backend, u, read) -> list:
    """(stencil index, value) of the points this rank reads for a point probe: one read of their bounding box."""
    if not read:
        return []
    rows, cols = [r for _, r, _ in read], [c for _, _, c in read]
    r0, c0 = min(rows), min(cols)
    box = _read(backend, u, (r0, max(rows) + 1, c0, max(cols) + 1))
    return [(n, float(box[r - r0, c - c0])) for n, r, c in read]


def combine(case, parts: list[list], stencils: list | None = None, cell: float | None = None) -> np.ndarray:
    """Every probe's values at a batch's S samples from every rank's parts (rank 0), in a fixed order: [sample,
    probe]; stencils: each probe's stencil() (None for the others) and cell: heat_cell(case), computed once by the
    caller. Each sample's values are those of a batch of one: elementwise arithmetic, each sample's sums over its own
    row."""
    cell = heat_cell(case) if cell is None else cell
    stencils = stencils or [stencil(case, p.at) if p.kind == "point" else None for p in case.output.probes]
    columns = []
    for k, p in enumerate(case.output.probes):
        mine = [part[k] for part in parts if part[k] is not None]
        if p.kind == "point":
            read = dict(pair for part in mine for pair in part)
            weights = stencils[k]
            columns.append(sum(w * read[n] for n, (_, _, w) in enumerate(weights)) if len(weights) > 1 else read[0])
        elif p.kind == "heat_flow":
            columns.append([x * cell for x in _side_sums(mine)])
        elif p.kind in ("max", "min"):
            columns.append(_extreme(mine, p.kind))
        else:
            columns.append(_mean(mine))
    return np.stack([np.asarray(c, dtype=np.float64) for c in columns], axis=1)


def heat_cell(case) -> float:
    """dx dy C0 depth: what a sum of wall terms is multiplied by, as the energy balance's (solver.core.balance): W in
    the material form."""
    from ..core.medium import medium

    (dx, dy), med = spacing(case), medium(case)
    return dx * dy * med.c0 * med.depth


def _side_sums(mine: list) -> list[float]:
    """A heat flow's sum of its terms along the whole side at each sample, from the ranks' Wall parts: numpy's sum of
    the side's terms in the side's order (a rank holding the whole side has taken it: Sampler._wall)."""
    if len(mine) == 1 and mine[0].sums is not None:
        return mine[0].sums
    return [float(np.sum(in_order([(m.along, m.lines[s]) for m in mine]))) for s in range(len(mine[0].lines))]


def _extreme(mine: list, kind: str) -> np.ndarray:
    """A max or min over the ranks' extremes, elementwise (a NaN wins, whichever rank saw it; -0.0 below +0.0, as
    the kernels' ordered keys); one rank's as they are."""
    if len(mine) == 1:
        return np.asarray(mine[0], dtype=np.float64)
    v = np.asarray(mine, dtype=np.float64)  # [rank, sample]
    keys = keys_of(v)
    best = key_values(keys.max(axis=0) if kind == "max" else keys.min(axis=0))
    return np.where(np.isnan(v).any(axis=0), math.nan, best)


def _mean(mine: list) -> list[float]:
    """Means from the ranks' parts (digit sums then flags [sample, NPOS + 1], largest |u| [sample], count): the digit
    sums added, the flags OR-ed (solver.core.exactsum.value), a sample at a time."""
    digits = mine[0][0] if len(mine) == 1 else np.sum([d for d, _, _ in mine], axis=0, dtype=np.int64)
    flags = np.bitwise_or.reduce([d[:, exactsum.NPOS] for d, _, _ in mine], axis=0).tolist()
    amax = np.max([a for _, a, _ in mine], axis=0).tolist()
    count = sum(n for *_, n in mine)
    return [exactsum.value(digits[s, :exactsum.NPOS], amax[s], count, flags[s]) for s in range(len(amax))]


def in_order(parts: list) -> np.ndarray:
    """The values of (indices, values) parts as one contiguous array in the order of their indices: what one
    process would have read (one part: as it is)."""
    if len(parts) == 1:
        return np.ascontiguousarray(parts[0][1])
    where = np.concatenate([w for w, _ in parts])
    return np.ascontiguousarray(np.concatenate([v for _, v in parts])[np.argsort(where, kind="stable")])


def unit_of(case, p) -> str | None:
    """A probe's unit: the case's temperature unit, or heat flow's W (solver.core.medium.heat_units); None in the
    diffusivity form (u's own units)."""
    from ..core.medium import heat_units

    units = heat_units(case)
    if units is None:
        return None
    return units["power"] if p.kind == "heat_flow" else case.units.temperature


def describe(p, case=None) -> str:
    """A probe in words (probes.h5's `description`)."""
    unit = unit_of(case, p) if case is not None else None
    if p.kind == "point":
        return f"u at (x, y) = ({p.at[0]:g}, {p.at[1]:g}), bilinear between the plate's grid points around it"
    if p.kind == "heat_flow":
        what = unit if unit else "u x area / time"
        return f"heat entering through the {p.side} side per unit time ({what}; negative: leaving)"
    r = p.region
    where = (f"the rectangle [{r.lower[0]:g}, {r.upper[0]:g}] x [{r.lower[1]:g}, {r.upper[1]:g}]" if r.kind == "rectangle"
             else f"the disk of radius {r.radius:g} around ({r.center[0]:g}, {r.center[1]:g})")
    return f"{p.kind} of u over the plate's grid points in {where}"


# the files ----------------------------------------------------------------------------------------------------
class Probes:
    """Sampling (collective) and the files (rank 0). resume: appending at this step (a restart), or None."""

    def __init__(self, layout, comm, resume: int | None = None):
        self.layout, self.comm = layout, comm
        self.case = layout.case
        self.names = [p.name for p in self.case.output.probes]
        self.stencils = [stencil(self.case, p.at) if p.kind == "point" else None for p in self.case.output.probes]
        self.cell = heat_cell(self.case)
        self.sampler = Sampler(self.case, layout.block)  # before the loop (a region's mask: a pass over the block)
        self.rows: list[tuple] = []  # (step, time, values) not yet written
        self.dir = Path(layout.outdir)
        if comm.rank == 0:
            if resume is None:
                self._create()
            else:
                self._truncate(resume)

    def sample(self, backend, u, step: int, t: float) -> None:
        self.record([step], [t], self._sampler().local(backend, u))

    def tap(self, offsets) -> Tap:
        return Tap(self._sampler(), offsets)

    def _sampler(self) -> Sampler:
        if self.sampler.block != self.layout.block:  # moved (dynamic balance)
            self.sampler = Sampler(self.case, self.layout.block)
        return self.sampler

    def record(self, steps: list[int], times: list[float], local: list) -> None:
        """This rank's parts of every probe at `steps` (collective; their times): rank 0 combines and keeps them."""
        parts = self.comm.gather(local)
        if self.comm.rank == 0:
            values = combine(self.case, parts, self.stencils, self.cell).tolist()
            self.rows.extend(zip(steps, times, values))
            if len(self.rows) >= FLUSH_ROWS:
                self.flush()

    def flush(self) -> None:
        """Rank 0: the kept samples appended to both files."""
        if self.comm.rank != 0 or not self.rows:
            return
        import h5py

        rows, self.rows = self.rows, []
        with open(self.dir / CSV, "a") as f:
            f.writelines(",".join([str(s), repr(float(t)), *(repr(float(v)) for v in vals)]) + "\n"
                         for s, t, vals in rows)
        with h5py.File(self.dir / H5, "a") as f:
            n, k = f["step"].shape[0], len(rows)
            columns = {"step": [r[0] for r in rows], "time": [r[1] for r in rows]}
            columns.update({name: [r[2][i] for r in rows] for i, name in enumerate(self.names)})
            for name, data in columns.items():
                f[name].resize((n + k,))
                f[name][n:] = data

    def close(self) -> None:
        try:
            self.flush()
        except OSError:  # closing after an error: what could be written was
            pass

    def _create(self) -> None:
        import h5py

        with open(self.dir / CSV, "w") as f:
            f.write(",".join(["step", "time", *self.names]) + "\n")
        with h5py.File(self.dir / H5, "w") as f:
            f.attrs["source"] = "stencil probes (solver/io/probes.py)"
            f.attrs["case"] = self.case.name
            t = f.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8", chunks=(1024,))
            t.attrs["long_name"] = "time"
            if getattr(self.case.physics, "material", None) is not None:
                t.attrs["units"] = self.case.units.time
            t.make_scale("time")
            s = f.create_dataset("step", shape=(0,), maxshape=(None,), dtype="i8", chunks=(1024,))
            s.dims[0].attach_scale(t)
            for p in self.case.output.probes:
                d = f.create_dataset(p.name, shape=(0,), maxshape=(None,), dtype="f8", chunks=(1024,))
                d.attrs.update({"kind": p.kind, "description": describe(p, self.case), "long_name": describe(p, self.case)})
                if unit_of(self.case, p):
                    d.attrs["units"] = unit_of(self.case, p)
                d.dims[0].attach_scale(t)

    def _truncate(self, resume: int) -> None:
        """Appending: drop the samples after step `resume` (written past the last checkpoint); a missing file is
        made afresh."""
        import h5py

        if not (self.dir / CSV).exists() or not (self.dir / H5).exists():
            self._create()
            return
        lines = (self.dir / CSV).read_text().splitlines(keepends=True)
        kept = lines[:1] + [ln for ln in lines[1:] if ln.strip() and int(ln.split(",", 1)[0]) <= resume]
        (self.dir / CSV).write_text("".join(kept))
        with h5py.File(self.dir / H5, "a") as f:
            n = int(np.searchsorted(f["step"][()], resume, side="right"))
            for name in ("step", "time", *self.names):
                f[name].resize((n,))


def read_probes_arrays(path: Path) -> dict:
    """probes.h5 (a run directory or the file) as numpy arrays: time, step, probes: name -> (kind, values), and units:
    name -> unit ("time" too; empty where the file names none: the diffusivity form)."""
    import h5py

    p = Path(path)
    p = p / H5 if p.is_dir() else p
    with h5py.File(p, "r") as f:
        names = [k for k in f if k not in ("time", "step")]
        return {"time": f["time"][()], "step": f["step"][()],
                "probes": {k: (str(f[k].attrs.get("kind", "")), f[k][()]) for k in names},
                "units": {k: str(f[k].attrs.get("units", "")) for k in (*names, "time")}}


def read_probes(path: Path):
    """probes.h5 of a run directory (or the file) as an xarray.Dataset: one variable a probe over `time`, with
    `step`; a dict of numpy arrays where xarray is not installed."""
    import h5py

    p = Path(path)
    p = p / H5 if p.is_dir() else p
    with h5py.File(p, "r") as f:
        names = [k for k in f if k not in ("time", "step")]
        data = {k: f[k][()] for k in (*names, "time", "step")}
        attrs = {k: dict(f[k].attrs) for k in names}
    try:
        import xarray as xr
    except ImportError:
        return data
    ds = xr.Dataset({k: ("time", data[k], {a: v for a, v in attrs[k].items() if a in ("kind", "description",
                                                                                       "long_name")})
                     for k in names}, coords={"time": data["time"], "step": ("time", data["step"])},
                    attrs={"source": str(p)})
    return ds
