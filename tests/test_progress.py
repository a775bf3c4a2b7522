"""Progress without a terminal: plain `step N/M` lines from rank 0 at least every 10% or 10 s, none with
--quiet; the note before a first numba compilation."""

import io
import re
import subprocess
import sys

from conftest import ROOT, clean_env, mpirun, needs_mpi, stencil, write_case

from solver.io.outputs import Progress

NUMBER = r"[\d.]+(?:e[-+]\d+)?"
LINE = re.compile(rf"^step (\d+)/(\d+) \(\d+%\), [\d.]+ s elapsed, {NUMBER} MLUP/s$")


def lines(text):
    return [m for m in (LINE.match(s) for s in text.splitlines()) if m]


def test_a_line_every_tenth_of_the_steps():
    out = io.StringIO()  # not a terminal
    p = Progress(1000, True, points=100, stream=out)
    for step in range(10, 1001, 10):
        p.update(step)
    got = [int(m.group(1)) for m in lines(out.getvalue())]
    assert got == list(range(100, 1001, 100))


def test_a_line_every_ten_seconds_when_steps_are_slow():
    clock = iter(range(0, 10_000, 6))  # each poll 6 s later
    out = io.StringIO()
    p = Progress(10**6, True, points=10**6, stream=out, clock=lambda: next(clock))
    for step in range(1, 6):
        p.update(step)  # 1 step per 6 s: far from 10% of the steps, but 10 s pass every other poll
    found = lines(out.getvalue())
    assert [int(m.group(1)) for m in found] == [2, 4]
    assert out.getvalue().splitlines()[0] == "step 2/1000000 (0%), 12.0 s elapsed, 0.167 MLUP/s"


def test_rate_counts_from_the_start_of_the_loop():
    clock = iter([0.0, 100.0, 101.0])  # created; loop starts at 100 s (after compile); first poll at 101 s
    out = io.StringIO()
    p = Progress(100, True, points=10**6, stream=out, clock=lambda: next(clock))
    p.start(0)
    p.update(10)
    assert out.getvalue() == "step 10/100 (10%), 1.0 s elapsed, 10 MLUP/s\n"


def test_quiet_or_other_ranks_print_nothing():
    out = io.StringIO()
    p = Progress(100, False, points=10, stream=out)
    p.compiling("compiling kernels: 5-40 s the first time")
    for step in range(0, 101, 10):
        p.update(step)
    assert out.getvalue() == ""


def test_cli_prints_lines_through_a_pipe_and_none_with_quiet(tmp_path):
    case = write_case(tmp_path / "p.yaml", grid={"nx": 64, "ny": 48}, run={"steps": 200, "check_every": 10})
    res = stencil(["run", str(case)])
    assert res.returncode == 0, res.stderr
    got = [int(m.group(1)) for m in lines(res.stdout)]
    assert got and all(b - a <= 20 for a, b in zip([0] + got, got)) and got[-1] >= 180, res.stdout
    quiet = stencil(["run", str(case), "--overwrite", "--quiet"])
    assert quiet.returncode == 0 and not lines(quiet.stdout)


@needs_mpi
def test_under_mpirun_rank_0_alone_prints_the_lines(tmp_path):
    case = write_case(tmp_path / "m.yaml", grid={"nx": 64, "ny": 48}, run={"steps": 100, "check_every": 10})
    res = mpirun(2, ["run", str(case)])
    assert res.returncode == 0, res.stderr
    got = [int(m.group(1)) for m in lines(res.stdout)]
    assert got == sorted(set(got)) and len(got) >= 9  # once each: one rank prints


def test_a_cold_numba_cache_is_announced(tmp_path):
    code = ("from solver.backends.numba_backend import NumbaBackend; from solver.case import BackendSettings; "
            "print(NumbaBackend(BackendSettings(name='numba'), 'float64', 1).compile_note())")
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env=clean_env(NUMBA_CACHE_DIR=str(tmp_path / "empty")), timeout=120)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout.startswith("compiling kernels: 5-40 s the first time")


def test_polls_are_fitted_to_the_step_time_so_lines_keep_coming(tmp_path):
    """Slow steps: the loop shortens its poll period after the warm-up step (POLL_SECONDS), so a line comes
    every LINE_SECONDS although 10% of the steps takes longer (both limits scaled down 40-100x here)."""
    case = write_case(tmp_path / "s.yaml", grid={"nx": 64, "ny": 48}, run={"steps": 150, "check_every": 150},
                      output={"vtk": False})
    code = ("import sys; import solver.core.loop as L; from solver.io import outputs; L.POLL_SECONDS = 0.05; "
            "outputs.Progress.LINE_SECONDS = 0.1; from solver.cli import main; sys.argv = ['stencil', 'run', "
            f"{str(case)!r}]; main()")
    env = clean_env(STENCIL_SLOW_RANK="0:0.0005")  # test hook: 0.5 ms per row and step, so >= 24 ms per step
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = [int(m.group(1)) for m in lines(res.stdout)]
    # unfitted, the polls (and so the lines) come every 10 steps (poll_period for 150 steps); fitted, every
    # 2 steps at most (0.05 s / 24 ms), and a line is due after 0.1 s: about every 4 steps
    assert len(steps) >= 15 and max(b - a for a, b in zip([0] + steps, steps)) < 10, res.stdout


def test_the_rate_leaves_output_out_as_the_summary_does():
    """Output written inside the loop (snapshots, checkpoints) is not stepping: the line's rate leaves it out,
    as the summary's MLUP/s does (which the run table says)."""
    clock = iter([0.0, 0.0, 10.0])
    out = io.StringIO()
    p = Progress(100, True, points=10**6, stream=out, clock=lambda: next(clock))
    p.start(0)
    p.exclude(5.0)  # a snapshot took 5 s of the 10
    p.update(10)
    assert out.getvalue() == "step 10/100 (10%), 10.0 s elapsed, 2 MLUP/s\n"


def test_a_callback_gets_the_lines_figures_instead_of_a_line():
    """The Python API's progress=: a notebook widget or a logger gets (step, total, elapsed, MLUP/s)."""
    clock = iter([0.0, 0.0, 4.0, 8.0])
    seen, out = [], io.StringIO()
    p = Progress(20, True, points=10**6, stream=out, clock=lambda: next(clock), callback=lambda *a: seen.append(a))
    p.start(0)
    p.update(10)
    p.update(20)
    assert seen == [(10, 20, 4.0, 2.5), (20, 20, 8.0, 2.5)] and out.getvalue() == ""


def test_a_stream_that_is_no_terminal_gets_lines():
    """Jupyter's output stream (ipykernel's OutStream) is not a terminal: it gets lines, not a bar that would
    need one. Modelled here by a stream whose isatty() says False, as OutStream's does, and by one without it."""
    class NotebookStream(io.StringIO):
        def isatty(self):
            return False

    for stream in (NotebookStream(), type("Bare", (), {"write": lambda s, x: None, "flush": lambda s: None})()):
        p = Progress(100, True, points=10, stream=stream)
        assert not p.enabled and p.show


RULE = re.compile(rf"^(step|cycle|iteration) (\d+)/(\d+) \(\d+%\), [\d.]+ s elapsed, {NUMBER} "
                  rf"(MLUP/s|steps/s \({NUMBER} cycles/s\)|cycles/s|iterations/s)(, .*)?$")


def test_implicit_steps_follow_the_same_rule_with_their_last_solve():
    """An implicit step is a multigrid solve: its cycles and residual ride on the rule's line, never a line
    per step (200 steps: about 10 lines, not 200)."""
    out = io.StringIO()
    p = Progress(200, True, points=100, stream=out, rate="solves")
    for step in range(1, 201):
        p.solved(step, 3, 1e-9, 1e-8)
        p.update(step)
    text = out.getvalue().splitlines()
    assert len(text) == 10 and all(RULE.match(t) for t in text), text
    assert text[0].startswith("step 20/200 (10%), ") and " steps/s (" in text[0] and "MLUP/s" not in text[0]
    assert text[0].endswith(", last solve 3 cycle(s) to a relative residual 1.00e-09 (tolerance 1e-08)")


def test_multigrid_cycles_follow_the_same_rule_with_the_residual():
    out = io.StringIO()
    p = Progress(100, True, points=100, stream=out, unit="cycle", rate="units")
    for cycle in range(1, 31):
        p.iteration(cycle, 10.0 ** -cycle, 10.0 ** -cycle)
        p.update(cycle)
    text = out.getvalue().splitlines()
    assert [RULE.match(t).group(2) for t in text] == ["10", "20", "30"], text
    assert text[0].startswith("cycle 10/100 (10%)") and "relative residual 1.000e-10" in text[0]
    assert " cycles/s, " in text[0] and "MLUP/s" not in text[0]


def test_an_implicit_run_prints_about_ten_lines_not_one_per_step(tmp_path):
    case = write_case(tmp_path / "i.yaml", grid={"nx": 31, "ny": 31}, run={"steps": 60},
                      physics={"scheme": "backward-euler"}, output={"vtk": False})
    res = stencil(["run", str(case)])
    assert res.returncode == 0, res.stderr
    got = [s for s in res.stdout.splitlines() if s.startswith("step ")]
    assert 5 <= len(got) <= 11 and all(RULE.match(s) and "last solve" in s for s in got), res.stdout
    assert all("steps/s" in s and "MLUP/s" not in s for s in got), res.stdout


def test_no_rate_is_printed_before_a_step_was_timed():
    """A line due before any step after the warm-up was timed leaves the rate out instead of printing 0."""
    clock = iter([0.0, 0.0, 20.0])
    out = io.StringIO()
    p = Progress(100, True, points=10**6, stream=out, clock=lambda: next(clock))
    p.start(5)  # (a restart from step 5: no step taken yet at the first line)
    p.update(5)
    assert out.getvalue() == "step 5/100 (5%), 20.0 s elapsed\n"


def test_steady_and_jacobi_runs_say_what_they_count(tmp_path):
    """Jacobi: `iteration` lines in MLUP/s with the residual (the last update); multigrid: cycles per second; never a
    rate of 0 on a small grid."""
    jac = write_case(tmp_path / "j.yaml", grid={"nx": 31, "ny": 31}, physics={"equation": "laplace"},
                     run={"steps": 400, "check_every": 20}, output={"vtk": False})
    mg = write_case(tmp_path / "g.yaml", grid={"nx": 31, "ny": 31}, physics={"equation": "laplace", "solver": "multigrid"},
                    run={"steps": 30, "tolerance": 1e-13}, output={"vtk": False})
    for path, unit, rate in ((jac, "iteration", "MLUP/s"), (mg, "cycle", "cycles/s")):
        res = stencil(["run", str(path)])
        assert res.returncode == 0, res.stderr
        got = [s for s in res.stdout.splitlines() if RULE.match(s)]
        assert got and all(s.startswith(unit + " ") and rate in s and "relative residual" in s for s in got), res.stdout
        assert not any(re.search(r" 0 (MLUP|cycles)", s) for s in got), res.stdout
