"""Implicit heat steps (physics.scheme: backward-euler, crank-nicolson) through the multigrid solver: the
exact per-step decay of the discrete eigenmodes at any dt, conservation with zero fluxes, second order in
time for Crank-Nicolson, numba bitwise equal to numpy, what the record and the progress lines say, and the
case errors. Under mpirun: tests/test_multigrid_mpi.py (tests/mpi/check_multigrid.py)."""

import json
import yaml
import math

import h5py
import numpy as np
import pytest
from conftest import case_file, stencil, write_case  # noqa: F401 - case_file: a fixture

from solver.case import validate_case
from solver.core import physics

def N():
    return {"kind": "neumann"}


def P():
    return {"kind": "periodic"}


def run(tmp_path, name, args=(), **sections):
    data = {"grid": {"nx": 47, "ny": 33}, "physics": {"equation": "heat", "scheme": "backward-euler", "dt": 1e-3},
            "initial": {"kind": "sine", "k": [2, 1]}, "run": {"steps": 12}, "backend": {"name": "numba"},
            "output": {"vtk": False}}
    for k, v in sections.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) and k not in ("initial", "boundary") else v
    path = write_case(tmp_path / f"{name}.yaml", **data)
    res = stencil(["run", str(path), *args])
    assert res.returncode == 0, res.stderr
    out = tmp_path / f"out_{name}"
    with h5py.File(out / "fields.h5") as f:
        u = f["u"][-1]
    return u, json.loads((out / "record.json").read_text()), res.stdout


@pytest.mark.parametrize("scheme", ["backward-euler", "crank-nicolson"])
@pytest.mark.parametrize("boundary, k", [({}, [2, 1]), ({"top": N(), "bottom": N(), "left": P(), "right": P()}, [1, 2]),
                                         ({"top": N(), "left": N()}, [1, 1])])
def test_eigenmodes_decay_by_the_exact_factor_at_any_dt(tmp_path, scheme, boundary, k):
    data = {"grid": {"nx": 47, "ny": 33}, "physics": {"equation": "heat", "scheme": scheme, "dt": 1.0},
            "initial": {"kind": "sine", "k": k}, "boundary": boundary, "run": {"steps": 1000}}
    limit = physics.stable_dt(validate_case({"name": "x", **data}))
    for ratio in (1.0, 1e4):  # dt from the explicit limit to 10^4 times it
        dt = ratio * limit
        _, rec, _ = run(tmp_path, f"m{int(math.log10(ratio))}", args=["--verify", "-q"], boundary=boundary,
                        initial={"kind": "sine", "k": k}, physics={"scheme": scheme, "dt": dt}, run={"steps": 6})
        c = rec["correctness"]
        assert c["passed"] and c["reference"].startswith("exact discrete eigenmode"), c
        z = dt * physics.mode_eigenvalue(validate_case({"name": "x", **{**data, "physics": {**data["physics"], "dt": dt}}}))
        assert c["relative_error"] <= 10 * 6 * 1e-8 * max(1.0, z) + 1e-13
        if scheme == "crank-nicolson" and ratio == 1e4:  # |factor| < 1 even far past the explicit limit
            assert abs((1 - z / 2) / (1 + z / 2)) < 1


def test_zero_flux_runs_conserve_the_sum(tmp_path):
    box = {"top": N(), "bottom": N(), "left": N(), "right": {"kind": "neumann", "flux": 0.0}}
    for scheme in ("backward-euler", "crank-nicolson"):
        _, rec, _ = run(tmp_path, scheme, args=["--verify", "-q"], boundary=box, initial={"kind": "random", "seed": 2},
                        physics={"scheme": scheme, "dt": 5e-3}, run={"steps": 8, "tolerance": 1e-10})
        cons = rec["correctness"]["conservation"]
        assert cons["passed"] and cons["error"] < 1e-9 * abs(cons["sum"]), cons


def test_crank_nicolson_is_second_order_in_time_and_backward_euler_first(tmp_path):
    """Against the semi-discrete solution exp(-alpha lambda t) of the mode, at t = 0.02 with 4, 8, 16 steps."""
    case = validate_case({"name": "x", "grid": {"nx": 47, "ny": 33}, "initial": {"kind": "sine", "k": [2, 1]},
                          "run": {"steps": 1000}})
    lam = physics.mode_eigenvalue(case)
    exact = math.exp(-lam * 0.02)
    orders = {}
    for scheme in ("backward-euler", "crank-nicolson"):
        errs = []
        for steps in (4, 8, 16):
            u, _, _ = run(tmp_path, f"{scheme}{steps}", args=["-q"], physics={"scheme": scheme, "dt": 0.02 / steps},
                          run={"steps": steps, "tolerance": 1e-12})
            mode = physics.eigenmode(case, range(33), range(47))
            errs.append(abs(float(np.sum(u * mode) / np.sum(mode * mode)) - exact))
        orders[scheme] = [math.log2(a / b) for a, b in zip(errs, errs[1:])]
    assert all(1.9 < o < 2.1 for o in orders["crank-nicolson"]), orders
    assert all(0.9 < o < 1.15 for o in orders["backward-euler"]), orders


@pytest.mark.parametrize("scheme, dtype", [("backward-euler", "float64"), ("crank-nicolson", "float32")])
def test_numba_equals_numpy_bitwise(tmp_path, scheme, dtype):
    common = dict(physics={"scheme": scheme, "dt": 2e-3}, numerics={"dtype": dtype},
                  initial={"kind": "random", "seed": 5}, boundary={"top": 1.0, "left": {"kind": "neumann", "flux": 0.5}},
                  run={"steps": 5, "tolerance": 1e-6 if dtype == "float32" else 1e-9})
    ref, rec_ref, _ = run(tmp_path, "np", args=["-q"], backend={"name": "numpy"}, **common)
    for threads in (1, 2):
        u, rec, _ = run(tmp_path, f"nb{threads}", args=["-q"], backend={"name": "numba", "threads": threads}, **common)
        assert u.tobytes() == ref.tobytes()
        assert [h["cycles"] for h in rec["solver"]["history"]] == [h["cycles"] for h in rec_ref["solver"]["history"]]


def test_record_and_progress_give_every_solve(tmp_path):
    _, rec, out = run(tmp_path, "rec", physics={"scheme": "crank-nicolson", "dt": 0.01}, run={"steps": 3})
    s = rec["solver"]
    assert s["scheme"] == "crank-nicolson" and s["steps"] == 3 and len(s["history"]) == 3
    assert s["cycles"] == sum(h["cycles"] for h in s["history"]) and not s["unconverged_steps"]
    assert all(h["relative"] < 1e-8 for h in s["history"]) and s["tolerance"] == 1e-8
    assert out.count("last solve") == 2 and "time per step" in out  # a line at 1/3 and 2/3 (the 10% rule; none at the end)
    md = (tmp_path / "out_rec" / "record.md").read_text()
    assert "crank-nicolson" in md and "| step | cycles |" in md
    assert rec["input"]["dt"] == 0.01


def test_dt_null_takes_cfl_times_the_explicit_limit(case_file):
    case = validate_case({"name": "x", "grid": {"nx": 31, "ny": 31}, "physics": {"scheme": "backward-euler", "cfl": 250},
                          "run": {"steps": 1}})
    assert physics.time_step(case) == pytest.approx(250 * physics.stable_dt(case))


def test_scheme_errors_name_the_field(case_file):
    bad = {"laplace": (dict(physics={"equation": "laplace", "scheme": "crank-nicolson"}), "physics.scheme"),
           "unstable": (dict(physics={"dt": 1.0}), "physics.dt"),
           "tol": (dict(run={"tolerance": 1e-6}), "run.tolerance")}
    for name, (sections, field) in bad.items():
        res = stencil(["run", str(case_file(name, **sections))])
        assert res.returncode == 2 and field in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert "implicit physics.scheme" in stencil(["run", str(case_file("u2", physics={"dt": 1.0}))]).stderr


# Crank-Nicolson's ringing (solver.core.ringing) ----------------------------------------------------------------

def _overshoot(tmp_path, scheme: str, r: float, initial: dict) -> tuple[float, str]:
    """(the largest excursion beyond the initial field's and the zero sides' range over 20 steps, over that range;
    what `stencil run` printed on stderr) for dt = r x the explicit limit on 63^2 (numpy)."""
    import h5py

    from solver.case import validate_case
    from solver.core.physics import stable_dt

    data = {"name": "ring", "grid": {"nx": 63, "ny": 63}, "initial": initial, "physics": {"scheme": scheme},
            "run": {"steps": 20, "tolerance": 1e-10}, "backend": {"name": "numpy"},
            "output": {"dir": str(tmp_path / f"{scheme}{r}{initial['kind']}"), "every": 1, "vtk": False}}
    data["physics"]["dt"] = r * stable_dt(validate_case(data))
    path = tmp_path / f"{scheme}{r}{initial['kind']}.yaml"
    path.write_text(yaml.safe_dump(data))
    res = stencil(["run", str(path), "-q"])
    assert res.returncode == 0, res.stderr
    with h5py.File(tmp_path / f"{scheme}{r}{initial['kind']}" / "fields.h5", "r") as f:
        u = f["u"][()]
    lo, hi = min(u[0].min(), 0.0), max(u[0].max(), 0.0)
    return max(u.max() - hi, lo - u.min(), 0.0) / (hi - lo), res.stderr


def test_crank_nicolson_rings_past_the_measured_onset_and_run_warns_naming_backward_euler(tmp_path):
    """A level of 100 against zero sides (a step at every wall): Crank-Nicolson keeps it within its range at 4x the
    explicit limit, overshoots by more than 20% at 10x, and `stencil run` says so there, naming backward Euler,
    which keeps the range at 10x; a smooth sine mode at 10x neither rings nor gets the warning."""
    level = {"kind": "constant", "value": 100.0}
    calm, said = _overshoot(tmp_path, "crank-nicolson", 4.0, level)
    assert calm < 1e-12 and "ring" not in said
    rings, said = _overshoot(tmp_path, "crank-nicolson", 10.0, level)
    assert rings > 0.2 and "warning: physics.scheme: crank-nicolson" in said and "backward-euler" in said, said
    assert said.count("\n") == 1
    damped, said = _overshoot(tmp_path, "backward-euler", 10.0, level)
    assert damped < 1e-12 and "warning" not in said
    smooth, said = _overshoot(tmp_path, "crank-nicolson", 10.0, {"kind": "sine", "value": 100.0})
    assert smooth < 1e-12 and "warning" not in said


def test_validate_warns_of_crank_nicolson_ringing_and_of_nothing_else(case_file):
    from solver.core import ringing

    sharp = case_file("cn", grid={"nx": 40, "ny": 30}, initial={"kind": "hotspot", "value": 1.0, "radius": 0.2,
                                                                 "center": [0.5, 0.5]},
                      physics={"scheme": "crank-nicolson"})
    res = stencil(["validate", str(sharp)])
    assert res.returncode == 0 and "crank-nicolson at dt" in " ".join(res.stdout.split()), res.stdout
    assert "backward-euler" in res.stdout
    be = case_file("be", grid={"nx": 40, "ny": 30}, initial={"kind": "hotspot", "value": 1.0, "radius": 0.2,
                                                              "center": [0.5, 0.5]}, physics={"scheme": "backward-euler"})
    assert "ring" not in stencil(["validate", str(be)]).stdout
    assert ringing.ONSET == 5.0  # the onset the module's docstring measured (and docs/multigrid.md quotes)
