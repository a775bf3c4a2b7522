"""Where ranks ran: NUMA nodes and last-level cache from /sys (a constructed tree, and this machine's),
and the placement in the record, record.md and the run table."""

import json

from conftest import mpirun, needs_mpi, write_case

from solver.core import machine
from solver.results.record import placement, placement_lines


def fake_sys(tmp_path):
    node, cpu = tmp_path / "node", tmp_path / "cpu"
    for n, cpus in ((0, "0-3"), (1, "4-7")):
        (node / f"node{n}").mkdir(parents=True)
        (node / f"node{n}" / "cpulist").write_text(cpus + "\n")
    for c in range(8):
        for idx, (level, kind, size, shared) in enumerate([(1, "Data", "32K", str(c)), (1, "Instruction", "32K", str(c)),
                                                           (2, "Unified", "1024K", str(c)),
                                                           (3, "Unified", "16384K", "0-3" if c < 4 else "4-7")]):
            d = cpu / f"cpu{c}" / "cache" / f"index{idx}"
            d.mkdir(parents=True)
            for name, text in (("level", str(level)), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
                (d / name).write_text(text + "\n")
    return node, cpu


def test_numa_nodes_and_last_level_cache_from_sys(tmp_path):
    node, cpu = fake_sys(tmp_path)
    assert machine.numa_nodes({1, 2}, node) == [0] and machine.numa_nodes({3, 4}, node) == [0, 1]
    assert machine.numa_nodes({9}, node) == [] and machine.numa_nodes({0}, tmp_path / "none") == []
    assert machine.last_level_cache_bytes({0, 1}, cpu) == 16 << 20  # one shared L3
    assert machine.last_level_cache_bytes({0, 5}, cpu) == 32 << 20  # two L3 instances
    assert machine.last_level_cache_bytes({0}, tmp_path / "none") is None


def test_this_machine_says_something():
    assert machine.numa_text() != "" or not machine.SYS_NODE.exists()
    assert machine.parse_cpulist("0-2,5") == {0, 1, 2, 5}


def test_placement_rows_and_table_name_the_gpu():
    row = {"rank": 1, "host": "h", "affinity": "8-15", "numa": "1",
           "device": {"gpu_index": 1, "gpu_name": "NVIDIA H200", "pci_bus_id": "0000:2A:00.0"}}
    p = placement(row)
    assert p == {"rank": 1, "host": "h", "affinity": "8-15", "numa": "1", "gpu_index": 1, "gpu_name": "NVIDIA H200",
                 "pci_bus_id": "0000:2A:00.0"}
    assert placement_lines([p])[2] == "| 1 | h | 8-15 | 1 | 1 (NVIDIA H200, PCI 0000:2A:00.0) |"


@needs_mpi
def test_a_two_rank_run_records_host_cores_and_numa_per_rank(tmp_path):
    case = write_case(tmp_path / "p.yaml", run={"steps": 10})
    res = mpirun(2, ["run", str(case), "-q"])
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out_p"
    places = json.loads((out / "record.json").read_text())["resources"]["placement"]
    assert [p["rank"] for p in places] == [0, 1] and all(p["host"] and p["affinity"] for p in places)
    assert all(p["numa"] == machine.numa_text() for p in places)  # both ranks on this machine
    md = (out / "record.md").read_text()
    assert "| rank | host | cores | NUMA node | GPU |" in md and "placement" in res.stdout
