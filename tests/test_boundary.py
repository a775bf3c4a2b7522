"""Boundary kinds per side (issue 16): the case model, the discretisation against an independent pure-Python
loop, exact eigenmodes, conservation, corners and deep layers, the process-grid wrap, geometry of output,
restarts and the shipped cases. MPI runs at 1-4 ranks: tests/mpi/check_boundary.py (test_mpi.py)."""

import itertools
import json
import math
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from conftest import ROOT, stencil, write_case

from solver.backends.numba_backend import NumbaBackend
from solver.backends.numpy_backend import NumpyBackend
from solver.case import BackendSettings, load_case, validate_case
from solver.core import boundary
from solver.core.decomp import all_blocks, decompose
from solver.core.errors import InputError
from solver.core.field import padded_field
from solver.core.initial import initial_block
from solver.core.physics import eigenmode, mode_factor, spacing, weights
from solver.run import Options, run_case

N, P = {"kind": "neumann"}, {"kind": "periodic"}


def plain(x):
    """A copy without shared sub-dicts (YAML would write anchors, which case files refuse)."""
    return json.loads(json.dumps(x))


def case(bnd, nx=7, ny=5, initial=None, equation="heat", dtype="float64", **kw):
    return validate_case({"name": "b", "grid": {"nx": nx, "ny": ny, "lx": 1.3, "ly": 0.7},
                          "physics": {"equation": equation}, "initial": initial or {"kind": "random", "seed": 1},
                          "boundary": bnd, "numerics": {"dtype": dtype}, "run": {"steps": 1000}, **kw})


def run_backend(c, be, steps):
    block = decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c))
    be.boundary = boundary.make_fill(c, block)
    u = padded_field(c, block, initial_block(c, block))
    u, _ = be.advance(u, u.copy(), weights(c).cast(c.numerics.dtype), steps, block.everything())
    return u[1:-1, 1:-1]


# the case file ---------------------------------------------------------------------------------------
def test_numbers_stay_dirichlet_and_mappings_choose_a_kind():
    c = case({"top": 2, "bottom": {"kind": "dirichlet", "value": -1.5}, "left": {"kind": "neumann", "flux": 3},
              "right": N})
    b = c.boundary
    assert (b.top.kind, b.top.value, b.bottom.value) == ("dirichlet", 2.0, -1.5)
    assert (b.left.kind, b.left.flux, b.right.flux) == ("neumann", 3.0, 0.0)  # flux 0 = insulated, the default
    assert case({}).boundary.left.value == 0.0


@pytest.mark.parametrize("bnd,words", [
    ({"left": P}, ["boundary.right", "periodic", "both"]),
    ({"top": P, "bottom": 1.0}, ["boundary.bottom", "periodic"]),
    ({"left": {"kind": "neuman"}}, ["boundary.left", "unknown kind 'neuman'", "dirichlet, neumann, periodic"]),
    ({"left": {"kind": "neumann", "value": 1}}, ["boundary.left.value", "fields of neumann: kind, flux"]),
    ({"left": {"kind": "neumann", "flx": 1}}, ["did you mean 'flux'"]),
    ({"left": {"flux": 1}}, ["boundary.left", "needs a 'kind'"]),
    ({"left": "hot"}, ["boundary.left", "a number (Dirichlet value), or {kind: dirichlet"]),
])
def test_bad_boundaries_are_one_line_errors_naming_the_field(bnd, words):
    with pytest.raises(InputError) as e:
        case(bnd)
    assert len(str(e.value).splitlines()) == 1, str(e.value)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_laplace_without_a_dirichlet_side_is_refused_as_singular():
    with pytest.raises(InputError, match="boundary: laplace with no Dirichlet side and no convective side with h > 0 is singular"):
        case({"top": N, "bottom": N, "left": P, "right": P}, equation="laplace")
    case({"top": N, "bottom": N, "left": P, "right": P})  # heat is fine
    case({"top": 1.0, "bottom": N, "left": P, "right": P}, equation="laplace")


def test_wave_numbers_start_at_one_on_axes_with_a_dirichlet_side():
    with pytest.raises(InputError, match="initial.k: kx = 0"):
        case({"left": 0.0, "right": N}, initial={"kind": "sine", "k": [0, 1]})
    case({"left": N, "right": N}, initial={"kind": "sine", "k": [0, 1]})


def test_cli_exit_2_for_unpaired_periodic_and_the_schema_describes_the_kinds(tmp_path):
    path = write_case(tmp_path / "c.yaml", boundary={"left": P})
    res = stencil(["run", str(path)])
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "boundary.right" in res.stderr and "periodic" in res.stderr
    assert not (tmp_path / "out_c").exists()  # nothing written
    schema = json.loads(stencil(["schema"]).stdout)
    defs = schema["$defs"]
    assert {"Dirichlet", "Neumann", "Periodic"} <= set(defs)
    assert "outward normal derivative" in defs["Neumann"]["properties"]["flux"]["description"]
    top = defs["Boundary"]["properties"]["top"]
    assert {"type": "number"} in top["anyOf"] and "periodic" in top["description"]


# the discretisation against an independent loop ----------------------------------------------------------
def python_steps(c, steps):
    """The update with ghost values from the rules written out point by point (README's discretisation)."""
    (dx, dy), w = spacing(c), weights(c)
    ny, nx = c.shape
    u = initial_block(c, decompose(c.shape, (1, 1), 0)).tolist()
    b = c.boundary

    def ghost(side, inside, across, h):
        s = getattr(b, side)
        return s.value if s.kind == "dirichlet" else across if s.kind == "periodic" else inside + s.flux * h

    for _ in range(steps):
        def at(i, j):
            if j < 0:
                return ghost("left", u[i][0], u[i][nx - 1], dx)
            if j >= nx:
                return ghost("right", u[i][nx - 1], u[i][0], dx)
            if i < 0:
                return ghost("bottom", u[0][j], u[ny - 1][j], dy)
            if i >= ny:
                return ghost("top", u[ny - 1][j], u[0][j], dy)
            return u[i][j]

        u = [[w.wc * u[i][j] + w.wx * (at(i, j - 1) + at(i, j + 1)) + w.wy * (at(i - 1, j) + at(i + 1, j))
              for j in range(nx)] for i in range(ny)]
    return np.array(u)


SIDE_KINDS = [  # (x sides, y sides): every pair of kinds, with values and fluxes that are not zero
    ((0.5, -2.0), (1.0, 0.25)),
    (({"kind": "neumann", "flux": 1.5}, {"kind": "neumann", "flux": -0.5}), (N, {"kind": "neumann", "flux": 2.0})),
    ((P, P), (P, P)),
    ((P, P), ({"kind": "neumann", "flux": -1.0}, 3.0)),
    ((2.0, {"kind": "neumann", "flux": 0.75}), (P, P)),
    ((N, -1.0), (N, N)),
]


@pytest.mark.parametrize("xs,ys", SIDE_KINDS)
def test_numpy_and_numba_equal_a_pure_python_loop_bitwise(xs, ys):
    c = case({"left": xs[0], "right": xs[1], "bottom": ys[0], "top": ys[1]})
    want = python_steps(c, 9)
    np.testing.assert_array_equal(run_backend(c, NumpyBackend(c.backend, "float64"), 9), want)
    for threads, tile in ((1, 1), (2, 4), (1, 3)):
        be = NumbaBackend(BackendSettings(name="numba", time_tile=tile), "float64", threads)
        np.testing.assert_array_equal(run_backend(c, be, 9), want)


def test_numba_time_tiles_only_constant_ghosts():
    """The fused kernel keeps ghosts constant: it runs for Dirichlet sides and falls back to steps otherwise."""
    calls = []
    be = NumbaBackend(BackendSettings(name="numba", time_tile=4), "float64", 1)
    fused = be.k.fused
    be.k = type("K", (), {"fused": lambda *a: calls.append(1) or fused(*a), "step": be.k.step})
    run_backend(case({}), be, 9)
    assert calls  # Dirichlet: tiled
    calls.clear()
    run_backend(case({"top": N, "bottom": N}), be, 9)
    assert not calls


# exact eigenmodes ------------------------------------------------------------------------------------------
AXES = [("dirichlet", "dirichlet"), ("neumann", "neumann"), ("periodic", "periodic"), ("dirichlet", "neumann"),
        ("neumann", "dirichlet")]
SPEC = {"dirichlet": 0.0, "neumann": N, "periodic": P}


@pytest.mark.parametrize("xk,yk", list(itertools.product(AXES, AXES)))
def test_the_mode_of_every_kind_pair_is_an_exact_discrete_eigenmode(xk, yk):
    k = [2 if "dirichlet" in xk else 1, 1 if "periodic" in yk else 2]
    c = case({"left": SPEC[xk[0]], "right": SPEC[xk[1]], "bottom": SPEC[yk[0]], "top": SPEC[yk[1]]}, nx=12, ny=9,
             initial={"kind": "sine", "k": k})
    got = run_backend(c, NumpyBackend(c.backend, "float64"), 1)
    mode = eigenmode(c, range(9), range(12))
    assert np.max(np.abs(got - mode_factor(c) * mode)) < 1e-15
    assert np.max(np.abs(got - mode)) > 1e-4  # the step changed it: a real test


def test_the_neumann_mode_is_not_an_eigenmode_of_other_rules():
    """The check can fail: the Neumann cosine under Dirichlet walls, or under walls one spacing out, is not exact."""
    c = case({"left": N, "right": N, "bottom": N, "top": N}, nx=12, ny=9, initial={"kind": "sine", "k": [1, 1]})
    mode = eigenmode(c, range(9), range(12))
    for other in (case({}, nx=12, ny=9), case({"left": N, "right": N}, nx=12, ny=9)):
        block = decompose(other.shape, (1, 1), 0)
        be = NumpyBackend(other.backend, "float64")
        be.boundary = boundary.make_fill(other, block)
        u = padded_field(other, block, mode)
        u, _ = be.advance(u, u.copy(), weights(c), 1, block.everything())
        assert np.max(np.abs(u[1:-1, 1:-1] - mode_factor(c) * mode)) > 1e-4


@pytest.mark.parametrize("bnd,k", [({"left": N, "right": N, "bottom": N, "top": N}, [3, 1]),
                                   ({"left": P, "right": P, "bottom": P, "top": P}, [2, 1]),
                                   ({"left": P, "right": P, "bottom": 0.0, "top": N}, [1, 2])])
def test_verify_checks_the_exact_mode(bnd, k, tmp_path):
    c = case(bnd, nx=21, ny=15, initial={"kind": "sine", "k": k}, run={"steps": 40},
             output={"dir": str(tmp_path / "m"), "vtk": False})
    verdict = run_case(c, options=Options(verify=True, quiet=True, ceiling=False))["correctness"]
    assert verdict["reference"].startswith("exact discrete eigenmode") and verdict["passed"]
    assert 0 < verdict["relative_error"] <= verdict["tolerance"]


def test_a_failed_exact_check_exits_3(tmp_path):
    path = write_case(tmp_path / "m.yaml", boundary=plain({"left": P, "right": P, "bottom": N, "top": N}),
                      initial={"kind": "sine", "k": [1, 1]})
    res = stencil(["run", str(path), "--verify", "--quiet"], env={"STENCIL_EXACT_TOLERANCE_SCALE": "0"})
    assert res.returncode == 3, res.stderr


# conservation ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bnd", [{"left": N, "right": N, "bottom": N, "top": N},
                                 {"left": P, "right": P, "bottom": P, "top": P},
                                 {"left": P, "right": P, "bottom": N, "top": N}])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_zero_flux_heat_conserves_the_sum_to_rounding(bnd, dtype):
    steps = 400
    c = case(bnd, nx=40, ny=30, dtype=dtype, initial={"kind": "hotspot", "value": 50.0, "center": [0.2, 0.6]})
    first = initial_block(c, decompose(c.shape, (1, 1), 0)).astype(np.float64)
    u = run_backend(c, NumbaBackend(BackendSettings(name="numba"), dtype, 2), steps).astype(np.float64)
    eps = float(np.finfo(dtype).eps)
    bound = 8 * eps * (steps + 1) * np.abs(first).sum()
    assert abs(u.sum() - first.sum()) <= bound
    assert np.abs(u - first).max() > 1  # it diffused: the sum stayed while the field changed


def test_fixed_flux_changes_the_sum_by_exactly_the_flux_and_positive_flux_heats():
    bnd = {"left": {"kind": "neumann", "flux": 2.0}, "right": N, "bottom": N, "top": {"kind": "neumann", "flux": 0.5}}
    c, steps = case(bnd, nx=30, ny=20, initial={"kind": "constant", "value": 1.0}), 300
    u = run_backend(c, NumpyBackend(c.backend, "float64"), steps)
    per_step = boundary.flux_per_step(c, weights(c))
    assert per_step > 0
    (dx, dy), w = spacing(c), weights(c)
    assert math.isclose(per_step, w.wx * 20 * dx * 2.0 + w.wy * 30 * dy * 0.5)
    bound = 8 * np.finfo(float).eps * (steps + 1) * np.abs(u).sum()
    assert abs(u.sum() - (30 * 20 + steps * per_step)) <= bound
    assert u[:, 0].mean() > u[:, -1].mean()  # heat comes in through the left wall


# ghost layers: corners, depth, the process grid ---------------------------------------------------------
def test_corners_take_the_x_rule_applied_to_the_ghost_rows():
    c = case({"left": 5.0, "right": {"kind": "neumann", "flux": 1.0}, "bottom": 7.0, "top": N}, nx=4, ny=3)
    u = np.arange(30, dtype=float).reshape(5, 6)
    boundary.make_fill(c, decompose(c.shape, (1, 1), 0)).apply(u)
    dx = spacing(c)[0]
    assert u[0, 0] == 5.0 and u[4, 0] == 5.0  # a Dirichlet x side wins its corners
    assert u[0, 5] == 7.0 + dx  # mirror of the bottom ghost row, plus G dx
    assert u[4, 5] == u[3, 4] + dx  # the top ghost row mirrors row 3; then the x mirror
    np.testing.assert_array_equal(u[4, 1:5], u[3, 1:5])
    c = case({"left": P, "right": P, "bottom": P, "top": P}, nx=4, ny=3)
    u = np.arange(30, dtype=float).reshape(5, 6)
    boundary.make_fill(c, decompose(c.shape, (1, 1), 0, (True, True))).apply(u)
    assert (u[0, 0], u[0, 5], u[4, 0], u[4, 5]) == (u[3, 4], u[3, 1], u[1, 4], u[1, 1])  # wrapped both ways


def test_deep_layers_mirror_about_the_wall_and_wrap_by_the_period():
    c = case({"left": {"kind": "neumann", "flux": 2.0}, "right": N, "bottom": P, "top": P}, nx=5, ny=4)
    d = 2
    u = np.random.default_rng(0).random((4 + 2 * d, 5 + 2 * d))
    fill = boundary.make_fill(c, decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c)), depth=d)
    fill.apply(u)
    dx = spacing(c)[0]
    own = slice(d, d + 4)
    np.testing.assert_array_equal(u[own, 1], u[own, 2] + 2.0 * dx)  # layer 0: first point + G h
    np.testing.assert_array_equal(u[own, 0], u[own, 3] + 3 * 2.0 * dx)  # layer 1: the second point + 3 G h
    np.testing.assert_array_equal(u[own, -1], u[own, -4])
    np.testing.assert_array_equal(u[0:2, d:-d], u[4:6, d:-d])  # ghost rows 0, 1 hold owned rows ny, ny+1 - d
    np.testing.assert_array_equal(u[-2:, d:-d], u[2:4, d:-d])


def test_periodic_axes_wrap_the_process_grid_except_onto_the_rank_itself():
    shape = (20, 30)
    one = decompose(shape, (1, 1), 0, (True, True))
    assert one.is_serial  # its own neighbour: filled locally
    two = all_blocks(shape, (2, 1), (True, False))
    assert (two[0].south, two[0].north, two[1].south, two[1].north) == (1, 1, 0, 0)
    assert two[0].west is None and two[0].inner["south"] is None and two[0].inner["north"] == 1
    three = all_blocks(shape, (1, 3), (False, True))
    assert (three[0].west, three[2].east, three[1].west, three[1].east) == (2, 0, 0, 2)
    assert three[0].inner["west"] is None and three[2].inner["east"] is None
    fill = boundary.make_fill(case({"left": P, "right": P, "top": N}, nx=30, ny=20), three[0])
    assert [r.side for r in fill.rules] == ["bottom", "top"]  # the x ghosts come from the exchange


# geometry and output -------------------------------------------------------------------------------------
def test_walls_lie_one_spacing_out_for_dirichlet_and_half_for_neumann_and_periodic():
    g = {"nx": 10, "ny": 8}
    assert spacing(case({}, **g)) == (1.3 / 11, 0.7 / 9)
    assert spacing(case({"left": P, "right": P, "top": N, "bottom": N}, **g)) == (1.3 / 10, 0.7 / 8)
    c = case({"left": 0.0, "right": N}, **g)
    assert spacing(c)[0] == 1.3 / 10.5 and boundary.geometry(c)[1][0] == 1.3 / 10.5
    assert boundary.geometry(case({"left": N}, **g))[1][0] == 0.5 * 1.3 / 10.5


def test_output_carries_the_boundary_and_the_origin(tmp_path):
    bnd = {"left": P, "right": P, "bottom": {"kind": "neumann", "flux": 1.0}, "top": 2.0}
    path = write_case(tmp_path / "o.yaml", boundary=plain(bnd))
    assert stencil(["run", str(path), "--quiet"]).returncode == 0
    out = tmp_path / "out_o"
    with h5py.File(out / "fields.h5") as f:
        dx, dy = f.attrs["dx"], f.attrs["dy"]
        assert dx == 1.0 / 23 and dy == 1.0 / 17.5
        np.testing.assert_array_equal(f.attrs["origin"], [dx / 2, dy / 2])
        assert json.loads(f.attrs["boundary_sides"])["bottom"] == {"kind": "neumann", "flux": 1.0}
    resolved = yaml.safe_load((out / "case.yaml").read_text())
    assert resolved["boundary"]["left"] == {"kind": "periodic"}
    assert f'Precision="8">0 {float(dy) / 2!r} {float(dx) / 2!r}<' in (out / "fields.xdmf").read_text()


def test_restart_with_other_boundaries_is_refused_and_the_same_is_bitwise(tmp_path):
    bnd = {"left": {"kind": "neumann", "flux": 1.0}, "right": N, "bottom": P, "top": P}
    path = write_case(tmp_path / "r.yaml", boundary=plain(bnd), run={"steps": 30, "check_every": 5},
                      output={"checkpoint_every": 10, "vtk": False})
    assert stencil(["run", str(path), "--quiet", "--steps", "20"]).returncode == 0
    out = tmp_path / "out_r"
    other = write_case(tmp_path / "x.yaml", boundary=plain({**bnd, "left": N}), output={"dir": str(tmp_path / "x")})
    res = stencil(["run", str(other), "--restart", str(out), "--steps", "30"])
    assert res.returncode == 2 and "boundary.left" in res.stderr and "Traceback" not in res.stderr
    assert stencil(["run", str(path), "--restart", str(out), "--quiet"]).returncode == 0
    whole = write_case(tmp_path / "w.yaml", boundary=plain(bnd), run={"steps": 30}, output={"vtk": False})
    assert stencil(["run", str(whole), "--quiet"]).returncode == 0
    with h5py.File(out / "fields.h5") as a, h5py.File(tmp_path / "out_w" / "fields.h5") as b:
        np.testing.assert_array_equal(a["u"][-1], b["u"][-1])


# the shipped cases ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["insulated_box", "periodic_strip", "flux_wall", "laplace_insulated", "periodic_mode"])
def test_each_boundary_case_runs_and_verifies(name, tmp_path):
    c = load_case(ROOT / "cases" / f"{name}.yaml", {"--steps": 200, "--backend": "numba", "--output": str(tmp_path)})
    verdict = run_case(c, options=Options(verify=True, quiet=True, ceiling=False))["correctness"]
    assert verdict["passed"], verdict
    if name in ("insulated_box", "flux_wall"):
        assert verdict["conservation"]["passed"] and verdict["conservation"]["error"] > 0


def test_laplace_between_two_walls_with_insulated_sides_is_the_linear_profile(tmp_path):
    c = load_case(ROOT / "cases" / "laplace_insulated.yaml", {"--output": str(tmp_path)})
    run_case(c, options=Options(quiet=True, ceiling=False))
    with h5py.File(tmp_path / "fields.h5") as f:
        u, nx = f["u"][-1], f["u"].shape[2]
    exact = 1.0 - (np.arange(nx) + 1) / (nx + 1)  # left wall 1, right wall 0, one spacing outside the points
    assert np.abs(u - exact[None, :]).max() < 1e-4


@pytest.mark.parametrize("dims", [(2, 1), (1, 2), (3, 2), (2, 3), (1, 4), (5, 1)])
@pytest.mark.parametrize("xs,ys", SIDE_KINDS)
def test_every_rank_simulated_in_a_loop_equals_one_block_bitwise(dims, xs, ys):
    """Without MPI: blocks with wrapped neighbours, ghosts copied from the neighbours' owned strips (what
    the exchange sends), physical sides filled by each block's own rules; 6 steps equal one block."""
    from solver.parallel.halo import OPPOSITE, strips

    c = case({"left": xs[0], "right": xs[1], "bottom": ys[0], "top": ys[1]}, nx=11, ny=9)
    blocks = all_blocks(c.shape, dims, boundary.periodic_axes(c))
    be = NumpyBackend(c.backend, "float64")
    w = weights(c)
    fills = [boundary.make_fill(c, b) for b in blocks]
    us = [padded_field(c, b, initial_block(c, b)) for b in blocks]
    for _ in range(6):
        for b, u in zip(blocks, us):
            for side, rank in b.neighbours.items():
                if rank is not None:
                    send = strips(blocks[rank])[OPPOSITE[side]][0]
                    r0, r1, c0, c1 = strips(b)[side][1]
                    u[r0:r1, c0:c1] = us[rank][send[0]:send[1], send[2]:send[3]]
        new = [u.copy() for u in us]
        for b, u, v, f in zip(blocks, us, new, fills):
            be.step(v, u, w, b.everything())
            f.apply(v)
        us = new
    got = np.zeros(c.shape)
    for b, u in zip(blocks, us):
        got[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = u[1:-1, 1:-1]
    np.testing.assert_array_equal(got, python_steps(c, 6))


HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include "shim.h"  // tests/cuda_emu: CUDA's built-ins and intrinsics for g++ (common.cu uses some)
#include "kernel.cu"
int main(int argc, char** argv) {  // ny nx d [axis k0 v0 k1 v1]...; the padded field on stdin and stdout
    int ny = atoi(argv[1]), nx = atoi(argv[2]), d = atoi(argv[3]), NY = ny + 2 * d, NX = nx + 2 * d;
    idx pitch = NX + 3;  // a pitch wider than the row, as on the GPU
    real* u = new real[NY * pitch];
    for (int i = 0; i < NY * NX; i++) { double x; if (scanf("%lf", &x) != 1) return 2; u[i / NX * pitch + i % NX] = (real)x; }
    for (int a = 4; a + 5 <= argc; a += 5) {
        long total = 2L * d * (atoi(argv[a]) == 0 ? NX : NY);
        blockDim.x = 256;
        for (long t = 0; t < total + 256; t++) {  // every thread of the launch, one after the other
            blockIdx.x = t / 256; threadIdx.x = t % 256;
            fill_sides(u, pitch, ny, nx, d, atoi(argv[a]), atoi(argv[a + 1]), atof(argv[a + 2]), atoi(argv[a + 3]),
                       atof(argv[a + 4]));
        }
    }
    for (int i = 0; i < NY * NX; i++) printf("%.17g\n", (double)u[i / NX * pitch + i % NX]);
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_gpu_fill_kernel_source_run_on_the_cpu_equals_the_host_rules(dtype, tmp_path):
    """kernels/boundary.cu compiled as C++ and run thread by thread: its indexing gives Fill.apply's field
    bitwise, at depths 1-3 (on a GPU: tests/test_gpu_boundary.py)."""
    from solver.backends import cupy_kernels as gk

    real = "double" if dtype == "float64" else "float"
    (tmp_path / "kernel.cu").write_text(gk.fill_source())
    (tmp_path / "harness.cpp").write_text(HARNESS)
    shim = Path(__file__).parent / "cuda_emu"
    subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", f"-I{shim}", f"-DREAL={real}", "-o", str(tmp_path / "fill"),
                    str(tmp_path / "harness.cpp")], check=True, cwd=tmp_path)
    for (xs, ys), d in itertools.product(SIDE_KINDS, (1, 2, 3)):
        c = case({"left": xs[0], "right": xs[1], "bottom": ys[0], "top": ys[1]}, nx=13, ny=9, dtype=dtype)
        fill = boundary.make_fill(c, decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c)), d)
        host = np.random.default_rng(d).uniform(-1, 1, (9 + 2 * d, 13 + 2 * d)).astype(dtype)
        want = host.copy()
        fill.apply(want)
        args = [str(a) for _, axis, rule in gk.fill_launches(fill, host.shape) for a in (axis, *map(repr, rule))]
        out = subprocess.run([str(tmp_path / "fill"), "9", "13", str(d), *args], check=True, capture_output=True,
                             text=True, input="\n".join(map(repr, host.astype(float).ravel().tolist()))).stdout
        np.testing.assert_array_equal(np.array(out.split(), dtype=float).astype(dtype).reshape(host.shape), want)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_numba_fill_equals_the_host_rules_at_every_depth(dtype):
    be = NumbaBackend(BackendSettings(name="numba"), dtype, 1)
    for (xs, ys), d in itertools.product(SIDE_KINDS, (1, 2, 3)):
        c = case({"left": xs[0], "right": xs[1], "bottom": ys[0], "top": ys[1]}, nx=13, ny=9, dtype=dtype)
        be.boundary = boundary.make_fill(c, decompose(c.shape, (1, 1), 0, boundary.periodic_axes(c)), d)
        host = np.random.default_rng(d).uniform(-1, 1, (9 + 2 * d, 13 + 2 * d)).astype(dtype)
        want, got = host.copy(), host.copy()
        be.boundary.apply(want)
        be.fill_boundary(got)
        if be.refills:
            np.testing.assert_array_equal(got, want)
