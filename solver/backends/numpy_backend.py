"""The reference: vectorised numpy, one array expression per update, the term order of physics.py."""

from __future__ import annotations

from ..core.physics import update
from . import Backend, register


@register
class NumpyBackend(Backend):
    name = "numpy"
    summary = "vectorised numpy reference (one thread)"

    def __init__(self, settings, dtype: str, threads: int = 1, **node):
        super().__init__(settings, dtype, 1, **node)

    def step(self, out, u, w, region) -> None:
        update(out, u, w, region)  # the constant form (+ s), the flux form, or the Jacobi form (solver.core.physics)
