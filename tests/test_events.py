"""Time as the user gives it (issue 44): the planner of events (solver/core/events.py) inspected without running,
run.t_end and output times landing exactly, source windows as exact integrals over each step (the delivered
energy is the window's to rounding; Crank-Nicolson keeps order 2 across window edges, measured against the exact
solution in time of the same space discretisation: tests/semidiscrete.py), restarts, and bad input."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from conftest import stencil, write_case
from semidiscrete import solution

from solver import api
from solver.case import validate_case
from solver.core import sources
from solver.core.events import Plan, close

CLOSED = {side: {"kind": "neumann"} for side in ("bottom", "top", "left", "right")}


def case(run, physics=None, output=None, **extra):
    data = {"name": "e", "grid": {"nx": 13, "ny": 9}, "physics": {"equation": "heat", **(physics or {})},
            "run": run, "backend": {"name": "numpy"}, "output": {"vtk": False, **(output or {})}}
    data.update(extra)
    return validate_case(data)


def run(tmp_path, name, c, **kw):
    c = api.with_fields(c, {"output.dir": str(tmp_path / name)})
    return api.run(c, overwrite=True, progress=False, ceiling=False, **kw)


# the plan, without running ------------------------------------------------------------------------------
def test_a_window_opening_at_nineteen_nineteenths_opens_at_step_nineteen():
    """19 x (0.05 / 19) = 0.049999999999999996: the window [0.05, 0.1) is on from step 19 exactly and off from
    step 38, each step wholly (weight 1), the steps between those edges whole."""
    dt = 0.05 / 19
    assert 19 * dt < 0.05
    c = case({"steps": 60}, {"scheme": "backward-euler", "dt": dt, "source": [{"kind": "constant", "value": 1.0, "active": [0.05, 0.1]}]})
    plan = Plan(c)
    weights = [sources.step_weights(c, plan.span(k)) for k in range(60)]
    assert [k for k, w in enumerate(weights) if w] == list(range(19, 38))
    assert all(w == ((0, 1.0),) for w in weights[19:38])
    assert plan.changes() == [19, 38]


def test_t_end_and_output_times_split_the_steps_they_fall_between():
    """Multiples of dt stay step boundaries; an output time between two adds a boundary there; t_end off the grid
    ends a shortened last step; a time within rounding of a multiple is that multiple (its time the event's)."""
    c = case({"t_end": 0.1031}, {"dt": 0.001}, {"times": [0.0, 0.3 / 10, 0.0333, 0.05]})
    plan = Plan(c)
    assert plan.steps == 105  # 103 whole steps, 0.0333 between 33 and 34 (+1), 0.1031 after 103 (+1)
    boundaries = [plan.time(k) for k in range(plan.steps + 1)]
    assert all(b < a for b, a in zip(boundaries, boundaries[1:]))
    assert boundaries[-1] == 0.1031 and plan.time(51) == 0.05 and boundaries[30] == 0.3 / 10
    assert plan.marks("output") == [0, 30, 34, 51] and plan.marks("end") == [105]
    assert plan.time(34) == 0.0333 and plan.span(33).dt == pytest.approx(0.0003) and plan.span(34).dt == pytest.approx(0.0007)
    assert plan.span(50).dt == 0.001 and plan.span(104).dt == pytest.approx(0.0001)
    assert plan.shortened(plan.steps) == [33, 34, 104]
    assert plan.changes() == [33, 34, 35, 104]


def test_events_merge_within_rounding_and_t_end_wins():
    c = case({"t_end": 0.3}, {"scheme": "backward-euler", "dt": 0.1, "source": [{"kind": "constant", "value": 1.0, "active": [0.1 + 0.2, 1.0]}]},
             {"interval": 0.1})
    plan = Plan(c)
    assert [e.t for e in plan.events] == [0.0, 0.1, 0.2, 0.3]
    assert set(plan.events[-1].kinds) == {"end", "output"} and plan.steps == 3
    assert close(0.1 + 0.2, 0.3) and not close(0.3, 0.3000001)


def test_the_horizon_runs_to_the_next_time_the_field_is_seen():
    """Adaptive steps judge their error at the next output, probe time or t_end; window edges and checkpoints are not
    seen; snapshots or probe samples by step count make every step's field seen (horizon 0)."""
    source = {"source": [{"kind": "constant", "value": 1.0, "active": [0.02, 0.07]}]}
    adaptive = {"t_end": 0.1, "time_tolerance": 1e-3}
    plan = Plan(case(adaptive, {"scheme": "backward-euler", "dt": 0.01, **source},
                     {"times": [0.03], "checkpoint_interval": 0.05}))
    assert plan.horizon(0.0) == pytest.approx(0.03) and plan.horizon(0.01) == pytest.approx(0.02)
    assert plan.horizon(0.03) == 0.0 and plan.horizon(0.04) == pytest.approx(0.06)  # past 0.05's checkpoint, 0.07's edge
    probes = {"probes": [{"name": "p", "kind": "point", "at": [0.5, 0.5]}]}
    assert Plan(case(adaptive, {"scheme": "backward-euler"}, {**probes, "probe_interval": 0.025})).horizon(0.03) \
        == pytest.approx(0.02)
    assert Plan(case(adaptive, {"scheme": "backward-euler"}, probes)).horizon(0.03) == 0.0  # sampled every step
    counted = case(adaptive, {"scheme": "backward-euler"}, {"every": 5})
    assert Plan(counted).horizon(0.03) == 0.0
    assert any(n.startswith("note: output.every:") for n in counted.notes())  # validate and run say so
    assert not any("output.every" in n for n in case(adaptive, {"scheme": "backward-euler"}, probes).notes())


def test_validate_prints_dt_steps_and_t_end_together(tmp_path):
    path = write_case(tmp_path / "v.yaml", run={"steps": None, "t_end": 0.0123}, physics={"dt": 0.0005},
                      output={"times": [0.0, 0.00555]})
    res = stencil(["validate", str(path)])
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.replace("│", " ").split())
    assert "dt = 0.0005 x 26 steps to t_end = 0.0123 (3 of them shortened to land on output times or t_end)" in text


# windows at their exact times ----------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["explicit", "backward-euler", "crank-nicolson"])
def test_the_delivered_energy_is_the_windows_to_rounding(tmp_path, scheme):
    """A closed box heated by q = 2 during [a, b): the mean of u at the end is q (b - a), whether the window's
    edges fall on step boundaries or between them (1: both on, 2: both between, 3: one of each)."""
    dt = 0.001
    for k, window in enumerate([[19 * dt, 50 * dt], [0.01234, 0.04321], [0.02, 0.03333]]):
        c = case({"t_end": 0.06, "tolerance": None if scheme == "explicit" else 1e-12}, {"scheme": scheme, "dt": dt, "source": [
            {"kind": "constant", "value": 2.0, "active": window}]}, {"fields": False},
            boundary=CLOSED, initial={"kind": "constant", "value": 0.0})
        r = run(tmp_path, f"{scheme}{k}", c)
        want = 2.0 * (window[1] - window[0])
        assert abs(r.field.mean() - want) <= 64 * np.finfo(float).eps * want, (window, r.field.mean(), want)
        assert r.record["energy"]["sources"] == pytest.approx(want * c.grid.lx * c.grid.ly, rel=1e-14)


def test_crank_nicolson_keeps_order_two_across_window_edges_and_backward_euler_one(tmp_path):
    """A smooth source (a gaussian) on for [0.0237, 0.0711): errors at t = 0.1 against the exact solution in time of
    the same discretisation, over four step sizes whose steps the edges fall between. (A source with sharp edges
    in space excites modes with alpha lambda dt >> 1, which Crank-Nicolson does not damp: there its error at a
    window edge is of the size of those modes' share, whatever dt; docs/discretisation.md.)"""
    window, t_end = [0.0237, 0.0711], 0.1
    src = {"kind": "gaussian", "center": [0.5, 0.5], "width": 0.15, "amplitude": 5.0, "active": window}
    orders = {}
    for scheme in ("crank-nicolson", "backward-euler"):
        errors = []
        for n in (10, 20, 40, 80):
            c = case({"t_end": t_end, "tolerance": 1e-12}, {"scheme": scheme, "dt": t_end / n, "source": [src]},
                     {"fields": False}, boundary={"left": {"kind": "neumann"}}, initial={"kind": "constant", "value": 0.0})
            edges = [w / (t_end / n) for w in window]
            assert all(abs(e - round(e)) > 0.01 for e in edges)  # the edges fall between steps
            r = run(tmp_path, f"{scheme}{n}", c)
            errors.append(np.abs(r.field - solution(c, np.zeros(c.shape), t_end, [window])).max())
        orders[scheme] = -np.polyfit(np.log([10, 20, 40, 80]), np.log(errors), 1)[0]
    assert orders["crank-nicolson"] >= 1.9, orders
    assert 0.9 <= orders["backward-euler"] <= 1.1, orders


def test_explicit_steps_are_first_order_across_window_edges(tmp_path):
    window, t_end = [0.0237, 0.0711], 0.1
    src = {"kind": "gaussian", "center": [0.5, 0.5], "width": 0.15, "amplitude": 5.0, "active": window}
    errors = []
    for n in (100, 200, 400, 800):
        c = case({"t_end": t_end}, {"dt": t_end / n, "source": [src]}, {"fields": False},
                 boundary={"left": {"kind": "neumann"}}, initial={"kind": "constant", "value": 0.0})
        errors.append(np.abs(run(tmp_path, f"x{n}", c).field - solution(c, np.zeros(c.shape), t_end, [window])).max())
    order = -np.polyfit(np.log([100, 200, 400, 800]), np.log(errors), 1)[0]
    assert 0.9 <= order <= 1.1, errors


# snapshots at times, t_end --------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["explicit", "backward-euler"])
def test_snapshots_land_on_output_times_and_the_run_on_t_end(tmp_path, scheme):
    """fields.h5 holds the snapshots at exactly the times asked for (with their step numbers) and the last at t_end;
    the field there is the exact decay of the sine mode over the steps taken (verify: each shortened step's own
    factor)."""
    times = [0.0, 0.00123, 0.005, 0.0071]
    c = case({"t_end": 0.0123}, {"scheme": scheme}, {"times": times}, initial={"kind": "sine"})
    r = run(tmp_path, scheme, c, verify=True)
    plan = Plan(c)
    with h5py.File(tmp_path / scheme / "fields.h5") as f:
        assert list(f["time"][()]) == times + [0.0123]
        assert list(f["step"][()]) == [plan.marks("output")[k] for k in range(4)] + [plan.steps]
    assert r.record["run"]["t"] == 0.0123 and r.record["run"]["steps"] == plan.steps
    assert r.record["correctness"]["passed"]


def test_a_restart_of_a_run_with_output_times_continues_bitwise(tmp_path):
    """Checkpoints every 0.004 of time (steps shortened to land on them); stopped at t = 0.008 by its t_end, then
    continued to 0.0123 from the checkpoint: the same snapshots and final field as the run that never stopped."""
    common = dict(physics={"dt": 0.00045}, initial={"kind": "random", "seed": 2}, boundary={"top": 1.0},
                  output={"times": [0.001, 0.006, 0.008], "checkpoint_interval": 0.004, "vtk": False})
    whole = write_case(tmp_path / "whole.yaml", run={"steps": None, "t_end": 0.0123}, **common)
    assert stencil(["run", str(whole), "-q"]).returncode == 0
    part = write_case(tmp_path / "part.yaml", run={"steps": None, "t_end": 0.008}, **common)
    assert stencil(["run", str(part), "-q"]).returncode == 0
    out = tmp_path / "out_part"
    res = stencil(["run", str(part), "-q", "--restart", str(out), "--set", "run.t_end=0.0123"])
    assert res.returncode == 0, res.stderr
    with h5py.File(out / "fields.h5") as a, h5py.File(tmp_path / "out_whole" / "fields.h5") as b:
        assert list(a["time"][()]) == list(b["time"][()]) and list(a["step"][()]) == list(b["step"][()])
        assert np.array_equal(a["u"][()], b["u"][()])


# bad input ---------------------------------------------------------------------------------------------------
BAD = {
    "both steps and t_end": ({"run": {"steps": 10, "t_end": 1.0}}, ["run.t_end", "keep one"]),
    "neither steps nor t_end": ({"run": {"steps": None}}, ["run.t_end", "give run.t_end"]),
    "output time past t_end": ({"run": {"steps": None, "t_end": 0.01}, "output": {"times": [0.005, 0.02]}},
                               ["output.times", "0.02", "outside the run's [0, 0.01]"]),
    "output times unsorted": ({"run": {"steps": None, "t_end": 0.01}, "output": {"times": [0.005, 0.002]}},
                              ["output.times", "sort the times"]),
    "probe outside the plate": ({"output": {"probes": [{"name": "p", "kind": "point", "at": [1.5, 0.5]}]}},
                                ["output.probes.0.at", "outside the plate", "inside it"]),
    "tolerance zero": ({"physics": {"scheme": "backward-euler"}, "run": {"steps": None, "t_end": 0.1,
                                                                        "time_tolerance": 0.0}},
                       ["run.time_tolerance", "> 0"]),
    "dt floor above the ceiling": ({"physics": {"scheme": "backward-euler"}, "run": {
        "steps": None, "t_end": 0.1, "time_tolerance": 1e-3, "dt_min": 0.01, "dt_max": 0.001}},
        ["run.dt_min", "above run.dt_max", "lower dt_min or raise dt_max"]),
    "adaptive explicit": ({"run": {"steps": None, "t_end": 0.1, "time_tolerance": 1e-3}},
                          ["run.time_tolerance", "physics.scheme"]),
    "adaptive with steps": ({"physics": {"scheme": "backward-euler"}, "run": {"time_tolerance": 1e-3}},
                            ["run.steps", "give run.t_end"]),
    "steady with fixed implicit steps": ({"physics": {"scheme": "backward-euler"}, "run": {"until": "steady"}},
                                         ["run.until", "run.time_tolerance"]),
}


@pytest.mark.parametrize("label", BAD)
def test_bad_time_input_exits_2_with_one_line_and_writes_nothing(tmp_path, label):
    sections, needles = BAD[label]
    path = write_case(tmp_path / "bad.yaml", **sections)
    res = stencil(["run", str(path)])
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    assert not (tmp_path / "out_bad").exists()


def test_time_tiles_and_two_ranks_take_shortened_steps_and_windows_bitwise(tmp_path):
    """numba with time tiles of 4 (batches end at every change of weights) and output times between steps: verify's
    numpy reference, step by step, bitwise."""
    c = case({"t_end": 0.0201, "check_every": 10}, {"source": [
        {"kind": "gaussian", "center": [0.3, 0.6], "width": 0.1, "amplitude": 10.0, "active": [0.00301, 0.0111]}]},
        {"times": [0.00511, 0.01]}, grid={"nx": 61, "ny": 47}, initial={"kind": "random", "seed": 5},
        boundary={"top": 1.0, "left": {"kind": "neumann", "flux": 0.5}}, backend={"name": "numba", "time_tile": 4})
    r = run(tmp_path, "tiles", c, verify=True)
    assert r.record["correctness"]["passed"] and r.record["correctness"]["mismatched_points"] == 0
    assert r.record["run"]["t"] == 0.0201
