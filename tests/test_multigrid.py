"""Multigrid (solver/multigrid) and the residual stop: levels and transfers as plain data, the exact discrete
solution, every backend bitwise against numpy, convergence that does not grow with the grid, the stop
tests (relative residual, rounding floor), and what the record says. MPI: tests/test_multigrid_mpi.py."""

import json

import h5py
from fractions import Fraction

import numpy as np
import pytest
from conftest import stencil, write_case

from solver.backends import mg_ops
from solver.case import validate_case
from solver.core import exact
from solver.core.decomp import all_blocks
from solver.multigrid.grids import DEPTH, down_tables, places, up_tables
from solver.multigrid.levels import Axis, Settings, dense_operator, hierarchy, transfer

D, N, P = "dirichlet", "neumann", "periodic"


def mg_case(nx=33, ny=29, boundary=None, **sections):
    data = {"name": "mg", "grid": {"nx": nx, "ny": ny}, "physics": {"equation": "laplace", "solver": "multigrid"},
            "boundary": boundary or {"top": 1.0}, "initial": {"kind": "random", "seed": 1}, **sections}
    return validate_case(data)


# levels and transfers ----------------------------------------------------------------------------
@pytest.mark.parametrize("kinds, n, m", [((D, D), 7, 3), ((D, D), 4096, 2047), ((D, D), 4097, 2048),
                                         ((N, N), 8, 4), ((N, N), 4097, 2048), ((P, P), 96, 48), ((D, N), 9, 4)])
def test_axes_coarsen_to_at_least_twice_the_spacing(kinds, n, m):
    fine = Axis(n, kinds, 1.0)
    coarse = fine.coarse()
    assert coarse.n == m and coarse.h >= 2 * fine.h * (1 - 1e-12)


@pytest.mark.parametrize("kinds, n, rows", [
    ((D, D), 7, [[0.25, 0.5, 0.25]] * 3),  # full weighting where the points nest
    ((N, N), 8, [[0.5, 0.375, 0.125], [0.125, 0.375, 0.375, 0.125], [0.125, 0.375, 0.375, 0.125], [0.125, 0.375, 0.5]]),
    ((P, P), 8, [[0.125, 0.375, 0.375, 0.125]] * 4)])
def test_nested_sizes_get_the_textbook_restriction_exactly(kinds, n, rows):
    fine = Axis(n, kinds, 1.0)
    t = transfer(fine, fine.coarse())
    got = [t.r_w[J, :t.r_count[J]].tolist() for J in range(len(rows))]
    assert got == rows
    if kinds[0] == P:
        assert t.r_start[0] == -1  # the window wraps into the ghost layer


@pytest.mark.parametrize("kinds", [(D, D), (N, N), (P, P), (D, N), (N, D)])
@pytest.mark.parametrize("n", [7, 8, 9, 10, 33, 64])
def test_transfers_interpolate_linear_functions_and_rows_sum_to_one(kinds, n):
    fine = Axis(n, kinds, 1.0)
    coarse = fine.coarse()
    t = transfer(fine, coarse)
    assert np.allclose([t.r_w[J, :t.r_count[J]].sum() for J in range(coarse.n)], 1.0, atol=1e-15)
    # prolongation of a constant (a linear function where no Dirichlet wall pins it) is exact
    ghosts = {D: 0.0, N: 1.0, P: 1.0}
    e = np.concatenate([[ghosts[kinds[0]]], np.ones(coarse.n), [ghosts[kinds[1]]]])
    fine_vals = np.array([t.p_w[j] @ e[t.p_start[j] + 1:t.p_start[j] + 3] for j in range(n)])
    inside = [j for j in range(n) if 0 <= t.p_start[j] and t.p_start[j] + 1 < coarse.n]
    assert np.allclose(fine_vals[inside], 1.0)
    # positions: every fine point lies between the two coarse points it reads
    for j in range(n):
        pos = (Fraction(fine.offsets[0]) + j) * coarse.spans / fine.spans - fine.offsets[0]
        assert t.p_start[j] <= pos <= t.p_start[j] + 1


def test_semi_coarsening_keeps_levels_nearly_isotropic():
    levels = hierarchy(mg_case(200, 25), Settings())
    ratios = [max(lev.x.h, lev.y.h) / min(lev.x.h, lev.y.h) for lev in levels]
    first = next(i for i, r in enumerate(ratios) if r <= 2.0)
    assert [lev.y.n for lev in levels[:first]] == [25] * first  # only the finer axis coarsened until then
    assert first == 2 and all(r <= 2.0 + 1e-9 for r in ratios[first:])
    assert levels[-1].points <= 64


def test_dense_coarsest_operator_matches_the_kernels_residual():
    lev = hierarchy(mg_case(5, 4, {"top": 1.0, "left": {"kind": "neumann"}, "bottom": {"kind": "neumann"}}),
                    Settings(coarsest=64))[0]
    a = dense_operator(lev)
    rng = np.random.default_rng(0)
    u = np.zeros((4 + 2 * DEPTH, 5 + 2 * DEPTH))
    u[2:-2, 2:-2] = rng.random((4, 5))
    u[1, :] = u[2, :]  # bottom Neumann mirror (homogeneous)
    u[:, 1] = u[:, 2]  # left Neumann mirror; top and right Dirichlet 0
    r = np.zeros_like(u)
    from solver.core.physics import Weights
    mg_ops.residual(r, u, None, Weights(0.0, lev.wx, lev.wy), (2, 6, 2, 7))
    assert np.allclose(-r[2:-2, 2:-2].ravel(), a @ u[2:-2, 2:-2].ravel(), atol=1e-14)


@pytest.mark.parametrize("size, dims", [(2, (2, 1)), (3, (1, 3)), (4, (2, 2)), (6, (2, 3))])
def test_level_blocks_partition_every_distributed_level_and_tables_stay_in_the_ghosts(size, dims):
    case = mg_case(101, 67, {"top": 1.0, "left": {"kind": "periodic"}, "right": {"kind": "periodic"}})
    levels = hierarchy(case, Settings(coarsest=16))
    blocks = all_blocks(case.shape, dims, (False, True))
    per_rank = [places(levels, blocks, r, size) for r in range(size)]
    assert all(len(p) == len(per_rank[0]) for p in per_rank)
    assert per_rank[0][-1].shared  # the coarsest level is solved whole on every rank
    for i, pl in enumerate(per_rank[0]):
        if pl.shared:
            continue
        ny, nx = pl.level.shape
        cover = np.zeros((ny, nx), dtype=int)
        for p in per_rank:
            b = p[i].block
            cover[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] += 1
        assert (cover == 1).all(), f"level {i} blocks do not partition the level"
    for p in per_rank:  # restriction and prolongation tables of every rank fit its ghost layers
        for fine, coarse in zip(p, p[1:]):
            target = coarse.gather[p[0].block.rank] if coarse.gather else coarse.block
            down_tables(fine.block, target, coarse.level)
            up_tables(fine.block, coarse.block, coarse.level)


# the exact discrete solution ----------------------------------------------------------------------
def test_exact_solution_solves_the_discrete_equations():
    nx, ny, lx, ly = 9, 6, 1.0, 0.7
    dx, dy = lx / (nx + 1), ly / (ny + 1)
    side = {"top": 1.0, "bottom": 0.5, "left": -0.25, "right": 2.0}
    u = exact.laplace_dirichlet(nx, ny, dx, dy, **side)
    g = np.zeros((ny + 2, nx + 2))
    g[1:-1, 1:-1] = u
    g[-1, :], g[0, :], g[:, 0], g[:, -1] = side["top"], side["bottom"], side["left"], side["right"]
    lap = ((g[1:-1, :-2] - 2 * u + g[1:-1, 2:]) / dx**2 + (g[:-2, 1:-1] - 2 * u + g[2:, 1:-1]) / dy**2)
    assert np.abs(lap).max() * dx**2 < 1e-13


def test_exact_solution_of_a_block_is_that_block_of_the_whole():
    whole = exact.laplace_dirichlet(9, 6, 0.1, 0.1, 1.0, 0.5, -0.25, 2.0)
    part = exact.laplace_dirichlet(9, 6, 0.1, 0.1, 1.0, 0.5, -0.25, 2.0, range(2, 5), range(3, 9))
    np.testing.assert_allclose(part, whole[2:5, 3:9], rtol=0, atol=1e-15)
    assert exact.laplace_dirichlet(9, 6, 0.1, 0.1, 1.0, 0.5, -0.25, 2.0, range(4, 4), range(0, 9)).shape == (0, 9)


# whole runs -----------------------------------------------------------------------------------------
def run(tmp_path, name, **sections):
    data = {"physics": {"equation": "laplace", "solver": "multigrid"}, "grid": {"nx": 45, "ny": 31},
            "initial": {"kind": "random", "seed": 2}, "boundary": {"top": 1.0, "left": 0.25},
            "run": {"steps": 6}, "output": {"vtk": False}}
    for k, v in sections.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) and k not in ("initial", "boundary") else v
    path = write_case(tmp_path / f"{name}.yaml", **data)
    res = stencil(["run", str(path), "-q"])
    assert res.returncode == 0, res.stderr
    out = tmp_path / f"out_{name}"
    with h5py.File(out / "fields.h5") as f:
        return f["u"][-1], json.loads((out / "record.json").read_text())


BOUNDS = {"lid": {"top": 1.0, "left": 0.25},
          "flux": {"top": 1.0, "bottom": {"kind": "neumann", "flux": 0.4}, "left": {"kind": "neumann"}},
          "periodic": {"top": 0.5, "bottom": {"kind": "neumann", "flux": -0.3}, "left": {"kind": "periodic"},
                       "right": {"kind": "periodic"}}}


@pytest.mark.parametrize("kind", list(BOUNDS))
@pytest.mark.parametrize("dtype, cycle", [("float64", "V"), ("float32", "W"), ("float64", "F")])
def test_numba_equals_numpy_bitwise_for_every_boundary_kind_cycle_and_dtype(tmp_path, kind, dtype, cycle):
    common = dict(boundary=BOUNDS[kind], numerics={"dtype": dtype}, multigrid={"cycle": cycle, "coarsest": 9})
    ref, rec = run(tmp_path, "np", backend={"name": "numpy"}, **common)
    for threads in (1, 2):
        u, _ = run(tmp_path, f"nb{threads}", backend={"name": "numba", "threads": threads}, **common)
        assert u.dtype == np.dtype(dtype) and np.array_equal(u, ref) and u.tobytes() == ref.tobytes()
    assert rec["solver"]["iterations"] == 6 and len(rec["solver"]["levels"]) >= 3


def test_converged_field_matches_the_exact_discrete_solution_to_1e_10(tmp_path):
    u, rec = run(tmp_path, "lid", grid={"nx": 255, "ny": 255}, boundary={"top": 1.0}, initial={"kind": "constant"},
                 backend={"name": "numba"}, run={"steps": 40, "tolerance": 1e-12}, verify=True)
    ex = exact.laplace_dirichlet(255, 255, 1 / 256, 1 / 256, 1.0, 0.0, 0.0, 0.0)
    assert rec["solver"]["converged"] and rec["solver"]["final_relative"] < 1e-12
    assert np.abs(u - ex).max() / np.abs(ex).max() < 1e-10
    c = rec["correctness"]
    assert c["passed"] and c["relative_error"] == 0 and c["steady_state"]["passed"]
    assert rec["solver"]["reduction_per_iteration"] < 0.15
    assert "converged" in (tmp_path / "out_lid" / "record.md").read_text()


@pytest.mark.parametrize("n", [65, 64, 129, 127, 257])
def test_cycles_to_1e_10_do_not_grow_with_the_grid(tmp_path, n):
    _, rec = run(tmp_path, f"g{n}", grid={"nx": n, "ny": n}, boundary={"top": 1.0}, backend={"name": "numba"},
                 run={"steps": 40, "tolerance": 1e-10})
    assert rec["solver"]["converged"] and rec["solver"]["iterations"] <= 12, rec["solver"]["ended"]


def test_float32_stops_at_its_rounding_floor_and_says_so(tmp_path):
    _, rec = run(tmp_path, "f32", numerics={"dtype": "float32"}, backend={"name": "numba"},
                 run={"steps": 60, "tolerance": 1e-10})
    s = rec["solver"]
    assert not s["converged"] and s["stopped_by"] == "floor" and s["iterations"] < 60
    assert s["final_relative"] > 1e-10 and "rounding floor" in s["ended"]
    assert "rounding floor" in (tmp_path / "out_f32" / "record.md").read_text()


def test_jacobi_stops_on_the_relative_residual_and_bounds_its_error(tmp_path):
    """The lid by Jacobi to 1e-4: the error bound (|A^-1| max|update|, two Dirichlet sides on each axis) holds
    against the exact discrete solution (solver.core.exact) and is below the field's range."""

    path = write_case(tmp_path / "j.yaml", grid={"nx": 31, "ny": 31}, physics={"equation": "laplace"},
                      initial={"kind": "constant"}, boundary={"top": 1.0},
                      run={"steps": 20000, "tolerance": 1e-4, "check_every": 50}, backend={"name": "numba"},
                      output={"vtk": False})
    res = stencil(["run", str(path)])
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "out_j" / "record.json").read_text())
    s = rec["solver"]
    assert s["initial_residual"] == pytest.approx(0.25) and s["history"][0]["iteration"] == 1
    assert s["converged"] and s["final_relative"] < 1e-4 <= s["history"][-2]["relative"]
    rho = np.cos(np.pi / 32)
    assert s["contraction"] == pytest.approx(rho, rel=1e-12)
    case = validate_case(rec["case"])
    assert s["error_bound"] == pytest.approx(min(exact.inverse_bound(case) * s["final_residual"],
                                                 rho / (1 - rho) * s["update_l2"]))
    assert "error bound" in res.stdout and "bounds nothing" not in res.stdout
    assert 0.5 < s["field_range"] <= 1 and s["error_bound"] < s["field_range"]
    with h5py.File(tmp_path / "out_j" / "fields.h5", "r") as f:
        u = f["u"][-1]
    truth = np.abs(u - exact.of_case(case, range(31), range(31))).max()
    assert 0 < truth <= s["error_bound"]


def test_a_jacobi_error_bound_beyond_the_fields_range_says_it_bounds_nothing(tmp_path):
    """255^2 lid, 200 iterations: the bound (|A^-1| max|update|) is far above the field's whole range (at most 1, the
    lid's value): the summary says so."""
    path = write_case(tmp_path / "b.yaml", grid={"nx": 255, "ny": 255}, physics={"equation": "laplace"},
                      initial={"kind": "constant"}, boundary={"top": 1.0}, run={"steps": 200},
                      backend={"name": "numba"}, output={"vtk": False})
    res = stencil(["run", str(path)])
    assert res.returncode == 0, res.stderr
    s = json.loads((tmp_path / "out_b" / "record.json").read_text())["solver"]
    assert 0 < s["field_range"] <= 1 < s["error_bound"]
    assert "so it bounds nothing" in " ".join(res.stdout.split())


def test_multigrid_case_errors_name_the_field(case_file):
    bad = {"heat": dict(physics={"equation": "heat", "solver": "multigrid"}),
           "tile": dict(physics={"equation": "laplace", "solver": "multigrid"}, backend={"name": "numba", "time_tile": 4}),
           "cycle": dict(physics={"equation": "laplace", "solver": "multigrid"}, multigrid={"cycle": "X"}),
           "tol": dict(physics={"equation": "laplace"}, run={"tolerance": 2.0})}
    fields = {"heat": "physics.solver", "tile": "backend.time_tile", "cycle": "multigrid.cycle", "tol": "run.tolerance"}
    for name, sections in bad.items():
        res = stencil(["run", str(case_file(name, **sections))])
        assert res.returncode == 2 and fields[name] in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


def test_validate_explains_what_the_tolerance_means(case_file):
    res = stencil(["validate", str(case_file("v", physics={"equation": "laplace", "solver": "multigrid"},
                                            run={"tolerance": 1e-8}))])
    assert res.returncode == 0 and "relative residual" in res.stdout and "multigrid V(2,2)" in res.stdout


@pytest.mark.parametrize("solver", ["multigrid", "jacobi"])
def test_residual_field_written_when_asked(tmp_path, solver):
    """output.residual: residual.h5 holds the final residual field, whose largest value is the record's."""
    u, rec = run(tmp_path, solver, physics={"solver": solver}, output={"residual": True},
                 run={"steps": 4 if solver == "multigrid" else 200, "check_every": 50})
    with h5py.File(tmp_path / f"out_{solver}" / "residual.h5") as f:
        r = f["u"][-1]
        assert r.shape == u.shape and f["step"][-1] == rec["run"]["steps"]
    assert np.abs(r).max() == rec["run"]["residuals"][-1][1]


def test_residual_output_is_refused_for_heat(case_file):
    res = stencil(["run", str(case_file("h", output={"residual": True}))])
    assert res.returncode == 2 and "output.residual" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_report_draws_a_multigrid_run(tmp_path):
    run(tmp_path, "rep")
    res = stencil(["report", str(tmp_path / "out_rep")])
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out_rep" / "bandwidth.png").stat().st_size > 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_numba_stop_test_in_one_pass_equals_residual_then_max(dtype):
    """numba_mg.residual_max (issue 35): the residual's bits where r is kept, and max |r| as mg_ops.max_abs gives it,
    with and without g, r kept or not; a NaN reads as inf."""
    from solver.backends import numba_mg
    from solver.core.physics import Weights

    rng = np.random.default_rng(35)
    t = np.dtype(dtype).type
    w = Weights(t(0), t(0.21), t(0.29))
    region = (2, 31, 2, 40)
    for bad in (False, True):
        u, g, r = (rng.uniform(-1, 1, (33, 42)).astype(dtype) for _ in range(3))
        if bad:
            u[9, 17] = np.nan
        for gg in (None, g):
            want = r.copy()
            mg_ops.residual(want, u, gg, w, region)
            got = r.copy()
            m = numba_mg.residual_max(got, u, gg, w.wx, w.wy, *region)
            assert m == mg_ops.max_abs(want, region) == numba_mg.residual_max(None, u, gg, w.wx, w.wy, *region)
            assert (got.view(np.uint8) == want.view(np.uint8)).all()
            assert (m == np.inf) == bad


def test_the_passes_counted_for_sweeps_two_a_pass():
    """solver.results.solver.cycle_bytes: a plain V(2,2) cycle's finest level of laplace makes 16 array passes
    (four sweeps of 2, the residual 2, the restriction 1, the prolongation 2, the stop test 3); with sweeps two a pass
    and the stop test folded (a GPU's graphs) 6: two passes of 2, r written once and read by the restriction. A
    coarse level: 4 x 3 + 3 + 1 + 2 + 1 = 19 plain, (2 x 3 + 1 + 1) - 1 = 7 tiled (its first pass reads no u)."""
    from solver.results.solver import cycle_bytes

    case = validate_case({"name": "t", "grid": {"nx": 7, "ny": 5}, "physics": {"equation": "laplace", "solver": "multigrid"},
                          "numerics": {"dtype": "float64"}})
    fine = {"nx": 7, "ny": 5, "solve": "smoothing", "passes": "two sweeps a pass", "stop_test": "in the last sweep's pass"}
    coarse = {"nx": 3, "ny": 2, "solve": "smoothing", "passes": "two sweeps a pass"}
    last = {"nx": 1, "ny": 1, "solve": "direct (dense inverse)", "passes": "a pass a verb"}
    levels = [fine, coarse, last]
    bottom = (3 + 2) * 8  # the coarsest level: its residual and the solve, counted alike in both
    assert cycle_bytes(case, levels, 2, 2) == (16 * 35 + 19 * 6) * 8 + bottom
    assert cycle_bytes(case, levels, 2, 2, made=True) == (6 * 35 + 7 * 6) * 8 + bottom
    unfolded = [{**fine, "stop_test": None}, coarse, last]
    assert cycle_bytes(case, unfolded, 2, 2, made=True) == (9 * 35 + 7 * 6) * 8 + bottom
    plain = [{**lev, "passes": "a pass a verb"} for lev in levels]
    assert cycle_bytes(case, plain, 2, 2, made=True) == cycle_bytes(case, plain, 2, 2)
