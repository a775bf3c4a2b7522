"""Multigrid under a real mpirun (laplace and implicit heat): bitwise equal to one numpy process at 1-4 ranks (every boundary kind,
decomposition, halo mode, cycle, dtype; levels distributed, shared and gathered), checkpoints at cycle
boundaries continued on another rank count, and a stop request answered between cycles."""

import json
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from solver.io.claim import LOCK
from conftest import clean_env, mpi_script, mpirun, mpirun_command, needs_mpi, stencil, write_case

pytestmark = [needs_mpi, pytest.mark.mpi]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_multigrid_equals_one_numpy_process_bitwise(n, tmp_path):
    res = mpi_script(n, "check_multigrid.py", tmp_path, timeout=400)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("ok ") == 21 and f"ok multigrid on {n} ranks" in res.stdout, res.stdout
    if n > 1:
        assert "'shared'" in res.stdout and "'distributed', 'distributed'" in res.stdout


MG = {"grid": {"nx": 61, "ny": 47}, "physics": {"equation": "laplace", "solver": "multigrid"},
      "initial": {"kind": "random", "seed": 8}, "boundary": {"top": 1.0, "right": {"kind": "neumann", "flux": 0.5}},
      "run": {"steps": 10}, "backend": {"name": "numba", "threads": 1}}


def last(out):
    with h5py.File(out / "fields.h5") as f:
        return f["u"][-1], list(f["step"][:])


IMPLICIT = {**MG, "physics": {"equation": "heat", "scheme": "crank-nicolson", "dt": 3e-3}}


@pytest.mark.parametrize("base", [MG, IMPLICIT], ids=["laplace", "crank-nicolson"])
def test_checkpoint_of_a_cycle_continues_on_another_rank_count_bitwise(tmp_path, base):
    MG = base  # noqa: N806 - the laplace case's name in the body below
    ref = write_case(tmp_path / "ref.yaml", **MG, output={"dir": str(tmp_path / "ref"), "vtk": False})
    assert stencil(["run", str(ref), "-q"]).returncode == 0
    case = write_case(tmp_path / "c.yaml", **MG, parallel={"decomposition": "cart"},
                      output={"dir": str(tmp_path / "c"), "vtk": False, "checkpoint_every": 3, "every": 2})
    first = mpirun(3, ["run", str(case), "-q", "--steps", "4"])
    assert first.returncode == 0, first.stderr
    second = mpirun(2, ["run", "--restart", str(tmp_path / "c"), "-q", "--steps", "10"])
    assert second.returncode == 0, second.stderr
    u, steps = last(tmp_path / "c")
    u_ref, _ = last(tmp_path / "ref")
    assert np.array_equal(u, u_ref) and steps == [0, 2, 4, 6, 8, 10]
    rec = json.loads((tmp_path / "c" / "record.json").read_text())
    first_rel = json.loads((tmp_path / "ref" / "record.json").read_text())["solver"]["history"]
    assert rec["solver"]["history"][-1]["relative"] == first_rel[-1]["relative"]
    if "scheme" not in base["physics"]:
        assert rec["solver"]["iterations"] == 6 and rec["solver"]["initial_residual"] > 0  # r0 came from the checkpoint
    else:
        assert rec["solver"]["steps"] == 6 and [h["step"] for h in rec["solver"]["history"]] == list(range(5, 11))


def test_sigterm_stops_between_cycles_with_a_checkpoint_and_exit_75(tmp_path):
    case = write_case(tmp_path / "s.yaml", **{**MG, "grid": {"nx": 1023, "ny": 1023}, "run": {"steps": 20}},
                      output={"dir": str(tmp_path / "s"), "vtk": False})
    cmd = [*mpirun_command(), "-n", "2", sys.executable, "-m", "solver", "run", str(case)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(), cwd=tmp_path)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stdout.readline()
        if line.startswith("cycle 2/20"):  # progress lines every 10% of the cycles
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err
    assert "checkpoint written" in err and (tmp_path / "s" / "checkpoint.h5").exists()
    assert not (tmp_path / "s" / LOCK).exists()
    with h5py.File(tmp_path / "s" / "checkpoint.h5") as f:
        stopped = int(f.attrs["step"])
    again = mpirun(2, ["run", "--restart", str(tmp_path / "s"), "-q", "--steps", str(stopped + 2)])
    assert again.returncode == 0, again.stderr
    s = json.loads((tmp_path / "s" / "record.json").read_text())["solver"]
    assert s["first_iteration"] == stopped and s["iterations"] == 2


def test_residual_field_from_three_ranks_equals_one_process(tmp_path):
    fields = []
    for n in (1, 3):
        case = write_case(tmp_path / f"r{n}.yaml", **MG, parallel={"decomposition": "cart"},
                          output={"dir": str(tmp_path / f"r{n}"), "vtk": False, "residual": True})
        res = mpirun(n, ["run", str(case), "-q", "--steps", "4"])
        assert res.returncode == 0, res.stderr
        with h5py.File(tmp_path / f"r{n}" / "residual.h5") as f:
            fields.append(f["u"][-1])
    assert fields[0].tobytes() == fields[1].tobytes() and np.abs(fields[0]).max() > 0
