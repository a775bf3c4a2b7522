"""The linear case Newton's steps are preconditioned with: the same grid, materials (their reference k), shapes and
sources, with every wall that the nonlinear operator handles itself closed.

- Dirichlet and periodic sides stay (their ghosts: the wall's value, the wrap);
- Neumann and convective sides (radiating or not) become insulated: the nonlinear operator adds their fluxes at the
  wall's points (solver.nonlinear.operator, films), and the multigrid sees their linearisation in its diagonal;
- radiating rims become insulated (their films likewise); other rims, held objects and holes stay;
- the equation is the steady state's (laplace, multigrid without conjugate gradients: GMRES is the outer Krylov
  method).
"""

from __future__ import annotations

from ..case.boundary import Neumann
from ..case.regions import InsulatedRim

SIDES = ("bottom", "top", "left", "right")


def linear_case(case):
    """The case the multigrid of Newton's steps is built on (module docstring)."""
    sides = {}
    for side in SIDES:
        spec = getattr(case.boundary, side)
        if spec.kind in ("neumann", "convective"):
            sides[side] = Neumann(kind="neumann", flux=0.0)
    physics = {"equation": "laplace", "solver": "multigrid", "scheme": "explicit"}
    regions = [_closed(r, "hole") for r in case.physics.regions]
    if any(a is not b for a, b in zip(regions, case.physics.regions)):
        physics["regions"] = regions
    if case.physics.outline is not None:
        outline = _closed(case.physics.outline, "rim")
        if outline is not case.physics.outline:
            physics["outline"] = outline
    return case.model_copy(update={"physics": case.physics.model_copy(update=physics),
                                   "boundary": case.boundary.model_copy(update=sides),
                                   "multigrid": case.multigrid.model_copy(update={"krylov": "none"})})


def _closed(region, key: str):
    """A region (or the outline) with a radiating rim made insulated; others as they are."""
    rim = getattr(region, key, None)
    if rim is None or getattr(rim, "emissivity", 0.0) <= 0:
        return region
    return region.model_copy(update={key: InsulatedRim(kind="insulated")})
