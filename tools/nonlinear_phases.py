"""Where a Newton solve's time goes, phase by phase, on any backend (issue 45's GPU figures).

    python tools/nonlinear_phases.py N [--backend cupy] [--out DIR]

Runs tools/nonlinear_bench.py's plate (k(T), a radiating and convecting top side) at N x N once, and times each of
Newton's phases with the device synchronised before and after it (so a phase's time is its kernels', not the time of
whichever call waits for them): the linearisation (the fused sweeps, and the levels' diagonal rebuilt: set_sigma
beside it), the Jacobian products, the preconditioner's cycles, the residuals, the line search and the norms.
Inclusive times (set_sigma is inside the linearisation); GMRES's own work is its solve less its products and cycles.
The synchronisations cost a little: the solve here is slower than the bench's, which has none.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nonlinear_bench  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("--backend", default="numba")
    ap.add_argument("--out", default="/tmp/stencil-nonlin-phases")
    a = ap.parse_args()
    from solver.case import validate_case
    from solver.parallel.comm import Comm
    from solver.run import Options, Run

    c = validate_case(nonlinear_bench.case_data(a.n, a.backend, a.out, False))
    r = nonlinear_bench.prepared(Run(c, Comm(), Options(ceiling=False, quiet=True, overwrite=True)))
    sync = r.backend.synchronize
    spent, calls = defaultdict(float), defaultdict(int)

    def wrap(obj, name, label):
        orig = getattr(obj, name)

        def timed(*args, **kwargs):
            sync()
            t = time.perf_counter()
            out = orig(*args, **kwargs)
            sync()
            spent[label] += time.perf_counter() - t
            calls[label] += 1
            return out

        setattr(obj, name, timed)

    newton = r.mg
    for name in ("_linearise", "_apply", "_precondition", "_residual", "_search", "residual_norm", "_dot"):
        wrap(newton, name, name.lstrip("_"))
    wrap(newton.mg, "set_sigma", "set_sigma (in linearise)")
    wrap(newton.gmres, "solve", "gmres.solve (all)")
    wrap(newton, "cycle", "newton iteration (all)")
    rec = r.execute()
    rows = {k: {"s": round(v, 4), "calls": calls[k]} for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}
    print(json.dumps({"n": a.n, "backend": a.backend, "solve_s": rec["times"]["solve"],
                      "iterations": rec["solver"]["iterations"], "phases": rows}, indent=1))


if __name__ == "__main__":
    main()
