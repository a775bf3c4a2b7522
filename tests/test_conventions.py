"""Command-line conventions (issue 12, items 7 and 8): --version, thread defaults, help that wraps, one-line
usage errors, nx x ny in headers, the schema, the backends list, the sweep's terminal table."""

import json

import pytest
from conftest import stencil, write_case

from solver import __version__
from solver.parallel.comm import default_threads


def test_version():
    res = stencil(["--version"])
    assert res.returncode == 0 and res.stdout.startswith(f"stencil {__version__}")


@pytest.mark.parametrize("env, expected", [({}, 3), ({"OMP_NUM_THREADS": "2"}, 2), ({"NUMBA_NUM_THREADS": "1"}, 1),
                                           ({"OMP_NUM_THREADS": "2", "NUMBA_NUM_THREADS": "5"}, 2),
                                           ({"OMP_NUM_THREADS": "4,2"}, 4),
                                           ({"OMP_NUM_THREADS": "8", "NUMBA_NUM_THREADS": "2"}, 2)])
def test_default_threads_order(env, expected):
    assert default_threads([{0, 1, 2}], 0, env) == expected  # the cores (3) come last


def test_a_bad_thread_variable_is_a_one_line_error():
    from solver.core.errors import InputError

    with pytest.raises(InputError, match="OMP_NUM_THREADS: 'many' is not a positive whole number"):
        default_threads([{0}], 0, {"OMP_NUM_THREADS": "many"})


def test_help_wraps_option_names_at_80_columns():
    res = stencil(["sweep", "strong", "--help"], env={"COLUMNS": "80"})
    assert res.returncode == 0
    for name in ("--threads-per-rank", "--launcher-args", "--decomposition", "--verify / --no-verify", "--timeout"):
        assert name in res.stdout, name
    assert max(len(line) for line in res.stdout.splitlines()) <= 80 and "…" not in res.stdout


def test_a_missing_argument_is_one_clean_line():
    res = stencil(["validate"])
    assert res.returncode == 2
    assert res.stderr == "stencil validate: Missing argument 'case'; see `stencil validate --help`\n"


def test_headers_say_nx_x_ny_and_a_numba_pool_of_one_runs_when_no_threads_were_asked(tmp_path):
    case = write_case(tmp_path / "h.yaml", grid={"nx": 200, "ny": 120}, backend={"name": "numba"}, run={"steps": 4})
    res = stencil(["run", str(case), "-q"], env={"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": ""})
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "out_h" / "record.json").read_text())["resources"]["threads_per_rank"] == 1
    assert "nx x ny = 200 x 120" in res.stdout and "120x200" not in res.stdout
    assert "nx x ny = 200 x 120 interior points" in (tmp_path / "out_h" / "record.md").read_text()
    plan = stencil(["validate", str(case), "--ranks", "2"])
    assert "largest block nx x ny = 200 x 60" in plan.stdout


def test_schema_every_property_described_and_name_optional():
    res = stencil(["schema"])
    schema = json.loads(res.stdout)
    assert schema["required"] == ["grid"]
    sections = [("case", schema), *schema["$defs"].items()]
    missing = [f"{n}.{k}" for n, d in sections for k, p in d.get("properties", {}).items() if not p.get("description")]
    assert missing == []


def test_backends_keep_the_brackets_of_extras():
    from solver.backends import registry

    res = stencil(["backends"], env={"COLUMNS": "200"})
    reason = registry()["cupy"].unavailable()
    if reason and "[gpu]" in reason:
        assert "[gpu]" in res.stdout
    assert "pip install -e .`" not in res.stdout


def test_sweep_verified_column():
    from solver.sweep import verified

    assert (verified(None), verified(True), verified(False)) == ("", "PASS", "FAIL")
