"""The one update every backend implements, and its exact solution.

    u_new[i,j] = wc*u[i,j] + wx*(u[i,j-1] + u[i,j+1]) + wy*(u[i-1,j] + u[i+1,j])

heat (FTCS):  wx = alpha*dt/dx**2, wy = alpha*dt/dy**2, wc = 1 - 2*wx - 2*wy (stable while wc >= 0)
laplace (Jacobi): wc = 0, wx = dy**2 / (2*(dx**2 + dy**2)), wy = dx**2 / (2*(dx**2 + dy**2))

Every backend evaluates the terms in exactly this order, so on the CPU the results are bitwise equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import boundary

FLOPS_PER_UPDATE = 7  # 3 multiplies, 4 adds


@dataclass(frozen=True)
class Weights:
    wc: float
    wx: float
    wy: float

    def cast(self, dtype) -> Weights:
        """The weights as scalars of the field's dtype (numpy keeps float32 arithmetic in float32)."""
        t = np.dtype(dtype).type
        return Weights(t(self.wc), t(self.wx), t(self.wy))


def update(out, u, w: Weights, region) -> None:
    """The update as one array expression over region (r0, r1, c0, c1) of padded arrays, in the term
    order above: the numpy reference, and CuPy's `expr` variant (any array type with numpy slicing)."""
    r0, r1, c0, c1 = region
    out[r0:r1, c0:c1] = (
        w.wc * u[r0:r1, c0:c1]
        + w.wx * (u[r0:r1, c0 - 1:c1 - 1] + u[r0:r1, c0 + 1:c1 + 1])
        + w.wy * (u[r0 - 1:r1 - 1, c0:c1] + u[r0 + 1:r1 + 1, c0:c1])
    )


def spacing(case) -> tuple[float, float]:
    """(dx, dy): a Dirichlet wall lies one spacing outside the first and last interior point, a Neumann
    wall half a spacing; a periodic axis of n points has period n spacings (solver.core.boundary)."""
    return boundary.geometry(case)[0]


def origin(case) -> tuple[float, float]:
    """(x, y) of the first interior point: (dx, dy) with Dirichlet sides, half a spacing on the others."""
    return boundary.geometry(case)[1]


def stable_dt(case) -> float:
    """Largest FTCS time step with wc >= 0: dt <= 1 / (2*alpha*(1/dx**2 + 1/dy**2))."""
    dx, dy = spacing(case)
    return 1.0 / (2.0 * case.physics.alpha * (1.0 / dx**2 + 1.0 / dy**2))


def time_step(case) -> float:
    """The step used: the case's dt, or safety x the stable limit (explicit) or cfl x it (implicit schemes);
    laplace iterations count as 1."""
    if case.physics.equation == "laplace":
        return 1.0
    if case.physics.dt is not None:
        return case.physics.dt
    return (case.physics.cfl if case.physics.scheme != "explicit" else case.physics.safety) * stable_dt(case)


IMPLICIT_TOLERANCE = 1e-8  # implicit heat with run.tolerance null: each step's solve reaches this relative residual
THETA = {"backward-euler": 1.0, "crank-nicolson": 0.5}  # the implicit share of the step: (I - theta dt alpha L)


def implicit_operator(case) -> tuple[float, float]:
    """(sigma, kappa) of an implicit step's operator sigma - kappa Laplacian = I - theta dt alpha Laplacian."""
    return 1.0, THETA[case.physics.scheme] * time_step(case) * case.physics.alpha


def implicit_rhs_weights(case) -> Weights:
    """Weights of the explicit part, divided by the implicit operator's diagonal d (solver.multigrid.levels):
    g = (I + (1 - theta) dt alpha Laplacian) u^n / d as one Jacobi-kernel update (backward Euler: u^n / d)."""
    dx, dy = spacing(case)
    theta, dt, alpha = THETA[case.physics.scheme], time_step(case), case.physics.alpha
    k_im, k_ex = theta * dt * alpha, (1.0 - theta) * dt * alpha
    d = 1.0 + k_im * (2.0 / dx**2 + 2.0 / dy**2)
    return Weights((1.0 - 2.0 * k_ex / dx**2 - 2.0 * k_ex / dy**2) / d, k_ex / dx**2 / d, k_ex / dy**2 / d)


def implicit_factor(case) -> float:
    """Per-step multiplier of the eigenmode initial.k under the implicit scheme: 1 / (1 + dt alpha lambda)
    (backward Euler), (1 - dt alpha lambda / 2) / (1 + dt alpha lambda / 2) (Crank-Nicolson), lambda the
    5-point eigenvalue (2/dx^2)(1 - cos theta_x) + (2/dy^2)(1 - cos theta_y)."""
    theta, z = THETA[case.physics.scheme], time_step(case) * case.physics.alpha * mode_eigenvalue(case)
    return (1.0 - (1.0 - theta) * z) / (1.0 + theta * z)


def weights(case) -> Weights:
    dx, dy = spacing(case)
    if case.physics.equation == "laplace":
        s = 2.0 * (dx**2 + dy**2)
        return Weights(0.0, dy**2 / s, dx**2 / s)
    dt, alpha = time_step(case), case.physics.alpha
    wx, wy = alpha * dt / dx**2, alpha * dt / dy**2
    return Weights(1.0 - 2.0 * wx - 2.0 * wy, wx, wy)


def mode_eigenvalue(case) -> float:
    """lambda of the eigenmode initial.k: minus the 5-point Laplacian of the mode over the mode,
    (2/dx^2)(1 - cos theta_x) + (2/dy^2)(1 - cos theta_y)."""
    dx, dy = spacing(case)
    (_, tx), (_, ty) = (_axis(case, axis, np.arange(0)) for axis in "xy")
    return 2.0 / dx**2 * (1.0 - math.cos(tx)) + 2.0 / dy**2 * (1.0 - math.cos(ty))


def mode_factor(case) -> float:
    """The eigenmode's per-step multiplier for the case's scheme (see explicit_factor, implicit_factor)."""
    if case.physics.equation == "heat" and case.physics.scheme != "explicit":
        return implicit_factor(case)
    return explicit_factor(case)


def explicit_factor(case) -> float:
    """Per-step multiplier of the eigenmode `initial.k` (sine) for the case's boundary kinds; k = [1, 1]
    with Dirichlet sides: the lowest mode, wc + 2 wx cos(pi/(nx+1)) + 2 wy cos(pi/(ny+1))."""
    w = weights(case)
    (_, tx), (_, ty) = (_axis(case, axis, np.arange(0)) for axis in "xy")
    return w.wc + 2 * w.wx * math.cos(tx) + 2 * w.wy * math.cos(ty)


def _axis(case, axis: str, index: np.ndarray):
    lo, hi = boundary.AXIS_SIDES[axis]
    k = boundary.kinds(case)
    kx, ky = getattr(case.initial, "k", (1, 1))
    n, wave = (case.grid.nx, kx) if axis == "x" else (case.grid.ny, ky)
    return boundary.axis_mode(k[lo], k[hi], n, wave, index)


def eigenmode(case, rows: range, cols: range, amplitude: float = 1.0) -> np.ndarray:
    """The discrete eigenmode `initial.k` for the boundary kinds on global rows x cols, in float64."""
    si, _ = _axis(case, "y", np.arange(rows.start, rows.stop))
    sj, _ = _axis(case, "x", np.arange(cols.start, cols.stop))
    return amplitude * np.outer(si, sj)


def sine_mode(rows: range, cols: range, ny: int, nx: int, amplitude: float = 1.0) -> np.ndarray:
    """sin(pi*(i+1)/(ny+1)) * sin(pi*(j+1)/(nx+1)) on global rows x cols, in float64 (all sides Dirichlet)."""
    si = np.sin(np.pi * (np.arange(rows.start, rows.stop) + 1) / (ny + 1))
    sj = np.sin(np.pi * (np.arange(cols.start, cols.stop) + 1) / (nx + 1))
    return amplitude * np.outer(si, sj)


def exact_solution_available(case) -> bool:
    """sine initial field with zero Dirichlet values and zero fluxes (any kinds): an exact eigenmode."""
    return case.initial.kind == "sine" and boundary.homogeneous(case)


def exact_tolerance(case, steps: int) -> float:
    """Bound on max|u - exact| / max|exact| from rounding: a few ulps per step, accumulated.

    STENCIL_EXACT_TOLERANCE_SCALE multiplies it (tests set 0 to prove that a failed check exits 3)."""
    import os

    eps = np.finfo(case.numerics.dtype).eps
    return float(os.environ.get("STENCIL_EXACT_TOLERANCE_SCALE", 1.0)) * 8.0 * float(eps) * (steps + 1)
