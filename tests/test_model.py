"""The scaling model's parts without MPI: networks, interpolation, the schedule, the lockstep simulation and
the prediction from constructed inputs (the measured path is in tests/test_model_mpi.py)."""

from dataclasses import replace

import numpy as np
import pytest
from conftest import stencil, write_case

from solver.core.errors import InputError
from solver.model import network, schedule
from solver.model.inputs import Inputs
from solver.model.interp import loglin, loglog
from solver.model.predict import bracket, predict
from solver.model.problem import Placement, Problem, placement
from solver.model.simulate import Ranks, Side, simulate


# networks ---------------------------------------------------------------------------------------

def test_every_preset_loads_and_names_its_source():
    names = network.preset_names()
    assert {"infiniband-hdr", "infiniband-ndr", "slingshot", "ethernet-10g", "ethernet-25g", "ethernet-100g"} <= set(names)
    for name in names:
        n = network.load(name)
        assert n.latency > 0 and n.bandwidth > 0 and len(n.source) > 30
        assert n.seconds(1 << 20) == pytest.approx(n.latency + (1 << 20) / n.bandwidth)
        assert n.seconds(1 << 20, sharing=2) > n.seconds(1 << 20)


@pytest.mark.parametrize("text, field", [("name: x\nlatency_us: 1\nbandwidth_gbs: 2\nsource: s\nspeed: 3\n", "speed"),
                                         ("name: x\nlatency_us: -1\nbandwidth_gbs: 2\nsource: s\n", "latency_us"),
                                         ("name: x\nlatency_us: 1\nsource: s\n", "bandwidth_gbs"),
                                         ("name: x\nlatency_us: true\nbandwidth_gbs: 2\nsource: s\n", "latency_us")])
def test_a_bad_network_file_is_one_line_naming_the_field(tmp_path, text, field):
    f = tmp_path / "net.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match=field) as exc:
        network.load(str(f))
    assert "\n" not in str(exc.value) and "e.g." in str(exc.value) or "fields are" in str(exc.value)


def test_measured_network_needs_a_table_and_interpolates_it():
    with pytest.raises(InputError, match="two nodes"):
        network.load("measured", [])
    n = network.load("measured", [[8, 50e-6], [1 << 20, 8.4e-3]])
    assert n.seconds(8) == pytest.approx(50e-6) and n.seconds(1 << 20) == pytest.approx(8.4e-3)
    assert n.seconds(4 << 20) == pytest.approx(4 * 8.4e-3)  # beyond the table: at the measured rate


def test_unknown_network_on_the_command_line_is_exit_2(tmp_path):
    case = write_case(tmp_path / "m.yaml", grid={"nx": 64, "ny": 64})
    res = stencil(["model", str(case), "--nodes", "2", "--network", "nosuch", "--inputs", str(synthetic_file(tmp_path))])
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "--network" in res.stderr


# interpolation and placement ------------------------------------------------------------------------

def test_interpolation_is_loglog_between_points_and_clamped_or_proportional_beyond():
    t = [(1.0, 1.0), (100.0, 100.0)]
    assert loglog(t, 10.0) == pytest.approx(10.0) and loglog(t, 0.5) == 1.0 and loglog(t, 1000.0) == pytest.approx(1000.0)
    assert loglin([(1.0, 0.0), (100.0, 2.0)], 10.0) == pytest.approx(1.0) and loglin([(1.0, 0.0)], 5.0) == 0.0
    assert bracket(4096) == [4096] and bracket(3000) == [2048, 4096] and bracket(2) == [2]


def test_placement_from_the_command_line():
    assert placement(None, 1024, None, 16, False) == Placement(16384, 16)
    assert placement(None, 8, 2, 16, False) == Placement(16, 2)
    assert placement(40, None, None, 16, False) == Placement(40, 16)
    assert placement(None, 4, None, 16, True) == Placement(4, 1, True)
    assert Placement(40, 16).nodes == 3
    with pytest.raises(InputError, match="--ranks"):
        placement(10, 4, 2, 16, False)


# the schedule ---------------------------------------------------------------------------------------

def problem(**kw) -> Problem:
    base = dict(name="t", ny=256, nx=256, dtype="float64", steps=200, warmup=1, check_every=100, output_every=None,
                checkpoint_every=None, decomposition="rows", dims=None, halo="overlap", balance="none",
                balance_every=50, backend="numba", time_tile=None, constant_ghosts=True, periodic=(False, False))
    return Problem(**{**base, **kw})


def test_deep_tiles_are_as_equal_as_possible_and_end_with_a_plain_step_before_a_check():
    assert schedule.deep_depths(16, 8, False) == [8, 8]
    assert schedule.deep_depths(10, 8, True) == [4, 5, 1]
    assert schedule.deep_depths(3, 1, True) == [1, 1, 1]
    assert schedule.serial_depths(50, 8, True) == [8] * 6 + [1, 1]  # 49 = 6 x 8 + 1: two plain steps
    assert schedule.serial_depths(10, 4, False) == [4, 4, 2]


def test_batches_cover_every_step_once_and_check_where_the_case_says():
    p = problem(steps=200, check_every=100, warmup=1)
    for k, serial in ((1, False), (8, False), (8, True)):
        runs = schedule.batches(p, k, serial, balance=False)
        assert sum(sum(b.depths) for b in runs) == 200
        assert [b.start + sum(b.depths) for b in runs if b.check] == [100, 200]
        assert runs[0].warm and runs[0].depths == (1,) and not runs[1].warm
    # polls every 10 steps under MPI, every 50 in one process (10% of short runs), rounded up to the tile
    long = problem(steps=2000)
    assert schedule.poll_every(long, 8, serial=False) == 16 and schedule.poll_every(long, 8, serial=True) == 56
    assert schedule.poll_every(p, 8, serial=True) == 16
    assert schedule.poll_every(replace(p, lines=False), 8, serial=True) == 56  # --quiet (sweeps): no 10% cap


# the simulation -------------------------------------------------------------------------------------

def chain(p: int, compute, message=0.0, comm=0.0, overlap=True, factors=None, check=0.0, allreduce=0.0, rows=None):
    """Ranks in a row, each with its south and north neighbour."""
    nb_s = np.array([r - 1 if r > 0 else -1 for r in range(p)])
    nb_n = np.array([r + 1 if r < p - 1 else -1 for r in range(p)])
    c = np.full(p, compute, float) if np.isscalar(compute) else np.asarray(compute, float)
    f = factors if factors is not None else np.ones((p, 1))
    return Ranks({1: c}, {1: np.full(p, 0.5)}, {1: f}, {1: np.full(p, comm)}, np.full(p, check),
                 [Side(nb_s, {1: np.full(p, message)}), Side(nb_n, {1: np.full(p, message)})], allreduce, overlap, rows)


def steps(n: int, check_every: int = 1000):
    return schedule.batches(problem(steps=n, check_every=check_every, warmup=0), 1, serial=False, balance=False)


def test_equal_ranks_without_messages_take_their_compute_and_never_wait():
    res = simulate(chain(4, 1e-3), steps(50), np.random.default_rng(0))
    assert res["t"] == pytest.approx(np.full(4, 50e-3)) and res["wait"] == pytest.approx(np.zeros(4))


def test_one_slow_rank_sets_the_pace_of_all():
    res = simulate(chain(4, [1e-3, 1e-3, 2e-3, 1e-3]), steps(100), np.random.default_rng(0))
    assert res["t"].max() == pytest.approx(100 * 2e-3, rel=0.05)
    assert res["wait"][0] > 0.4 * res["t"][0]  # the fast ranks spend about half their time waiting


def test_overlap_hides_a_message_shorter_than_the_interior_and_blocking_does_not():
    hidden = simulate(chain(3, 1e-3, message=0.2e-3), steps(20), np.random.default_rng(0))
    exposed = simulate(chain(3, 1e-3, message=0.2e-3, overlap=False), steps(20), np.random.default_rng(0))
    assert hidden["t"].max() == pytest.approx(20e-3, rel=0.02)
    assert exposed["t"].max() > 20 * 1.15e-3


def test_a_check_waits_for_the_slowest_and_adds_the_allreduce():
    res = simulate(chain(2, [1e-3, 3e-3], check=0.1e-3, allreduce=0.05e-3), steps(10, check_every=5),
                   np.random.default_rng(0))
    assert res["t"] == pytest.approx(np.full(2, 10 * 3e-3 + 2 * 0.15e-3), rel=0.01)
    assert res["collective"] == pytest.approx(np.full(2, 2 * 0.15e-3))


def test_dynamic_balance_moves_work_away_from_a_persistently_slow_rank():
    slow = chain(2, [1e-3, 2e-3])
    p = problem(steps=400, check_every=400, warmup=0)
    static = simulate(slow, schedule.batches(p, 1, False, balance=False), np.random.default_rng(0))
    dyn = simulate(chain(2, [1e-3, 2e-3], rows=np.array([128, 128])), schedule.batches(p, 1, False, balance=True),
                   np.random.default_rng(0))
    assert dyn["t"].max() < 0.8 * static["t"].max()


# predictions from constructed inputs ---------------------------------------------------------------

def synthetic_entry(rate: float = 1e-9, spread: float = 0.0, per_node: int = 4, exchange: float = 20e-6) -> dict:
    """A calibration as model_probe writes it: every shape in {64..4096} x {1024, 4096}, tiles 1 and 8."""
    rng = np.random.default_rng(1)
    kernel = []
    for occ in range(1, per_node + 1):
        for pat in ("serial", "halo") if occ == 1 else ("halo",):
            for ny in (64, 256, 1024, 4096):
                for nx in (1024, 4096):
                    for k in (1, 8):
                        t = rate * ny * nx * k * (1 if k == 1 else 0.5)
                        series = [list(t * (1 + spread * rng.standard_normal(20)).clip(0.5)) for _ in range(occ)]
                        kernel.append({"occupancy": occ, "ny": ny, "nx": nx, "k": k, "pattern": pat,
                                       "tile_seconds": series, "check_seconds": rate * ny * nx,
                                       "hosts": ["h"] * occ, "node_ranks": list(range(occ)), "measured": "2026-12-01T12:00"})
    msgs = {"ranks": per_node, "per_node": per_node, "nodes": 1, "measured": "2026-12-01T12:00",
            "exchange": [[8, exchange], [1 << 20, exchange + (1 << 20) / 5e9]],
            "pingpong": {"intra": [[8, 1e-6], [1 << 20, 2e-4]], "inter": []},
            "allreduce": [[2, 2e-6], [per_node, 5e-6]], "write_bytes_per_second": 1e9}
    return {"key": "synthetic", "kernel": kernel, "messages": msgs, "gpu": [],
            "placement": {"hosts": ["h"], "cpu": "synthetic"}}


def synthetic_file(tmp_path):
    import json

    f = tmp_path / "inputs.json"
    f.write_text(json.dumps({"entry": synthetic_entry()}))
    return f


def test_weak_scaling_without_spread_on_one_node_is_nearly_flat():
    inputs = Inputs(synthetic_entry(), "test")
    p1 = predict(problem(ny=1024, nx=1024), Placement(1, 4), inputs, None)
    p4 = predict(problem(ny=4096, nx=1024, dims=(4, 1)), Placement(4, 4), inputs, None)
    assert p1["parts"]["compute"] == pytest.approx(1024 * 1024 * 0.5e-9, rel=0.05)  # tile 8: half the per-step time
    assert p4["seconds_per_step"] < 1.2 * p1["seconds_per_step"]
    assert p4["parts"]["halo"] > 0 and p1["parts"]["halo"] == 0
    assert sum(p4["parts"].values()) == pytest.approx(p4["seconds_per_step"], rel=1e-6)


def test_spread_and_a_slow_network_show_up_as_waiting_and_halo_time():
    inputs = Inputs(synthetic_entry(spread=0.3), "test")
    slow = network.Network("slow", 1e-3, 1e8, "test")
    p = problem(ny=4 * 256, nx=4096, time_tile=1)
    quiet = predict(p, Placement(4, 4), Inputs(synthetic_entry(), "test"), None)
    noisy = predict(p, Placement(4, 4), inputs, None)
    far = predict(p, Placement(4, 1), Inputs(synthetic_entry(), "test"), slow)
    far_blocking = predict(Problem(**{**p.__dict__, "halo": "blocking"}), Placement(4, 1), Inputs(synthetic_entry(), "test"), slow)
    assert noisy["parts"]["waiting"] > 2 * quiet["parts"]["waiting"]
    # the 1 ms latency each step: mostly hidden behind the 1 ms interior with overlap, paid in full without
    assert quiet["seconds_per_step"] < far["seconds_per_step"] < quiet["seconds_per_step"] + 0.5e-3
    assert far_blocking["seconds_per_step"] > quiet["seconds_per_step"] + 1e-3
    assert far["nodes"] == 4 and far["network"] == "slow"


def test_deep_halos_pay_for_latency():
    slow = network.Network("slow", 1e-3, 1e10, "test")
    inputs = Inputs(synthetic_entry(), "test")
    p = problem(ny=4 * 64, nx=1024, halo="nonblocking")
    per_step = predict(Problem(**{**p.__dict__, "time_tile": 1}), Placement(4, 1), inputs, slow)
    deep = predict(Problem(**{**p.__dict__, "time_tile": 8}), Placement(4, 1), inputs, slow)
    assert deep["halo_depth"] == 8 and per_step["halo_depth"] == 1
    assert deep["seconds_per_step"] < 0.3 * per_step["seconds_per_step"]


def test_jacobi_checks_its_first_step_and_multigrid_or_implicit_steps_are_outside_the_model(tmp_path):
    runs = schedule.batches(problem(equation="laplace", method="jacobi", warmup=0), 1, serial=False, balance=False)
    assert runs[0].depths == (1,) and runs[0].check  # the loop's r0 check after step 1
    assert problem(equation="laplace", method="multigrid").outside().startswith("physics.solver: multigrid")
    assert problem(method="crank-nicolson").outside().startswith("physics.scheme: crank-nicolson")
    assert problem().outside() is None
    case = write_case(tmp_path / "mg.yaml", grid={"nx": 65, "ny": 65}, physics={"equation": "laplace", "solver": "multigrid"})
    res = stencil(["model", str(case), "--ranks", "2"])
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "physics.solver" in res.stderr


def test_more_ranks_than_rows_are_predicted_with_a_process_grid_and_say_so(tmp_path):
    case = write_case(tmp_path / "thin.yaml", grid={"nx": 256, "ny": 64})
    res = stencil(["model", str(case), "--nodes", "64", "--ranks-per-node", "2", "--inputs", str(synthetic_file(tmp_path))])
    assert res.returncode == 0, res.stderr
    assert "rows cannot split 64 rows over 128 ranks" in res.stdout and "(cart)" in res.stdout
