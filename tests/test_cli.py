"""The CLI through typer's test runner (in-process) and, for exit codes, as a real subprocess."""

import json

import yaml
from conftest import stencil, write_case
from typer.testing import CliRunner

from solver.cli import app

runner = CliRunner()


def test_validate_prints_the_resolved_case():
    res = runner.invoke(app, ["validate", "cases/heat_4096.yaml", "--ranks", "8"])
    assert res.exit_code == 0, res.output
    for text in ("stable limit", "weights wc, wx, wy", "8 x 1 (rows)", "memory per process", "bytes per step"):
        assert text in res.output


def test_backends_lists_every_backend_with_availability():
    res = runner.invoke(app, ["backends"])
    assert res.exit_code == 0
    for name in ("numpy", "numba", "cupy"):
        assert name in res.output
    assert "yes" in res.output


def test_schema_is_json_schema_of_the_case():
    res = runner.invoke(app, ["schema"])
    schema = json.loads(res.output)
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) >= {"grid", "physics", "initial", "boundary", "run", "numerics", "backend",
                                         "parallel", "output"}


def test_info_names_cpu_cores_and_libraries():
    res = runner.invoke(app, ["info"])
    assert res.exit_code == 0
    for text in ("cpu", "cores", "numpy", "numba"):
        assert text in res.output


def test_run_with_overrides_writes_a_verified_record(tmp_path):
    case = write_case(tmp_path / "c.yaml", initial={"kind": "sine"}, grid={"nx": 21, "ny": 13})
    out = tmp_path / "elsewhere"
    res = runner.invoke(app, ["run", str(case), "--backend", "numba", "--threads", "1", "--steps", "30",
                              "--dtype", "float32", "--output", str(out), "--verify", "--quiet"])
    assert res.exit_code == 0, res.output
    rec = json.loads((out / "record.json").read_text())
    assert rec["case"]["backend"] == {"name": "numba", "threads": 1, "time_tile": None, "kernel": None, "block": None}
    assert rec["run"]["steps"] == 30 and rec["input"]["dtype"] == "float32"
    assert rec["correctness"]["passed"] is True
    resolved = yaml.safe_load((out / "case.yaml").read_text())
    assert resolved["run"]["steps"] == 30 and resolved["physics"]["dt"] > 0
    assert "PASS" in res.output and "MLUP/s" in res.output


def test_verification_failure_exits_3(tmp_path):
    """A tolerance nobody can meet (time_tile plays no part): exit 3 and the record says FAIL."""
    case = write_case(tmp_path / "c.yaml", initial={"kind": "sine"}, run={"steps": 10, "check_every": 5})
    res = stencil(["run", str(case), "--verify", "--quiet"], env={"STENCIL_EXACT_TOLERANCE_SCALE": "0"})
    assert res.returncode == 3, res.stderr
    assert "verification failed" in res.stderr
    rec = json.loads((tmp_path / "out_c" / "record.json").read_text())
    assert rec["correctness"]["passed"] is False


def test_help_and_usage_errors():
    assert stencil(["--help"]).returncode == 0
    res = stencil(["run", "cases/quickstart.yaml", "--stepz", "3"])
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "--stepz" in res.stderr and "--steps" in res.stderr


def test_bench_tune_stores_the_fastest_time_tile_and_runs_take_it(tmp_path):
    """`stencil bench --tune` measures time tiles x cache tiles and stores the fastest; a run with
    backend.time_tile null then uses it (and says so); a case's own time_tile wins."""
    env = {"STENCIL_CACHE_DIR": str(tmp_path / "cache")}
    res = stencil(["bench", "--tune", "--size", "48", "--repeats", "1", "--steps", "8", "--threads", "1",
                   "--json", str(tmp_path / "t.json")], env=env)
    assert res.returncode == 0, res.stderr
    best = json.loads((tmp_path / "t.json").read_text())["best"]
    assert best["time_tile"] in {r["time_tile"] for r in json.loads((tmp_path / "t.json").read_text())["results"]}
    for tile, source in ((None, "tuned"), (1, "case")):
        backend = {"name": "numba", "threads": 1, "time_tile": tile}
        case = write_case(tmp_path / f"c{tile}.yaml", backend=backend, run={"steps": 30, "check_every": 10})
        assert stencil(["run", str(case), "-q"], env=env).returncode == 0
        dev = json.loads((tmp_path / f"out_c{tile}" / "record.json").read_text())["resources"]["devices"][0]
        assert dev["time_tile_source"].startswith(source)
        assert dev["time_tile"] == (best["time_tile"] if tile is None else 1)


def _commands(group, path=("stencil",)):
    yield path, group
    for name, cmd in getattr(group, "commands", {}).items():
        yield from _commands(cmd, (*path, name))


DANGLING = {"the", "a", "an", "of", "to", "with", "and", "or", "for", "in", "on", "by", "its", "their", "from"}


def test_every_help_text_is_a_whole_phrase():
    """No option or argument help stops mid-phrase (`stencil run --help` once ended "the checkpoint's")."""
    import typer

    from solver.cli import app

    cut = []
    for path, cmd in _commands(typer.main.get_command(app)):
        for p in cmd.params:
            text = (getattr(p, "help", None) or "").strip()
            last = text.rstrip(".)").split()[-1].lower() if text else ""
            if last in DANGLING or last.endswith("'s"):
                cut.append(f"{' '.join(path)} {p.name}: {text!r}")
    assert not cut, cut


def test_run_help_shows_the_case_argument_whole():
    res = stencil(["run", "--help"], env={"COLUMNS": "80"})
    assert res.returncode == 0
    assert "continue with the case saved in the checkpoint" in " ".join(res.stdout.split())
