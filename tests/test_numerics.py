"""Every available CPU backend against the exact eigenmode, each other, and a pure-Python loop."""

import math

import numpy as np
import pytest

from solver.backends import registry
from solver.case import validate_case
from solver.core.decomp import decompose
from solver.core.field import padded_field
from solver.core.initial import initial_block
from solver.core.physics import mode_factor, sine_mode, weights

CPU = [n for n, c in registry().items() if not c.on_gpu and c.unavailable() is None]


def make_case(nx=37, ny=53, dtype="float64", equation="heat", initial=None, boundary=None, backend="numpy", **run):
    data = {"name": "t", "grid": {"nx": nx, "ny": ny, "lx": 1.3, "ly": 0.7}, "physics": {"equation": equation},
            "numerics": {"dtype": dtype}, "backend": {"name": backend}, "initial": initial or {"kind": "sine"},
            "boundary": boundary or {}, "run": {"steps": 1000, **run}}
    return validate_case(data)


def backend_for(case, name, threads=1, **settings):
    cls = registry()[name]
    cfg = case.backend.model_copy(update={"name": name, **settings})
    return cls(cfg, case.numerics.dtype, threads)


def run_steps(case, name, steps, threads=1, batched=True, **settings):
    """Padded field after `steps` steps on one process (batched: backend.advance; else step by step)."""
    be = backend_for(case, name, threads, **settings)
    block = decompose(case.shape, (1, 1), 0)
    u = be.asarray(padded_field(case, block, initial_block(case, block)))
    v = be.asarray(be.to_host(u).copy())
    w = weights(case).cast(case.numerics.dtype)
    be.prepare(u, v, w)
    if batched:
        u, v = be.advance(u, v, w, steps, block.everything())
    else:
        for _ in range(steps):
            be.step(v, u, w, block.everything())
            u, v = v, u
    return be.to_host(u), be.to_host(v)


def loop_reference(u, w, steps):
    """The update as plain Python loops over points (tiny grids only)."""
    u = u.copy()
    ny, nx = u.shape[0] - 2, u.shape[1] - 2
    for _ in range(steps):
        v = u.copy()
        for i in range(1, ny + 1):
            for j in range(1, nx + 1):
                v[i, j] = w.wc * u[i, j] + w.wx * (u[i, j - 1] + u[i, j + 1]) + w.wy * (u[i - 1, j] + u[i + 1, j])
        u = v
    return u


@pytest.mark.parametrize("name", CPU)
@pytest.mark.parametrize("dtype,rtol", [("float64", 1e-12), ("float32", 2e-5)])
@pytest.mark.parametrize("equation", ["heat", "laplace"])
def test_exact_eigenmode_decay(name, dtype, rtol, equation):
    case = make_case(dtype=dtype, equation=equation)
    steps = 60
    u, _ = run_steps(case, name, steps)
    exact = sine_mode(range(53), range(37), 53, 37, mode_factor(case) ** steps)
    err = np.max(np.abs(u[1:-1, 1:-1] - exact)) / np.max(np.abs(exact))
    assert err < rtol, err
    assert mode_factor(case) < 1


def test_mode_factor_matches_the_formula():
    case = make_case()
    w = weights(case)
    assert math.isclose(mode_factor(case), w.wc + 2 * w.wx * math.cos(math.pi / 38) + 2 * w.wy * math.cos(math.pi / 54))


@pytest.mark.parametrize("name", CPU)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_constant_field_stays_constant(name, dtype):
    c = 2.5
    case = make_case(dtype=dtype, initial={"kind": "constant", "value": c},
                     boundary={"top": c, "bottom": c, "left": c, "right": c})
    u, _ = run_steps(case, name, 25)
    assert np.all(u == np.asarray(c, dtype=dtype))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_numpy_and_numba_agree_bitwise_for_any_thread_count_and_time_tile(dtype):
    case = make_case(nx=41, ny=29, dtype=dtype, initial={"kind": "random", "seed": 3},
                     boundary={"top": 1.0, "left": -2.0, "right": 0.5, "bottom": 3.0})
    ref, ref_prev = run_steps(case, "numpy", 23)
    for threads in (1, 2):
        for tile in (1, 2, 3, 4, 7):
            got, prev = run_steps(case, "numba", 23, threads=threads, time_tile=tile)
            assert np.array_equal(got, ref), (threads, tile)
            assert np.array_equal(prev, ref_prev), (threads, tile)  # the last step is a plain one
    got, _ = run_steps(case, "numba", 23, threads=2, batched=False)
    assert np.array_equal(got, ref)


def test_numba_batches_that_need_no_previous_field_are_all_tiles_and_bitwise():
    """A batch ending at a poll (no check follows) may end with a tile instead of a plain step."""
    case = make_case(nx=37, ny=31, initial={"kind": "random", "seed": 5}, boundary={"top": 1.0, "left": 0.5})
    for n in (2, 8, 9, 16, 17, 23):
        ref, _ = run_steps(case, "numpy", n)
        be = backend_for(case, "numba", 2, time_tile=8)
        block = decompose(case.shape, (1, 1), 0)
        u = padded_field(case, block, initial_block(case, block))
        w = weights(case).cast(case.numerics.dtype)
        be.prepare(u, u.copy(), w)
        calls = []
        fused = be.k.fused
        be.k = type("K", (), {"fused": staticmethod(lambda *a: calls.append(a[5]) or fused(*a)),
                              "step": staticmethod(be.k.step)})
        got, _ = be.advance(u, u.copy(), w, n, block.everything(), previous=False)
        assert np.array_equal(be.to_host(got), ref), n
        assert sum(calls) == n - (n % 8 == 1), (n, calls)  # every step in a tile, but a lone last one


@pytest.mark.parametrize("shape", [(3, 3), (4, 7), (5, 3)])
def test_backends_match_a_python_loop_on_tiny_grids(shape):
    ny, nx = shape
    case = make_case(nx=nx, ny=ny, initial={"kind": "random", "seed": 1}, boundary={"top": 1.0, "left": 2.0})
    block = decompose(case.shape, (1, 1), 0)
    u0 = padded_field(case, block, initial_block(case, block))
    ref = loop_reference(u0, weights(case), 7)
    for name in CPU:
        got, _ = run_steps(case, name, 7, threads=2)
        assert np.array_equal(got, ref), name


def test_time_tiles_are_bitwise_on_odd_grids_and_block_counts():
    from solver.backends import numba_kernels as k

    rng = np.random.default_rng(5)
    for ny, nx in ((37, 53), (5, 3), (64, 33), (3, 200)):
        a = rng.random((ny + 2, nx + 2))
        for depth in (2, 3, 5):
            ref, tmp = a.copy(), a.copy()
            for _ in range(depth):
                k.step(tmp, ref, 0.1, 0.2, 0.25, 1, ny + 1, 1, nx + 1)
                ref, tmp = tmp, ref
            for blocks in (1, 2, 3, 7):
                out = np.full_like(a, np.nan)
                out[0], out[-1], out[:, 0], out[:, -1] = a[0], a[-1], a[:, 0], a[:, -1]
                k.fused(out, a, 0.1, 0.2, 0.25, depth, blocks)
                assert np.array_equal(out, ref), (ny, nx, depth, blocks)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_tile_with_neighbour_sides_equals_the_global_steps_on_its_target(dtype):
    """numba_kernels.tiled on a sub-block whose sides face neighbours (valid only at time 0, so the
    region shrinks by one per level) and on one with fixed sides: bitwise the global steps, for row
    and column blocks (the ring buffer's cache tiling), targets touching the valid edge or not."""
    from solver.backends import numba_kernels as k

    rng = np.random.default_rng(7)
    wc, wx, wy = (dtype(x) for x in (0.1, 0.2, 0.25))
    ny, nx = 40, 57
    g = rng.random((ny + 2, nx + 2)).astype(dtype)
    for depth in (1, 2, 3, 5, 8):
        ref, tmp = g.copy(), g.copy()
        for _ in range(depth):
            k.step(tmp, ref, wc, wx, wy, 1, ny + 1, 1, nx + 1)
            ref, tmp = tmp, ref
        # rows 10..30 x columns 1..57 of the global field: south and north are neighbours, west and east fixed
        y0, y1 = 10, 31
        sub = g[y0 - depth:y1 + depth].copy()  # depth ghost rows each way, the global ghost columns
        for blocks in ((1, 1), (3, 2), (2, 9)):
            out = np.full_like(sub, np.nan)
            k.tiled(out, sub, wc, wx, wy, depth, depth, depth + y1 - y0, 1, nx + 1,
                    0, sub.shape[0], 1, nx + 1, False, False, True, True, *blocks)
            assert np.array_equal(out[depth:depth + y1 - y0, 1:nx + 1], ref[y0:y1, 1:nx + 1]), (depth, blocks)
        # an inner target of the whole field with every side not fixed (overlap's part that needs no ghost)
        if 2 * depth < min(ny, nx):
            out = np.full_like(g, np.nan)
            k.tiled(out, g, wc, wx, wy, depth, 1 + depth, ny + 1 - depth, 1 + depth, nx + 1 - depth,
                    1, ny + 1, 1, nx + 1, False, False, False, False, 2, 3)
            inner = (slice(1 + depth, ny + 1 - depth), slice(1 + depth, nx + 1 - depth))
            assert np.array_equal(out[inner], ref[inner]), depth


def test_max_update_flags_non_finite_values():
    for name in CPU:
        case = make_case()
        be = backend_for(case, name)
        a = np.ones((6, 7))
        b = a.copy()
        b[2, 3] = 1.5
        assert be.max_update(a, b, (1, 5, 1, 6)) == 0.5
        b[3, 3] = np.nan
        assert be.max_update(a, b, (1, 5, 1, 6)) == float("inf")
        b[3, 3] = np.inf
        assert be.max_update(a, b, (1, 5, 1, 6)) == float("inf")
