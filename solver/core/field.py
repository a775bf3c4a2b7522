"""The padded field of one block: owned points inside, one ghost layer around them.

Index convention (one place): ghost rows 0 and -1, owned rows 1..ny, global row = start + local - 1
(see solver.core.decomp). Ghost layers on a physical side hold what its boundary rule gives
(solver.core.boundary); the others are refilled by the halo exchange.
"""

from __future__ import annotations

import numpy as np

from .boundary import make_fill


def padded_field(case, block, interior: np.ndarray, t: float = 0.0) -> np.ndarray:
    """Host array (ny+2, nx+2): the owned block inside, the boundary rules (at time t) in ghost layers on
    physical sides."""
    u = np.zeros(block.padded, dtype=case.numerics.dtype)
    u[1:-1, 1:-1] = interior
    return set_edges(case, block, u, t)


def set_edges(case, block, u, t: float = 0.0, owned: tuple[int, int] = (1, 1)):
    """Fill the ghost layer of `u` on physical sides from its owned points and the boundary at time t (in place).
    owned: the local (R0, C0) of u's first owned point (a deep-halo field has more layers towards neighbours; one
    on physical sides): values along a side are placed by the global index of every element (make_fill's frame)."""
    make_fill(case, block, t=t, frame=(u.shape, owned)).apply(u)
    return u
