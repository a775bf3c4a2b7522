"""`stencil run --restart DIR` alone: the checkpoint remembers the resolved case with its overrides and
the output directory; the hint printed after SIGTERM is a command that works as printed; --steps extends."""

import re
import shlex
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
from conftest import ROOT, clean_env, stencil, write_case


def final_field(out):
    with h5py.File(out / "fields.h5", "r") as f:
        return list(f["step"][...]), f["u"][-1]


def test_the_sigterm_hint_continues_a_run_with_overrides_bitwise(tmp_path):
    case = write_case(tmp_path / "c.yaml", grid={"nx": 128, "ny": 96}, initial={"kind": "random", "seed": 1},
                      run={"steps": 10, "check_every": 100}, output={"every": 5000, "vtk": False})
    out, ref = tmp_path / "elsewhere", tmp_path / "ref"  # both the steps and the directory are overrides
    over = ["--steps", "20000", "--backend", "numpy"]
    assert stencil(["run", str(case), "-q", "-o", str(ref), *over]).returncode == 0
    job = subprocess.Popen([sys.executable, "-m", "solver", "run", str(case), "-q", "-o", str(out), *over],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(), cwd=ROOT)
    deadline = time.time() + 120
    while not (out / "fields.h5").exists():
        assert job.poll() is None and time.time() < deadline, job.communicate()
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 75, err
    hint = re.search(r"`stencil (run [^`]*)`", err).group(1)
    assert hint == f"run --restart {out}"
    res = stencil(shlex.split(hint) + ["-q"], timeout=300)
    assert res.returncode == 0, res.stderr
    steps, u = final_field(out)
    ref_steps, u_ref = final_field(ref)
    assert steps == ref_steps and steps[-1] == 20000 and np.array_equal(u, u_ref)


def test_restart_alone_with_steps_extends_the_run(tmp_path):
    case = write_case(tmp_path / "e.yaml", grid={"nx": 40, "ny": 30}, run={"steps": 40, "check_every": 10},
                      output={"every": 20, "checkpoint_every": 20, "vtk": False})
    out = tmp_path / "out_e"
    assert stencil(["run", str(case), "-q"]).returncode == 0
    res = stencil(["run", "--restart", str(out), "--steps", "80", "-q"])
    assert res.returncode == 0, res.stderr
    full = write_case(tmp_path / "f.yaml", grid={"nx": 40, "ny": 30}, run={"steps": 80, "check_every": 10},
                      output={"every": 20, "vtk": False})
    assert stencil(["run", str(full), "-q"]).returncode == 0
    steps, u = final_field(out)
    assert steps == [0, 20, 40, 60, 80] and np.array_equal(u, final_field(tmp_path / "out_f")[1])


def test_no_case_and_no_restart_is_one_line_exit_2():
    res = stencil(["run"])
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "case: give a case file" in res.stderr and "--restart DIR" in res.stderr
