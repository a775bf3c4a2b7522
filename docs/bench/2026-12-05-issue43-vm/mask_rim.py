"""A convective hole as a disk and as masks of the same disk (pixels over its box): the heat its rim takes."""
import numpy as np
from solver import api
import tempfile
OUT = tempfile.mkdtemp(prefix="issue43-")
def run(name, hole, n=241):
    data = {"name": name, "units": {"length": "mm", "temperature": "degC"}, "grid": {"nx": n, "ny": n, "lx": 60, "ly": 60},
            "physics": {"equation": "laplace", "solver": "multigrid", "material": "aluminium", "thickness": "2 mm",
                        "regions": [{**hole, "hole": {"kind": "convective", "h": "200 W/(m^2 K)", "ambient": 20.0}, "name": "hole"}]},
            "boundary": {"left": 80.0, "right": 80.0, "top": 80.0, "bottom": 80.0},
            "run": {"steps": 200, "tolerance": 1e-11}, "backend": {"name": "numba", "threads": 1},
            "output": {"dir": f"{OUT}/mr/{name}", "vtk": False, "fields": False}}
    r = api.run(api.build_case(data), progress=False, ceiling=False, overwrite=True).record
    return r["energy"]["rims"]["hole"]
c, R = (30.3, 29.6), 10.0
for n in (121, 241, 481):
    disk = run(f"disk{n}", {"kind": "disk", "center": list(c), "radius": R}, n)
    out = [f"grid {n}: disk rim {disk:.4f} W"]
    for m in (64, 256, 1024):
        e = (np.arange(m) + 0.5) / m * 2 * R - R
        X, Y = np.meshgrid(e, e)
        np.save(f"{OUT}/mask{m}.npy", (np.hypot(X, Y) <= R).astype(np.uint8))
        w = run(f"m{n}_{m}", {"kind": "mask", "path": f"{OUT}/mask{m}.npy", "extent": [[c[0] - R, c[1] - R], [c[0] + R, c[1] + R]]}, n)
        out.append(f"mask {m}^2 {w:.4f} W ({w / disk:.3f}x)")
    print("; ".join(out), flush=True)
