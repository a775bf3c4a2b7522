"""Whole runs through the library entry point, one process: records, fields.h5, convergence."""

import json

import h5py
import numpy as np
import pytest
from conftest import mpi_script, needs_mpi

from solver.case import validate_case
from solver.core.errors import InputError, NumericalError
from solver.run import Options, Run, run_case


def case(tmp_path, **kw):
    data = {"name": "r", "grid": {"nx": 31, "ny": 19}, "run": {"steps": 40, "check_every": 10},
            "backend": {"name": "numba", "threads": 2}, "output": {"dir": str(tmp_path / "out"), "every": 10}}
    for k, v in kw.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    return validate_case(data)


def test_laplace_with_equal_sides_converges_to_that_constant(tmp_path):
    c = case(tmp_path, physics={"equation": "laplace"}, initial={"kind": "random", "seed": 2},
             boundary={"top": 3.0, "bottom": 3.0, "left": 3.0, "right": 3.0},
             run={"steps": 20000, "tolerance": 1e-12, "check_every": 50})
    r = Run(c, options=Options(ceiling=False))
    rec = r.execute()
    assert rec["run"]["converged"] and rec["run"]["steps"] < 20000
    u = r.state.u[1:-1, 1:-1]
    assert np.max(np.abs(u - 3.0)) < 1e-9


def test_laplace_stops_at_the_relative_residual_which_decreases(tmp_path):
    """run.tolerance is relative to the initial field's residual, the update of step 1 (the first check)."""
    tol = 1e-6
    c = case(tmp_path, physics={"equation": "laplace"}, initial={"kind": "constant", "value": 0.0},
             boundary={"top": 1.0}, run={"steps": 50000, "tolerance": tol, "check_every": 25})
    rec = run_case(c, options=Options(ceiling=False))
    steps = [k for k, _ in rec["run"]["residuals"]]
    r0 = rec["solver"]["initial_residual"]
    res = [r / r0 for _, r in rec["run"]["residuals"]]
    assert rec["run"]["converged"] and steps[0] == 1 and res[0] == 1.0
    assert res[-1] < tol <= res[-2] and rec["solver"]["final_relative"] == res[-1]
    assert all(b <= a for a, b in zip(res, res[1:]))
    assert rec["run"]["steps"] % 25 == 0 and rec["run"]["steps"] < 50000


def test_run_writes_fields_record_and_timings(tmp_path):
    c = case(tmp_path, initial={"kind": "sine"}, verify=True)
    rec = run_case(c, options=Options(ceiling=False))
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} >= {"case.yaml", "fields.h5", "record.json", "record.md", "timings.csv"}
    with h5py.File(out / "fields.h5") as f:
        assert f["u"].shape == (5, 19, 31) and f["u"].dtype == np.float64
        assert list(f["step"][:]) == [0, 10, 20, 30, 40]
        assert np.allclose(f["time"][:], np.array([0, 10, 20, 30, 40]) * rec["input"]["dt"])
    disk = json.loads((out / "record.json").read_text())
    assert disk["correctness"]["passed"] is True and disk["correctness"]["relative_error"] < 1e-12
    assert disk["throughput"]["timed_steps"] == 39  # one warm-up step, reported apart
    for key in ("environment", "input", "resources", "times", "throughput", "bottleneck", "correctness"):
        assert disk[key]
    assert set(disk["times"]) >= {"setup", "compile", "warmup", "solve", "output", "total"}


def overflowing(tmp_path, **kw):
    """A float32 case whose field turns Inf at step 1: values finite in float32 (a NaN or Inf in the file is
    refused as input), but u + u is inf."""
    field = np.zeros((19, 31))
    field[6:9, 10:13] = 3e38
    np.save(tmp_path / "bad.npy", field)
    return case(tmp_path, initial={"kind": "file", "path": str(tmp_path / "bad.npy")}, numerics={"dtype": "float32"}, **kw)


def test_inf_that_appears_in_the_field_is_caught_at_the_next_check(tmp_path):
    c = overflowing(tmp_path)
    with pytest.raises(NumericalError, match="step 10"):
        run_case(c, options=Options(ceiling=False))


def test_nan_in_the_initial_file_is_refused_before_anything_is_written(tmp_path):
    field = np.zeros((19, 31))
    field[7, 11] = np.nan
    np.save(tmp_path / "bad.npy", field)
    c = case(tmp_path, initial={"kind": "file", "path": str(tmp_path / "bad.npy")})
    with pytest.raises(InputError, match="nan at row 7, column 11"):
        run_case(c, options=Options(ceiling=False))
    assert not (tmp_path / "out").exists()


def test_existing_results_are_not_overwritten_without_permission(tmp_path):
    c = case(tmp_path)
    run_case(c, options=Options(ceiling=False))
    before = (tmp_path / "out" / "record.json").read_bytes()
    with pytest.raises(InputError, match="already holds results"):
        run_case(c, options=Options(ceiling=False))
    assert (tmp_path / "out" / "record.json").read_bytes() == before
    run_case(c, options=Options(ceiling=False, overwrite=True))


def test_verify_against_the_numpy_reference_is_bitwise_on_cpu(tmp_path):
    c = case(tmp_path, initial={"kind": "hotspot", "radius": 0.3}, boundary={"left": 5.0}, verify=True)
    rec = run_case(c, options=Options(ceiling=False))
    assert rec["correctness"]["passed"] and rec["correctness"]["tolerance"] == 0.0
    assert rec["correctness"]["mismatched_points"] == 0


def test_a_wrong_answer_fails_verification(tmp_path, monkeypatch):
    """The check can fail: perturb the reference and the run must report a mismatch."""
    import solver.results.verify as v

    real = v.reference_rows
    monkeypatch.setattr(v, "reference_rows", lambda *a, **k: real(*a, **k) * (1 + 1e-15) + 1e-300)
    c = case(tmp_path, initial={"kind": "random"}, verify=True)
    rec = run_case(c, options=Options(ceiling=False))
    assert rec["correctness"]["passed"] is False and rec["correctness"]["mismatched_points"] > 0


def test_timed_sections_add_up_to_the_loop(tmp_path):
    c = case(tmp_path, grid={"nx": 200, "ny": 150}, run={"steps": 60, "check_every": 10})
    rec = run_case(c, options=Options(ceiling=False))
    t = rec["timings"]
    parts = sum(t[s]["max"] for s in ("compute", "comm", "wait", "io", "other"))
    assert all(t[s]["min"] >= 0 for s in ("compute", "comm", "wait", "io", "other"))
    assert abs(parts - t["loop"]["max"]) <= 0.05 * t["loop"]["max"]


def test_verify_says_its_cost_before_the_run_starts(tmp_path):
    """The first line of a verified run (numpy reference) gives the reference's expected time, measured on a
    few of its steps; an exact-solution run needs none."""
    import re

    from conftest import stencil, write_case

    path = write_case(tmp_path / "c.yaml", grid={"nx": 96, "ny": 64}, initial={"kind": "random"},
                      run={"steps": 200, "check_every": 10}, backend={"name": "numba"})
    res = stencil(["run", str(path), "--verify"])
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    assert re.fullmatch(r"verify: after the run a numpy reference repeats the 200 steps on 1 rank\(s\): about "
                        r"[\d.]+ s \([\d.]+ ms per step, timed now on 4 of its steps\)", first), res.stdout
    sine = write_case(tmp_path / "s.yaml", grid={"nx": 96, "ny": 64}, run={"steps": 20, "check_every": 10})
    res = stencil(["run", str(sine), "--verify"])
    assert res.returncode == 0 and "verify: after the run" not in res.stdout, res.stdout


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
def test_the_distributed_reference_meets_every_block_and_finds_one_wrong_point(n, tmp_path):
    res = mpi_script(n, "check_verify.py", tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"verify ok on {n} rank(s)" in res.stdout


def test_a_lagged_check_is_read_before_the_next_snapshot_and_names_its_own_step(tmp_path):
    """Heat checks are read one check later (a GPU keeps computing meanwhile), but always before fields are
    written: the Inf found by the check at step 10 ends the run before the snapshot due at step 15."""
    c = overflowing(tmp_path, run={"steps": 1000, "check_every": 10}, output={"every": 15})
    with pytest.raises(NumericalError, match="at step 10 "):
        run_case(c, options=Options(ceiling=False))
    with h5py.File(tmp_path / "out" / "fields.h5") as f:
        assert list(f["step"][:]) == [0]


@pytest.fixture
def checks_inside(monkeypatch):
    """The numba backend as if it folded checks into its launches (as a GPU's `chip` does), through the base
    class's advance_checked (one batch a check): the loop's side of checks inside a batch, on any machine.
    Yields the (steps, checks) of each batch handed over."""
    from solver.backends import Backend
    from solver.backends.numba_backend import NumbaBackend

    calls = []

    def spy(self, u, u_new, w, n, region, timer, previous, checks):
        calls.append((n, list(checks)))
        return Backend.advance_checked(self, u, u_new, w, n, region, timer, previous, checks)

    monkeypatch.setattr(NumbaBackend, "checks_inside", lambda self, shape: True)
    monkeypatch.setattr(NumbaBackend, "advance_checked", spy)
    yield calls


def test_checks_inside_batches_end_none_and_leave_the_field_bitwise_equal(tmp_path, checks_inside):
    c = case(tmp_path, run={"steps": 120, "check_every": 10}, output={"every": 1000}, initial={"kind": "random", "seed": 3})
    r = Run(c, options=Options(ceiling=False, quiet=True))
    r.execute()
    # the warm-up step, then batches to the polls at 50 and 100 and the end, each with its checks (its last step's too)
    assert checks_inside == [(1, []), (49, [9, 19, 29, 39, 49]), (50, [10, 20, 30, 40, 50]), (20, [10, 20])]
    plain = Run(case(tmp_path / "b", run={"steps": 120, "check_every": 10}, output={"every": 1000},
                     initial={"kind": "random", "seed": 3}), options=Options(ceiling=False, quiet=True))
    plain.execute()
    np.testing.assert_array_equal(r.state.u, plain.state.u)


def test_an_inf_found_inside_a_batch_names_its_check_step(tmp_path, checks_inside):
    c = overflowing(tmp_path, run={"steps": 1000, "check_every": 10}, output={"every": 1000})
    with pytest.raises(NumericalError, match="at step 10 "):
        run_case(c, options=Options(ceiling=False, quiet=True))
    assert any(10 - 1 in checks for _, checks in checks_inside)  # step 10 was a check inside a batch
