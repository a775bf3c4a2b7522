"""MPI under a real mpirun (oversubscribed on small machines). Each script is written once, independent
of the rank count, and run at several counts."""

import csv
import json
import time

import numpy as np
import pytest
from conftest import mpi_script, mpirun, needs_mpi, stencil, write_case

pytestmark = [needs_mpi, pytest.mark.mpi]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_ghosts_hold_the_neighbours_rank_after_one_exchange(n):
    res = mpi_script(n, "check_halo.py")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ok halos on {n} ranks" in res.stdout


@pytest.mark.parametrize("n", [2, 3, 4])  # 6 ranks (cart 2 x 3): check_deep.py, time tile 1 included
def test_distributed_equals_one_process_bitwise(n, tmp_path):
    res = mpi_script(n, "check_equal.py", tmp_path, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("ok ") == 14, res.stdout


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_boundary_kinds_verify_and_equal_one_process_bitwise(n, tmp_path):
    """Dirichlet, Neumann (zero and fixed flux), periodic and mixed sides; rows, cart 1 x N and cart; every
    halo mode: exact eigenmodes, conservation of the sum, and bitwise equality with one numpy process."""
    res = mpi_script(n, "check_boundary.py", tmp_path, timeout=300)
    assert f"ok boundary kinds on {n} ranks" in res.stdout
    assert res.stdout.count(" ranks (") >= (8 if n == 1 else 20)  # the configurations really ran


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6])
def test_deep_halos_equal_one_process_per_step_bitwise_with_1_over_k_messages(n, tmp_path):
    """backend.time_tile k in {1, 2, 3, 4, 8} x rows, cart x every halo mode, laplace, float32, thin blocks,
    periodic neighbours (a rank its own neighbour)."""
    res = mpi_script(n, "check_deep.py", tmp_path, timeout=400)
    assert res.returncode == 0, res.stdout + res.stderr
    # one process: each configuration once (its decomposition and halo mode change nothing on one block)
    assert res.stdout.count("ok ") == (10 if n == 1 else 46) and f"ok deep halos on {n} ranks" in res.stdout, res.stdout


def test_deep_halo_checkpoints_restart_on_other_ranks_and_tile_bitwise_and_are_recorded(tmp_path):
    """Snapshots and checkpoints land on the steps the case names (tiles end there); a run stopped at
    step 50 on 3 ranks with k = 3 continues on 2 ranks with k = 4 (and balances rows between tiles), bitwise equal to one process per-step; the record states the tile, depth and messages."""
    base = {"grid": {"nx": 37, "ny": 45}, "initial": {"kind": "random", "seed": 9}, "boundary": {"top": 1.0},
            "backend": {"name": "numba", "threads": 1}, "run": {"steps": 120, "check_every": 25},
            "parallel": {"balance_every": 16}, "output": {"every": 20, "checkpoint_every": 30, "vtk": False}}
    ref = write_case(tmp_path / "ref.yaml", **{**base, "output": {**base["output"], "dir": str(tmp_path / "ref")}})
    assert stencil(["run", str(ref), "-q", "--time-tile", "1"]).returncode == 0
    case = write_case(tmp_path / "d.yaml", **{**base, "output": {**base["output"], "dir": str(tmp_path / "d")}})
    first = mpirun(3, ["run", str(case), "-q", "--steps", "50", "--time-tile", "3"])
    assert first.returncode == 0, first.stderr
    rec = json.loads((tmp_path / "d" / "record.json").read_text())["resources"]
    assert rec["time_tile"] == 3 and rec["halo_depth"] == 3
    assert 0 < rec["messages_per_step"] < 4 * 0.6  # per-step: 4 (2 inner boundaries x 2 directions)
    res = mpirun(2, ["run", str(case), "-q", "--restart", str(tmp_path / "d"), "--time-tile", "4",
                     "--balance", "dynamic"], env={"STENCIL_SLOW_RANK": "1:0.0002"})
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "d" / "record.json").read_text())["resources"]
    rows = min(rec["balance"]["history"][-1]["rows"])  # the slowed rank's block, after the last move
    assert rec["balance"]["rebalances"] >= 1 and rec["time_tile"] == 4 and rec["halo_depth"] == min(4, rows), rec
    import h5py

    with h5py.File(tmp_path / "d" / "fields.h5") as f, h5py.File(tmp_path / "ref" / "fields.h5") as g:
        steps, ref_steps = list(f["step"][()]), list(g["step"][()])
        assert [s for s in steps if s != 50] == ref_steps
        keep = [i for i, s in enumerate(steps) if s != 50]
        assert np.array_equal(f["u"][()][keep], g["u"][()])
    with h5py.File(tmp_path / "d" / "checkpoint.h5") as f:
        assert int(f.attrs["step"]) == 120


@pytest.mark.parametrize("n", [2, 3, 4])
def test_dynamic_balance_moves_rows_off_a_slow_rank_and_stays_bitwise(n, tmp_path):
    """STENCIL_SLOW_RANK makes rank 1 compute slower: parallel.balance dynamic must give it fewer rows,
    and fields, snapshots and checkpoint must still equal the one-process run bit for bit."""
    res = mpi_script(n, "check_balance.py", tmp_path, timeout=300, env={"STENCIL_SLOW_RANK": "1:0.0002"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("ok ") == 6, res.stdout


def test_cli_balance_option_records_the_moves_and_every_update(tmp_path):
    case = write_case(tmp_path / "d.yaml", grid={"nx": 40, "ny": 60}, backend={"name": "numba", "threads": 1},
                      run={"steps": 60, "check_every": 20, "warmup": 0}, parallel={"balance_every": 10})
    res = mpirun(2, ["run", str(case), "--balance", "dynamic", "-q"], env={"STENCIL_SLOW_RANK": "1:0.0002"})
    assert res.returncode == 0, res.stdout + res.stderr
    out = tmp_path / "out_d"
    rec = json.loads((out / "record.json").read_text())
    bal = rec["resources"]["balance"]
    assert bal["mode"] == "dynamic" and bal["rebalances"] >= 1 and bal["move_seconds"] >= 0
    assert "Dynamic row balance every 10 steps" in (out / "record.md").read_text()
    rows = list(csv.DictReader((out / "timings.csv").open()))
    assert sum(int(r["updates"]) for r in rows) == 40 * 60 * 60  # every point of every timed step, once
    assert int(rows[1]["points"]) < int(rows[0]["points"])  # the slowed rank ends with fewer rows


def test_cli_run_writes_per_rank_timings_and_trace(tmp_path):
    case = write_case(tmp_path / "t.yaml", grid={"nx": 64, "ny": 48}, backend={"name": "numba"},
                      initial={"kind": "hotspot", "radius": 0.3},
                      run={"steps": 40, "check_every": 10}, output={"trace": True, "every": 20},
                      parallel={"decomposition": "cart"})
    res = mpirun(3, ["run", str(case), "--verify", "-q"])
    assert res.returncode == 0, res.stdout + res.stderr
    out = tmp_path / "out_t"
    rows = list(csv.DictReader((out / "timings.csv").open()))
    assert [int(r["rank"]) for r in rows] == [0, 1, 2]
    assert len({r["pid"] for r in rows}) == 3
    for r in rows:
        sections = [float(r[s]) for s in ("compute", "comm", "wait", "io", "other")]
        assert min(sections) >= 0
        assert abs(sum(sections) - float(r["loop"])) <= 0.05 * float(r["loop"]), r
        assert int(r["steps"]) == 39 and int(r["threads"]) >= 1
    rec = json.loads((out / "record.json").read_text())
    assert rec["resources"]["ranks"] == 3 and rec["correctness"]["passed"] is True
    assert rec["correctness"]["mismatched_points"] == 0
    t = rec["timings"]
    assert t["load_imbalance"] >= 1.0 and len(t["mlups_per_rank"]) == 3
    trace = json.loads((out / "trace.json").read_text())["traceEvents"]
    spans = [e for e in trace if e["ph"] == "X"]
    assert {e["pid"] for e in spans} == {0, 1, 2}
    assert {e["name"] for e in spans} >= {"compute", "comm", "wait"}
    assert all(e["dur"] >= 0 for e in spans)


def test_a_failing_rank_ends_the_job_quickly(tmp_path):
    case = write_case(tmp_path / "f.yaml", grid={"nx": 64, "ny": 64}, run={"steps": 100000, "check_every": 10})
    t = time.perf_counter()
    res = mpirun(3, ["run", str(case), "-q"], env={"STENCIL_FAIL_AT": "1:30"}, timeout=60)
    assert res.returncode != 0
    assert time.perf_counter() - t < 30
    assert "injected failure on rank 1" in res.stderr


def test_bad_input_is_reported_once_with_exit_2(tmp_path):
    case = write_case(tmp_path / "b.yaml", grid={"nx": 20, "ny": 20, "nz": 4})
    res = mpirun(3, ["run", str(case)])
    assert res.returncode == 2
    assert res.stderr.count("grid.nz") == 1, res.stderr
    assert not (tmp_path / "out_b").exists()


def test_more_ranks_than_rows_is_bad_input(tmp_path):
    case = write_case(tmp_path / "r.yaml", grid={"nx": 40, "ny": 3})
    res = mpirun(4, ["run", str(case)])
    assert res.returncode == 2 and res.stderr.count("error:") == 1, res.stderr
    assert "decomposition: cart" in res.stderr


def test_nan_on_one_rank_stops_every_rank_with_exit_4(tmp_path):
    field = np.zeros((30, 20))
    field[26:29, 4:7] = 3e38  # inside the last rank's rows; finite in float32, but a sum of two neighbours is inf
    np.save(tmp_path / "inf.npy", field)
    case = write_case(tmp_path / "n.yaml", grid={"nx": 20, "ny": 30}, run={"steps": 1000, "check_every": 10},
                      numerics={"dtype": "float32"}, initial={"kind": "file", "path": str(tmp_path / "inf.npy")})
    res = mpirun(3, ["run", str(case), "-q"], timeout=60)
    assert res.returncode == 4, res.stderr
    assert res.stderr.count("NaN or Inf") == 1 and "step 10" in res.stderr
