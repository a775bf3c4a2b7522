"""Probes (output.probes, issue 44): values read back from the snapshots at the same steps (a point on a grid point
bitwise, between points the bilinear value stated in solver/io/probes.py, a region's max, min and mean, a side's
heat flow from the walls' terms, each bitwise as stated there); the same bits on several ranks; a restart continues
the series with no gap and no duplicate; the Python API's Dataset; the report's chart."""

from __future__ import annotations

import math
import os
import signal

import h5py
import numpy as np
import pytest
from conftest import mpirun, needs_mpi, stencil, write_case

from solver import api
from solver.case import load_case
from solver.core import exactsum
from solver.core.errors import Interrupted
from solver.io.outputs import Outputs
from solver.run import Options, Run

PROBES = [
    {"name": "on_point", "kind": "point", "at": [12 / 23.5, 0.5]},  # grid point (row 8, column 11): dx = 1 / 23.5
    {"name": "between", "kind": "point", "at": [0.3141, 0.2718]},
    {"name": "near_wall", "kind": "point", "at": [0.01, 0.6]},
    {"name": "hot", "kind": "max", "region": {"kind": "rectangle", "lower": [0.2, 0.6], "upper": [0.8, 0.95]}},
    {"name": "cold", "kind": "min", "region": {"kind": "disk", "center": [0.5, 0.3], "radius": 0.2}},
    {"name": "avg", "kind": "mean", "region": {"kind": "disk", "center": [0.4, 0.6], "radius": 0.25}},
    {"name": "into_top", "kind": "heat_flow", "side": "top"},
    {"name": "into_left", "kind": "heat_flow", "side": "left"},
]


def probe_case(tmp_path, name="p", **kw):
    sections = {"grid": {"nx": 23, "ny": 17}, "initial": {"kind": "random", "seed": 3},
                "boundary": {"top": 1.0, "left": 0.5, "right": {"kind": "neumann", "flux": 0.3}},
                "run": {"steps": 40, "check_every": 10},
                "output": {"dir": str(tmp_path / f"out_{name}"), "every": 5, "checkpoint_every": 10, "vtk": False,
                           "probes": PROBES}}
    for k, v in kw.items():
        sections[k] = {**sections.get(k, {}), **v}
    return write_case(tmp_path / f"{name}.yaml", **sections)


def probes_csv(out):
    return (out / "probes.csv").read_text()


def test_probes_equal_the_snapshots_read_back(tmp_path):
    """Every fifth step, probes against fields.h5: positions from its dx, dy and origin; the ghost beyond the left
    wall is its Dirichlet value; heat flows are alpha / h^2 (ghost - first) summed exactly, times dx dy."""
    path = probe_case(tmp_path, output={"probe_every": 5})
    Run(load_case(path), options=Options(ceiling=False, quiet=True)).execute()
    out = tmp_path / "out_p"
    ds = api.probes(out)
    with h5py.File(out / "fields.h5") as f:
        u, steps, times = f["u"][()], list(f["step"][()]), list(f["time"][()])
        dx, dy, (x0, y0) = float(f.attrs["dx"]), float(f.attrs["dy"]), f.attrs["origin"]
    assert list(ds["step"].values) == steps and list(ds["time"].values) == times
    ny, nx = u.shape[1:]
    x, y = x0 + dx * np.arange(nx), y0 + dy * np.arange(ny)
    assert x[11] == pytest.approx(12 / 23.5, rel=1e-15) and y[8] == 0.5  # on_point sits on a grid point
    for k in range(len(steps)):
        f = u[k]
        assert ds["on_point"].values[k] == f[8, 11]
        fx, fy = 0.3141 / dx - 1, 0.2718 / dy - 1  # Dirichlet sides on x and y: point j at (j + 1) h
        j, i = math.floor(fx), math.floor(fy)
        a, b = fx - j, fy - i
        bilinear = sum(w * v for w, v in (((1 - b) * (1 - a), f[i, j]), ((1 - b) * a, f[i, j + 1]),
                                          (b * (1 - a), f[i + 1, j]), (b * a, f[i + 1, j + 1])))
        assert ds["between"].values[k] == pytest.approx(bilinear, rel=1e-15, abs=1e-15)
        fx, fy = 0.01 / dx - 1, 0.6 / dy - 1  # between the left wall's ghost (0.5) and the first column
        i, b, a = math.floor(fy), fy - math.floor(fy), fx + 1
        ghost, first = 0.5, f[:, 0]
        near = (1 - b) * ((1 - a) * ghost + a * first[i]) + b * ((1 - a) * ghost + a * first[i + 1])
        assert ds["near_wall"].values[k] == pytest.approx(near, rel=1e-14)
        inside = ((x[None, :] >= 0.2) & (x[None, :] <= 0.8) & (y[:, None] >= 0.6) & (y[:, None] <= 0.95))
        assert ds["hot"].values[k] == f[inside].max()
        disk = (x[None, :] - 0.5) ** 2 + (y[:, None] - 0.3) ** 2 <= 0.2 ** 2
        assert ds["cold"].values[k] == f[disk].min()
        disk = (x[None, :] - 0.4) ** 2 + (y[:, None] - 0.6) ** 2 <= 0.25 ** 2
        assert ds["avg"].values[k] == exactsum.reference(f[disk])  # the order-free sum's definition, bit for bit
        assert ds["avg"].values[k] == pytest.approx(math.fsum(f[disk]) / int(disk.sum()), rel=2e-16)
        top = float(np.sum((1.0 / dy ** 2) * (1.0 - f[-1, :]))) * (dx * dy)  # the energy balance's wall terms
        left = float(np.sum((1.0 / dx ** 2) * (0.5 - f[:, 0]))) * (dx * dy)
        assert ds["into_top"].values[k] == top and ds["into_left"].values[k] == left
    assert ds["hot"].attrs["kind"] == "max" and "rectangle" in ds["hot"].attrs["description"]


@needs_mpi
def test_three_and_two_ranks_write_the_probes_of_one_bitwise(tmp_path):
    path = probe_case(tmp_path, "m", run={"steps": 20})
    one = tmp_path / "one"
    assert stencil(["run", str(path), "-q", "-o", str(one)]).returncode == 0
    for n, extra in ((3, ["--decomposition", "cart"]), (2, [])):
        out = tmp_path / f"r{n}"
        res = mpirun(n, ["run", str(path), "-q", "-o", str(out), *extra])
        assert res.returncode == 0, res.stderr
        assert probes_csv(out) == probes_csv(one), n


@pytest.mark.parametrize("inside", [False, True])
def test_a_restart_continues_the_series_without_gap_or_duplicate(tmp_path, monkeypatch, inside):
    """Stopped by SIGTERM at the first poll from step 50 (a checkpoint there), restarted in place: probes.csv and
    probes.h5 are those of the run that never stopped; numpy's steps read the field, and (inside) numba's time tiles
    sample inside their sweeps."""
    from solver.io import probes as probes_io

    extra = {"backend": {"name": "numba", "threads": 2, "time_tile": 4}, "boundary": {"right": 0.0}} if inside else {}
    path = probe_case(tmp_path, "s", run={"steps": 120}, **extra)
    sweeps = []
    sweep = probes_io.Tap.sweep
    monkeypatch.setattr(probes_io.Tap, "sweep", lambda self, *a: sweeps.append(1) or sweep(self, *a))
    ref = tmp_path / "ref"
    Run(load_case(path, {"--output": str(ref)}), options=Options(ceiling=False, quiet=True)).execute()
    progress = Outputs.progress

    sent = []

    def deliver(self, step):  # at the first poll from step 50 (a slow first batch may shorten the poll period)
        if step >= 50 and not sent:
            sent.append(step)
            os.kill(os.getpid(), signal.SIGTERM)
        progress(self, step)

    monkeypatch.setattr(Outputs, "progress", deliver)
    with pytest.raises(Interrupted):
        Run(load_case(path), options=Options(ceiling=False, quiet=True)).execute()
    monkeypatch.setattr(Outputs, "progress", progress)
    out = tmp_path / "out_s"
    steps = [int(line.split(",")[0]) for line in probes_csv(out).splitlines()[1:]]
    assert steps == list(range(steps[-1] + 1)) and 50 < steps[-1] < 120
    Run(load_case(path), options=Options(ceiling=False, quiet=True, restart=str(out))).execute()
    assert probes_csv(out) == probes_csv(ref)
    with h5py.File(out / "probes.h5") as a, h5py.File(ref / "probes.h5") as b:
        for name in ("step", "time", *(p["name"] for p in PROBES)):
            assert np.array_equal(a[name][()], b[name][()]), name
    assert bool(sweeps) == inside


def test_probes_at_times_with_adaptive_steps_and_the_report_draws_them(tmp_path):
    path = probe_case(tmp_path, "t", physics={"scheme": "backward-euler", "dt": 1e-4},
                      run={"steps": None, "t_end": 0.02, "time_tolerance": 1e-3},
                      output={"every": None, "checkpoint_every": None, "probe_interval": 0.005})
    Run(load_case(path), options=Options(ceiling=False, quiet=True)).execute()
    out = tmp_path / "out_t"
    ds = api.probes(out)
    assert list(ds["time"].values) == [0.0, 0.005, 0.01, 0.015, 0.02]
    res = stencil(["report", str(out)])
    assert res.returncode == 0, res.stderr
    assert (out / "probes.png").exists() and "probes.png" in (out / "report.md").read_text()


def test_probe_input_errors_name_the_field(tmp_path):
    bad = {"same name": [PROBES[0], PROBES[0]], "periodic side": [{"name": "p", "kind": "heat_flow", "side": "top"}],
           "empty region": [{"name": "r", "kind": "mean", "region": {"kind": "disk", "center": [0.51, 0.52],
                                                                   "radius": 0.001}}]}
    needles = {"same name": "output.probes.1.name", "periodic side": "output.probes.0.side",
               "empty region": "output.probes.0.region"}
    for label, probes in bad.items():
        boundary = {"top": {"kind": "periodic"}, "bottom": {"kind": "periodic"}} if label == "periodic side" else {}
        path = write_case(tmp_path / "b.yaml", output={"probes": probes}, boundary=boundary)
        res = stencil(["run", str(path)])
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (label, res.stderr)
        assert needles[label] in res.stderr, (label, res.stderr)
        assert not (tmp_path / "out_b").exists()


def test_probes_sampled_inside_time_tiles_equal_the_fields(tmp_path, monkeypatch):
    """numba's time tiles sample the steps' probes as they compute them (no batch ends there: solver.io.probes.Tap):
    every probe the same bits as numpy's steps sampled from the field, for steps inside a tile, at a tile's end, in
    the sweeps of one step that take a batch's sampled last steps, by count and at times; on two threads and one, with tiles of 4 and 3 steps (and shorter ones)."""
    from solver.io import probes as probes_io

    sweeps = []
    sweep = probes_io.Tap.sweep
    monkeypatch.setattr(probes_io.Tap, "sweep", lambda self, *a: sweeps.append(a[1]) or sweep(self, *a))
    base = {"grid": {"nx": 37, "ny": 29}, "initial": {"kind": "random", "seed": 5},
            "boundary": {"top": 1.0, "left": 0.5, "bottom": -0.25}, "run": {"steps": 47, "check_every": 10},
            "output": {"vtk": False, "fields": False, "probes": PROBES + [
                {"name": "corner", "kind": "point", "at": [0.999, 0.001]},
                {"name": "into_bottom", "kind": "heat_flow", "side": "bottom"},  # (a row side at the first row,
                {"name": "into_right", "kind": "heat_flow", "side": "right"},  # a column side in the last column tile)
                {"name": "low", "kind": "mean", "region": {"kind": "rectangle", "lower": [0.0, 0.0],
                                                          "upper": [1.0, 0.3]}}]}}
    runs = {"numpy": {"backend": {"name": "numpy"}},
            "tiles of 4, 2 threads": {"backend": {"name": "numba", "threads": 2, "time_tile": 4}},
            "tiles of 3, 1 thread": {"backend": {"name": "numba", "threads": 1, "time_tile": 3}}}
    for how in ({"probe_every": 1}, {"probe_every": 3}, {"probe_interval": 7.3e-5}):
        csv = {}
        for label, extra in runs.items():
            name = f"i{len(csv)}"
            path = write_case(tmp_path / f"{name}.yaml", **{**base, **extra, "output": {
                **base["output"], **how, "dir": str(tmp_path / f"out_{name}")}})
            before = len(sweeps)
            Run(load_case(path), options=Options(ceiling=False, quiet=True, overwrite=True)).execute()
            assert (len(sweeps) > before) == (label != "numpy"), (label, how)  # sampled inside the sweeps
            csv[label] = probes_csv(tmp_path / f"out_{name}")
        steps = [int(line.split(",")[0]) for line in csv["numpy"].splitlines()[1:]]
        assert len(steps) > 5 and steps[-1] >= 47, how  # (steps landing on probe times add steps)
        for label in runs:
            assert csv[label] == csv["numpy"], (label, how)


def test_a_backend_that_samples_no_probes_inside_its_steps_refuses_a_tap(tmp_path):
    """Only numba's time tiles sample inside a batch (samples_inside); elsewhere the loop ends a batch at each probe
    step, and a tap handed to advance() anyway is refused, not ignored: numpy, and numba where a side refills its
    ghosts (plain steps)."""
    from solver.backends import registry
    from solver.core.boundary import make_fill
    from solver.core.decomp import decompose
    from solver.core.field import padded_field
    from solver.core.initial import initial_block
    from solver.core.physics import weights
    from solver.io.probes import Sampler, Tap

    neumann = {"kind": "neumann", "flux": 0.3}
    for name, backend, boundary in (("numpy", {}, {}), ("numba", {"time_tile": 4}, {"right": neumann})):
        case = load_case(probe_case(tmp_path, name, backend={"name": name, **backend}, boundary=boundary))
        be = registry()[name](case.backend, case.numerics.dtype, 1)
        block = decompose(case.shape, (1, 1), 0)
        be.boundary = make_fill(case, block)
        u = be.asarray(padded_field(case, block, initial_block(case, block)))
        w = weights(case).cast(case.numerics.dtype)
        be.prepare(u, u.copy(), w)
        assert not be.samples_inside(block.padded), name
        tap = Tap(Sampler(case, block), [1, 2])
        with pytest.raises(RuntimeError, match="samples no probes inside"):
            be.advance(u, u.copy(), w, 2, block.everything(), tap=tap)
        a, _ = be.advance(u.copy(), u.copy(), w, 2, block.everything())
        assert np.isfinite(be.to_host(a)).all(), name
