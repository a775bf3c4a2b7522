"""Time as the user gives it (issue 44) on a real GPU: adaptive TR-BDF2 steps with a source window, with materials
that differ in heat capacity and with shapes (held points, holes' rims), end times that shorten the last step and
output times inside GPU time tiles; fields, every step tried and the probes' samples bitwise numpy's. Skipped
without a GPU (tests/test_time_materials.py runs the same problems on numpy and numba;
tests/test_mg_emulated.py adaptive steps on the emulated GPU)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from test_mg_emulated import assert_same_bits
from test_physics_emulated import MATERIAL, MATERIAL_SIDES, SHAPES, SOURCE

from solver.backends import registry
from solver.case import validate_case
from solver.run import Options, run_case

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]
PROBES = [{"name": "p", "kind": "point", "at": [0.41, 0.37]},
          {"name": "m", "kind": "mean", "region": {"kind": "rectangle", "lower": [0.2, 0.2], "upper": [0.8, 0.8]}},
          {"name": "q", "kind": "heat_flow", "side": "left"}]
ADAPTIVE = {  # name -> physics, sides, t_end
    "window": ({"source": SOURCE, "alpha": 1.0}, MATERIAL_SIDES | {"top": {"kind": "neumann"}}, 2e-3),
    "capacity": (MATERIAL, MATERIAL_SIDES, 0.4),
    "shapes": (SHAPES, MATERIAL_SIDES, 0.4),
}


def run(tmp_path, name, backend, physics, sides, run_section, backend_extra=None):
    c = validate_case({"name": name, "grid": {"nx": 83, "ny": 61}, "physics": {"equation": "heat", **physics},
                       "boundary": sides, "initial": {"kind": "random"}, "run": run_section,
                       "multigrid": {"coarsest": 16}, "numerics": {"dtype": "float64"},
                       "backend": {"name": backend, **(backend_extra or {})},
                       "output": {"dir": str(tmp_path / name), "vtk": False, "probes": PROBES,
                                  "times": [run_section["t_end"] / 3]}})
    rec = run_case(c, options=Options(ceiling=False))
    with h5py.File(tmp_path / name / "fields.h5") as f:
        field, times = f["u"][-1], f["time"][()]
    return field, times, rec, (tmp_path / name / "probes.csv").read_text()


@pytest.mark.parametrize("name", list(ADAPTIVE))
def test_adaptive_steps_on_the_gpu_equal_numpy_bitwise(tmp_path, name):
    physics, sides, t_end = ADAPTIVE[name]
    physics = {**physics, "solver": "multigrid", "scheme": "backward-euler"}
    section = {"t_end": t_end, "time_tolerance": 1e-3, "tolerance": 1e-10}
    want, want_t, want_rec, want_probes = run(tmp_path, "numpy", "numpy", physics, sides, section)
    got, got_t, rec, probes = run(tmp_path, "cupy", "cupy", physics, sides, section)
    assert_same_bits(got, want, f"{name}: the last snapshot")
    assert rec["run"]["adaptive"]["steps"] == want_rec["run"]["adaptive"]["steps"]
    assert rec["run"]["adaptive"]["accepted"] >= 3
    assert list(got_t) == list(want_t) == [0.0, t_end / 3, t_end]
    assert probes == want_probes  # every sample's text: the same bits
    assert rec["energy"]["holds"], rec["energy"]


@pytest.mark.parametrize("physics", [MATERIAL | {"dt": 0.02}, SHAPES], ids=["capacity", "shapes"])
def test_t_end_and_output_times_inside_gpu_time_tiles(tmp_path, physics):
    """Explicit steps in wave2a's time tiles of 6: output times and t_end shorten the steps that cross them (the
    loop ends its batches there); the fields and probes bitwise numpy's."""
    from solver.core.physics import time_step

    dt = time_step(validate_case({"name": "dt", "grid": {"nx": 83, "ny": 61}, "physics": {"equation": "heat", **physics},
                                  "boundary": MATERIAL_SIDES, "run": {"steps": 1}}))
    t_end = 30.5 * dt
    section = {"t_end": t_end}
    want, want_t, _, want_probes = run(tmp_path, "numpy", "numpy", physics, MATERIAL_SIDES, section)
    got, got_t, rec, probes = run(tmp_path, "cupy", "cupy", physics, MATERIAL_SIDES, section,
                                  {"kernel": "wave2a", "time_tile": 6})
    assert_same_bits(got, want, "the last snapshot")
    assert list(got_t) == list(want_t) and got_t[-1] == t_end
    assert probes == want_probes
    assert np.isfinite(got).any()
