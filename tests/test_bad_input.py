"""Bad input: exit 2, one line naming the file, the field and the fix, no traceback, nothing written."""

import os

import pytest
from conftest import stencil, write_case


def listing(path):
    return sorted(p.relative_to(path) for p in path.rglob("*"))


def check(res, *needles):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    for n in needles:
        assert n in lines[0], (n, lines[0])


CASES = {
    "unknown field": ({"grid": {"nx": 20, "ny": 20, "nxx": 3}}, ["grid.nxx", "did you mean 'nx'"]),
    "misspelt section": ({"phisics": {"alpha": 1.0}}, ["phisics", "did you mean 'physics'"]),
    "wrong type": ({"grid": {"nx": "many", "ny": 20}}, ["grid.nx", "integer", "whole number"]),
    "grid too small": ({"grid": {"nx": 2, "ny": 20}}, ["grid.nx", ">= 3"]),
    "unstable dt": ({"physics": {"dt": 1.0}}, ["physics.dt", "stability limit", "dt <= 0.000555556"]),
    "unknown backend": ({"backend": {"name": "fortran"}}, ["backend.name", "'numpy', 'numba' or 'cupy'"]),
    "unknown initial kind": ({"initial": {"kind": "gaussian"}}, ["initial", "sine"]),
    "missing grid": ({"grid": None}, ["grid"]),
    "cupy-only field": ({"backend": {"name": "numba", "kernel": "tiled"}}, ["backend.kernel", "cupy"]),
    "balance with cart": ({"parallel": {"decomposition": "cart", "balance": "dynamic"}},
                          ["parallel.balance", "decomposition: rows"]),
    "balance on a GPU": ({"backend": {"name": "cupy"}, "parallel": {"balance": "dynamic"}},
                         ["parallel.balance", "CPU backends"]),
    "unknown balance": ({"parallel": {"balance": "always"}}, ["parallel.balance", "'none' or 'dynamic'"]),
    "field of another initial kind": ({"initial": {"kind": "sine", "seed": 3}},
                                      ["initial.seed", "does not apply to kind sine", "random", "kind, value"]),
}


@pytest.mark.parametrize("label", CASES)
def test_invalid_case_fields(tmp_path, label):
    sections, needles = CASES[label]
    case = write_case(tmp_path / "bad.yaml", **sections)
    if sections.get("grid") is None and "grid" in sections:
        text = case.read_text().replace("grid: null\n", "")
        case.write_text(text)
    before = listing(tmp_path)
    res = stencil(["run", str(case)])
    check(res, str(case), *needles)
    assert listing(tmp_path) == before


def test_missing_file(tmp_path):
    check(stencil(["run", str(tmp_path / "nope.yaml")]), "nope.yaml", "not found")


def test_yaml_syntax_error_names_the_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\ngrid: {nx: 10, ny: 10\nrun: {steps: 3}\n")
    check(stencil(["run", str(p)]), "broken.yaml", "line 3", "YAML")


def test_grid_that_does_not_fit_in_memory(tmp_path):
    case = write_case(tmp_path / "huge.yaml", grid={"nx": 2_000_000, "ny": 2_000_000})
    res = stencil(["run", str(case)])
    check(res, "grid", "GiB per process", "smaller grid")
    assert not (tmp_path / "out_huge").exists()


def test_backend_not_available_says_how_to_install(tmp_path):
    pytest.importorskip("numba")
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed here")
    except ImportError:
        pass
    case = write_case(tmp_path / "gpu.yaml", backend={"name": "cupy"})
    check(stencil(["run", str(case)]), "backend.name", "not available", "pip install")
    assert not (tmp_path / "out_gpu").exists()


def test_output_directory_with_results_is_refused(tmp_path):
    case = write_case(tmp_path / "c.yaml")
    assert stencil(["run", str(case), "-q"]).returncode == 0
    record = tmp_path / "out_c" / "record.json"
    stamp = record.stat().st_mtime_ns
    check(stencil(["run", str(case)]), "output.dir", "--overwrite")
    assert record.stat().st_mtime_ns == stamp
    assert stencil(["run", str(case), "-q", "--overwrite"]).returncode == 0


def test_bad_cli_option_values(tmp_path):
    case = write_case(tmp_path / "c.yaml")
    check(stencil(["run", str(case), "--threads", "0"]), "--threads", "backend.threads", ">= 1")
    check(stencil(["run", str(case), "--dtype", "float16"]), "--dtype", "'float32' or 'float64'")
    check(stencil(["run", str(case), "--steps", "many"]), "--steps")
    assert not (tmp_path / "out_c").exists()


def test_initial_file_problems(tmp_path):
    import numpy as np

    np.save(tmp_path / "wrong.npy", np.zeros((4, 4)))
    case = write_case(tmp_path / "c.yaml", initial={"kind": "file", "path": str(tmp_path / "wrong.npy")})
    check(stencil(["run", str(case)]), "initial.path", "shape (4, 4)", "(17, 23)")
    case = write_case(tmp_path / "d.yaml", initial={"kind": "file", "path": str(tmp_path / "absent.npy")})
    check(stencil(["run", str(case)]), "initial.path", "not found")


def test_output_directory_that_cannot_be_created(tmp_path):
    (tmp_path / "a_file").write_text("not a directory")
    case = write_case(tmp_path / "c.yaml", output={"dir": str(tmp_path / "a_file" / "sub")})
    check(stencil(["run", str(case)]), "output.dir", "cannot create", "--output")
    case = write_case(tmp_path / "d.yaml", output={"dir": str(tmp_path / "a_file")})
    check(stencil(["run", str(case)]), "output.dir", "not a directory")
    assert (tmp_path / "a_file").read_text() == "not a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    case = write_case(tmp_path / "c.yaml", output={"dir": str(ro / "sub")})
    check(stencil(["run", str(case)]), "output.dir", "writable")
