"""Under mpirun -n N (any N): Newton's method for nonlinear steady states (k(T), radiating sides and rims) equals one
numpy process bitwise with rows and cart decompositions and every halo mode: the same iterations, the same residuals,
the same field; and Crank-Nicolson steps with Newton's method in each.

Usage: mpirun -n N python tests/mpi/check_nonlinear.py OUTDIR [BACKEND]
Exits non-zero (AssertionError, MPI abort) on the first failure.
"""

import sys
from pathlib import Path

import numpy as np
from common import abort_on_error, make_case
from mpi4py import MPI

from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "numba"
NEUMANN = {"kind": "neumann"}
CASES = {
    "die": {"grid": {"nx": 37, "ny": 29, "lx": 0.01, "ly": 0.008},
            "materials": {"si": {"k": {"k0": 148.0, "T0": 300.0, "b": -1.3}, "C": 1.66e6}},
            "physics": {"material": "si", "thickness": 5e-4,
                        "source": [{"kind": "rectangle", "lower": [0.004, 0.004], "upper": [0.006, 0.006],
                                    "power": "2 W"}]},
            "boundary": {"bottom": 350.0, "top": {"kind": "convective", "h": 50.0, "ambient": 300.0,
                                                  "emissivity": 0.9, "surroundings": 290.0},
                         "left": NEUMANN, "right": {"kind": "neumann", "flux": -500.0}}},
    "shapes": {"grid": {"nx": 40, "ny": 33, "lx": 0.04, "ly": 0.033},
               "materials": {"al": {"k": [[250.0, 240.0], [400.0, 228.0], [600.0, 210.0]], "C": 2.4e6},
                             "st": {"k": 15.0, "C": 3.8e6}},
               "physics": {"material": "al", "thickness": 2e-3, "faces": {"h": 8.0, "ambient": 300.0},
                           "regions": [{"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.04, 0.008],
                                        "material": "st"},
                                       {"kind": "disk", "center": [0.028, 0.02], "radius": 0.005,
                                        "hole": {"kind": "convective", "h": 20.0, "ambient": 320.0,
                                                 "emissivity": 0.7}},
                                       {"kind": "disk", "center": [0.01, 0.022], "radius": 0.004, "held": 500.0}]},
               "boundary": {"bottom": 330.0, "top": {"kind": "convective", "h": 12.0, "ambient": 300.0,
                                                     "emissivity": 0.5},
                            "left": {"kind": "neumann", "flux": 2000.0}, "right": NEUMANN}},
    "periodic": {"grid": {"nx": 24, "ny": 35, "lx": 0.02, "ly": 0.03},
                 "materials": {"cu": {"k": [[250.0, 410.0], [700.0, 370.0]], "C": 3.4e6}},
                 "physics": {"material": "cu", "thickness": 1e-3,
                             "source": [{"kind": "disk", "center": [0.01, 0.01], "radius": 0.004, "power": "5 W"}]},
                 "boundary": {"left": {"kind": "periodic"}, "right": {"kind": "periodic"}, "bottom": 310.0,
                              "top": {"kind": "convective", "h": 5.0, "ambient": 300.0, "emissivity": 1.0}}},
}
CASES["transient"] = {**CASES["die"], "physics": {**CASES["die"]["physics"], "equation": "heat",
                                                 "scheme": "crank-nicolson", "dt": 0.02}}
GRIDS = {"rows": {"decomposition": "rows"}, "cart": {"decomposition": "cart"}}
_serial: dict = {}


def case(label, backend, tag="", **parallel):
    data = {"name": label, **CASES[label], "initial": {"kind": "constant", "value": 320.0},
            "run": {"steps": 12, "tolerance": 1e-12}, "backend": {"name": backend, **({"threads": 1} if backend == "numba"
                                                                                      else {})},
            "parallel": parallel, "output": {"dir": str(root / f"{label}-{backend}-n{comm.size}{tag}"), "vtk": False}}
    data["physics"] = {"equation": "laplace", "solver": "multigrid", **data["physics"]}
    if data["physics"]["equation"] == "heat":
        data["physics"].pop("solver")
        data["run"] = {"steps": 4, "tolerance": 1e-10}
    return make_case(data)


def run(c, comm_):
    r = Run(c, comm_, Options(ceiling=False, quiet=True))
    return r, r.execute()


def reference(label):
    if label not in _serial:
        r, rec = run(case(label, "numpy"), Comm())
        _serial[label] = (r.state.u[1:-1, 1:-1].copy(), [h.get("residual", h.get("unit"))
                                                         for h in rec["solver"]["history"]])
    return _serial[label]


def check(label, grid, halo):
    c = case(label, BACKEND, f"-{grid}-{halo}", **GRIDS[grid], halo=halo)
    r, record = run(c, comm)
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    assert record["solver"].get("converged", not record["solver"].get("unconverged_steps")), record["solver"]["ended"]
    if comm.rank == 0:
        ref, history = reference(label)
        diff = int(np.count_nonzero(field != ref))
        assert diff == 0, f"{label}: {diff} points differ from one numpy process (max {np.abs(field - ref).max()})"
        mine = [h.get("residual", h.get("unit")) for h in record["solver"]["history"]]
        assert mine == history, (mine, history)
        print(f"ok {label}-{grid}-{halo} on {comm.size} ranks ({r.dims[0]}x{r.dims[1]}; "
              f"{len(mine)} {'steps' if 'scheme' in record['solver'] else 'Newton iterations'})", flush=True)


with abort_on_error(comm.mpi):
    for label in CASES:
        for grid in GRIDS:
            for halo in (("blocking", "overlap") if label == "die" else ("overlap",)):
                check(label, grid, halo)
    if comm.rank == 0:
        print(f"ok nonlinear on {comm.size} ranks", flush=True)
