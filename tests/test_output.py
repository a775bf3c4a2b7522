"""VTK, HDF5 and XDMF output on one process, read back with VTK's own readers and h5py.

The checkers here (check_outputs and the readers) are shared with tests/test_output_mpi.py and
tests/test_restart.py: they compare every value of every snapshot with the field held in memory.
"""

import xml.etree.ElementTree as ET
from pathlib import Path

import h5py
import numpy as np
import pytest

from solver.case import validate_case
from solver.core import physics
from solver.core.errors import EXIT_IO, InputError, OutputError
from solver.io.fields import owned
from solver.io.outputs import Outputs
from solver.run import Options, Run

pytest.importorskip("pyvista")
from vtkmodules.util.numpy_support import vtk_to_numpy  # noqa: E402
from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline  # noqa: E402
from vtkmodules.vtkIOXdmf2 import vtkXdmfReader  # noqa: E402
from vtkmodules.vtkIOXML import vtkXMLImageDataReader, vtkXMLPImageDataReader  # noqa: E402

# readers (VTK's own) -----------------------------------------------------------------------------

def image_values(img) -> np.ndarray:
    x0, x1, y0, y1, _, _ = img.GetExtent()
    return vtk_to_numpy(img.GetPointData().GetArray("u")).reshape(y1 - y0 + 1, x1 - x0 + 1)


def read_image(path: Path, parallel: bool = False):
    reader = vtkXMLPImageDataReader() if parallel else vtkXMLImageDataReader()
    reader.SetFileName(str(path))
    reader.Update()
    assert reader.GetErrorCode() == 0, path
    return reader.GetOutput()


def read_pvd(path: Path) -> list[tuple[float, str]]:
    return [(float(d.get("timestep")), d.get("file")) for d in ET.parse(path).getroot().iter("DataSet")]


def assert_geometry(img, shape, spacing) -> None:
    (ny, nx), (dx, dy) = shape, spacing
    assert img.GetExtent() == (0, nx - 1, 0, ny - 1, 0, 0)
    assert img.GetOrigin() == (dx, dy, 0.0)  # interior points only: the first one is one spacing in
    assert img.GetSpacing()[:2] == (dx, dy)


# the checkers --------------------------------------------------------------------------------------

def check_pieces(pvti: Path, full: np.ndarray, time: float) -> int:
    """Each piece read alone holds the right values on its declared extent, and the pieces leave no gap."""
    ny, nx = full.shape
    cells = np.zeros((ny - 1, nx - 1), dtype=bool)
    pieces = ET.parse(pvti).getroot().findall("./PImageData/Piece")
    for piece in pieces:
        x0, x1, y0, y1, _, _ = (int(v) for v in piece.get("Extent").split())
        img = read_image(pvti.parent / piece.get("Source"))
        assert img.GetExtent() == (x0, x1, y0, y1, 0, 0)
        assert np.array_equal(image_values(img), full[y0:y1 + 1, x0:x1 + 1]), (pvti, piece.get("Source"))
        assert img.GetFieldData().GetArray("TimeValue").GetValue(0) == time
        cells[y0:y1, x0:x1] = True
    assert cells.all(), f"{pvti}: cells between pieces are missing (no one-point overlap)"
    return len(pieces)


def check_vtk(out: Path, memory: dict[int, np.ndarray], times: list[float], spacing, ranks: int) -> None:
    entries = read_pvd(out / "u.pvd")
    assert [t for t, _ in entries] == times
    for (time, file), step in zip(entries, sorted(memory)):
        full = memory[step]
        if ranks == 1:
            assert file == f"vtk/u_{step:08d}.vti"
            img = read_image(out / file)
            assert img.GetFieldData().GetArray("TimeValue").GetValue(0) == time
        else:
            assert file == f"vtk/u_{step:08d}.pvti"
            img = read_image(out / file, parallel=True)
            assert check_pieces(out / file, full, time) == ranks
        assert_geometry(img, full.shape, spacing)
        assert np.array_equal(image_values(img), full), file


def check_xdmf(out: Path, memory: dict[int, np.ndarray], times: list[float], spacing) -> None:
    """The XML points at datasets that exist with matching shapes; VTK's XDMF reader gets every value."""
    grids = ET.parse(out / "fields.xdmf").getroot().findall("./Domain/Grid/Grid")
    assert len(grids) == len(memory)
    for k, (g, step) in enumerate(zip(grids, sorted(memory))):
        assert float(g.find("Time").get("Value")) == times[k]
        ny, nx = memory[step].shape
        assert g.find("Topology").get("Dimensions") == f"1 {ny} {nx}"
        (source,) = g.findall("./Attribute/DataItem")  # a plain HDF item: ParaView's Xdmf3 reader skips hyperslabs
        assert source.get("Format") == "HDF" and not source.findall("DataItem")
        file, _, name = source.text.partition(":")
        with h5py.File(out / file, "r") as f:
            d = f[name]  # a virtual dataset over fields.h5:/u[k]
            assert d.is_virtual and tuple(int(v) for v in source.get("Dimensions").split()) == d.shape == (1, ny, nx)
            assert np.array_equal(d[0], memory[step])
    reader = vtkXdmfReader()
    reader.SetFileName(str(out / "fields.xdmf"))
    reader.UpdateInformation()
    assert list(reader.GetOutputInformation(0).Get(vtkStreamingDemandDrivenPipeline.TIME_STEPS())) == times
    for time, step in zip(times, sorted(memory)):
        reader.UpdateTimeStep(time)
        img = reader.GetOutputDataObject(0)
        assert_geometry(img, memory[step].shape, spacing)
        assert np.array_equal(image_values(img), memory[step])


def check_outputs(out: Path, case, memory: dict[int, np.ndarray], ranks: int) -> None:
    """fields.h5, fields.xdmf, u.pvd and every VTK file agree with the fields held in memory."""
    dt, spacing = physics.time_step(case), physics.spacing(case)
    steps = sorted(memory)
    with h5py.File(out / "fields.h5", "r") as f:
        assert list(f["step"][()]) == steps
        assert list(f["time"][()]) == [s * dt for s in steps]
        for k, step in enumerate(steps):
            assert np.array_equal(f["u"][k], memory[step]), step
        times = list(f["time"][()])
    check_xdmf(out, memory, times, spacing)
    check_vtk(out, memory, times, spacing, ranks)


def memory_spy(monkeypatch) -> dict[int, np.ndarray]:
    """The field in memory at each snapshot (one process)."""
    memory: dict[int, np.ndarray] = {}
    snapshot = Outputs.snapshot

    def spy(self, s):
        snapshot(self, s)
        memory[s.step] = owned(self.backend, s.u).copy()

    monkeypatch.setattr(Outputs, "snapshot", spy)
    return memory


def small_case(tmp_path, **kw):
    data = {"name": "o", "grid": {"nx": 37, "ny": 23, "lx": 2.0, "ly": 1.5}, "initial": {"kind": "random", "seed": 4},
            "boundary": {"top": 1.0, "right": 0.5}, "run": {"steps": 30, "check_every": 10},
            "backend": {"name": "numpy"}, "output": {"dir": str(tmp_path / "out"), "every": 10}}
    for k, v in kw.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    return validate_case(data)


# tests ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_one_process_vtk_hdf5_and_xdmf_hold_every_snapshot(tmp_path, monkeypatch, dtype):
    memory = memory_spy(monkeypatch)
    c = small_case(tmp_path, numerics={"dtype": dtype}, run={"steps": 25})
    r = Run(c, options=Options(ceiling=False, quiet=True))
    r.execute()
    assert sorted(memory) == [0, 10, 20, 25]
    assert np.array_equal(memory[25], r.state.u[1:-1, 1:-1])  # the last snapshot is the final field
    check_outputs(tmp_path / "out", c, memory, ranks=1)
    img = read_image(tmp_path / "out" / "vtk" / "u_00000025.vti")
    assert img.GetPointData().GetArray("u").GetDataTypeAsString() == ("double" if dtype == "float64" else "float")


def test_fields_h5_is_chunked_and_describes_itself(tmp_path):
    c = small_case(tmp_path)
    Run(c, options=Options(ceiling=False, quiet=True)).execute()
    dx, dy = physics.spacing(c)
    with h5py.File(tmp_path / "out" / "fields.h5", "r") as f:
        u = f["u"]
        assert u.shape == (4, 23, 37) and u.dtype == np.float64 and u.maxshape == (None, 23, 37)
        assert u.chunks is not None and u.chunks[0] == 1
        a = f.attrs
        assert (a["dx"], a["dy"]) == (dx, dy) and list(a["origin"]) == [dx, dy]
        assert a["dtype"] == "float64" and "length" in a["units"] and "interior" in a["boundary"]
        assert validate_case(__import__("yaml").safe_load(a["case"])).grid.nx == 37


def test_vtk_off_writes_no_vtk_files(tmp_path):
    c = small_case(tmp_path, output={"vtk": False})
    Run(c, options=Options(ceiling=False, quiet=True)).execute()
    assert not (tmp_path / "out" / "vtk").exists() and not (tmp_path / "out" / "u.pvd").exists()
    assert (tmp_path / "out" / "fields.xdmf").exists()


def test_no_temporary_files_are_left_behind(tmp_path):
    Run(small_case(tmp_path, output={"checkpoint_every": 10}), options=Options(ceiling=False, quiet=True)).execute()
    left = [p for p in (tmp_path / "out").rglob("*") if ".tmp" in p.name]
    assert left == []


def test_a_failing_vtk_write_stops_the_run_with_exit_5_naming_the_file(tmp_path, monkeypatch):
    import solver.io.vtk

    def refuse(path, *args, **kw):
        raise PermissionError(13, "Permission denied", str(path))

    c = small_case(tmp_path, output={"checkpoint_every": 10})
    calls = {"n": 0}
    write_image = solver.io.vtk.write_image

    def second_fails(path, *args, **kw):  # the snapshot of step 10 succeeds, step 20 fails
        calls["n"] += 1
        return (refuse if calls["n"] > 2 else write_image)(path, *args, **kw)

    monkeypatch.setattr(solver.io.vtk, "write_image", second_fails)
    with pytest.raises(OutputError) as err:
        Run(c, options=Options(ceiling=False, quiet=True)).execute()
    msg = str(err.value)
    assert err.value.exit_code == EXIT_IO == 5
    assert "u_00000020.vti" in msg and "Permission denied" in msg
    assert "checkpoint.h5 (step 10), is intact" in msg and "\n" not in msg


def test_vtk_needs_pyvista_only_when_asked_for(tmp_path, monkeypatch, capsys):
    import solver.io.vtk

    monkeypatch.setattr(solver.io.vtk, "available", lambda: False)
    with pytest.raises(InputError, match=r"output.vtk: true needs pyvista.*pip install -e \.\[vtk\]"):
        Run(small_case(tmp_path, output={"vtk": True}), options=Options(ceiling=False, quiet=True)).execute()
    assert not (tmp_path / "out").exists()  # refused before anything was written
    Run(small_case(tmp_path), options=Options(ceiling=False, quiet=True)).execute()  # vtk: null, small grid
    assert "no VTK output: pyvista is not installed" in capsys.readouterr().err
    out = tmp_path / "out"
    assert (out / "fields.xdmf").exists() and not (out / "vtk").exists() and not (out / "u.pvd").exists()
    assert "vtk: false" in (out / "case.yaml").read_text()


def test_vtk_null_means_on_up_to_2048_squared_points(tmp_path):
    from solver.case import VTK_AUTO_MAX_POINTS

    assert VTK_AUTO_MAX_POINTS == 2048 * 2048
    assert small_case(tmp_path, grid={"nx": 2048, "ny": 2048}).vtk_enabled
    assert not small_case(tmp_path, grid={"nx": 2049, "ny": 2048}).vtk_enabled
    assert not small_case(tmp_path, output={"vtk": False}).vtk_enabled
