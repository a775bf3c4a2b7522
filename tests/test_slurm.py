"""Slurm: the job-script templates and the srun path of sweeps.

Without Slurm: shell syntax of every template; each template's own logic (rank lists, srun lines, a
failed step reported and the job's exit code) run by bash with `srun` and `stencil` replaced by
recorders that only write down their arguments; the srun command line a sweep builds; srun's status
lines kept out of a point's error; a launcher whose processes do not form one MPI job caught by the
run itself and by the sweep.

With Slurm (skipped unless `srun` is on PATH and `scontrol ping` finds a controller): a strong sweep
under real srun, and srun --mpi=none refused. docs/clusters.md says what was run on a test cluster.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, clean_env, stencil, write_case

from solver import sweep as sw

TEMPLATES = sorted((ROOT / "tools" / "slurm").glob("*.sbatch"))


def tiny_case(path: Path) -> Path:
    return write_case(path, grid={"nx": 24, "ny": 16}, run={"steps": 30, "check_every": 10},
                      backend={"name": "numba"}, verify=True)


def mpi_library() -> str:
    import mpi4py

    mpi4py.rc.initialize = mpi4py.rc.finalize = False
    from mpi4py import MPI

    return MPI.Get_library_version()


# templates -------------------------------------------------------------------------------------

def test_there_are_templates():
    assert {t.name for t in TEMPLATES} >= {"one_node.sbatch", "threads.sbatch", "multi_node.sbatch", "gpu.sbatch"}


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_template_is_valid_bash_and_writes_where_slurm_can(template):
    p = subprocess.run(["bash", "-n", str(template)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    text = template.read_text()
    # Slurm creates no directory for --output: a missing one fails the job before it starts, silently
    out = [ln.split("=", 1)[1].split()[0] for ln in text.splitlines() if ln.startswith("#SBATCH --output=")]
    assert len(out) == 1 and (ROOT / out[0]).parent.is_dir(), out
    assert "exit $rc" in text and "srun_mpi_plugin" in text


RECORDER = """#!/bin/bash
printf '%s\\n' "{name} $*" >> "$CALLS"
for f in $FAIL; do [[ "{name} $*" == *"$f"* ]] && exit 3; done
exit 0
"""


def run_template(tmp_path: Path, name: str, slurm: dict, fail: str = "", srun_mpi: str | None = "--mpi=pmi2"):
    """Run a template under bash as Slurm would (its SLURM_* variables given), with srun and stencil
    replaced by recorders; returns (exit code, the recorded calls, stderr)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for exe in ("srun", "stencil"):
        f = venv / "bin" / exe
        f.write_text(RECORDER.replace("{name}", exe))
        f.chmod(0o755)
    (venv / "bin" / "activate").write_text(f'export PATH="{venv}/bin:{Path(sys.executable).parent}:$PATH"\n')
    calls = tmp_path / "calls.txt"
    env = clean_env(VENV=str(venv), CALLS=str(calls), FAIL=fail, OUT=str(tmp_path / "out"), SLURM_JOB_ID="77",
                    **slurm)
    if srun_mpi is not None:
        env["SRUN_MPI"] = srun_mpi
    p = subprocess.run(["bash", str(ROOT / "tools" / "slurm" / name), "case.yaml"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=60)
    return p.returncode, calls.read_text().splitlines() if calls.exists() else [], p.stderr


def test_one_node_template_runs_every_step(tmp_path):
    rc, calls, err = run_template(tmp_path, "one_node.sbatch", {"SLURM_NTASKS": "6"})
    assert rc == 0, err
    srun = [c for c in calls if c.startswith("srun ")]
    assert [c.split()[2] for c in srun] == ["1", "2", "4", "6"]  # srun -n N: 1, 2, 4, ... and the node's count
    assert all("--cpu-bind=cores" in c and "--mpi=pmi2" in c and "bench bandwidth" in c for c in srun)
    sweeps = [c for c in calls if c.startswith("stencil sweep")]
    assert [c.split()[2] for c in sweeps] == ["strong", "weak"]
    assert all("--ranks 1,2,4,6" in c and "--launcher srun" in c and "--mpi=pmi2" in c for c in sweeps)
    assert sum(c.startswith("stencil report") for c in calls) == 2
    assert (tmp_path / "out").is_dir()


def test_a_failed_step_fails_the_job_after_the_others_ran(tmp_path):
    rc, calls, err = run_template(tmp_path, "one_node.sbatch", {"SLURM_NTASKS": "2"}, fail="sweep strong")
    assert rc == 3 and "step failed (exit 3): stencil sweep strong" in err
    assert any(c.startswith("stencil sweep weak") for c in calls)  # the steps after it still ran
    assert sum(c.startswith("stencil report") for c in calls) == 2


def test_multi_node_template_fills_whole_nodes(tmp_path):
    rc, calls, err = run_template(tmp_path, "multi_node.sbatch",
                                  {"SLURM_NTASKS": "12", "SLURM_NTASKS_PER_NODE": "4", "SLURM_NNODES": "3"})
    assert rc == 0, err
    srun = [c.split() for c in calls if c.startswith("srun ")]
    # srun -n N alone would spread N ranks over every node of the job: each ceiling names its nodes
    assert [(c[2], c[3]) for c in srun] == [("4", "--nodes=1"), ("8", "--nodes=2"), ("12", "--nodes=3")]
    sweeps = [c for c in calls if c.startswith("stencil sweep")]
    assert len(sweeps) == 2 and all("--ranks 4,8,12" in c and "--ntasks-per-node=4" in c for c in sweeps)


def test_threads_template_gives_the_process_its_cores(tmp_path):
    rc, calls, err = run_template(tmp_path, "threads.sbatch", {"SLURM_CPUS_PER_TASK": "8"})
    assert rc == 0, err
    assert all("--cpus-per-task=8" in c for c in calls if c.startswith("srun "))
    assert any("bench bandwidth" in c and "--threads 1,2,4,8" in c for c in calls)
    assert any(c.startswith("stencil sweep threads") and "--threads 1,2,4,8" in c for c in calls)


def test_gpu_template_gives_each_rank_one_gpu(tmp_path):
    rc, calls, err = run_template(tmp_path, "gpu.sbatch", {"SLURM_NTASKS": "4", "SLURM_CPUS_PER_TASK": "8",
                                                           "SLURM_NTASKS_PER_NODE": "4"})
    assert rc == 0, err
    assert all("--gpus-per-task=1 --gpu-bind=single:1" in c for c in calls if "srun" in c)
    assert any(c.startswith("srun -n 1 --nodes=1 ") and "bench reduction --gpu" in c for c in calls)
    assert any(c.startswith("stencil sweep strong") and "--ranks 1,2,4" in c for c in calls)


def test_template_picks_the_pmi_plugin_of_mpi4pys_mpi(tmp_path):
    pytest.importorskip("mpi4py")
    rc, calls, err = run_template(tmp_path, "one_node.sbatch", {"SLURM_NTASKS": "1"}, srun_mpi=None)
    assert rc == 0, err
    want = "--mpi=pmix" if "Open MPI" in mpi_library() else "--mpi=pmi2"
    assert calls and all(want in c for c in calls if c.startswith(("srun", "stencil sweep")))


# the sweep's srun command line -----------------------------------------------------------------

@pytest.fixture
def fake_srun(tmp_path):
    """An executable named srun: resolve_launcher only needs it to exist (nothing runs it here)."""
    f = tmp_path / "bin" / "srun"
    f.parent.mkdir()
    f.write_text("#!/bin/sh\nexit 99\n")
    f.chmod(0o755)
    return f


def settings(tmp_path, launcher, args=""):
    return sw.Settings(kind="strong", case=tiny_case(tmp_path / "c.yaml"), counts=[1, 2],
                       launcher=str(launcher), launcher_args=args)


def test_srun_gets_the_pmi_plugin_of_mpi4pys_mpi(tmp_path, fake_srun, monkeypatch):
    pytest.importorskip("mpi4py")
    monkeypatch.delenv("SLURM_MPI_TYPE", raising=False)
    lib = mpi_library()
    if "MPICH" in lib:
        assert sw.srun_mpi_plugin() == "pmi2"  # the PyPI wheel aborts under --mpi=pmix (no PMIx client)
    elif "Open MPI" in lib:
        assert sw.srun_mpi_plugin() == "pmix"
    launcher = sw.resolve_launcher(settings(tmp_path, fake_srun, "--cpu-bind=cores"))
    assert launcher == [str(fake_srun), "--cpu-bind=cores", f"--mpi={sw.srun_mpi_plugin()}"]


@pytest.mark.parametrize("args", ["--mpi=pmix", "--mpi pmix", "--cpu-bind=cores --mpi=none"])
def test_srun_keeps_the_users_pmi_plugin(tmp_path, fake_srun, monkeypatch, args):
    monkeypatch.delenv("SLURM_MPI_TYPE", raising=False)
    launcher = sw.resolve_launcher(settings(tmp_path, fake_srun, args))
    assert launcher[1:] == args.split() and sum(a.startswith("--mpi") for a in launcher) == 1


def test_srun_keeps_slurm_mpi_type(tmp_path, fake_srun, monkeypatch):
    monkeypatch.setenv("SLURM_MPI_TYPE", "pmix")  # srun reads it as --mpi
    assert sw.resolve_launcher(settings(tmp_path, fake_srun)) == [str(fake_srun)]


@pytest.mark.parametrize("args, env, nodes", [
    ("--ntasks-per-node=4", {}, ["--nodes=1", "--nodes=1", "--nodes=2", "--nodes=3"]),
    ("--ntasks-per-node 4", {}, ["--nodes=1", "--nodes=1", "--nodes=2", "--nodes=3"]),
    ("", {"SLURM_NTASKS_PER_NODE": "4"}, ["--nodes=1", "--nodes=1", "--nodes=2", "--nodes=3"]),
    ("--ntasks-per-node=2", {"SLURM_NTASKS_PER_NODE": "4"}, ["--nodes=1", "--nodes=2", "--nodes=4", "--nodes=6"]),
    ("-N 2", {"SLURM_NTASKS_PER_NODE": "4"}, [None] * 4),
    ("--nodes=2 --ntasks-per-node=4", {}, [None] * 4),
    ("", {}, [None] * 4),
])
def test_srun_points_fill_whole_nodes(tmp_path, fake_srun, monkeypatch, args, env, nodes):
    """Each point is `srun -n N --nodes=ceil(N / ranks per node) ARGS python -m solver run CASE ...`."""
    monkeypatch.delenv("SLURM_NTASKS_PER_NODE", raising=False)
    monkeypatch.setenv("SLURM_MPI_TYPE", "pmi2")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = settings(tmp_path, fake_srun, args)
    launcher = sw.resolve_launcher(s)
    for n, want in zip([1, 4, 8, 12], nodes):
        p = sw.Point(f"r{n}", n, 1, tmp_path / "c.yaml", [tmp_path / "o"])
        cmd = sw.command(s, launcher, p, tmp_path / "o")
        want = [str(fake_srun), "-n", str(n), *([want] if want else []), *launcher[1:],
                sys.executable, "-m", "solver", "run", str(p.case_file)]
        assert cmd[:len(want)] == want and "--no-mpi" not in cmd


def test_mpirun_points_get_no_nodes(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "4")
    assert sw.srun_nodes(["/usr/bin/mpirun", "--bind-to", "core"], 8) == []


def test_point_error_is_what_the_ranks_said_not_srun_status():
    err = ("Abort(1721616): Fatal error in internal_Init_thread: Internal MPI error!, error stack:\n"
           "MPIR_pmi_init(225)..............: \n"
           "check_MPIR_CVAR_PMI_VERSION(167):  Runtime environment uses unsupported PMI version PMIx. Aborting.\n"
           "srun: error: node7: tasks 0-1: Exited with exit code 16\n")
    assert sw.failure(err) == ("check_MPIR_CVAR_PMI_VERSION(167):  Runtime environment uses unsupported PMI "
                               "version PMIx. Aborting.")
    assert sw.failure("error: grid.nx: bad; fix\nsrun: error: n1: task 1: Exited with exit code 2\n") == \
        "error: grid.nx: bad; fix"
    assert sw.failure("srun: error: n1: task 0: Exited with exit code 9\n") == \
        "srun: error: n1: task 0: Exited with exit code 9"


# processes that do not form one MPI job ----------------------------------------------------------

def test_launched_tasks_reads_the_innermost_launcher(monkeypatch):
    from solver.parallel.comm import launched_tasks

    for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(v, raising=False)
    assert launched_tasks() == 1
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")  # mpirun inside a job: hydra's proxies are one srun step
    monkeypatch.setenv("PMI_SIZE", "4")
    assert launched_tasks() == 4
    monkeypatch.delenv("PMI_SIZE")
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "3")
    assert launched_tasks() == 3


def test_run_refuses_srun_tasks_that_are_not_one_mpi_job(tmp_path):
    """What `srun -n 2 --mpi=none stencil run` gives each process: the step's task count, no PMI variables.
    (Seen under real srun too: docs/clusters.md.)"""
    case = tiny_case(tmp_path / "c.yaml")
    out = tmp_path / "out"
    p = stencil(["run", str(case), "-o", str(out), "--quiet"], env={"SLURM_STEP_NUM_TASKS": "2"})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--mpi=pmi2" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and not out.exists()
    p = stencil(["run", str(case), "-o", str(out), "--quiet", "--no-mpi"], env={"SLURM_STEP_NUM_TASKS": "2"})
    assert p.returncode == 0 and (out / "record.json").exists(), p.stderr


def test_sweep_fails_a_point_whose_record_has_fewer_ranks(tmp_path):
    """A launcher that starts the run as one process whatever -n says: the record shows 1 rank where 2
    were asked for, and the point fails instead of reporting a 1-rank run as 2 ranks."""
    fake = tmp_path / "one-process-launcher"
    fake.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')  # drops "-n N"
    fake.chmod(0o755)
    out = tmp_path / "sweep"
    p = stencil(["sweep", "strong", str(tiny_case(tmp_path / "c.yaml")), "--ranks", "1,2", "--launcher", str(fake),
                 "-o", str(out)], env={"STENCIL_CACHE_DIR": str(tmp_path / "cache"), "STENCIL_BANDWIDTH_MIB": "64"})
    assert p.returncode == 1, p.stderr
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    assert rows[0]["status"] == "ok" and rows[0]["ranks"] == 1
    assert rows[1]["status"].startswith("failed (exit 1): 2 processes were started but the record shows 1 rank")


# with a running Slurm ----------------------------------------------------------------------------

def slurm_up() -> bool:
    if shutil.which("srun") is None or shutil.which("scontrol") is None:
        return False
    try:
        return subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15).stdout.count("UP") > 0
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_slurm = pytest.mark.skipif(not slurm_up(), reason="no Slurm here (srun and a controller for scontrol ping)")


@needs_slurm
def test_strong_sweep_under_real_srun(tmp_path):
    pytest.importorskip("mpi4py")
    out = tmp_path / "sweep"
    env = clean_env(STENCIL_CACHE_DIR=str(tmp_path / "cache"), STENCIL_BANDWIDTH_MIB="64")
    env.pop("SLURM_MPI_TYPE", None)
    p = subprocess.run([sys.executable, "-m", "solver", "sweep", "strong", str(tiny_case(tmp_path / "c.yaml")),
                        "--ranks", "1,2", "--launcher", "srun", "--launcher-args", "--cpu-bind=cores", "-o", str(out)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((out / "sweep.json").read_text())
    assert "--mpi=pmi" in res["launcher"]
    for r in res["rows"]:
        rec = json.loads((out / r["record"]).read_text())
        assert r["status"] == "ok" and r["verified"] is True and rec["resources"]["ranks"] == r["ranks"]


@needs_slurm
def test_srun_without_a_pmi_plugin_is_refused(tmp_path):
    out = tmp_path / "out"
    env = clean_env()
    env.pop("SLURM_MPI_TYPE", None)
    p = subprocess.run(["srun", "-n", "2", "--mpi=none", sys.executable, "-m", "solver", "run",
                        str(tiny_case(tmp_path / "c.yaml")), "-o", str(out), "--quiet"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "do not form one MPI job" in p.stderr and not out.exists(), p.stderr

