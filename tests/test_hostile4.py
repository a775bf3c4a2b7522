"""The fourth hostile round (issue 47), class by class, with real processes, a real mpirun and real files, FIFOs
and links: data a block carries per row under dynamic balance and time tiles; data files changed between a run
and its restart; arrays that are not real numbers, or do not fit the grid; products of physical data that
overflow; inputs --overwrite would remove; YAML 1.2 numbers; messages.

Bad input is exit 2 with one line naming the file or field and the fix, no traceback, nothing written."""

import os

import h5py
import numpy as np
import pytest
import yaml
from conftest import mpi_script, mpirun, needs_mpi, stencil, write_case
from test_hostile2 import one_error_line, tree

from solver.case import load_case
from solver.cli import reference
from solver.core.errors import InputError
from solver.run import Options, Run

NX, NY = 24, 16
GRID = {"nx": NX, "ny": NY}


def case_with(tmp_path, name="c", **sections):
    """A small numpy heat case (24 x 16) in tmp_path, its output in tmp_path/out_<name>."""
    return write_case(tmp_path / f"{name}.yaml", **{"grid": GRID, **sections,
                                                     "output": {"vtk": False, **sections.get("output", {})}})


def refused(tmp_path, path, *needles, extra=()):
    """`validate` and `run` both refuse the case with one line holding every needle; nothing is written."""
    for command in (["validate", str(path)], ["run", str(path), "-q"]):
        one_error_line(stencil([*command, *extra]), *needles)
    assert not list(tmp_path.glob("out_*")), "something was written"


# 1. data a block carries per row and per column: dynamic balance and time tiles ---------------------------

@needs_mpi
@pytest.mark.mpi
def test_side_profiles_files_tables_and_fields_stay_bitwise_when_rows_move_and_under_time_tiles(tmp_path):
    """A Dirichlet profile along a left side under 3 ranks and the default time tile crashed (a ghost column of
    the deep-halo field is longer than the padded block's); a Neumann or convective profile ended 0.1-0.4 off
    once dynamic balance moved rows (the ghost rules stayed those of the old block); a table in time was off
    after a move (the moved rows' ghosts at t = 0). Every kind, bitwise equal to one process, rows moved."""
    res = mpi_script(3, "check_side_data.py", tmp_path, timeout=300, env={"STENCIL_SLOW_RANK": "1:0.0005"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("ok ") == 8, res.stdout
    assert "ok dirichlet along left" in res.stdout and "halo depth 2" in res.stdout


@needs_mpi
@pytest.mark.mpi
def test_a_dirichlet_profile_on_a_split_side_runs_under_mpirun_with_the_default_time_tile(tmp_path):
    """The issue's crash as a user meets it: the CLI, 3 ranks, rows, numba's default tile."""
    left = {"kind": "dirichlet", "value": {"along": [[0.0, 0.0], [1.0, 1.0]]}}
    path = write_case(tmp_path / "p.yaml", grid={"nx": 20, "ny": 36}, boundary={"left": left},
                      backend={"name": "numba", "threads": 1}, run={"steps": 40, "check_every": 10},
                      output={"vtk": False, "dir": str(tmp_path / "p")})
    res = mpirun(3, ["run", str(path), "-q"])
    assert res.returncode == 0, res.stderr
    one = stencil(["run", str(path), "-q", "-o", str(tmp_path / "one"), "--time-tile", "1"])
    assert one.returncode == 0, one.stderr
    with h5py.File(tmp_path / "p" / "fields.h5") as a, h5py.File(tmp_path / "one" / "fields.h5") as b:
        assert np.array_equal(a["u"][()], b["u"][()])


def test_a_steady_case_whose_only_convective_side_reads_h_from_a_file_of_zeros_is_refused(tmp_path):
    """h = 0 given as a number or an all-zero profile was refused; read from a file it ran to a 'floor' at a
    relative residual of 4e6. The file's h, like the number, must be > 0 somewhere."""
    np.save(tmp_path / "zeros.npy", np.zeros(NY))
    n = {"kind": "neumann"}
    path = case_with(tmp_path, physics={"equation": "laplace", "solver": "multigrid"},
                     boundary={"left": {"kind": "convective", "h": {"file": str(tmp_path / "zeros.npy")}},
                               "right": n, "top": n, "bottom": n})
    refused(tmp_path, path, "boundary.left.h.file", "zeros.npy", "holds only zeros", "singular")


def test_a_steady_case_with_an_h_file_that_is_not_all_zero_runs(tmp_path):
    h = np.zeros(NY)
    h[3] = 2.0
    np.save(tmp_path / "h.npy", h)
    n = {"kind": "neumann"}
    path = case_with(tmp_path, physics={"equation": "laplace", "solver": "multigrid"}, run={"steps": 30},
                     boundary={"left": {"kind": "convective", "h": {"file": str(tmp_path / "h.npy")}, "ambient": 1.0},
                               "right": n, "top": n, "bottom": n})
    assert stencil(["run", str(path), "-q"]).returncode == 0


# 1. a data file changed between a run and its restart ----------------------------------------------------

FILES = {  # field that names the file -> (the case's sections naming it, the array, the field in the message)
    "source": (lambda p: {"physics": {"source": [{"kind": "file", "path": str(p)}]}}, np.ones((NY, NX)),
               "physics.source.0.path"),
    "alpha": (lambda p: {"physics": {"alpha": {"kind": "file", "path": str(p)}}}, np.ones((NY, NX)),
              "physics.alpha.path"),
    "side": (lambda p: {"boundary": {"left": {"kind": "dirichlet", "value": {"file": str(p)}}}}, np.ones(NY),
             "boundary.left.value.file"),
    "initial": (lambda p: {"initial": {"kind": "file", "path": str(p)}}, np.ones((NY, NX)), "initial.path"),
}


def run_in(path, out, steps, restart=None):
    case = load_case(path, {"--output": str(out), "--steps": steps})
    r = Run(case, options=Options(ceiling=False, quiet=True, restart=restart))
    r.execute()
    return r


@pytest.mark.parametrize("kind", FILES)
def test_a_data_file_changed_before_a_restart_is_refused_naming_it_and_an_unchanged_one_continues_bitwise(tmp_path, kind):
    """The restart continued silently and matched no uninterrupted run. Now the fingerprint holds each named file's
    SHA-256: a changed file is refused by field and file; put back, the run continues to the uninterrupted field."""
    sections, data, field = FILES[kind]
    data_path = tmp_path / "data.npy"
    np.save(data_path, data)
    path = case_with(tmp_path, **sections(data_path), output={"vtk": False, "checkpoint_every": 10})
    whole = run_in(path, tmp_path / "whole", 20)
    run_in(path, tmp_path / "cut", 10)
    np.save(data_path, 1.5 * data)
    with pytest.raises(InputError) as err:
        run_in(path, tmp_path / "cut", 20, restart=str(tmp_path / "cut"))
    assert f"{field}: {data_path} changed since the checkpoint was written" in str(err.value)
    np.save(data_path, data)
    again = run_in(path, tmp_path / "cut", 20, restart=str(tmp_path / "cut"))
    assert np.array_equal(again.state.u, whole.state.u)


@needs_mpi
@pytest.mark.mpi
def test_the_restart_refusal_of_a_changed_file_is_one_line_under_mpirun_too(tmp_path):
    np.save(tmp_path / "q.npy", np.ones((NY, NX)))
    path = case_with(tmp_path, physics={"source": [{"kind": "file", "path": str(tmp_path / "q.npy")}]},
                     output={"vtk": False, "checkpoint_every": 10})
    assert stencil(["run", str(path), "-q", "--steps", "10"]).returncode == 0
    np.save(tmp_path / "q.npy", np.full((NY, NX), 2.0))
    before = tree(tmp_path / "out_c")
    run = mpirun(2, ["run", str(path), "-q", "--steps", "20", "--restart", str(tmp_path / "out_c")])
    one_error_line(run, "physics.source.0.path", "q.npy changed since the checkpoint was written")
    assert tree(tmp_path / "out_c") == before


# 1. arrays that are not real numbers, or not of the grid's shape ----------------------------------------

def _h5(path, name, data, **kw):
    with h5py.File(path, "w") as f:
        f.create_dataset(name, data=data, **kw)


NOT_REAL = {  # label -> (write the file at p, dataset or None, words in the message)
    "complex .npy": (lambda p: np.save(p, np.ones((4, 4)) * (1 + 1j)), None, "complex numbers"),
    "text .npy": (lambda p: np.save(p, np.array([["1.5", "2"], ["3", "4"]])), None, "text"),
    "structured .npy": (lambda p: np.save(p, np.zeros((4, 4), dtype=[("a", "f8"), ("b", "i4")])), None, "records"),
    "HDF5 strings": (lambda p: _h5(p, "q", np.array([[b"1", b"2"], [b"3", b"4"]])), "q", "text"),
    "HDF5 variable strings": (lambda p: _h5(p, "q", np.array([["1", "2"]], dtype=object), dtype=h5py.string_dtype()),
                              "q", "text or objects"),
    "HDF5 compound": (lambda p: _h5(p, "q", np.zeros((4, 4), dtype=[("a", "f8"), ("b", "i4")])), "q", "records"),
}


@pytest.mark.parametrize("label", NOT_REAL)
def test_a_map_that_is_not_real_numbers_is_refused_in_one_line(tmp_path, label):
    """A complex map ran with its imaginary part dropped, text was parsed into numbers, a compound HDF5 map was a
    traceback: every array a case reads goes through one check of its values' kind."""
    write, dataset, words = NOT_REAL[label]
    p = tmp_path / ("map.npy" if dataset is None else "map.h5")
    write(p)
    term = {"kind": "file", "path": str(p), "extent": [[0.0, 0.0], [1.0, 1.0]], **({"dataset": dataset} if dataset else {})}
    refused(tmp_path, case_with(tmp_path, physics={"source": [term]}), "physics.source.0.path", words,
            "not real numbers")


def test_complex_arrays_are_refused_wherever_a_case_reads_one(tmp_path):
    np.save(tmp_path / "c2.npy", np.ones((NY, NX), dtype=complex))
    np.save(tmp_path / "c1.npy", np.ones(NY, dtype=complex))
    for sections, field in (({"initial": {"kind": "file", "path": str(tmp_path / "c2.npy")}}, "initial.path"),
                            ({"physics": {"alpha": {"kind": "file", "path": str(tmp_path / "c2.npy")}}}, "physics.alpha.path"),
                            ({"boundary": {"top": {"kind": "neumann", "flux": {"file": str(tmp_path / "c1.npy")}}}},
                             "boundary.top.flux.file")):
        if field.startswith("boundary"):
            np.save(tmp_path / "c1.npy", np.ones(NX, dtype=complex))
        refused(tmp_path, case_with(tmp_path, **sections), field, "complex numbers")


def test_an_initial_npy_of_shape_2_48_64_for_a_64_by_48_grid_is_refused_naming_the_shape(tmp_path):
    """The first hostile set's case, a regression of this round (a .npy of one more axis was read as a series)."""
    np.save(tmp_path / "three.npy", np.ones((2, 48, 64)))
    path = write_case(tmp_path / "c.yaml", grid={"nx": 64, "ny": 48},
                      initial={"kind": "file", "path": str(tmp_path / "three.npy")}, output={"vtk": False})
    refused(tmp_path, path, "initial.path", "(2, 48, 64)", "(48, 64)")


def test_an_hdf5_series_still_gives_its_last_snapshot(tmp_path):
    _h5(tmp_path / "s.h5", "u", np.stack([np.zeros((NY, NX)), np.full((NY, NX), 3.0)]))
    path = case_with(tmp_path, initial={"kind": "file", "path": str(tmp_path / "s.h5")}, run={"steps": 1})
    assert stencil(["run", str(path), "-q"]).returncode == 0
    with h5py.File(tmp_path / "out_c" / "fields.h5") as f:
        assert np.all(f["u"][0] == 3.0)


@pytest.mark.parametrize("what", ["fifo", "directory", "link to /dev/zero", "link to nothing"])
def test_a_fifo_a_directory_or_a_link_to_a_device_is_named_as_what_it_is(tmp_path, what):
    """They were all 'not found'. A FIFO is never opened (a read would block)."""
    p = tmp_path / "q.npy"
    if what == "fifo":
        os.mkfifo(p)
    elif what == "directory":
        p.mkdir()
    elif what == "link to /dev/zero":
        p.symlink_to("/dev/zero")
    else:
        p.symlink_to(tmp_path / "gone.npy")
    words = {"fifo": "a FIFO", "directory": "a directory", "link to /dev/zero": "a character device (a link to /dev/zero)",
             "link to nothing": "which does not exist"}[what]
    refused(tmp_path, case_with(tmp_path, physics={"source": [{"kind": "file", "path": str(p)}]}),
            "physics.source.0.path", words)


# 1. numbers as YAML 1.2 reads them --------------------------------------------------------------------------

def test_numbers_with_leading_zeros_are_decimal_in_case_files_and_in_set(tmp_path):
    """`nx: 064` ran 52 points (YAML 1.1's octal); YAML 1.2's core schema reads 64, and 0o64 as octal."""
    path = tmp_path / "c.yaml"
    path.write_text("grid: {nx: 064, ny: 0o20}\nbackend: {name: numpy}\nrun: {steps: 0x2}\n")
    case = load_case(path)
    assert (case.grid.nx, case.grid.ny, case.run.steps) == (64, 16, 2)
    case = load_case(path, {**__import__("solver.case", fromlist=["parse_sets"]).parse_sets(["grid.nx=064",
                                                                                               "physics.alpha=1e-1"])})
    assert case.grid.nx == 64 and case.physics.alpha == 0.1
    res = stencil(["run", str(path), "-q", "--set", "grid.nx=032", "-o", str(tmp_path / "o")])
    assert res.returncode == 0, res.stderr
    with h5py.File(tmp_path / "o" / "fields.h5") as f:
        assert f["u"].shape[1:] == (16, 32)


def test_case_yaml_and_saved_cases_read_back_to_the_same_values_with_yaml_12_numbers(tmp_path):
    """case.yaml (and the checkpoint's saved case) are written so that the case loader reads back what was meant:
    strings that YAML 1.2 reads as numbers (`0o64`, `1e5`) are quoted, as those YAML 1.1 reads as numbers are."""
    from solver.case.loading import dump_yaml, load_yaml

    data = {"name": "0o17", "a": "1e5", "b": "064", "c": "1_000", "d": 1e-5, "e": 64, "f": [1.5, None, True]}
    text = dump_yaml(data)
    assert load_yaml(text) == data and yaml.safe_load(text) == data
    path = tmp_path / "c.yaml"
    path.write_text(f"name: '0o17'\ngrid: {{nx: {NX}, ny: {NY}}}\nrun: {{steps: 2}}\nbackend: {{name: numpy}}\n"
                    f"output: {{dir: {tmp_path / 'o'}, vtk: false, checkpoint_every: 1}}\n")
    assert stencil(["run", str(path), "-q"]).returncode == 0
    again = load_case(tmp_path / "o" / "case.yaml")
    assert again.name == "0o17" and again.grid.nx == NX
    res = stencil(["run", "--restart", str(tmp_path / "o"), "-q", "--steps", "3"])  # the checkpoint's saved case
    assert res.returncode == 0, res.stderr


# 2. results lost on a refusal -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["source", "alpha", "side"])
def test_overwrite_refuses_a_data_file_inside_the_output_directory_before_removing_anything(tmp_path, kind):
    """--overwrite deleted ten result files (the checkpoint among them) and then exited 2 'not found': every file
    the case names is among the inputs --overwrite protects, checked before anything is removed. The data are
    good (the checkpoint's field, the snapshots' 16 steps as a left side's values): the place is what is refused."""
    out = tmp_path / "out_c"
    first = case_with(tmp_path, run={"steps": 15}, output={"every": 1, "checkpoint_every": 10})
    assert stencil(["run", str(first), "-q"]).returncode == 0
    field = {"kind": "file", "path": str(out / "checkpoint.h5"), "dataset": "/u"}
    sections = {"source": ({"physics": {"source": [field]}}, "physics.source.0.path"),
                "alpha": ({"physics": {"alpha": field}}, "physics.alpha.path"),
                "side": ({"boundary": {"left": {"kind": "dirichlet", "value": {"file": str(out / "fields.h5"),
                                                                               "dataset": "/step"}}}},
                         "boundary.left.value.file")}
    data, name = sections[kind]
    before = tree(out)
    second = case_with(tmp_path, **data, output={"checkpoint_every": 10})
    one_error_line(stencil(["run", str(second), "-q", "--overwrite"]), name, "--overwrite would remove")
    assert tree(out) == before
    assert stencil(["validate", str(second)]).returncode == 0  # the data themselves are good


@pytest.mark.parametrize("problem", ["missing", "wrong shape"])
def test_a_bad_source_file_in_a_window_that_opens_mid_run_is_found_before_any_output(tmp_path, problem):
    """It was found after case.yaml, fields.h5, fields.xdmf and fields_views.h5 were written."""
    if problem == "wrong shape":
        np.save(tmp_path / "q.npy", np.ones((NY - 1, NX)))
    late = {"kind": "file", "path": str(tmp_path / "q.npy"), "active": [0.002, 1.0]}
    path = case_with(tmp_path, physics={"source": [{"kind": "constant", "value": 1.0}, late]}, run={"steps": 200})
    refused(tmp_path, path, "physics.source.1.path", "not found" if problem == "missing" else "(15, 24)")


# 3, 4 and 5. crashes, overflows, and what validate says --------------------------------------------------------

BAD = {  # label -> (sections, words): run refused them too late (a traceback, NaN at step N) or not at all,
    # validate said "valid"
    "gaussian width 1e200": ({"physics": {"source": [{"kind": "gaussian", "center": [0.5, 0.5], "width": 1e200,
                                                      "amplitude": 1.0}]}}, ["physics.source.0.width", "1e+100"]),
    "gaussian width 1e-200": ({"physics": {"source": [{"kind": "gaussian", "center": [0.52, 0.5], "width": 1e-200,
                                                       "amplitude": 1.0}]}}, ["physics.source.0.width", "1e-100"]),
    "disk radius 1e200": ({"physics": {"alpha": {"background": 1.0, "regions": [
        {"kind": "disk", "center": [0.5, 0.5], "radius": 1e200, "value": 2.0}]}}}, ["regions.0.radius", "1e+100"]),
    "hotspot radius 1e200": ({"initial": {"kind": "hotspot", "radius": 1e200}}, ["initial.radius", "1e+100"]),
    "h 1e300, ambient 1e10": ({"boundary": {"left": {"kind": "convective", "h": 1e300, "ambient": 1e10}}},
                              ["boundary.left", "ghost value", "smaller h"]),
    "h 1e308 on a long plate": ({"grid": {**GRID, "lx": 100.0}, "boundary": {"left": {"kind": "convective", "h": 1e308}}},
                                ["boundary.left", "ghost value"]),
    "two sources of 1e308": ({"physics": {"source": [{"kind": "constant", "value": 1e308},
                                                     {"kind": "constant", "value": 1e308}]}},
                             ["physics.source", "terms 0, 1", "float64"]),
    "flux x spacing": ({"grid": {**GRID, "lx": 1e10}, "boundary": {"left": {"kind": "neumann", "flux": 1e300}}},
                       ["boundary.left.flux", "flux x spacing"]),
    "source x dt in float32": ({"numerics": {"dtype": "float32"}, "physics": {"source": [
        {"kind": "constant", "value": 1e37}], "scheme": "backward-euler", "dt": 100.0}}, ["x dt", "float32"]),
    "missing source file": ({"physics": {"source": [{"kind": "file", "path": "nowhere.npy"}]}},
                            ["physics.source.0.path", "not found"]),
    "missing side file": ({"boundary": {"top": {"kind": "dirichlet", "value": {"file": "nowhere.npy"}}}},
                          ["boundary.top.value.file", "not found"]),
}


@pytest.mark.parametrize("label", BAD)
def test_validate_and_run_refuse_the_same_bad_physical_data_in_one_line_naming_it(tmp_path, label):
    sections, words = BAD[label]
    refused(tmp_path, case_with(tmp_path, **sections), *words)


def test_a_file_of_1e300_scaled_by_1e10_and_a_side_file_of_the_wrong_length_are_refused_by_validate_and_run(tmp_path):
    np.save(tmp_path / "big.npy", np.full((NY, NX), 1e300))
    np.save(tmp_path / "short.npy", np.ones(NY - 3))
    refused(tmp_path, case_with(tmp_path, physics={"source": [{"kind": "file", "path": str(tmp_path / "big.npy"),
                                                               "scale": 1e10}]}),
            "physics.source.0.scale", "overflows")
    refused(tmp_path, case_with(tmp_path, boundary={"left": {"kind": "dirichlet", "value": {"file": str(tmp_path / "short.npy")}}}),
            "boundary.left.value.file", "(13,)", "(16,)")


@pytest.mark.parametrize("term", [{"kind": "rectangle", "lower": [2.0, 2.0], "upper": [3.0, 3.0], "value": 1.0},
                                  {"kind": "gaussian", "center": [5.5, 0.5], "width": 0.1, "amplitude": 1.0},
                                  {"kind": "file", "path": "q.npy", "extent": [[-3.0, 0.0], [-2.0, 1.0]]}],
                         ids=["rectangle outside", "gaussian 50 widths away", "map outside"])
def test_a_source_that_adds_nothing_at_any_point_is_refused_as_an_empty_alpha_region_is(tmp_path, term):
    refused(tmp_path, case_with(tmp_path, physics={"source": [{"kind": "constant", "value": 1.0}, term]}),
            "physics.source.1", "adds nothing at any grid point")


def test_sources_that_add_something_or_are_off_run(tmp_path):
    terms = [{"kind": "rectangle", "lower": [0.4, 0.4], "upper": [0.6, 0.6], "value": 1.0},
             {"kind": "gaussian", "center": [1.5, 0.5], "width": 0.1, "amplitude": 1.0},  # 5 widths out: it adds
             {"kind": "rectangle", "lower": [2.0, 2.0], "upper": [3.0, 3.0], "value": 0.0}]  # off
    assert stencil(["validate", str(case_with(tmp_path, physics={"source": terms}))]).returncode == 0


# 6. messages -------------------------------------------------------------------------------------------------

@needs_mpi
@pytest.mark.mpi
def test_a_bad_source_file_under_mpirun_is_one_line(tmp_path):
    """The right line came with four of MPICH's 'freeing inactive persistent request': the file is now refused
    before the exchanger exists, and a set-up step that fails after it frees its requests (next test)."""
    np.save(tmp_path / "q.npy", np.ones((NY - 1, NX)))
    path = case_with(tmp_path, physics={"source": [{"kind": "file", "path": str(tmp_path / "q.npy")}]},
                     parallel={"halo": "nonblocking"})
    one_error_line(mpirun(2, ["run", str(path), "-q"]), "physics.source.0.path", "(15, 24)")


@needs_mpi
@pytest.mark.mpi
def test_a_set_up_step_that_fails_after_the_exchanger_leaves_no_mpi_request_behind(tmp_path):
    res = mpi_script(3, "check_setup_close.py", tmp_path)
    assert res.returncode == 0 and res.stdout.count("ok ") == 3, res.stdout + res.stderr
    assert "MPICH" not in res.stdout + res.stderr and "persistent" not in res.stdout + res.stderr, res.stderr


def test_a_set_that_overrides_an_option_is_what_the_error_names(tmp_path):
    """`--steps 10 --set run.steps=-1` blamed --steps."""
    path = case_with(tmp_path)
    line = one_error_line(stencil(["run", str(path), "-q", "--steps", "10", "--set", "run.steps=-1"]), "run.steps")
    assert "--steps" not in line
    one_error_line(stencil(["run", str(path), "-q", "--steps", "-1"]), "--steps (field run.steps)")


def test_an_entry_of_an_empty_list_says_the_list_is_empty(tmp_path):
    line = one_error_line(stencil(["validate", str(case_with(tmp_path)), "--set", "physics.source=[]",
                                   "--set", "physics.source.0.value=5"]), "physics.source is an empty list")
    assert "-1" not in line.split(".yaml: ", 1)[1]  # (the temporary path may hold a -1: pytest-106)


def test_700_windowed_sources_are_a_case_file_not_an_alias_expansion(tmp_path):
    """The schema allows 1000 terms; 700 with windows were refused for 'aliases' the case did not have."""
    terms = [{"kind": "gaussian", "center": [0.5, 0.5], "width": 0.1, "amplitude": 1.0,
              "active": [1e-4 * k, 1e-4 * k + 5e-5]} for k in range(700)]
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump({"grid": GRID, "physics": {"source": terms}, "run": {"steps": 5},
                                    "backend": {"name": "numpy"}, "output": {"dir": str(tmp_path / "o"), "vtk": False}}))
    res = stencil(["run", str(path), "-q"])
    assert res.returncode == 0, res.stderr


def test_the_case_reference_names_every_side_kind_and_the_equations_with_their_source():
    """`stencil docs` wrote sides '(dirichlet, neumann, periodic)' and the equations without q, and --check
    passed: the text now comes from the code (the kinds, the equations), and --check compares the whole page."""
    from solver.case import BOUNDARY_KINDS

    page = reference.case_page()
    boundary = page[page.index("## `boundary`"):]
    assert f"({', '.join(BOUNDARY_KINDS)})" in boundary and "convective" in BOUNDARY_KINDS
    row = next(line for line in page.splitlines() if line.startswith("| `physics.equation`"))
    assert "u_t = div(alpha grad u) + q" in row and "0 = div(alpha grad u) + q" in row
    assert reference.stale(reference.Path(__file__).resolve().parent.parent / "docs") == []
