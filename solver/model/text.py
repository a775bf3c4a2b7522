"""What `stencil model` prints: the prediction with its parts and provenance, or the validation table."""

from __future__ import annotations

PART_NAMES = {"compute": "compute", "halo": "halo messages", "waiting": "waiting", "collective": "collective checks"}


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms"


def prediction_lines(res: dict) -> list[str]:
    p = res["problem"]
    t = res["seconds_per_step"]
    where = (f"{res['ranks']} rank(s) on {res['nodes']} node(s) x {res['per_node']} per node"
             f"{', one GPU per rank' if res['gpus'] else ', one thread per rank'}")
    lines = [f"stencil model: {p['name']} (nx x ny = {p['nx']} x {p['ny']}, {p['dtype']}, halo {p['halo']}), {where}",
             f"decomposition {res['dims'][0]} x {res['dims'][1]} ({p['decomposition']}), largest block nx x ny = "
             f"{res['block'][1]} x {res['block'][0]}; time tile {res['time_tile']} ({res['tile_source']}), halo depth "
             f"{res['halo_depth']}",
             f"predicted {ms(t)} per step ({p['ny'] * p['nx'] / t / 1e6:.0f} MLUP/s); Monte Carlo over {res['draws']} "
             f"draws of the measured speed spread: {ms(res['spread_over_draws'][0])}-{ms(res['spread_over_draws'][1])}"]
    lines += [f"  {PART_NAMES[k]:18s} {ms(v):>12s}  {v / t:6.1%}" for k, v in res["parts"].items()]
    if res.get("output_per_step") is not None:
        lines.append(f"  {'output (apart)':18s} {ms(res['output_per_step']):>12s}  per step: snapshots gathered to "
                     "rank 0 and written (runs time them apart from the step)")
    lines += ["inputs:"] + [f"  measured: {x}" for x in res["inputs"]]
    lines.append(f"  {res['network_line']}")
    return lines


def validation_lines(res: dict) -> list[str]:
    lines = [f"model validation: {res['kind']} sweep of {res['case']} ({res['dir']})",
             f"{'ranks':>5} {'measured ms':>12} {'predicted ms':>13} {'error':>8}   predicted parts (compute/halo/"
             "waiting/collective, ms)"]
    for r in res["rows"]:
        parts = "/".join(f"{r.get('predicted_' + k, 0) * 1e3:.3g}" for k in PART_NAMES)
        lines.append(f"{r['ranks']:>5} {r['seconds_per_step'] * 1e3:>12.4g} {r['predicted_seconds_per_step'] * 1e3:>13.4g} "
                     f"{r['model_error']:>+8.1%}   {parts}")
    lines.append(res["summary"])
    return lines
