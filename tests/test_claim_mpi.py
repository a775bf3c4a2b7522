"""Set-up checks under a real mpirun: every rank runs the same case, and an error found by one rank
alone (its block of the initial field is damaged) ends every rank with exit 2, reported once, before
anything is written."""

import sys

import pytest
from conftest import mpirun, needs_mpi, write_case
from test_integrity import flip_bit

pytestmark = [needs_mpi, pytest.mark.mpi]


def error_lines(res):
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    return [line for line in res.stderr.splitlines() if "error" in line]


def test_ranks_started_on_different_case_files_are_refused_once(tmp_path):
    a = write_case(tmp_path / "a.yaml")
    b = write_case(tmp_path / "b.yaml", grid={"nx": 24, "ny": 17})
    res = mpirun(1, ["run", str(a), "-q", ":", "-n", "2", sys.executable, "-m", "solver", "run", str(b), "-q"])
    assert res.returncode == 2, res.stdout + res.stderr
    lines = error_lines(res)
    assert len(lines) == 1, res.stderr
    assert "different cases or options" in lines[0] and "rank 0 runs case 'a'" in lines[0]
    assert "ranks 1-2 run case 'b'" in lines[0]
    assert not (tmp_path / "out_a").exists() and not (tmp_path / "out_b").exists()


def test_a_damaged_block_read_by_one_rank_is_exit_2_naming_the_dataset_before_anything_is_written(tmp_path):
    import h5py
    import numpy as np

    fields = tmp_path / "fields.h5"
    with h5py.File(fields, "w") as f:  # chunks of 8 rows, checksummed, as stencil writes its files
        f.create_dataset("u", data=np.ones((1, 64, 23)), chunks=(1, 8, 23), fletcher32=True, maxshape=(None, 64, 23))
    flip_bit(fields, "u", (0, 63, 0))  # in rank 1's rows (32-63) only
    case = write_case(tmp_path / "c.yaml", grid={"nx": 23, "ny": 64},
                      initial={"kind": "file", "path": str(fields), "dataset": "/u"})
    res = mpirun(2, ["run", str(case), "-q"])
    assert res.returncode == 2, res.stdout + res.stderr
    lines = error_lines(res)
    assert len(lines) == 1 and f"{fields}:/u" in lines[0] and "checksum" in lines[0], res.stderr
    assert not (tmp_path / "out_c").exists()
