"""The sections that say how a case runs rather than what it is: `run`, `multigrid`, `numerics`, `backend`,
`parallel` and `output`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ..core.limits import MAX_THREADS, MAX_TIME_TILE
from .base import MAX_COUNT, MAX_LENGTH, MAX_VALUE_CHARS, VTK_AUTO_MAX_POINTS, Section
from .probes import Probe
from .units import Time

LAPLACE_STEPS = 1000  # laplace with run.steps null: the most iterations or cycles


class Run(Section):
    steps: int | None = Field(None, ge=0, le=MAX_COUNT, description=(
        "heat: the number of steps (or give t_end instead: one of the two); laplace: the most iterations or cycles "
        f"(null: {LAPLACE_STEPS})"))
    t_end: Time | None = Field(None, gt=0, le=MAX_LENGTH, description=(
        "heat: the time the run ends at, instead of steps (the last step is shortened to land on it); required "
        "with time_tolerance"))
    time_tolerance: float | None = Field(None, gt=0, lt=1, description=(
        "implicit heat: adaptive steps (TR-BDF2, a PI controller) that keep each step's estimated error "
        "max|e| / max|u|, as it will stand when the field is next seen (an output or probe time, t_end), below "
        "this; null: fixed steps of physics.dt"))
    dt_min: Time | None = Field(None, gt=0, le=MAX_LENGTH, description=(
        "adaptive steps: the shortest step (the run fails rather than go below it; steps landing on an event may "
        "be shorter); null: t_end x 1e-12"))
    dt_max: Time | None = Field(None, gt=0, le=MAX_LENGTH, description="adaptive steps: the longest step; null: none")
    until: Literal["end", "steady"] = Field("end", description=(
        "heat: end: run to t_end or steps; steady: stop earlier once the field changes by less than steady_rate "
        "per unit time (t_end or steps still bound the run)"))
    steady_rate: float = Field(1e-6, gt=0, le=MAX_LENGTH, description=(
        "until steady: the largest change max|u(t + dt) - u(t)| / dt (units of u per unit time) that counts as "
        "steady"))
    tolerance: float | None = Field(None, gt=0, lt=1, description=(
        "laplace: stop when the relative residual max|g - A u| / max|g - A u_0| (max norm, the initial field's "
        "residual as the unit) falls below it; null: jacobi runs all steps, multigrid until the residual stops "
        "falling (the floating-point floor). Implicit heat: the relative residual each step's solve reaches "
        "(the step's own initial residual as the unit); null: 1e-8, and with adaptive steps 0.1 x time_tolerance"))
    check_every: int = Field(100, ge=1, le=MAX_COUNT, description="steps between convergence and NaN/Inf checks")
    warmup: int = Field(1, ge=0, le=MAX_COUNT, description="first steps timed apart and excluded from the solve time")


class Multigrid(Section):
    """physics.solver: multigrid (solver/multigrid): cycles of weighted Jacobi sweeps on coarser grids."""

    cycle: Literal["V", "W", "F"] = Field("V", description="V, W or F cycles (F: an F-cycle then a V-cycle below)")
    pre: int = Field(2, ge=0, le=16, description="smoothing sweeps before the coarse-grid correction")
    post: int = Field(2, ge=0, le=16, description="smoothing sweeps after it")
    coarsest: int = Field(64, ge=1, le=4096, description=(
        "most points of the coarsest level, which is solved directly (its operator's inverse)"))
    smoother: Literal["chebyshev", "jacobi"] = Field("chebyshev", description=(
        "chebyshev: per-sweep weights that damp the level's high frequencies best (one sweep: 4/5); "
        "jacobi: every sweep weighted by omega"))
    omega: float = Field(0.8, gt=0, lt=2, description="smoother jacobi: the weight of every sweep")
    max_cycles: int = Field(50, ge=1, le=10000, description="implicit heat: the most cycles one step's solve may take")
    krylov: Literal["auto", "none", "cg"] = Field("auto", description=(
        "cg: conjugate gradients preconditioned by one cycle per iteration (symmetric cycles: pre = post, V or W), "
        "robust across large jumps of alpha; none: plain cycles; auto: cg where alpha is a field, none otherwise"))


class Numerics(Section):
    dtype: Literal["float32", "float64"] = "float64"


class BackendSettings(Section):
    name: Literal["numpy", "numba", "cupy"] = "numba"
    threads: int | None = Field(None, ge=1, le=MAX_THREADS, description="numba threads per rank; null = cores / ranks on the node")
    time_tile: int | None = Field(None, ge=1, le=MAX_TIME_TILE, description=(
        "steps fused per pass (temporal blocking). numba: one sweep through memory; under MPI also the halo "
        "depth, exchanged once per tile; null = the stored `stencil bench --tune` choice, else the deepest tile "
        "up to 8 whose recomputed rows stay within 1/8 of a block's. cupy: steps per launch of wave/wave2/wave2a, "
        "at most 16 (chip: any), under MPI also the halo depth; null = tuned or 8 (chip: 256). Neumann sides and a periodic axis one rank spans take "
        "plain steps. 1 = off"))
    kernel: str | None = Field(None, max_length=100, description=(
        "cupy only: naive | tiled | rows | vec | expr | wave | wave2 | wave2a | chip; null = tuned, else wave2a (chip "
        "where the field fits on the chip, vec with time_tile 1)"))
    block: list[int] | None = Field(None, min_length=2, max_length=2, description=(
        "cupy only: [bx, by] threads (naive, tiled), [threads, rows per thread] (rows, vec) or [threads, rows per "
        "warp] (wave, wave2); null = tuned/default"))


class Parallel(Section):
    decomposition: Literal["rows", "cart"] = "rows"
    halo: Literal["blocking", "nonblocking", "overlap"] = "overlap"
    dims: list[int] | None = Field(None, min_length=2, max_length=2, description="cart only: [py, px]")
    transport: Literal["auto", "staged", "cuda-aware", "nccl"] = Field(
        "auto", description="GPU halos: through pinned host memory, device buffers to MPI, or NCCL"
    )
    share_gpus: bool = Field(False, description="allow more ranks per node than GPUs")
    balance: Literal["none", "dynamic"] = Field(
        "none", description="dynamic: move rows between ranks by their measured speed (rows, CPU backends)"
    )
    balance_every: int = Field(50, ge=1, le=MAX_COUNT, description="steps between balance checks (balance: dynamic)")


class Output(Section):
    dir: str | None = Field(None, max_length=MAX_VALUE_CHARS, description="result directory; null = output/<name>")
    every: int | None = Field(None, ge=1, le=MAX_COUNT, description=(
        "steps between snapshots; null = first and last only (with adaptive steps any step may then be seen, so each "
        "step's error is judged where it arises: output.times or output.interval let it be judged there)"))
    times: list[Time] | None = Field(None, max_length=100_000, description=(
        "heat: snapshots at these times (increasing, within [0, t_end]): steps are shortened to land on them"))
    interval: Time | None = Field(None, gt=0, le=MAX_LENGTH, description=(
        "heat: a snapshot every `interval` of time (0, interval, 2 interval, ... up to the end), steps landing on them"))
    fields: bool = Field(True, description="write the snapshots to fields.h5 (and fields.xdmf); false: the record "
                                           "and timings only (what sweep points write unless `--fields`)")
    vtk: bool | None = Field(None, description=f"null = on up to {VTK_AUTO_MAX_POINTS} points per snapshot")
    checkpoint_every: int | None = Field(None, ge=1, le=MAX_COUNT)
    checkpoint_interval: Time | None = Field(None, gt=0, le=MAX_LENGTH, description=(
        "heat: a checkpoint every `checkpoint_interval` of time, steps landing on those times"))
    probes: list[Probe] = Field(default_factory=list, max_length=1000, description=(
        "named samples of the field over time, written to probes.csv and probes.h5: {name, kind: point, at: [x, y]} "
        "(bilinear between grid points), {name, kind: max | min | mean, region: {kind: rectangle, lower, upper} or "
        "{kind: disk, center, radius}} (over the grid points inside), {name, kind: heat_flow, side} (heat entering "
        "through that side per unit time)"))
    probe_every: int | None = Field(None, ge=1, le=MAX_COUNT, description="steps between probe samples; null: every step")
    probe_interval: Time | None = Field(None, gt=0, le=MAX_LENGTH, description=(
        "heat: probe samples every `probe_interval` of time instead (steps landing on those times)"))
    trace: bool = False
    residual: bool = Field(False, description=(
        "laplace: also write the final residual g - A u (unit diagonal: what one Jacobi sweep would add) to "
        "residual.h5, laid out as fields.h5 (one snapshot), for ParaView or h5py"))


