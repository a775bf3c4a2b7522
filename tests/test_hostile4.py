"""The fourth hostile round (issue 47), class by class, with real processes, a real mpirun and real files, FIFOs
and links: data a block carries per row under dynamic balance and time tiles; data files changed between a run
and its restart; arrays that are not real numbers, or do not fit the grid; products of physical data that
overflow; inputs --overwrite would remove; YAML 1.2 numbers; messages.

Bad input is exit 2 with one line naming the file or field and the fix, no traceback, nothing written."""

import pytest
from conftest import mpi_script, needs_mpi


# data carried per row and per column: dynamic balance and time tiles -------------------------------------

@needs_mpi
@pytest.mark.mpi
def test_side_profiles_files_tables_and_fields_stay_bitwise_when_rows_move_and_under_time_tiles(tmp_path):
    """A Dirichlet profile along a left side under 3 ranks and the default time tile crashed (a ghost column of
    the deep-halo field is longer than the padded block's); a Neumann or convective profile ended 0.1-0.4 off
    once dynamic balance moved rows (the ghost rules stayed those of the old block); a table in time was off
    after a move (the moved rows' ghosts at t = 0). Every kind, bitwise equal to one process, rows moved."""
    res = mpi_script(3, "check_side_data.py", tmp_path, timeout=300, env={"STENCIL_SLOW_RANK": "1:0.0005"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("ok ") == 8, res.stdout
    assert "ok dirichlet along left" in res.stdout and "halo depth 1\n" in res.stdout
