"""Results every tool opens: every file a run writes read back by other tools' own readers, not stencil's.

fields.h5 and residual.h5 are netCDF-4 / CF (solver.io.fields.cf_layout): xarray opens them with the h5netcdf engine
(no phony dimensions: each axis has its coordinate) and VTK's netCDF CF reader (ParaView's NetCDF reader) finds the
time steps and the grid in the case's coordinates; fields.xdmf is read by VTK's XDMF reader, the VTK files by VTK's
XML reader (in the order u.pvd lists them); checkpoint.h5, timings.h5 and fields_views.h5 open in xarray too (no
coordinates: the solver's own state and tables). Every value is compared with what h5py reads from fields.h5."""

import json
import warnings
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest
from conftest import mpirun, needs_mpi, write_case

from solver import api
from solver.core.errors import InputError

xr = pytest.importorskip("xarray")
pytest.importorskip("h5netcdf")
vtk = pytest.importorskip("vtk")


def truth(path):
    """(u, time, step, x, y) of a stencil HDF5 series read with h5py, the coordinates from dx, dy and origin."""
    with h5py.File(path, "r") as f:
        u, t, s = f["u"][()], f["time"][()], f["step"][()]
        dx, dy, (x0, y0) = float(f.attrs["dx"]), float(f.attrs["dy"]), f.attrs["origin"]
    return u, t, s, x0 + dx * np.arange(u.shape[2]), y0 + dy * np.arange(u.shape[1])


def check_xarray(path):
    """xarray (h5netcdf) opens the file without inventing dimensions; values and coordinates as h5py reads them."""
    u, t, s, x, y = truth(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # h5netcdf warns where it must invent ("phony") dimensions
        ds = xr.open_dataset(path, engine="h5netcdf")
    with ds:
        assert ds.u.dims == ("time", "y", "x") and ds.step.dims == ("time",)
        assert np.array_equal(ds.u.values, u) and np.array_equal(ds.step.values, s)
        assert np.array_equal(ds.time.values, t) and np.array_equal(ds.x.values, x) and np.array_equal(ds.y.values, y)
        assert ds.attrs["Conventions"] == "CF-1.8" and ds.u.attrs["long_name"].startswith("u, the solved field")
        assert ds.x.attrs["axis"] == "X" and ds.y.attrs["axis"] == "Y" and ds.time.attrs["axis"] == "T"
        assert np.isnan(ds.u.encoding["_FillValue"])


def check_vtk_netcdf(path):
    """VTK's netCDF CF reader: the snapshots' times as its time steps, u at each equal to the file's, the image
    placed at the points' coordinates."""
    from vtk.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline as pipeline

    u, t, _, x, y = truth(path)
    r = vtk.vtkNetCDFCFReader()
    r.SetFileName(str(path))
    r.SetSphericalCoordinates(False)
    r.UpdateInformation()
    assert np.array_equal(r.GetOutputInformation(0).Get(pipeline.TIME_STEPS()), t)
    for k, when in enumerate(t):
        r.UpdateTimeStep(when)
        out = r.GetOutput()
        assert out.GetDimensions() == (len(x), len(y), 1)
        assert np.allclose(out.GetBounds()[:4], (x[0], x[-1], y[0], y[-1]), rtol=1e-12)
        assert np.array_equal(vtk_to_numpy(out.GetPointData().GetArray("u")).reshape(u.shape[1:]), u[k]), k


def check_vtk_xdmf(run):
    from vtk.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline as pipeline

    u, t, _, x, y = truth(run / "fields.h5")
    r = vtk.vtkXdmfReader()
    r.SetFileName(str(run / "fields.xdmf"))
    r.UpdateInformation()
    assert np.array_equal(r.GetOutputInformation(0).Get(pipeline.TIME_STEPS()), t)
    for k, when in enumerate(t):
        r.UpdateTimeStep(when)
        out = r.GetOutputDataObject(0)
        assert np.allclose(out.GetBounds()[:4], (x[0], x[-1], y[0], y[-1]), rtol=1e-12)
        assert np.array_equal(vtk_to_numpy(out.GetPointData().GetArray("u")).reshape(u.shape[1:]), u[k]), k


def check_vtk_files(run):
    """u.pvd's data sets, in its order and with its times, read by VTK's XML image reader."""
    from vtk.util.numpy_support import vtk_to_numpy

    u, t, _, x, y = truth(run / "fields.h5")
    sets = ET.parse(run / "u.pvd").getroot().find("Collection").findall("DataSet")
    assert [float(d.get("timestep")) for d in sets] == list(t)
    for k, d in enumerate(sets):
        r = vtk.vtkXMLImageDataReader()
        r.SetFileName(str(run / d.get("file")))
        r.Update()
        out = r.GetOutput()
        assert np.allclose(out.GetBounds()[:4], (x[0], x[-1], y[0], y[-1]), rtol=1e-12)
        assert np.array_equal(vtk_to_numpy(out.GetPointData().GetArray("u")).reshape(u.shape[1:]), u[k]), k


def run_case(tmp_path, name, **sections):
    path = write_case(tmp_path / f"{name}.yaml", **sections)
    api.run(api.load_case(path), progress=False, ceiling=False)
    return tmp_path / f"out_{name}"


def test_every_output_of_a_heat_run_opens_in_xarray_and_vtk(tmp_path):
    run = run_case(tmp_path, "heat", grid={"nx": 23, "ny": 17, "lx": 2.3, "ly": 1.7},
                   boundary={"top": 1.0, "left": {"kind": "neumann", "flux": 0.0}},
                   run={"steps": 40, "check_every": 10}, output={"every": 20, "checkpoint_every": 20})
    check_xarray(run / "fields.h5")
    check_vtk_netcdf(run / "fields.h5")
    check_vtk_xdmf(run)
    check_vtk_files(run)
    for name in ("checkpoint.h5", "timings.h5", "fields_views.h5"):  # no coordinates, but they open
        xr.open_dataset(run / name, engine="h5netcdf", phony_dims="sort").close()
    with h5py.File(run / "fields.h5", "r") as f:
        assert f["time"].attrs["standard_name"] == b"time" and "units" not in f["x"].attrs  # no units named: none claimed


def test_a_steady_run_and_its_residual_open_with_iterations_for_time(tmp_path):
    run = run_case(tmp_path, "lid", grid={"nx": 31, "ny": 23}, physics={"equation": "laplace", "solver": "multigrid"},
                   boundary={"top": 1.0}, run={"steps": 30, "tolerance": 1e-9}, output={"residual": True})
    for name in ("fields.h5", "residual.h5"):
        check_xarray(run / name)
        check_vtk_netcdf(run / name)
    with xr.open_dataset(run / "fields.h5", engine="h5netcdf") as ds:
        assert ds.time.attrs["units"] == "1" and "iteration" in ds.time.attrs["long_name"]
        assert list(ds.time.values) == list(ds.step.values)


def test_api_open_reads_a_run_lazily_and_read_snapshots_whole(tmp_path):
    run = run_case(tmp_path, "a", run={"steps": 20, "check_every": 5}, output={"every": 10, "vtk": False})
    u, t, s, x, y = truth(run / "fields.h5")
    for ds in (api.open(run), api.open(run / "fields.h5"), api.read_snapshots(run / "fields.h5")):
        assert np.array_equal(ds.u.values, u) and np.array_equal(ds.x.values, x) and np.array_equal(ds.time.values, t)
        assert float(ds.u.isel(time=-1).sel(x=x[3], y=y[2])) == u[-1, 2, 3]
    with pytest.raises(InputError, match="no fields.h5 there"):
        api.open(tmp_path)


def test_a_file_from_before_the_netcdf_layout_still_opens(tmp_path):
    """A fields.h5 without /x, /y and dimension scales (stencil before this layout): api.open reads it whole."""
    run = run_case(tmp_path, "old", run={"steps": 10, "check_every": 5}, output={"vtk": False})
    with h5py.File(run / "fields.h5", "r+") as f:
        for name in ("x", "y"):
            del f[name]
    ds = api.open(run)
    assert np.array_equal(ds.u.values, truth(run / "fields.h5")[0]) and ds.x.values[0] == pytest.approx(1 / 24)


def test_a_restarted_run_appends_and_keeps_the_layout(tmp_path):
    from solver.run import Options, Run

    path = write_case(tmp_path / "r.yaml", run={"steps": 30, "check_every": 5},
                      output={"every": 10, "checkpoint_every": 10, "vtk": False})
    Run(api.load_case(path, {"run.steps": 20}), options=Options(ceiling=False, quiet=True)).execute()
    out = tmp_path / "out_r"
    Run(api.load_case(path), options=Options(ceiling=False, quiet=True, restart=str(out / "checkpoint.h5"))).execute()
    check_xarray(out / "fields.h5")
    with xr.open_dataset(out / "fields.h5", engine="h5netcdf") as ds:
        assert list(ds.step.values) == [0, 10, 20, 30]


@needs_mpi
@pytest.mark.mpi
def test_fields_written_by_three_ranks_open_in_xarray(tmp_path):
    path = write_case(tmp_path / "m.yaml", grid={"nx": 41, "ny": 29}, run={"steps": 20, "check_every": 10},
                      output={"every": 10, "vtk": False})
    res = mpirun(3, ["run", str(path), "-q"])
    assert res.returncode == 0, res.stdout + res.stderr
    run = tmp_path / "out_m"
    check_xarray(run / "fields.h5")
    check_vtk_netcdf(run / "fields.h5")
    assert json.loads((run / "record.json").read_text())["resources"]["ranks"] == 3
