"""Sources, convective sides, side values that vary, and diffusivity fields (issues 33 and 34), proved against
solutions the 5-point scheme must reproduce: closed forms it reproduces to rounding (a parabola, a straight
line, a layered wall), a dense direct solve of the same discrete equations written out here independently,
manufactured smooth solutions whose error must fall as h^2, and the energy balance; bitwise equality of the
numpy and numba backends (time tiles included). MPI: tests/test_physics_mpi.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import stencil, write_case

from solver import api
from solver.core.errors import InputError

BASE = {"backend": {"name": "numpy"}, "output": {"fields": False, "vtk": False}, "initial": {"kind": "constant", "value": 0.0}}


def solve(tmp_path, name, **sections) -> api.Result:
    data = {**BASE, **sections, "name": name}
    data["output"] = {**BASE["output"], **sections.get("output", {}), "dir": str(tmp_path / name)}
    case = api.build_case(data)
    return api.run(case, overwrite=True, progress=False, ceiling=False)


def steady(grid, boundary, physics=None, **extra):
    return {"grid": grid, "boundary": boundary, "run": {"steps": 60, "tolerance": 1e-13},
            "physics": {"equation": "laplace", "solver": "multigrid", **(physics or {})}, **extra}


# closed forms ---------------------------------------------------------------------------------------
def test_constant_source_between_two_dirichlet_sides_gives_the_parabola_to_rounding(tmp_path):
    """0 = alpha u'' + q, u = 0 at y = 0 and y = ly, insulated x sides: u = q y (ly - y) / (2 alpha), a quadratic
    the 5-point equations hold exactly; multigrid (plain and cg) and Jacobi-free heat's steady state."""
    q, alpha, ly = 3.0, 0.7, 2.0
    for krylov in ("none", "cg"):
        r = solve(tmp_path, f"parabola_{krylov}", **steady(
            {"nx": 9, "ny": 31, "ly": ly}, {"left": {"kind": "neumann"}, "right": {"kind": "neumann"}},
            {"alpha": alpha, "source": [{"kind": "constant", "value": q}]}, multigrid={"krylov": krylov}))
        exact = q * r.y * (ly - r.y) / (2 * alpha)
        assert np.max(np.abs(r.field - exact[:, None])) <= 1e-12 * exact.max(), krylov
        e = r.record["energy"]  # the source's heat leaves through the two Dirichlet sides
        assert abs(e["imbalance"]) <= 1e-10 * e["sources"] and e["sides"]["left"] == 0.0


def test_convective_side_opposite_a_dirichlet_side_gives_the_straight_line_to_rounding(tmp_path):
    """u = T0 at x = 0, -du/dx = h (u - Ta) at x = lx (half a spacing beyond the last point): the linear profile
    u = T0 + s x, s = -h (T0 - Ta) / (1 + h lx), which the convective ghost rule reproduces exactly."""
    t0, ta, h, lx = 5.0, 1.0, 2.5, 1.5
    r = solve(tmp_path, "line", **steady(
        {"nx": 40, "ny": 6, "lx": lx},
        {"left": t0, "right": {"kind": "convective", "h": h, "ambient": ta},
         "bottom": {"kind": "neumann"}, "top": {"kind": "neumann"}}))
    exact = t0 - h * (t0 - ta) / (1 + h * lx) * r.x
    assert np.max(np.abs(r.field - exact[None, :])) <= 1e-12 * t0
    out = r.record["energy"]["sides"]
    assert out["right"] == pytest.approx(-out["left"], rel=1e-10) and out["right"] < 0  # what enters leaves


@pytest.mark.parametrize("sides", ["neumann", "periodic"])
def test_a_source_with_insulated_or_periodic_sides_adds_q_dt_per_step(tmp_path, sides):
    """The total's growth is dt sum(q) dx dy a step (no flux through the sides), to rounding; the record's
    energy balance says so and closes."""
    kind = {"kind": sides}
    r = solve(tmp_path, f"grow_{sides}", grid={"nx": 20, "ny": 14}, boundary={s: kind for s in ("left", "right", "bottom", "top")},
              physics={"source": [{"kind": "gaussian", "center": [0.3, 0.6], "width": 0.2, "amplitude": 4.0}]},
              initial={"kind": "random", "seed": 1}, run={"steps": 50, "check_every": 10})
    e = r.record["energy"]
    assert e["sides_observed"] and all(v == 0.0 for v in e["sides"].values())
    assert abs(e["change"] - e["sources"]) <= e["bound"] and e["closed"] is True
    dt, (dx, dy) = r.record["input"]["dt"], (r.record["input"]["dx"], r.record["input"]["dy"])
    assert e["sources"] > 0 and e["sources"] == pytest.approx(50 * dt * np.sum(_gauss(r.x, r.y, 0.3, 0.6, 0.2, 4.0)) * dx * dy,
                                                              rel=1e-12)


def _gauss(x, y, cx, cy, w, a):
    return a * np.exp(-((x[None, :] - cx) ** 2 + (y[:, None] - cy) ** 2) / (2 * w * w))


# a dense direct solve of the same discrete equations ----------------------------------------------------
def dense_steady(case, q: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The steady 5-point equations sum_f F_f (u_nb - u) + q = 0 with harmonic-mean faces and the ghost rules,
    assembled point by point from their definitions (README: sides and materials) and solved densely."""
    from solver.core.physics import spacing

    ny, nx = case.shape
    dx, dy = spacing(case)
    b = case.boundary
    n = nx * ny
    a_mat, rhs = np.zeros((n, n)), -q.reshape(-1).astype(float)
    x = (np.arange(nx) + (1.0 if b.left.kind == "dirichlet" else 0.5)) * dx
    y = (np.arange(ny) + (1.0 if b.bottom.kind == "dirichlet" else 0.5)) * dy

    def side_value(spec, key, s):
        v = getattr(spec, key)
        return v if isinstance(v, float) else float(np.interp(s, *np.asarray(v.along).T))

    for i in range(ny):
        for j in range(nx):
            p = i * nx + j
            for di, dj, h, side, along in ((0, -1, dx, "left", y[i]), (0, 1, dx, "right", y[i]),
                                            (-1, 0, dy, "bottom", x[j]), (1, 0, dy, "top", x[j])):
                ii, jj = i + di, j + dj
                if 0 <= ii < ny and 0 <= jj < nx:
                    f = 2 * alpha[i, j] * alpha[ii, jj] / (alpha[i, j] + alpha[ii, jj]) / h**2
                    a_mat[p, p] -= f
                    a_mat[p, ii * nx + jj] += f
                    continue
                f, spec = alpha[i, j] / h**2, getattr(b, side)
                a_mat[p, p] -= f
                if spec.kind == "dirichlet":
                    rhs[p] -= f * side_value(spec, "value", along)
                elif spec.kind == "neumann":
                    a_mat[p, p] += f
                    rhs[p] -= f * side_value(spec, "flux", along) * h
                elif spec.kind == "convective":
                    hh, ta = side_value(spec, "h", along), side_value(spec, "ambient", along)
                    a_mat[p, p] += f * (1 - hh * h / 2) / (1 + hh * h / 2)
                    rhs[p] -= f * hh * h * ta / (1 + hh * h / 2)
                else:
                    a_mat[p, (ii % ny) * nx + jj % nx] += f
    return np.linalg.solve(a_mat, rhs).reshape(ny, nx)


MIXED = {"top": {"kind": "dirichlet", "value": {"along": [[0.0, 1.0], [1.0, 3.0]]}}, "bottom": 0.5,
         "left": {"kind": "neumann", "flux": -0.7},
         "right": {"kind": "convective", "h": {"along": [[0.0, 0.5], [1.0, 4.0]]}, "ambient": 2.0}}
SOURCES = [{"kind": "gaussian", "center": [0.4, 0.5], "width": 0.15, "amplitude": 30.0},
           {"kind": "rectangle", "lower": [0.6, 0.1], "upper": [0.9, 0.3], "value": -5.0}]


@pytest.mark.parametrize("alpha", ["number", "regions", "random"])
def test_steady_state_equals_a_dense_direct_solve_of_the_same_equations(tmp_path, alpha):
    """Sources, a profile along a Dirichlet side, a Neumann flux, a convective side whose h varies along it; alpha
    a number, two regions (contrast 10^3), or random per point (contrast 10^3 from a file): multigrid (plain
    cycles and cg; a field: cg, the default there, as plain cycles may diverge at jumps on grids this coarse)
    to the rounding floor against np.linalg.solve, 1e-10 relative."""
    rng = np.random.default_rng(4)
    nx, ny = 17, 13
    field = {"number": 1.3, "regions": {"background": 1.0, "regions": [
        {"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.45, 1.0], "value": 1000.0}]}}.get(alpha)
    if alpha == "random":
        np.save(tmp_path / "alpha.npy", 10 ** rng.uniform(0, 3, (ny, nx)))
        field = {"kind": "file", "path": str(tmp_path / "alpha.npy")}
    for krylov in ("none", "cg") if alpha == "number" else ("cg",):
        r = solve(tmp_path, f"dense_{alpha}_{krylov}", **steady({"nx": nx, "ny": ny}, MIXED,
                                                                {"alpha": field, "source": SOURCES},
                                                                multigrid={"krylov": krylov, "coarsest": 16}),)
        case = api.build_case({**BASE, "name": "c", "grid": {"nx": nx, "ny": ny}, "boundary": MIXED,
                               "physics": {"equation": "laplace", "alpha": field, "source": SOURCES}})
        from solver.core.materials import alpha_at
        from solver.core.sources import every_term, q_at

        rows, cols = np.arange(ny), np.arange(nx)
        exact = dense_steady(case, q_at(case, every_term(case), rows, cols), alpha_at(case, rows, cols))
        assert np.max(np.abs(r.field - exact)) <= 1e-10 * np.max(np.abs(exact)), (alpha, krylov)


@pytest.mark.parametrize("layers,contrast", [(2, 1e3), (5, 1e4)])
def test_layered_wall_matches_the_exact_discrete_solution(tmp_path, layers, contrast):
    """A wall of layers across x (Dirichlet 0 and 1 on its faces, insulated top and bottom). The discrete equations
    put u linear in the cumulated resistance sum(1 / face) along x: their exact solution, summed here in rational
    arithmetic. Multigrid (cg, the default for fields, and plain cycles; numpy and numba bitwise equal) reaches it
    to 1e-12 where float64 can: with contrast 10^4 the equations' own conditioning limits every float64 solver
    (numpy's LU of the same tridiagonal system lands about 1e-11 away), so there the bound is 4 x LU's error."""
    from fractions import Fraction

    from solver.core.materials import alpha_at

    nx, ny = 63, 5
    values = [contrast ** (k % 2) * (1 + k) for k in range(layers)]
    regions = [{"kind": "rectangle", "lower": [k / layers, 0.0], "upper": [(k + 1) / layers, 1.0], "value": v}
               for k, v in enumerate(values)]
    alpha = {"background": 1.0, "regions": regions}
    case = api.build_case({**BASE, "name": "c", "grid": {"nx": nx, "ny": ny}, "physics": {"alpha": alpha},
                           "run": {"steps": 1}})
    a = alpha_at(case, np.arange(1), np.arange(nx))[0]
    ext = np.concatenate([[a[0]], a, [a[-1]]])
    faces = 2 * ext[:-1] * ext[1:] / (ext[:-1] + ext[1:])  # nx + 1 faces, the walls' the first and last points'
    resist = np.cumsum(np.array([Fraction(1) / Fraction(f) for f in faces], dtype=object))
    exact = np.array([float(c / resist[-1]) for c in resist[:-1]])
    lu = np.linalg.solve(np.diag(faces[:-1] + faces[1:]) - np.diag(faces[1:-1], 1) - np.diag(faces[1:-1], -1),
                         np.eye(nx)[-1] * faces[-1])
    bound = max(1e-12, 4 * np.max(np.abs(lu - exact)))
    for krylov in ("cg", "none"):
        fields = [solve(tmp_path, f"layers{layers}_{krylov}_{backend}", **steady(
            {"nx": nx, "ny": ny}, {"left": 0.0, "right": 1.0, "bottom": {"kind": "neumann"}, "top": {"kind": "neumann"}},
            {"alpha": alpha}, backend={"name": backend, "threads": 1}, multigrid={"krylov": krylov})).field
            for backend in ("numpy", "numba")]
        assert np.array_equal(fields[0], fields[1])
        assert np.max(np.abs(fields[0] - exact[None, :])) <= bound, (krylov, np.max(np.abs(fields[0] - exact)), bound)


# manufactured solutions: second order ----------------------------------------------------------------
def _order(errors: list[float], sizes: list[int]) -> list[float]:
    return [math.log(errors[k] / errors[k + 1]) / math.log((sizes[k + 1] + 1) / (sizes[k] + 1)) for k in range(len(sizes) - 1)]


def _mms(tmp_path, name, n, physics, run, alpha_values=None, q_values=None, **extra):
    """A run on an n x n grid of the unit square, the source (and alpha) given point by point from files."""
    g = (np.arange(n) + 1) / (n + 1)
    x, y = np.meshgrid(g, g)
    np.save(tmp_path / f"{name}_q.npy", q_values(x, y))
    phys = {**physics, "source": [{"kind": "file", "path": str(tmp_path / f"{name}_q.npy")}]}
    if alpha_values is not None:
        np.save(tmp_path / f"{name}_a.npy", alpha_values(x, y))
        phys["alpha"] = {"kind": "file", "path": str(tmp_path / f"{name}_a.npy")}
    r = solve(tmp_path, name, grid={"nx": n, "ny": n}, physics=phys, run=run, **extra)
    return r, x, y


SIZES = [15, 31, 63]
SS = lambda x, y: np.sin(np.pi * x) * np.sin(np.pi * y)  # noqa: E731


def _alpha(x, y):
    return 1.0 + 0.5 * np.sin(np.pi * x) * np.cos(np.pi * y)


def _q_variable(x, y):
    """-div(alpha grad u) for u = sin(pi x) sin(pi y) and alpha above."""
    ax = 0.5 * np.pi * np.cos(np.pi * x) * np.cos(np.pi * y)
    ay = -0.5 * np.pi * np.sin(np.pi * x) * np.sin(np.pi * y)
    ux, uy = np.pi * np.cos(np.pi * x) * np.sin(np.pi * y), np.pi * np.sin(np.pi * x) * np.cos(np.pi * y)
    return -(ax * ux + ay * uy) + _alpha(x, y) * 2 * np.pi**2 * SS(x, y)


@pytest.mark.parametrize("variable", [False, True], ids=["alpha", "alpha_field"])
def test_manufactured_steady_state_converges_at_second_order(tmp_path, variable):
    errors, sizes = [], [31, 63, 127] if variable else SIZES  # alpha's own variation: asymptotic from 31 points
    for n in sizes:
        r, x, y = _mms(tmp_path, f"ss{n}_{variable}", n, {"equation": "laplace", "solver": "multigrid"},
                       {"steps": 60, "tolerance": 1e-12}, _alpha if variable else None,
                       _q_variable if variable else (lambda x, y: 2 * np.pi**2 * SS(x, y)))
        errors.append(np.max(np.abs(r.field - SS(x, y))))
    assert all(abs(o - 2) <= 0.1 for o in _order(errors, sizes)), (errors, _order(errors, sizes))


@pytest.mark.parametrize("scheme", ["explicit", "backward-euler", "crank-nicolson"])
def test_manufactured_heat_converges_at_second_order(tmp_path, scheme):
    """u = (1 - exp(-2 pi^2 t)) sin(pi x) sin(pi y) solves u_t = lap u + 2 pi^2 sin sin from u = 0: the error at
    t = 0.05 falls as h^2 (dt ~ h^2 for explicit and backward Euler, 0.1 h for Crank-Nicolson, whose error from the
    source switched on at t = 0 is first order in dt for a while: 0.25 h measured 1.72 and 1.84)."""
    errors, t_end = [], 0.05
    for n in SIZES:
        h = 1.0 / (n + 1)
        steps = math.ceil(t_end / (0.2 * h * h if scheme != "crank-nicolson" else 0.1 * h))
        r, x, y = _mms(tmp_path, f"heat{n}_{scheme}", n, {"scheme": scheme, "dt": t_end / steps},
                       {"steps": steps, "check_every": steps, **({"tolerance": 1e-11} if scheme != "explicit" else {})},
                       q_values=lambda x, y: 2 * np.pi**2 * SS(x, y))
        errors.append(np.max(np.abs(r.field - (1 - math.exp(-2 * np.pi**2 * t_end)) * SS(x, y))))
    assert all(abs(o - 2) <= 0.1 for o in _order(errors, SIZES)), (scheme, errors, _order(errors, SIZES))


# bitwise across backends, paths and the energy balance ------------------------------------------------------
HEAT = {"grid": {"nx": 37, "ny": 29}, "initial": {"kind": "random", "seed": 5},
        "physics": {"alpha": {"background": 1.0, "regions": [{"kind": "disk", "center": [0.6, 0.4], "radius": 0.25,
                                                               "value": 20.0}]},
                    "source": [SOURCES[0], {"kind": "constant", "value": 2.0, "active": [1e-4, 3e-4]}]},
        "run": {"steps": 120, "check_every": 30}}


@pytest.mark.parametrize("boundary", ["dirichlet", "mixed"])
def test_numba_equals_numpy_bitwise_with_sources_fields_and_varying_sides(tmp_path, boundary):
    """Time tiles (all-Dirichlet sides, a source window the loop stops at) and plain steps (a convective side,
    profiles, a table in time), float64 and float32; the explicit balance closes wherever steps are seen."""
    sides = {"top": 1.0} if boundary == "dirichlet" else {**MIXED, "bottom": {"kind": "dirichlet",
                                                                              "value": {"time": [[0, 0], [0.002, 2.0]]}}}
    for dtype in ("float64", "float32"):
        runs = {}
        for backend, tile in (("numpy", None), ("numba", 1), ("numba", 4)):
            r = solve(tmp_path, f"b_{boundary}_{dtype}_{backend}_{tile}", **HEAT, boundary=sides,
                      numerics={"dtype": dtype}, backend={"name": backend, "threads": 2, "time_tile": tile} if tile else
                      {"name": backend})
            runs[(backend, tile)] = r
        ref = runs[("numpy", None)].field
        for key, r in runs.items():
            assert np.array_equal(r.field, ref), (boundary, dtype, key)
        assert runs[("numpy", None)].record["energy"]["closed"] is True
        tiled = runs[("numba", 4)].record
        assert tiled["resources"]["time_tile"] == (4 if boundary == "dirichlet" else 1)


def test_jacobi_with_a_source_and_a_field_equals_numba_and_reaches_the_multigrid_solution(tmp_path):
    case = steady({"nx": 15, "ny": 11}, {"top": 1.0, "right": {"kind": "convective", "h": 3.0}},
                  {"alpha": HEAT["physics"]["alpha"], "source": SOURCES})
    mg = solve(tmp_path, "jmg", **case).field
    jac = {**case, "physics": {**case["physics"], "solver": "jacobi"}, "run": {"steps": 40000, "tolerance": 1e-13,
                                                                             "check_every": 500}}
    a = solve(tmp_path, "jnp", **jac).field
    b = solve(tmp_path, "jnb", **jac, backend={"name": "numba", "threads": 2}).field
    assert np.array_equal(a, b)
    assert np.max(np.abs(a - mg)) <= 1e-8 * np.max(np.abs(mg))


def test_restart_continues_a_table_in_time_and_a_source_window_bitwise(tmp_path):
    """A run stopped at step 40 and continued equals the uninterrupted run (the side's table and the window
    continue at the right time); the checkpoint refuses a case whose source differs."""
    case = write_case(tmp_path / "tt.yaml", grid={"nx": 19, "ny": 15}, initial={"kind": "random", "seed": 2},
                      boundary={"top": {"kind": "dirichlet", "value": {"time": [[0, 0], [0.003, 5.0]]}},
                                "left": {"kind": "convective", "h": 2.0, "ambient": {"time": [[0, 1], [0.004, -1]]}}},
                      physics={"source": [{"kind": "constant", "value": 9.0, "active": [0.001, 0.002]}]},
                      run={"steps": 90, "check_every": 10}, output={"checkpoint_every": 40, "vtk": False})
    whole = stencil(["run", str(case), "-q", "-o", str(tmp_path / "whole")])
    part = stencil(["run", str(case), "-q", "-o", str(tmp_path / "part"), "--steps", "40"])
    assert whole.returncode == 0 and part.returncode == 0, whole.stderr + part.stderr
    other = stencil(["run", str(case), "-q", "--restart", str(tmp_path / "part"), "-o", str(tmp_path / "other"),
                     "--set", "physics.source.0.value=8"])
    assert other.returncode == 2 and "physics.source" in other.stderr, other.stderr
    more = stencil(["run", str(case), "-q", "--restart", str(tmp_path / "part"), "-o", str(tmp_path / "part")])
    assert more.returncode == 0, more.stderr
    import h5py

    with h5py.File(tmp_path / "whole" / "fields.h5") as a, h5py.File(tmp_path / "part" / "fields.h5") as b:
        assert np.array_equal(a["u"][-1], b["u"][-1]) and b["step"][-1] == 90


# the command line and bad input ---------------------------------------------------------------------------
def test_set_overrides_any_field_by_path_including_list_entries(tmp_path):
    case = write_case(tmp_path / "s.yaml", physics={"source": [{"kind": "gaussian", "center": [0.5, 0.5], "width": 0.1,
                                                                "amplitude": 1.0}]})
    res = stencil(["validate", str(case), "--set", "physics.source.0.amplitude=5", "--set", "grid.nx=31"])
    assert res.returncode == 0, res.stderr
    res = stencil(["run", str(case), "-q", "--set", "physics.source.0.amplitude=5", "--set", "grid.nx=31"])
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "out_s" / "record.json").read_text())
    assert rec["case"]["physics"]["source"][0]["amplitude"] == 5.0 and rec["input"]["nx"] == 31
    c = api.load_case(case, {"physics.source.0.width": 0.2, "boundary.top": {"kind": "convective", "h": 1.0}})
    assert c.physics.source[0].width == 0.2 and c.boundary.top.kind == "convective"


BAD = [
    ({"physics": {"source": [{"kind": "constant", "value": ".nan"}]}}, "physics.source.0.value"),
    ({"physics": {"source": [{"kind": "gaussian", "center": [0.5, 0.5], "width": -1, "amplitude": 1}]}},
     "physics.source.0.width: Input should be greater than or equal to 1e-100"),
    ({"physics": {"source": [{"kind": "constant", "value": 1, "active": [2, 1]}]}}, "physics.source.0.active"),
    ({"boundary": {"top": {"kind": "convective", "h": -1}}}, "boundary.top.h: -1 is negative"),
    ({"boundary": {"top": {"kind": "dirichlet", "value": {"time": [[0, 1], [0, 2]]}}}}, "boundary.top.value.time"),
    ({"boundary": {"top": {"kind": "dirichlet", "value": {"along": [[0.5, 1], [0.2, 2]]}}}}, "sort the table by s"),
    ({"boundary": {"top": {"kind": "dirichlet", "value": {"file": "missing.npy"}}}}, "boundary.top.value.file: file"),
    ({"boundary": {"top": {"kind": "robin"}}}, "unknown kind 'robin'; use one of convective"),
    ({"physics": {"alpha": 0}}, "physics.alpha: 0 is outside"),
    ({"physics": {"alpha": {"background": 1, "regions": [{"kind": "disk", "center": [0, 0], "radius": 1, "value": -2}]}}},
     "physics.alpha.regions.0.value: Input should be greater than 0"),
    ({"physics": {"equation": "laplace", "source": [{"kind": "constant", "value": 1, "active": [0, 1]}]}},
     "physics.source.0.active: laplace is a steady state"),
    ({"physics": {"equation": "laplace"}, "boundary": {s: {"kind": "convective", "h": 0} for s in ("top", "bottom", "left", "right")}},
     "no convective side with h > 0 is singular"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_physics_input_is_refused_in_one_line_with_exit_2_and_nothing_written(tmp_path, data, message):
    case = write_case(tmp_path / "bad.yaml", **data)
    res = stencil(["run", str(case), "-q"])
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "out_bad").exists()


def test_files_of_the_wrong_shape_or_values_are_refused_naming_the_shape(tmp_path):
    np.save(tmp_path / "q.npy", np.ones((5, 5)))
    np.save(tmp_path / "side.npy", np.ones(7))
    np.save(tmp_path / "a.npy", -np.ones((17, 23)))
    for data, message in (
            ({"physics": {"source": [{"kind": "file", "path": str(tmp_path / "q.npy")}]}},
             "physics.source.0.path: " + str(tmp_path / "q.npy") + " holds an array of shape (5, 5) but (ny, nx) = (17, 23)"),
            ({"boundary": {"top": {"kind": "dirichlet", "value": {"file": str(tmp_path / "side.npy")}}}},
             "one value per point of the side: (23,)"),
            ({"physics": {"alpha": {"kind": "file", "path": str(tmp_path / "a.npy")}}}, "must be > 0")):
        case = write_case(tmp_path / "bad.yaml", **data)
        res = stencil(["run", str(case), "-q"])
        assert res.returncode == 2 and message in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "out_bad").exists()
    with pytest.raises(InputError, match="--set: 'nonsense' is not PATH=VALUE"):
        from solver.case import parse_sets

        parse_sets(["nonsense"])
