"""Three layers (k 1, 20, 2) under u = X(x) sin(pi y), bottom and top held at 0: the material form beside the point-sampled one."""
import numpy as np
from solver import api
import tempfile
OUT = tempfile.mkdtemp(prefix="issue43-")
EDGES, KS = [0.0, 0.3137, 0.6712, 1.0], [1.0, 20.0, 2.0]
def profile(x):
    """X(x): k X'' = k pi^2 X in each layer, X(0) = 1, X'(0) = 0, X and k X' continuous."""
    x = np.asarray(x, dtype=float); out = np.empty_like(x)
    a, b = 1.0, 0.0   # X = a cosh(pi (x - x0)) + b sinh(pi (x - x0)) in the current layer
    for m, (x0, x1, k) in enumerate(zip(EDGES, EDGES[1:], KS)):
        sel = (x >= x0) & (x <= x1) if m == len(KS) - 1 else (x >= x0) & (x < x1)
        t = x[sel] - x0
        out[sel] = a * np.cosh(np.pi * t) + b * np.sinh(np.pi * t)
        if m + 1 < len(KS):
            t = x1 - x0
            X, dX = a * np.cosh(np.pi * t) + b * np.sinh(np.pi * t), np.pi * (a * np.sinh(np.pi * t) + b * np.cosh(np.pi * t))
            a, b = X, k * dX / KS[m + 1] / np.pi
    return out
def run(n, form):
    h = 1.0 / (n + 1); s = (np.arange(n) + 1) * h
    side = lambda c: {"kind": "dirichlet", "value": {"along": [[float(t), float(c * np.sin(np.pi * t))] for t in s]}}
    b = {"bottom": 0.0, "top": 0.0, "left": side(float(profile([0.0])[0])), "right": side(float(profile([1.0])[0]))}
    layer = lambda m: {"kind": "rectangle", "lower": [EDGES[m], -1.0], "upper": [EDGES[m + 1] + (1.0 if m == 2 else 0.0), 2.0]}
    if form == "material":
        mats = {f"m{m}": {"k": k, "C": 1e6} for m, k in enumerate(KS)}
        phys = {"material": "m0", "regions": [{**layer(m), "material": f"m{m}"} for m in (1, 2)]}
        extra = {"materials": mats}
    else:
        phys = {"alpha": {"background": KS[0], "regions": [{**layer(m), "value": KS[m]} for m in (1, 2)]}}
        extra = {}
    data = {"name": f"l{n}", **extra, "grid": {"nx": n, "ny": n, "lx": 1.0, "ly": 1.0},
            "physics": {"equation": "laplace", "solver": "multigrid", **phys}, "boundary": b,
            "run": {"steps": 200, "tolerance": 1e-12}, "backend": {"name": "numba", "threads": 1},
            "output": {"dir": f"{OUT}/lay_{form}_{n}", "vtk": False, "fields": False}}
    res = api.run(api.build_case(data), progress=False, ceiling=False, overwrite=True)
    err = np.abs(res.field - profile(res.x)[None, :] * np.sin(np.pi * res.y)[:, None])
    return err.max(), np.sqrt(np.mean(err ** 2))
for form in ("material", "alpha"):
    prev = None
    for n in (15, 31, 63, 127, 255):
        mx, l2 = run(n, form)
        o = "" if prev is None else "  order max %.2f l2 %.2f" % (np.log2(prev[0] / mx), np.log2(prev[1] / l2))
        print(f"{form:8s} n {n:4d} max {mx:.3e} l2 {l2:.3e}{o}", flush=True)
        prev = (mx, l2)
