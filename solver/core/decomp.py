"""Domain decomposition as plain data: no MPI here, so every rank can be simulated in a loop.

Index convention (the one place it is documented):
- a rank owns global rows [r0, r1) and columns [c0, c1) of the (ny, nx) interior field;
- its local array has one ghost layer on every side: shape (ny_local + 2, nx_local + 2);
- ghost rows are 0 and -1, ghost columns 0 and -1; owned rows/columns are 1..n;
- global row = r0 + local row - 1, global column = c0 + local column - 1;
- a ghost layer on a physical side (no neighbour) is filled by the side's boundary rule
  (solver.core.boundary: Dirichlet values never change, Neumann and one-rank periodic sides are refilled
  after every step); one facing a neighbour is refilled by the halo exchange.
Process grid: dims = (py, px); rank = cy * px + cx (row-major, as MPI_Cart_create with reorder=False).
Neighbours: south = rows before (smaller y), north = rows after, west = columns before, east = after;
None at a physical edge. Along a periodic axis (periodic = (y, x), as MPI_Cart_create's `periods`) the
first and last blocks are neighbours across the wrap; with one block along it the rank would be its own
neighbour, so that side stays None and is filled locally (a copy, no message). `inner` drops the wrap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InputError
from .limits import MAX_RANKS


def split(n: int, parts: int, k: int) -> tuple[int, int]:
    """[start, stop) of part k when n items are split into `parts` balanced to within one item."""
    q, r = divmod(n, parts)
    start = k * q + min(k, r)
    return start, start + q + (1 if k < r else 0)


@dataclass(frozen=True)
class Block:
    shape: tuple[int, int]  # global (ny, nx)
    dims: tuple[int, int]  # (py, px)
    coords: tuple[int, int]  # (cy, cx)
    rows: tuple[int, int]  # global [r0, r1)
    cols: tuple[int, int]  # global [c0, c1)
    south: int | None
    north: int | None
    west: int | None
    east: int | None
    periodic: tuple[bool, bool] = (False, False)  # (y, x)

    @property
    def rank(self) -> int:
        return self.coords[0] * self.dims[1] + self.coords[1]

    @property
    def ny(self) -> int:
        return self.rows[1] - self.rows[0]

    @property
    def nx(self) -> int:
        return self.cols[1] - self.cols[0]

    @property
    def padded(self) -> tuple[int, int]:
        return (self.ny + 2, self.nx + 2)

    @property
    def neighbours(self) -> dict[str, int | None]:
        return {"south": self.south, "north": self.north, "west": self.west, "east": self.east}

    @property
    def inner(self) -> dict[str, int | None]:
        """Neighbours inside the domain (none across a periodic wrap): the blocks next to this one in space."""
        (ny, nx), (r0, r1), (c0, c1) = self.shape, self.rows, self.cols
        inside = {"south": r0 > 0, "north": r1 < ny, "west": c0 > 0, "east": c1 < nx}
        return {k: (v if inside[k] else None) for k, v in self.neighbours.items()}

    @property
    def halo_cells(self) -> int:
        """Ghost cells this block receives per exchange of one layer (sides facing a neighbour)."""
        return sum(self.nx if side in ("south", "north") else self.ny
                   for side, r in self.neighbours.items() if r is not None)

    @property
    def is_serial(self) -> bool:
        return all(n is None for n in self.neighbours.values())

    def interior(self) -> tuple[int, int, int, int]:
        """Local (r0, r1, c0, c1) of the owned points that read no ghost filled by a neighbour."""
        return (
            1 + (self.south is not None),
            self.ny + 1 - (self.north is not None),
            1 + (self.west is not None),
            self.nx + 1 - (self.east is not None),
        )

    def everything(self) -> tuple[int, int, int, int]:
        return (1, self.ny + 1, 1, self.nx + 1)

    def edges(self) -> list[tuple[int, int, int, int]]:
        """The owned points outside interior(): full-width row strips, then column strips between them."""
        r0, r1, c0, c1 = self.interior()
        r0, r1 = min(r0, self.ny + 1), max(r1, r0)  # a block one row high has an empty interior
        c0, c1 = min(c0, self.nx + 1), max(c1, c0)
        strips = [(1, r0, 1, self.nx + 1), (r1, self.ny + 1, 1, self.nx + 1), (r0, r1, 1, c0), (r0, r1, c1, self.nx + 1)]
        return [s for s in strips if s[0] < s[1] and s[2] < s[3]]


def choose_dims(size: int, shape: tuple[int, int], decomposition: str, dims: list[int] | None = None) -> tuple[int, int]:
    """(py, px) for `size` ranks. rows: (size, 1). cart: the given dims, or the factor pair with the
    smallest halo per rank for this grid's aspect ratio (MPI_Dims_create ignores the aspect)."""
    ny, nx = shape
    if size > MAX_RANKS:
        raise InputError(f"parallel: {size} ranks: at most {MAX_RANKS} are supported (each rank lists every rank's "
                         f"block); use at most {MAX_RANKS} ranks")
    if decomposition == "rows":
        py, px = size, 1
    elif dims is not None:
        py, px = dims
        if py * px != size:
            raise InputError(f"parallel.dims: {py} x {px} = {py * px} processes but the job has {size} ranks; "
                             f"make py * px = {size} or use dims: null")
    else:
        small = [p for p in range(1, math.isqrt(size) + 1) if size % p == 0]  # the divisors, in sqrt(size) steps
        pairs = [(p, size // p) for d in small for p in {d, size // d} if p <= ny and size // p <= nx]
        if not pairs:
            raise InputError(f"parallel: {size} ranks cannot tile a {ny} x {nx} grid; use fewer ranks")
        py, px = min(pairs, key=lambda d: (ny / d[0] + nx / d[1], -d[0]))
    if py > ny or px > nx:
        fix = "use decomposition: cart" if decomposition == "rows" else "choose other parallel.dims"
        raise InputError(f"parallel: {py} x {px} ranks but the grid has {ny} rows x {nx} columns; "
                         f"use at most {ny} ranks along y and {nx} along x, or {fix}")
    return py, px


def decompose(shape: tuple[int, int], dims: tuple[int, int], rank: int,
              periodic: tuple[bool, bool] = (False, False)) -> Block:
    (ny, nx), (py, px) = shape, dims
    cy, cx = divmod(rank, px)
    wrap_y, wrap_x = periodic[0] and py > 1, periodic[1] and px > 1  # one block along an axis: filled locally

    def at(y: int, x: int) -> int | None:
        y, x = (y % py if wrap_y else y), (x % px if wrap_x else x)
        return y * px + x if 0 <= y < py and 0 <= x < px else None

    return Block(shape=(ny, nx), dims=(py, px), coords=(cy, cx), rows=split(ny, py, cy), cols=split(nx, px, cx),
                 south=at(cy - 1, cx), north=at(cy + 1, cx), west=at(cy, cx - 1), east=at(cy, cx + 1),
                 periodic=(bool(periodic[0]), bool(periodic[1])))


def all_blocks(shape: tuple[int, int], dims: tuple[int, int], periodic: tuple[bool, bool] = (False, False)) -> list[Block]:
    return [decompose(shape, dims, r, periodic) for r in range(dims[0] * dims[1])]
