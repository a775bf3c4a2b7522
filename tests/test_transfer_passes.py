"""numba's transfers in vectorised column runs (numba_mg.restrict_runs; restrict_sep_runs where the operator-
dependent weights are separable, restrict_op_runs where they are per point; the prolongations over runs of one
parity): every call of a multigrid solve gives mg_ops' bits (the per-point reference), on grids with and without a
seam, and the runs are found where the windows' shapes say they are."""

from __future__ import annotations

import numpy as np
import pytest

from solver.backends import mg_ops, numba_mg
from solver.backends.numba_backend import NumbaBackend, _column_runs, _parity_runs
from solver.case import validate_case
from solver.parallel.comm import Comm
from solver.run import Options, Run


def die(tmp_path, n: int, linear: bool = False, dtype: str = "float64") -> dict:
    """tools/nonlinear_bench.py's plate, small: k(T) a power law, a radiating and convecting top (linear: k a number,
    the top convecting only)."""
    top = {"kind": "convective", "h": 50.0, "ambient": 300.0}
    if not linear:
        top.update(emissivity=0.9, surroundings=300.0)
    return validate_case({
        "name": f"die{n}{dtype}", "grid": {"nx": n, "ny": n, "lx": 0.01, "ly": 0.01},
        "materials": {"si": {"k": 148.0 if linear else {"k0": 148.0, "T0": 300.0, "b": -1.3}, "C": 1.66e6}},
        "physics": {"material": "si", "equation": "laplace", "solver": "multigrid",
                    "source": [{"kind": "constant", "value": 2e8}]},
        "boundary": {"bottom": 350.0, "top": top, "left": {"kind": "neumann"}, "right": {"kind": "neumann"}},
        "initial": {"kind": "constant", "value": 350.0}, "numerics": {"dtype": dtype},
        "run": {"steps": 30, "tolerance": 1e-8 if dtype == "float64" else 1e-4},
        "backend": {"name": "numba"}, "output": {"dir": str(tmp_path / f"die{n}{dtype}"), "vtk": False, "fields": False}})


@pytest.mark.parametrize("n, dtype", [(63, "float64"), (64, "float64"), (97, "float64"), (97, "float32")])
def test_column_runs_give_the_per_point_restrictions_bits_in_a_newton_run(tmp_path, monkeypatch, n, dtype):
    calls = {"checked": 0, "restrict_sep_runs": 0, "restrict_op_runs": 0, "odd": 0}
    plain = NumbaBackend.restrict_op

    def counted(name):
        kernel = getattr(numba_mg, name)

        def run(*args):
            calls[name] += 1
            calls["odd"] += args[-4].size > 0
            return kernel(*args)
        return run

    def checked(self, gc, r, region, tables):
        before = gc.copy()
        plain(self, gc, r, region, tables)
        want = before.copy()
        mg_ops.restrict_op(want, r, region, *tables)
        r0, r1, c0, c1 = region
        assert np.array_equal(gc[r0:r1, c0:c1].view(np.uint8), want[r0:r1, c0:c1].view(np.uint8)), (n, region)
        calls["checked"] += 1

    for name in ("restrict_sep_runs", "restrict_op_runs"):
        monkeypatch.setattr(numba_mg, name, counted(name))
    monkeypatch.setattr(NumbaBackend, "restrict_op", checked)
    monkeypatch.setenv("STENCIL_MG_OPDEP", "1")  # (the die's faces are uniform: it would take the plain transfers)
    record = Run(die(tmp_path, n, dtype=dtype), Comm(), Options(ceiling=False, quiet=True)).execute()
    assert record["solver"]["converged"] or "rounding floor" in record["solver"]["ended"], record["solver"]["ended"]
    assert calls["checked"] > 10, calls
    assert calls["restrict_sep_runs"] + calls["restrict_op_runs"] == calls["checked"], calls  # every level in runs
    assert calls["restrict_sep_runs"] > 0, calls  # the finest level's weights separable
    if dtype == "float64":  # the coarser levels' per point (in float32 their rounded weights are separable too)
        assert calls["restrict_op_runs"] > 0, calls
    assert calls["odd"] == calls["checked"], calls  # the ends' columns go through the per-point loop


@pytest.mark.parametrize("n, dtype", [(63, "float64"), (64, "float64"), (97, "float64"), (97, "float32")])
def test_column_runs_give_the_plain_restrictions_bits_in_a_linear_solve(tmp_path, monkeypatch, n, dtype):
    calls = {"checked": 0, "runs": 0, "odd": 0}
    plain, runs = NumbaBackend.restrict, numba_mg.restrict_runs

    def counted(*args):
        calls["runs"] += 1
        calls["odd"] += args[-4].size > 0  # the ends' columns through the per-point loop
        return runs(*args)

    def checked(self, gc, r, region, tables):
        want = gc.copy()
        plain(self, gc, r, region, tables)
        mg_ops.restrict(want, r, region, *tables)
        r0, r1, c0, c1 = region
        assert np.array_equal(gc[r0:r1, c0:c1].view(np.uint8), want[r0:r1, c0:c1].view(np.uint8)), (n, region)
        calls["checked"] += 1

    monkeypatch.setattr(numba_mg, "restrict_runs", counted)
    monkeypatch.setattr(NumbaBackend, "restrict", checked)
    record = Run(die(tmp_path, n, linear=True, dtype=dtype), Comm(), Options(ceiling=False, quiet=True)).execute()
    assert record["solver"]["converged"] or "rounding floor" in record["solver"]["ended"], record["solver"]["ended"]
    assert calls["checked"] > 10 and calls["runs"] == calls["checked"] and calls["odd"] > 0, calls


@pytest.mark.parametrize("linear", [False, True])
def test_prolongations_over_parity_runs_give_mg_ops_bits(tmp_path, monkeypatch, linear):
    calls = {"prolong": 0, "prolong_op": 0}

    def checked(name):
        plain, ref = getattr(NumbaBackend, name), getattr(mg_ops, name)

        def check(self, u, e, region, tables):
            want = u.copy()
            plain(self, u, e, region, tables)
            ref(want, e, region, *tables)
            assert np.array_equal(u.view(np.uint8), want.view(np.uint8)), (name, region)
            calls[name] += 1
        return check

    for name in calls:
        monkeypatch.setattr(NumbaBackend, name, checked(name))
    monkeypatch.setenv("STENCIL_MG_OPDEP", "1")  # (Newton's levels on uniform faces: the operator-dependent ones forced)
    record = Run(die(tmp_path, 97, linear=linear), Comm(), Options(ceiling=False, quiet=True)).execute()
    assert record["solver"]["converged"], record["solver"]["ended"]
    assert calls["prolong" if linear else "prolong_op"] > 10, calls


def test_parity_runs_cover_every_column_once():
    xs = np.array([0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 5])  # a seam at column 6
    runs = _parity_runs(xs)
    seen = sorted(q + 2 * t for q, count, _ in runs for t in range(count))
    assert seen == list(range(xs.size))
    for q, count, start in runs:
        assert [xs[q + 2 * t] for t in range(count)] == list(range(start, start + count))
    assert len(runs) == 3


def test_runs_break_at_a_seam_and_leave_the_ends_and_the_seam_to_the_per_point_loop():
    xs = np.array([2, 3, 5, 7, 9, 11, 14, 16, 18])  # a seam at column 5 (one extra fine column), ends 0 and 8
    shape = np.array([[3, 2, 1, 1], [4, 1, 1, 1], [4, 1, 1, 1], [4, 1, 1, 1], [4, 1, 1, 1], [5, 1, 1, 1],
                      [4, 1, 1, 1], [4, 1, 1, 1], [3, 1, 1, 2]])
    odd, runs, rep = _column_runs(xs, shape)
    assert list(odd) == [0, 5, 8] and rep == 1
    assert runs.tolist() == [[1, 5, 3], [6, 8, 14]]
    shape[3] = [4, 2, 1, 1]  # a column of another shape inside a run splits it
    odd, runs, _ = _column_runs(xs, shape)
    assert list(odd) == [0, 3, 5, 8] and runs.tolist() == [[1, 3, 3], [4, 5, 9], [6, 8, 14]]


def test_newtons_levels_on_uniform_faces_take_the_plain_transfers_and_solve_alike(tmp_path, monkeypatch):
    """The die's reference faces are uniform, so only Newton's diagonal makes its levels fields: the plain transfers
    run (Multigrid.opdep false; the operator-dependent weights would be the linear ones to rounding), with the same
    Newton iterations and cycles as the operator-dependent transfers and the same temperatures to rounding."""
    from solver.io.fields import owned

    runs = {}
    for forced in ("0", "1"):
        monkeypatch.setenv("STENCIL_MG_OPDEP", forced)
        r = Run(die(tmp_path / forced, 63), Comm(), Options(ceiling=False, quiet=True))
        record = r.execute()
        runs[forced] = (r.mg.mg.opdep, record["solver"]["iterations"], record["solver"].get("cycles_per_iteration"),
                        np.array(owned(r.backend, r.state.u)))
    assert runs["0"][0] is False and runs["1"][0] is True
    assert runs["0"][1:3] == runs["1"][1:3]
    np.testing.assert_allclose(runs["0"][3], runs["1"][3], rtol=1e-11)
