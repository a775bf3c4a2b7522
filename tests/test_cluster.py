"""The cluster emulated on this machine (tools/cluster.sh): two nodes, each a network and UTS namespace with
its own host name and cores, joined by shaped veth pairs; MPICH's launcher starts the ranks inside them.

Real namespaces, real processes, real TCP: where this machine cannot make namespaces (not root, no `ip`,
a container without CAP_NET_ADMIN) or the MPI is not MPICH (whose launcher the tool drives), every test
here is skipped and says why."""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import ROOT, clean_env, mpirun_command, write_case

CLUSTER = ROOT / "tools" / "cluster.sh"
MPIEXEC = Path(sys.executable).parent / "mpiexec"


@functools.lru_cache
def why_not() -> str | None:
    if mpirun_command() is None or not MPIEXEC.exists():
        return "no MPICH mpiexec beside this Python (pip install -e .[mpi])"
    if "HYDRA" not in subprocess.run([str(MPIEXEC), "--version"], capture_output=True, text=True).stdout:
        return "the mpiexec beside this Python is not MPICH's hydra, which tools/cluster.sh drives"
    res = subprocess.run([str(CLUSTER), "check"], capture_output=True, text=True)
    return None if res.returncode == 0 else f"network namespaces cannot be made here: {res.stdout.strip()}"


pytestmark = [pytest.mark.mpi, pytest.mark.skipif(why_not() is not None, reason=str(why_not()))]


@pytest.fixture(scope="module")
def cluster():
    """Two nodes with names and addresses of this test run's own; removed afterwards, also on failure."""
    tag = os.getpid() % 1000
    env = clean_env(STENCIL_CLUSTER=f"stt{tag}", STENCIL_CLUSTER_NET=f"10.79.{tag % 250}",
                    STENCIL_CLUSTER_MPIEXEC=str(MPIEXEC))
    subprocess.run([str(CLUSTER), "down"], env=env, capture_output=True)
    up = subprocess.run([str(CLUSTER), "up", "2"], env=env, capture_output=True, text=True)
    try:
        assert up.returncode == 0, up.stderr
        yield env
    finally:
        subprocess.run([str(CLUSTER), "down"], env=env, capture_output=True)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert env["STENCIL_CLUSTER"] not in left


def launch(env, n: int, *args, timeout=180):
    return subprocess.run([str(CLUSTER), "-n", str(n), sys.executable, *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=ROOT)


WHERE = """
import json, socket
from solver.parallel.comm import Comm, default_threads
c = Comm.world(True)
local, size = c.node()
me = {"rank": c.rank, "host": socket.gethostname(), "local": local, "size": size,
      "threads": default_threads(c.node_cores(), local, {}), "cores": sorted(c.node_cores()[local])}
everyone = c.gather(me)
if c.rank == 0:
    print("RANKS " + json.dumps(everyone), flush=True)
"""


def test_mpi_sees_two_nodes_with_their_own_names_cores_and_node_local_ranks(cluster):
    res = launch(cluster, 4, "-c", WHERE)
    assert res.returncode == 0, res.stderr
    ranks = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("RANKS "))[6:])
    assert [r["host"] for r in ranks] == ["node1", "node1", "node2", "node2"]  # blocks of ceil(4 / 2)
    assert [(r["local"], r["size"]) for r in ranks] == [(0, 2), (1, 2), (0, 2), (1, 2)]  # what picks a rank's GPU
    cores = os.cpu_count()
    if cores >= 2:  # each node has its half of the cores; the threads per rank follow from the node's cores
        assert not set(ranks[0]["cores"]) & set(ranks[2]["cores"])
    assert all(r["threads"] == max(1, len(r["cores"]) // 2) for r in ranks)


def test_a_run_across_two_nodes_is_bitwise_the_one_process_run_and_names_both_hosts(cluster, tmp_path):
    case = write_case(tmp_path / "c.yaml", grid={"nx": 96, "ny": 64}, run={"steps": 40, "check_every": 10},
                      backend={"name": "numba", "threads": 1}, output={"dir": str(tmp_path / "one"), "every": 20})
    one = subprocess.run([sys.executable, "-m", "solver", "run", str(case), "-q", "--no-mpi"], capture_output=True,
                         text=True, env=cluster, cwd=ROOT, timeout=180)
    assert one.returncode == 0, one.stderr
    four = launch(cluster, 4, "-m", "solver", "run", str(case), "-q", "-o", str(tmp_path / "four"))
    assert four.returncode == 0, four.stderr
    with h5py.File(tmp_path / "one" / "fields.h5") as a, h5py.File(tmp_path / "four" / "fields.h5") as b:
        assert list(a["step"][()]) == list(b["step"][()]) == [0, 20, 40]
        assert np.array_equal(a["u"][()], b["u"][()])
    rec = json.loads((tmp_path / "four" / "record.json").read_text())
    assert [p["host"] for p in rec["resources"]["placement"]] == ["node1", "node1", "node2", "node2"]
    assert rec["resources"]["ranks_per_node"] == 2
    assert "node1" in (tmp_path / "four" / "record.md").read_text()


def tx_bytes(env, node: int) -> int:
    return int(Path(f"/sys/class/net/{env['STENCIL_CLUSTER']}{node}h/statistics/rx_bytes").read_text())


def test_halo_messages_between_nodes_travel_over_the_veth_link(cluster, tmp_path):
    """One rank per node: 8 MB of halo rows each way must pass through node 1's veth (TCP), not shared memory."""
    script = ("from mpi4py import MPI; import numpy as np\n"
              "c = MPI.COMM_WORLD; b = np.ones(1 << 20)\n"
              "c.Sendrecv(b, dest=1 - c.rank, recvbuf=np.empty_like(b), source=1 - c.rank)\n")
    before = tx_bytes(cluster, 1)
    res = launch(cluster, 2, "-c", script)
    assert res.returncode == 0, res.stderr
    assert tx_bytes(cluster, 1) - before > 8 << 20  # the bytes node 1 sent entered the bridge through its veth


def test_a_sweep_across_the_nodes_predicts_with_the_measured_link(cluster, tmp_path):
    case = write_case(tmp_path / "s.yaml", grid={"nx": 512, "ny": 64}, run={"steps": 40, "check_every": 20},
                      backend={"name": "numba"}, output={"dir": str(tmp_path / "o"), "every": None, "vtk": False})
    out = tmp_path / "sweep"
    env = {**cluster, "STENCIL_CACHE_DIR": str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, "-m", "solver", "sweep", "strong", str(case), "--ranks", "2", "-o", str(out),
                          "--launcher", str(CLUSTER)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    sweep = json.loads((out / "sweep.json").read_text())
    row = sweep["rows"][0]
    assert row["status"] == "ok" and row["predicted_seconds_per_step"] > 0
    assert any("measured between two nodes" in n for n in sweep["model"]), sweep["model"]
    rec = json.loads((out / row["record"]).read_text())
    assert {p["host"] for p in rec["resources"]["placement"]} == {"node1", "node2"}
