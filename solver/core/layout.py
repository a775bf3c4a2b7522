"""The layout of one run as plain data: what every part below run.py reads instead of the driver.

Fixed for the run: the validated case, the time step and spacing, the weights in the run's dtype,
the process grid, where this rank sits on its node, its threads, the output directory and whether
VTK is written. Changing: the blocks of every rank. `Layout` is the one owner of the current
decomposition: dynamic balancing (solver.parallel.balance) changes it with `move()`, and the loop,
the exchanger factory and the outputs read `layout.block` / `layout.blocks` from here each time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .decomp import Block


@dataclass
class Layout:
    case: object  # solver.case.Case (validated)
    dt: float
    spacing: tuple[float, float]  # (dx, dy)
    w: object  # solver.core.physics.Weights in the run's dtype
    dims: tuple[int, int]  # (py, px)
    rank: int
    blocks: list[Block]
    outdir: Path
    threads: int = 1
    node_rank: int = 0
    node_size: int = 1
    vtk_on: bool = False
    resolved_yaml: str = ""  # case.yaml as written: the case with derived values (set once built)
    plan: object = None  # solver.core.events.Plan: the run's events and fixed steps (built from the case if not given)

    def __post_init__(self):
        if self.plan is None and self.case is not None:
            from .events import plan_of

            self.plan = plan_of(self.case)

    @property
    def block(self) -> Block:
        """This rank's block, as the decomposition stands now."""
        return self.blocks[self.rank]

    @property
    def size(self) -> int:
        return len(self.blocks)

    def move(self, blocks: list[Block]) -> None:
        """The one place the decomposition changes (parallel.balance)."""
        self.blocks = list(blocks)
