"""Output from several ranks under a real mpirun: VTK pieces + .pvti, fields.h5, XDMF, rank 0's memory."""

import json

import numpy as np
import pytest
from conftest import mpi_script, needs_mpi
from test_output import check_outputs

from solver.case import validate_case

pytestmark = [needs_mpi, pytest.mark.mpi]
pytest.importorskip("pyvista")


def roundtrip_case(label, out):
    """The case tests/mpi/output_roundtrip.py runs (only what the checkers need: grid, physics)."""
    return validate_case({"name": label, "grid": {"nx": 37, "ny": 23, "lx": 2.0, "ly": 1.5},
                          "output": {"dir": str(out)}, "run": {"steps": 1000}})


def memory_of(root, label) -> dict[int, np.ndarray]:
    return {int(p.stem[2:]): np.load(p) for p in (root / f"{label}-memory").glob("u_*.npy")}


@pytest.mark.parametrize("n, specs", [(3, ["rows3:rows", "cart3:cart:1:3"]), (4, ["cart4:cart:2:2"])])
def test_pieces_pvti_hdf5_and_xdmf_hold_the_field_in_memory(tmp_path, n, specs):
    res = mpi_script(n, "output_roundtrip.py", tmp_path, *specs)
    assert res.returncode == 0, res.stdout + res.stderr
    for spec in specs:
        label = spec.split(":")[0]
        memory = memory_of(tmp_path, label)
        assert sorted(memory) == [0, 10, 20, 30]
        check_outputs(tmp_path / label, roundtrip_case(label, tmp_path / label), memory, ranks=n)


def test_rank_0_memory_while_writing_a_3_rank_field_stays_bounded(tmp_path):
    """Measured on rank 0: the peak resident-memory rise and the traced (Python + numpy) peak.

    Gathering would need the full field (24 MiB here) on rank 0; streaming needs rank 0's own block
    copy (8 MiB) plus one slab buffer (4 MiB).
    """
    res = mpi_script(3, "output_memory.py", tmp_path / "mem", timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr
    m = json.loads(next(line for line in res.stdout.splitlines() if line.startswith("{")))
    full, bound = m["full_bytes"], m["block_bytes"] + m["slab_bytes"] + (2 << 20)
    for what in ("snapshot", "checkpoint"):
        w = m[what]
        print(what, {k: (f"{v / 2**20:.1f} MiB" if isinstance(v, int) and not isinstance(v, bool) else v)
                     for k, v in w.items()}, f"full field {full / 2**20:.1f} MiB")
        assert w["traced_peak"] < bound, (what, w)
        assert w["traced_peak"] < 0.6 * full, (what, w)
        if w["hwm_reset"]:
            assert w["rss_rise"] < 0.6 * full, (what, w)
