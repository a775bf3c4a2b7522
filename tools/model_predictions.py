"""The scaling model's predictions for docs/scaling_model.md: weak and strong scaling to 4,096 nodes on the
network presets (CPU nodes like the measured one, and one GPU per rank), the time tile that pays for a
latency, and where strong scaling stops.

    python tools/model_predictions.py --inputs docs/bench/2026-12-01-model-h200/inputs.json [--out DIR] [--quick]

Every figure comes from solver.model.predict with the measured inputs of --inputs (the GPU machine's 16
cores and its H200) and a preset network; nothing here is measured. Writes DIR/predictions.md and
DIR/predictions.json (default docs/bench/2026-12-01-model-h200/) and docs/img/model_weak.png, model_strong.png.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from solver.case import load_case
from solver.model import network
from solver.model.inputs import Inputs
from solver.model.predict import predict
from solver.model.problem import Placement, Problem

ROOT = Path(__file__).resolve().parent.parent
PRESETS = ("infiniband-ndr", "infiniband-hdr", "slingshot", "ethernet-100g", "ethernet-25g", "ethernet-10g")
NODES = (1, 4, 16, 64, 256, 1024, 4096)
GPUS_PER_NODE = 4


def problem(n: int, ny_over_nx: float = 1.0, **over) -> Problem:
    """cases/heat_4096.yaml (float32, overlap, default time tile) on an n x n grid, cart decomposition."""
    data = load_case(ROOT / "cases" / "heat_4096.yaml", {"--decomposition": "cart"}).model_dump(mode="json")
    data["grid"].update(nx=n, ny=int(n * ny_over_nx))
    data["parallel"]["decomposition"] = "cart"
    p = Problem.from_case(data)
    return Problem(**{**p.__dict__, **over})


def weak(gpus: bool, inputs, net, nodes: int) -> dict:
    """Per rank 1024^2 (CPU) or 16384^2 (GPU), the process grid as square as the rank count allows."""
    per = GPUS_PER_NODE if gpus else inputs.node_ranks()
    ranks = nodes * per
    side = 16384 if gpus else 1024
    py = max(d for d in range(1, int(ranks ** 0.5) + 1) if ranks % d == 0)
    px = ranks // py
    p = problem(side * px, py / px, dims=(py, px), backend="cupy" if gpus else "numba")
    return predict(p, Placement(ranks, per, gpus), inputs, net, draws=3)


def strong(gpus: bool, inputs, net, nodes: int, side: int) -> dict:
    per = GPUS_PER_NODE if gpus else inputs.node_ranks()
    return predict(problem(side, backend="cupy" if gpus else "numba"), Placement(nodes * per, per, gpus), inputs, net,
                   draws=3)


def table(rows: list[dict], kind: str) -> list[str]:
    """Efficiency per node count (rows) and preset (columns)."""
    lines = ["| nodes | ranks | " + " | ".join(PRESETS) + " |", "|---|---|" + "---|" * len(PRESETS)]
    for n in sorted({r["nodes"] for r in rows}):
        here = {r["preset"]: r for r in rows if r["nodes"] == n}
        first = next(iter(here.values()))
        cells = [f"{here[p]['efficiency']:.0%} ({here[p]['seconds_per_step'] * 1e3:.3g} ms)" if p in here else "-"
                 for p in PRESETS]
        lines.append(f"| {n} | {first['ranks']} | " + " | ".join(cells) + " |")
    return lines


def scaling(kind: str, gpus: bool, inputs, nodes, side: int | None = None) -> list[dict]:
    rows = []
    for preset in PRESETS:
        net = network.load(preset)
        base = None
        for n in nodes:
            res = weak(gpus, inputs, net, n) if kind == "weak" else strong(gpus, inputs, net, n, side)
            base = base or res
            eff = (base["seconds_per_step"] / res["seconds_per_step"] if kind == "weak" else
                   base["seconds_per_step"] * base["ranks"] / (res["seconds_per_step"] * res["ranks"]))
            dominant = max(res["parts"], key=res["parts"].get)
            rows.append({"preset": preset, "nodes": n, "ranks": res["ranks"], "seconds_per_step": res["seconds_per_step"],
                         "efficiency": eff, "parts": res["parts"], "dominant": dominant, "block": res["block"],
                         "time_tile": res["time_tile"]})
            print(f"{kind} {'gpu' if gpus else 'cpu'} {preset} {n}: {res['seconds_per_step'] * 1e3:.4g} ms, {eff:.0%}, "
                  f"{dominant}", flush=True)
    return rows


def tile_vs_latency(inputs) -> list[dict]:
    """Strong 16384^2 on 64 CPU nodes (blocks 128 x 256... as cart gives), latencies 1-100 us at 24 GB/s, k 1-8."""
    out = []
    for lat in (1, 5, 25, 100):
        net = network.Network(f"{lat} us", lat * 1e-6, 24e9, "assumed")
        for halo in ("nonblocking", "overlap"):
            for k in (1, 2, 4, 8):
                p = problem(16384, time_tile=k, halo=halo)
                res = predict(p, Placement(64 * inputs.node_ranks(), inputs.node_ranks()), inputs, net, draws=3)
                out.append({"latency_us": lat, "halo": halo, "k": k, "seconds_per_step": res["seconds_per_step"],
                            "block": res["block"], "parts": res["parts"]})
                print(f"latency {lat} us {halo} k={k}: {res['seconds_per_step'] * 1e3:.4g} ms", flush=True)
    return out


def plot(rows: list[dict], kind: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, gpus in zip(axes, (False, True)):
        for preset in PRESETS:
            pts = [r for r in rows if r["preset"] == preset and r["gpus"] == gpus]
            ax.plot([r["nodes"] for r in pts], [r["efficiency"] for r in pts], "o-", label=preset)
        ax.set_xscale("log", base=4)
        ax.set(title=f"{kind} scaling, {'one GPU per rank, 4 per node' if gpus else 'CPU nodes, 16 ranks each'}",
               xlabel="nodes", ylabel="predicted parallel efficiency", ylim=(0, 1.1))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("stencil model (inputs measured on the GPU machine, networks from presets)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=Path, default=ROOT / "docs/bench/2026-12-01-model-h200/inputs.json")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/bench/2026-12-01-model-h200")
    ap.add_argument("--quick", action="store_true", help="nodes 1, 16, 256 only")
    args = ap.parse_args()
    inputs = Inputs.from_file(args.inputs)
    nodes = (1, 16, 256) if args.quick else NODES
    t = time.time()
    res = {"inputs": inputs.describe(), "date": time.strftime("%Y-%m-%d %H:%M"), "weak": [], "strong": []}
    for gpus in (False, True):
        res["weak"] += [{**r, "gpus": gpus} for r in scaling("weak", gpus, inputs, nodes)]
        res["strong"] += [{**r, "gpus": gpus} for r in scaling("strong", gpus, inputs, nodes, 16384 if not gpus else 65536)]
    res["tile_vs_latency"] = tile_vs_latency(inputs)
    (args.out / "predictions.json").write_text(json.dumps(res, indent=1))
    md = [f"# Predictions ({res['date']}, {time.time() - t:.0f} s)", "", *[f"- {x}" for x in res["inputs"]], ""]
    for kind in ("weak", "strong"):
        for gpus in (False, True):
            md += [f"## {kind}, {'GPU' if gpus else 'CPU'}", ""] + table([r for r in res[kind] if r["gpus"] == gpus], kind) + [""]
    (args.out / "predictions.md").write_text("\n".join(md) + "\n")
    plot(res["weak"], "weak", ROOT / "docs/img/model_weak.png")
    plot(res["strong"], "strong", ROOT / "docs/img/model_strong.png")
    print("\n".join(md))


if __name__ == "__main__":
    main()
