"""Material interfaces at their true place (issue 43's verification): interfaces that fall between grid points against
closed forms, the point-sampled diffusivity form (`physics.alpha` with regions: each point takes the material at its
centre, as every case did before issue 43) run beside them on the same grids; the stated power of shaped sources on
every grid of a family; a fixed side's face where an interface meets it and a source over a hole (two defects
these tests found, fixed); and, as a strict xfail until it is built, a held object's table in time. Solutions are the discrete ones of the real solver (multigrid + CG, the numba backend).

Measured with these tests' cases on grids 15 .. 255 (tools/shapes_bench.py prints the same for the circles; the
figures are in docs/shapes.md): interfaces along grid lines converge at order 1.92-1.98 in max (the point-sampled
form: 3.6, -2.6, 1.1, 1.3, errors 70x larger at 255); a curved interface (a disk of another material) at order
about 1 (0.5-1.3 a halving, monotone: a 5-point stencil cannot carry the conductance across an oblique interface,
which is a tensor), the point-sampled form also about 1 but not monotone."""

from __future__ import annotations


import json

import numpy as np
import pytest
from conftest import stencil, write_case

from solver import api

LAYERS, KS = [0.0, 0.3137, 0.6712, 1.0], [1.0, 20.0, 2.0]  # interfaces at x = 0.3137 and 0.6712: between points
GRIDS = (15, 31, 63, 127)  # h = 1/16 .. 1/128 with Dirichlet sides (points at (j + 1) h)


def order(errors) -> float:
    """The least-squares slope of log(error) against log(spacing) over grids that halve the spacing."""
    return -np.polyfit(np.arange(len(errors)), np.log2(errors), 1)[0]


def steady(tmp_path, name, n, physics, boundary, materials=None):
    data = {"name": name, "grid": {"nx": n, "ny": n, "lx": 1.0, "ly": 1.0},
            "physics": {"equation": "laplace", "solver": "multigrid", **physics}, "boundary": boundary,
            "run": {"steps": 200, "tolerance": 1e-12}, "backend": {"name": "numba", "threads": 1},
            "output": {"dir": str(tmp_path / name), "vtk": False, "fields": False}}
    if materials:
        data["materials"] = materials
    return api.run(api.build_case(data), progress=False, ceiling=False, overwrite=True)


def along(n, f):
    """A Dirichlet side whose value at each of its n points is f(s) (s the coordinate along it)."""
    s = (np.arange(n) + 1.0) / (n + 1)
    return {"kind": "dirichlet", "value": {"along": [[float(t), float(f(t))] for t in s]}}


def both_forms(tmp_path, name, n, shapes, boundary):
    """(material form, point-sampled diffusivity form) results of the same plate: `shapes` are (shape, k) over a
    plate of k = 1 (materials of one heat capacity: the steady states are div(k grad u) = 0 in both)."""
    mats = {"base": {"k": 1.0, "C": 1e6}} | {f"m{i}": {"k": k, "C": 1e6} for i, (_, k) in enumerate(shapes)}
    material = {"material": "base", "regions": [{**s, "material": f"m{i}"} for i, (s, _) in enumerate(shapes)]}
    sampled = {"alpha": {"background": 1.0, "regions": [{**s, "value": k} for s, k in shapes]}}
    return (steady(tmp_path, f"{name}m{n}", n, material, boundary, mats),
            steady(tmp_path, f"{name}a{n}", n, sampled, boundary))


def layered_profile(x: np.ndarray) -> np.ndarray:
    """X(x) of u = X(x) Y(y) with Y'' = -pi^2 Y: k X'' = k pi^2 X in each layer, X(0) = 1, X'(0) = 0, X and k X'
    continuous at the interfaces (cosh and sinh pieces)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    a, b = 1.0, 0.0  # X = a cosh(pi (x - x0)) + b sinh(pi (x - x0)) in the layer from x0
    for m, (x0, x1, k) in enumerate(zip(LAYERS, LAYERS[1:], KS)):
        sel = (x >= x0) & ((x < x1) if m < len(KS) - 1 else (x <= x1))
        out[sel] = a * np.cosh(np.pi * (x[sel] - x0)) + b * np.sinh(np.pi * (x[sel] - x0))
        t = x1 - x0
        value = a * np.cosh(np.pi * t) + b * np.sinh(np.pi * t)
        slope = np.pi * (a * np.sinh(np.pi * t) + b * np.cosh(np.pi * t))
        if m + 1 < len(KS):
            a, b = value, k * slope / (KS[m + 1] * np.pi)
    return out


def layer_shapes():
    return [({"kind": "rectangle", "lower": [LAYERS[m], -1.0], "upper": [LAYERS[m + 1] + (m == 2), 2.0]}, KS[m])
            for m in (1, 2)]


def layered_errors(tmp_path, name, wave, walls):
    """Max errors (material form, sampled form) over GRIDS of u = X(x) wave(pi y), the left and right sides held at the
    exact values, the bottom and top sides `walls`."""
    X0, X1 = layered_profile(np.array([0.0, 1.0]))
    out = []
    for n in GRIDS:
        sides = {"left": along(n, lambda y: X0 * wave(np.pi * y)), "right": along(n, lambda y: X1 * wave(np.pi * y)),
                 **walls}
        pair = both_forms(tmp_path, name, n, layer_shapes(), sides)
        out.append([np.max(np.abs(r.field - layered_profile(r.x)[None, :] * wave(np.pi * r.y)[:, None])) for r in pair])
    return np.array(out).T


def test_layers_whose_interfaces_fall_between_points_converge_at_order_two_in_two_dimensions(tmp_path):
    """Three layers (k 1, 20, 2) with interfaces between grid points under a field that varies along them, u = X(x)
    cos(pi y) (insulated bottom and top): each x face takes the layers along it in series, each y face they cross
    their parallel share, so the max error falls at order 2 (1.92-1.98 measured). The point-sampled form moves each
    interface to a face half way between points: its error jumps with where the interfaces fall (0.88, 0.075, 0.45,
    0.20 on these grids), and it is larger than the material form's on every grid (40x at 127^2)."""
    insulated = {"kind": "neumann"}
    material, sampled = layered_errors(tmp_path, "cos", np.cos, {"bottom": insulated, "top": insulated})
    assert np.all(np.diff(material) < 0) and order(material) > 1.85, material
    assert np.all(material < sampled), (material, sampled)


def test_layers_meeting_a_held_side_converge_at_order_two(tmp_path):
    """The same layers under u = X(x) sin(pi y), the bottom and top sides held at 0: the interfaces meet the held
    sides. Measured: max errors 0.26, 0.088, 0.060, 0.030 on 15 .. 127 and 0.014 on 255 (order 1), on the row next to a
    held side in the column an interface crosses; the middle row converges at order 2.2-2.7."""
    material, _ = layered_errors(tmp_path, "sin", np.sin, {"bottom": 0.0, "top": 0.0})
    assert order(material) > 1.8, material


def inclusion_exact(X, Y, k_in, k_out=1.0, radius=0.3, centre=(0.5, 0.5)):
    """A disk of conductivity k_in in a plate of k_out under a uniform field of unit gradient along x (the composite
    cylinder): inside 2 k_out / (k_in + k_out) x', outside x' (1 + a^2 (k_out - k_in) / ((k_out + k_in) r^2))."""
    dx, dy = X - centre[0], Y - centre[1]
    r2 = np.maximum(dx * dx + dy * dy, 1e-300)
    beta = radius ** 2 * (k_out - k_in) / (k_out + k_in)
    return np.where(r2 <= radius ** 2, 2.0 * k_out / (k_in + k_out) * dx, dx * (1.0 + beta / r2))


@pytest.mark.parametrize("k_in", [10.0, 0.1])
def test_a_disk_of_another_material_in_a_uniform_field_converges_monotonically(tmp_path, k_in):
    """A curved interface between grid points: the composite cylinder's closed form, the sides held at it. The
    material form's errors fall on every refinement at order about 1 (measured 0.9-1.0 in max, 1.0-1.1 in L2 over 15
    .. 127; the conductance across an oblique interface is a tensor, which a 5-point stencil's face conductances cannot
    hold: first order is what this discretisation reaches there). The point-sampled form's max error is not monotone
    for k_in = 0.1 (8.9e-3 at 31^2, 1.2e-2 at 63^2)."""
    exact = lambda x, y: inclusion_exact(np.asarray(x), np.asarray(y), k_in)  # noqa: E731
    errors, l2 = [], []
    for n in GRIDS:
        sides = {"bottom": along(n, lambda s: exact(s, 0.0)), "top": along(n, lambda s: exact(s, 1.0)),
                 "left": along(n, lambda s: exact(0.0, s)), "right": along(n, lambda s: exact(1.0, s))}
        mats = {"base": {"k": 1.0, "C": 1e6}, "inside": {"k": k_in, "C": 1e6}}
        res = steady(tmp_path, f"disk{n}", n, {"material": "base", "regions": [
            {"kind": "disk", "center": [0.5, 0.5], "radius": 0.3, "material": "inside"}]}, sides, mats)
        X, Y = np.meshgrid(res.x, res.y)
        err = np.abs(res.field - exact(X, Y))
        errors.append(err.max())
        l2.append(np.sqrt(np.mean(err ** 2)))
    assert np.all(np.diff(errors) < 0) and np.all(np.diff(l2) < 0), (errors, l2)
    assert order(errors) > 0.8 and order(l2) > 0.85, (errors, l2)


# stated power ----------------------------------------------------------------------------------------------------
SOURCES = [{"kind": "disk", "center": [21.3, 18.7], "radius": 7.1, "power": "3 W", "name": "disk"},
           {"kind": "rectangle", "lower": [33.3, 9.1], "upper": [47.9, 21.7], "power": "4.5 W", "name": "block"}]


def powered(tmp_path, name, n, regions=()):
    """A 60 x 40 mm aluminium plate cooled on both faces, insulated sides, a disk of 3 W and a rectangle of 4.5 W whose
    edges fall between the points of every grid: the steady state's record."""
    data = {"name": name, "units": {"length": "mm", "temperature": "degC"},
            "grid": {"nx": n, "ny": (2 * n) // 3, "lx": 60.0, "ly": 40.0},
            "physics": {"equation": "laplace", "solver": "multigrid", "material": "aluminium", "thickness": "2 mm",
                        "faces": {"h": "20 W/(m^2 K)", "ambient": 20.0}, "regions": list(regions),
                        "source": SOURCES},
            "boundary": {s: {"kind": "neumann"} for s in ("left", "right", "bottom", "top")},
            "run": {"steps": 100, "tolerance": 1e-11}, "backend": {"name": "numba", "threads": 1},
            "output": {"dir": str(tmp_path / name), "vtk": False, "fields": False}}
    return api.run(api.build_case(data), progress=False, ceiling=False, overwrite=True).record


@pytest.mark.parametrize("regions", [(), ({"kind": "disk", "center": [10.0, 31.0], "radius": 4.2, "hole": "insulated"},
                                           {"kind": "disk", "center": [50.0, 32.0], "radius": 3.3, "held": 20.0})],
                         ids=["plain", "with-shapes"])
def test_stated_power_is_the_power_on_every_grid_of_a_family(tmp_path, regions):
    """On every grid (nx 21, 43, 87, 175: the sources' edges fall anywhere between points) each source's power as the
    record reports it is its stated power, and so is what the plate receives (the energy balance's sources: the sum of
    the operator's source over the plate's points), to rounding; the faces take it all out at the steady state."""
    for n in (21, 43, 87, 175):
        rec = powered(tmp_path, f"p{n}", n, regions)
        got = {s["name"]: s["power"] for s in rec["answers"]["sources"]}
        assert got == pytest.approx({"disk": 3.0, "block": 4.5}, rel=1e-12), (n, got)
        assert rec["answers"]["total_power"] == pytest.approx(7.5, rel=1e-12)
        e = rec["energy"]
        assert e["sources"] == pytest.approx(7.5, rel=1e-12), (n, e)
        out = -e["faces"] - sum(e.get("rims", {}).values())
        assert out == pytest.approx(7.5, rel=1e-8), (n, e)


def test_validate_prints_the_stated_power(tmp_path):
    path = write_case(tmp_path / "p.yaml", units={"length": "mm"}, grid={"nx": 43, "ny": 29, "lx": 60.0, "ly": 40.0},
                      physics={"material": "aluminium", "thickness": "2 mm", "source": SOURCES})
    res = stencil(["validate", str(path)])
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.replace("│", " ").split())
    assert "power 7.5 W in all: disk 3 (stated 3); block 4.5 (stated 4.5)" in text, text


def test_a_source_over_a_hole_puts_its_reported_power_into_the_plate(tmp_path):
    """The 4.5 W rectangle with an insulated hole in its middle: what the record reports as the source's power
    is what enters the plate (the energy balance's sources)."""
    rec = powered(tmp_path, "over", 61, [{"kind": "disk", "center": [40.6, 15.4], "radius": 4.3, "hole": "insulated"}])
    assert rec["answers"]["total_power"] == pytest.approx(rec["energy"]["sources"], rel=1e-9), (
        rec["answers"]["total_power"], rec["energy"]["sources"])


@pytest.mark.xfail(strict=True, reason="a held object's table in time is refused (one line, exit 2) until the shape "
                   "terms follow the time: not built yet (docs/limitations.md)")
def test_an_object_held_by_a_table_in_time_follows_it(tmp_path):
    """A disk held at {time: [[0, 20], [100, 120]]} in a plate at 20: past t = 100 it holds 120, so the plate warms
    (measured: the plate stays at 20.000 after 400 steps, t = 2714 s, as if held at 20; held at 120 it reaches 119.7)."""
    path = write_case(tmp_path / "held.yaml", grid={"nx": 41, "ny": 41},
                      physics={"equation": "heat", "material": "steel", "regions": [
                          {"kind": "disk", "center": [0.5, 0.5], "radius": 0.15, "held": {"time": [[0, 20], [100, 120]]}}]},
                      initial={"kind": "constant", "value": 20.0},
                      boundary={"left": 20.0, "right": 20.0, "top": 20.0, "bottom": 20.0}, run={"steps": 400})
    res = stencil(["run", str(path), "-q"])
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "out_held" / "record.json").read_text())
    assert rec["answers"]["max"]["value"] > 25.0, rec["answers"]["max"]
