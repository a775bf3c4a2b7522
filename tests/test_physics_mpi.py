"""Sources, convective sides, side values that vary and alpha fields under a real mpirun: every decomposition,
halo mode, deep halo and solver bitwise equal to one numpy process (tests/mpi/check_physics.py, written once
and run at several rank counts), and a checkpoint continued on another rank count."""

import numpy as np
import pytest
from conftest import mpi_script, mpirun, needs_mpi, stencil, write_case

pytestmark = [needs_mpi, pytest.mark.mpi]


@pytest.mark.parametrize("n", [1, 2, 4])
def test_physics_equal_one_numpy_process_bitwise_on_every_grid_and_halo_mode(n, tmp_path):
    res = mpi_script(n, "check_physics.py", tmp_path, timeout=400)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok physics on {n} ranks" in res.stdout and res.stdout.count("ok ") == (8 if n == 1 else 23), res.stdout


def test_a_run_with_every_kind_of_data_continues_on_another_rank_count_bitwise(tmp_path):
    """Stopped at step 30 on 3 ranks (cart, time tiles impossible: a side in time), continued on 2 (rows): equal to
    the uninterrupted one-process run; the table in time and the source window continue at the right time."""
    import h5py

    sections = dict(grid={"nx": 27, "ny": 21}, initial={"kind": "random", "seed": 3},
                    physics={"alpha": {"background": 2.0, "regions": [{"kind": "disk", "center": [0.5, 0.5], "radius": 0.3,
                                                                       "value": 40.0}]},
                             "source": [{"kind": "constant", "value": 4.0, "active": [0.0005, 0.001]}]},
                    boundary={"top": {"kind": "dirichlet", "value": {"time": [[0, 0], [0.001, 3.0]]}},
                              "left": {"kind": "convective", "h": {"along": [[0, 1.0], [1, 5.0]]}, "ambient": 2.0}},
                    run={"steps": 70, "check_every": 10}, output={"checkpoint_every": 30, "vtk": False})
    whole = write_case(tmp_path / "whole.yaml", **sections)
    assert stencil(["run", str(whole), "-q"]).returncode == 0
    case = write_case(tmp_path / "part.yaml", **sections)
    first = mpirun(3, ["run", str(case), "-q", "--steps", "30", "--decomposition", "cart"])
    assert first.returncode == 0, first.stderr
    more = mpirun(2, ["run", str(case), "-q", "--restart", str(tmp_path / "out_part")])
    assert more.returncode == 0, more.stderr
    with h5py.File(tmp_path / "out_whole" / "fields.h5") as a, h5py.File(tmp_path / "out_part" / "fields.h5") as b:
        assert np.array_equal(a["u"][-1], b["u"][-1]) and int(b["step"][-1]) == 70
