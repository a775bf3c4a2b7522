"""Named materials with heat capacity, face cooling, powers in watts and sides in W/(m^2 K) (issue 42), each against a
reference that does not use the solver's own assembly: a dense operator built here from the equations
C u_t = div(k grad u) - b (u - T_b) + q, with the faces' harmonic means, the ghost rules written out and the cells'
heat capacities from exact rectangle overlaps; closed forms where they exist (the thin fin's cosh profile); exact
totals of deposited power on random grids and shapes; bitwise equality across backends, time tiles and restarts."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
from conftest import stencil, write_case

from solver import api
from solver.core import medium as M
from solver.core.grid import positions, whole
from solver.core.physics import spacing, time_step

CU = {"k": 400.0, "C": 3.4e6}
FR4 = {"k": 0.8, "C": 2.0e6}
AL = {"k": 200.0, "C": 2.4e6}


def material_case(tmp_path, name="m", **physics_extra):
    """A 23 x 17 plate of 'fr' with a copper rectangle whose edges fall between grid points, an aluminium one
    beside it (their cut cells apart), a 1.5 W rectangle of power, a convective bottom side crossing all three."""
    data = {"name": name, "grid": {"nx": 23, "ny": 17, "lx": 0.046, "ly": 0.034},
            "materials": {"cu": CU, "fr": FR4, "al": AL},
            "physics": {"material": "fr", "thickness": 0.0016,
                        "regions": [{"kind": "rectangle", "lower": [0.0, 0.0], "upper": [0.0173, 0.0112], "material": "cu"},
                                    {"kind": "rectangle", "lower": [0.0251, 0.0], "upper": [0.0379, 0.0089],
                                     "material": "al"}],
                        "source": [{"kind": "rectangle", "lower": [0.0213, 0.0141], "upper": [0.0307, 0.0233],
                                    "power": 1.5}], **physics_extra},
            "initial": {"kind": "constant", "value": 20.0},
            "boundary": {"bottom": {"kind": "convective", "h": 400.0, "ambient": 20.0},
                         "top": {"kind": "dirichlet", "value": 35.0}, "left": {"kind": "neumann"},
                         "right": {"kind": "neumann", "flux": 300.0}},
            "run": {"steps": 60, "check_every": 10}, "backend": {"name": "numpy"},
            "output": {"dir": str(tmp_path / f"out_{name}"), "vtk": False}}
    return data


# the independent reference ------------------------------------------------------------------------------------
def overlap(lo, hi, a, b):
    return np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0.0, None)


def series_parallel(case, xa: float, xb: float, ylo: float, yhi: float) -> float:
    """A face's conductance from the rectangles painted in order: along the segment [xa, xb] the materials in series,
    across [ylo, yhi] in parallel; exact (the composition is constant between the rectangles' edges)."""
    table = case.material_table()
    rects = [(r.lower, r.upper, table[r.material][0]) for r in case.physics.regions]
    cuts = sorted({ylo, yhi, *(v for lo, hi, _ in rects for v in (lo[1], hi[1]) if ylo < v < yhi)})
    total = 0.0
    for a, b in zip(cuts, cuts[1:]):
        y = 0.5 * (a + b)
        xs = sorted({xa, xb, *(v for lo, hi, _ in rects for v in (lo[0], hi[0]) if xa < v < xb)})
        resistance = 0.0
        for p, q in zip(xs, xs[1:]):
            x, k = 0.5 * (p + q), table[case.physics.material][0]
            for lo, hi, kr in rects:
                if lo[0] <= x <= hi[0] and lo[1] <= y <= hi[1]:
                    k = kr
            resistance += (q - p) / k
        total += (b - a) * (xb - xa) / resistance
    return total / (yhi - ylo)


def reference_operator(case):
    """(C per point, L, b, ambient-weighted sink) of c u_t = -L u + b in SI: L the 5-point operator with the ghost
    rules substituted (Dirichlet: the value; Neumann: u0 + G h, G = flux / k; convective: (u0 (1 - H h/2) + H h T) /
    (1 + H h/2), H = h / k), each point's k its own material's for the walls, a face between two points the
    materials in series along it and in parallel across (series_parallel); C the cells' exact overlaps."""
    ny, nx = case.shape
    (dx, dy) = spacing(case)
    y, x = positions(case, *whole(case))
    table = case.material_table()
    k = np.full((ny, nx), table[case.physics.material][0])
    C = np.full((ny, nx), table[case.physics.material][1])
    xl, xh = np.maximum(x - dx / 2, 0), np.minimum(x + dx / 2, case.grid.lx)
    yl, yh = np.maximum(y - dy / 2, 0), np.minimum(y + dy / 2, case.grid.ly)
    for r in case.physics.regions:
        (x0, y0), (x1, y1) = r.lower, r.upper
        inside = ((x >= x0) & (x <= x1))[None, :] & ((y >= y0) & (y <= y1))[:, None]
        k[inside] = table[r.material][0]
        f = np.outer(overlap(yl, yh, y0, y1) / (yh - yl), overlap(xl, xh, x0, x1) / (xh - xl))
        C = C * (1 - f) + f * table[r.material][1]
    n = nx * ny
    L, b = np.zeros((n, n)), np.zeros(n)
    idx = lambda i, j: i * nx + j  # noqa: E731
    for i in range(ny):
        for j in range(nx):
            p = idx(i, j)
            for di, dj, h in ((0, -1, dx), (0, 1, dx), (-1, 0, dy), (1, 0, dy)):
                ii, jj = i + di, j + dj
                if 0 <= ii < ny and 0 <= jj < nx:
                    if di == 0:
                        kf = series_parallel(case, min(x[j], x[jj]), max(x[j], x[jj]), yl[i], yh[i])
                    else:
                        kf = series_parallel(_transposed(case), min(y[i], y[ii]), max(y[i], y[ii]), xl[j], xh[j])
                    L[p, p] += kf / h**2
                    L[p, idx(ii, jj)] -= kf / h**2
                    continue
                kf = k[i, j] / h**2  # the wall face takes the first point's k
                side = "left" if jj < 0 else "right" if jj >= nx else "bottom" if ii < 0 else "top"
                spec = getattr(case.boundary, side)
                # flux = kf (ghost - u0) = kf (a u0 + g) - kf u0
                if spec.kind == "dirichlet":
                    a, g = 0.0, spec.value
                elif spec.kind == "neumann":
                    a, g = 1.0, spec.flux / k[i, j] * h
                else:
                    hh = spec.h / k[i, j] * h
                    a, g = (1 - hh / 2) / (1 + hh / 2), hh * spec.ambient / (1 + hh / 2)
                L[p, p] += kf * (1 - a)
                b[p] += kf * g
    return C.reshape(-1), L, b


class _transposed:
    """The case's regions with x and y swapped (what series_parallel needs for the faces along y)."""

    def __init__(self, case):
        from types import SimpleNamespace as NS

        regions = [NS(lower=r.lower[::-1], upper=r.upper[::-1], material=r.material) for r in case.physics.regions]
        self.physics = NS(regions=regions, material=case.physics.material)
        self.material_table = case.material_table


def reference_run(case, steps, scheme="explicit"):
    C, L, b = reference_operator(case)
    q = np.zeros(len(C))
    ny, nx = case.shape
    for kk in range(len(case.physics.source)):
        q += M.deposit(case, kk, *whole(case), *reversed(positions(case, *whole(case)))).reshape(-1)
    med = M.medium(case)
    beta = med.beta * med.c0  # the faces' b in SI
    b = b + q + beta * med.ambient
    L = L + beta * np.eye(len(C))
    dt = time_step(case)
    u = np.full(len(C), case.initial.value)
    if scheme == "explicit":
        for _ in range(steps):
            u = u + dt / C * (b - L @ u)
    else:
        A = np.diag(C / dt) + L
        for _ in range(steps):
            u = np.linalg.solve(A, C / dt * u + b)
    return u.reshape(ny, nx)


def run_field(data):
    case = api.build_case(data)
    return case, api.run(case, progress=False, ceiling=False, overwrite=True)


def test_the_reference_sees_what_the_case_says(tmp_path):
    """The case is what it claims to be: the capacity varies (copper, FR4 and aluminium), the wall crosses three
    materials (h / k per point), the power is its stated watts on this grid."""
    case = api.build_case(material_case(tmp_path))
    med = M.medium(case)
    assert med.capacity_field and med.conductivity_field and med.c0 == FR4["C"]
    C, _, _ = reference_operator(case)
    assert len(set(np.round(C, 3))) > 5  # cut cells: mixtures, not just three values
    assert M.source_power(case, 0) == pytest.approx(1.5, rel=1e-14)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_a_transient_with_three_heat_capacities_equals_direct_time_stepping(tmp_path, backend):
    """Explicit steps of C u_t = div(k grad u) + q against the dense forward Euler of the same equations (every
    point's heat capacity, the walls' h / k and flux / k per point), and the heat content closing the balance to
    rounding: sum(C u) dx dy t changes by the sources' and sides' energy."""
    data = material_case(tmp_path)
    data["backend"] = {"name": backend, "threads": 1}
    case, res = run_field(data)
    want = reference_run(case, case.run.steps)
    assert np.max(np.abs(res.field - want)) <= 1e-11 * np.max(np.abs(want))
    assert res.field.max() > 21.0  # the source heated it
    e = res.record["energy"]
    assert e["closed"] and e["units"] == {"energy": "J", "power": "W"}
    assert e["sources"] == pytest.approx(1.5 * case.run.steps * time_step(case), rel=1e-12)


def test_backward_euler_with_heat_capacities_equals_a_direct_solve(tmp_path):
    data = material_case(tmp_path, scheme="backward-euler", dt=2.0)
    data["run"] = {"steps": 6, "tolerance": 1e-13}
    case, res = run_field(data)
    want = reference_run(case, 6, scheme="implicit")
    assert np.max(np.abs(res.field - want)) <= 1e-9 * np.max(np.abs(want))


def test_crank_nicolson_with_heat_capacities_and_face_cooling_closes_its_balance(tmp_path):
    data = material_case(tmp_path, scheme="crank-nicolson", dt=1.0, faces={"h": 12.0, "ambient": 15.0})
    data["run"] = {"steps": 5, "tolerance": 1e-12}
    case, res = run_field(data)
    e = res.record["energy"]
    assert e["faces"] < 0 and abs(e["imbalance"]) <= 1e-8 * (abs(e["sources"]) + abs(e["faces"]))


def test_explicit_face_cooling_equals_the_reference_and_its_balance_closes(tmp_path):
    data = material_case(tmp_path, faces={"h": 25.0, "ambient": 5.0})
    case, res = run_field(data)
    want = reference_run(case, case.run.steps)
    assert np.max(np.abs(res.field - want)) <= 1e-11 * np.max(np.abs(want))
    e = res.record["energy"]
    assert e["closed"] and e["faces"] < 0


def test_a_side_crossing_two_materials_takes_each_points_conductivity(tmp_path):
    """A steady state whose cooled bottom side crosses copper and FR4 with one h in W/(m^2 K): equal to the dense
    solve with h / k at each wall point (and far from the old per-case h / k of one material)."""
    data = material_case(tmp_path, equation="laplace", solver="multigrid")
    data["run"] = {"steps": 60, "tolerance": 1e-13}
    case, res = run_field(data)
    C, L, b = reference_operator(case)
    q = M.deposit(case, 0, *whole(case), *reversed(positions(case, *whole(case)))).reshape(-1)
    want = np.linalg.solve(L, b + q).reshape(case.shape)
    assert np.max(np.abs(res.field - want)) <= 1e-9 * np.max(np.abs(want))
    a = res.record["answers"]
    assert a["max"]["value"] == pytest.approx(want.max(), rel=1e-9) and a["total_power"] == pytest.approx(1.5)
    flows = a["heat_flows"]
    assert sum(flows.values()) == pytest.approx(-1.5, rel=1e-6)  # steady: what goes in comes out


@pytest.mark.parametrize("n", [24, 48, 96])
def test_face_cooling_matches_the_thin_fin_at_order_two(tmp_path, n):
    """A strip held at 100 at x = 0, insulated at its tip and edges, cooled over both faces: the fin's
    theta(x) = theta_0 cosh(m (L - x)) / cosh(m L), m^2 = 2 h / (k t). The error falls 4x per refinement."""
    errors = []
    for nx in (n, 2 * n):
        data = {"name": f"fin{nx}", "grid": {"nx": nx, "ny": 3, "lx": 0.1, "ly": 0.01},
                "physics": {"equation": "laplace", "solver": "multigrid", "material": "aluminium",
                            "thickness": "2 mm", "faces": {"h": "25 W/(m^2 K)", "ambient": "20 K"}},
                "boundary": {"left": 120.0, "right": {"kind": "neumann"}, "top": {"kind": "neumann"},
                             "bottom": {"kind": "neumann"}},
                "initial": {"kind": "constant", "value": 20.0}, "run": {"steps": 80, "tolerance": 1e-13},
                "backend": {"name": "numba", "threads": 1}, "output": {"dir": str(tmp_path / f"fin{nx}"), "vtk": False}}
        case, res = run_field(data)
        k = case.material_table()["aluminium"][0]
        m = math.sqrt(2 * 25.0 / (k * 0.002))
        x = res.x
        exact = 20.0 + 100.0 * np.cosh(m * (0.1 - x)) / np.cosh(m * 0.1)
        errors.append(np.max(np.abs(res.field - exact[None, :])))
    assert 3.6 < errors[0] / errors[1] < 4.4, errors


# powers in watts -------------------------------------------------------------------------------------------------
def test_stated_power_is_deposited_exactly_on_random_grids_and_shapes(tmp_path):
    """Rectangles, disks, bells and maps with a total power put in exactly that power on every grid (to rounding),
    their edges anywhere between grid points; the issue's 5 W on a 30 x 18 grid is 5 W."""
    rng = np.random.default_rng(42)
    for trial in range(12):
        nx, ny = rng.integers(9, 60, 2)
        lx, ly = rng.uniform(0.01, 0.2, 2)
        x0, y0 = rng.uniform(0.05, 0.45) * lx, rng.uniform(0.05, 0.45) * ly
        terms = [{"kind": "rectangle", "lower": [x0, y0], "upper": [x0 + rng.uniform(0.05, 0.5) * lx,
                                                                     y0 + rng.uniform(0.05, 0.5) * ly], "power": 5.0},
                 {"kind": "disk", "center": [lx / 2, ly / 2], "radius": rng.uniform(0.05, 0.3) * min(lx, ly),
                  "power": 2.5},
                 {"kind": "gaussian", "center": [lx / 3, ly / 2], "width": 0.1 * lx, "power": 0.7}]
        case = api.build_case({"grid": {"nx": int(nx), "ny": int(ny), "lx": float(lx), "ly": float(ly)},
                               "physics": {"material": "copper", "thickness": 0.001, "source": terms},
                               "boundary": {"left": {"kind": "neumann"}, "top": {"kind": "convective", "h": 10.0}},
                               "run": {"steps": 1}})
        for k, want in enumerate((5.0, 2.5, 0.7)):
            assert M.source_power(case, k) == pytest.approx(want, rel=1e-12), (trial, k)
    case = api.build_case({"grid": {"nx": 30, "ny": 18, "lx": 0.06, "ly": 0.036}, "run": {"steps": 1},
                           "physics": {"material": "fr4", "thickness": "1.6 mm", "source": [
                               {"kind": "rectangle", "lower": ["10 mm", "10 mm"], "upper": ["20 mm", "16 mm"],
                                "power": "5 W"}]}})
    assert M.source_power(case, 0) == pytest.approx(5.0, rel=1e-13)


def test_a_power_map_in_watts_per_tile_deposits_each_tile(tmp_path):
    """A 4 x 4 map of watts per tile over a die whose edges fall between grid points: the total is the map's sum,
    and a tile's power lands inside its tile (the grid points wholly inside a hot tile hold its density)."""
    tiles = np.arange(16, dtype=float).reshape(4, 4) / 10.0
    np.save(tmp_path / "map.npy", tiles)
    case = api.build_case({"units": {"length": "mm"}, "grid": {"nx": 45, "ny": 37, "lx": 40, "ly": 30}, "run": {"steps": 1},
                           "physics": {"material": "silicon", "thickness": 0.5, "source": [
                               {"kind": "file", "path": str(tmp_path / "map.npy"), "unit": "W",
                                "extent": [[11.3, 7.7], [29.1, 22.9]]}]}})
    assert M.source_power(case, 0) == pytest.approx(tiles.sum(), rel=1e-13)
    q = M.deposit(case, 0, *whole(case), *reversed(positions(case, *whole(case))))
    tile_area = (29.1 - 11.3) / 4 * (22.9 - 7.7) / 4
    assert q.max() == pytest.approx(1.5 / (tile_area * 0.5), rel=1e-12)  # the 1.5 W tile, mm units: W/mm^3


@pytest.mark.parametrize("kind", ["disk", "rectangle"])
def test_a_heater_whose_edges_fall_between_points_converges(tmp_path, kind):
    """The steady temperature under a heater deposited by area converges at second order as the grid is refined
    (the point-sampled heater's power jumps with the grid and its error does not fall steadily)."""
    shape = ({"kind": "disk", "center": [0.0213, 0.0187], "radius": 0.0071} if kind == "disk" else
             {"kind": "rectangle", "lower": [0.0141, 0.0133], "upper": [0.0283, 0.0239]})
    centre = []
    for n in (31, 63, 127):
        data = {"name": f"h{n}", "grid": {"nx": n, "ny": n, "lx": 0.04, "ly": 0.04},
                "physics": {"equation": "laplace", "solver": "multigrid", "material": "steel", "thickness": 0.002,
                            "source": [{**shape, "power": 3.0}]},
                "boundary": {"left": 20.0, "right": 20.0, "top": 20.0, "bottom": 20.0},
                "run": {"steps": 60, "tolerance": 1e-12}, "backend": {"name": "numba", "threads": 1},
                "output": {"dir": str(tmp_path / f"h{n}"), "vtk": False}}
        _, res = run_field(data)
        j = (n - 1) // 2  # x = y = 0.02 is a grid point of every grid here
        assert res.x[j] == pytest.approx(0.02) and res.y[j] == pytest.approx(0.02)
        centre.append(res.field[j, j])
    d1, d2 = abs(centre[1] - centre[0]), abs(centre[2] - centre[1])
    assert d1 / d2 > 3.0, centre  # at least second order


# units -----------------------------------------------------------------------------------------------------------
def test_the_same_case_in_mm_and_in_m_gives_the_same_field(tmp_path):
    mm = material_case(tmp_path, name="mm")
    mm["units"] = {"length": "mm"}
    mm["grid"].update(lx=46.0, ly=34.0)
    p = mm["physics"]
    p["thickness"] = "1.6 mm"
    p["regions"] = [{**r, "lower": [v * 1000 for v in r["lower"]], "upper": [v * 1000 for v in r["upper"]]}
                    for r in p["regions"]]
    p["source"] = [{**t, "lower": [v * 1000 for v in t["lower"]], "upper": [v * 1000 for v in t["upper"]]}
                   for t in p["source"]]
    mm["materials"] = {name: {"k": f"{v['k']} W/(m K)", "C": f"{v['C']} J/(m^3 K)"} for name, v in
                       (("cu", CU), ("fr", FR4), ("al", AL))}
    mm["boundary"]["bottom"]["h"] = "400 W/(m^2 K)"
    mm["boundary"]["right"]["flux"] = "300 W/m^2"
    _, a = run_field(material_case(tmp_path, name="m"))
    _, b = run_field(mm)
    assert np.max(np.abs(a.field - b.field)) <= 1e-11 * np.max(np.abs(a.field))
    assert a.record["energy"]["sources"] == pytest.approx(b.record["energy"]["sources"], rel=1e-12)


def test_degc_and_kelvin_cases_differ_by_exactly_the_offset(tmp_path):
    c = material_case(tmp_path, name="c")
    c["units"] = {"temperature": "degC"}
    k = material_case(tmp_path, name="k")
    k["initial"]["value"] = "20 degC"
    k["boundary"]["bottom"]["ambient"] = "20 degC"
    k["boundary"]["top"] = {"kind": "dirichlet", "value": "308.15 K"}
    _, a = run_field(c)
    _, b = run_field(k)
    assert np.max(np.abs((b.field - 273.15) - a.field)) <= 1e-11 * 300
    assert a.record["answers"]["temperature_unit"] == "degC" and b.record["answers"]["temperature_unit"] == "K"


def test_plain_numbers_and_si_strings_give_the_same_bits(tmp_path):
    """A diffusivity-form case written with SI strings is the case written with plain numbers, bit for bit."""
    plain = {"name": "p", "grid": {"nx": 19, "ny": 15, "lx": 0.5, "ly": 0.4},
             "physics": {"alpha": 1e-4, "dt": 1.5, "source": [{"kind": "gaussian", "center": [0.2, 0.2],
                                                               "width": 0.05, "amplitude": 0.1}]},
             "boundary": {"left": {"kind": "convective", "h": 3.0, "ambient": 1.0}},
             "run": {"steps": 30}, "backend": {"name": "numpy"}, "output": {"dir": str(tmp_path / "p"), "vtk": False}}
    units = {**plain, "name": "s", "output": {"dir": str(tmp_path / "s"), "vtk": False}}
    units["grid"] = {"nx": 19, "ny": 15, "lx": "50 cm", "ly": "400 mm"}
    units["physics"] = {"alpha": "1 cm^2/s", "dt": "1.5 s", "source": [{"kind": "gaussian", "center": ["20 cm", "0.2 m"],
                                                                       "width": "5 cm", "amplitude": "0.1 K/s"}]}
    units["boundary"] = {"left": {"kind": "convective", "h": "3 1/m", "ambient": "1 K"}}
    _, a = run_field(plain)
    _, b = run_field(units)
    assert np.array_equal(a.field, b.field)


@pytest.mark.parametrize("field,value,words", [
    ("grid.lx", "40 W", ["grid.lx", "a length"]),
    ("grid.lx", "4 furlongz", ["grid.lx", "unknown unit"]),
    ("boundary.top.h", "25 W/(m^2 K)", ["boundary.top.h", "needs the material form"]),
    ("physics.dt", "3 m", ["physics.dt", "a time"]),
    ("units.temperature", "degF", ["units.temperature", "K or degC"]),
    ("units.length", "kg", ["units.length", "not a length unit"]),
    ("initial.value", "5 W", ["initial.value", "a temperature"]),
])
def test_wrong_dimensions_and_units_are_one_line_errors(tmp_path, case_file, field, value, words):
    path = case_file("bad", boundary={"top": {"kind": "convective", "h": 1.0}}, initial={"kind": "constant"})
    res = stencil(["run", str(path), "--set", f"{field}={value}", "-o", str(tmp_path / "out")])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert all(w in res.stderr for w in words), res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("change,words", [
    ({"physics": {"material": "coper"}}, ["physics.material", "did you mean 'copper'"]),
    ({"physics": {"material": "copper", "source": [{"kind": "constant", "power": 5.0}]}},
     ["physics.source.0.power", "thickness"]),
    ({"physics": {"alpha": 2.0, "source": [{"kind": "constant", "power": 5.0}]}},
     ["physics.source.0.power", "material form"]),
    ({"physics": {"material": "copper", "thickness": 0.001, "source": [
        {"kind": "rectangle", "lower": [0, 0], "upper": [0.1, 0.1], "value": 1.0, "power": 5.0}]}},
     ["power", "given twice"]),
    ({"materials": {"x": {"k": 0.0, "C": 1e6}}, "physics": {"material": "x"}}, ["materials.x.k", "> 0"]),
    ({"materials": {"x": {"k": 1.0, "rho": 1000.0}}, "physics": {"material": "x"}}, ["c_p", "heat capacity"]),
    ({"materials": {"x": {"k": 1.0, "rho": 1.0, "c_p": 1.0, "C": 1.0}}, "physics": {"material": "x"}}, ["C", "once"]),
    ({"physics": {"material": "copper", "thickness": -1.0}}, ["physics.thickness", "> 0"]),
    ({"physics": {"material": "copper", "faces": {"h": 10.0, "ambient": 20.0}}}, ["physics.faces", "thickness"]),
    ({"physics": {"material": "copper", "alpha": 3.0}}, ["physics.alpha", "given twice"]),
    ({"physics": {"material": "copper", "thickness": 0.001, "faces": {"h": -1.0, "ambient": 20.0}}},
     ["physics.faces.h", ">= 0"]),
    ({"physics": {"material": "copper", "regions": [{"kind": "disk", "center": [5, 5], "radius": 0.1,
                                                      "material": "fr4"}]}}, ["physics.regions.0", "covers no part"]),
    ({"physics": {"material": "copper", "thickness": 0.001, "source": [
        {"kind": "rectangle", "lower": [3, 3], "upper": [4, 4], "power": 1.0}]}}, ["physics.source.0", "outside"]),
])
def test_bad_materials_and_powers_are_one_line_errors(tmp_path, case_file, change, words):
    path = case_file("bad", **change)
    res = stencil(["validate", str(path)])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert all(w in res.stderr for w in words), res.stderr


# bitwise ---------------------------------------------------------------------------------------------------------
def test_numba_time_tiles_with_heat_capacities_equal_numpy_bitwise(tmp_path):
    """The fused time tiles (numba, k = 4) read the capacity's fields at every level: the bits of numpy's steps."""
    data = material_case(tmp_path, name="np")
    data["boundary"] = {"bottom": 20.0, "top": 35.0, "left": 25.0, "right": 20.0}  # constant ghosts: tiles
    data["physics"]["faces"] = {"h": 20.0, "ambient": 10.0}
    _, a = run_field(data)
    tiled = {**data, "name": "tiles", "backend": {"name": "numba", "threads": 2, "time_tile": 4},
             "output": {"dir": str(tmp_path / "tiles"), "vtk": False}}
    _, b = run_field(tiled)
    assert b.record["resources"]["time_tile"] == 4
    assert np.array_equal(a.field, b.field)


def test_a_material_run_continues_from_its_checkpoint_bitwise(tmp_path):
    data = material_case(tmp_path, name="whole", faces={"h": 15.0, "ambient": 25.0})
    data["backend"] = {"name": "numba", "threads": 1}
    _, whole_run = run_field(data)
    part = {**data, "name": "part", "output": {"dir": str(tmp_path / "part"), "vtk": False, "checkpoint_every": 30}}
    path = write_case(tmp_path / "part.yaml", **{k: v for k, v in part.items() if k != "name"})
    assert stencil(["run", str(path), "-q", "--steps", "30"]).returncode == 0
    assert stencil(["run", str(path), "-q", "--restart", str(tmp_path / "part")]).returncode == 0
    with h5py.File(tmp_path / "part" / "fields.h5") as f:
        assert np.array_equal(f["u"][-1], whole_run.field) and int(f["step"][-1]) == 60


def test_a_material_run_reruns_from_its_case_yaml_and_reports_in_its_units(tmp_path):
    """output/NAME/case.yaml (the case as it ran) runs again as it is, and `stencil report` draws the material map
    in W/(m K) and the field in the case's temperature unit (the dump leaves out the diffusivity form's alpha)."""
    data = material_case(tmp_path, name="first")
    data["units"] = {"temperature": "degC"}
    data["output"]["vtk"] = False
    path = write_case(tmp_path / "first.yaml", **{k: v for k, v in data.items() if k != "name"})
    assert stencil(["run", str(path), "-q"]).returncode == 0
    out = tmp_path / "out_first"
    again = stencil(["run", str(out / "case.yaml"), "-q", "-o", str(tmp_path / "again")])
    assert again.returncode == 0, again.stderr
    with h5py.File(out / "fields.h5") as a, h5py.File(tmp_path / "again" / "fields.h5") as b:
        assert np.array_equal(a["u"][-1], b["u"][-1])
    rep = stencil(["report", str(out)])
    assert rep.returncode == 0, rep.stderr
    assert (out / "maps.png").stat().st_size > 10_000


def test_a_plain_conductivity_in_a_mm_case_is_noted_before_the_run(tmp_path):
    """401 as a plain number in a case in mm is 401 W/(mm K): valid, but no solid conducts so; validate says so."""
    path = write_case(tmp_path / "mm.yaml", units={"length": "mm"}, grid={"nx": 15, "ny": 11, "lx": 30, "ly": 20},
                      materials={"cu": {"k": 401.0, "C": "3.4e6 J/(m^3 K)"}}, physics={"material": "cu"})
    res = stencil(["validate", str(path)])
    assert res.returncode == 0 and "note: material cu: k = 4.01e+05 W/(m K) is outside" in res.stdout.replace("\n", " ")
    quiet = write_case(tmp_path / "ok.yaml", units={"length": "mm"}, grid={"nx": 15, "ny": 11, "lx": 30, "ly": 20},
                       physics={"material": "copper"})
    assert "note: material" not in stencil(["validate", str(quiet)]).stdout


def test_each_materials_answers_cover_the_points_whose_centre_it_paints_last(tmp_path):
    """The record's per-material mean, max and count (solver/results/answers.py) against the points' owners found
    here: each region paints the points whose centres it covers, a later region over an earlier one, and the plate's
    material keeps the rest; a second copper region after the aluminium one repaints part of it."""
    from solver.core.medium import covers_points
    from solver.results.answers import partial

    data = material_case(tmp_path, "answers")
    data["physics"]["regions"].append({"kind": "rectangle", "lower": [0.03, 0.0], "upper": [0.046, 0.005],
                                       "material": "cu"})
    case = api.build_case(data)
    y, x = positions(case, *(np.arange(n) for n in case.shape))
    owner = np.full(case.shape, "fr", dtype=object)
    for r in case.physics.regions:
        owner[covers_points(r, x, y)] = r.material
    u = np.random.default_rng(5).uniform(0.0, 100.0, case.shape)
    from solver.core.decomp import decompose

    groups = partial(case, decompose(case.shape, (1, 1), 0), u)["groups"]
    assert set(groups) == {"material fr", "material cu", "material al"}
    for name in ("fr", "cu", "al"):
        v = u[owner == name]
        g = groups[f"material {name}"]
        assert (g["count"], g["max"], g["min"]) == (v.size, v.max(), v.min()) and g["sum"] == pytest.approx(v.sum())
