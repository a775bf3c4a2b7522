"""Predicted seconds per step and its parts for a problem on a placement, from measured inputs and a network.

    compute     the kernel on each rank's block (measured rate for that shape, time tile and occupancy)
    halo        the CPU cost of exchanging halos (the measured exchanger; GPU: plus staging to the host)
    waiting     blocked for a neighbour's message or for the slowest rank at a collective (simulated:
                solver.model.simulate, from the measured per-rank speed spread and the message times)
    collective  the checks: the local reduction and one MPI_Allreduce every check_every steps
    output      snapshots (gather to rank 0 and write), reported apart: runs time them apart too

The seconds per step is that of the slowest rank over the timed steps (the record's definition),
median over Monte Carlo draws of where the measured spread falls (DRAWS).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from . import schedule
from .problem import Placement, Problem, blocks
from .simulate import Ranks, Side, simulate

DRAWS = 5
MAX_SIM_STEPS = 400  # simulate at most this many steps (several checks); the schedule repeats beyond
MAX_SIM_RANKS_STEPS = 4e7  # ranks x steps above this: fewer steps (at least two checks) and draws


def tile_depth(problem: Problem, blks, place: Placement, inputs) -> tuple[int, str]:
    """(steps per tile, where k came from): as the run chooses it (solver.run, parallel.deep)."""
    from ..bench.model_probe import depth_cap, solver_tile

    if not problem.constant_ghosts or problem.backend == "numpy":
        return 1, "no time tiles (a side is not Dirichlet, or numpy)" if problem.backend != "numpy" else "numpy: none"
    if place.gpus:
        k = int(inputs.gpu_point(blks[0].ny, blks[0].nx).get("time_tile", 1))
        src = "the GPU kernel measured at the nearest size"
    else:
        rows = min(b.ny for b in blks)
        k, src = solver_tile(problem.dtype, rows, problem.time_tile)
    return (depth_cap(k, blks) if place.ranks > 1 else k), src


def bracket(n: int) -> list[int]:
    """The powers of two around n (n itself when it is one)."""
    lo = 1 << max(1, n.bit_length() - 1)
    return sorted({lo, lo * 2 if lo < n else lo})


def pattern(place: Placement) -> str:
    """How a rank calls the kernel: one process on its whole field, or around a halo exchange."""
    return "serial" if place.ranks == 1 else "halo"


def kernel_needs(problem: Problem, place: Placement, k: int) -> tuple[list[tuple[int, int]], list[int]]:
    """(shapes, tiles) the kernel must be measured at for this prediction: powers of two around every
    distinct block shape (at most 2^24 points: larger blocks take the largest rate), time tiles 1 and k."""
    shapes = set()
    for b in {(b.ny, b.nx) for b in blocks(problem, place.ranks)}:
        for ny in bracket(b[0]):
            for nx in bracket(b[1]):
                while ny * nx > 1 << 24 and ny > 2:
                    ny //= 2
                shapes.add((ny, nx))
    return sorted(shapes), sorted({1, k})


def gpu_needs(problem: Problem, place: Placement) -> list[tuple[int, int]]:
    """Square GPU sizes (powers of two) around each distinct block's number of points: the GPU's time per
    step is interpolated by points (solver.model.inputs.gpu_step)."""
    sides = {math.isqrt(b.ny * b.nx) for b in blocks(problem, place.ranks)}
    return sorted({(n, n) for s in sides for n in bracket(max(s, 2))})


def predict(problem: Problem, place: Placement, inputs, network, draws: int = DRAWS, seed: int = 0) -> dict:
    blks = blocks(problem, place.ranks)
    k, k_source = tile_depth(problem, blks, place, inputs)
    steps, draws = _sim_steps(problem, place, draws)
    dynamic = problem.balance == "dynamic" and problem.decomposition == "rows" and place.ranks > 1
    runs = schedule.batches(problem, k, serial=place.ranks == 1, balance=dynamic, steps=steps)
    timed = steps - problem.warmup
    depths = sorted({d for b in runs for d in b.depths})
    rng = np.random.default_rng(seed)
    costs = ranks_costs(problem, place, inputs, network, blks, depths, dynamic)
    results = [simulate(replace(costs, factors=draw_factors(inputs, place, blks, depths, rng)), runs, rng)
               for _ in range(draws)]
    per_step = [r["t"].max() / timed for r in results]
    pick = results[int(np.argsort(per_step)[len(per_step) // 2])]
    total = float(np.median(per_step))
    parts = {name: float(pick[name].mean()) / timed for name in ("compute", "halo", "collective")}
    parts["waiting"] = (float(pick["wait"].mean()) / timed if place.gpus and problem.halo == "overlap"
                        else max(total - sum(parts.values()), 0.0))  # GPU overlap: halo hides behind compute
    out = output_seconds(problem, place, inputs, network)
    return {"seconds_per_step": total, "parts": parts, "output_per_step": out, "time_tile": k, "tile_source": k_source,
            "halo_depth": k if place.ranks > 1 else 1, "dims": [blks[-1].dims[0], blks[-1].dims[1]],
            "block": [max(b.ny for b in blks), max(b.nx for b in blks)], "ranks": place.ranks, "nodes": place.nodes,
            "per_node": place.per_node, "gpus": place.gpus, "simulated_steps": steps, "draws": draws,
            "spread_over_draws": [float(min(per_step)), float(max(per_step))],
            "network": network.name if network and place.nodes > 1 else None}


def _sim_steps(problem: Problem, place: Placement, draws: int) -> tuple[int, int]:
    steps = min(problem.steps, max(MAX_SIM_STEPS, problem.warmup + 1))
    if place.ranks * steps > MAX_SIM_RANKS_STEPS:
        steps = max(problem.warmup + 2 * problem.check_every, int(MAX_SIM_RANKS_STEPS // place.ranks))
        steps = min(steps, problem.steps)
        draws = min(draws, 3)
    return steps, draws


def per_unique(keys: list, fn) -> np.ndarray:
    """[fn(key) for key in keys], calling fn once per distinct key (blocks come in a few shapes)."""
    done: dict = {}
    return np.array([done[k] if k in done else done.setdefault(k, fn(k)) for k in keys], dtype=float)


def ranks_costs(problem: Problem, place: Placement, inputs, network, blks, depths, dynamic: bool) -> Ranks:
    """Everything but the speed factors (drawn per Monte Carlo draw: draw_factors)."""
    occ = min(place.per_node, place.ranks)
    shapes = [(b.ny, b.nx) for b in blks]
    kinds = [(b.ny, b.nx, tuple(v is not None for v in b.neighbours.values())) for b in blks]
    by_kind = {key: b for key, b in zip(kinds, blks)}
    tile, inner, comm = {}, {}, {}
    for d in depths:
        tile[d] = per_unique(shapes, lambda s: inputs.gpu_step(*s) * d if place.gpus
                             else inputs.tile_seconds(*s, d, occ, pattern(place)))
        inner[d] = per_unique(kinds, lambda key: _inner_share(by_kind[key], d))
        comm[d] = per_unique(kinds, lambda key: _comm(inputs, place, by_kind[key], d, problem.itemsize))
    check = per_unique(shapes, lambda s: inputs.gpu_check(*s) if place.gpus else inputs.check_seconds(*s, occ))
    sides = _sides(problem, place, inputs, network, blks, depths)
    return Ranks(tile, inner, {}, comm, check, sides, inputs.allreduce(place.ranks, place.per_node, network),
                 problem.halo == "overlap", np.array([b.ny for b in blks]) if dynamic else None, place.gpus)


def draw_factors(inputs, place: Placement, blks, depths, rng) -> dict:
    if place.gpus:
        return {d: np.ones((place.ranks, 1)) for d in depths}
    occ = min(place.per_node, place.ranks)
    return {d: _factors(inputs, place, blks, d, occ, rng) for d in depths}


def _inner_share(b, d: int) -> float:
    """Share of a tile's points that need no ghost: the block shrunk by d on each side with a neighbour."""
    n = b.neighbours
    ny = b.ny - d * ((n["south"] is not None) + (n["north"] is not None))
    nx = b.nx - d * ((n["west"] is not None) + (n["east"] is not None))
    return max(ny, 0) * max(nx, 0) / (b.ny * b.nx)


def _factors(inputs, place: Placement, blks, d: int, occ: int, rng) -> np.ndarray:
    """Each rank's speed factors: node n replays the measured ranks of measured node n mod H, in node-rank
    order on the first H nodes (as measured), shuffled on the others."""
    b = blks[0]
    pools = list(inputs.factors(b.ny, b.nx, d, occ, pattern(place)).values())
    t = min(f.shape[1] for f in pools)
    rows = []
    for n in range(place.nodes):
        pool = pools[n % len(pools)][:, :t]
        order = np.arange(len(pool)) if n < len(pools) else rng.permutation(len(pool))
        here = min(place.per_node, place.ranks - n * place.per_node)
        rows += [pool[order[i % len(pool)]] for i in range(here)]
    return np.array(rows)


def _comm(inputs, place: Placement, b, d: int, itemsize: int) -> float:
    """CPU seconds of one exchange of d layers: the measured exchanger (two sides) per side present;
    GPU ranks also stage each strip to and from the host."""
    cost = 0.0
    for side, nb in b.neighbours.items():
        if nb is None:
            continue
        nbytes = d * (b.nx if side in ("south", "north") else b.ny) * itemsize
        cost += inputs.exchange(nbytes) / 2 + (2 * inputs.gpu_stage(nbytes) if place.gpus else 0.0)
    return cost


def _sides(problem: Problem, place: Placement, inputs, network, blks, depths) -> list[Side]:
    node = place.node_of(np.arange(place.ranks))
    out = []
    for side in ("south", "north", "west", "east"):
        nb = np.array([-1 if b.neighbours[side] is None else b.neighbours[side] for b in blks])
        if (nb < 0).all():
            continue
        inter = (nb >= 0) & (node[np.maximum(nb, 0)] != node)
        sharing = _sharing(node, nb, inter)
        length = np.array([b.nx if side in ("south", "north") else b.ny for b in blks])
        msg = {}
        for d in depths:
            nbytes = d * length * problem.itemsize
            far = per_unique(list(zip(nbytes, sharing)), lambda k: network.seconds(*k) if network else 0.0)
            msg[d] = np.where(inter, far, per_unique(list(nbytes), inputs.intra))
        out.append(Side(nb, msg))
    return out


def _sharing(node: np.ndarray, nb: np.ndarray, inter: np.ndarray) -> np.ndarray:
    """Messages that leave each rank's node on this side at once (they share the node's bandwidth)."""
    counts = np.bincount(node[inter], minlength=node.max() + 1) if inter.any() else np.zeros(node.max() + 1)
    return np.maximum(counts[node], 1)


def output_seconds(problem: Problem, place: Placement, inputs, network) -> float | None:
    """Seconds per step of snapshots: gathering the field to rank 0, then writing it (h5py, at the measured
    write rate); VTK files are not counted. None without a measured write rate."""
    rate = inputs.write_rate()
    if not rate:
        return None
    nbytes = problem.ny * problem.nx * problem.itemsize
    snaps = 1 + (problem.steps // problem.output_every if problem.output_every else 1)
    gather = 0.0
    if place.ranks > 1:
        inside = min(place.per_node, place.ranks) / place.ranks
        gather = inputs.intra(nbytes * inside)
        if place.nodes > 1 and network:
            gather += network.seconds(nbytes * (1 - inside))
    return snaps * (gather + nbytes / rate) / problem.steps


def efficiency(base: float, other: float, n0: int, n: int, kind: str) -> float:
    """Parallel efficiency of `other` (n ranks) against `base` (n0): strong n0 T0 / (n T); weak T0 / T."""
    return base / other if kind == "weak" else n0 * base / (n * other)


def log2_counts(limit: int) -> list[int]:
    return [1 << i for i in range(int(math.log2(limit)) + 1)]
