"""The padded field of one block: owned points inside, one ghost layer around them.

Index convention (one place): ghost rows 0 and -1, owned rows 1..ny, global row = start + local - 1
(see solver.core.decomp). Ghost layers on a physical edge hold the boundary values; the others are
refilled by the halo exchange.
"""

from __future__ import annotations

import numpy as np


def padded_field(case, block, interior: np.ndarray) -> np.ndarray:
    """Host array (ny+2, nx+2): the owned block inside, Dirichlet values in ghost layers on physical edges."""
    u = np.zeros(block.padded, dtype=case.numerics.dtype)
    u[1:-1, 1:-1] = interior
    return set_edges(case, block, u)


def set_edges(case, block, u: np.ndarray) -> np.ndarray:
    """Write the Dirichlet values into the ghost layers of `u` that lie on physical edges (in place)."""
    b = case.boundary
    if block.south is None:
        u[0, :] = b.bottom
    if block.north is None:
        u[-1, :] = b.top
    if block.west is None:
        u[:, 0] = b.left
    if block.east is None:
        u[:, -1] = b.right
    return u
