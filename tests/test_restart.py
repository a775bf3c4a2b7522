"""Checkpoint and restart: bitwise equal to an uninterrupted run, with 1, 3 and 2 ranks, after a step
limit, a SIGTERM (to this process, and to a real mpirun) or a full disk; output appended with no
duplicate and no hole."""

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import ROOT, clean_env, mpi_script, mpirun, mpirun_command, needs_mpi, stencil, write_case

from solver.case import load_case
from solver.core.errors import EXIT_INTERRUPTED, Interrupted
from solver.io.outputs import Outputs
from solver.run import Options, Run


def series(out: Path):
    with h5py.File(out / "fields.h5", "r") as f:
        return list(f["step"][()]), list(f["time"][()]), f["u"][()]


def pvd(out: Path) -> list[tuple[float, str]]:
    return [(float(d.get("timestep")), Path(d.get("file")).stem) for d in ET.parse(out / "u.pvd").getroot().iter("DataSet")]


def segments(out: Path) -> list[tuple[int, int, int]]:
    with h5py.File(out / "timings.h5", "r") as f:
        t = f["ranks"][()]
    return sorted({(int(s), int(a), int(b)) for s, a, b in zip(t["segment"], t["first_step"], t["last_step"])})


def reference(case_path: Path, tmp_path: Path) -> Path:
    """The same case run without interruption on one process, into its own directory."""
    out = tmp_path / "reference"
    case = load_case(case_path, {"--output": str(out)})
    Run(case, options=Options(ceiling=False, quiet=True)).execute()
    return out


def assert_same_output(out: Path, ref: Path, extra_steps=()) -> None:
    """Same snapshots (bitwise), times and .pvd entries as the reference, plus any `extra_steps`."""
    steps, times, u = series(out)
    rsteps, rtimes, ru = series(ref)
    keep = [k for k, s in enumerate(steps) if s not in extra_steps]
    assert [steps[k] for k in keep] == rsteps, (steps, rsteps)
    assert len(set(steps)) == len(steps)
    assert [times[k] for k in keep] == rtimes
    assert np.array_equal(u[keep], ru)
    entries = pvd(out)
    assert [e for e in entries if int(e[1][2:]) not in extra_steps] == pvd(ref)


def heat_case(tmp_path, name="c", **kw):
    sections = {"grid": {"nx": 41, "ny": 29}, "initial": {"kind": "random", "seed": 3},
                "boundary": {"top": 1.0, "left": 0.5}, "run": {"steps": 120, "check_every": 10},
                "output": {"dir": str(tmp_path / "out"), "every": 20, "checkpoint_every": 30, "vtk": True}}
    return write_case(tmp_path / f"{name}.yaml", **{**sections, **kw})


# one process, in this process ----------------------------------------------------------------------

def test_extending_a_finished_run_appends_bitwise(tmp_path):
    path = heat_case(tmp_path)
    ref = reference(path, tmp_path)
    Run(load_case(path, {"--steps": 75}), options=Options(ceiling=False, quiet=True)).execute()
    out = tmp_path / "out"
    with h5py.File(out / "checkpoint.h5", "r") as f:
        assert f.attrs["step"] == 75  # checkpoints are on: one more where the run ended
    r = Run(load_case(path), options=Options(ceiling=False, quiet=True, restart=str(out / "checkpoint.h5")))
    r.execute()
    assert r.appending and r.state.step == 120
    assert_same_output(out, ref, extra_steps=(75,))  # 75: the end of the first run, a snapshot of its own
    assert segments(out) == [(0, 0, 75), (1, 75, 120)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_checkpoints_exits_75_and_the_restart_continues_bitwise(tmp_path, monkeypatch, sig):
    path = heat_case(tmp_path, run={"steps": 120, "check_every": 7})
    ref = reference(path, tmp_path)
    progress = Outputs.progress

    sent = []

    def deliver(self, step):  # a real signal to this process, delivered to the handler at the first poll from step 50
        if step >= 50 and not sent:  # (a slow first batch may shorten the poll period: 50 need not be a poll)
            sent.append(step)
            os.kill(os.getpid(), sig)
        progress(self, step)

    monkeypatch.setattr(Outputs, "progress", deliver)
    with pytest.raises(Interrupted) as err:
        Run(load_case(path), options=Options(ceiling=False, quiet=True)).execute()
    monkeypatch.setattr(Outputs, "progress", progress)
    out = tmp_path / "out"
    with h5py.File(out / "checkpoint.h5", "r") as f:
        stopped = int(f.attrs["step"])  # at the next poll for stop requests after step 50
    assert 50 < stopped < 120
    assert err.value.exit_code == EXIT_INTERRUPTED == 75
    assert f"stopped by {sig.name} at step {stopped} of 120" in str(err.value)
    assert series(out)[0] == list(range(0, stopped + 1, 20))  # no snapshot of its own where it stopped
    Run(load_case(path), options=Options(ceiling=False, quiet=True, restart=str(out))).execute()
    assert_same_output(out, ref)
    assert segments(out) == [(0, 0, stopped), (1, stopped, 120)]


def test_restart_into_another_directory_starts_its_output_there(tmp_path):
    path = heat_case(tmp_path)
    Run(load_case(path, {"--steps": 60}), options=Options(ceiling=False, quiet=True)).execute()
    new = tmp_path / "continued"
    r = Run(load_case(path, {"--output": str(new)}),
            options=Options(ceiling=False, quiet=True, restart=str(tmp_path / "out")))
    r.execute()
    assert not r.appending
    assert series(new)[0] == [60, 80, 100, 120]
    assert [e[1] for e in pvd(new)] == ["u_00000060", "u_00000080", "u_00000100", "u_00000120"]
    assert series(tmp_path / "out")[0] == [0, 20, 40, 60]  # the first run's directory is left alone
    assert segments(new) == [(0, 60, 120)]


def test_restart_refuses_a_different_case_naming_every_difference(tmp_path):
    path = heat_case(tmp_path)
    assert stencil(["run", str(path), "-q", "--steps", "30"]).returncode == 0
    other = heat_case(tmp_path, name="other", boundary={"top": 2.0, "left": 0.5}, numerics={"dtype": "float32"},
                      output={"dir": str(tmp_path / "new")})
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    res = stencil(["run", str(other), "--restart", str(tmp_path / "out" / "checkpoint.h5")])
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "boundary.top is 1.0 in the checkpoint but 2.0 in the case" in line
    assert "numerics.dtype is 'float64' in the checkpoint but 'float32' in the case" in line
    assert not (tmp_path / "new").exists() and sorted(p.name for p in (tmp_path / "out").iterdir()) == before


def test_restart_accepts_changes_that_do_not_change_the_field(tmp_path):
    path = heat_case(tmp_path)
    ref = reference(path, tmp_path)
    assert stencil(["run", str(path), "-q", "--steps", "60"]).returncode == 0
    changed = heat_case(tmp_path, name="renamed", backend={"name": "numba", "threads": 1},
                        initial={"kind": "constant", "value": 7.0},
                        run={"steps": 120, "check_every": 40, "warmup": 3},
                        output={"dir": str(tmp_path / "out"), "every": 20, "checkpoint_every": 50, "vtk": True})
    res = stencil(["run", str(changed), "-q", "--restart", str(tmp_path / "out")])
    assert res.returncode == 0, res.stderr
    assert_same_output(tmp_path / "out", ref)


@pytest.mark.parametrize("args, message", [
    (["--restart", "missing.h5"], "--restart: missing.h5 not found"),
    (["--restart", "{case}"], "cannot be read as a checkpoint"),
    (["--restart", "{out}", "--steps", "30"], "run.steps: 30 but the checkpoint is already at step 30"),
])
def test_bad_restart_requests_exit_2_with_one_line(tmp_path, args, message):
    path = heat_case(tmp_path)
    assert stencil(["run", str(path), "-q", "--steps", "30"]).returncode == 0
    args = [a.format(case=path, out=tmp_path / "out") for a in args]
    res = stencil(["run", str(path), "-q", *args])
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def record_of(out: Path) -> dict:
    import json

    return json.loads((out / "record.json").read_text())


def test_the_record_lists_every_segment_and_a_finished_run_is_left_alone(tmp_path):
    """60 steps with checkpoints, then a restart to 120 whose case has none (so the directory's checkpoint
    stays at step 60, as after a run stopped by a signal): the record lists both segments and record.md says
    what this segment computed; a third launch from that stale checkpoint says the run is done, exits 2 and
    changes no file."""
    import socket

    path = heat_case(tmp_path)
    out = tmp_path / "out"
    assert stencil(["run", str(path), "-q", "--steps", "60"]).returncode == 0
    plain = heat_case(tmp_path, name="plain", output={"dir": str(out), "every": 20, "checkpoint_every": None, "vtk": True})
    res = stencil(["run", str(plain), "-q", "--restart", str(out)])
    assert res.returncode == 0, res.stderr
    segs = record_of(out)["run"]["segments"]
    assert [(s["first_step"], s["last_step"], s["ranks"]) for s in segs] == [(0, 60, 1), (60, 120, 1)]
    for s in segs:
        assert s["hosts"] == [socket.gethostname()] and s["started"] <= s["ended"] and s["seconds"] > 0
    md = (out / "record.md").read_text()
    assert "reached step 120 of 120 requested; this segment computed 60 step(s) (from step 60), 2 segments" in md
    assert "| 1 | 60-120 | 1 |" in md
    with h5py.File(out / "checkpoint.h5", "r") as f:
        assert f.attrs["step"] == 60  # stale: the second segment wrote none
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    again = stencil(["run", str(plain), "-q", "--restart", str(out)])  # the same job submitted again
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert "already reached step 120" in again.stderr and "nothing was changed" in again.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# several ranks, under a real mpirun -----------------------------------------------------------------

@needs_mpi
@pytest.mark.mpi
def test_3_ranks_restarted_on_3_and_on_2_cart_ranks_are_bitwise(tmp_path):
    path = heat_case(tmp_path)
    ref = reference(path, tmp_path)
    first = mpirun(3, ["run", str(path), "-q", "--steps", "50"])
    assert first.returncode == 0, first.stderr
    res = mpirun(2, ["run", str(path), "-q", "--restart", str(tmp_path / "out"), "-o", str(tmp_path / "on2"),
                     "--decomposition", "cart", "--halo", "blocking"])
    assert res.returncode == 0, res.stderr
    res = mpirun(3, ["run", str(path), "-q", "--restart", str(tmp_path / "out")])
    assert res.returncode == 0, res.stderr
    assert_same_output(tmp_path / "out", ref, extra_steps=(50,))
    steps, _, u = series(tmp_path / "on2")
    assert steps == [50, 60, 80, 100, 120] and np.array_equal(u[-1], series(ref)[2][-1])
    assert segments(tmp_path / "out") == [(0, 0, 50), (1, 50, 120)]
    for d, ranks in (("out", [3, 3]), ("on2", [3, 2])):
        segs = record_of(tmp_path / d)["run"]["segments"]
        assert [(s["first_step"], s["last_step"], s["ranks"]) for s in segs] == [(0, 50, ranks[0]), (50, 120, ranks[1])]


def launcher_is_open_mpi() -> bool:
    cmd = mpirun_command()
    return bool(cmd) and "Open MPI" in subprocess.run([cmd[0], "--version"], capture_output=True, text=True).stdout


@needs_mpi
@pytest.mark.mpi
def test_sigterm_to_mpirun_checkpoints_on_every_rank_and_a_2_rank_restart_completes_bitwise(tmp_path):
    if launcher_is_open_mpi():
        pytest.skip("Open MPI's mpirun kills the ranks about 3 s after SIGTERM and exits 1 (docs/output.md)")
    path = heat_case(tmp_path, run={"steps": 3000, "check_every": 100},
                     output={"dir": str(tmp_path / "out"), "every": 100, "checkpoint_every": None, "vtk": True})
    ref = reference(path, tmp_path)
    out = tmp_path / "out"
    job = subprocess.Popen([*mpirun_command(), "-n", "3", sys.executable, "-m", "solver", "run", str(path), "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(), cwd=ROOT)
    deadline = time.time() + 120
    while not (out / "vtk" / "u_00000000.pvti").exists():  # the first snapshot: the loop is starting
        assert job.poll() is None and time.time() < deadline, job.communicate()
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 75, err
    assert "stopped by SIGTERM at step" in err and err.count("error:") == 1, err
    with h5py.File(out / "checkpoint.h5", "r") as f:
        stopped = int(f.attrs["step"])
    assert 0 < stopped < 3000 and stopped % 10 == 0  # the ranks agree at a poll (every 10 steps)
    res = mpirun(2, ["run", str(path), "-q", "--restart", str(out)])
    assert res.returncode == 0, res.stderr
    assert_same_output(out, ref)
    assert segments(out) == [(0, 0, stopped), (1, stopped, 3000)]


@needs_mpi
@pytest.mark.mpi
def test_a_full_disk_stops_every_rank_with_exit_5_and_the_checkpoint_restarts_bitwise(tmp_path):
    """A real write failure: every file the ranks write is limited to 140 kB (RLIMIT_FSIZE), so fields.h5
    (13 kB per snapshot) hits it after a few snapshots, as a full disk would."""
    path = write_case(tmp_path / "d.yaml", grid={"nx": 40, "ny": 40}, initial={"kind": "random", "seed": 3},
                      boundary={"top": 1.0, "left": 0.5}, run={"steps": 100, "check_every": 10},
                      output={"dir": str(tmp_path / "out"), "every": 10, "checkpoint_every": 20, "vtk": True})
    ref = reference(path, tmp_path)
    res = mpi_script(3, "output_diskfull.py", 140_000, "run", path, "-q")
    out = tmp_path / "out"
    assert res.returncode == 5, res.stdout + res.stderr
    line = res.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert f"cannot write {out / 'fields.h5'} (File too large)" in line
    with h5py.File(out / "checkpoint.h5", "r") as f:
        step = int(f.attrs["step"])
    assert f"the last checkpoint, {out / 'checkpoint.h5'} (step {step}), is intact" in line
    steps = series(out)[0]  # still readable, with every snapshot written before the failure
    assert steps == list(range(0, steps[-1] + 1, 10)) and steps[-1] >= step
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]
    Run(load_case(path), options=Options(ceiling=False, quiet=True, restart=str(out))).execute()
    assert_same_output(out, ref)
