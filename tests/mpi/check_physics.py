"""Under mpirun -n N (any N): sources, convective sides, side values in time and along a side, and alpha fields
equal one numpy process bitwise for every decomposition, halo mode, deep halo (time tile) and solver (explicit,
Jacobi, multigrid plain and cg, implicit backward Euler and Crank-Nicolson), and the runs prove themselves
(--verify, and the energy balance closing to rounding where the loop sees each step).

Usage: mpirun -n N python tests/mpi/check_physics.py OUTDIR [BACKEND]
Exits non-zero (AssertionError, MPI abort) on the first failure.
"""

import sys
from pathlib import Path

import numpy as np
from common import abort_on_error, make_case, serial
from mpi4py import MPI

from solver.core.decomp import choose_dims
from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "numba"
ALPHA = {"background": 1.0, "regions": [{"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.4, 1.0], "value": 30.0},
                                        {"kind": "disk", "center": [0.7, 0.6], "radius": 0.2, "value": 0.05}]}
SOURCE = [{"kind": "gaussian", "center": [0.5, 0.4], "width": 0.15, "amplitude": 20.0},
          {"kind": "rectangle", "lower": [0.1, 0.6], "upper": [0.3, 0.9], "value": 5.0, "active": [2e-4, 6e-4]}]
SIDES = {"top": {"kind": "dirichlet", "value": {"along": [[0.0, 0.0], [1.0, 2.0]]}},
         "bottom": {"kind": "dirichlet", "value": {"time": [[0.0, 0.0], [0.002, 1.0]]}},
         "left": {"kind": "convective", "h": 4.0, "ambient": 1.5},
         "right": {"kind": "neumann", "flux": {"along": [[0.0, -1.0], [1.0, 1.0]]}}}
DIRICHLET = {"top": 1.0, "bottom": 0.0, "left": 0.5, "right": 0.0}
CASES = {  # label -> sections; each runs on every grid below
    "heat-sides": {"physics": {"alpha": ALPHA, "source": SOURCE}, "boundary": SIDES},
    "heat-tiles": {"physics": {"alpha": ALPHA, "source": SOURCE}, "boundary": DIRICHLET, "backend": {"time_tile": 3}},
    "jacobi": {"physics": {"equation": "laplace", "alpha": ALPHA, "source": SOURCE[:1]},
               "boundary": {**SIDES, "bottom": 0.0}, "run": {"steps": 40, "check_every": 10}},
    "mg-cg": {"physics": {"equation": "laplace", "solver": "multigrid", "alpha": ALPHA, "source": SOURCE[:1]},
              "boundary": {**SIDES, "bottom": 0.0}, "run": {"steps": 6}},
    "mg-plain": {"physics": {"equation": "laplace", "solver": "multigrid", "source": SOURCE[:1]},
                 "boundary": {**SIDES, "bottom": 0.0}, "run": {"steps": 6}},
    "backward-euler": {"physics": {"scheme": "backward-euler", "alpha": ALPHA, "source": SOURCE}, "boundary": SIDES,
                       "run": {"steps": 5}},
    "crank-nicolson": {"physics": {"scheme": "crank-nicolson", "source": SOURCE}, "boundary": SIDES, "run": {"steps": 5}},
}
MATERIAL = {"material": "fr4", "thickness": "1.6 mm",
            "regions": [{"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.43, 0.37], "material": "copper"},
                        {"kind": "disk", "center": [0.7, 0.6], "radius": 0.21, "material": "aluminium"}],
            "source": [{"kind": "rectangle", "lower": [0.31, 0.52], "upper": [0.53, 0.74], "power": "40 W"},
                       {"kind": "disk", "center": [0.2, 0.2], "radius": 0.1, "power": "15 W", "active": [0, 20]}],
            "faces": {"h": "10 W/(m^2 K)", "ambient": 2.0}}
MATERIAL_SIDES = {"top": {"kind": "convective", "h": "50 W/(m^2 K)", "ambient": 1.0}, "bottom": 0.0,
                  "left": {"kind": "neumann", "flux": "200 W/m^2"}, "right": {"kind": "convective", "h": "20 W/(m^2 K)"}}
CASES.update({  # the material form: heat capacities that differ, face cooling, powers in W, sides in W/(m^2 K)
    "material-heat": {"physics": MATERIAL, "boundary": MATERIAL_SIDES},
    "material-tiles": {"physics": MATERIAL, "boundary": DIRICHLET, "backend": {"time_tile": 3}},
    "material-implicit": {"physics": {**MATERIAL, "scheme": "backward-euler", "dt": 3.0}, "boundary": MATERIAL_SIDES,
                          "run": {"steps": 4}},
    "material-steady": {"physics": {**MATERIAL, "equation": "laplace", "solver": "multigrid",
                                    "source": MATERIAL["source"][:1]}, "boundary": MATERIAL_SIDES,
                        "run": {"steps": 8}},
})
GRIDS = {"rows": {"decomposition": "rows"}, "cart": {"decomposition": "cart"}}
_done: set = set()


def case(label, sections, parallel):
    base = {"name": label, "grid": {"nx": 29, "ny": 23}, "initial": {"kind": "random", "seed": 8},
            "run": {"steps": 40, "check_every": 10}, "backend": {"name": BACKEND, "threads": 1},
            "output": {"dir": str(root / f"{label}-n{comm.size}"), "vtk": False}, "verify": True}
    return make_case(base, **{**sections, "parallel": parallel,
                              "backend": {**base["backend"], **sections.get("backend", {})},
                              "run": {**base["run"], **sections.get("run", {})}})


def check(label, grid, halo):
    c = case(f"{label}-{grid}-{halo}", CASES[label], {**GRIDS[grid], "halo": halo})
    dims = choose_dims(comm.size, c.shape, c.parallel.decomposition, c.parallel.dims)
    key = (label, dims, halo if comm.size > 1 else None)
    if key in _done:
        return
    _done.add(key)
    r = Run(c, comm, Options(ceiling=False, quiet=True))
    record = r.execute()
    assert record["correctness"]["passed"], f"{label}: --verify failed: {record['correctness']}"
    energy = record["energy"]
    if energy.get("closed") is not None:
        assert energy["closed"], f"{label}: the energy balance does not close: {energy}"
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    ref_case = c.model_copy(deep=True)
    ref_case.backend.name, ref_case.backend.time_tile, ref_case.verify = "numpy", None, False
    if comm.rank == 0:
        ref, steps, _ = serial(ref_case)
        diff = int(np.count_nonzero(field != ref))
        assert diff == 0 and steps == r.state.step, f"{label}: {diff} points differ from one numpy process"
        depth = record["resources"].get("halo_depth")
        print(f"ok {label} {grid} {halo} on {comm.size} ranks ({r.dims[0]}x{r.dims[1]}, halo depth {depth})", flush=True)


with abort_on_error(comm.mpi):
    for label in CASES:
        for grid in GRIDS:
            for halo in (("blocking", "nonblocking", "overlap") if label in ("heat-sides", "heat-tiles") else ("overlap",)):
                check(label, grid, halo)
    if comm.rank == 0:
        print(f"ok physics on {comm.size} ranks", flush=True)
