"""The CuPy backend's multigrid verbs on a real GPU (solver/backends/cupy_mg.py, kernels/mg.cu): each verb on
pitched device fields bitwise equal to mg_ops.py, on either stream; the overlap mode's order (interior on
main, edge strips on edge, then the fill); per-level GPU time; whole multigrid runs bitwise equal to the numpy
backend's (float64 and float32, odd non-square grid, Dirichlet/Neumann/periodic sides, V/W/F cycles); and two
ranks sharing one GPU under mpirun. Skipped without a GPU (tests/test_mg_emulated.py checks the kernels on
the CPU)."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import yaml
from conftest import mpirun, needs_mpi
from test_mg_emulated import (FILL_KINDS, MG_CASE, REGIONS, RUN_SIDES, SHAPE, TABLE_CASES, assert_same_bits,
                              real_tables, restrict_tables, values, weights)

from solver.backends import mg_ops, registry
from solver.case import BackendSettings, validate_case
from solver.core import boundary
from solver.core.decomp import decompose
from solver.core.timing import Timer
from solver.run import Options, Run

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
DTYPES = ["float64", "float32"]


@pytest.fixture(autouse=True)
def _own_tune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "cache"))


def gpu(dtype, stream="main"):
    from solver.backends.cupy_backend import CupyBackend

    be = CupyBackend(BackendSettings(name="cupy"), dtype)
    be.active = getattr(be, stream)
    return be


def up(be, host, aligned=2):
    a = be.zeros(host.shape, aligned=aligned)
    be.put(a, (0, host.shape[0], 0, host.shape[1]), host)
    return a


def down(be, a):
    return be.get(a, (0, a.shape[0], 0, a.shape[1]))


def device_tables(be, down_t, up_t):
    ys, yc, yw, xs, xc, xw, scale = down_t
    d = (be.table(ys), be.table(yc), be.table(yw, True), be.table(xs), be.table(xc), be.table(xw, True), scale)
    u = (be.table(up_t[0]), be.table(up_t[1], True), be.table(up_t[2]), be.table(up_t[3], True))
    return d, u


# each verb ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stream", ["main", "edge"])
def test_point_verbs_equal_mg_ops_bitwise(dtype, stream):
    be, rng = gpu(dtype, stream), np.random.default_rng(1)
    w, om = weights(dtype, rng), np.dtype(dtype).type(0.9)
    for region in REGIONS:
        for g_on in (False, True):
            u, g, out = (values(SHAPE, dtype, rng) for _ in range(3))
            gg = g if g_on else None
            for verb, ref in (("smooth", lambda o: mg_ops.smooth(o, u, gg, w, om, region)),
                              ("residual", lambda o: mg_ops.residual(o, u, gg, w, region))):
                dev = up(be, out)
                extra = (om,) if verb == "smooth" else ()
                getattr(be, verb)(dev, up(be, u), up(be, g) if g_on else None, w, *extra, region)
                want = out.copy()
                ref(want)
                assert_same_bits(down(be, dev), want, f"{verb} {region} g={g_on}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", *TABLE_CASES])
def test_transfer_verbs_equal_mg_ops_bitwise(dtype, kind):
    be, rng = gpu(dtype, "edge"), np.random.default_rng(2)
    if kind == "random":
        fine_n, coarse_n = (37, 45), (13, 22)
        dt = (*restrict_tables(rng, dtype, coarse_n, (41, 49)), np.dtype(dtype).type(3.5))
        ut = (rng.integers(0, 16, 37), values((37, 2), dtype, rng), rng.integers(0, 25, 45), values((45, 2), dtype, rng))
    else:
        fine_n, coarse_n, dt, ut = real_tables({**MG_CASE, "boundary": TABLE_CASES[kind], "numerics": {"dtype": dtype}},
                                               dtype, 0)
    d_dev, u_dev = device_tables(be, dt, ut)
    fine = values((fine_n[0] + 4, fine_n[1] + 4), dtype, rng)
    coarse = values((coarse_n[0] + 4, coarse_n[1] + 4), dtype, rng)
    creg, freg = (2, 2 + coarse_n[0], 2, 2 + coarse_n[1]), (2, 2 + fine_n[0], 2, 2 + fine_n[1])
    gc = up(be, coarse)
    be.restrict(gc, up(be, fine), creg, d_dev)
    want = coarse.copy()
    mg_ops.restrict(want, fine, creg, *dt)
    assert_same_bits(down(be, gc), want, "restrict")
    u = up(be, fine)
    be.prolong(u, up(be, coarse), freg, u_dev)
    want = fine.copy()
    mg_ops.prolong(want, coarse, freg, *ut)
    assert_same_bits(down(be, u), want, "prolong")


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_max_abs_clear_and_fill_on_the_device(dtype):
    be, rng = gpu(dtype), np.random.default_rng(3)
    region = (2, 9, 2, 15)
    e, r = values((11, 17), dtype, rng), values((11, 17), dtype, rng)
    minv = values((91, 91), dtype, rng)
    dev = up(be, e)
    be.solve(dev, up(be, r), be.table(minv, True), region)
    want = e.copy()
    mg_ops.solve(want, r, minv, region)
    assert_same_bits(down(be, dev), want, "solve")

    a = values(SHAPE, dtype, rng)
    a[4, 7] = -300.0
    assert be.max_abs(up(be, a), REGIONS[0]) == mg_ops.max_abs(a, REGIONS[0]) == 300.0
    assert be.max_abs(up(be, a), REGIONS[4]) == 0.0
    a[10, 20] = np.nan
    assert be.max_abs(up(be, a), REGIONS[0]) == float("inf")
    assert be.max_abs(up(be, a), (2, 9, 2, 41)) == mg_ops.max_abs(a, (2, 9, 2, 41))

    dev = up(be, a)
    be.clear(dev)
    assert_same_bits(down(be, dev), np.zeros(SHAPE, dtype), "clear")

    for kind, sides in FILL_KINDS.items():
        c = validate_case({"name": "f", "grid": {"nx": 39, "ny": 25, "lx": 1.3}, "boundary": sides,
                           "numerics": {"dtype": dtype}, "run": {"steps": 1}})
        fill = boundary.make_fill(c, decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c)), 2)
        host = values(SHAPE, dtype, rng)
        dev = up(be, host)
        be.fill(dev, fill)
        fill.apply(host)
        assert_same_bits(down(be, dev), host, f"fill {kind}")


def test_overlap_order_interior_on_main_edges_on_edge_then_fill():
    """What a sweep does in the overlap mode, many times over: the interior on main, the edge strips on edge
    (after main's previous work, as the exchanger orders them), then the fill (which reads both), timed."""
    dtype, sweeps = "float64", 40
    be, rng = gpu(dtype), np.random.default_rng(4)
    c = validate_case({"name": "f", "grid": {"nx": 39, "ny": 25}, "boundary": FILL_KINDS["mixed"], "run": {"steps": 1}})
    fill = boundary.make_fill(c, decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c)), 2)
    host = values(SHAPE, dtype, rng)
    fill.apply(host)
    want = [host.copy(), host.copy()]
    dev = [up(be, host), up(be, host)]
    w, om, timer = weights(dtype, rng), np.float64(0.8), Timer()
    timer.level = 0
    inner, edges = (4, 25, 4, 39), [(2, 4, 2, 41), (25, 27, 2, 41), (4, 25, 2, 4), (4, 25, 39, 41)]
    for _ in range(sweeps):  # the staged transport's events (gpu_exchange.StagedTransport.open / finished)
        before_interior, before_edges = be._record(be.main), be._record(be.edge)
        be.main.wait_event(before_edges)
        be.active = be.main
        be.timed(timer, lambda: be.smooth(dev[1], dev[0], None, w, om, inner))
        be.edge.wait_event(before_interior)  # not this sweep's interior: the two run side by side
        be.active = be.edge
        be.timed(timer, lambda: [be.smooth(dev[1], dev[0], None, w, om, r) for r in edges])
        be.timed(timer, lambda: be.fill(dev[1], fill))
        for r in (inner, *edges):
            mg_ops.smooth(want[1], want[0], None, w, om, r)
        fill.apply(want[1])
        dev.reverse()
        want.reverse()
    assert_same_bits(down(be, dev[0]), want[0], "after the sweeps")
    be.synchronize()
    assert timer.levels[0]["compute"] > 0 and timer.levels[0]["compute"] == pytest.approx(timer.seconds["compute"])


# whole runs ------------------------------------------------------------------------------------------------
def case_data(tmp_path, name, dtype, cycle, sides, backend="cupy", **parallel):
    return {**MG_CASE, "name": name, "initial": {"kind": "random"}, "boundary": RUN_SIDES[sides],
            "run": {"steps": 8}, "multigrid": {"coarsest": 16, "cycle": cycle}, "numerics": {"dtype": dtype},
            "backend": {"name": backend}, "parallel": parallel, "output": {"dir": str(tmp_path / name), "vtk": False}}


def last_snapshot(tmp_path, name):
    with h5py.File(tmp_path / name / "fields.h5") as f:
        return f["u"][-1]


def numpy_run(tmp_path, dtype, cycle, sides):
    rec = Run(validate_case(case_data(tmp_path, "numpy", dtype, cycle, sides, "numpy")),
              options=Options(ceiling=False)).execute()
    return last_snapshot(tmp_path, "numpy"), rec["run"]["residuals"]


RUNS = [(d, cyc, "example") for d in DTYPES for cyc in "VWF"] + [
    ("float64", "V", "periodic-x"), ("float32", "V", "periodic-x"), ("float64", "W", "neumann-periodic"),
    ("float32", "F", "neumann-periodic")]


@pytest.mark.parametrize("dtype,cycle,sides", RUNS, ids=lambda x: str(x))
def test_whole_runs_equal_numpy_bitwise(tmp_path, dtype, cycle, sides):
    want, want_res = numpy_run(tmp_path, dtype, cycle, sides)
    run = Run(validate_case(case_data(tmp_path, "gpu", dtype, cycle, sides)), options=Options(ceiling=False))
    rec = run.execute()
    assert_same_bits(last_snapshot(tmp_path, "gpu"), want, "the last snapshot")
    assert rec["run"]["residuals"] == want_res and len(want_res) == 8
    assert run.mg.graphs is not None and rec["resources"]["devices"][0]["multigrid_graphs"]["replays"] >= 8  # issue 35
    levels = run.timer.levels
    assert len(levels) == len(run.mg.grids) and all(t["compute"] > 0 for t in levels.values()), levels
    assert sum(t["compute"] for t in levels.values()) == pytest.approx(run.timer.seconds["compute"])


IMPLICIT = [("float64", "backward-euler", "example"), ("float64", "crank-nicolson", "neumann-periodic"),
            ("float32", "crank-nicolson", "neumann-periodic"), ("float32", "backward-euler", "example")]


@pytest.mark.parametrize("dtype,scheme,sides", IMPLICIT, ids=lambda x: str(x))
def test_implicit_heat_steps_equal_numpy_bitwise(tmp_path, dtype, scheme, sides):
    """Implicit heat (issue 23) on the GPU: the right-hand side through the one-step kernel, every solve's
    cycles and the field bitwise equal to numpy's."""
    def heat(name, backend):
        data = case_data(tmp_path, name, dtype, "V", sides, backend)
        data["physics"] = {"equation": "heat", "scheme": scheme, "dt": 2e-3}
        data["run"] = {"steps": 4, "tolerance": 1e-5 if dtype == "float32" else 1e-9}
        return Run(validate_case(data), options=Options(ceiling=False)).execute()

    want, got = heat("numpy", "numpy"), heat("gpu", "cupy")
    assert_same_bits(last_snapshot(tmp_path, "gpu"), last_snapshot(tmp_path, "numpy"), "the last snapshot")
    assert [h["cycles"] for h in got["solver"]["history"]] == [h["cycles"] for h in want["solver"]["history"]]


MPI_RUNS = [("float64", "V", "example", {"halo": "overlap"}),
            ("float32", "W", "neumann-periodic", {"halo": "overlap", "decomposition": "cart", "dims": [1, 2]}),
            ("float64", "F", "periodic-x", {"halo": "blocking", "decomposition": "cart", "dims": [1, 2]}),
            ("float64", "W", "dirichlet", {"halo": "overlap"})]  # (the shared levels' tail in one block on each rank)


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("dtype,cycle,sides,parallel", MPI_RUNS, ids=["overlap-rows", "overlap-cols", "blocking-cols",
                                                                                    "dirichlet-tail"])
def test_two_ranks_sharing_a_gpu_equal_one_numpy_process_bitwise(tmp_path, dtype, cycle, sides, parallel):
    """Distributed levels (halo exchanges of every depth on the GPU transport, the overlap mode's two streams),
    then shared ones (restricted parts gathered: get/put): bitwise equal to one numpy process."""
    want, want_res = numpy_run(tmp_path, dtype, cycle, sides)
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(case_data(tmp_path, "gpu", dtype, cycle, sides, share_gpus=True, **parallel)))
    res = mpirun(2, ["run", str(path), "--quiet"], timeout=600, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert_same_bits(last_snapshot(tmp_path, "gpu"), want, "the last snapshot")
    rec = json.loads((tmp_path / "gpu" / "record.json").read_text())
    assert rec["run"]["residuals"] == [list(r) for r in want_res]


# issue 35: the stop test in one pass, whole cycles as graphs -------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_residual_max_equals_residual_then_max_abs_on_the_device(dtype):
    from test_mg_emulated import face_weights

    be, rng = gpu(dtype), np.random.default_rng(35)
    for faces in (False, True):
        for region in REGIONS:
            u, g, r = (values(SHAPE, dtype, rng) for _ in range(3))
            w = face_weights(dtype, rng, 1.0) if faces else weights(dtype, rng)
            dev_w = w.with_data(ax=up(be, w.ax), ay=up(be, w.ay)) if faces else w
            for g_on in (False, True):
                gg = g if g_on else None
                want = r.copy()
                (mg_ops.vresidual if faces else mg_ops.residual)(want, u, gg, w, region)
                dev_r, dev_u, dev_g = up(be, r), up(be, u), up(be, g) if g_on else None
                be.residual_max(dev_r, dev_u, dev_g, dev_w, region)
                assert be.norm() == mg_ops.max_abs(want, region), (faces, region, g_on)
                assert_same_bits(down(be, dev_r), want, f"residual {faces} {region} {g_on}")
                be.residual_max(None, dev_u, dev_g, dev_w, region)
                assert be.norm() == mg_ops.max_abs(want, region)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tiled_sweeps_on_the_device_equal_the_verbs_they_replace(dtype):
    """CupyMultigrid.sweeps (mg_sweeps, tiles of cupy_mg.tile_of(dtype)) on a field of many tiles (partial ones at the far
    edges), every case of test_mg_emulated.SWEEP_CASES: bitwise the separate verbs of mg_ops, u untouched."""
    from test_mg_emulated import SWEEP_CASES, SweepsCase

    be, rng = gpu(dtype), np.random.default_rng(351)
    region = (2, 135, 2, 203)  # 133 x 201 points: 8 x 3 tiles of 26 x 58 (float32: 4 x 6 of 58 x 26), the last partial
    for n, g_on, tail, corrected in SWEEP_CASES + [(2, True, "keep", True)]:
        c = SweepsCase(rng, dtype, (137, 205), region, n, g_on, tail, corrected)
        dev_u, dev_out, dev_r, dev_g = up(be, c.u), up(be, c.out), up(be, c.r), (up(be, c.g) if g_on else None)
        extra = {None: None, "residual": ("residual", dev_r, c.w), "max": ("max", None, c.w),
                 "both": ("max", dev_r, c.w), "keep": ("max", dev_r, c.w)}[tail]
        dev_tables = (be.table(c.tables[0]), be.table(c.tables[1], True), be.table(c.tables[2]),
                      be.table(c.tables[3], True))
        be.sweeps(dev_out, dev_u, dev_g, c.sweeps, region, extra,
                  (up(be, c.e), dev_tables) if corrected is True else None, corrected == "zero")
        c.check(down(be, dev_out), down(be, dev_u), down(be, dev_r), be.norm() if extra and extra[0] == "max" else None)


def lid_run(tmp_path, name, dtype="float64", n=255, **extra):
    data = {**MG_CASE, "name": name, "grid": {"nx": n, "ny": n - 30}, "initial": {"kind": "random"},
            "boundary": {"top": 1.0, "bottom": 0.5, "left": 0.0, "right": -1.0}, "run": {"steps": 12},
            "multigrid": {"coarsest": 16},
            "numerics": {"dtype": dtype}, "backend": {"name": "cupy"},
            "output": {"dir": str(tmp_path / name), "vtk": False}, **extra}
    run = Run(validate_case(data), options=Options(ceiling=False))
    return run, run.execute()


def test_graphed_cycles_equal_launched_cycles_and_partition_the_loop(tmp_path, monkeypatch):
    """One cycle a replay (Dirichlet sides: the sweeps tiled, the levels from 63 x 33 down one block) against the
    verbs launched one by one (STENCIL_MG_GRAPHS=0), those with every sweep a pass of its own (STENCIL_MG_TILES=0)
    and those with every coarse level's verbs launched (STENCIL_MG_TAIL=0), the same case: the same bits and
    residuals; the graphs' levels from their external events, each level's compute partitioning the whole, which
    the loop's wall time bounds."""
    graphed, rec = lid_run(tmp_path, "graphed", n=1023)
    monkeypatch.setenv("STENCIL_MG_GRAPHS", "0")
    plain, plain_rec = lid_run(tmp_path, "plain", n=1023)
    assert graphed.mg.graphs is not None and plain.mg.graphs is None
    assert graphed.mg.tail is not None and graphed.mg.tail == plain.mg.tail
    assert_same_bits(last_snapshot(tmp_path, "graphed"), last_snapshot(tmp_path, "plain"), "graphed vs launched")
    assert rec["run"]["residuals"] == plain_rec["run"]["residuals"]
    monkeypatch.setenv("STENCIL_MG_TILES", "0")  # every sweep, residual and stop test a pass of its own
    monkeypatch.setenv("STENCIL_MG_TAIL", "0")  # and every coarse level's verbs launched
    untiled, untiled_rec = lid_run(tmp_path, "untiled", n=1023)
    assert untiled.mg.tail is None
    assert_same_bits(last_snapshot(tmp_path, "untiled"), last_snapshot(tmp_path, "plain"), "tiled vs one by one")
    assert untiled_rec["run"]["residuals"] == plain_rec["run"]["residuals"]
    facts = rec["resources"]["devices"][0]["multigrid_graphs"]
    assert "external events" in facts["levels"] and facts["replays"] >= 12, facts
    levels = graphed.timer.levels  # (the tail's time goes to its first level)
    assert len(levels) == graphed.mg.tail + 1 and all(t["compute"] > 0 for t in levels.values())
    assert sum(t["compute"] for t in levels.values()) == pytest.approx(graphed.timer.seconds["compute"])
    t = graphed.timer.seconds
    assert t["compute"] < graphed.loop.loop_seconds * 1.05, (t, graphed.loop.loop_seconds)


def test_graphs_without_external_events_charge_level_0(tmp_path, monkeypatch):
    from solver.backends.cupy_mg import CupyMultigrid

    monkeypatch.setattr(CupyMultigrid, "_mg_driver_fn", lambda self: None)
    run, rec = lid_run(tmp_path, "whole", dtype="float32")
    assert run.mg.graphs is not None and "level 0" in rec["resources"]["devices"][0]["multigrid_graphs"]["levels"]
    levels = run.timer.levels
    assert set(levels) == {0} and levels[0]["compute"] == pytest.approx(run.timer.seconds["compute"])


def test_implicit_and_cg_cycles_through_graphs_equal_numpy_bitwise(tmp_path):
    """Implicit steps (a source, a convective side) and conjugate gradients (face fields) with their cycles as
    graph replays: bitwise numpy's."""
    from test_mg_emulated import GRAPH_RUNS, graph_run

    for name in ("crank-nicolson-source", "cg-faces-source", "F-neumann-periodic", "backward-euler-dirichlet",
                 "V-dirichlet-default", "W-dirichlet-1-3", "F-dirichlet-1-2"):  # (Dirichlet sides: sweeps tiled,
        # be.sweeps; the coarse levels in one block, mg_tail)
        spec = GRAPH_RUNS[name]
        want, want_rec, _ = graph_run(tmp_path, f"numpy-{name}", spec)
        dtype, sections = spec
        got, rec, run = graph_run(tmp_path, f"gpu-{name}", (dtype, {**sections, "backend": {"name": "cupy"}}))
        assert run.mg.graphs is not None and run.mg.graphs.graphs, name
        assert_same_bits(got, want, name)
        assert rec["run"].get("residuals") == want_rec["run"].get("residuals"), name
