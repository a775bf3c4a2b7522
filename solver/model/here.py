"""`stencil model CASE`: the inputs for a prediction (cached, measured when missing, or a file), then the prediction."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..core.errors import InputError
from . import calibrate, network as networks
from .inputs import Inputs
from .predict import gpu_needs, kernel_needs, pattern, predict, tile_depth
from .problem import Placement, Problem, blocks

DEFAULT_NETWORK = "infiniband-hdr"


def inputs_here(problem: Problem, place: Placement, cores: int, launcher: list[str] | None, refresh: bool,
                say=None) -> Inputs:
    """This machine's cached inputs for the problem's dtype and halo mode, after measuring what the
    prediction needs and the cache lacks (one probe launch with up to `cores` ranks on this machine)."""
    from ..bench.model_probe import here_key, load_entry, missing_kernels, needs_messages

    if place.per_node > cores:
        raise InputError(f"--ranks-per-node: {place.per_node} ranks per node would oversubscribe the {cores} cores "
                         f"here, where the model's inputs are measured; use at most {cores}, or pass --inputs FILE "
                         "measured on a larger node")
    key = here_key(problem.dtype, problem.halo)
    entry = None if refresh else load_entry(key)
    occ = min(place.per_node, place.ranks)
    launch = min(max(occ, 2), cores)
    shapes, tiles, gpu = _needs(problem, place, entry, key)
    want = [(occ, ny, nx, k, pattern(place)) for ny, nx in shapes for k in tiles]
    if refresh or missing_kernels(entry, want) or needs_messages(entry, {"ranks": launch, "per_node": launch,
                                                                          "nodes": 1}) or _missing_gpu(entry, gpu):
        return calibrate.measure(launcher or calibrate.launcher(), launch, problem.dtype, problem.halo,
                                 gpu_shapes=gpu, refresh=refresh, say=say, points=want)
    return Inputs(entry, "cached")


def _needs(problem: Problem, place: Placement, entry, key: str):
    """(CPU shapes, tiles, GPU shapes) to measure."""
    if place.gpus:
        return [], [1], gpu_needs(problem, place)
    k, _ = tile_depth(problem, blocks(problem, place.ranks), place, None)
    shapes, tiles = kernel_needs(problem, place, k)
    return shapes, tiles, []


def _missing_gpu(entry, shapes) -> bool:
    have = {(p["ny"], p["nx"]) for p in (entry or {}).get("gpu", [])}
    return any(s not in have for s in shapes)


def choose_network(spec: str | None, place: Placement, inputs: Inputs) -> tuple[networks.Network | None, str]:
    """(network, how it was chosen); None on one node."""
    if place.nodes <= 1 and spec is None:
        return None, "one node: no network"
    if spec is None:
        spec = networks.MEASURED if inputs.inter_table() else DEFAULT_NETWORK
        how = "measured between two nodes here" if spec == networks.MEASURED else "preset (the default; --network to choose)"
    else:
        how = "measured between two nodes here" if spec == networks.MEASURED else "preset" if (
            networks.PRESETS / f"{spec}.yaml").exists() else "file"
    return networks.load(spec, inputs.inter_table()), how


def decomposable(problem: Problem, ranks: int) -> tuple[Problem, str | None]:
    """The problem, or with decomposition cart where rows cannot give every rank a row (and why)."""
    try:
        blocks(problem, ranks)
        return problem, None
    except InputError as exc:
        if problem.decomposition != "rows":
            raise
        why = (f"rows cannot split {problem.ny} rows over {ranks} ranks ({exc}); predicted with decomposition cart: "
               "set parallel.decomposition: cart to run it")
        return replace(problem, decomposition="cart", dims=None), why


def model_case(problem: Problem, place: Placement, cores: int, *, network: str | None = None,
               inputs_file: Path | None = None, launcher: list[str] | None = None, refresh: bool = False,
               say=None) -> dict:
    """The prediction with its provenance: which inputs were measured here (and when), which came from a preset."""
    problem, note = decomposable(problem, place.ranks)
    if note and say:
        say(f"note: {note}")
    inputs = Inputs.from_file(inputs_file) if inputs_file else inputs_here(problem, place, cores, launcher, refresh, say)
    net, how = choose_network(network, place, inputs)
    res = predict(problem, place, inputs, net)
    res["inputs"] = inputs.describe()
    res["network_line"] = (f"network between nodes: {net.name} ({how}): latency {net.latency * 1e6:.3g} us, "
                           f"{net.bandwidth / 1e9:.3g} GB/s; source: {net.source}") if net else how
    res["problem"] = problem.__dict__
    return res
