"""The reference: vectorised numpy, one array expression per update, the term order of physics.py."""

from __future__ import annotations

from . import Backend, register


@register
class NumpyBackend(Backend):
    name = "numpy"
    summary = "vectorised numpy reference (one thread)"

    def __init__(self, settings, dtype: str, threads: int = 1, **node):
        super().__init__(settings, dtype, 1, **node)

    def step(self, out, u, w, region) -> None:
        r0, r1, c0, c1 = region
        out[r0:r1, c0:c1] = (
            w.wc * u[r0:r1, c0:c1]
            + w.wx * (u[r0:r1, c0 - 1:c1 - 1] + u[r0:r1, c0 + 1:c1 + 1])
            + w.wy * (u[r0 - 1:r1 - 1, c0:c1] + u[r0 + 1:r1 + 1, c0:c1])
        )
