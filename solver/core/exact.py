"""The exact solution of the discrete Laplace equation with constant Dirichlet sides, in closed form.

For one side at value V and the other three at zero (the top side, y = ly, here; the others by symmetry),
the 5-point equations are solved exactly by a discrete sine series along the side times a discrete sinh
across it:

    u[i, j] = sum_k c_k sin(k pi (j+1) / (nx+1)) sinh(mu_k (i+1)) / sinh(mu_k (ny+1)),
    cosh(mu_k) = 1 + (dy/dx)^2 (1 - cos(k pi / (nx+1))),
    c_k = 2 / (nx+1) sum_j V sin(k pi (j+1) / (nx+1))          (the discrete sine coefficients of V)

(the sine part's second difference is (2 cos theta - 2) times it, the sinh part's (2 cosh mu - 2), and the
two cancel with these weights; at i = ny, the ghost row on the side, the series sums to V). The four sides
add up. Summed as matrix products in float64: O(n^3) operations, a few seconds at 1025^2. A check on
small grids against a sparse direct solve is in tests/test_multigrid.py.
"""

from __future__ import annotations

import numpy as np

MAX_POINTS = 1025 * 1025  # larger grids are checked against the reference backend instead (cost n^3)


def available(case) -> bool:
    """Laplace with every side Dirichlet (constant values) and a grid small enough to sum the series (a linear case:
    not k(T))."""
    b = case.boundary
    sides = [getattr(b, s) for s in ("bottom", "top", "left", "right")]
    return (case.physics.equation == "laplace" and all(s.kind == "dirichlet" for s in sides)
            and case.grid.nx * case.grid.ny <= MAX_POINTS and not getattr(case, "nonlinear", False))


def laplace_dirichlet(nx: int, ny: int, dx: float, dy: float, top: float, bottom: float, left: float,
                      right: float, rows: range | None = None, cols: range | None = None) -> np.ndarray:
    """The solution of the 5-point Laplace equations with these side values on global rows x cols (all of
    them by default), float64: each rank sums the series for its own block only."""
    i = np.arange(ny)[slice(None) if rows is None else rows]  # (an empty range is a block of no rows, not all)
    j = np.arange(nx)[slice(None) if cols is None else cols]
    u = np.zeros((len(i), len(j)))
    for value, across, along, n, m, h, k_h, far in ((top, i, j, nx, ny, dx, dy, False),
                                                    (bottom, i, j, nx, ny, dx, dy, True),
                                                    (right, j, i, ny, nx, dy, dx, False),
                                                    (left, j, i, ny, nx, dy, dx, True)):
        if value:
            part = value * _side(n, m, h, k_h, along, (m - 1 - across) if far else across)
            u += part if across is i else part.T
    return u


def _side(n: int, m: int, h: float, k_h: float, along: np.ndarray, across: np.ndarray) -> np.ndarray:
    """One side at unit value, n points along it (spacing h), m across (spacing k_h): at the `across`
    distances from the opposite side and the `along` points, sum_k c_k sin(k pi (j+1)/(n+1)) sinh(mu_k (i+1))
    / sinh(mu_k (m+1)), as an (across, along) matrix product."""
    k = np.arange(1, n + 1)
    coeff = 2.0 / (n + 1) * np.sin(np.outer(k, np.arange(n) + 1) * np.pi / (n + 1)).sum(axis=1)  # unit V
    sines = np.sin(np.outer(k, along + 1) * np.pi / (n + 1))  # (k, along)
    mu = np.arccosh(1.0 + (k_h / h) ** 2 * (1.0 - np.cos(np.pi * k / (n + 1))))
    return _sinh_ratio(mu[None, :], (across + 1)[:, None], m + 1) @ (coeff[:, None] * sines)


def _sinh_ratio(mu, a, b):
    """sinh(mu a) / sinh(mu b) for 0 < a <= b without overflow."""
    return np.exp(mu * (a - b)) * (-np.expm1(-2 * mu * a)) / (-np.expm1(-2 * mu * b))


def of_case(case, rows: range | None = None, cols: range | None = None) -> np.ndarray:
    """The exact discrete solution of a case that `available` accepts, on global rows x cols."""
    from .physics import spacing

    dx, dy = spacing(case)
    b, g = case.boundary, case.grid
    return laplace_dirichlet(g.nx, g.ny, dx, dy, b.top.value, b.bottom.value, b.left.value, b.right.value,
                             rows, cols)


def inverse_bound(case) -> float | None:
    """An upper bound on the max norm of the unit-diagonal operator's inverse (alpha a number) where both sides of
    an axis are Dirichlet: with phi = x (lx - x) / 2 the 5-point Laplacian of phi is exactly -1 and phi >= 0 on
    those walls (Neumann, periodic and convective ghosts along the other axis take phi's own value or less), so by
    the discrete maximum principle |A^-1 r| <= d max(phi) |r| with d = 2/dx^2 + 2/dy^2; the same along y, and the
    shorter such axis gives the bound. None where no axis has two Dirichlet sides."""
    from .boundary import AXIS_SIDES, kinds
    from .physics import spacing

    dx, dy = spacing(case)
    d = 2.0 / dx**2 + 2.0 / dy**2
    k = kinds(case)
    lengths = [length for axis, length in (("x", case.grid.lx), ("y", case.grid.ly))
               if all(k[s] == "dirichlet" for s in AXIS_SIDES[axis])]
    return d * min(lengths) ** 2 / 8.0 if lengths else None


def exact_solution_available(case) -> bool:
    """sine initial field with zero Dirichlet values and zero fluxes (any kinds): an exact eigenmode, used
    while its rounding bound at run.steps (exact_bound) can still tell a right field from a wrong one."""
    from . import boundary
    from .events import plan_of
    from .medium import medium
    from .physics import EXACT_LIMIT, exact_bound

    steps = plan_of(case).steps  # (None: adaptive steps, which have no such check)
    return (case.initial.kind == "sine" and boundary.homogeneous(case) and not case.physics.source
            and medium(case).beta == 0
            and not case.alpha_field and steps is not None and exact_bound(case, steps) <= EXACT_LIMIT)
