"""The one update every backend implements, and its exact solution.

    u_new[i,j] = wc*u[i,j] + wx*(u[i,j-1] + u[i,j+1]) + wy*(u[i-1,j] + u[i+1,j])  [+ s[i,j]]

heat (FTCS):  wx = alpha*dt/dx**2, wy = alpha*dt/dy**2, wc = 1 - 2*wx - 2*wy (stable while wc >= 0)
laplace (Jacobi): wc = 0, wx = dy**2 / (2*(dx**2 + dy**2)), wy = dx**2 / (2*(dx**2 + dy**2))
s, where there is a source q: dt q (heat), q / (alpha (2/dx^2 + 2/dy^2)) (Jacobi), added last.

Where the coefficients are fields (alpha a field, or materials: solver.core.medium), the kernels read face
coefficients ax (east faces) and ay (north faces) instead of wx and wy (solver.core.operator builds them), and, where
the materials differ in heat capacity, per-point fields beside them:

heat (flux form):  u_new = cw*u + m*((ax[i,j]*(E - u) - ax[i,j-1]*(u - W)) + (ay[i,j]*(N - u) - ay[i-1,j]*(u - S))) [+ s]
                   ax = dt a_face / dx^2, ay = dt a_face / dy^2, s = dt q / c; m = 1 / c (the capacity field c = C / C0;
                   None: 1, not multiplied); cw = the centre's weight: the scalar wc (1 - dt beta, the faces' sink;
                   1 where there is none, which multiplies exactly) or a field (1 - dt beta / c)
Jacobi (and multigrid's smoother, solver.backends.mg_ops.vsmooth):
                   u_new = wc*u + om*((((ax_W*W + ax_E*E) + (ay_S*S + ay_N*N)) + s) / (sigma + ((ax_W + ax_E) + (ay_S + ay_N))))
                   ax = a_face / dx^2, ay = a_face / dy^2, s = q; Jacobi: wc = 0, om = 1, sigma = the sink beta;
                   sigma a field `sg` where it varies (an implicit step's capacity c + theta dt beta)

Every backend evaluates the terms in exactly this order, so on the CPU the results are bitwise equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from . import boundary

FLOPS_PER_UPDATE = 7  # 3 multiplies, 4 adds
FIELDS = ("s", "ax", "ay", "m", "cw", "sg")  # the Weights' arrays (None where the update does not read them)
EXACT_ULPS = 8.0  # rounding per step against the exact mode, in eps of the field (exact_bound)
EXACT_LIMIT = 1e-3  # an exact check looser than this proves little: verify against the numpy reference instead


@dataclass(frozen=True, eq=False)
class Weights:
    """The update's numbers, and the fields it reads where the physics is data: s (a source term added last),
    ax and ay (face coefficients, alpha a field), m (the flux form's multiplier 1 / c where the heat capacity varies),
    cw (the flux form's centre weight where it varies), sg (the Jacobi form's diagonal part where it varies); arrays on
    the field's own padded layout and device, in its dtype, or None. jacobi: with ax/ay, the Jacobi form (a division
    by the diagonal) instead of the flux form; sigma: that diagonal's constant part (implicit steps: 1; multigrid
    levels; the faces' sink)."""

    wc: float
    wx: float
    wy: float
    s: object = None
    ax: object = None
    ay: object = None
    jacobi: bool = False
    sigma: float = 0.0
    m: object = None
    cw: object = None
    sg: object = None
    uniform: object = None  # (ax, ay) as two numbers where every face the block's kernels read holds the same (a
    # backend may then read them as numbers: the same bits, two fields fewer a sweep; solver.multigrid.cycle._faces)

    def cast(self, dtype) -> Weights:
        """The weights as scalars of the field's dtype (numpy keeps float32 arithmetic in float32)."""
        t = np.dtype(dtype).type
        return replace(self, wc=t(self.wc), wx=t(self.wx), wy=t(self.wy), sigma=t(self.sigma))

    @property
    def fields(self) -> bool:
        """Whether the kernels read coefficient fields (alpha a field)."""
        return self.ax is not None

    def with_data(self, **data) -> Weights:
        return replace(self, **data)


def update(out, u, w: Weights, region) -> None:
    """The update as one array expression over region (r0, r1, c0, c1) of padded arrays, in the term
    order above: the numpy reference, and CuPy's `expr` variant (any array type with numpy slicing)."""
    r0, r1, c0, c1 = region
    if w.fields:
        return field_update(out, u, w, region)
    v = (w.wc * u[r0:r1, c0:c1]
         + w.wx * (u[r0:r1, c0 - 1:c1 - 1] + u[r0:r1, c0 + 1:c1 + 1])
         + w.wy * (u[r0 - 1:r1 - 1, c0:c1] + u[r0 + 1:r1 + 1, c0:c1]))
    out[r0:r1, c0:c1] = v if w.s is None else v + w.s[r0:r1, c0:c1]


def field_update(out, u, w: Weights, region) -> None:
    """The update with coefficient fields (module docstring): the flux form, or the Jacobi form."""
    r0, r1, c0, c1 = region
    c, s, box = u[r0:r1, c0:c1], w.s, (slice(r0, r1), slice(c0, c1))
    west, east = u[r0:r1, c0 - 1:c1 - 1], u[r0:r1, c0 + 1:c1 + 1]
    south, north = u[r0 - 1:r1 - 1, c0:c1], u[r0 + 1:r1 + 1, c0:c1]
    ax_w, ax_e = w.ax[r0:r1, c0 - 1:c1 - 1], w.ax[r0:r1, c0:c1]
    ay_s, ay_n = w.ay[r0 - 1:r1 - 1, c0:c1], w.ay[r0:r1, c0:c1]
    if w.jacobi:
        v = ((ax_w * west + ax_e * east) + (ay_s * south + ay_n * north))
        if s is not None:
            v = v + s[box]
        sigma = w.sigma if w.sg is None else w.sg[box]
        out[r0:r1, c0:c1] = w.wc * c + (v / (sigma + ((ax_w + ax_e) + (ay_s + ay_n))))
        return
    flux = ((ax_e * (east - c) - ax_w * (c - west)) + (ay_n * (north - c) - ay_s * (c - south)))
    v = (w.wc if w.cw is None else w.cw[box]) * c + (flux if w.m is None else w.m[box] * flux)
    out[r0:r1, c0:c1] = v if s is None else v + s[box]


def spacing(case) -> tuple[float, float]:
    """(dx, dy): a Dirichlet wall lies one spacing outside the first and last interior point, a Neumann
    wall half a spacing; a periodic axis of n points has period n spacings (solver.core.boundary)."""
    return boundary.geometry(case)[0]


def origin(case) -> tuple[float, float]:
    """(x, y) of the first interior point: (dx, dy) with Dirichlet sides, half a spacing on the others."""
    return boundary.geometry(case)[1]


def alpha_of(case) -> float:
    """The diffusivity where it is one number (physics.alpha a number, or a plate of one material: k / C); the
    largest value on the grid where it is a field (the stability limit, and the scalar weights of records and
    estimates: the kernels then read face fields)."""
    a = case.physics.alpha
    if isinstance(a, float) and getattr(case.physics, "material", None) is None:
        return a
    from .materials import alpha_max

    return alpha_max(case)


def stable_dt(case) -> float:
    """Largest FTCS time step with wc >= 0: dt <= 1 / (2*alpha*(1/dx**2 + 1/dy**2) + beta), alpha the largest value
    (a face's harmonic mean never exceeds its larger point), beta the faces' sink. Where the heat capacity varies,
    the exact limit: every point's centre weight 1 - dt (its faces + beta) / c >= 0 (solver.core.materials)."""
    from .medium import medium

    dx, dy = spacing(case)
    med = medium(case)
    if med.capacity_field:
        from .materials import capacity_limit

        linear = capacity_limit(case)
    else:
        linear = 1.0 / (2.0 * alpha_of(case) * (1.0 / dx**2 + 1.0 / dy**2) + med.beta)
    if getattr(case, "nonlinear", False):  # k(T), radiation: at the case's temperatures (solver.case.nonlinear)
        return case.nonlinear_limit(linear)
    return linear


def time_step(case) -> float:
    """The step used: the case's dt, or safety x the stable limit (explicit) or cfl x it (implicit schemes);
    laplace iterations count as 1."""
    if case.physics.equation == "laplace":
        return 1.0
    if case.physics.dt is not None:
        return case.physics.dt
    return (case.physics.cfl if case.physics.scheme != "explicit" else case.physics.safety) * stable_dt(case)


IMPLICIT_TOLERANCE = 1e-8  # implicit heat with run.tolerance null: each step's solve reaches this relative residual
STAGE_SHARE = 0.1  # adaptive steps with run.tolerance null: each stage's solve reaches STAGE_SHARE x run.time_tolerance
# (SUNDIALS' rule: CVODE ends a step's iteration at 0.1 of the local error test, so the solve's own error stays a small
# part of what the controller allows; the solve's unit is what the stage changes, a fraction of max|u|). Measured
# (tools/time_bench.py implicit at 255^2, time_tolerance 3e-3): solves to 1e-6 290 cycles, error at t = 0.1 5.803e-4;
# to 3e-4 (this share) 193 cycles, 5.808e-4; to 1e-3 156 cycles, 5.842e-4; the steps the same


def step_tolerance(case) -> float:
    """The relative residual each implicit step's (or adaptive stage's) solve reaches: run.tolerance where given,
    else STAGE_SHARE x run.time_tolerance for adaptive steps, else IMPLICIT_TOLERANCE."""
    if case.run.tolerance is not None:
        return case.run.tolerance
    if case.run.time_tolerance is not None:
        return STAGE_SHARE * case.run.time_tolerance
    return IMPLICIT_TOLERANCE


THETA = {"backward-euler": 1.0, "crank-nicolson": 0.5}  # the implicit share of the step: (I - theta dt alpha L)


def implicit_operator(case, dt: float | None = None, theta: float | None = None) -> tuple[float, float]:
    """(sigma, kappa) of an implicit step's operator sigma - kappa Laplacian = (1 + theta dt beta) I - theta dt alpha
    Laplacian (fields: kappa = theta dt, the face coefficients carry alpha; a capacity field c adds c - 1 to sigma at
    every point: solver.multigrid.cycle). dt: the step's (default the case's); theta: the implicit share (default
    the scheme's)."""
    from .medium import medium

    alpha = 1.0 if case.alpha_field else alpha_of(case)
    theta = THETA[case.physics.scheme] if theta is None else theta
    dt = time_step(case) if dt is None else dt
    return 1.0 + theta * dt * medium(case).beta, theta * dt * alpha


def steady_operator(case) -> tuple[float, float]:
    """(sigma, kappa) of the steady state's operator beta I - kappa Laplacian: (0, 1) without a sink (the unit-diagonal
    Jacobi weights, which alpha does not change), else (beta, alpha) (fields: (beta, 1))."""
    from .medium import medium

    beta = medium(case).beta
    if beta == 0:
        return 0.0, 1.0
    return beta, (1.0 if case.alpha_field else alpha_of(case))


def implicit_rhs_weights(case, dt: float | None = None, theta: float | None = None) -> Weights:
    """Weights of the explicit part, divided by the implicit operator's diagonal d (solver.multigrid.levels):
    g = (I + (1 - theta) dt alpha Laplacian) u^n / d as one Jacobi-kernel update (backward Euler: u^n / d).
    dt, theta: as implicit_operator."""
    dx, dy = spacing(case)
    theta = THETA[case.physics.scheme] if theta is None else theta
    dt, alpha = time_step(case) if dt is None else dt, alpha_of(case)
    from .medium import medium

    beta = medium(case).beta
    k_im, k_ex = theta * dt * alpha, (1.0 - theta) * dt * alpha
    d = 1.0 + k_im * (2.0 / dx**2 + 2.0 / dy**2) + theta * dt * beta
    return Weights((1.0 - 2.0 * k_ex / dx**2 - 2.0 * k_ex / dy**2 - (1.0 - theta) * dt * beta) / d, k_ex / dx**2 / d,
                   k_ex / dy**2 / d)


def implicit_factor(case, dt: float | None = None) -> float:
    """Per-step multiplier of the eigenmode initial.k under the implicit scheme: 1 / (1 + dt alpha lambda)
    (backward Euler), (1 - dt alpha lambda / 2) / (1 + dt alpha lambda / 2) (Crank-Nicolson), lambda the
    5-point eigenvalue (2/dx^2)(1 - cos theta_x) + (2/dy^2)(1 - cos theta_y)."""
    theta = THETA[case.physics.scheme]
    z = (time_step(case) if dt is None else dt) * alpha_of(case) * mode_eigenvalue(case)
    return (1.0 - (1.0 - theta) * z) / (1.0 + theta * z)


def weights(case, dt: float | None = None) -> Weights:
    """The scalar weights (module docstring), with the faces' sink beta: explicit wc - dt beta; Jacobi the
    unit-diagonal weights of beta - alpha Laplacian (without a sink: alpha cancels). dt: a step of its own length
    (default the case's dt)."""
    from .medium import medium

    dx, dy = spacing(case)
    beta = medium(case).beta
    if case.physics.equation == "laplace":
        if beta == 0:
            s = 2.0 * (dx**2 + dy**2)
            return Weights(0.0, dy**2 / s, dx**2 / s)
        alpha = alpha_of(case)
        d = beta + alpha * (2.0 / dx**2 + 2.0 / dy**2)
        return Weights(0.0, alpha / dx**2 / d, alpha / dy**2 / d)
    dt, alpha = time_step(case) if dt is None else dt, alpha_of(case)
    wx, wy = alpha * dt / dx**2, alpha * dt / dy**2
    return Weights(1.0 - 2.0 * wx - 2.0 * wy - dt * beta, wx, wy)


def mode_eigenvalue(case) -> float:
    """lambda of the eigenmode initial.k: minus the 5-point Laplacian of the mode over the mode,
    (2/dx^2)(1 - cos theta_x) + (2/dy^2)(1 - cos theta_y)."""
    dx, dy = spacing(case)
    (_, tx), (_, ty) = (_axis(case, axis, np.arange(0)) for axis in "xy")
    return 2.0 / dx**2 * (1.0 - math.cos(tx)) + 2.0 / dy**2 * (1.0 - math.cos(ty))


def mode_factor(case, dt: float | None = None) -> float:
    """The eigenmode's per-step multiplier for the case's scheme (see explicit_factor, implicit_factor); dt: a step
    of its own length (default the case's dt)."""
    if case.physics.equation == "heat" and case.physics.scheme != "explicit":
        return implicit_factor(case, dt)
    return explicit_factor(case, dt)


def explicit_factor(case, dt: float | None = None) -> float:
    """Per-step multiplier of the eigenmode `initial.k` (sine) for the case's boundary kinds; k = [1, 1]
    with Dirichlet sides: the lowest mode, wc + 2 wx cos(pi/(nx+1)) + 2 wy cos(pi/(ny+1))."""
    (_, tx), (_, ty) = (_axis(case, axis, np.arange(0)) for axis in "xy")
    return _factor(weights(case, dt), tx, ty)


def _factor(w: Weights, tx: float, ty: float) -> float:
    """Per-step multiplier of the mode whose angles along x and y are tx and ty."""
    return w.wc + 2 * w.wx * math.cos(tx) + 2 * w.wy * math.cos(ty)


def spectral_radius(case) -> float:
    """max |multiplier| over every discrete mode of the case's boundary kinds: the slowest decay there is
    (the lowest mode's, or near the stability limit the most oscillating one's, whose multiplier is near -1)."""
    w, k, g = weights(case), boundary.kinds(case), case.grid
    (x0, x1), (y0, y1) = (boundary.angle_range(k[lo], k[hi], n)
                          for (lo, hi), n in ((boundary.AXIS_SIDES["x"], g.nx), (boundary.AXIS_SIDES["y"], g.ny)))
    return max(abs(_factor(w, tx, ty)) for tx in (x0, x1) for ty in (y0, y1))


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


def exact_bound(case, steps: int) -> float:
    """Bound on max|u - exact| / max|exact| after `steps` steps from rounding alone; inf when the exact
    field is zero (lam = 0) or the bound passes the float range. Implicit heat steps: 8 eps (n + 1), as the
    error is measured against the initial amplitude there (each solve's allowance is added by verify).

    Explicit steps and Jacobi sweeps: lam is the mode's multiplier (|u_s| = |lam|^s |u_0|), rho = spectral_radius, r = rho / |lam| >= 1.
    - Steps: computing step s + 1 rounds every point by a few ulps of the field it reads (EXACT_ULPS eps
      |u_s|); that error lives on in every mode, the slowest decaying as rho^(n-s-1) while the exact field
      decays as |lam|^(n-s): relative to the exact field at step n, EXACT_ULPS eps (1 + r + ... + r^n) / |lam|.
      For the slowest mode (r = 1, lam near 1) that is 8 eps (n + 1); it grows as r^n when a faster mode is
      left to decay beneath the rounding of slower ones.
    - The mode itself: its sines are evaluated at rounded arguments (up to about theta n, pi k), so the
      field computed is an eigenvector only to eps times those arguments; that defect decays with the
      slower modes too: eps (theta_x nx + theta_y ny) (1 + r^n)."""
    eps = float(np.finfo(case.numerics.dtype).eps)
    if case.implicit:  # measured against the initial amplitude there (solver.results.verify), not the decayed mode
        return EXACT_ULPS * eps * (steps + 1)
    lam = abs(mode_factor(case))
    if lam == 0:
        return math.inf
    r = max(spectral_radius(case) / lam, 1.0)
    steps_part = EXACT_ULPS * eps * _geometric_sum(r, steps + 1) / lam
    return steps_part + eps * _largest_argument(case) * (1.0 + _power(r, steps))


def _largest_argument(case) -> float:
    """theta_x nx + theta_y ny: about the largest arguments at which the mode's sines or cosines are evaluated."""
    (_, tx), (_, ty) = (_axis(case, axis, np.arange(0)) for axis in "xy")
    return abs(tx) * case.grid.nx + abs(ty) * case.grid.ny


def _power(r: float, n: int) -> float:
    """r^n for r >= 1; inf beyond the float range."""
    exponent = n * math.log(r)
    return math.inf if exponent > 700 else math.exp(exponent)


def _geometric_sum(r: float, n: int) -> float:
    """1 + r + ... + r^(n-1) for r >= 1; inf beyond the float range."""
    if r == 1.0:
        return float(n)
    return math.expm1(n * math.log(r)) / (r - 1.0) if n * math.log(r) <= 700 else math.inf


def exact_tolerance(case, steps: int) -> float:
    """The tolerance of the exact check: exact_bound. STENCIL_EXACT_TOLERANCE_SCALE multiplies it (tests set
    0 to prove that a failed check exits 3)."""
    import os

    return float(os.environ.get("STENCIL_EXACT_TOLERANCE_SCALE", 1.0)) * exact_bound(case, steps)
