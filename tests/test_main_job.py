"""The main job (`make run`, cases/heat_4096.yaml): ranks that fit the machine, frames that visibly evolve,
compressed VTK, and the disk space `stencil validate` announces."""

import os
import re
import subprocess

import h5py
import numpy as np
import pytest
from conftest import ROOT, stencil

from solver.config import load_case
from solver.results.summary import disk_bytes


def test_make_run_says_its_ranks_first_and_fits_the_cores():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}  # as typed
    out = subprocess.run(["make", "--no-print-directory", "-n", "run"], capture_output=True, text=True, cwd=ROOT,
                         check=True, env=env).stdout
    first = out.splitlines()[0]
    cores = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout)
    ranks = min(8, cores)
    assert f"make run: {ranks} MPI ranks ({cores} cores here" in first
    assert f"mpirun -n {ranks} stencil run cases/heat_4096.yaml" in out


def test_the_main_job_changes_most_points_and_writes_compressed_vtk(tmp_path):
    """The real case on its 4096 x 4096 grid, 20 of its steps: at the last snapshot at least 10% of the
    points differ from the first by more than 1% of the initial maximum (a full run changes more)."""
    pytest.importorskip("pyvista")
    out = tmp_path / "main"
    res = stencil(["run", "cases/heat_4096.yaml", "--steps", "20", "-o", str(out), "-q"], timeout=600)
    assert res.returncode == 0, res.stderr
    with h5py.File(out / "fields.h5", "r") as f:
        first, last = f["u"][0].astype("f8"), f["u"][-1].astype("f8")
        assert f["u"].shape == (2, 4096, 4096) and list(f["step"][...]) == [0, 20]
    changed = np.mean(np.abs(last - first) > 0.01 * first.max())
    assert changed >= 0.10, changed
    piece = out / "vtk" / "u_00000020.vti"  # one process: one image per snapshot
    assert 'compressor="vtkZLibDataCompressor"' in piece.read_bytes()[:400].decode("latin-1")
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkIOXML import vtkXMLImageDataReader

    r = vtkXMLImageDataReader()
    r.SetFileName(str(piece))
    r.Update()
    got = vtk_to_numpy(r.GetOutput().GetPointData().GetArray("u")).reshape(4096, 4096)
    assert np.array_equal(got, last.astype("f4"))


def test_validate_states_the_disk_space():
    case = load_case(ROOT / "cases" / "heat_4096.yaml")
    d = disk_bytes(case)
    field = 4096 * 4096 * 4
    assert d["snapshots"] == 5 and d["hdf5_bytes"] == 5 * field and d["vtk_bytes"] == 5 * field
    res = stencil(["validate", "cases/heat_4096.yaml"], env={"COLUMNS": "200"})
    assert res.returncode == 0
    assert re.search(rf"disk space\s*│\s*about {d['disk_bytes'] / 1e6:.0f} MB: {5 * field / 1e6:.0f} MB fields.h5 "
                     r"\(5 snapshots\) \+ up to", res.stdout), res.stdout
