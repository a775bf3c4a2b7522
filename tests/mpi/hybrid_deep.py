"""GPU deep halos under a real mpirun (run by tests/test_gpu_hybrid.py): k-deep halos exchanged once
every k steps between ranks whose fields live on GPUs equal one rank bitwise.

    mpirun -n P python tests/mpi/hybrid_deep.py OUTDIR TRANSPORTS [share]

TRANSPORTS: a comma list of staged, cuda-aware, nccl, or `all` (staged, then cuda-aware where this MPI
says it is CUDA-aware, then nccl where every rank has NCCL and its own GPU). For each transport,
decomposition (rows; cart: columns split, and a 2-D grid from 4 ranks) and halo mode: the heat case
(float64, --fmad=false kernels, random interior, four different Dirichlet sides) with backend.time_tile
1, 2 and 8, and 8 on a grid whose blocks are thinner than 8 (the depth is then capped on every rank
alike); each final field gathered on rank 0 must equal rank 0 alone on one GPU per-step (time_tile 1)
and tiled (time_tile k), bitwise; the record's halo depth is the capped k and its halo messages per
step are 1/depth of the per-step run's, to within 10% (tiles end at the loop's stops, and the step
before a check is a plain one; on the thin grid, checked every 13 steps, at most 1/1.5 of them). Then Laplace with a collective convergence stop and float32, once per
decomposition. Written once, independent of comm.size. Prints `ok ...` per check and, last, one JSON
line; any failure aborts every rank with exit code 1.
"""

import json
import sys
from pathlib import Path

import numpy as np
from common import abort_on_error, make_case

from solver.io.fields import gather_field, owned
from solver.parallel.comm import Comm
from solver.parallel.deep import capped_depth
from solver.run import Options, Run

comm = Comm.world(True)
root = Path(sys.argv[1])
SHARE = len(sys.argv) > 3 and sys.argv[3] == "share"
GRID = {"nx": 61, "ny": 47}
THIN = {"nx": 3 * comm.size + 2, "ny": 3 * comm.size + 1}  # blocks of 3-4 rows (rows) and columns (cart)
singles: dict = {}
per_step: dict = {}
report: list = []


def case(label, k, transport, **kw):
    data = {"name": label, "grid": GRID, "initial": {"kind": "random", "seed": 5},
            "boundary": {"top": 1.0, "bottom": -0.5, "left": 2.0, "right": 0.25},
            "run": {"steps": 240, "check_every": 240}, "backend": {"name": "cupy", "time_tile": k},
            "parallel": {"share_gpus": SHARE, "transport": transport},
            "output": {"dir": str(root / f"{label}-k{k}-n{comm.size}"), "every": 120, "vtk": False}}
    return make_case(data, **kw)


def run(c, on):
    r = Run(c, on, Options(ceiling=False, quiet=True, overwrite=True))
    record = r.execute()
    return r, record, gather_field(on, r.blocks, owned(r.backend, r.state.u))


def single(c, k):
    """Rank 0 alone on its GPU (no MPI; the others wait at the next collective): (field, steps)."""
    key = (c.physics.equation, c.grid.nx, c.grid.ny, c.numerics.dtype, c.run.steps, c.run.tolerance, k)
    if key not in singles:
        c1 = c.model_copy(deep=True)
        c1.backend.time_tile = k
        c1.output.dir = f"{c.output.dir}-single-k{k}"
        singles[key] = None
        if comm.rank == 0:
            r, _, field = run(c1, Comm())
            singles[key] = (field, r.state.step)
    return singles[key]


def check(label, k, transport, **kw):
    c = case(label, k, transport, **kw)
    r, record, field = run(c, comm)
    res = record["resources"]
    depth = capped_depth(k, r.blocks)
    used = {p["transport"] for p in res["placement"]}
    key = (label, c.grid.nx, c.grid.ny, c.run.steps)
    if k == 1:
        per_step[key] = res["messages_per_step"]
    refs = [single(c, 1), single(c, k)]
    if comm.rank != 0:
        return
    assert used == {transport}, f"{label}: transport {used}, asked for {transport}"
    assert res["halo_depth"] == depth, f"{label} k={k}: halo depth {res['halo_depth']}, expected {depth}"
    for (want, steps), what in zip(refs, ("per-step", f"tiled k={k}")):
        assert r.state.step == steps, f"{label} k={k}: {r.state.step} steps, one rank {what} took {steps}"
        bad = int(np.count_nonzero(field != want))
        assert bad == 0, f"{label} k={k}: {bad} points differ from one rank {what} (max {np.abs(field - want).max()})"
    if c.run.tolerance is not None:
        assert r.state.step < c.run.steps, f"{label}: did not converge, so the collective stop was not tested"
    note = ""
    if key in per_step and k > 1 and c.run.tolerance is None:
        ratio = res["messages_per_step"] * depth / per_step[key]
        # thin: a check every 13 steps cuts the tiles short (and the step before it is plain): fewer, not 1/depth
        most = depth / 1.5 if label.startswith("thin") else 1.1
        assert 1 <= ratio < most, f"{label} k={k}: {res['messages_per_step']} messages/step, per-step {per_step[key]}"
        note = f", messages/step {res['messages_per_step']:.3f} = per-step {per_step[key]:.1f} / {depth} x {ratio:.3f}"
    report.append({"label": label, "k": k, "depth": depth, "dims": list(r.dims), "steps": r.state.step,
                   "messages_per_step": res["messages_per_step"], "time_tile": res["time_tile"]})
    print(f"ok {label} k={k} depth={depth} on {comm.size} ranks ({r.dims[0]}x{r.dims[1]}){note}", flush=True)


def transports(asked: str) -> list[str]:
    """`all`: staged; cuda-aware where every rank's MPI says it is CUDA-aware; nccl where it is usable."""
    if asked != "all":
        return asked.split(",")
    from solver.backends.cupy_backend import CupyBackend
    from solver.case import BackendSettings
    from solver.parallel.gpu_exchange import choose_transport, cuda_aware_mpi

    out = ["staged"]
    if all(a is True for a in comm.allgather(cuda_aware_mpi())):
        out.append("cuda-aware")
    node_rank, node_size = comm.node()
    probe = CupyBackend(BackendSettings(name="cupy"), "float64", local_rank=node_rank, local_size=node_size)
    try:
        choose_transport("nccl", comm.mpi, probe)  # collective; raises alike on every rank when unusable
        out.append("nccl")
    except Exception:  # noqa: BLE001 - InputError: ranks share a GPU, or no NCCL
        pass
    return out


def main():
    cart_dims = [2, comm.size // 2] if comm.size >= 4 and comm.size % 2 == 0 else [1, comm.size]
    names = transports(sys.argv[2])
    for transport in names:
        for decomposition, dims in (("rows", None), ("cart", cart_dims)):
            for halo in ("blocking", "nonblocking", "overlap"):
                par = {"decomposition": decomposition, "dims": dims, "halo": halo}
                label = f"{transport}-{decomposition}-{halo}"
                for k in (1, 2, 8):
                    check(label, k, transport, parallel=par)
                check(f"thin-{label}", 1, transport, parallel=par, grid=THIN, run={"steps": 60, "check_every": 13})
                check(f"thin-{label}", 8, transport, parallel=par, grid=THIN, run={"steps": 60, "check_every": 13})
            par = {"decomposition": decomposition, "dims": dims, "halo": "overlap"}
            check(f"laplace-{transport}-{decomposition}", 3, transport, parallel=par, physics={"equation": "laplace"},
                  run={"steps": 3000, "tolerance": 2e-2, "check_every": 7})
            check(f"f32-{transport}-{decomposition}", 4, transport, parallel=par, numerics={"dtype": "float32"},
                  run={"steps": 50, "check_every": 10})
    if comm.rank == 0:
        print(f"ok GPU deep halos on {comm.size} ranks", flush=True)
        print(json.dumps({"transports": names, "checks": report}), flush=True)


with abort_on_error(comm.mpi):
    main()
