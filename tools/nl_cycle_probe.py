"""Issue 45: the linear solve's multigrid cycle against Newton's preconditioner cycle on one backend:
each hierarchy's facts (graphs, tiles, plain levels, coefficient fields, fills) and a cycle's time (median of 9, the
device synchronised around each).

    python tools/nl_cycle_probe.py N BACKEND
"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nonlinear_bench  # noqa: E402

from solver.case import validate_case  # noqa: E402
from solver.multigrid.cycle import _plain  # noqa: E402
from solver.parallel.comm import Comm  # noqa: E402
from solver.run import Options, Run  # noqa: E402


def main() -> None:
    n, backend = int(sys.argv[1]), sys.argv[2]
    out = {}
    for linear in (True, False):
        c = validate_case(nonlinear_bench.case_data(n, backend, f"/tmp/cycprobe{linear}", linear))
        r = nonlinear_bench.prepared(Run(c, Comm(), Options(ceiling=False, quiet=True, overwrite=True)))
        mg = r.mg if linear else r.mg.mg
        facts = [{"plain": bool(_plain(g)), "fields": bool(g.w.fields), "fill_rules": bool(g.fill.rules),
                  "fill_const": bool(getattr(g.fill, "constant", True)), "pre": len(g.pre), "post": len(g.post)}
                 for g in mg.grids[:3]]
        info = {"graphs": mg.graphs is not None, "tiles": getattr(mg, "tiles", None), "opdep": getattr(mg, "opdep", None),
                "levels": len(mg.grids), "first": facts}
        if linear:
            def f():
                mg.cycle(r.timer)
        else:
            nt = r.mg
            nt.residual_norm(r.timer)
            nt._linearise(mg.grids[0].u, r.timer, nt.kappa_R)

            def f():
                nt._precondition(nt.v, nt.R, r.timer)
        f()
        r.backend.synchronize()
        ts = []
        for _ in range(9):
            t = time.perf_counter()
            f()
            r.backend.synchronize()
            ts.append(time.perf_counter() - t)
        info["cycle_ms"] = sorted(ts)[4] * 1e3
        out["linear" if linear else "newton"] = info
    print(json.dumps(out))


if __name__ == "__main__":
    main()
