"""Input limits: hostile or mistaken case files are exit 2 with one short line, never a traceback.

The checks are those of solver.case (load_case, what `stencil run` calls first); two cases run as a
user runs them, in a fresh process, where a traceback would show (RecursionError, ZeroDivisionError)."""

import pytest
from conftest import stencil, write_case

from solver.case import QUOTE_CHARS, load_case
from solver.core.errors import InputError

BASE = "name: t\ngrid: {nx: 23, ny: 17}\n"

CASES = {  # label: (case file text, what the one-line error must say)
    "duplicate key": (BASE + "grid: {nx: 3, ny: 3}\n", ["line 3", "key 'grid' is given twice", "line 2"]),
    "duplicate nested key": (BASE + "run: {steps: 3, steps: 4}\n", ["key 'steps' is given twice"]),
    "deep nesting": (BASE + "x: " + "[" * 20000 + "]" * 20000 + "\n", ["line 3"]),
    "nesting past the limit": (BASE + "x: " + "[" * 20 + "]" * 20 + "\n", ["nested more than 16 levels"]),
    "billion laughs": (BASE + "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, n in zip("abcdefgh", "bcdefghi")),
        ["line 6", "aliases (*) add more than 10000 nodes"]),
    "alias nesting past the limit": (BASE + "x: &x " + "[" * 9 + "]" * 9 + "\ny: [[[[[[[[*x]]]]]]]]\n",
                                     ["alias *x", "more than 16 levels"]),
    "alias in its own anchor": (BASE + "x: &x [1, *x]\n", ["alias *x", "a cycle"]),
    "undefined alias": (BASE + "x: *nowhere\n", ["alias *nowhere", "undefined anchor"]),
    "long value": (BASE + "output: {dir: " + "d" * 5000 + "}\n", ["5000 characters", "at most 4096"]),
    "underflowing spacing": (BASE.replace("ny: 17", "ny: 17, lx: 1.0e-200"), ["grid.lx", ">= 1e-100"]),
    "unbalanced spacings": (BASE.replace("ny: 17", "ny: 17, lx: 1.0e-90, ly: 1.0e+90"), ["grid", "weights"]),
    "infinite length": (BASE.replace("ny: 17", "ny: 17, lx: .inf"), ["grid.lx", "finite"]),
    "nan alpha": (BASE + "physics: {alpha: .nan}\n", ["physics.alpha", "finite"]),
    "tiny dt": (BASE + "physics: {dt: 1.0e-300}\n", ["physics.dt", ">= 1e-100"]),
    "exponent without a dot (YAML 1.2 float)": (BASE.replace("ny: 17", "ny: 17, lx: 1e-200"), ["grid.lx", "1e-200"]),
    "negative seed": (BASE + "initial: {kind: random, seed: -1}\n", ["initial.seed", ">= 0"]),
    "huge seed": (BASE + f"initial: {{kind: random, seed: {2**70}}}\n", ["initial.seed"]),
    "infinite random range": (BASE + "initial: {kind: random, low: -1.0e+308, high: 1.0e+308}\n",
                              ["initial.high", "too wide"]),
    "infinite boundary": (BASE + "boundary: {left: -.inf}\n", ["boundary.left", "finite"]),
    "value beyond float32": (BASE + "boundary: {top: 1.0e+300}\nnumerics: {dtype: float32}\n",
                             ["boundary.top", "float32"]),
    "steps beyond int64": (BASE + f"run: {{steps: {2**64}}}\n", ["run.steps"]),
    "name '..'": ("name: ..\ngrid: {nx: 23, ny: 17}\n", ["name", "directory itself or its parent"]),
}


@pytest.mark.parametrize("label", CASES)
def test_limits(tmp_path, label):
    text, needles = CASES[label]
    path = tmp_path / "case.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_case(path)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and len(message) < 400, message
    for n in needles:
        assert n in message, (n, message)


def test_errors_quote_at_most_about_80_characters_of_a_value(tmp_path):
    path = write_case(tmp_path / "c.yaml", backend={"name": "x" * 4000})
    with pytest.raises(InputError) as err:
        load_case(path)
    assert "x" * QUOTE_CHARS not in str(err.value) and "4002 characters" in str(err.value)


def test_a_grid_whose_size_overflows_int64_is_refused_by_the_memory_check(tmp_path):
    case = write_case(tmp_path / "c.yaml", grid={"nx": 2**32 - 2, "ny": 2**32 - 2})
    res = stencil(["run", str(case)])
    assert res.returncode == 2 and "GiB per process" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_deep_nesting_and_a_device_as_the_case_file_in_a_fresh_process(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text(CASES["deep nesting"][0])
    for path, needle in ((deep, "deep.yaml"), ("/dev/null", "not a regular file")):
        res = stencil(["run", str(path)])
        assert res.returncode == 2 and needle in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "directory" not in stencil(["run", "/dev/null"]).stderr


def test_a_long_option_value_is_refused_and_quoted_short(tmp_path):
    path = write_case(tmp_path / "c.yaml")
    with pytest.raises(InputError) as err:
        load_case(path, {"--output": "o" * 100_000})
    message = str(err.value)
    assert "--output" in message and "at most 4096 characters" in message and len(message) < 300, message


def test_a_case_written_by_yaml_safe_dump_with_a_shared_mapping_loads(tmp_path):
    """PyYAML writes a mapping used twice as an anchor and an alias: such a file loads, and means the same."""
    import yaml

    periodic = {"kind": "periodic"}
    data = {"name": "shared", "grid": {"nx": 23, "ny": 17}, "run": {"steps": 1000},
            "boundary": {"left": periodic, "right": periodic, "top": 1.0, "bottom": 0.0}}
    text = yaml.safe_dump(data)
    assert "&id001" in text and "*id001" in text
    path = tmp_path / "shared.yaml"
    path.write_text(text)
    case = load_case(path)
    assert case.boundary.left.kind == case.boundary.right.kind == "periodic"
    assert case.boundary.top.value == 1.0


def test_a_billion_laughs_exits_2_in_a_fresh_process_and_writes_nothing(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(CASES["billion laughs"][0] + f"output: {{dir: {tmp_path / 'out'}}}\n")
    res = stencil(["run", str(path)])
    assert res.returncode == 2 and "more than 10000 nodes" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
