"""Sweeps end to end: every point a real `stencil run` (real mpirun for ranks), sweep.csv from the records."""

import csv
import json
import shlex
from pathlib import Path

import pytest
from conftest import mpirun_command, needs_mpi, stencil, write_case

from solver.core.errors import InputError
from solver import sweep as sw

FLOAT_COLUMNS = ["seconds_per_step", "mlups", "load_imbalance", "effective_gbs", "copy_gbs", "fraction_of_copy",
                 "comm_fraction", "wait_fraction"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One bandwidth cache for the module's runs (each configuration is measured once, quickly)."""
    return {"STENCIL_CACHE_DIR": str(tmp_path_factory.getbasetemp() / "stencil-cache"), "STENCIL_BANDWIDTH_MIB": "64"}


def launcher_args() -> list[str]:
    """The launcher the test harness uses, with its flags (Open MPI: --oversubscribe, as root)."""
    exe, *flags = mpirun_command()
    return ["--launcher", exe, "--launcher-args", shlex.join(flags)]


def tiny_case(path: Path, **kw) -> Path:
    return write_case(path, grid={"nx": 24, "ny": 16}, run={"steps": 30, "check_every": 10},
                      backend={"name": "numba"}, verify=True, **kw)


def read_csv(d: Path) -> list[dict]:
    with open(d / "sweep.csv", newline="") as f:
        return list(csv.DictReader(f))


def assert_rows_match_records(d: Path) -> list[dict]:
    """Every number in sweep.csv is the one in that point's own record.json."""
    rows = read_csv(d)
    for r in rows:
        if r["status"] != "ok":
            continue
        rec = json.loads((d / r["record"]).read_text())
        tp, t = rec["throughput"], rec["timings"]
        mine = {**tp, "load_imbalance": t["load_imbalance"], "comm_fraction": t["comm_fraction"]["max"],
                "wait_fraction": t["wait_fraction"]["max"]}
        for col in FLOAT_COLUMNS:
            assert float(r[col]) == mine[col], (col, r[col], mine[col])
        assert int(r["ranks"]) == rec["resources"]["ranks"] and int(r["threads"]) == rec["resources"]["threads_per_rank"]
        assert (int(r["global_ny"]), int(r["global_nx"])) == (rec["input"]["ny"], rec["input"]["nx"])
        ranks = list(csv.DictReader(open(d / Path(r["record"]).parent / "timings.csv")))
        assert float(r["compute_fraction"]) == max(
            float(k["compute"]) / (float(k["loop"]) - float(k["io"])) for k in ranks)
        assert 0 < float(r["compute_fraction"]) <= 1
        assert r["verified"] == "True" and rec["correctness"]["passed"] is True
    return rows


@needs_mpi
def test_weak_sweep_grows_the_grid_with_the_ranks(tmp_path, env):
    case = tiny_case(tmp_path / "weak.yaml")
    out = tmp_path / "weak"
    p = stencil(["sweep", "weak", str(case), "--ranks", "1,2", "-o", str(out), *launcher_args()], env=env)
    assert p.returncode == 0, p.stderr
    rows = assert_rows_match_records(out)
    assert [(r["ranks"], r["global_ny"], r["global_nx"], r["local_ny"], r["local_nx"]) for r in rows] == [
        ("1", "16", "24", "16", "24"), ("2", "32", "24", "16", "24")]
    assert float(rows[0]["speedup"]) == 1.0 and float(rows[0]["efficiency"]) == 1.0
    t1, t2 = float(rows[0]["seconds_per_step"]), float(rows[1]["seconds_per_step"])
    assert float(rows[1]["speedup"]) == pytest.approx(2 * t1 / t2) and float(rows[1]["efficiency"]) == pytest.approx(t1 / t2)
    r2 = json.loads((out / rows[1]["record"]).read_text())
    r1 = json.loads((out / rows[0]["record"]).read_text())
    assert r2["input"]["dx"] == pytest.approx(r1["input"]["dx"]) and r2["input"]["dy"] == pytest.approx(r1["input"]["dy"])
    assert r2["input"]["dt"] == pytest.approx(r1["input"]["dt"])  # same spacing, same stable step
    md = (out / "sweep.md").read_text()
    assert "weak scaling: every rank owns nx x ny = 24 x 16 points" in md and "| 2 | 1 | 24 x 32 | 24 x 16 |" in md
    assert "small" in md  # 16 x 24 per rank: the sweep says halo traffic and latency dominate
    meta = json.loads((out / "sweep.json").read_text())
    assert [p["label"] for p in meta["points"]] == ["r1", "r2"] and all(
        run["exit_code"] == 0 for p in meta["points"] for run in p["runs"])
    assert (out / "cases" / "r2.yaml").exists() and meta["launcher"].startswith(mpirun_command()[0])


def test_threads_sweep_reports_a_failed_point_and_exits_with_its_code(tmp_path, env):
    """Threads 1, 2, 3 with numba's pool fixed at 2: the 3-thread point fails (exit 2), the others stand."""
    case = tiny_case(tmp_path / "thr.yaml")
    out = tmp_path / "thr"
    p = stencil(["sweep", "threads", str(case), "--threads", "1,2,3", "-o", str(out), "--repeats", "2"],
                env={**env, "NUMBA_NUM_THREADS": "2"})
    assert p.returncode == 2, p.stdout + p.stderr
    assert "some sweep points failed" in p.stderr and p.stderr.count("\n") == 1
    rows = assert_rows_match_records(out)
    assert [(r["threads"], r["status"]) for r in rows[:2]] == [("1", "ok"), ("2", "ok")]
    assert rows[2]["status"].startswith("failed (exit 2)") and "numba's pool of 2" in rows[2]["status"]
    assert all(r["repeats_ok"] == "2" for r in rows[:2])
    assert float(rows[0]["time_min"]) <= float(rows[0]["seconds_per_step"]) <= float(rows[0]["time_max"])
    md = (out / "sweep.md").read_text()
    assert "failed (exit 2)" in md and "thread scaling: one process" in md
    # the terminal: a line per point as it ends, then a table that fits 100 columns; no None anywhere
    assert len([line for line in p.stdout.splitlines() if " ms/step, " in line and " MLUP/s, " in line]) == 4
    lines = p.stdout.splitlines()
    table = lines[next(i for i, ln in enumerate(lines) if "threads sweep:" in ln):]
    assert max(len(line) for line in table) <= 100, p.stdout  # the table and the notes (the point lines may be long)
    assert "None" not in p.stdout and "None" not in md and "…" not in p.stdout


def test_a_failed_point_does_not_stop_the_sweep(tmp_path, env, monkeypatch):
    """The first point's case is broken after planning: it fails, the second still runs and is reported."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = sw.Settings(kind="threads", case=tiny_case(tmp_path / "f.yaml"), counts=[1, 2], output=tmp_path / "f")
    base, launcher = sw.base_case(s), sw.resolve_launcher(s)
    points = sw.plan(s, base, s.output)
    points[0].case_file.write_text("grid: {nx: 0}\n")
    seen = []
    sw.run_points(s, launcher, points, lambda p, k, run: seen.append((p.label, run["exit_code"])))
    assert seen == [("t1", 2), ("t2", 0)]
    rows = [sw.row(p, s.output) for p in points]
    assert rows[0]["status"].startswith("failed (exit 2)") and "grid.nx" in rows[0]["status"]
    assert rows[1]["status"] == "ok" and rows[1]["seconds_per_step"] > 0


def test_bad_sweep_input_is_one_line_and_exit_2(tmp_path, env):
    case = tiny_case(tmp_path / "b.yaml")
    numpy_case = write_case(tmp_path / "np.yaml", backend={"name": "numpy"})
    out = tmp_path / "b"
    for args, needle in [
        (["strong", str(case), "--ranks", "2,1", "-o", str(out)], "--ranks"),
        (["strong", str(case), "--ranks", "1,x", "-o", str(out)], "--ranks"),
        (["strong", str(case), "--ranks", "1", "--launcher", "no-such-mpirun", "-o", str(out)], "--launcher"),
        (["threads", str(numpy_case), "--threads", "1,2", "-o", str(out)], "backend.name"),
        (["strong", str(tmp_path / "missing.yaml"), "--ranks", "1", "-o", str(out)], "case file not found"),
        (["weak", str(case), "--ranks", "1", "--decomposition", "diagonal", "-o", str(out)], "--decomposition"),
        (["strong", str(case), "--ranks", "1", "--balance", "sometimes", "-o", str(out)], "--balance"),
        (["weak", str(case), "--ranks", "1", "--decomposition", "cart", "--balance", "dynamic", "-o", str(out)],
         "parallel.balance"),
    ]:
        p = stencil(["sweep", *args], env=env)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and needle in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr and not out.exists()


def test_a_backend_missing_here_fails_before_any_point(tmp_path, env):
    from solver.backends import registry

    if registry()["cupy"].unavailable() is None:
        pytest.skip("cupy works here")
    out = tmp_path / "g"
    p = stencil(["sweep", "strong", str(tiny_case(tmp_path / "g.yaml")), "--ranks", "1", "--backend", "cupy",
                 "-o", str(out)], env=env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "backend.name" in p.stderr and not out.exists()


def test_an_existing_sweep_is_not_overwritten(tmp_path, env):
    out = tmp_path / "s"
    out.mkdir()
    (out / "sweep.json").write_text("{}")
    p = stencil(["sweep", "threads", str(tiny_case(tmp_path / "o.yaml")), "--threads", "1", "-o", str(out)], env=env)
    assert p.returncode == 2 and "--overwrite" in p.stderr and (out / "sweep.json").read_text() == "{}"
    assert sorted(x.name for x in out.iterdir()) == ["sweep.json"]


# planning without running --------------------------------------------------------------------------

def test_weak_cart_grows_both_directions_and_keeps_the_spacing(tmp_path):
    case = write_case(tmp_path / "c.yaml", grid={"nx": 30, "ny": 20, "lx": 2.0, "ly": 1.0},
                      parallel={"decomposition": "cart"})
    s = sw.Settings(kind="weak", case=case, counts=[1, 2, 4, 6, 8])
    base = sw.base_case(s)
    for n, dims in [(1, [1, 1]), (2, [2, 1]), (4, [2, 2]), (6, [3, 2]), (8, [4, 2])]:
        data, ranks, threads = sw.point_case(base, s, n)
        g = data["grid"]
        assert data["parallel"]["dims"] == dims and ranks == n and threads == 1
        assert (g["ny"], g["nx"]) == (20 * dims[0], 30 * dims[1])
        assert g["lx"] / (g["nx"] + 1) == pytest.approx(2.0 / 31) and g["ly"] / (g["ny"] + 1) == pytest.approx(1.0 / 21)
        assert data["output"]["vtk"] is False


def test_counts_and_speedup_definitions():
    assert sw.parse_counts("1, 2,4", "--ranks") == [1, 2, 4]
    for bad in ("", "0,1", "2,2", "a"):
        with pytest.raises(InputError):
            sw.parse_counts(bad, "--ranks")
    rows = [{"status": "ok", "ranks": n, "threads": 1, "workers": n, "seconds_per_step": t}
            for n, t in [(2, 1.0), (4, 0.6), (8, 0.5)]]
    sw.add_speedup(rows, "strong")
    assert [r["speedup"] for r in rows] == [2.0, 2 / 0.6, 4.0] and rows[2]["efficiency"] == 0.5
    sw.add_speedup(rows, "weak")
    assert [r["speedup"] for r in rows] == [2.0, 4 / 0.6, 16.0] and rows[2]["efficiency"] == 2.0


def test_saturation_is_found_where_the_ceiling_stops_growing():
    rows = [{"status": "ok", "workers": w, "copy_gbs": g} for w, g in [(1, 13), (4, 41), (8, 71), (16, 76)]]
    note = sw.saturation(rows, "copy_gbs", "memory bandwidth")[0]
    assert "stops growing after 8 worker(s)" in note and "+7%" in note
    growing = sw.saturation(rows[:3], "copy_gbs", "memory bandwidth")[0]
    assert "not saturated" in growing


def _bytes_under(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


@pytest.mark.parametrize("keep", [False, True])
def test_points_keep_records_not_fields_unless_asked_and_the_disk_bound_comes_first(tmp_path, env, keep):
    """A threads sweep of 2 points x 2 repeats: its first line is the disk bound; without --fields no point
    keeps a fields.h5, with it every one does; what was written stays under the bound."""
    case = write_case(tmp_path / "d.yaml", grid={"nx": 96, "ny": 64}, run={"steps": 20, "check_every": 10},
                      backend={"name": "numba"}, output={"every": 5})
    out = tmp_path / "d"
    p = stencil(["sweep", "threads", str(case), "--threads", "1,2", "--repeats", "2", "-o", str(out),
                 *(["--fields"] if keep else [])], env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((out / "sweep.json").read_text())
    bound = res["disk_estimate"]["bytes"]
    first = p.stdout.splitlines()[0]
    assert first.startswith(f"disk: at most {sw._size(bound)} for 4 run(s)"), first
    assert ("--fields keeps" in first) != keep
    fields = sorted(out.rglob("fields.h5"))
    assert len(fields) == (4 if keep else 0) and len(list(out.rglob("record.json"))) == 4
    field_bytes = 96 * 64 * 8 * 5  # 5 snapshots (0, 5, 10, 15, 20) uncompressed, per run
    assert bound == 4 * ((field_bytes if keep else 0) + sw.RUN_FILE_BYTES + sw.RANK_FILE_BYTES)
    assert _bytes_under(out / "t1") + _bytes_under(out / "t2") <= bound
