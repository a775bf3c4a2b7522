"""The scaling model's measured path under a real mpirun: the probe and its cache, `stencil model`, a sweep
with predictions beside its points, `stencil model --validate`, the report's model chart, and the
schedule the model replays checked against the solver's own record."""

import csv
import json
import shlex
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env, mpirun_command, needs_mpi, stencil, write_case

pytestmark = [needs_mpi, pytest.mark.mpi]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One cache for the module: the model's inputs are measured once and reused."""
    return {"STENCIL_CACHE_DIR": str(tmp_path_factory.getbasetemp() / "model-cache"), "STENCIL_BANDWIDTH_MIB": "64"}


def launcher() -> list[str]:
    exe, *flags = mpirun_command()
    return ["--launcher", exe, "--launcher-args", shlex.join(flags)]


def small_case(tmp_path, name="m", **kw):
    sections = {"grid": {"nx": 256, "ny": 128}, "run": {"steps": 60, "check_every": 20}, "backend": {"name": "numba"},
                "output": {"dir": str(tmp_path / f"out_{name}"), "every": None, "vtk": False}, **kw}
    return write_case(tmp_path / f"{name}.yaml", **sections)


def probe(env, tmp_path, *args):
    cmd = [*mpirun_command(), "-n", "2", sys.executable, "-m", "solver.bench.model_probe", "--json",
           str(tmp_path / "p.json"), "--dtype", "float64", "--seconds", "0.02", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=clean_env(**env), cwd=ROOT)
    assert res.returncode == 0, res.stderr
    return json.loads((tmp_path / "p.json").read_text())


def test_the_probe_measures_what_is_missing_and_caches_it(env, tmp_path):
    first = probe(env, tmp_path, "--points", "1:32x256:1:serial,2:32x256:1:halo,2:32x256:4:halo", "--shapes", "")
    assert first["measured_now"]["kernel"] == 3 and first["measured_now"]["messages"]
    e = first["entry"]
    pts = {(p["occupancy"], p["k"], p["pattern"]): p for p in e["kernel"]}
    assert len(pts[(2, 4, "halo")]["tile_seconds"]) == 2  # one series per busy rank
    assert all(t > 0 for s in pts[(2, 1, "halo")]["tile_seconds"] for t in s)
    m = e["messages"]
    assert [n for n, _ in m["allreduce"]] == [2] and m["pingpong"]["intra"] and m["exchange"]
    assert m["pingpong"]["inter"] == []  # one node
    again = probe(env, tmp_path, "--points", "2:32x256:4:halo", "--shapes", "")
    assert again["measured_now"] == {"kernel": 0, "messages": False, "gpu": 0}


def test_stencil_model_states_what_was_measured_and_what_is_a_preset(env, tmp_path):
    case = small_case(tmp_path)
    res = stencil(["model", str(case), "--ranks", "2", *launcher(), "--json", str(tmp_path / "m.json")], env=env,
                  timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads((tmp_path / "m.json").read_text())
    assert out["seconds_per_step"] > 0 and set(out["parts"]) == {"compute", "halo", "waiting", "collective"}
    assert sum(out["parts"].values()) == pytest.approx(out["seconds_per_step"], rel=1e-6)
    assert "measured: kernel:" in res.stdout and "one node: no network" in res.stdout
    far = stencil(["model", str(case), "--nodes", "64"], env=env, timeout=300)  # the cached inputs, a preset network
    assert far.returncode == 0, far.stderr
    assert "infiniband-hdr (preset (the default" in far.stdout and "128 rank(s) on 64 node(s) x 2 per node" in far.stdout
    nb = stencil(["model", str(case), "--nodes", "64", "--network", "ethernet-10g"], env=env)
    assert "ethernet-10g (preset)" in nb.stdout


def test_a_sweep_predicts_every_point_and_validate_reports_the_error(env, tmp_path):
    case = small_case(tmp_path, "s")
    out = tmp_path / "sweep"
    res = stencil(["sweep", "strong", str(case), "--ranks", "1,2", "-o", str(out), *launcher()], env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(open(out / "sweep.csv")))
    for r in rows:
        pred, meas = float(r["predicted_seconds_per_step"]), float(r["seconds_per_step"])
        assert pred > 0 and float(r["model_error"]) == pytest.approx(pred / meas - 1)
        parts = sum(float(r[f"predicted_{k}"]) for k in ("compute", "halo", "waiting", "collective"))
        assert parts == pytest.approx(pred, rel=1e-6)
    md = (out / "sweep.md").read_text()
    assert "## Model" in md and "model error (predicted / measured - 1) over 2 point(s)" in md
    assert "model ms" in md.splitlines()[8]
    val = stencil(["model", "--validate", str(out)], env=env)
    assert val.returncode == 0, val.stderr
    assert "median |error|" in val.stdout and len([ln for ln in val.stdout.splitlines() if ln.startswith("    ")]) == 2
    rep = stencil(["report", str(out)], env=env, timeout=300)
    assert rep.returncode == 0, rep.stderr
    assert (out / "model.png").exists() and "predicted" in (out / "report.md").read_text()
    no = stencil(["model", "--validate", str(tmp_path)], env=env)
    assert no.returncode == 2 and "sweep.json" in no.stderr


def test_the_replayed_schedule_sends_the_messages_the_solver_sent(env, tmp_path):
    """schedule.messages_per_step against the record of a real deep-halo run (tile 4, checks every 20)."""
    from solver.model import schedule
    from solver.model.problem import Problem

    case = small_case(tmp_path, "d", backend={"name": "numba", "time_tile": 4})
    res = subprocess.run([*mpirun_command(), "-n", "2", sys.executable, "-m", "solver", "run", str(case), "-q"],
                         capture_output=True, text=True, timeout=180, env=clean_env(**env), cwd=ROOT)
    assert res.returncode == 0, res.stderr
    rec = json.loads((tmp_path / "out_d" / "record.json").read_text())
    problem = Problem.from_case(rec["case"])
    expected = 2 * schedule.messages_per_step(problem, rec["resources"]["halo_depth"], sides=1)
    assert rec["resources"]["messages_per_step"] == pytest.approx(expected)


def test_a_fresh_clone_predicts_the_main_job_on_1024_nodes(tmp_path):
    """The issue's acceptance line: an empty cache, `stencil model cases/heat_4096.yaml --nodes 1024`; the inputs
    are measured (one probe launch), then taken from the cache; the output says which came from where."""
    env = {"STENCIL_CACHE_DIR": str(tmp_path / "fresh-cache")}
    first = stencil(["model", "cases/heat_4096.yaml", "--nodes", "1024"], env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "measuring the model's inputs" in first.stdout and "measured now" in first.stdout
    again = stencil(["model", "cases/heat_4096.yaml", "--nodes", "1024"], env=env, timeout=120)
    assert again.returncode == 0 and "measuring" not in again.stdout
    assert "measured: kernel:" in again.stdout and "(cached;" in again.stdout
    assert "infiniband-hdr (preset (the default; --network to choose))" in again.stdout
    assert "on 1024 node(s)" in again.stdout


def test_a_bad_network_stops_a_sweep_before_any_point(tmp_path, env):
    res = stencil(["sweep", "strong", str(small_case(tmp_path)), "--ranks", "1", "--network", "nosuch",
                   "-o", str(tmp_path / "sw"), *launcher()], env=env)
    assert res.returncode == 2 and "--network" in res.stderr and not (tmp_path / "sw" / "r1").exists()
