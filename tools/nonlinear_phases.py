"""Where a Newton solve's time goes, phase by phase, on any backend (issue 45's GPU figures).

    python tools/nonlinear_phases.py N [--backend cupy] [--out DIR] [--fine]

Runs tools/nonlinear_bench.py's plate (k(T), a radiating and convecting top side) at N x N once, and times each of
Newton's phases with the device synchronised before and after it (so a phase's time is its kernels', not the time of
whichever call waits for them): the linearisation (the fused sweeps, and the levels' diagonal rebuilt: set_sigma
beside it), the Jacobian products, the preconditioner's cycles, the residuals, the line search and the norms.
Inclusive times (set_sigma is inside the linearisation), with each phase's first call and its median call in ms (a
first call far above the median compiles something inside the timed solve); GMRES's own work is its solve less its
products and cycles.
The synchronisations cost a little: the solve here is slower than the bench's, which has none. --fine adds the
pieces inside the phases (the operator's kappa, films, trial, residual and linearisation; the fused kernels; the
multigrid's cycle), each inclusive.
"""

from __future__ import annotations

import argparse
import json
import statistics
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
    ap.add_argument("--fine", action="store_true", help="also the operator's pieces, the fused kernels and the films")
    a = ap.parse_args()
    from solver.case import validate_case
    from solver.parallel.comm import Comm
    from solver.run import Options, Run

    c = validate_case(nonlinear_bench.case_data(a.n, a.backend, a.out, False))
    r = nonlinear_bench.prepared(Run(c, Comm(), Options(ceiling=False, quiet=True, overwrite=True)))
    sync = r.backend.synchronize
    spent, calls, each = defaultdict(float), defaultdict(int), defaultdict(list)

    def wrap(obj, name, label):
        orig = getattr(obj, name)

        def timed(*args, **kwargs):
            sync()
            t = time.perf_counter()
            out = orig(*args, **kwargs)
            sync()
            dt = time.perf_counter() - t
            spent[label] += dt
            calls[label] += 1
            each[label].append(dt)
            return out

        setattr(obj, name, timed)

    newton = r.mg
    for name in ("_linearise", "_apply", "_precondition", "_residual", "_search", "residual_norm", "_dot", "scale"):
        wrap(newton, name, name.lstrip("_"))
    wrap(newton.mg, "set_sigma", "set_sigma (in linearise)")
    wrap(newton.gmres, "solve", "gmres.solve (all)")
    wrap(newton, "cycle", "newton iteration (all)")
    if a.fine:  # inside the phases: the operator's pieces, the fused kernels, the cycle and the host's films
        op = newton.op
        for name in ("kappa", "_film", "_face_loss", "trial", "sigma", "moved", "unscale", "residual", "linearise",
                     "apply", "largest_term"):
            wrap(op, name, f"op.{name.lstrip('_')}")
        fused = r.backend.nonlinear_kernels(op.owned)
        if fused is not None:
            for name in ("residual", "faces", "diagonal", "apply", "power"):
                if hasattr(fused, name):
                    wrap(fused, name, f"fused.{name}")
        wrap(newton.mg, "precondition", "mg.precondition")
        for name in ("max_abs",):  # (not fill: a synchronisation inside a cycle graph's capture fails it, and the
            # cycles would then run verb by verb, which is not what the solve runs)
            wrap(r.backend, name, f"backend.{name}")
    rec = r.execute()
    rows = {k: {"s": round(v, 4), "calls": calls[k], "first_ms": round(1e3 * each[k][0], 3),
                "median_ms": round(1e3 * statistics.median(each[k]), 3)}
            for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}
    print(json.dumps({"n": a.n, "backend": a.backend, "solve_s": rec["times"]["solve"],
                      "iterations": rec["solver"]["iterations"], "phases": rows}, indent=1))


if __name__ == "__main__":
    main()
