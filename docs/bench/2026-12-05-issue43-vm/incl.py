"""A disk of k_in (argv[1]) in a plate of k 1 under a uniform field (the composite cylinder): material form and point-sampled form."""
import sys, numpy as np
from solver import api
import tempfile
OUT = tempfile.mkdtemp(prefix="issue43-")
C0, A, G = (0.5, 0.5), 0.3, 1.0
def exact(X, Y, kin, kout):
    dx, dy = X - C0[0], Y - C0[1]
    r2 = np.maximum(dx * dx + dy * dy, 1e-300)
    B = A * A * (kout - kin) / (kout + kin)
    ain = 2 * kout / (kin + kout)
    return np.where(r2 <= A * A, G * ain * dx, G * dx * (1 + B / r2))
def run(n, form, kin, kout=1.0):
    h = 1.0 / (n + 1); s = (np.arange(n) + 1) * h
    side = lambda f: {"kind": "dirichlet", "value": {"along": [[float(t), float(f(t))] for t in s]}}
    e = lambda x, y: exact(np.asarray(x), np.asarray(y), kin, kout)
    b = {"bottom": side(lambda t: e(t, 0.0)), "top": side(lambda t: e(t, 1.0)),
         "left": side(lambda t: e(0.0, t)), "right": side(lambda t: e(1.0, t))}
    disk = {"kind": "disk", "center": list(C0), "radius": A}
    if form == "material":
        phys = {"material": "out", "regions": [{**disk, "material": "in"}]}
        extra = {"materials": {"in": {"k": kin, "C": 1.0}, "out": {"k": kout, "C": 1.0}}}
    else:
        phys = {"alpha": {"background": kout, "regions": [{**disk, "value": kin}]}}
        extra = {}
    data = {"name": f"i{n}", **extra, "grid": {"nx": n, "ny": n, "lx": 1.0, "ly": 1.0},
            "physics": {"equation": "laplace", "solver": "multigrid", **phys}, "boundary": b,
            "run": {"steps": 200, "tolerance": 1e-12}, "backend": {"name": "numba", "threads": 1},
            "output": {"dir": f"{OUT}/incl_{form}_{n}", "vtk": False, "fields": False}}
    res = api.run(api.build_case(data), progress=False, ceiling=False, overwrite=True)
    X, Y = np.meshgrid(res.x, res.y)
    err = np.abs(res.field - e(X, Y))
    return err.max(), np.sqrt(np.mean(err ** 2))
kin = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
for form in ("material", "alpha"):
    prev = None
    for n in (15, 31, 63, 127, 255):
        mx, l2 = run(n, form, kin)
        o = "" if prev is None else "  order max %.2f l2 %.2f" % (np.log2(prev[0] / mx), np.log2(prev[1] / l2))
        print(f"{form:8s} k_in {kin:g} n {n:4d} max {mx:.3e} l2 {l2:.3e}{o}", flush=True)
        prev = (mx, l2)
