"""tests/test_shapes.py's three closed forms on grids 31..255, errors and orders printed."""
import math, numpy as np

from solver import api
from solver.core.grid import positions
import tempfile
OUT = tempfile.mkdtemp(prefix="issue43-")
C = 0.5
def steady(name, n, physics, boundary=None):
    data = {"name": name, "grid": {"nx": n, "ny": n, "lx": 1.0, "ly": 1.0},
            "physics": {"equation": "laplace", "solver": "multigrid", "material": "steel", **physics},
            "boundary": boundary or {}, "run": {"steps": 200, "tolerance": 1e-12},
            "backend": {"name": "numba", "threads": 1}, "output": {"dir": f"{OUT}/ord/{name}", "vtk": False, "fields": False}}
    return api.run(api.build_case(data), progress=False, ceiling=False, overwrite=True)
def radius(res):
    X, Y = np.meshgrid(res.x, res.y); return np.hypot(X - C, Y - C)
def show(label, ns, l2, mx, its):
    for i, n in enumerate(ns):
        o = "" if i == 0 else f" order L2 {math.log2(l2[i-1]/l2[i]):.2f} max {math.log2(mx[i-1]/mx[i]):.2f}"
        print(f"{label} n {n} L2 {l2[i]:.3e} max {mx[i]:.3e} cycles {its[i]}{o}", flush=True)
NS = (31, 63, 127, 255)
# 1 concentric circles
r1, r2 = 0.15, 0.4; b = (20.0 - 100.0) / math.log(r2 / r1); a = 100.0 - b * math.log(r1)
l2, mx, its = [], [], []
for n in NS:
    res = steady(f"c{n}", n, {"regions": [{"kind": "disk", "center": [C, C], "radius": r1, "held": 100.0}],
        "outline": {"kind": "disk", "center": [C, C], "radius": r2, "rim": {"kind": "dirichlet", "value": 20.0}}})
    r = radius(res); p = (r > r1) & (r < r2)
    e = np.abs(res.field - (a + b * np.log(np.where(p, r, 1.0))))[p]
    l2.append(np.sqrt(np.mean(e**2))); mx.append(e.max()); its.append(res.record["solver"]["iterations"])
show("held circles", NS, l2, mx, its)
# 2 insulated hole in a gradient
A, G = 0.2, 10.0
l2, mx, its = [], [], []
for n in NS:
    case = api.build_case({"grid": {"nx": n, "ny": n}, "physics": {"material": "steel"}})
    y, x = positions(case, np.arange(n), np.arange(n))
    ex = lambda X, Y: G * (X - C) * (1 + A * A / np.maximum((X - C) ** 2 + (Y - C) ** 2, 1e-300))
    sides = {"bottom": {"kind": "dirichlet", "value": {"along": [[float(s), float(ex(s, 0.0))] for s in x]}},
             "top": {"kind": "dirichlet", "value": {"along": [[float(s), float(ex(s, 1.0))] for s in x]}},
             "left": {"kind": "dirichlet", "value": {"along": [[float(s), float(ex(0.0, s))] for s in y]}},
             "right": {"kind": "dirichlet", "value": {"along": [[float(s), float(ex(1.0, s))] for s in y]}}}
    res = steady(f"h{n}", n, {"regions": [{"kind": "disk", "center": [C, C], "radius": A, "hole": "insulated"}]}, sides)
    X, Y = np.meshgrid(res.x, res.y); p = radius(res) > A
    e = np.abs(res.field - ex(X, Y))[p]
    l2.append(np.sqrt(np.mean(e**2))); mx.append(e.max()); its.append(res.record["solver"]["iterations"])
show("insulated hole", NS, l2, mx, its)
# 3 convective cylinder
ra, rb, h, Tf, Tb, k = 0.12, 0.42, 400.0, 20.0, 100.0, 63.9
B = (Tb - Tf) / (k / (h * ra) + math.log(rb / ra)); A0 = Tb - B * math.log(rb)
l2, mx, its = [], [], []
for n in NS:
    res = steady(f"v{n}", n, {"regions": [{"kind": "disk", "center": [C, C], "radius": ra, "hole": {"kind": "convective", "h": h, "ambient": Tf}}],
        "outline": {"kind": "disk", "center": [C, C], "radius": rb, "rim": {"kind": "dirichlet", "value": Tb}}})
    r = radius(res); p = (r > ra) & (r < rb)
    e = np.abs(res.field - (A0 + B * np.log(np.where(p, r, 1.0))))[p]
    l2.append(np.sqrt(np.mean(e**2))); mx.append(e.max()); its.append(res.record["solver"]["iterations"])
    rims = res.record["energy"]["rims"]
    print("   rims", rims, "exact heat per unit thickness", 2 * math.pi * k * B)
show("convective cylinder", NS, l2, mx, its)
