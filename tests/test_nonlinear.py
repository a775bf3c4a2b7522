"""Nonlinear heat (solver.nonlinear): k(T) and radiation by Newton's method with multigrid, against closed forms
(the Kirchhoff wall, the radiating slab's quartic root), a manufactured solution at order 2, Newton's quadratic
convergence and grid-independent iteration counts, numba equal to numpy bitwise, restarts, the energy balance with
its radiated heat, and bad input. Under mpirun: tests/mpi/check_nonlinear.py (rows and cart equal one process)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import mpi_script, mpirun, needs_mpi, stencil, write_case

from solver.case import validate_case
from solver.parallel.comm import Comm
from solver.run import Options, Run

SIGMA = 5.670374419e-8
NEUMANN = {"kind": "neumann"}


def case(tmp_path, name, **sections):
    """A steady nonlinear case in SI (material form) with `sections` merged over the defaults."""
    data = {"name": name, "grid": {"nx": 31, "ny": 3, "lx": 0.1, "ly": 0.01},
            "materials": {"plate": {"k": 20.0, "C": 3e6}},
            "physics": {"material": "plate", "equation": "laplace", "solver": "multigrid"},
            "boundary": {"left": 400.0, "right": {"kind": "convective", "h": 10.0, "ambient": 300.0, "emissivity": 0.8,
                                                  "surroundings": 280.0}, "top": NEUMANN, "bottom": NEUMANN},
            "initial": {"kind": "constant", "value": 300.0}, "run": {"steps": 40, "tolerance": 1e-13},
            "backend": {"name": "numpy"}, "output": {"dir": str(tmp_path / name), "vtk": False}}
    for key, value in sections.items():
        data[key] = {**data[key], **value} if key in ("grid", "physics", "run", "output") else value
    return validate_case(data)


def run(c, **options):
    r = Run(c, Comm(), Options(ceiling=False, quiet=True, **options))
    record = r.execute()
    g = r.mg.grids[0]
    return r.backend.get(g.u, g.owned).astype(np.float64), record


def newton(record) -> list[dict]:
    return record["solver"]["newton"]["iterations"]


def bisect(f, lo: float, hi: float) -> float:
    """The root of an increasing or decreasing f in [lo, hi], to the last bit."""
    flo = f(lo)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if (f(mid) > 0) == (flo > 0):
            lo, flo = mid, f(mid)
        else:
            hi = mid
    return 0.5 * (lo + hi)


# closed forms ---------------------------------------------------------------------------------------------------
T1, T2, K0, BETA, L = 300.0, 600.0, 50.0, 4e-3, 0.1


def k_linear(t: float) -> float:
    return K0 * (1.0 + BETA * t)


def test_kirchhoff_wall_is_second_order_and_newton_converges_quadratically(tmp_path):
    """k = k0 (1 + beta u) between two fixed temperatures: phi = k0 (u + beta u^2 / 2) is linear in x, so
    u = (sqrt(1 + 2 beta phi / k0) - 1) / beta; the harmonic faces of k at the points' own temperatures converge to
    it at order 2, and the last Newton iterations show order 2 (not Picard's 1)."""
    phi = lambda u: K0 * (u + BETA * u * u / 2)  # noqa: E731
    errors = []
    for nx in (15, 31, 63):
        c = case(tmp_path, f"wall{nx}", grid={"nx": nx, "ny": 3, "lx": L, "ly": 0.01},
                 materials={"plate": {"k": [[0.0, k_linear(0.0)], [1000.0, k_linear(1000.0)]], "C": 3e6}},
                 boundary={"left": T1, "right": T2, "top": NEUMANN, "bottom": NEUMANN})
        u, rec = run(c)
        x = (np.arange(nx) + 1) * L / (nx + 1)
        p = phi(T1) + (phi(T2) - phi(T1)) * x / L
        exact = (np.sqrt(1 + 2 * BETA * p / K0) - 1) / BETA
        errors.append(np.abs(u[1] - exact).max())
        assert rec["solver"]["converged"] and len(newton(rec)) <= 8, rec["solver"]["ended"]
        orders = rec["solver"]["newton"]["orders"]
        assert max(orders) > 1.8, orders  # quadratic near the solution
    rates = [math.log2(a / b) for a, b in zip(errors, errors[1:])]
    assert all(1.9 < r < 2.1 for r in rates), (errors, rates)


def test_picard_converges_but_needs_more_iterations_than_newton(tmp_path):
    c = dict(grid={"nx": 31, "ny": 3, "lx": L, "ly": 0.01}, boundary={"left": T1, "right": T2, "top": NEUMANN,
                                                                       "bottom": NEUMANN},
             materials={"plate": {"k": [[0.0, k_linear(0.0)], [1000.0, k_linear(1000.0)]], "C": 3e6}})
    u_n, rec_n = run(case(tmp_path, "newton", **c))
    u_p, rec_p = run(case(tmp_path, "picard", newton={"jacobian": "picard"}, **c))
    assert rec_p["solver"]["converged"] and len(newton(rec_p)) > len(newton(rec_n)) + 2
    assert np.abs(u_n - u_p).max() < 1e-9 * np.abs(u_n).max()  # the same discrete solution
    picard = [e["relative"] for e in newton(rec_p)][2:-1]
    assert max(b / a for a, b in zip(picard, picard[1:])) > 1e-3  # a linear rate, not a quadratic one


def slab_wall() -> float:
    """The radiating and convecting slab's wall temperature: k (400 - T) / L = h (T - 300) + eps sigma (T^4 - 280^4)."""
    return bisect(lambda t: 20.0 * (400.0 - t) / L - 10.0 * (t - 300.0) - 0.8 * SIGMA * (t**4 - 280.0**4), 280.0, 400.0)


@pytest.mark.parametrize("nx", [31, 64])
def test_radiating_slab_reaches_the_quartic_root(tmp_path, nx):
    """A slab between a fixed 400 K and a wall that convects to 300 K and radiates to 280 K: the profile is a line
    to the quartic's root, which the 5-point scheme with the wall's film reproduces to rounding."""
    u, rec = run(case(tmp_path, f"slab{nx}", grid={"nx": nx, "ny": 3, "lx": L, "ly": 0.01}))
    tw = slab_wall()
    dx = L / (nx + 0.5)
    exact = 400.0 + (tw - 400.0) * (np.arange(nx) + 1) * dx / L
    assert np.abs(u - exact).max() < 1e-10, np.abs(u - exact).max()
    assert rec["solver"]["converged"] and len(newton(rec)) <= 6
    energy = rec["energy"]
    assert energy["holds"] and abs(energy["imbalance"]) < 1e-9 * abs(energy["sides"]["left"])
    flow = 20.0 * (400.0 - tw) / L * 0.01  # W per m of thickness through the slab
    assert energy["sides"]["right"] == pytest.approx(-flow, rel=1e-9)
    assert energy["radiated"]["right"] == pytest.approx(-0.8 * SIGMA * (tw**4 - 280.0**4) * 0.01, rel=1e-9)


def manufactured(x, y):
    """u, du/dx, du/dy, laplacian of the manufactured field (K, m)."""
    a, b = 2.0 / 0.1, 1.5 / 0.1
    s, c = np.sin(a * x + 0.3), np.cos(b * y)
    u = 450.0 + 80.0 * s * c
    ux, uy = 80.0 * a * np.cos(a * x + 0.3) * c, -80.0 * b * s * np.sin(b * y)
    return u, ux, uy, -80.0 * (a * a + b * b) * s * c


def test_manufactured_kt_with_a_radiating_side_is_second_order(tmp_path):
    """u = 450 + 80 sin(20 x + 0.3) cos(15 y) on a 0.1 m square with k = 20 (1 + 2e-3 (u - 300)): its source q = -div(k
    grad u) from a file, its values on three Dirichlet sides from files, and a right side that convects (h = 15) and
    radiates (eps 0.8 to 300 K) to an ambient (a file) chosen so that u satisfies it: the error falls at order 2."""
    k = lambda t: 20.0 * (1.0 + 2e-3 * (t - 300.0))  # noqa: E731
    eps, h, ts = 0.8, 15.0, 300.0
    errors = []
    for n in (16, 32, 64):
        dx, dy = 0.1 / (n + 0.5), 0.1 / (n + 1)
        x, y = (np.arange(n) + 1) * dx, (np.arange(n) + 1) * dy
        X, Y = np.meshgrid(x, y)
        u, ux, uy, lap = manufactured(X, Y)
        q = -(20.0 * 2e-3 * (ux * ux + uy * uy) + k(u) * lap)
        files = {"q": q, "bottom": manufactured(x, 0.0)[0], "top": manufactured(x, 0.1)[0],
                 "left": manufactured(0.0, y)[0]}
        uw, uxw, _, _ = manufactured(0.1, y)
        files["ambient"] = uw + (k(uw) * uxw + eps * SIGMA * (uw**4 - ts**4)) / h
        for name, values in files.items():
            np.save(tmp_path / f"{name}{n}.npy", values)
        c = case(tmp_path, f"mms{n}", grid={"nx": n, "ny": n, "lx": 0.1, "ly": 0.1},
                 materials={"plate": {"k": [[200.0, k(200.0)], [800.0, k(800.0)]], "C": 3e6}},
                 physics={"source": [{"kind": "file", "path": str(tmp_path / f"q{n}.npy")}]},
                 boundary={side: {"kind": "dirichlet", "value": {"file": str(tmp_path / f"{side}{n}.npy")}}
                           for side in ("bottom", "top", "left")}
                 | {"right": {"kind": "convective", "h": h, "ambient": {"file": str(tmp_path / f"ambient{n}.npy")},
                              "emissivity": eps, "surroundings": ts}},
                 initial={"kind": "constant", "value": 400.0})
        got, rec = run(c)
        assert rec["solver"]["converged"], rec["solver"]["ended"]
        errors.append(np.abs(got - u).max())
    rates = [math.log2(a / b) for a, b in zip(errors, errors[1:])]
    assert all(r > 1.8 for r in rates), (errors, rates)


# the method ------------------------------------------------------------------------------------------------------
def die(tmp_path, name, n, **sections):
    """A 2-D square of silicon, k(T) a power law, radiating and convecting on top, held at 350 K at the bottom."""
    base = dict(grid={"nx": n, "ny": n, "lx": 0.01, "ly": 0.01},
                materials={"si": {"k": {"k0": 148.0, "T0": 300.0, "b": -1.3}, "C": 1.66e6}},
                physics={"material": "si", "equation": "laplace", "solver": "multigrid", "thickness": 5e-4,
                         "source": [{"kind": "rectangle", "lower": [0.004, 0.006], "upper": [0.006, 0.008],
                                     "power": "2 W"}]},
                boundary={"bottom": 350.0, "top": {"kind": "convective", "h": 50.0, "ambient": 300.0,
                                                   "emissivity": 0.9, "surroundings": 300.0},
                          "left": NEUMANN, "right": NEUMANN})
    base.update(sections)
    return case(tmp_path, name, **base)


def every_term(tmp_path, name, backend, dtype="float64", **physics):
    """A plate with every nonlinear term at once: k(T) a power law and a table (a region), a radiating and convecting
    top, a radiating hole, a held pipe (its Gibou links with k(T)), face cooling and radiation, a Neumann side, a
    source (tests/test_gpu_nonlinear.py runs it on a GPU)."""
    data = {"name": name, "grid": {"nx": 77, "ny": 61, "lx": 0.04, "ly": 0.03},
            "materials": {"si": {"k": {"k0": 148.0, "T0": 300.0, "b": -1.3}, "C": 1.66e6},
                          "al": {"k": [[250.0, 240.0], [400.0, 228.0], [600.0, 210.0]], "C": 2.4e6}},
            "physics": {"material": "si", "equation": "laplace", "solver": "multigrid", "thickness": 1e-3,
                        "faces": {"h": 5.0, "ambient": 300.0, "emissivity": 0.3},
                        "regions": [{"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.04, 0.006],
                                     "material": "al"},
                                    {"kind": "disk", "center": [0.028, 0.018], "radius": 0.004,
                                     "hole": {"kind": "convective", "h": 20.0, "ambient": 320.0, "emissivity": 0.7}},
                                    {"kind": "disk", "center": [0.01, 0.02], "radius": 0.003, "held": 420.0}],
                        "source": [{"kind": "rectangle", "lower": [0.015, 0.008], "upper": [0.02, 0.012],
                                    "power": "3 W"}], **physics},
            "boundary": {"bottom": 330.0, "top": {"kind": "convective", "h": 12.0, "ambient": 300.0,
                                                  "emissivity": 0.9, "surroundings": 280.0},
                         "left": {"kind": "neumann", "flux": 500.0}, "right": NEUMANN},
            "initial": {"kind": "constant", "value": 320.0},
            "run": {"steps": 20 if physics.get("equation", "laplace") == "laplace" else 3,
                    "tolerance": 1e-9 if dtype == "float64" else 1e-5},
            "numerics": {"dtype": dtype}, "backend": {"name": backend},
            "output": {"dir": str(tmp_path / f"{name}-{backend}"), "vtk": False}}
    return validate_case(data)


def test_every_term_at_once_converges_in_full_steps_and_numba_equals_numpy(tmp_path):
    """A power law beside held and inactive points (their 0 K is no material's: k there must not reach the faces),
    a radiating hole's cut cells, radiating faces: Newton's full steps, five iterations, the same bits on numba."""
    fields = {}
    for backend in ("numpy", "numba"):
        fields[backend], rec = run(every_term(tmp_path, "every", backend))
        steps = [e["step"] for e in newton(rec)]
        assert rec["solver"]["converged"] and len(steps) <= 6 and set(steps) == {1.0}, (rec["solver"]["ended"], steps)
        assert rec["energy"]["holds"] and set(rec["energy"]["radiated"]) == {"top", "faces", "regions.1"}
    assert np.array_equal(fields["numpy"], fields["numba"])


def test_newton_iterations_do_not_grow_with_the_grid(tmp_path):
    counts = []
    for n in (31, 63, 127, 255):
        _, rec = run(die(tmp_path, f"die{n}", n, run={"steps": 40, "tolerance": 1e-10}))
        assert rec["solver"]["converged"], rec["solver"]["ended"]
        counts.append(len(newton(rec)))
    assert max(counts) - min(counts) <= 1, counts


def test_numba_equals_numpy_bitwise_with_materials_and_shapes(tmp_path):
    """Two materials (one with a k(T) table), a hole with a radiating rim, a held pipe, a Neumann side and face
    cooling: numba's multigrid and fused sweeps give numpy's bits (solver.backends.numba_nl follows the array expressions)."""
    sections = dict(
        grid={"nx": 40, "ny": 33, "lx": 0.04, "ly": 0.033},
        materials={"al": {"k": [[250.0, 240.0], [400.0, 228.0], [600.0, 210.0]], "C": 2.4e6}, "st": {"k": 15.0,
                                                                                                   "C": 3.8e6}},
        physics={"material": "al", "equation": "laplace", "solver": "multigrid", "thickness": 2e-3,
                 "faces": {"h": 8.0, "ambient": 300.0},
                 "regions": [{"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.04, 0.008], "material": "st"},
                             {"kind": "disk", "center": [0.028, 0.02], "radius": 0.005,
                              "hole": {"kind": "convective", "h": 20.0, "ambient": 320.0, "emissivity": 0.7}},
                             {"kind": "disk", "center": [0.01, 0.022], "radius": 0.004, "held": 500.0}]},
        boundary={"bottom": 330.0, "top": {"kind": "convective", "h": 12.0, "ambient": 300.0, "emissivity": 0.5},
                  "left": {"kind": "neumann", "flux": 2000.0}, "right": NEUMANN},
        run={"steps": 12, "tolerance": 1e-12})
    fields = {}
    for backend in ("numpy", "numba"):
        c = case(tmp_path, f"mix-{backend}", backend={"name": backend, **({"threads": 2} if backend == "numba" else {})},
                 **sections)
        fields[backend], rec = run(c)
        assert rec["solver"]["converged"], rec["solver"]["ended"]
        assert rec["energy"]["holds"], rec["energy"]
        assert set(rec["energy"]["radiated"]) == {"top", "regions.1"}
    assert np.array_equal(fields["numpy"], fields["numba"])


@pytest.mark.parametrize("variant", ["power-law", "picard-table", "constant-k"])
def test_numba_fused_sweeps_equal_the_numpy_expressions(tmp_path, variant):
    """The numba backend's fused sweeps (solver.backends.numba_nl: residual, faces, diagonal, Jacobian products) and
    kappa made in row blocks on two threads (one law on the whole plate) give the numpy backend's bits: the field and
    every Newton iteration's figures. A silicon-like plate heated inside, one side held, one convecting and radiating:
    a power law with the exact Jacobian, a table with Picard's, and a constant k (radiation alone)."""
    k = {"power-law": {"k0": 148.0, "T0": 300.0, "b": -1.3}, "picard-table": [[300.0, 150.0], [500.0, 80.0]],
         "constant-k": 148.0}[variant]
    data = {"grid": {"nx": 70, "ny": 130, "lx": 0.007, "ly": 0.013}, "materials": {"si": {"k": k, "C": 1.66e6}},
            "physics": {"material": "si", "equation": "laplace", "solver": "multigrid",
                        "source": [{"kind": "constant", "value": 2e8}]},
            "boundary": {"bottom": 350.0, "top": {"kind": "convective", "h": 50.0, "ambient": 300.0, "emissivity": 0.9},
                         "left": NEUMANN, "right": NEUMANN},
            "newton": {"jacobian": "picard" if variant == "picard-table" else "newton"},
            "run": {"steps": 60, "tolerance": 1e-11}}
    fields, logs = {}, {}
    for backend in ("numpy", "numba"):
        c = case(tmp_path, f"{variant}-{backend}", **data,
                 backend={"name": backend, **({"threads": 2} if backend == "numba" else {})})
        fields[backend], rec = run(c)
        assert rec["solver"]["converged"] or rec["solver"]["stopped_by"] == "floor", rec["solver"]["ended"]
        logs[backend] = newton(rec)
    assert np.array_equal(fields["numpy"], fields["numba"])
    assert logs["numpy"] == logs["numba"]


def test_a_far_start_converges_with_the_line_search_and_diverges_without(tmp_path):
    """The die from 1000 K (its answer is near 350 K): full Newton steps overshoot below absolute zero (the run ends
    with NaN, exit 4's error); the backtracking line search shortens the first steps and converges, quadratically at
    the end."""
    far = dict(initial={"kind": "constant", "value": 1000.0}, run={"steps": 40, "tolerance": 1e-10})
    _, rec = run(die(tmp_path, "far", 33, **far))
    assert rec["solver"]["converged"], rec["solver"]["ended"]
    steps = [e["step"] for e in newton(rec)]
    assert steps[0] < 1.0 and steps[-1] == 1.0, steps
    from solver.core.errors import NumericalError

    with pytest.raises(NumericalError, match="NaN or Inf"):
        run(die(tmp_path, "full", 33, newton={"line_search": "none"}, **far))


def test_restart_mid_run_equals_the_uninterrupted_run(tmp_path):
    """A checkpoint after two Newton iterations, continued: the same iterations (the forcing terms follow from the
    residual history the checkpoint keeps), the same field, bit for bit."""
    base = dict(grid={"nx": 33, "ny": 29, "lx": 0.01, "ly": 0.01})
    ref = die(tmp_path, "ref", 33, run={"steps": 12, "tolerance": 1e-12}, **base)
    u_ref, rec_ref = run(ref)
    c = die(tmp_path, "part", 33, run={"steps": 2, "tolerance": 1e-12}, output={"dir": str(tmp_path / "part"),
                                                                                "vtk": False, "checkpoint_every": 1},
            **base)
    run(c)
    more = die(tmp_path, "part", 33, run={"steps": 12, "tolerance": 1e-12},
               output={"dir": str(tmp_path / "part"), "vtk": False, "checkpoint_every": 1}, **base)
    u, rec = run(more, restart=str(tmp_path / "part"))
    assert np.array_equal(u, u_ref)
    assert [h["residual"] for h in rec["solver"]["history"]] == [h["residual"] for h in rec_ref["solver"]["history"]]
    assert [e["eta"] for e in newton(rec)] == [e["eta"] for e in newton(rec_ref)][2:]


def test_gmres_restarts_reach_the_same_solution(tmp_path):
    """newton.restart 2 with a tight forcing term: each linear solve restarts GMRES from its true residual (the restart
    field made at the first) and still reaches the forcing term; the solution is the unrestarted run's to the
    tolerance, in as many Newton iterations or one more."""
    steady = dict(run={"steps": 20, "tolerance": 1e-12})
    u_ref, rec_ref = run(die(tmp_path, "ref", 33, newton={"forcing": 1e-6}, **steady))
    u, rec = run(die(tmp_path, "restarted", 33, newton={"forcing": 1e-6, "restart": 2}, **steady))
    assert rec["solver"]["converged"] and rec_ref["solver"]["converged"]
    steps = newton(rec)
    assert max(e["linear_iterations"] for e in steps) > 2, steps  # (so some solve restarted)
    assert all(e["linear_relative"] <= 1e-6 for e in steps[:-1]), steps
    assert abs(len(steps) - len(newton(rec_ref))) <= 1
    assert np.abs(u - u_ref).max() <= 1e-9 * np.abs(u_ref).max()


BAD = [
    ({"boundary.right.emissivity": 1.5}, "boundary.right.emissivity", "less than or equal to 1"),
    ({"boundary.right.emissivity": -0.1}, "boundary.right.emissivity", "greater than or equal to 0"),
    ({"boundary.right.surroundings": -3.0}, "boundary.right.surroundings", "below absolute zero"),
    ({"boundary.left": -20.0}, "boundary.left.value", "below absolute zero"),
    ({"materials.plate.k": [[400.0, 10.0], [300.0, 12.0]]}, "materials.plate.k", "sort the table"),
    ({"materials.plate.k": [[300.0, 10.0], [400.0, 0.0]]}, "materials.plate.k", "must be > 0"),
    ({"materials.plate.k": [[-10.0, 10.0], [400.0, 12.0]]}, "materials.plate.k", "below absolute zero"),
    ({"materials.plate.k": {"k0": 10.0, "T0": -5.0, "b": 1.0}}, "materials.plate.k", "not above absolute zero"),
    ({"physics.solver": "jacobi"}, "physics.solver", "set physics.solver: multigrid"),
]


@pytest.mark.parametrize("overrides, field, words", BAD, ids=[b[1] + "-" + b[2][:12] for b in BAD])
def test_bad_nonlinear_input_exits_2_naming_the_field_and_writes_nothing(tmp_path, overrides, field, words):
    path = write_case(tmp_path / "bad.yaml", **{k: v for k, v in case(tmp_path, "bad").model_dump(mode="json").items()
                                                  if k in ("grid", "materials", "physics", "boundary", "initial")},
                      output={"dir": str(tmp_path / "out")})
    args = ["run", str(path)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    res = stencil(args)
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert field in line and words in line and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "out").exists()


def test_verify_runs_the_numpy_newton_on_one_process_and_passes(tmp_path):
    path = write_case(tmp_path / "v.yaml", **{k: v for k, v in die(tmp_path, "v", 25).model_dump(mode="json").items()
                                              if k in ("grid", "materials", "physics", "boundary", "initial", "run")},
                      backend={"name": "numba", "threads": 2}, output={"dir": str(tmp_path / "out"), "vtk": False})
    res = stencil(["run", str(path), "-q", "--verify"])
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "out" / "record.json").read_text())
    assert rec["correctness"]["passed"] and rec["correctness"]["mismatched_points"] == 0, rec["correctness"]


@pytest.mark.parametrize("scheme", ["backward-euler", "explicit"])
def test_verify_runs_the_numpy_steps_of_a_nonlinear_transient_and_passes(tmp_path, scheme):
    c = transient(tmp_path, "t", scheme, 5.0 if scheme != "explicit" else None, 12)
    path = write_case(tmp_path / "t.yaml", **{k: v for k, v in c.model_dump(mode="json").items()
                                              if k in ("grid", "materials", "physics", "boundary", "initial", "run")},
                      backend={"name": "numba", "threads": 2}, output={"dir": str(tmp_path / "out"), "vtk": False})
    res = stencil(["run", str(path), "-q", "--verify"])
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "out" / "record.json").read_text())
    assert rec["correctness"]["passed"] and rec["correctness"]["mismatched_points"] == 0, rec["correctness"]


def test_without_a_tolerance_newton_runs_to_the_rounding_floor_and_says_so(tmp_path):
    _, rec = run(case(tmp_path, "floor", run={"steps": 30, "tolerance": None}))
    s = rec["solver"]
    assert s["stopped_by"] == "floor" and s["final_relative"] < 1e-14 and len(newton(rec)) <= 8, s["ended"]
    assert "rounding floor" in s["ended"] and s["rounding_floor"] > 0


def test_float32_converges_to_its_own_tolerance(tmp_path):
    _, rec = run(every_term(tmp_path, "f32", "numpy", "float32"))
    assert rec["solver"]["converged"] and len(newton(rec)) <= 6, rec["solver"]["ended"]


def test_radiation_in_the_diffusivity_form_is_refused(tmp_path):
    path = write_case(tmp_path / "alpha.yaml", physics={"equation": "laplace", "solver": "multigrid"},
                      boundary={"top": {"kind": "convective", "h": 1.0, "ambient": 300.0, "emissivity": 0.5}})
    res = stencil(["validate", str(path)])
    assert res.returncode == 2 and "boundary.top.emissivity: radiation needs temperatures on an absolute scale" in \
        res.stderr, res.stderr


def test_an_initial_field_below_absolute_zero_is_refused_before_anything_is_written(tmp_path):
    path = write_case(tmp_path / "sine.yaml", **{k: v for k, v in case(tmp_path, "s").model_dump(mode="json").items()
                                                   if k in ("grid", "materials", "physics", "boundary")},
                      initial={"kind": "sine"}, output={"dir": str(tmp_path / "out")})
    res = stencil(["run", str(path)])
    assert res.returncode == 2 and "initial: the initial field reaches" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_mpi_rows_and_cart_equal_one_numpy_process_bitwise(n, tmp_path):
    res = mpi_script(n, "check_nonlinear.py", tmp_path, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("ok ") == 11 and f"ok nonlinear on {n} ranks" in res.stdout, res.stdout


# time steps ------------------------------------------------------------------------------------------------------
def transient(tmp_path, name, scheme, dt, steps, **sections):
    """The k(T) slab that radiates and convects, warming from 300 K after its left side is set to 400 K."""
    base = dict(materials={"plate": {"k": [[0.0, 50.0], [1000.0, 250.0]], "C": 3e6}},
                physics={"material": "plate", "equation": "heat", "scheme": scheme, "dt": dt,
                         "solver": "jacobi" if scheme == "explicit" else "multigrid"},
                run={"steps": steps, "tolerance": None if scheme == "explicit" else 1e-10})
    base.update(sections)
    return case(tmp_path, name, **base)


@pytest.mark.parametrize("scheme, order", [("backward-euler", 1.0), ("crank-nicolson", 2.0)])
def test_implicit_steps_converge_in_time_at_their_order_and_close_the_energy_balance(tmp_path, scheme, order):
    """Newton's method in every step, from a smooth field that meets the fixed side (Crank-Nicolson rings on data that
    do not: docs/multigrid.md): against the same scheme at a quarter of the smallest dt, the error at t = 2 s falls by 2^order as dt
    halves; every step's solve reaches its tolerance in a few iterations, and the heat that came in through the sides
    equals the change of the plate's heat."""
    x = (np.arange(31) + 1) * L / 31.5
    np.save(tmp_path / "u0.npy", np.tile(400.0 - 150.0 * x / L, (3, 1)))
    start = {"initial": {"kind": "file", "path": str(tmp_path / "u0.npy")}}
    ref, _ = run(transient(tmp_path, f"{scheme}-ref", scheme, 2.0 / 128, 128, **start))
    errors = []
    for n in (8, 16, 32):  # dt from 3.5 to 0.9 times the explicit limit (Crank-Nicolson's ringing starts near 5)
        u, rec = run(transient(tmp_path, f"{scheme}-{n}", scheme, 2.0 / n, n, **start))
        errors.append(np.abs(u - ref).max())
        s = rec["solver"]
        assert s["method"] == "newton" and not s["unconverged_steps"] and s["cycles_per_step"]["max"] <= 6, s["ended"]
        assert rec["energy"]["holds"], rec["energy"]
    rates = [math.log2(a / b) for a, b in zip(errors, errors[1:])]
    assert all(abs(r - order) < 0.3 for r in rates), (errors, rates)


def test_implicit_steps_reach_the_steady_state_of_newton(tmp_path):
    steady, _ = run(case(tmp_path, "steady", materials={"plate": {"k": [[0.0, 50.0], [1000.0, 250.0]], "C": 3e6}}))
    u, rec = run(transient(tmp_path, "long", "backward-euler", 2000.0, 40))
    assert np.abs(u - steady).max() < 1e-8, np.abs(u - steady).max()


def test_implicit_steps_numba_equals_numpy_bitwise(tmp_path):
    fields = {}
    for backend in ("numpy", "numba"):
        c = die(tmp_path, f"die-{backend}", 33, physics={"material": "si", "equation": "heat", "scheme": "crank-nicolson",
                                                        "dt": 0.05, "thickness": 5e-4},
                backend={"name": backend}, run={"steps": 5, "tolerance": 1e-10})
        fields[backend], rec = run(c)
        assert not rec["solver"]["unconverged_steps"]
    assert np.array_equal(fields["numpy"], fields["numba"])


def test_an_explicit_runs_balance_reads_walls_the_step_itself_filled(tmp_path, monkeypatch):
    """The explicit balance takes each step's wall rates from the field before the step readies it: the update fills
    the new field's walls, so the balance closes whatever the other field held (here its ghosts wiped after set-up,
    as a combine() leaves them; before the fill the left wall's heat read 40624 J for 46139)."""
    from solver.nonlinear import newton as newton_mod

    warm = newton_mod.Newton.warm_up

    def wiped(self):
        warm(self)
        self.backend.clear(self.mg.grids[0].t)

    monkeypatch.setattr(newton_mod.Newton, "warm_up", wiped)
    _, rec = run(transient(tmp_path, "wiped", "explicit", None, 100))
    assert rec["energy"]["closed"], rec["energy"]


def test_explicit_steps_take_k_and_radiation_at_the_old_field_and_agree_with_implicit_ones(tmp_path):
    """Explicit steps (k(T) and the wall's radiation at the old field) at 0.9 of the limit the case's temperatures
    give, against backward Euler and Crank-Nicolson at the same dt: forward and backward Euler straddle
    Crank-Nicolson by the same first-order error, and the explicit run's energy balance closes to rounding."""
    c = transient(tmp_path, "explicit", "explicit", None, 100)
    u_ex, rec = run(c)
    assert rec["energy"]["closed"], rec["energy"]
    from solver.core.physics import time_step

    dt = time_step(c)
    u_be, _ = run(transient(tmp_path, "be", "backward-euler", dt, 100))
    u_cn, _ = run(transient(tmp_path, "cn", "crank-nicolson", dt, 100))
    spread = np.abs(u_ex - u_cn).max()  # forward and backward Euler's first-order errors are opposite: their mean
    assert 0 < spread < 0.2 and np.abs(u_ex + u_be - 2 * u_cn).max() < 0.05 * spread  # is second order


def test_explicit_steps_stop_where_the_field_outgrows_the_stable_step(tmp_path):
    """k rising steeply with T and a source that heats the plate far above its sides' 300 K: the step chosen from the
    case's temperatures becomes unstable as the field heats; the run stops there with exit 4's error, naming
    physics.dt and the limit the field reached."""
    from solver.core.errors import NumericalError

    c = transient(tmp_path, "heats", "explicit", None, 400, materials={"plate": {"k": [[300.0, 5.0], [1000.0, 200.0]],
                                                                                    "C": 3e6}},
                  boundary={"left": 300.0, "right": 300.0, "top": NEUMANN, "bottom": NEUMANN},
                  physics={"material": "plate", "equation": "heat", "scheme": "explicit", "dt": None,
                           "solver": "jacobi", "source": [{"kind": "constant", "value": 3e5}]})
    with pytest.raises(NumericalError, match="physics.dt: .* is above the explicit limit .* the field reached") as err:
        run(c)
    assert int(str(err.value).split("at step ")[1].split()[0]) > 5, str(err.value)  # not at once: as it heated


@needs_mpi
@pytest.mark.mpi
def test_a_checkpoint_of_newton_on_three_ranks_continues_on_two_bitwise(tmp_path):
    """Two Newton iterations on 3 ranks (cart), continued from the checkpoint on 2 ranks (rows): the field of one
    uninterrupted numpy process, bit for bit (the forcing terms follow from the residual history the checkpoint
    keeps)."""
    import h5py

    sections = {k: v for k, v in die(tmp_path, "m", 33).model_dump(mode="json").items()
                if k in ("grid", "materials", "physics", "boundary", "initial")}
    ref = write_case(tmp_path / "ref.yaml", **sections, run={"steps": 12, "tolerance": 1e-12},
                     output={"dir": str(tmp_path / "ref"), "vtk": False})
    assert stencil(["run", str(ref), "-q"]).returncode == 0
    c = write_case(tmp_path / "c.yaml", **sections, run={"steps": 12, "tolerance": 1e-12},
                   backend={"name": "numba", "threads": 1}, parallel={"decomposition": "cart"},
                   output={"dir": str(tmp_path / "c"), "vtk": False, "checkpoint_every": 1})
    first = mpirun(3, ["run", str(c), "-q", "--steps", "2"], timeout=400)
    assert first.returncode == 0, first.stderr
    second = mpirun(2, ["run", "--restart", str(tmp_path / "c"), "-q", "--steps", "12", "--decomposition", "rows"],
                    timeout=400)
    assert second.returncode == 0, second.stderr
    with h5py.File(tmp_path / "c" / "fields.h5") as f, h5py.File(tmp_path / "ref" / "fields.h5") as g:
        assert np.array_equal(f["u"][-1], g["u"][-1])
    got = json.loads((tmp_path / "c" / "record.json").read_text())["solver"]["history"]
    want = json.loads((tmp_path / "ref" / "record.json").read_text())["solver"]["history"]
    assert [h["residual"] for h in got] == [h["residual"] for h in want]
