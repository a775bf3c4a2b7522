"""Sources, convective sides, side values that vary, alpha fields and shapes under a real mpirun: every decomposition,
halo mode, deep halo and solver bitwise equal to one numpy process (tests/mpi/check_physics.py, written once
and run at several rank counts), and a checkpoint continued on another rank count."""

import numpy as np
import pytest
from conftest import mpi_script, mpirun, needs_mpi, stencil, write_case

pytestmark = [needs_mpi, pytest.mark.mpi]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """One numpy process's results for every case of check_physics.py: made by the first rank count's run, read by
    the others' (the same case on one process whatever the rank count)."""
    return tmp_path_factory.mktemp("physics_references")


@pytest.mark.parametrize("n", [1, 2, 4])
def test_physics_equal_one_numpy_process_bitwise_on_every_grid_and_halo_mode(n, tmp_path, references):
    res = mpi_script(n, "check_physics.py", tmp_path, "numba", references, timeout=400)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok physics on {n} ranks" in res.stdout and res.stdout.count("ok ") == (21 if n == 1 else 53), res.stdout


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



@needs_mpi
@pytest.mark.parametrize("ranks", [1, 2])
def test_paraview_output_carries_alpha_and_q_beside_u(tmp_path, ranks):
    """The VTK files hold alpha and q as point arrays beside u (issue 34: ParaView colours by the material map),
    read back by VTK's own readers: one .vti on one process, the .pvti's pieces on two ranks; equal to the case's
    alpha and q at every point at each snapshot's time (from u.pvd), q without the windowed term once its window
    has closed."""
    pytest.importorskip("pyvista")
    import xml.etree.ElementTree as ET

    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkIOXML import vtkXMLImageDataReader, vtkXMLPImageDataReader

    from solver import api
    from solver.core import sources
    from solver.core.materials import alpha_at

    nx, ny = 40, 30
    sections = {"grid": {"nx": nx, "ny": ny}, "backend": {"name": "numba", "threads": 1},
                "physics": {"alpha": {"background": 1.0, "regions": [
                    {"kind": "disk", "center": [0.3, 0.6], "radius": 0.2, "value": 20.0},
                    {"kind": "rectangle", "lower": [0.6, 0.1], "upper": [0.9, 0.4], "value": 0.05}]},
                    "source": [{"kind": "gaussian", "center": [0.5, 0.5], "width": 0.1, "amplitude": 4.0},
                               {"kind": "rectangle", "lower": [0.1, 0.1], "upper": [0.3, 0.2], "value": 2.0,
                                "active": [0.0, 2e-5]}]},
                "boundary": {"left": {"kind": "convective", "h": 2.0, "ambient": 0.5}},
                "run": {"steps": 40}, "output": {"dir": str(tmp_path / "out"), "every": 20, "fields": False}}
    res = mpirun(ranks, ["run", str(write_case(tmp_path / "maps.yaml", **sections)), "-q"])
    assert res.returncode == 0, res.stderr
    case = api.build_case({"name": "maps", **sections})
    rows, cols = np.arange(ny), np.arange(nx)
    want_alpha = alpha_at(case, rows, cols)
    assert want_alpha.min() == 0.05 and want_alpha.max() == 20.0  # both regions and the background are in it
    snapshots = [(float(d.get("timestep")), tmp_path / "out" / d.get("file"))
                 for d in ET.parse(tmp_path / "out" / "u.pvd").getroot().iter("DataSet")]
    assert len(snapshots) == 3 and all(p.suffix == (".pvti" if ranks > 1 else ".vti") for _, p in snapshots)
    qs = []
    for time, path in snapshots:
        reader = vtkXMLPImageDataReader() if ranks > 1 else vtkXMLImageDataReader()
        reader.SetFileName(str(path))
        reader.Update()
        assert reader.GetErrorCode() == 0, path
        points = reader.GetOutput().GetPointData()
        got = {name: vtk_to_numpy(points.GetArray(name)).reshape(ny, nx) for name in ("u", "alpha", "q")}
        np.testing.assert_array_equal(got["alpha"], want_alpha)
        np.testing.assert_array_equal(got["q"], sources.q_at(case, sources.active(case, time), rows, cols))
        assert np.isfinite(got["u"]).all()
        qs.append(got["q"])
    assert snapshots[-1][0] > 2e-5 and (qs[0] > qs[-1]).any(), "the windowed term was on at first and off at the end"
