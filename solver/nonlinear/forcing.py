"""How exactly each Newton step's linear system is solved: the forcing term eta_k (Eisenstat and Walker, Choosing the
forcing terms in an inexact Newton method, SIAM J. Sci. Comput. 17, 1996: their choice 2 with its safeguard).

    eta_0 = 0.1,   eta_k = gamma (|R_k| / |R_(k-1)|)^alpha,   safeguard: at least gamma eta_(k-1)^alpha where that
    exceeds 0.1;   at most 0.9;   gamma = 0.9, alpha = 2

far from the solution the steps are solved loosely (no work wasted on a model that is about to change), near it ever
more tightly, so that the convergence is superlinear without solving any step exactly. The constants were measured
against PETSc's defaults for SNESKSPSetParametersEW (gamma = 1, alpha = (1 + sqrt 5) / 2, eta_0 = 0.3), whose
safeguard holds eta above 0.3 for five steps after a first step that lowers the max norm little: on
tools/nonlinear_bench.py's plate at 63^2 and 255^2, cases/die_kT.yaml and cases/radiating_plate.yaml, 4, 6, 4 and 5
Newton iterations against 9, 10, 6 and 6, with the same GMRES iterations and multigrid cycles in all (16-19 each),
and each Newton iteration's own cost (linearising, the levels' diagonal, the line search's residual) saved. The
residuals are the max norms the run records after every iteration (solver.core.loop), so eta is a function of that
history alone: a restart from a checkpoint, which keeps the history, continues with the same etas. Where the run has a
tolerance, eta is no smaller than what that tolerance needs (half of it over the residual's current fall: Kelley's
guard against oversolving the last step), nor below FLOOR_ULPS eps of the field's dtype.
"""

from __future__ import annotations


ETA0 = 0.1
ETA_MAX = 0.9
GAMMA = 0.9
ALPHA = 2.0
THRESHOLD = 0.1
FLOOR_ULPS = 100.0


def forcing(norms: list[float], eps: float, tolerance: float | None = None, constant: float | None = None) -> float:
    """eta for the step from the last iterate of `norms` (the max-norm residuals of the iterates so far, the first
    one's included); constant: the case's newton.forcing instead of choice 2."""
    floor = FLOOR_ULPS * eps
    if constant is not None:
        return max(constant, floor)
    eta = ETA0
    for old, new in zip(norms, norms[1:]):
        nxt = GAMMA * (new / old) ** ALPHA if old > 0 else 0.0
        guard = GAMMA * eta ** ALPHA
        if guard > THRESHOLD:
            nxt = max(nxt, guard)
        eta = min(nxt, ETA_MAX)
    if tolerance is not None and norms and norms[-1] > 0:
        eta = max(eta, 0.5 * tolerance * norms[0] / norms[-1])
    return min(max(eta, floor), ETA_MAX)
