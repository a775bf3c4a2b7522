"""Cross-checks of time as the user gives it: an end time or a number of steps, adaptive steps and their
limits, output and checkpoint times, probes (run and output sections, checked against physics and grid)."""

from __future__ import annotations

from .settings import LAPLACE_STEPS

TIME_FIELDS = ("run.t_end", "run.time_tolerance", "run.dt_min", "run.dt_max", "output.times", "output.interval",
               "output.checkpoint_interval", "output.probe_interval")
ROUNDING = 1e-12  # relative: a time this close to t_end (or 0) counts as on it (output times given in decimals)


def check_time(case) -> None:
    """Every check of this module, in order (called by the case's cross-checks)."""
    if case.physics.equation != "heat":
        _steady_state_only(case)
        return
    _steps_or_end(case)
    _adaptive(case)
    _output_times(case)
    check_probes(case)


def _given(case, dotted: str):
    section, key = dotted.split(".")
    return getattr(getattr(case, section), key)


def _steady_state_only(case) -> None:
    """laplace has no time: the time fields are refused, steps defaults to LAPLACE_STEPS iterations."""
    for name in TIME_FIELDS:
        if _given(case, name) is not None:
            raise ValueError(f"{name}: applies to equation heat (laplace has no time); remove it or set "
                             "physics.equation: heat")
    if case.run.until != "end":
        raise ValueError("run.until: steady applies to equation heat (laplace already stops at its tolerance); "
                         "remove it or use run.tolerance")
    if case.run.steps is None:
        case.run.steps = LAPLACE_STEPS
    check_probes(case)


def _steps_or_end(case) -> None:
    run = case.run
    if run.steps is not None and run.t_end is not None:
        raise ValueError(f"run.t_end: both run.steps ({run.steps}) and run.t_end ({run.t_end:g}) are given; keep one "
                         "(t_end: the time to reach; steps: how many steps of physics.dt)")
    if run.steps is None and run.t_end is None:
        raise ValueError("run.t_end: a heat run needs an end: give run.t_end (the time to reach, e.g. 60) or "
                         "run.steps (how many steps of physics.dt)")


def _adaptive(case) -> None:
    run = case.run
    if run.until == "steady" and case.implicit and run.time_tolerance is None:
        raise ValueError("run.until: steady with an implicit scheme measures each step's change on adaptive steps; "
                         "set run.time_tolerance (e.g. 1e-4), or use physics.scheme: explicit")
    if run.time_tolerance is None:
        for name in ("dt_min", "dt_max"):
            if getattr(run, name) is not None:
                raise ValueError(f"run.{name}: limits adaptive steps; remove it or set run.time_tolerance")
        return
    if not case.implicit:
        raise ValueError("run.time_tolerance: adaptive steps are implicit (TR-BDF2 with multigrid solves); set "
                         "physics.scheme: backward-euler or crank-nicolson, or remove time_tolerance")
    if run.t_end is None:
        raise ValueError(f"run.steps: adaptive steps (run.time_tolerance) take as many steps as the tolerance needs; "
                         f"give run.t_end instead of run.steps ({run.steps})")
    if run.dt_min is not None and run.dt_max is not None and run.dt_min > run.dt_max:
        raise ValueError(f"run.dt_min: {run.dt_min:g} is above run.dt_max {run.dt_max:g}; lower dt_min or raise "
                         "dt_max")
    if run.dt_min is not None and run.dt_min >= run.t_end:
        raise ValueError(f"run.dt_min: {run.dt_min:g} is not below run.t_end {run.t_end:g}; use a smaller dt_min")


def _output_times(case) -> None:
    from ..core.events import end_time

    out, end = case.output, end_time(case)
    if out.times is not None and out.interval is not None:
        raise ValueError("output.times: give output.times or output.interval, not both")
    if out.probe_every is not None and out.probe_interval is not None:
        raise ValueError("output.probe_every: give output.probe_every (steps) or output.probe_interval (time), not both")
    times = out.times or []
    for k, t in enumerate(times):
        if t < 0 or t > end * (1 + ROUNDING):
            raise ValueError(f"output.times: {t:g} (entry {k}) is outside the run's [0, {end:g}]; give times within "
                             "it (or a later run.t_end)")
        if k and t <= times[k - 1]:
            raise ValueError(f"output.times: {t:g} (entry {k}) does not come after {times[k - 1]:g}; sort the times, "
                             "each once")


def check_probes(case) -> None:
    """Names unique and not taken by time or step; points inside the plate; regions covering a grid point; a heat
    flow through a side that is a wall."""
    from ..core.grid import positions, whole
    from ..core.materials import _covers_any

    probes = case.output.probes
    if probes and case.physics.equation != "heat":
        raise ValueError("output.probes: sample the field over time (heat); remove them for laplace (its final "
                         "field is in fields.h5)")
    names = set()
    for k, p in enumerate(probes):
        if p.name in names or p.name in ("time", "step"):
            raise ValueError(f"output.probes.{k}.name: {p.name!r} is taken (by another probe, or time and step); give "
                             "each probe its own name")
        names.add(p.name)
        if p.kind == "point":
            lx, ly = case.grid.lx, case.grid.ly
            x, y = p.at
            if not (0.0 <= x <= lx and 0.0 <= y <= ly):
                raise ValueError(f"output.probes.{k}.at: [{x:g}, {y:g}] is outside the plate [0, {lx:g}] x [0, {ly:g}]; "
                                 "give a point inside it")
        elif p.kind == "heat_flow":
            if getattr(case.boundary, p.side).kind == "periodic":
                raise ValueError(f"output.probes.{k}.side: {p.side} is periodic (heat leaving it enters the opposite "
                                 "side); choose a wall side")
        else:
            y, x = positions(case, *whole(case))
            if not _covers_any(p.region, x, y):
                raise ValueError(f"output.probes.{k}.region: covers no grid point (points lie at x = {x[0]:g} .. "
                                 f"{x[-1]:g}, y = {y[0]:g} .. {y[-1]:g}); move or widen it")
