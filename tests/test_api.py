"""The Python API (solver.api): dotted overrides, a run in this process and under a real mpirun, the field
and the snapshots with their coordinates, read back from fields.h5 by h5py and xarray; docs/python.md's
parameter study run as it stands."""

import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, clean_env, mpirun_command, needs_mpi

from solver import api
from solver.core.errors import InputError


def small(tmp_path, **more):
    return api.build_case({"name": "s", "grid": {"nx": 40, "ny": 24, "lx": 2.0},
                           "initial": {"kind": "hotspot", "center": [1.0, 0.5], "radius": 0.2},
                           "run": {"steps": 30, "check_every": 10}, "backend": {"name": "numba"},
                           "output": {"dir": str(tmp_path / "s"), "every": 10, "vtk": False}}, more)


def test_dotted_overrides_set_any_field_and_errors_name_it(tmp_path):
    case = api.load_case(ROOT / "cases" / "quickstart.yaml",
                         {"physics.alpha": 0.5, "initial.center": [0.3, 0.4], "physics.dt": None, "--steps": 7})
    assert (case.physics.alpha, case.initial.center, case.physics.dt, case.run.steps) == (0.5, [0.3, 0.4], None, 7)
    again = api.with_fields(case, {"boundary.left": {"kind": "neumann", "flux": 0.0}})
    assert again.boundary.left.kind == "neumann" and case.boundary.left.kind == "dirichlet"
    with pytest.raises(InputError, match=r"physics.alpah: unknown field 'alpah'; did you mean 'alpha'\?"):
        api.with_fields(case, {"physics.alpah": 1.0})
    with pytest.raises(InputError, match=r"grid.nx is a value, not a section"):
        api.with_fields(case, {"grid.nx.x": 3})
    with pytest.raises(InputError, match=r"physics.alpha: -1 is outside \[1e-100, 1e\+100\]; a diffusivity is > 0"):
        api.with_fields(case, {"physics.alpha": -1.0})


def test_a_run_returns_the_field_the_snapshots_and_the_record(tmp_path):
    xr = pytest.importorskip("xarray")
    res = api.run(small(tmp_path), progress=False, ceiling=False)
    assert res.record["run"]["steps"] == 30 and res.rank == 0 and res.dir == tmp_path / "s"
    assert res.field.shape == (24, 40)
    ds = res.snapshots
    assert isinstance(ds, xr.Dataset) and ds.u.dims == ("time", "y", "x")
    assert list(ds.step.values) == [0, 10, 20, 30]
    np.testing.assert_array_equal(ds.u.isel(time=-1).values, res.field)
    np.testing.assert_allclose(ds.time.values, np.arange(4) * 10 * res.record["input"]["dt"])
    dx, dy = res.record["input"]["dx"], res.record["input"]["dy"]
    np.testing.assert_allclose(res.x, (np.arange(40) + 1) * dx)  # Dirichlet sides: x_j = (j + 1) dx
    np.testing.assert_allclose(res.y, (np.arange(24) + 1) * dy)
    np.testing.assert_array_equal(ds.x.values, res.x)
    hot = ds.u.isel(time=0).sel(x=1.0, y=0.5, method="nearest")
    assert float(hot) == 100.0  # the disc's centre, found by its coordinates


def test_errors_use_the_apis_words_not_the_command_lines(tmp_path):
    """A second run into the same directory: the fix is `overwrite=True` (an argument of api.run) or another
    `output.dir` (a field), not the command line's --overwrite / --output."""
    case = small(tmp_path, **{"run.steps": 2})
    api.run(case, progress=False, ceiling=False)
    with pytest.raises(InputError) as err:
        api.run(case, progress=False, ceiling=False)
    message = str(err.value)
    assert "already holds results; pass overwrite=True to replace them, or choose another output.dir" in message
    assert "--" not in message
    assert api.api_words("use --steps 5 or --overwrite") == "use --steps 5 or overwrite=True"


def test_without_xarray_the_snapshots_are_arrays(tmp_path):
    """xarray missing (blocked from import in a fresh process): a dict of numpy arrays instead."""
    code = ("import sys; sys.modules['xarray'] = None\n"
            "from solver import api\n"
            f"c = api.build_case({{'name': 'n', 'grid': {{'nx': 20, 'ny': 12}}, 'run': {{'steps': 4}}, "
            f"'output': {{'dir': {str(tmp_path / 'n')!r}}}}})\n"
            "s = api.run(c, progress=False, ceiling=False).snapshots\n"
            "print(type(s).__name__, sorted(s), s['u'].shape)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=clean_env())
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "dict ['step', 'time', 'u', 'x', 'y'] (2, 12, 20)"


def test_progress_goes_to_a_callback_and_verify_failures_raise(tmp_path):
    seen = []
    api.run(small(tmp_path, **{"run.steps": 200}), progress=lambda *a: seen.append(a), ceiling=False)
    assert seen and all(total == 200 and elapsed >= 0 and mlups >= 0 for _, total, elapsed, mlups in seen)
    assert [s for s, *_ in seen] == sorted({s for s, *_ in seen})
    from solver.core.errors import VerificationError

    sine = api.build_case({"name": "v", "grid": {"nx": 20, "ny": 12}, "run": {"steps": 10},
                           "output": {"dir": str(tmp_path / "v")}})
    assert api.run(sine, verify=True, progress=False, ceiling=False).record["correctness"]["passed"]
    import os

    os.environ["STENCIL_EXACT_TOLERANCE_SCALE"] = "0"  # the documented hook that makes the exact check fail
    try:
        with pytest.raises(VerificationError, match="verification failed"):
            api.run(sine, verify=True, progress=False, ceiling=False, overwrite=True)
    finally:
        del os.environ["STENCIL_EXACT_TOLERANCE_SCALE"]


def example() -> str:
    """The parameter study of docs/python.md, as it stands."""
    text = (ROOT / "docs" / "python.md").read_text()
    section = text[text.index("## A parameter study"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_example(tmp_path, launcher=()):
    (tmp_path / "cases").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cases" / "quickstart.yaml").write_text((ROOT / "cases" / "quickstart.yaml").read_text())
    script = tmp_path / "study.py"
    script.write_text(example())
    res = subprocess.run([*launcher, sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                         env=clean_env(), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].split() == ["alpha", "peak", "mean", "MLUP/s"] and len(lines) == 4, res.stdout
    rows = [line.split() for line in lines[1:]]
    assert [r[0] for r in rows] == ["0.25", "0.5", "1.0"]
    peaks = [float(r[1]) for r in rows]
    assert peaks[0] > peaks[1] > peaks[2]  # faster diffusion, lower peak after the same time
    for alpha in ("0.25", "0.5", "1.0"):
        assert (tmp_path / "output" / "study" / f"alpha-{alpha}" / "fields.h5").exists()
    return [r[:3] for r in rows]


@needs_mpi
@pytest.mark.mpi
def test_the_parameter_study_runs_under_mpirun_with_the_same_results(tmp_path):
    """docs/python.md's study on one process (as tests/test_docs_commands.py runs the page) and under mpirun -n 2:
    the same table, bitwise."""
    pytest.importorskip("xarray")
    one = run_example(tmp_path / "one")
    two = run_example(tmp_path / "two", launcher=(*mpirun_command(), "-n", "2"))
    assert one == two
