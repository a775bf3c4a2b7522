"""Under mpirun -n N (any N): every boundary kind, decomposition and halo mode equals one process bitwise,
and the runs prove themselves (--verify: exact eigenmodes, conservation of the sum with zero fluxes).

Usage: mpirun -n N python tests/mpi/check_boundary.py OUTDIR [BACKEND [TRANSPORT]]
BACKEND: numba (default) or cupy (one GPU per rank, or ranks sharing one; TRANSPORT: auto, staged, nccl).
Process grids: rows (N x 1), cart 1 x N and cart chosen for the grid, so a periodic axis is spanned by one
rank (its own neighbour: filled locally), by two (the same neighbour on both sides) or by more.
Exits non-zero (AssertionError, MPI abort) on the first failure.
"""

import sys
from pathlib import Path

import numpy as np
from common import abort_on_error, make_case
from mpi4py import MPI

from solver.core.decomp import choose_dims
from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.run import Options, Run

comm = Comm(MPI.COMM_WORLD)
root = Path(sys.argv[1])
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "numba"
TRANSPORT = sys.argv[3] if len(sys.argv) > 3 else "auto"
GPU = {"parallel": {"share_gpus": True, "transport": TRANSPORT}} if BACKEND == "cupy" else {}
N, P = {"kind": "neumann"}, {"kind": "periodic"}
BOUNDARIES = {  # label -> (boundary, initial): random fields for bitwise checks, eigenmodes where exact
    "insulated": ({"top": N, "bottom": N, "left": N, "right": N}, {"kind": "random", "seed": 3}),
    "flux": ({"top": {"kind": "neumann", "flux": 0.7}, "bottom": N, "left": {"kind": "neumann", "flux": -1.5},
              "right": {"kind": "neumann", "flux": 0.25}}, {"kind": "random", "seed": 4}),
    "periodic": ({"top": P, "bottom": P, "left": P, "right": P}, {"kind": "random", "seed": 5}),
    "strip": ({"top": 1.0, "bottom": {"kind": "neumann", "flux": 0.5}, "left": P, "right": P}, {"kind": "random", "seed": 6}),
    "mixed": ({"top": P, "bottom": P, "left": 2.0, "right": N}, {"kind": "random", "seed": 7}),
    "mode-neumann": ({"top": N, "bottom": N, "left": N, "right": N}, {"kind": "sine", "k": [2, 1]}),
    "mode-periodic": ({"top": P, "bottom": P, "left": P, "right": P}, {"kind": "sine", "k": [1, 2]}),
    "mode-mixed": ({"top": N, "bottom": 0.0, "left": P, "right": P}, {"kind": "sine", "k": [1, 1]}),
}
GRIDS = {"rows": {"decomposition": "rows"}, "cart-1xN": {"decomposition": "cart", "dims": [1, comm.size]},
         "cart": {"decomposition": "cart"}}
_serial: dict = {}
_done: set = set()


def case(label, boundary, initial, **kw):
    return make_case({"name": label, "grid": {"nx": 31, "ny": 23, "lx": 1.7}, "initial": initial, "boundary": boundary,
                      "run": {"steps": 29, "check_every": 10}, "backend": {"name": "numba", "threads": 1},
                      "output": {"dir": str(root / f"{label}-n{comm.size}"), "vtk": False}, "verify": True}, **kw)


def run(c, comm_):
    r = Run(c, comm_, Options(ceiling=False, quiet=True))
    record = r.execute()
    return r, record


def reference(kind, c):
    """The one-process numpy run of this boundary (rank 0), computed once per kind."""
    if kind not in _serial:
        c1 = c.model_copy(deep=True)
        c1.output.dir, c1.backend.name, c1.backend.threads = c.output.dir + "-serial", "numpy", None
        r, _ = run(c1, Comm())
        _serial[kind] = r.state.u[1:-1, 1:-1].copy()
    return _serial[kind]


def check(kind, grid, halo, backend=BACKEND):
    boundary, initial = BOUNDARIES[kind]
    label = f"{kind}-{grid}-{halo}-{backend}"
    extra = GPU.get("parallel", {}) if backend == "cupy" else {}
    c = case(label, boundary, initial, parallel={**GRIDS[grid], "halo": halo, **extra}, backend={"name": backend})
    dims = choose_dims(comm.size, c.shape, c.parallel.decomposition, c.parallel.dims)
    key = (kind, dims, halo if comm.size > 1 else None, backend)  # one rank: every grid and halo mode is the same run
    if key in _done:
        return
    _done.add(key)
    r, record = run(c, comm)
    verdict = record["correctness"]
    assert verdict["passed"], f"{label}: --verify failed: {verdict}"
    if kind.startswith("mode"):
        assert verdict["reference"].startswith("exact"), f"{label}: not checked against the exact mode: {verdict}"
    if all(isinstance(v, dict) and v["kind"] != "dirichlet" for v in boundary.values()):
        assert "conservation" in verdict, f"{label}: no conservation check for a case without Dirichlet sides"
    field = gather_field(comm, r.blocks, owned(r.backend, r.state.u))
    if comm.rank == 0:
        ref = reference(kind, c)
        diff = int(np.count_nonzero(field != ref))
        assert diff == 0, f"{label}: {diff} points differ from one numpy process (max {np.abs(field - ref).max()})"
        print(f"ok {label} on {comm.size} ranks ({r.dims[0]}x{r.dims[1]})", flush=True)


with abort_on_error(comm.mpi):
    for kind in BOUNDARIES:
        for grid in (("rows", "cart") if kind.startswith("mode") else GRIDS):
            for halo in (("blocking", "nonblocking", "overlap") if kind in ("periodic", "flux") else ("overlap",)):
                check(kind, grid, halo)
    check("periodic", "cart", "blocking", backend="numpy")
    check("flux", "cart", "nonblocking", backend="numpy")
    if comm.rank == 0:
        print(f"ok boundary kinds on {comm.size} ranks", flush=True)
