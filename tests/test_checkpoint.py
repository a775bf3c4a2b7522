"""checkpoint.h5: contents, fingerprint, and a write that fails half-way leaving the previous one intact."""

import errno

import h5py
import numpy as np
import pytest
from conftest import mpi_script, needs_mpi

import solver.io.checkpoint
from solver.case import validate_case
from solver.core.errors import EXIT_IO, InputError, OutputError
from solver.core.physics import time_step
from solver.io.checkpoint import Checkpoint, differences, fingerprint
from solver.run import Options, Run


def case(tmp_path, **kw):
    data = {"name": "k", "grid": {"nx": 33, "ny": 21}, "initial": {"kind": "random", "seed": 8},
            "boundary": {"bottom": 2.0}, "run": {"steps": 25, "check_every": 5}, "backend": {"name": "numpy"},
            "output": {"dir": str(tmp_path / "out"), "every": 10, "checkpoint_every": 10, "vtk": False}}
    for k, v in kw.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) and k != "initial" else v
    return validate_case(data)


def test_the_checkpoint_holds_field_step_time_and_fingerprint(tmp_path):
    c = case(tmp_path)
    r = Run(c, options=Options(ceiling=False, quiet=True))
    r.execute()
    cp = Checkpoint.open(tmp_path / "out")  # a run directory is accepted for its checkpoint.h5
    assert (cp.step, cp.time, cp.shape) == (25, 25 * time_step(c), (21, 33))
    assert cp.fingerprint == fingerprint(c, time_step(c))
    with h5py.File(cp.path, "r") as f:
        assert f["u"].dtype == np.float64 and f.attrs["format"] == "stencil checkpoint"
        assert np.array_equal(f["u"][()], r.state.u[1:-1, 1:-1])
        assert "grid:" in f.attrs["case"] and list(f.attrs["dims"]) == [1, 1]
    block = r.blocks[0]
    assert np.array_equal(cp.read_block(block), r.state.u[1:-1, 1:-1])


def test_fingerprint_keeps_what_changes_the_field_and_nothing_else(tmp_path):
    base = case(tmp_path)
    fp = fingerprint(base, time_step(base))
    same = [{"name": "other"}, {"output": {"every": 3, "dir": "x"}}, {"run": {"steps": 99}},
            {"backend": {"name": "numba", "threads": 1}}, {"parallel": {"decomposition": "cart", "halo": "blocking"}},
            {"initial": {"kind": "constant", "value": 3.0}}, {"physics": {"dt": time_step(base)}}]
    for change in same:
        c = case(tmp_path, **change)
        assert differences(fp, fingerprint(c, time_step(c))) == [], change
    other = [("grid.nx", {"grid": {"nx": 35}}), ("boundary.top", {"boundary": {"top": 1.0}}),
             ("numerics.dtype", {"numerics": {"dtype": "float32"}}), ("physics.alpha", {"physics": {"alpha": 0.5}}),
             ("physics.dt", {"physics": {"safety": 0.5}}), ("physics.equation", {"physics": {"equation": "laplace"}})]
    for key, change in other:
        c = case(tmp_path, **change)
        diffs = differences(fp, fingerprint(c, time_step(c)))
        assert any(d.startswith(f"{key} is ") for d in diffs), (key, diffs)


def test_a_checkpoint_that_fails_half_way_leaves_the_previous_one_loadable(tmp_path, monkeypatch):
    """The second checkpoint's write stops with ENOSPC after half of the field went into its temporary file."""
    c = case(tmp_path, run={"steps": 40})
    stream = solver.io.checkpoint.for_each_block
    calls = {"n": 0}

    def half_then_full_disk(comm, blocks, mine, fn, limit=None):
        calls["n"] += 1
        if calls["n"] < 2:
            return stream(comm, blocks, mine, fn, limit)
        half = blocks[0].ny // 2
        fn(__import__("dataclasses").replace(blocks[0], rows=(0, half)), mine[:half])  # really written
        assert any(p.name.startswith(".checkpoint.tmp") for p in (tmp_path / "out").iterdir())
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(solver.io.checkpoint, "for_each_block", half_then_full_disk)
    r = Run(c, options=Options(ceiling=False, quiet=True))
    with pytest.raises(OutputError) as err:
        r.execute()
    out = tmp_path / "out"
    msg = str(err.value)
    assert err.value.exit_code == EXIT_IO == 5 and "\n" not in msg
    assert f"cannot write {out / 'checkpoint.h5'} (No space left on device)" in msg
    assert "checkpoint of step 20" in msg and "(step 10), is intact" in msg
    cp = Checkpoint.open(out / "checkpoint.h5")
    assert cp.step == 10
    with h5py.File(out / "fields.h5", "r") as f:  # the snapshot of step 10 is the same field
        assert list(f["step"][()]) == [0, 10, 20]
        assert np.array_equal(cp.read_block(r.blocks[0]), f["u"][1])
    assert not [p.name for p in out.iterdir() if ".tmp" in p.name]


def test_a_converged_run_is_not_continued_with_the_same_tolerance(tmp_path):
    c = case(tmp_path, physics={"equation": "laplace"}, boundary={"bottom": 1.0},
             run={"steps": 5000, "tolerance": 1e-3, "check_every": 10}, output={"every": None})
    Run(c, options=Options(ceiling=False, quiet=True)).execute()
    cp = Checkpoint.open(tmp_path / "out")
    assert cp.converged and cp.step < 5000
    with pytest.raises(InputError, match="run.tolerance: the checkpoint's run converged"):
        cp.check(c, time_step(c))
    tighter = case(tmp_path, physics={"equation": "laplace"}, boundary={"bottom": 1.0},
                   run={"steps": 5000, "tolerance": 1e-4, "check_every": 10}, output={"every": None})
    cp.check(tighter, time_step(tighter))  # a smaller tolerance may continue it


@needs_mpi
@pytest.mark.mpi
def test_a_file_size_limit_hit_while_checkpointing_under_mpirun_keeps_the_previous_checkpoint(tmp_path):
    res = mpi_script(3, "checkpoint_efbig.py", tmp_path / "out")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith("ok "), res.stdout
