"""Which path writes fields.h5 and checkpoint.h5, and the parallel-HDF5 path under a real mpirun.

The parallel-HDF5 tests need an h5py built with MPI (`h5py.get_config().mpi`) and the mpirun of the MPI
that it and mpi4py were built with (STENCIL_MPIRUN; see docs/output.md "Parallel HDF5"); they are skipped
elsewhere. They compare every value and attribute of the files written by 3 ranks (rows, and cart with
column blocks, so each rank's hyperslab is strided) with those of a one-process run, bitwise, and restart
from a checkpoint written in parallel. The path tests at the top run everywhere.
"""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import mpi_script, mpirun, needs_mpi, write_case

from solver.case import load_case
from solver.run import Options, Run

MPIO = {"STENCIL_HDF5_MPIO": "1"}  # whatever the caller's environment says
parallel_h5py = pytest.mark.skipif(not h5py.get_config().mpi,
                                   reason="h5py is not built with MPI (parallel HDF5); see docs/output.md")


def heat_case(tmp_path: Path, name="c", **parallel) -> Path:
    return write_case(tmp_path / f"{name}.yaml", grid={"nx": 41, "ny": 29}, initial={"kind": "random", "seed": 3},
                      boundary={"top": 1.0, "left": 0.5}, run={"steps": 60, "check_every": 10},
                      parallel=parallel or {"decomposition": "rows"},
                      output={"dir": str(tmp_path / "out"), "every": 20, "checkpoint_every": 30, "vtk": False})


def one_process(case_path: Path, out: Path) -> Path:
    Run(load_case(case_path, {"--output": str(out)}), options=Options(ceiling=False, quiet=True)).execute()
    return out


def writers(out: Path) -> tuple[str, str, str]:
    """(fields.h5's writer, checkpoint.h5's writer, record.json's run.hdf5_writer)."""
    with h5py.File(out / "fields.h5", "r") as f, h5py.File(out / "checkpoint.h5", "r") as c:
        fw, cw = f.attrs["writer"], c.attrs["writer"]
    return fw, cw, json.loads((out / "record.json").read_text())["run"]["hdf5_writer"]


def bitwise(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_file(path: Path, ref: Path, differ=("case", "writer", "ranks", "dims", "created", "segments")) -> None:
    """Same datasets (values bitwise, dtype, shape, chunks, maxshape) and attributes, except `differ`."""
    with h5py.File(path, "r") as f, h5py.File(ref, "r") as g:
        assert sorted(f) == sorted(g) and sorted(f.attrs) == sorted(g.attrs)
        for name in g:
            a, b = f[name], g[name]
            assert (a.chunks, a.maxshape) == (b.chunks, b.maxshape), name
            assert bitwise(a[()], b[()]), name
        for key in set(g.attrs) - set(differ):
            assert bitwise(f.attrs[key], g.attrs[key]), key


def test_one_process_writes_serial(tmp_path):
    out = one_process(heat_case(tmp_path), tmp_path / "one")
    assert writers(out) == ("serial", "serial", "serial")


@needs_mpi
@pytest.mark.mpi
def test_three_ranks_stream_to_rank_0_when_parallel_hdf5_is_off(tmp_path):
    path = heat_case(tmp_path)
    ref = one_process(path, tmp_path / "one")
    res = mpirun(3, ["run", str(path), "-q"], env={"STENCIL_HDF5_MPIO": "0"})
    assert res.returncode == 0, res.stdout + res.stderr
    out = tmp_path / "out"
    assert writers(out) == ("streamed", "streamed", "streamed")
    assert_same_file(out / "fields.h5", ref / "fields.h5")
    assert_same_file(out / "checkpoint.h5", ref / "checkpoint.h5")


# parallel HDF5 ------------------------------------------------------------------------------------

@parallel_h5py
@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("parallel", [{"decomposition": "rows"}, {"decomposition": "cart", "dims": [1, 3]}],
                         ids=["rows", "cart-1x3"])
def test_three_ranks_write_fields_and_checkpoint_with_parallel_hdf5_bitwise(tmp_path, parallel):
    path = heat_case(tmp_path, **parallel)
    ref = one_process(heat_case(tmp_path, "ref"), tmp_path / "one")  # parallel.dims would need 3 ranks
    res = mpirun(3, ["run", str(path), "-q"], env=MPIO)
    assert res.returncode == 0, res.stdout + res.stderr
    out = tmp_path / "out"
    assert writers(out) == ("mpio", "mpio", "mpio")
    assert_same_file(out / "fields.h5", ref / "fields.h5")
    assert_same_file(out / "checkpoint.h5", ref / "checkpoint.h5")
    with h5py.File(out / "fields.h5", "r") as f, h5py.File(out / "checkpoint.h5", "r") as c:
        assert list(f["step"][()]) == [0, 20, 40, 60] and f["u"].shape == (4, 29, 41)
        assert c.attrs["step"] == 60 and c.attrs["ranks"] == 3
        assert list(c.attrs["dims"]) == ([3, 1] if parallel["decomposition"] == "rows" else [1, 3])
    # rank 0 lists what the ranks wrote from its own record of steps and times: the same listing
    assert (out / "fields.xdmf").read_text() == (ref / "fields.xdmf").read_text()
    assert [p.name for p in out.glob(".*")] == [".stencil-manifest.json"]  # no temporary file left behind


@parallel_h5py
@needs_mpi
@pytest.mark.mpi
def test_restarts_from_a_parallel_checkpoint_are_bitwise(tmp_path):
    """3 ranks stop at step 40 (checkpoint there); 2 cart ranks continue it into another directory and
    3 ranks append to the first directory, both with parallel HDF5; both end on the one-process field."""
    path = heat_case(tmp_path)
    ref = one_process(path, tmp_path / "one")
    out, on2 = tmp_path / "out", tmp_path / "on2"
    res = mpirun(3, ["run", str(path), "-q", "--steps", "40"], env=MPIO)
    assert res.returncode == 0, res.stdout + res.stderr
    with h5py.File(out / "checkpoint.h5", "r") as c:
        assert (c.attrs["step"], c.attrs["writer"]) == (40, "mpio")
    res = mpirun(2, ["run", str(path), "-q", "--restart", str(out), "-o", str(on2), "--decomposition", "cart"], env=MPIO)
    assert res.returncode == 0, res.stdout + res.stderr
    res = mpirun(3, ["run", str(path), "-q", "--restart", str(out)], env=MPIO)
    assert res.returncode == 0, res.stdout + res.stderr

    assert writers(out) == ("mpio", "mpio", "mpio")
    assert_same_file(out / "checkpoint.h5", ref / "checkpoint.h5")  # both at step 60
    with h5py.File(out / "fields.h5", "r") as f, h5py.File(ref / "fields.h5", "r") as g:
        assert list(f["step"][()]) == [0, 20, 40, 60]  # 40: a scheduled snapshot and the first run's end
        assert bitwise(f["u"][()], g["u"][()]) and bitwise(f["time"][()], g["time"][()])
    with h5py.File(on2 / "fields.h5", "r") as f, h5py.File(ref / "fields.h5", "r") as g:
        assert list(f["step"][()]) == [40, 60] and f.attrs["writer"] == "mpio"
        assert bitwise(f["u"][()], g["u"][2:])


@parallel_h5py
@needs_mpi
@pytest.mark.mpi
def test_appending_in_parallel_to_a_fields_h5_allocated_late_is_refused_with_the_fix(tmp_path):
    """A fields.h5 whose datasets allocate their chunks when first written (as stencil wrote them before
    parallel HDF5 was supported) cannot be extended by parallel HDF5: exit 2 with the fix, file untouched;
    with STENCIL_HDF5_MPIO=0 the same restart appends (rank 0 writes)."""
    path = heat_case(tmp_path)
    ref = one_process(path, tmp_path / "one")
    out = tmp_path / "out"
    res = mpirun(3, ["run", str(path), "-q", "--steps", "40"], env=MPIO)
    assert res.returncode == 0, res.stdout + res.stderr
    late = out / "late.h5"
    with h5py.File(out / "fields.h5", "r") as src, h5py.File(late, "w") as dst:
        for name in ("u", "step", "time"):
            dst.create_dataset(name, data=src[name][()], maxshape=src[name].maxshape, chunks=src[name].chunks)
        dst.attrs.update(src.attrs)
    late.replace(out / "fields.h5")
    before = (out / "fields.h5").read_bytes()

    res = mpirun(3, ["run", str(path), "-q", "--restart", str(out)], env=MPIO)
    assert res.returncode == 2, res.stdout + res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "STENCIL_HDF5_MPIO=0" in errors[0] and "Traceback" not in res.stderr, res.stderr
    assert (out / "fields.h5").read_bytes() == before

    res = mpirun(3, ["run", str(path), "-q", "--restart", str(out)], env={"STENCIL_HDF5_MPIO": "0"})
    assert res.returncode == 0, res.stdout + res.stderr
    with h5py.File(out / "fields.h5", "r") as f, h5py.File(ref / "fields.h5", "r") as g:
        assert list(f["step"][()]) == [0, 20, 40, 60] and f.attrs["writer"] == "streamed"
        assert bitwise(f["u"][()], g["u"][()])


@parallel_h5py
@needs_mpi
@pytest.mark.mpi
def test_a_full_disk_under_parallel_hdf5_stops_every_rank_with_exit_5_and_the_checkpoint_restarts(tmp_path):
    """Every file the ranks write limited to 140 kB (RLIMIT_FSIZE, as in tests/test_restart.py): rank 0's
    reservation for a snapshot fails before any rank writes, every rank stops with the same line."""
    path = write_case(tmp_path / "d.yaml", grid={"nx": 40, "ny": 40}, initial={"kind": "random", "seed": 3},
                      boundary={"top": 1.0, "left": 0.5}, run={"steps": 100, "check_every": 10},
                      output={"dir": str(tmp_path / "out"), "every": 10, "checkpoint_every": 20, "vtk": False})
    ref = one_process(path, tmp_path / "one")
    res = mpi_script(3, "output_diskfull.py", 140_000, "run", path, "-q", env=MPIO)
    out = tmp_path / "out"
    assert res.returncode == 5, res.stdout + res.stderr
    line = res.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert f"cannot write {out / 'fields.h5'} (File too large)" in line
    with h5py.File(out / "checkpoint.h5", "r") as c, h5py.File(out / "fields.h5", "r") as f:
        step, steps = int(c.attrs["step"]), list(f["step"][()])
        assert c.attrs["writer"] == f.attrs["writer"] == "mpio"
    assert f"the last checkpoint, {out / 'checkpoint.h5'} (step {step}), is intact" in line
    assert steps == list(range(0, steps[-1] + 1, 10)) and steps[-1] >= step  # every snapshot before the failure
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]
    res = mpirun(3, ["run", str(path), "-q", "--restart", str(out)], env=MPIO)
    assert res.returncode == 0, res.stdout + res.stderr
    assert_same_file(out / "fields.h5", ref / "fields.h5")


@parallel_h5py
@needs_mpi
@pytest.mark.mpi
def test_a_checkpoint_that_cannot_get_room_under_parallel_hdf5_keeps_the_previous_one(tmp_path):
    """tests/mpi/checkpoint_efbig.py (its assertions: exit 5 on every rank, step 2's checkpoint unchanged,
    no temporary file) with parallel HDF5 writing the checkpoints."""
    res = mpi_script(3, "checkpoint_efbig.py", tmp_path / "out", env=MPIO)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("ok "), res.stdout
    with h5py.File(tmp_path / "out" / "checkpoint.h5", "r") as c:
        assert (c.attrs["step"], c.attrs["writer"]) == (2, "mpio")
