"""Boundary kinds on a real GPU (issue 16): the fill kernel (kernels/boundary.cu) against the host rules,
every kernel variant with every kind through CUDA graphs and single launches, the loop's step path (compute
then fill on the streams), `stencil run --verify` (exact modes, conservation), and under mpirun the
boundary check script with cupy ranks. Bitwise equal to numpy (--fmad=false). Skipped without a GPU."""

import json

import numpy as np
import pytest
from conftest import ROOT, mpi_script, needs_mpi, stencil

from solver.backends import cupy_kernels as gk
from solver.backends import registry
from solver.backends.numpy_backend import NumpyBackend
from solver.case import BackendSettings, validate_case
from solver.core import boundary
from solver.core.decomp import decompose
from solver.core.field import padded_field
from solver.core.initial import initial_block
from solver.core.physics import weights
from solver.core.timing import Timer

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
N, P = {"kind": "neumann"}, {"kind": "periodic"}
KINDS = {
    "dirichlet": {"left": 0.5, "right": -2.0, "bottom": 1.0, "top": 0.25},
    "neumann": {"left": {"kind": "neumann", "flux": 1.5}, "right": N, "bottom": {"kind": "neumann", "flux": -0.5},
                "top": N},
    "periodic": {"left": P, "right": P, "bottom": P, "top": P},
    "strip": {"left": P, "right": P, "bottom": {"kind": "neumann", "flux": 2.0}, "top": 3.0},
    "mixed": {"left": 2.0, "right": {"kind": "neumann", "flux": 0.75}, "bottom": P, "top": P},
}
VARIANTS = [(v, gk.DEFAULT_BLOCK.get(v)) for v in gk.VARIANTS] + [("tiled", (16, 4)), ("vec", (32, 5))]


@pytest.fixture(autouse=True)
def _own_tune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))


def case(kind, dtype, nx=77, ny=45):
    return validate_case({"name": "g", "grid": {"nx": nx, "ny": ny, "lx": 1.3}, "boundary": KINDS[kind],
                          "initial": {"kind": "random", "seed": 2}, "numerics": {"dtype": dtype},
                          "run": {"steps": 1000}})


def gpu(dtype, kernel=None, block=None):
    from solver.backends.cupy_backend import CupyBackend

    return CupyBackend(BackendSettings(name="cupy", kernel=kernel, block=list(block) if block else None), dtype)


def start(c, be):
    block = decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c))
    be.boundary = boundary.make_fill(c, block)
    return block, padded_field(c, block, initial_block(c, block))


def numpy_run(c, steps):
    be = NumpyBackend(c.backend, c.numerics.dtype)
    block, u = start(c, be)
    u, _ = be.advance(u, u.copy(), weights(c).cast(c.numerics.dtype), steps, block.everything())
    return u


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("depth", [1, 2])
def test_fill_kernel_equals_the_host_rules(kind, dtype, depth):
    c = case(kind, dtype, 13, 9)
    be = gpu(dtype)
    fill = boundary.make_fill(c, decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c)), depth)
    host = np.random.default_rng(1).uniform(-1, 1, (9 + 2 * depth, 13 + 2 * depth)).astype(dtype)
    want = host.copy()
    fill.apply(want)
    be.boundary = fill
    u = be.asarray(host)
    be._fill(u, be.main)
    np.testing.assert_array_equal(be.to_host(u), want)


@pytest.mark.parametrize("variant,block", VARIANTS, ids=lambda x: "x".join(map(str, x)) if isinstance(x, tuple) else str(x))
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("graphs", [True, False])
def test_every_variant_with_every_kind_equals_numpy_bitwise(variant, block, kind, dtype, graphs):
    c, steps = case(kind, dtype), 37  # one 32-step graph, two 2-step graphs, one launch
    be = gpu(dtype, variant, block)
    be.use_graphs = graphs
    blk, host = start(c, be)
    w = weights(c).cast(dtype)
    u, v = be.asarray(host), be.asarray(host)
    be.prepare(u, v, w)
    u, _ = be.advance(u, v, w, steps, blk.everything())
    np.testing.assert_array_equal(be.to_host(u), numpy_run(c, steps))


@pytest.mark.parametrize("kind", ["neumann", "strip", "periodic"])
def test_the_loop_step_path_fills_on_the_streams(kind):
    """What the time loop does with an exchange: compute the interior, then the edge strips on the
    high-priority stream, then fill_boundary (which joins the streams), for many steps."""
    c, steps = case(kind, "float64"), 23
    be = gpu("float64")
    blk, host = start(c, be)
    w, timer = weights(c), Timer()
    u, v = be.asarray(host), be.asarray(host)
    be.prepare(u, v, w)
    r0, r1, c0, c1 = blk.everything()
    for _ in range(steps):
        be.active = be.main
        be.compute(v, u, w, [(r0 + 1, r1 - 1, c0, c1)], timer)
        be.active = be.edge
        be._edge_used = True
        be.edge.wait_event(be._record(be.main))
        be.compute(v, u, w, [(r0, r0 + 1, c0, c1), (r1 - 1, r1, c0, c1)], timer)
        be.fill_boundary(v, timer)
        u, v = v, u
    be.synchronize()
    np.testing.assert_array_equal(be.to_host(u), numpy_run(c, steps))
    assert timer.seconds["compute"] > 0


@pytest.mark.parametrize("name", ["periodic_mode", "insulated_box", "flux_wall", "periodic_strip"])
def test_cases_verify_on_the_gpu(name, tmp_path):
    res = stencil(["run", str(ROOT / "cases" / f"{name}.yaml"), "--backend", "cupy", "--verify", "--quiet",
                   "--steps", "300", "-o", str(tmp_path / name)])
    assert res.returncode == 0, res.stderr
    verdict = json.loads((tmp_path / name / "record.json").read_text())["correctness"]
    assert verdict["passed"]
    if name in ("insulated_box", "flux_wall"):
        assert verdict["conservation"]["passed"]


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
def test_boundary_kinds_under_mpirun_with_gpu_ranks(n, tmp_path):
    """The CPU boundary script with cupy ranks (sharing the GPUs there are): every kind, grid and halo mode
    bitwise equal to one numpy process; staged halos, and NCCL where it exists (a periodic axis of two
    ranks has the same peer on both sides: the receive order matters there)."""
    import cupy

    from solver.parallel.gpu_exchange import nccl_version

    own_gpus = cupy.cuda.runtime.getDeviceCount() >= n  # NCCL needs a GPU per rank
    for transport in ["staged"] + (["nccl"] if nccl_version() and own_gpus else []):
        res = mpi_script(n, "check_boundary.py", tmp_path / transport, "cupy", transport, timeout=600)
        assert f"ok boundary kinds on {n} ranks" in res.stdout, res.stdout[-2000:] + res.stderr[-3000:]
