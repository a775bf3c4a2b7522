"""The output directory under real processes: validated before anything is written, claimed for the
run's life (a lock naming its holder; the lock of a killed run taken over), cleared with --overwrite
only of what stencil wrote, never through a symbolic link, never the run's own input, never the
working directory."""

import json
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
from conftest import ROOT, clean_env, stencil, write_case


def one_error_line(res, code=2, *needles):
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def tree(d):
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


def test_a_refused_overwrite_leaves_the_results_and_overwrite_removes_only_stencils_files(tmp_path):
    case = write_case(tmp_path / "c.yaml", output={"dir": str(tmp_path / "out"), "vtk": True, "every": 10,
                                                   "checkpoint_every": 10})
    assert stencil(["run", str(case), "-q"]).returncode == 0
    out = tmp_path / "out"
    manifest = json.loads((out / ".stencil-manifest.json").read_text())
    assert {"case.yaml", "fields.h5", "checkpoint.h5", "record.json", "vtk/u_00000020.vti"} <= set(manifest["files"])
    assert not (out / ".stencil.lock").exists()  # released at the end
    (out / "notes.txt").write_text("mine")
    (out / "vtk" / "mine.vti.txt").write_text("mine too")
    (out / ".checkpoint.tmp999999.h5").write_bytes(b"a temporary file of a killed run")
    before = tree(out)
    # every check on every rank before anything is touched: a missing initial file, then a bad thread count
    bad = write_case(tmp_path / "c.yaml", output={"dir": str(out)}, initial={"kind": "file", "path": "absent.npy"})
    one_error_line(stencil(["run", str(bad), "--overwrite"]), 2, "initial.path", "not found")
    case = write_case(tmp_path / "c.yaml", output={"dir": str(out), "vtk": False})
    one_error_line(stencil(["run", str(case), "--overwrite", "--backend", "numba", "--threads", "1000"],
                           env={"NUMBA_NUM_THREADS": "2"}), 2, "backend.threads", "numba's pool")  # the backend's own
    assert tree(out) == before
    # --overwrite: stencil's files go (VTK too: this run writes none), the user's stay
    assert stencil(["run", str(case), "-q", "--overwrite", "--steps", "5"]).returncode == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "vtk" / "mine.vti.txt").exists()
    assert not list((out / "vtk").glob("u_*")) and not (out / ".checkpoint.tmp999999.h5").exists()
    assert json.loads((out / "record.json").read_text())["case"]["run"]["steps"] == 5


def test_symlinks_inputs_and_the_working_directory_are_refused_before_anything_is_written(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    case = write_case(tmp_path / "c.yaml", output={"dir": str(out), "vtk": True})
    assert stencil(["run", str(case), "-q"]).returncode == 0
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep")
    (out / "vtk").rename(tmp_path / "old_vtk")
    (out / "vtk").symlink_to(elsewhere)
    before = tree(out)
    one_error_line(stencil(["run", str(case), "--overwrite"]), 2, f"{out / 'vtk'}", "symbolic link")
    assert tree(out) == before and [p.name for p in elsewhere.iterdir()] == ["precious.txt"]
    (out / "vtk").unlink()
    # the run's own input inside the directory that --overwrite clears
    init = write_case(tmp_path / "i.yaml", output={"dir": str(out)},
                      initial={"kind": "file", "path": str(out / "fields.h5"), "dataset": "/u"})
    before = tree(out)
    one_error_line(stencil(["run", str(init), "--overwrite"]), 2, "initial.path", "--overwrite would remove")
    assert tree(out) == before
    # never the working directory or a parent of it: name '..', -o '', -o ., -o <parent>
    work = tmp_path / "work"
    work.mkdir()
    dots = write_case(tmp_path / "d.yaml", name="..")
    data = dots.read_text().replace(f"  dir: {tmp_path / 'out_d'}\n", "")
    dots.write_text(data.replace("output:\n", "output: {}\n") if "output:\n" in data else data)
    runs = [["run", str(dots)], ["run", str(case), "-o", ""], ["run", str(case), "-o", "."],
            ["run", str(case), "-o", str(tmp_path), "--overwrite"]]
    for args in runs:
        res = subprocess.run([sys.executable, "-m", "solver", *args], capture_output=True, text=True,
                             cwd=work, env=clean_env(PYTHONPATH=str(ROOT)), timeout=120)
        one_error_line(res, 2, "name" if args[1] == str(dots) else "working directory")
    assert list(work.iterdir()) == [] and (out / "fields.h5").exists()


def wait_for_lock(out, proc, seconds=60):
    lock = out / ".stencil.lock"
    t0 = time.time()
    while time.time() - t0 < seconds:
        if lock.exists() and lock.read_text().strip():
            holder = json.loads(lock.read_text())
            if (out / "fields.h5").exists():  # past set-up: in the time loop
                return holder
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the first run never took the lock")


def test_a_second_run_on_a_claimed_directory_is_refused_and_a_killed_runs_lock_is_taken_over(tmp_path):
    out = tmp_path / "out"
    slow = write_case(tmp_path / "slow.yaml", run={"steps": 10**7, "check_every": 1000},
                      output={"dir": str(out), "vtk": False})
    other = write_case(tmp_path / "other.yaml", output={"dir": str(out), "vtk": False})
    first = subprocess.Popen([sys.executable, "-m", "solver", "run", str(slow), "-q"], cwd=ROOT,
                             env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        holder = wait_for_lock(out, first)
        first.send_signal(signal.SIGSTOP)  # frozen in its time loop, holding the directory
        assert holder["pid"] == first.pid
        for extra in ([], ["--overwrite"]):
            line = one_error_line(stencil(["run", str(other), *extra]), 2, "is in use by the run of",
                                  f"pid {first.pid}", holder["host"])
            assert str(out) in line
        first.send_signal(signal.SIGKILL)  # dies holding the lock: the lock file stays, its flock goes
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert (out / ".stencil.lock").exists()
    res = stencil(["run", str(other), "-q", "--overwrite"])
    assert res.returncode == 0, res.stderr
    assert f"pid {first.pid}" in res.stderr and "taken over" in res.stderr
    assert json.loads((out / "record.json").read_text())["case"]["name"] == "other"
    assert not (out / ".stencil.lock").exists()


def test_initial_arrays_that_are_not_real_finite_numbers_are_refused(tmp_path):
    """Complex (would lose its imaginary part), text, empty, NaN, and an HDF5 series with no snapshot."""
    import h5py

    arrays = {"complex": np.ones((17, 23), complex), "text": np.full((17, 23), "a"),
              "nan": np.where(np.eye(17, 23) > 0, np.nan, 0.0)}
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)
    np.save(tmp_path / "empty.npy", np.zeros((0,)))
    (tmp_path / "zero_bytes.npy").write_bytes(b"")
    with h5py.File(tmp_path / "series.h5", "w") as f:
        f.create_dataset("u", shape=(0, 17, 23), maxshape=(None, 17, 23), dtype="f8")
    expect = {"complex": "complex128", "text": "<U1", "nan": "nan at row 0, column 0", "empty": "shape (0,)",
              "zero_bytes": "not a readable .npy", "series": "no snapshot"}
    for name, needle in expect.items():
        path = tmp_path / (f"{name}.h5" if name == "series" else f"{name}.npy")
        case = write_case(tmp_path / f"{name}.yaml", initial={"kind": "file", "path": str(path), "dataset": "/u"}
                          if name == "series" else {"kind": "file", "path": str(path)})
        one_error_line(stencil(["run", str(case)]), 2, "initial.", needle)
        assert not (tmp_path / f"out_{name}").exists()


def kill_during_a_checkpoint(case, out):
    """Run `case` and SIGKILL it once a temporary checkpoint is being written after a complete one."""
    proc = subprocess.Popen([sys.executable, "-m", "solver", "run", str(case), "-q"], cwd=ROOT, env=clean_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.time()
        while not list(out.glob(".checkpoint.tmp*.h5")) or not (out / "checkpoint.h5").exists():
            assert proc.poll() is None and time.time() - t0 < 120, proc.communicate()
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc


def test_a_temporary_checkpoint_left_by_a_kill_during_its_write_is_removed_by_the_next_run(tmp_path):
    """SIGKILL while checkpoint.h5 is being written (every step here) leaves .checkpoint.tmpPID.h5, a whole
    field; the restart into the directory removes it and continues from the last complete checkpoint."""
    out = tmp_path / "out"
    case = write_case(tmp_path / "k.yaml", grid={"nx": 512, "ny": 512}, run={"steps": 100000, "check_every": 1},
                      output={"dir": str(out), "vtk": False, "checkpoint_every": 1, "every": 100000})
    for _ in range(5):  # the kill can land just after the write it saw ended (a loaded machine): then again
        shutil.rmtree(out, ignore_errors=True)
        proc = kill_during_a_checkpoint(case, out)
        left = list(out.glob(".checkpoint.tmp*.h5"))
        if left:
            break
    assert left and left[0].name == f".checkpoint.tmp{proc.pid}.h5"
    with h5py.File(out / "checkpoint.h5") as f:
        step = int(f.attrs["step"])
    res = stencil(["run", str(case), "--restart", str(out), "--steps", str(step + 2), "-q"])
    assert res.returncode == 0, res.stderr
    assert not list(out.glob(".*.tmp*")), list(out.iterdir())


def test_two_runs_started_together_on_one_directory_one_runs_and_the_other_is_refused(tmp_path):
    out = tmp_path / "out"
    cases = [write_case(tmp_path / f"{n}.yaml", output={"dir": str(out), "vtk": False}) for n in ("one", "two")]
    procs = [subprocess.Popen([sys.executable, "-m", "solver", "run", str(c), "-q"], cwd=ROOT, env=clean_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for c in cases]
    results = [(p.wait(120), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    assert "is in use by" in refused or "already holds results" in refused, refused
    winner = json.loads((out / "record.json").read_text())["case"]["name"]
    assert f"name: {winner}\n" in (out / "case.yaml").read_text()  # one run's files, not a mix
