"""The third hostile round (issue 37), class by class, with real processes, a real mpirun and real files
damaged on disk: a result lost at an ending; a restart that is not the same run; the record's words about how
a run ended against its measured figures; settings that cannot smooth; crashes on odd but valid input and on
bad input files; counts without a bound; the Python API's contract; tools/cluster.sh's arguments.

Bad input is exit 2 with one line naming the file or field and the fix, no traceback, nothing written."""

import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import ROOT, mpirun, needs_mpi, stencil, write_case
from test_hostile2 import one_error_line, tree

from solver import api
from solver.case import load_case
from solver.core import stops
from solver.core.errors import InputError
from solver.run import Options, Run

LID = {"grid": {"nx": 31, "ny": 31}, "physics": {"equation": "laplace", "solver": "multigrid"},
       "initial": {"kind": "random", "seed": 3}, "boundary": {"top": 1.0, "left": 0.25},
       "run": {"steps": 200, "check_every": 1}, "backend": {"name": "numpy"}}


def fields(out):
    """(steps, last snapshot) of a run's fields.h5."""
    with h5py.File(out / "fields.h5") as f:
        return list(f["step"][()]), f["u"][-1]


def record(out):
    return json.loads((out / "record.json").read_text())


# a result lost: every ending writes its final field -------------------------------------------------------

ENDINGS = {  # (case sections, how the record says it ended)
    "multigrid at its floor": ({**LID, "output": {"every": 7}}, "floor"),
    "multigrid converged": ({**LID, "run": {"steps": 200, "tolerance": 1e-9}, "output": {"every": 7}}, "converged"),
    "jacobi converged": ({**LID, "physics": {"equation": "laplace"}, "run": {"steps": 5000, "tolerance": 1e-3,
                                                                          "check_every": 10},
                          "output": {"every": 1000}}, "converged"),
}


@pytest.mark.parametrize("label", ENDINGS)
def test_every_ending_writes_its_final_field_to_fields_h5(tmp_path, label):
    """The run ends between snapshots: its final field is fields.h5's last snapshot, at the record's last step,
    bitwise the field of the checkpoint written where the loop ended."""
    sections, ended = ENDINGS[label]
    out = tmp_path / "out"
    case = write_case(tmp_path / "c.yaml", **{**sections, "output": {**sections["output"], "dir": str(out), "vtk": False,
                                                                      "checkpoint_every": 100000}})
    res = stencil(["run", str(case), "-q"])
    assert res.returncode == 0, res.stderr
    rec = record(out)
    last = rec["run"]["steps"]
    assert (rec["run"]["stopped_by"] == ended) or (ended == "converged" and rec["run"]["converged"])
    assert last % sections["output"]["every"] and 0 < last < sections["run"]["steps"]  # between snapshots, early
    steps, u = fields(out)
    assert steps[-1] == last
    with h5py.File(out / "checkpoint.h5") as f:
        assert f.attrs["step"] == last and np.array_equal(f["u"][()], u)


@pytest.mark.parametrize("extra", [{}, {"physics.equation": "heat", "physics.scheme": "crank-nicolson", "run.steps": 6},
                                   {"physics.solver": "jacobi", "run.tolerance": 1e-3, "run.steps": 5000,
                                    "run.check_every": 10}],
                         ids=["multigrid floor", "crank-nicolson", "jacobi converged"])
def test_the_apis_last_snapshot_is_the_result_field(tmp_path, extra):
    case = api.build_case({**LID, "name": "a", "output": {"dir": str(tmp_path / "a"), "every": 1000, "vtk": False}}, extra)
    res = api.run(case, progress=False, ceiling=False)
    u = res.snapshots["u"]
    assert int(res.snapshots["step"][-1]) == res.record["run"]["steps"]
    assert np.array_equal(np.asarray(u[-1]), res.field)


# a restart that is the same run, for every solver and stop rule --------------------------------------------

RESTARTS = {  # solver and stop rule: the case's sections (numpy, one process, in this process, real files)
    "jacobi, run.steps": {**LID, "physics": {"equation": "laplace"}, "run": {"steps": 300, "check_every": 20}},
    "jacobi, tolerance": {**LID, "physics": {"equation": "laplace"}, "run": {"steps": 5000, "tolerance": 2e-3,
                                                                             "check_every": 20}},
    "multigrid, floor": LID,
    "multigrid, tolerance": {**LID, "run": {"steps": 200, "tolerance": 1e-11}},
    "multigrid float32, floor": {**LID, "numerics": {"dtype": "float32"}},
    "multigrid with cg, floor": {**LID, "multigrid": {"krylov": "cg"}},
    "multigrid with cg, tolerance": {**LID, "multigrid": {"krylov": "cg"}, "run": {"steps": 200, "tolerance": 1e-10}},
    "backward-euler, 1e-8": {**LID, "physics": {"equation": "heat", "scheme": "backward-euler"}, "run": {"steps": 9}},
    "crank-nicolson, tolerance": {**LID, "physics": {"equation": "heat", "scheme": "crank-nicolson", "dt": 2e-3},
                                  "run": {"steps": 9, "tolerance": 1e-5}},
}


def run_in(case_path, out, steps=None, restart=None):
    case = load_case(case_path, {"--output": str(out), **({"--steps": steps} if steps else {})})
    r = Run(case, options=Options(ceiling=False, quiet=True, restart=restart))
    r.execute()
    return r


@pytest.mark.parametrize("label", RESTARTS)
def test_interrupted_and_restarted_runs_are_the_uninterrupted_run_bitwise(tmp_path, label):
    """Stopped at a step (a checkpoint there), then continued from that checkpoint: at three points from the
    first check to the last step before the end, the continued run stops at the same step, for the same
    reason, with the same field (bitwise) and the same residual history as the run that was not stopped."""
    sections = RESTARTS[label]
    path = write_case(tmp_path / "c.yaml", **{**sections, "output": {"vtk": False, "checkpoint_every": 100000}})
    ref = run_in(path, tmp_path / "ref")
    end, every = ref.state.step, sections["run"]["check_every"] if "jacobi" in label else 1
    points = sorted({every, (end // 2) // every * every, (end - 1) // every * every} - {0})
    assert end > 3 and len(points) == 3, (end, points)
    for k in points:
        out = tmp_path / f"at{k}"
        run_in(path, out, steps=k)
        again = run_in(path, out, restart=str(out))
        assert again.state.step == end, (k, again.state.step, end)
        assert (again.state.converged, again.state.stopped_by) == (ref.state.converged, ref.state.stopped_by), k
        assert again.state.residuals == ref.state.residuals, k
        assert np.array_equal(fields(out)[1], fields(tmp_path / "ref")[1]), k
        mine, theirs = record(out)["solver"], record(tmp_path / "ref")["solver"]
        if "scheme" in mine:  # implicit: this segment's solves are the uninterrupted run's from step k + 1 on
            assert mine["history"] == theirs["history"][k:], k
        else:
            assert mine["ended"] == theirs["ended"] and mine["history"] == theirs["history"], k


@needs_mpi
@pytest.mark.parametrize("krylov", ["none", "cg"])
def test_a_multigrid_run_stopped_on_two_ranks_and_continued_on_three_stops_where_one_process_does(tmp_path, krylov):
    """Near its floor (tolerance null): the continued run stops at the same cycle with the same field (with
    conjugate gradients, its residual and direction travel in the checkpoint, blocks of other ranks' shapes)."""
    lid = {**LID, "multigrid": {"krylov": krylov}}
    ref = write_case(tmp_path / "ref.yaml", **lid, output={"dir": str(tmp_path / "ref"), "vtk": False})
    assert stencil(["run", str(ref), "-q"]).returncode == 0
    end = record(tmp_path / "ref")["run"]["steps"]
    case = write_case(tmp_path / "c.yaml", **lid, parallel={"decomposition": "cart"},
                      output={"dir": str(tmp_path / "c"), "vtk": False, "checkpoint_every": 100000})
    first = mpirun(2, ["run", str(case), "-q", "--steps", str(end - 2)])
    assert first.returncode == 0, first.stderr
    second = mpirun(3, ["run", "--restart", str(tmp_path / "c"), "-q", "--steps", "200"])
    assert second.returncode == 0, second.stderr
    rec, ref_rec = record(tmp_path / "c"), record(tmp_path / "ref")
    assert rec["run"]["steps"] == end and rec["run"]["stopped_by"] == ref_rec["run"]["stopped_by"] == "floor"
    assert np.array_equal(fields(tmp_path / "c")[1], fields(tmp_path / "ref")[1])
    assert [h["residual"] for h in rec["solver"]["history"]] == [h["residual"] for h in ref_rec["solver"]["history"]]


def test_a_run_that_ended_by_a_stop_rule_is_not_continued(tmp_path):
    """Its checkpoint at the end says so: a restart would add cycles the run did not make (refused, nothing
    changed); a run paused before its end continues (the matrix above)."""
    path = write_case(tmp_path / "c.yaml", **LID, output={"dir": str(tmp_path / "c"), "vtk": False,
                                                          "checkpoint_every": 100000})
    assert stencil(["run", str(path), "-q"]).returncode == 0
    assert record(tmp_path / "c")["run"]["stopped_by"] == "floor"
    before = tree(tmp_path / "c")
    one_error_line(stencil(["run", "--restart", str(tmp_path / "c"), "-q", "--steps", "500"]),
                   "--restart", "checkpoint.h5", "ended at step", "rounding floor", "without --restart")
    assert tree(tmp_path / "c") == before


def _twice(f):
    h = f["residuals"][()]
    h[2, 0] = h[1, 0]  # a check listed twice: not a history
    del f["residuals"]
    f["residuals"] = h


def _no_direction(f):
    assert "cg_p" in json.loads(f.attrs["state"])
    del f["cg_p"]


@pytest.mark.parametrize("damage, krylov, needle", [(_twice, "none", "residuals"), (_no_direction, "cg", "state")],
                         ids=["a check listed twice", "cg's direction missing"])
def test_a_checkpoint_whose_solver_state_is_damaged_is_refused(tmp_path, damage, krylov, needle):
    path = write_case(tmp_path / "c.yaml", **{**LID, "multigrid": {"krylov": krylov}},
                      output={"dir": str(tmp_path / "c"), "vtk": False, "checkpoint_every": 100000})
    assert stencil(["run", str(path), "-q", "--steps", "5"]).returncode == 0
    with h5py.File(tmp_path / "c" / "checkpoint.h5", "r+") as f:
        damage(f)
    before = tree(tmp_path / "c")
    one_error_line(stencil(["run", "--restart", str(tmp_path / "c"), "-q", "--steps", "9"]),
                   "--restart", "checkpoint.h5", needle, "intact copy")
    assert tree(tmp_path / "c") == before


# the record's words follow from measured figures -----------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_floor_is_claimed_only_within_the_dtypes_floor_measured_from_the_field(tmp_path, dtype):
    """The record's rounding floor is 64 eps x the largest value the residual reads (the field and the
    boundary values), and the final residual lies below it."""
    res = api.run(api.build_case({**LID, "name": "f", "numerics": {"dtype": dtype},
                                  "output": {"dir": str(tmp_path / "f"), "vtk": False}}), progress=False, ceiling=False)
    s = res.record["solver"]
    assert s["stopped_by"] == "floor" and "rounding floor" in s["ended"]
    eps = float(np.finfo(dtype).eps)
    scale = max(float(np.abs(res.field).max()), 1.0)  # the lid (1.0) bounds the field: the maximum principle
    assert s["rounding_floor"] == pytest.approx(stops.FLOOR_ULPS * eps * scale, rel=1e-6)
    assert s["final_residual"] <= s["rounding_floor"]


def test_a_slow_smoother_is_named_before_the_run_and_called_slow_in_the_record(tmp_path):
    case = write_case(tmp_path / "slow.yaml", **{**LID, "run": {"steps": 25}},
                      multigrid={"smoother": "jacobi", "omega": 0.05}, output={"dir": str(tmp_path / "s"), "vtk": False})
    res = stencil(["run", str(case), "-q"])
    assert res.returncode == 0, res.stderr
    note = [ln for ln in res.stderr.splitlines() if ln.startswith("note: multigrid")]
    assert len(note) == 1 and "0.975" in note[0] and "omega" in note[0]
    s = record(tmp_path / "s")["solver"]
    assert s["stopped_by"] is None and s["iterations"] == 25 and s["reduction_per_iteration"] > stops.SLOW
    assert "slowly" in s["ended"] and "floor" not in s["ended"]
    val = stencil(["validate", str(case)])
    assert val.returncode == 0 and "0.975" in val.stdout


@pytest.mark.parametrize("multigrid, field", [({"pre": 0, "post": 0}, "multigrid.pre"),
                                              ({"smoother": "jacobi", "omega": 1.0}, "multigrid.omega"),
                                              ({"smoother": "jacobi", "omega": 1.7}, "multigrid.omega")])
@pytest.mark.parametrize("physics", [{"equation": "laplace", "solver": "multigrid"},
                                     {"equation": "heat", "scheme": "backward-euler"}], ids=["laplace", "implicit"])
def test_settings_that_cannot_smooth_are_refused_before_anything_is_written(tmp_path, multigrid, field, physics):
    case = write_case(tmp_path / "c.yaml", **{**LID, "physics": physics}, multigrid=multigrid,
                      output={"dir": str(tmp_path / "out")})
    one_error_line(stencil(["run", str(case)]), field, "c.yaml")
    one_error_line(stencil(["validate", str(case)]), field)
    assert not (tmp_path / "out").exists()


def test_stop_rules_name_divergence_stalls_and_slow_falls_from_the_history():
    floor = lambda: 1e-14  # noqa: E731
    assert stops.ending([1.0, 0.1, 0.01, 0.02, 0.5, 3.0], floor) == "diverged"
    assert stops.ending([1.0, 1.24, 2.29, 4.6, 9.9], floor) == "diverged"  # growing at every check, not yet 10x
    assert stops.ending([1.0, 0.5, 0.3, 0.31, 0.3, 0.32], floor) == "stalled"
    assert stops.ending([1.0, 0.8, 0.64, 0.51, 0.41, 0.33], floor) is None  # still falling, slowly: runs on
    assert stops.ending([1.0, 1e-8, 2e-15, 3e-15, 2.5e-15, 2e-15], floor) == "floor"
    assert stops.ending([1.0, 0.1, 0.01], floor) is None  # too short to judge


def test_an_initial_field_that_already_solves_the_equations_says_so_with_its_residual(tmp_path):
    for solver in ("multigrid", "jacobi"):
        out = tmp_path / solver
        case = write_case(tmp_path / f"{solver}.yaml", **{
            **LID, "physics": {"equation": "laplace", "solver": solver}, "initial": {"kind": "constant", "value": 2.0},
            "boundary": {side: 2.0 for side in ("top", "bottom", "left", "right")},
            "run": {"steps": 50, "tolerance": 1e-6, "check_every": 10}, "output": {"dir": str(out), "vtk": False}})
        res = stencil(["run", str(case), "-q"])
        assert res.returncode == 0, res.stderr
        s = record(out)["solver"]
        assert s["converged"] and s["initial_residual"] == 0 and s["final_residual"] == 0
        assert "already solves the equations" in s["ended"] and "no residual checked" not in s["ended"]


@pytest.mark.parametrize("solver", ["jacobi", "multigrid"])
def test_a_laplace_overflow_names_the_values_not_a_time_step(tmp_path, solver):
    big = 1.7e308
    case = write_case(tmp_path / "c.yaml", **{
        **LID, "physics": {"equation": "laplace", "solver": solver}, "initial": {"kind": "constant", "value": big},
        "boundary": {"top": big, "bottom": big}, "run": {"steps": 20, "check_every": 1},
        "output": {"dir": str(tmp_path / "o"), "vtk": False}})
    line = one_error_line(stencil(["run", str(case), "-q"]), "NaN or Inf", "boundary values", code=4)
    assert "physics.dt" not in line


# crashes: odd but valid input, bad input files -------------------------------------------------------------

@pytest.mark.parametrize("physics, initial", [({"scheme": "backward-euler"}, {"kind": "constant", "value": 0.0}),
                                              ({"scheme": "crank-nicolson"}, {"kind": "constant", "value": 0.0}),
                                              ({"scheme": "crank-nicolson", "dt": 1e-100}, {"kind": "sine"})],
                         ids=["backward-euler, zero field", "crank-nicolson, zero field", "crank-nicolson, dt 1e-100"])
def test_implicit_steps_that_need_no_cycle_end_with_a_record_that_says_so(tmp_path, physics, initial):
    out = tmp_path / "o"
    case = write_case(tmp_path / "c.yaml", grid={"nx": 15, "ny": 15}, physics={"equation": "heat", **physics},
                      initial=initial, run={"steps": 5}, output={"dir": str(out), "vtk": False})
    res = stencil(["run", str(case), "-q", "--verify"])
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    rec = record(out)
    assert rec["solver"]["cycles"] == 0 and "already solved its equations" in rec["solver"]["ended"]
    assert rec["correctness"]["passed"] and "no multigrid cycle ran" in rec["bottleneck"]
    assert fields(out)[0] == [0, 5]


@pytest.mark.parametrize("dt", ["1.0e+50", "1.0e-100"])
def test_a_float32_refusal_is_its_one_line_without_a_numpy_warning(tmp_path, dt):
    case = tmp_path / "f.yaml"
    case.write_text(f"grid: {{nx: 15, ny: 15}}\nphysics: {{scheme: crank-nicolson, dt: {dt}}}\n"
                    f"numerics: {{dtype: float32}}\noutput: {{dir: {tmp_path / 'o'}}}\n")
    one_error_line(stencil(["run", str(case)]), "physics.dt", "float32", "float64")
    assert not (tmp_path / "o").exists()


def calibration(tmp_path, change=None, text=None):
    """A model calibration file (tests/test_model.py's synthetic one), changed, or replaced by `text`."""
    from test_model import synthetic_entry

    data = {"entry": synthetic_entry()}
    if change:
        change(data["entry"])
    f = tmp_path / "inputs.json"
    if isinstance(text, bytes):
        f.write_bytes(text)
    else:
        f.write_text(text if text is not None else json.dumps(data))
    return f


INPUTS = {  # how the file is damaged, what the error names
    "a list": (None, "[1, 2]", "holds no calibration"),
    "a number": (None, "3", "holds no calibration"),
    "text": (None, '"model"', "holds no calibration"),
    "not JSON": (None, "{entry: 1", "not JSON"),
    "binary": (None, bytes(range(256)) * 4, "not a text file"),
    "a count as text": (lambda e: e["kernel"][0].update(ny="64"), None, "kernel[0].ny"),
    "a time as text": (lambda e: e["kernel"][2].update(check_seconds="fast"), None, "kernel[2].check_seconds"),
    "negative tile times": (lambda e: e["kernel"][3]["tile_seconds"][0].__setitem__(1, -1e-3), None,
                            "kernel[3].tile_seconds"),
    "a zero message time": (lambda e: e["messages"]["exchange"][0].__setitem__(1, 0), None, "messages.exchange"),
    "a host too many": (lambda e: e["kernel"][5]["hosts"].append("x"), None, "kernel[5].hosts"),
    "no kernel": (lambda e: e.pop("kernel"), None, "kernel is missing"),
}


@pytest.mark.parametrize("label", INPUTS)
def test_model_inputs_that_are_not_a_calibration_are_refused_naming_the_field(tmp_path, label):
    change, text, needle = INPUTS[label]
    f = calibration(tmp_path, change, text)
    case = write_case(tmp_path / "c.yaml", grid={"nx": 256, "ny": 256}, backend={"name": "numba"})
    one_error_line(stencil(["model", str(case), "--ranks", "4", "--inputs", str(f)]), "--inputs", "inputs.json", needle,
                   "stencil bench model")


def test_model_network_and_inputs_files_that_cannot_be_read_are_refused(tmp_path):
    case = write_case(tmp_path / "c.yaml", grid={"nx": 256, "ny": 256}, backend={"name": "numba"})
    good = calibration(tmp_path)
    (tmp_path / "net.yaml").write_bytes(bytes(range(256)))
    for args, needles in ((["--network", str(tmp_path / "net.yaml")], ["--network", "net.yaml", "not a text file"]),
                          (["--network", str(tmp_path)], ["--network", "is a directory"]),
                          (["--inputs", str(tmp_path / "none.json")], ["--inputs", "none.json", "not found"]),
                          (["--inputs", str(tmp_path)], ["--inputs", "is a directory"])):
        inputs = [] if "--inputs" in args else ["--inputs", str(good)]
        one_error_line(stencil(["model", str(case), "--nodes", "2", "--ranks-per-node", "2", *inputs, *args]), *needles)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A real one-point threads sweep (numba, one thread) and a calibration to predict it with."""
    d = tmp_path_factory.mktemp("sweep")
    case = write_case(d / "s.yaml", grid={"nx": 40, "ny": 30}, backend={"name": "numba"}, run={"steps": 20},
                      output={"vtk": False})
    res = stencil(["sweep", "threads", str(case), "--threads", "1", "-o", str(d / "sweep")], timeout=300)
    assert res.returncode == 0, res.stderr
    return d / "sweep", calibration(d)


def _edit(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _record_of(d):
    return next(d.glob("t1/*/record.json"))


VALIDATE = {  # damage to the sweep directory, what the error names
    "record missing": (lambda d: _record_of(d).unlink(), ["record.json", "not found"]),
    "record cut short": (lambda d: _record_of(d).write_text(_record_of(d).read_text()[:90]), ["record.json", "not JSON"]),
    "record binary": (lambda d: _record_of(d).write_bytes(bytes(range(256))), ["record.json", "not a text file"]),
    "record's case": (lambda d: _edit(_record_of(d), lambda r: r["case"]["grid"].update(nx="wide")),
                      ["record.json", "grid.nx"]),
    "record's placement": (lambda d: _edit(_record_of(d), lambda r: r["resources"].update(placement=[3])),
                           ["record.json", "resources.placement"]),
    "record's dims": (lambda d: _edit(_record_of(d), lambda r: r["resources"].update(dims=[2, "x"])),
                      ["record.json", "dims"]),
    "rows missing": (lambda d: _edit(d / "sweep.json", lambda s: s.pop("rows")), ["sweep.json", "rows is missing"]),
    "a row's time as text": (lambda d: _edit(d / "sweep.json", lambda s: s["rows"][0].update(seconds_per_step="fast")),
                             ["sweep.json", "rows[0].seconds_per_step"]),
    "a row's negative time": (lambda d: _edit(d / "sweep.json", lambda s: s["rows"][0].update(seconds_per_step=-1.0)),
                              ["sweep.json", "rows[0].seconds_per_step"]),
    "sweep.json a list": (lambda d: (d / "sweep.json").write_text("[1, 2]"), ["sweep.json", "not an object"]),
    "sweep.json missing": (lambda d: (d / "sweep.json").unlink(), ["--validate", "no sweep.json"]),
}


@pytest.mark.parametrize("label", VALIDATE)
def test_model_validate_refuses_a_damaged_sweep_directory_naming_the_file_and_field(sweep, tmp_path, label):
    src, inputs = sweep
    d = tmp_path / "copy"
    shutil.copytree(src, d)
    damage, needles = VALIDATE[label]
    damage(d)
    before = tree(d)
    one_error_line(stencil(["model", "--validate", str(d), "--inputs", str(inputs)]), *needles)
    assert tree(d) == before


def test_model_validate_of_the_intact_sweep_predicts_its_point(sweep):
    src, inputs = sweep
    res = stencil(["model", "--validate", str(src), "--inputs", str(inputs)])
    assert res.returncode == 0 and "median |error|" in res.stdout, res.stderr


# every count has a bound that answers in seconds ------------------------------------------------------------

def test_every_rank_count_has_a_bound_that_answers_in_seconds(tmp_path):
    """A hang guard, not a speed test: each refusal must come back well within the subprocess timeout."""
    case = write_case(tmp_path / "c.yaml", grid={"nx": 4096, "ny": 4096}, backend={"name": "numba"},
                      parallel={"decomposition": "cart"})
    f = calibration(tmp_path)
    for args, needle in ((["model", str(case), "--inputs", str(f), "--nodes", "1000000000"], "--nodes"),
                         (["model", str(case), "--inputs", str(f), "--ranks", "1000000000"], "--ranks"),
                         (["model", str(case), "--inputs", str(f), "--ranks", "1e9"], "--ranks"),
                         (["model", str(case), "--inputs", str(f), "--nodes", "40000"], "65536"),
                         (["model", str(case), "--inputs", str(f), "--nodes", "1", "--ranks-per-node", "1000000000"],
                          "--ranks-per-node"),
                         (["validate", str(case), "--ranks", "1000000000"], "--ranks"),
                         (["sweep", "strong", str(case), "--ranks", ",".join(map(str, range(1, 66)))], "at most 64")):
        res = stencil(args, timeout=60)
        assert res.returncode == 2 and needle in res.stderr and res.stderr.count("\n") == 1, (args, res.stderr)
        assert "Traceback" not in res.stderr


# the Python API's contract -------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [{1: 2}, {None: 3}, {("physics", "alpha"): 1.0}, {"physics..alpha": 1.0},
                                       [("physics.alpha", 1.0)]], ids=["int", "None", "tuple", "empty name", "list"])
def test_overrides_that_are_not_dotted_texts_raise_input_error(overrides):
    with pytest.raises(InputError, match="field path|not a mapping") as exc:
        api.load_case(ROOT / "cases" / "quickstart.yaml", overrides)
    assert "\n" not in str(exc.value)


def test_cases_that_are_not_mappings_or_cases_raise_input_error(tmp_path):
    for bad in ([1], "grid", None):
        with pytest.raises(InputError, match="not a mapping"):
            api.build_case(bad)
    with pytest.raises(InputError, match="not a case"):
        api.run({"grid": {"nx": 8, "ny": 8}})


@pytest.mark.parametrize("extra", [{"run.steps": 8}, {"physics.equation": "heat", "physics.scheme": "crank-nicolson",
                                                       "run.steps": 6}],
                         ids=["multigrid cycles", "crank-nicolson steps"])
def test_the_progress_callable_is_called_wherever_progress_true_prints_a_line(tmp_path, capsys, extra):
    case = api.build_case({**LID, "name": "p", "output": {"dir": str(tmp_path / "p"), "vtk": False}}, extra)
    calls = []
    api.run(case, progress=lambda *a: calls.append(a), ceiling=False)
    silent = capsys.readouterr().out
    api.run(case, overwrite=True, progress=True, ceiling=False)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(("cycle ", "step "))]
    assert len(calls) == len(lines) >= 2 and "cycle " not in silent and "step " not in silent  # (lines: every 10%)
    assert [c[0] for c in calls] == [int(ln.split()[1].rstrip(":").split("/")[0]) for ln in lines]


REFUSED = """
import sys
from solver import api
from solver.core.errors import InputError
from solver.parallel.comm import Comm
comm = Comm.world(True)
case = api.build_case({"name": "r", "grid": {"nx": 16, "ny": 16}, "run": {"steps": 2}, "backend": {"name": "numpy"},
                       "output": {"dir": sys.argv[1], "vtk": False}})
try:
    api.run(case, progress=False, ceiling=False, comm=comm)
except InputError as exc:  # each rank says what it caught in a file of its own (stdout lines of ranks interleave)
    open(f"{sys.argv[2]}/rank{comm.rank}.txt", "w").write(f"InputError {exc}")
"""


@needs_mpi
def test_a_refused_run_under_mpirun_raises_input_error_on_every_rank(tmp_path):
    """output.dir is a file: rank 0 finds it; every rank raises InputError with rank 0's message."""
    (tmp_path / "taken").write_text("a file where the output directory should be")
    script = tmp_path / "refused.py"
    script.write_text(REFUSED)
    res = mpirun(2, [str(tmp_path / "taken"), str(tmp_path)], python_args=(str(script),))
    assert res.returncode == 0, res.stderr
    said = [(tmp_path / f"rank{r}.txt").read_text() if (tmp_path / f"rank{r}.txt").exists() else None for r in (0, 1)]
    assert said[0] is not None and said[0] == said[1], (said, res.stderr)
    assert said[0].startswith("InputError output.dir:") and "taken" in said[0]


# tools/cluster.sh ------------------------------------------------------------------------------------------

CLUSTER = ROOT / "tools" / "cluster.sh"


def cluster_env(tag: str) -> dict:
    return {**os.environ, "STENCIL_CLUSTER": f"h{tag}{os.getpid() % 1000}", "STENCIL_CLUSTER_NET": f"10.81.{os.getpid() % 250}"}


def made(env) -> list[str]:
    """Namespaces, links and state files with this test's prefix."""
    p = env["STENCIL_CLUSTER"]
    ns = [n.split()[0] for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()]
    links = [ln.split(":")[1].strip().split("@")[0] for ln in
             subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.splitlines()]
    state = [f"state {p}"] if os.path.exists(f"/run/stencil-cluster/{p}.env") else []
    return [n for n in ns + links if n.startswith(p)] + state


def why_no_namespaces() -> str | None:
    res = subprocess.run([str(CLUSTER), "check"], capture_output=True, text=True)
    return None if res.returncode == 0 else res.stdout.strip()


needs_namespaces = pytest.mark.skipif(shutil.which("ip") is None or why_no_namespaces() is not None,
                                      reason=f"network namespaces cannot be made here: {why_no_namespaces() if shutil.which('ip') else 'no ip'}")


@needs_namespaces
@pytest.mark.parametrize("args", [["up", "0"], ["up", "-1"], ["up", "abc"], ["up", "2", "bogusrate"], ["up", "65"],
                                  ["up", "2", "1gbit", "3"], ["shape", "fast"], ["exec", "x", "true"], ["-n", "two", "true"]])
def test_cluster_script_checks_its_arguments_before_making_anything(args):
    env = cluster_env("a")
    res = subprocess.run([str(CLUSTER), *args], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("cluster.sh: "), res.stderr
    assert "unbound variable" not in res.stderr
    assert made(env) == []


@needs_namespaces
def test_a_cluster_up_that_fails_half_way_removes_what_it_made_and_nothing_else(tmp_path):
    env = cluster_env("b")
    p = env["STENCIL_CLUSTER"]
    subprocess.run(["ip", "netns", "add", f"{p}2"], check=True)  # someone else's namespace, in the way of node 2
    try:
        res = subprocess.run([str(CLUSTER), "up", "3", "1gbit"], capture_output=True, text=True, env=env, timeout=120)
        assert res.returncode != 0 and "removed what it had made" in res.stderr, res.stderr
        assert made(env) == [f"{p}2"]
    finally:
        subprocess.run(["ip", "netns", "del", f"{p}2"])
        subprocess.run([str(CLUSTER), "down"], env=env, capture_output=True)
    assert made(env) == []
