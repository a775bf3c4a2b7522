"""A/B in one process: 2048^2 float64 through stencil run, check every 400, the check batch in the residual's
module (finite_checks forced off) against the fast module (as committed); alternated, 4 runs each."""
import json, os, sys
import numpy as np
from solver.backends.cupy_backend import CupyBackend
from solver.bench.gpu import run_record

out = {"resid_module": [], "fast_module": []}
for i in range(4):
    for name in out:
        if name == "resid_module":
            CupyBackend.finite_checks = property(lambda s: False, lambda s, v: None)
        elif isinstance(CupyBackend.__dict__.get("finite_checks"), property):
            del CupyBackend.finite_checks
        r = run_record(2048, "float64", 2400)
        out[name].append(r["x_copy"])
        print(name, round(r["x_copy"], 3), round(r["seconds_per_step"] * 1e6, 3), flush=True)
print(json.dumps({k: {"runs": v, "median": float(np.median(v))} for k, v in out.items()}))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "ab.json"), "w"))
