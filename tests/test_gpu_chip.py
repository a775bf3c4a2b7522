"""The on-chip kernel `chip` (kernels/chip.cu: the whole field in registers and shared memory for a
batch of steps) on a real GPU: n steps in one or several persistent launches bitwise equal to n numpy
steps on odd, non-square grids (tiles split across blocks in both directions, a grid wider than one
block, shared-memory rows or none), both dtypes, random non-zero ghost layers; the fused residual of
the last step; the automatic choice (chip where the field fits, else the tiled kernel); a chip asked
for where the field does not fit is a one-line error; `stencil run` with the exact eigenmode; an Inf
caught at a check."""

import json

import numpy as np
import pytest
from conftest import stencil, write_case
from test_gpu_wave import _own_tune_cache, gpu  # noqa: F401 - the same GPU backend and per-test tune cache

from solver.backends import cupy_kernels as gk
from solver.backends import registry
from solver.backends.numpy_backend import NumpyBackend
from solver.case import BackendSettings, load_case
from solver.core.errors import InputError, NumericalError
from solver.core.physics import Weights
from solver.run import Options, run_case

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
SHAPES = [(1000, 777), (33, 65), (5, 3), (1, 1), (67, 1), (130, 2600), (2049, 2047)]


def field(shape, dtype, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (shape[0] + 2, shape[1] + 2)).astype(dtype)


def numpy_steps(u, w, n):
    be = NumpyBackend(BackendSettings(name="numpy"), u.dtype.name)
    region = (1, u.shape[0] - 1, 1, u.shape[1] - 1)
    a, b = u.copy(), u.copy()
    for _ in range(n):
        be.step(b, a, w, region)
        a, b = b, a
    return a, b


@pytest.mark.parametrize("levels", [1, 2])
@pytest.mark.parametrize("block", [None, (64, 2), (256, 6), (288, 2)], ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_chip_equals_numpy_steps_over_several_launches(dtype, block, levels, monkeypatch):
    """12 steps as launches of 5, 5 and 2 (flags reset each time; odd counts end with a single-level
    pass at levels 2), then 12 more: bitwise, and the check's residual is the last step's max |update|,
    twice in a row. A block on which a grid does not fit on chip skips that grid (the default block fits
    them all). levels 2 (v7) where the layout allows it (one block across), else v6."""
    monkeypatch.setenv("STENCIL_CHIP_LEVELS", str(levels))
    w = Weights(0.1, 0.2, 0.25).cast(dtype)
    be = gpu(dtype, "chip", block, 5)
    for seed, (ny, nx) in enumerate(SHAPES):
        if be.chip_layout((ny, nx), block) is None:
            assert block is not None, (ny, nx)
            continue
        host = field((ny, nx), dtype, seed)
        region = (1, ny + 1, 1, nx + 1)
        u, v = be.asarray(host), be.asarray(host)
        be.prepare(u, v, w)
        assert be.choice(u.shape)[0] == "chip"
        for rep in (1, 2):
            u, v = be.advance(u, v, w, 12, region)
            want, prev = numpy_steps(host, w, 12 * rep)
            np.testing.assert_array_equal(be.to_host(u), want, err_msg=f"{(ny, nx)} after {12 * rep}")
            assert be.max_update(u, v, region) == np.max(np.abs(want - prev)[1:-1, 1:-1])


@pytest.mark.parametrize("levels", [1, 2])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_heat_checks_inside_chip_launches_flag_the_steps_with_a_nan_or_inf(dtype, levels, monkeypatch):
    """advance_checked: 30 steps in launches of at most 9, heat's checks every 4 and at 30 (core.loop's checks
    in a batch): inf where numpy's field at that step has a NaN or Inf, else 0, with weights that amplify
    so that the field overflows part-way; folded at the end of a pass (4, 8, 16, 20) or where a launch is cut
    for them (12, 24, 28, 30; v6 cuts at every one); the field's finite points bitwise equal to numpy."""
    from solver.core.timing import Timer

    monkeypatch.setenv("STENCIL_CHIP_LEVELS", str(levels))
    w = Weights(1.0, 1.0, 1.0).cast(dtype)
    be = gpu(dtype, "chip", None, 9)
    for seed, (ny, nx) in enumerate([(1000, 777), (130, 2600), (33, 65)]):
        host = field((ny, nx), dtype, seed) * np.asarray(np.finfo(dtype).max / 5 ** 14, dtype)
        region = (1, ny + 1, 1, nx + 1)
        u, v = be.asarray(host), be.asarray(host)
        be.prepare(u, v, w)
        checks = list(range(4, 30, 4)) + [30]
        u, v, values = be.advance_checked(u, v, w, 30, region, Timer(), False, checks)
        got = [f() for f in values]
        with np.errstate(all="ignore"):
            want = [0.0 if np.isfinite(numpy_steps(host, w, c)[0][1:-1, 1:-1]).all() else np.inf for c in checks]
            last = numpy_steps(host, w, 30)[0]
        assert got == want, (ny, nx)
        assert want[0] == 0.0 and want[-1] == np.inf, "the case overflows part-way"
        finite = np.isfinite(last)
        np.testing.assert_array_equal(be.to_host(u)[finite], last[finite])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_default_is_chip_where_the_field_fits_else_the_tiled_kernel(dtype):
    be = gpu(dtype)
    assert be.choice((2050, 2050))[0] == ("chip" if be.chip_layout((2048, 2048)) else gk.DEFAULT_VARIANT)
    assert be.choice((802, 1002))[:3] == ("chip", gk.default_block("chip", dtype, (800, 1000), be.sms), gk.CHIP_STEPS)
    assert be.choice((4098, 4098))[0] == gk.DEFAULT_VARIANT
    assert gpu(dtype, None, None, 8).choice((802, 1002))[:3:2] == (gk.DEFAULT_VARIANT, 8)  # a time tile asked for
    with pytest.raises(InputError, match="does not fit"):
        gpu(dtype, "chip").choice((4098, 4098))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exact_eigenmode_through_stencil_run_on_chip(tmp_path, dtype):
    """Nothing asked: chip; checks every 30 steps and output every 100 cut the launches; verify against
    the exact mode (bitwise equality with numpy: the tests above)."""
    case = write_case(tmp_path / "sine.yaml", grid={"nx": 301, "ny": 203}, initial={"kind": "sine"},
                      backend={"name": "cupy"}, numerics={"dtype": dtype},
                      run={"steps": 250, "check_every": 30}, output={"vtk": False, "every": 100}, verify=True)
    res = stencil(["run", str(case), "--quiet"], env={"STENCIL_CACHE_DIR": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stdout + res.stderr
    rec = json.loads((tmp_path / "out_sine" / "record.json").read_text())
    c = rec["correctness"]
    assert c["passed"] and c["reference"].startswith("exact") and c["relative_error"] <= float(c["tolerance"])
    choice = rec["resources"]["devices"][0]["kernels"]["203x301"]
    assert choice["kernel"] == "chip" and choice["launch"]["on_chip"]
    assert "memory bandwidth" not in rec["bottleneck"]  # a grid this small: launch gaps (the line's first rule)


@pytest.mark.parametrize("steps", [40, 1000])
def test_an_inf_on_chip_is_caught_at_the_next_check(tmp_path, steps):
    """An Inf that appears in the field on chip ends the run at the check after it, as on the CPU
    (tests/test_run.py): 40 steps with progress lines, batches of 2 (the polls), the check at 10 a batch's
    last level; 1000 quiet steps, one batch from 1 (after the warm-up step) to 1000 with the checks inside
    it, its first launch cut at 10 (an odd offset: the check is that launch's last level)."""
    field = np.zeros((19, 31))
    field[6:9, 10:13] = 3e38  # finite in float32, but u + u is inf
    np.save(tmp_path / "bad.npy", field)
    case = write_case(tmp_path / "bad.yaml", grid={"nx": 31, "ny": 19}, backend={"name": "cupy"},
                      initial={"kind": "file", "path": str(tmp_path / "bad.npy")}, numerics={"dtype": "float32"},
                      run={"steps": steps, "check_every": 10}, output={"vtk": False, "every": steps})
    with pytest.raises(NumericalError, match="at step 10 "):
        run_case(load_case(case), options=Options(ceiling=False, quiet=steps > 40))
