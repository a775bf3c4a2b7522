"""Hybrid MPI + GPU under a real mpirun: one rank per GPU, ranks sharing a GPU, the transports, the
placement record and the trace. Skipped without cupy and a GPU (and without mpirun)."""

import json

import pytest
from conftest import mpi_script, mpirun, needs_mpi, write_case

from solver.backends import registry

REASON = registry()["cupy"].unavailable()
pytestmark = [pytest.mark.gpu, pytest.mark.mpi, needs_mpi,
              pytest.mark.skipif(REASON is not None, reason=f"no GPU: {REASON}")]


def gpu_count() -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def transports() -> list[str]:
    from solver.parallel.gpu_exchange import nccl_version

    return ["staged", "nccl"] if nccl_version() else ["staged"]


def last_json(res) -> dict:
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(REASON is None and gpu_count() < 2, reason="needs two GPUs")
def test_one_rank_per_gpu_equals_one_gpu_for_every_mode_and_transport(tmp_path):
    out = last_json(mpi_script(2, "hybrid_gpu.py", tmp_path, ",".join(transports()), timeout=600))
    names = [n for n, _ in out["compared"]]
    assert len(names) == 2 * 2 * 3 * len(transports()) + len(transports())
    assert sorted(p["gpu_index"] for p in out["placement"]) == [0, 1]


def test_two_ranks_on_one_gpu_with_share_gpus(tmp_path):
    out = last_json(mpi_script(2, "hybrid_gpu.py", tmp_path, "staged", "share", timeout=600,
                               env={"CUDA_VISIBLE_DEVICES": "0"}))
    assert [p["gpu_index"] for p in out["placement"]] == [0, 0]
    assert all(p["transport"] == "staged" for p in out["placement"])


def test_more_ranks_than_gpus_is_a_clear_error(tmp_path):
    case = write_case(tmp_path / "c.yaml", backend={"name": "cupy"}, output={"vtk": False})
    res = mpirun(2, ["run", str(case), "--quiet"], env={"CUDA_VISIBLE_DEVICES": "0"})
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("error:") == 1, res.stderr  # reported once (the launcher may add its own notice)
    line = next(line for line in res.stderr.splitlines() if "error:" in line)
    assert "parallel.share_gpus" in line and "1 GPU(s) visible" in line and "share_gpus: true" in line, line
    assert not (tmp_path / "out_c" / "record.json").exists()


def test_nccl_refused_when_ranks_share_a_gpu(tmp_path):
    case = write_case(tmp_path / "n.yaml", backend={"name": "cupy"}, output={"vtk": False},
                      parallel={"transport": "nccl", "share_gpus": True})
    res = mpirun(2, ["run", str(case), "--quiet"], env={"CUDA_VISIBLE_DEVICES": "0"})
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("error:") == 1 and "parallel.transport" in res.stderr and "share a GPU" in res.stderr


@pytest.mark.skipif(REASON is None and gpu_count() < 2, reason="needs two GPUs")
def test_auto_transport_record_placement_and_trace(tmp_path):
    case = write_case(tmp_path / "h.yaml", grid={"nx": 300, "ny": 257}, initial={"kind": "hotspot"},
                      backend={"name": "cupy"}, run={"steps": 40, "check_every": 20},
                      output={"vtk": False, "trace": True}, verify=True)
    res = mpirun(2, ["run", str(case), "--quiet"])
    assert res.returncode == 0, res.stdout + res.stderr
    rec = json.loads((tmp_path / "out_h" / "record.json").read_text())
    assert rec["correctness"]["passed"] and rec["correctness"]["mismatched_points"] == 0
    place = rec["resources"]["placement"]
    want = "nccl" if "nccl" in transports() else "staged"
    assert [p["gpu_index"] for p in place] == [0, 1] and {p["transport"] for p in place} == {want}
    assert all(p["host"] and p["affinity"] and p["gpu_name"] for p in place)
    trace = json.loads((tmp_path / "out_h" / "trace.json").read_text())["traceEvents"]
    for rank in (0, 1):
        tracks = {e["args"]["name"] for e in trace if e["name"] == "thread_name" and e["pid"] == rank}
        assert {"gpu", "halo"} <= tracks, tracks


def deep_checks(res, n: int) -> dict:
    """The JSON of tests/mpi/hybrid_deep.py, after its own bitwise and message checks passed."""
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    assert f"ok GPU deep halos on {n} ranks" in res.stdout, res.stdout[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert res.stdout.count("ok ") == 34 * len(out["transports"]) + 1, res.stdout[-3000:]
    deep = [c for c in out["checks"] if c["k"] > 1]
    assert deep and all(c["depth"] > 1 and c["time_tile"] == c["k"] for c in deep)
    assert any(c["depth"] < c["k"] for c in deep), "no block thinner than k was tested"
    return out


@pytest.mark.parametrize("n", [2, 4])
def test_deep_halos_on_one_shared_gpu_equal_one_rank_bitwise_with_1_over_k_messages(tmp_path, n):
    """k-deep halos (k = 2, 8, and 8 capped by thin blocks) between ranks sharing one GPU: rows and cart,
    every halo mode, staged (and CUDA-aware where the MPI is): bitwise equal to one rank per-step and
    tiled, messages per step 1/depth of the per-step run's (tests/mpi/hybrid_deep.py)."""
    out = deep_checks(mpi_script(n, "hybrid_deep.py", tmp_path, "all", "share", timeout=600,
                                 env={"CUDA_VISIBLE_DEVICES": "0"}), n)
    assert out["transports"][0] == "staged" and "nccl" not in out["transports"]
    if n == 4:
        assert any(c["dims"] == [2, 2] for c in out["checks"]), "no 2-D process grid (corners) was tested"


@pytest.mark.skipif(REASON is None and gpu_count() < 2, reason="needs two GPUs")
def test_deep_halos_one_rank_per_gpu_over_every_transport(tmp_path):
    out = deep_checks(mpi_script(2, "hybrid_deep.py", tmp_path, "all", timeout=600), 2)
    assert ("nccl" in out["transports"]) == bool(transports().count("nccl"))
