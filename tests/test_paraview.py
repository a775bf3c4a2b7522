"""fields.xdmf in a real ParaView: its default XDMF reader (Xdmf3) and the legacy one read every snapshot,
bit for bit what fields.h5 holds. Skipped where no pvbatch/pvpython is installed (Debian: apt-get install
paraview python3-paraview)."""

import os
import shutil
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import stencil, write_case

PARAVIEW = shutil.which("pvbatch") or shutil.which("pvpython")
pytestmark = pytest.mark.skipif(PARAVIEW is None, reason="no ParaView (pvbatch/pvpython) here")


def test_both_xdmf_readers_read_every_snapshot_exactly(tmp_path):
    case = write_case(tmp_path / "pv.yaml", grid={"nx": 23, "ny": 17}, run={"steps": 20, "check_every": 5},
                      output={"every": 10, "vtk": False})
    p = stencil(["run", str(case), "-q"])
    assert p.returncode == 0, p.stderr
    out = tmp_path / "out_pv"
    saved = tmp_path / "pv.npz"
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}  # ParaView's Python, not the venv's
    r = subprocess.run([PARAVIEW, str(Path(__file__).with_name("paraview_read.py")), str(out / "fields.xdmf"),
                        str(saved)], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "unrecognized array type" not in r.stdout + r.stderr
    got = np.load(saved)
    assert str(got["default_reader"]).startswith("Xdmf3") and str(got["legacy_reader"]) == "XDMFReader"
    with h5py.File(out / "fields.h5", "r") as f:
        u, times = f["u"][...], f["time"][...]
    assert len(times) == 3
    for label in ("default", "legacy"):
        assert np.array_equal(got[f"{label}_times"], times), label
        for k in range(len(times)):
            assert f"{label}_{k}" in got.files, f"{label} reader: no u at snapshot {k}"
            assert np.array_equal(got[f"{label}_{k}"], u[k]), (label, k)
