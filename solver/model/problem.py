"""What the model predicts for, as plain data: the case's run (Problem) and where its ranks sit (Placement)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.decomp import Block, all_blocks, choose_dims
from ..core.errors import InputError
from ..core.limits import MAX_RANKS


@dataclass(frozen=True)
class Problem:
    """The parts of a validated case (its model_dump, or a record's "case") that set the time per step."""

    name: str
    ny: int
    nx: int
    dtype: str
    steps: int
    warmup: int
    check_every: int
    output_every: int | None
    checkpoint_every: int | None
    decomposition: str
    dims: tuple[int, int] | None
    halo: str
    balance: str
    balance_every: int
    backend: str
    time_tile: int | None
    constant_ghosts: bool  # every side Dirichlet: time tiles possible
    periodic: tuple[bool, bool]
    equation: str = "heat"
    method: str = "explicit"  # physics.scheme for heat, physics.solver for laplace ("jacobi" is a plain step)
    lines: bool = True  # progress lines shown (not --quiet): polls at least every 10% of the steps (core.loop)

    @classmethod
    def from_case(cls, data: dict) -> Problem:
        from ..core.boundary import raw_kinds

        g, r, p, b, o = data["grid"], data["run"], data["parallel"], data["backend"], data["output"]
        kinds = raw_kinds(data, "x") + raw_kinds(data, "y")
        return cls(name=data.get("name") or "case", ny=g["ny"], nx=g["nx"], dtype=data["numerics"]["dtype"],
                   steps=r["steps"], warmup=r.get("warmup", 1), check_every=r["check_every"],
                   output_every=o.get("every"), checkpoint_every=o.get("checkpoint_every"),
                   decomposition=p["decomposition"], dims=tuple(p["dims"]) if p.get("dims") else None,
                   halo=p["halo"], balance=p.get("balance", "none"), balance_every=p.get("balance_every", 50),
                   backend=b["name"], time_tile=b.get("time_tile"),
                   constant_ghosts=all(k == "dirichlet" for k in kinds),
                   periodic=(raw_kinds(data, "y")[0] == "periodic", raw_kinds(data, "x")[0] == "periodic"),
                   equation=data["physics"].get("equation", "heat"),
                   method=(data["physics"].get("scheme", "explicit") if data["physics"].get("equation", "heat") == "heat"
                           else data["physics"].get("solver", "jacobi")))

    def outside(self) -> str | None:
        """Why the model cannot predict this case (None: it can): it models the explicit 5-point step."""
        if self.method not in ("explicit", "jacobi"):
            what = "physics.scheme" if self.equation == "heat" else "physics.solver"
            return (f"{what}: {self.method} is outside the model, which times explicit steps and Jacobi sweeps "
                    f"(one stencil update per step); use {'scheme: explicit' if self.equation == 'heat' else 'solver: jacobi'}"
                    " to predict, or measure it with stencil sweep")
        return None

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Placement:
    """ranks in blocks of per_node consecutive ranks per node (rank r on node r // per_node), one thread
    each; gpus: one GPU per rank."""

    ranks: int
    per_node: int
    gpus: bool = False

    @property
    def nodes(self) -> int:
        return -(-self.ranks // self.per_node)

    def node_of(self, rank) -> np.ndarray:
        return np.asarray(rank) // self.per_node


def placement(ranks: int | None, nodes: int | None, per_node: int | None, cores: int, gpus: bool) -> Placement:
    """From the command line: --ranks alone fills nodes of `cores` ranks (one GPU each with --gpus);
    --nodes with --ranks-per-node (default: cores here, or 1 with --gpus) gives ranks = nodes x per node."""
    default = 1 if gpus else cores
    if nodes is not None:
        per = per_node or (ranks // nodes if ranks else default)
        total = ranks or nodes * per
        if total != nodes * per and ranks is not None and per_node is not None:
            raise InputError(f"--ranks: {ranks} is not --nodes {nodes} x --ranks-per-node {per_node}; give two of them")
    else:
        total = ranks or 1
        per = per_node or min(total, default)
    if total > MAX_RANKS:
        given = "--ranks" if ranks else f"--nodes {nodes} x {per} ranks per node"
        raise InputError(f"{given}: {total} ranks, but the model predicts at most {MAX_RANKS} (it simulates every rank, "
                         f"and answers within seconds up to there); use at most {MAX_RANKS} ranks")
    return Placement(total, max(per, 1), gpus)


def blocks(problem: Problem, ranks: int) -> list[Block]:
    dims = choose_dims(ranks, (problem.ny, problem.nx), problem.decomposition, list(problem.dims) if problem.dims
                       and problem.dims[0] * problem.dims[1] == ranks else None)
    return all_blocks((problem.ny, problem.nx), dims, problem.periodic)
