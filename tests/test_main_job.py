"""The main job (`make run`, cases/heat_4096.yaml): ranks that fit the machine, frames that visibly evolve,
compressed VTK, and the disk space `stencil validate` announces."""

import os
import re
import subprocess

import h5py
import numpy as np
import pytest
import yaml
from conftest import ROOT, stencil

from solver.case import load_case
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


def test_the_main_job_writes_its_mosaic_compressed_in_hdf5_and_vtk(tmp_path):
    """The real case on its 4096 x 4096 grid, 20 of its steps: the first snapshot is the mosaic of 128 x
    128-point cells, fields.h5 holds it shuffled and gzip-compressed (read back by h5py), and the VTK piece
    is zlib-compressed and read back equal by VTK's own reader."""
    pytest.importorskip("pyvista")
    out = tmp_path / "main"
    res = stencil(["run", "cases/heat_4096.yaml", "--steps", "20", "-o", str(out), "-q"], timeout=600)
    assert res.returncode == 0, res.stderr
    with h5py.File(out / "fields.h5", "r") as f:
        u = f["u"]
        assert u.shape == (2, 4096, 4096) and list(f["step"][...]) == [0, 20]
        assert (u.compression, u.shuffle, u.fletcher32) == ("gzip", True, True)
        first, last = u[0], u[-1]
        stored = u.id.get_storage_size()
    cells = first.reshape(32, 128, 32, 128)
    assert np.all(cells == cells[:, :1, :, :1]) and len(np.unique(first)) == 32 * 32
    assert stored < 0.5 * first.nbytes  # two snapshots in less than one field's bytes: the mosaic compresses
    piece = out / "vtk" / "u_00000020.vti"  # one process: one image per snapshot
    assert 'compressor="vtkZLibDataCompressor"' in piece.read_bytes()[:400].decode("latin-1")
    from vtkmodules.util.numpy_support import vtk_to_numpy
    from vtkmodules.vtkIOXML import vtkXMLImageDataReader

    r = vtkXMLImageDataReader()
    r.SetFileName(str(piece))
    r.Update()
    got = vtk_to_numpy(r.GetOutput().GetPointData().GetArray("u")).reshape(4096, 4096)
    assert np.array_equal(got, last)


def test_the_main_jobs_picture_changes_at_a_full_view(tmp_path):
    """The main case shrunk 4x per side with the physics kept (cells 128 -> 32 points, steps 2000 -> 125: the
    same distance heat travels in cells, the same cells per pixel of a 256-pixel view, its seed, alpha and
    sides): most of the full view changes between the first and the last snapshot, and `stencil report`
    draws the picture. (The full case on 2 ranks: 62% of the pixels, 199 MB written: README.)"""
    from solver.results.report import read_views, visible_change

    case = load_case(ROOT / "cases" / "heat_4096.yaml").model_dump(mode="json")
    case["grid"].update(nx=1024, ny=1024)
    case["initial"]["cell"] = 32
    case["run"]["steps"] = 125
    case["output"].update(dir=str(tmp_path / "small"), every=None, vtk=False)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(case))
    res = stencil(["run", str(path), "-q"], timeout=300)
    assert res.returncode == 0, res.stderr
    views = read_views(tmp_path / "small" / "fields.h5")
    assert views["steps"] == (0, 125)
    assert visible_change(views["first"], views["first"]) == 0.0
    assert visible_change(views["first"], views["last"]) > 0.5
    rep = stencil(["report", str(tmp_path / "small")])
    assert rep.returncode == 0, rep.stderr
    assert (tmp_path / "small" / "fields.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "fields.png" in (tmp_path / "small" / "report.md").read_text()


def test_validate_states_the_disk_space():
    case = load_case(ROOT / "cases" / "heat_4096.yaml")
    d = disk_bytes(case)
    field = 4096 * 4096 * 4
    assert d["snapshots"] == 3 and d["hdf5_bytes"] == 3 * field and d["vtk_bytes"] == 3 * field
    assert d["disk_bytes"] == 6 * field  # uncompressed; compressed, the 2-rank run wrote 199 MB (README)
    res = stencil(["validate", "cases/heat_4096.yaml"], env={"COLUMNS": "250"})
    assert res.returncode == 0
    assert re.search(rf"disk space\s*│\s*at most {d['disk_bytes'] / 1e6:.0f} MB before compression .*: "
                     rf"{3 * field / 1e6:.0f} MB fields.h5 \(3 snapshots\) \+ {3 * field / 1e6:.0f} MB VTK", res.stdout), \
        res.stdout


@pytest.mark.parametrize("cell", [1, 5, 128])
def test_random_cells_are_the_same_field_for_any_decomposition(cell):
    """initial.random.cell: every block of every process grid cuts the same mosaic (rows of cells seeded by
    their index), cell x cell points share one value, and cell 1 is the per-point field of before."""
    from solver.case import validate_case
    from solver.core.decomp import all_blocks
    from solver.core.initial import initial_block

    case = validate_case({"name": "m", "grid": {"nx": 23, "ny": 17}, "run": {"steps": 1}, "initial": {"kind": "random", "seed": 3,
                                                                                "cell": cell}})
    whole = initial_block(case, all_blocks((17, 23), (1, 1))[0])
    for dims in ((3, 2), (17, 1), (1, 23), (4, 5)):
        got = np.empty_like(whole)
        for b in all_blocks((17, 23), dims):
            got[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = initial_block(case, b)
        assert np.array_equal(got, whole), dims
    c = min(cell, 17)
    assert np.all(whole[:c, :c] == whole[0, 0]) and len(np.unique(whole)) == (-(-17 // cell)) * (-(-23 // cell))
    if cell == 1:
        assert np.array_equal(whole[4], np.random.default_rng([3, 4]).uniform(0.0, 1.0, 23))
