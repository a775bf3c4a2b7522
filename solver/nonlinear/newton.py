"""Newton's method for a nonlinear steady state (k(T), radiation), with the existing multigrid inside: the time loop's
`iterate` (solver.core.loop), one loop step per Newton iteration, so the loop's stops, checks, checkpoints, progress
and timers are those of every multigrid run.

One iteration from u (R: solver.nonlinear.operator):

    eta = the forcing term (solver.nonlinear.forcing: Eisenstat-Walker's choice 2, or newton.forcing)
    linearise R at u: the faces' K, A, B and the diagonal D; the multigrid's diagonal sigma = D / kappa on every
        level (its faces, transfers and levels are built once: Multigrid.set_sigma)
    solve -J v = R(u) by GMRES (solver.nonlinear.gmres) to |R + J v|_2 <= eta |R|_2, preconditioned by one multigrid
        cycle of the Kirchhoff-scaled operator followed by a division by kappa (operator module docstring)
    line search (newton.line_search: backtracking): u + lambda v, lambda = 1 first, then a safeguarded quadratic
        model of |R(u + lambda v)|^2 (lambda shrinks by 0.1 to 0.5 a trial), until |R(u + lambda v)|_2 <= (1 - 1e-4
        lambda (1 - eta_reached)) |R(u)|_2 (Eisenstat and Walker's test for inexact steps) with every absolute
        temperature above zero where radiation or a power law needs one; MAX_TRIALS without: the iteration ends,
        "line search failed" (the record says so; the field is the last accepted iterate)

The run's residual (what run.tolerance and the stop rules see, and what the record lists for every iteration) is
max |R(u)|, the max norm, exact in any reduction order: the same on every rank count.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ..core import stops
from ..core.errors import InputError
from ..core.timing import Timer
from ..multigrid.cycle import Multigrid, _exchange, settings_of
from ..multigrid.dot import dot
from .forcing import forcing
from .gmres import Gmres
from .linear import linear_case
from .operator import Operator

ARMIJO = 1e-4  # the line search's sufficient decrease (Dennis and Schnabel's alpha)
MAX_TRIALS = 30  # step lengths tried before the line search gives up (the last about 1e-9 at the halving bound)
SHRINK = (0.1, 0.5)  # each trial's step is this fraction of the last at least and at most (the quadratic model's guard)
FLOOR_ASK = 1e-6  # Newton's floor test (Newton._at_floor) is made once max |R| is below this fraction of the first's
SIGMA_LAG = 0.2  # the levels' diagonal is rebuilt only where some point's moved by more than this fraction of itself
# since the last build (gathering and coarsening it costs about a cycle; GMRES works with the exact Jacobian, so a
# lagging preconditioner only costs iterations where it has moved far). Measured (tools/nonlinear_bench.py's plate at
# 63^2 and 255^2, die_kT, radiating_plate): rebuilds 4, 6, 4, 5 at 0 -> 2, 2, 1, 3 at 0.2, the Newton and GMRES
# iterations and the cycles unchanged


def device_kernels(backend, comm, owned):
    """The GPU's kernels (solver.backends.cupy_nl) where one rank drives a GPU: the levels' diagonal is then made,
    compared and coarsened on the device, only the coarsest level read back; else None (host arrays, gathered)."""
    fused = backend.nonlinear_kernels(owned)
    return fused if backend.on_gpu and comm.size == 1 and fused is not None else None


class Newton:
    def __init__(self, layout, comm, backend, t: float = 0.0):
        case = layout.case
        self.case, self.comm, self.backend = case, comm, backend
        self.plan = layout.plan  # solver.core.events.Plan: each step's length (the balance reads it)
        self.blocks = list(layout.blocks)
        self.dtype = np.dtype(case.numerics.dtype)
        self.lincase = linear_case(case)
        self.settings = settings_of(self.lincase, 0.0, 1.0)
        self.kind = case.multigrid.cycle
        self.mg = Multigrid(replace(layout, case=self.lincase), comm, backend, self.settings, self.kind, t=t,
                            sigma=np.zeros(case.shape))
        g0 = self.mg.grids[0]
        self.op = Operator(case, self.lincase, g0, g0.place.block, backend, t)
        lay = g0.layout
        new = lambda: backend.zeros(lay.shape, aligned=lay.owned[2])  # noqa: E731
        self.R, self.Rt, self.v, self.pz, self.spare = new(), new(), new(), new(), new()
        self.count = case.grid.nx * case.grid.ny
        n = case.newton
        self.gmres = Gmres(backend, comm, lay, g0.owned, self.count, n.restart, self.dtype)
        self.norms: list[float] = []  # max |R| of every iterate (reduced over ranks), the first one's included
        self.local = None  # this rank's max |R(u)| of the current u (None: not computed yet)
        self.kappa_R = None  # (kappa, kappa') at the u of R (Operator.last_kappa): what linearising there reuses
        self.KR, self.KRt = self.op.kappa_buffers(), self.op.kappa_buffers()  # where R's and Rt's kappa are made
        self.norm2 = None  # |R(u)|_2 over every rank
        self.log: list[dict] = []  # one entry per iteration: what the record says of it
        self.ended: str | None = None  # "line_search" when the line search found no step ("floor" at the floor)
        self.floor: float | None = None  # the rounding floor measured then
        self.cycles = 0  # multigrid cycles in all (one per GMRES iteration: solver.nonlinear.gmres)
        self.linear_iterations = 0  # GMRES iterations in all
        self.steps_newton: list[int] = []  # implicit steps: each one's Newton iterations
        self.shift = None  # implicit steps: s = c / (theta dt) on the device (time_step)
        self.shift_dt = None  # the step length it was made for (a step shortened to land on an event)
        self.source_key = None  # the sources' weights g0 holds now (implicit steps)
        self.last = None  # implicit steps: the relative residual the last step reached
        varies = bool(self.op.films) or self.op.face_e > 0 or bool(self.op.laws and (  # (some rank's: every rank takes the same path)
            case.physics.faces is not None or self.op.d_lin is not None or self.op.d_g is not None))
        self.sigma_fixed = not comm.allmax(1.0 if varies else 0.0)
        self.sigma_set = False
        self.sent = None  # this rank's part of the diagonal the levels hold now (host; the device's with `device`)
        self.spare_sigma = None  # an array the next linearisation's diagonal may be written in (not `sent`)
        self.device = device_kernels(backend, comm, g0.owned)
        self.restored = None  # a restart's: the levels' diagonal to build first

    # what the loop and the run ask of an iterate ---------------------------------------------------------------
    @property
    def levels(self):
        return self.mg.levels

    @property
    def grids(self):
        return self.mg.grids

    def adopt(self, u, u_new):
        """The run's fields into the finest level; the initial field's absolute temperatures checked."""
        views = self.mg.adopt(u, u_new)
        lowest = -self.comm.allmax(-self.op.lowest_kelvin(self.mg.grids[0].u))
        if lowest <= 0:
            scale = self.case.units.temperature
            raise InputError(f"initial: the initial field reaches {lowest - self.op.offset:.6g} {scale} "
                             f"({lowest:.6g} K), at or below absolute zero, where radiation and a power-law k(T) need "
                             "absolute temperatures; give an initial field above it (e.g. initial: {kind: constant, "
                             "value: ...})")
        return views

    def views(self):
        return self.mg.views()

    def state(self) -> dict:
        """Beyond u and the residual history the checkpoint keeps: the diagonal the multigrid's levels hold (this rank's
        owned block), from which the lagging preconditioner goes on (SIGMA_LAG)."""
        if self.sent is None:
            return {}
        return {"newton_sigma": self.sent if isinstance(self.sent, np.ndarray) else self.sent.get()}

    def restore(self, fields: dict) -> None:
        """A restart: the levels' diagonal as the checkpointed run had it (built at the first linearisation)."""
        self.restored = fields.get("newton_sigma")

    def resume(self, r0: float | None, residuals) -> None:
        """A restart: the max-norm history the checkpoint kept (what the forcing terms follow from)."""
        if r0 is not None:
            self.norms = [r0] + [float(r) for _, r in residuals]

    def warm_up(self) -> None:
        """Compile the kernels one cycle uses (numba's JIT, CUDA modules) before the timed loop: preconditioning
        cycles from a zero right-hand side (they leave the field alone)."""
        be, u = self.backend, self.mg.grids[0].u
        self._linearise(u, Timer())  # (the levels' diagonal: held points' own, not zero)
        be.clear(self.pz)
        be.clear(self.spare)
        self._residual(self.Rt, u, Timer(), self.KRt)  # (and the verbs of an iteration: residual, product, trial,
        self._apply(self.Rt, self.spare, Timer())  # the lag's test; what they write is scratch, written again later)
        self.op.trial(self.Rt, u, self.dtype.type(0.0), self.spare)
        if self.sent is not None:
            self.op.moved(self.sent, self.sent)
        self.scale()  # (the rounding floor's reductions: CuPy compiles them at first use, 0.29 s at 8192^2 on an H100)
        for zero in (self.Rt, self.R):  # (R and Rt swap at each accepted step: where cycles are graphs, one for each,
            be.clear(zero)  # captured here rather than inside the solve)
            self.pz, self.spare = self.mg.precondition(self.pz, self.spare, zero, Timer())
        be.synchronize()

    trivial = property(lambda self: self.mg.trivial)
    mode = property(lambda self: self.mg.mode)
    depth = 1

    @property
    def schedule(self) -> str:
        return "Newton iterations; each linear step GMRES preconditioned by " + self.mg.schedule

    def sent(self) -> int:
        return self.mg.messages()

    def stats(self) -> dict:
        return self.mg.stats()

    def messages(self) -> int:
        return self.mg.messages()

    def close(self) -> None:
        self.op.close()
        self.mg.close()

    def describe(self) -> list[dict]:
        return self.mg.describe()

    def facts(self) -> dict:
        """What the record says of the Newton iterations that ran (solver.results.solver)."""
        n = self.case.newton
        return {"jacobian": n.jacobian, "forcing": "eisenstat-walker" if n.forcing is None else n.forcing,
                "line_search": n.line_search, "restart": n.restart, "max_linear": n.max_linear,
                "iterations": self.log, "linear_iterations": self.linear_iterations,
                "cycles": self.cycles, "ended": self.ended, "newton_per_step": self.steps_newton or None,
                "preconditioner": "one multigrid cycle of the Kirchhoff-scaled linear operator per GMRES iteration"}

    # the residual -------------------------------------------------------------------------------------------------
    def _ready(self, u, timer, fill) -> None:
        """u's ghost layers: the neighbours' by exchange, the physical sides' by `fill`."""
        grid, be = self.mg._at(0, timer), self.backend
        if grid.ex is not None:
            _exchange(grid.ex, grid.view(u))
        if fill.rules:
            be.timed(timer, lambda: be.fill(u, fill))

    def _residual(self, out, u, timer, into=None) -> None:
        grid = self.mg.grids[0]
        self._ready(u, timer, grid.fill)
        self.backend.timed(timer, lambda: self.op.residual(out, u, into))

    def residual_norm(self, timer) -> float:
        """This rank's max |R(u)| (the loop reduces it over the ranks)."""
        if self.local is None:
            g0 = self.mg.grids[0]
            self._residual(self.R, g0.u, timer, self.KR)
            self.kappa_R = self.op.last_kappa
            self.local = self.backend.max_abs(self.R, g0.owned)
        return self.local

    def scale(self) -> float:
        """The largest magnitude this rank's residual is computed from (the rounding floor's scale)."""
        return self.op.largest_term(self.mg.grids[0].u, self.kappa_R if self.local is not None else None)

    def _dot(self, a, b, timer, largest=None) -> float:
        return dot(self.backend, self.comm, a, b, self.mg.grids[0].owned, self.count, timer, largest)

    # one iteration -----------------------------------------------------------------------------------------------
    def cycle(self, timer) -> None:
        """One Newton iteration of the steady state (module docstring)."""
        if self.ended is not None:
            return
        self.log.append(self._iterate(timer, self.case.run.tolerance))
        self._at_floor(timer)

    def _at_floor(self, timer) -> None:
        """A steady state's iterate whose residual is within the dtype's rounding floor ends the iteration ("floor"):
        a Newton step from there changes u by rounding (the linear multigrid waits for its residual to stall
        instead: there a check costs one cycle, here a linearisation, a linear solve and a line search). The floor's
        scale (a reduction and a kappa sweep) is asked only once the residual has fallen FLOOR_ASK below the first."""
        if self.ended is not None or self.norms[-1] > FLOOR_ASK * self.norms[0]:
            return
        floor = stops.rounding_floor(self.dtype, self._reduced(self.scale(), timer))
        if self.norms[-1] <= floor:
            self.ended, self.floor = "floor", floor

    def _iterate(self, timer, tolerance: float | None) -> dict:
        """One Newton iteration on the operator as it stands (a steady state's R, or an implicit step's G); returns
        what the record says of it."""
        g0, n = self.mg.grids[0], self.case.newton
        local = self.residual_norm(timer)
        if not self.norms:
            self.norms = [self._reduced(local, timer)]
        if self.norm2 is None:
            top = self._reduced(local, timer)
            self.norm2 = math.sqrt(max(self._dot(self.R, self.R, timer, top * top), 0.0))
        eta = forcing(self.norms, float(np.finfo(self.dtype).eps), tolerance, n.forcing)
        cycles = self.cycles
        self._linearise(g0.u, timer, self.kappa_R)
        its, reached = self.gmres.solve(self.v, self.R, lambda out, v: self._apply(out, v, timer),
                                        lambda out, r: self._precondition(out, r, timer), eta, n.max_linear, timer,
                                        self.norm2)
        self.linear_iterations += its
        step, trials = self._search(reached, timer)
        timer.level = None
        return {"iteration": len(self.log) + 1, "eta": eta, "linear_iterations": its, "linear_relative": reached,
                "cycles": self.cycles - cycles, "step": step, "trials": trials, "residual_2": self.norm2}

    # explicit steps ------------------------------------------------------------------------------------------------
    @property
    def explicit(self) -> bool:
        return self.case.physics.equation == "heat" and self.case.physics.scheme == "explicit"

    def explicit_step(self, span, timer) -> None:
        """u^(n+1) = u^n + dt R(u^n) / c: k(T) and radiation at the old field. Before it, the field's own stability
        limit, min over the plate of c / (its four faces' K(u) + D(u)), is checked against dt (a NumericalError, exit 4,
        where the field has moved past it); held points take their value."""
        from ..core import sources
        from ..core.errors import NumericalError

        case, op, be, g0 = self.case, self.op, self.backend, self.mg.grids[0]
        step, dt = span.step, span.dt
        key = sources.step_weights(case, span)
        if key != self.source_key:
            op.set_source(span)
            self.source_key = key
        if self.shift is None or self.shift_dt != dt:  # here: dt / c, and 1 / hd at held points (u + R / hd = T)
            self.shift, self.shift_dt = op.explicit_weight(dt), dt
        u, new = g0.u, g0.t
        self._ready(u, timer, g0.fill)
        be.timed(timer, lambda: op.linearise(u, jacobian=False))
        limit = 1.0 / self._reduced(op.stiffest(), timer)
        if dt > limit:
            raise NumericalError(f"physics.dt: {dt:.6g} is above the explicit limit {limit:.6g} the field reached at "
                                 f"step {step} (k(T) and radiation's slope grow with it); set physics.dt below "
                                 f"{limit:.4g} or use physics.scheme: backward-euler")
        self.backend.timed(timer, lambda: op.residual(self.R, u))
        be.timed(timer, lambda: op.explicit_update(new, u, self.R, self.shift))
        if g0.fill.rules:  # the new field's walls, which the energy balance reads before the next step readies it
            be.timed(timer, lambda: be.fill(new, g0.fill))
        self.last = self._update_size(new, u)
        g0.u, g0.t = new, u
        self.local = None

    def _update_size(self, new, u) -> float:
        """max |u^(n+1) - u^n| over this rank's points (the loop's NaN check reads it)."""
        r0, r1, c0, c1 = self.mg.grids[0].owned
        xp = self.op.xp
        with self.op.stream:
            return float(xp.max(xp.abs(new[r0:r1, c0:c1] - u[r0:r1, c0:c1]))) if r1 > r0 and c1 > c0 else 0.0

    # implicit steps ------------------------------------------------------------------------------------------------
    def time_step(self, span, tol: float, most: int, timer) -> tuple[int, float, float, str]:
        """One implicit step from u^n (the field now) by Newton's method: G(u) = R(u) - s u + b = 0 with s = c /
        (theta dt) and b = s u^n + ((1 - theta) / theta) R(u^n) (backward Euler: theta 1; Crank-Nicolson: 1/2; the
        step's sources in R at the scheme's weights), iterated until max |G| / max |G(u^n)| < tol, `most`
        iterations, or a failed line search. Returns (Newton iterations, max |G(u^n)|, the relative residual reached,
        why it ended: "tolerance", "max_cycles", "line_search" or "overflow"), as Multigrid.time_step does."""
        from ..core import sources
        from ..core.physics import THETA

        case, op, be, g0 = self.case, self.op, self.backend, self.mg.grids[0]
        dt, theta = span.dt, THETA[case.physics.scheme]
        key = sources.step_weights(case, span)
        if key != self.source_key:
            op.set_source(span)
            self.source_key = key
        if self.shift is None or self.shift_dt != dt:
            self.shift, self.shift_dt = op.capacity(1.0 / (theta * dt)), dt
        op.shift = None
        self.local = self.norm2 = None
        u = g0.u
        self._ready(u, timer, g0.fill)
        if theta < 1.0:
            self._residual(self.Rt, u, timer)
        with op.stream:
            extra = self.shift * op.owned_part(u)
            if theta < 1.0:
                extra = extra + ((1.0 - theta) / theta) * op.owned_part(self.Rt)
        op.shift, op.extra = self.shift, extra
        self.norms, self.ended = [], None
        r0 = self._reduced(self.residual_norm(timer), timer)
        self.norms = [r0]
        rel, count, why = (0.0 if r0 == 0 else 1.0), 0, None
        while rel >= tol and why is None:
            if count == most:
                why = "max_cycles"
                break
            self._iterate(timer, tol)
            count += 1
            rel = self.norms[-1] / r0
            if rel != rel or rel == float("inf"):
                why = "overflow"
            elif self.ended is not None:
                why, self.ended = self.ended, None
        self.steps_newton.append(count)
        self.last = rel
        return count, r0, rel, why or "tolerance"

    def _reduced(self, local: float, timer) -> float:
        t = time.perf_counter()
        r = self.comm.allmax(local)
        timer.add("wait", t)
        return r

    def _linearise(self, u, timer, kappa=None) -> None:
        """The Jacobian's data at u, and the multigrid's diagonal on every level (gathered: the levels are global).
        kappa: as Operator.linearise's."""
        jacobian = self.case.newton.jacobian == "newton"
        self.backend.timed(timer, lambda: self.op.linearise(u, jacobian, kappa))
        if self.sigma_fixed and self.sigma_set:
            return
        t = time.perf_counter()
        mine = self.op.sigma(self.spare_sigma, self.device)
        if self.restored is not None:  # a restart: the levels as they were, then the lag's test as it would have run
            restored = np.asarray(self.restored, dtype=np.float64)
            self._build(restored if self.device is None else self.device.cp.asarray(restored), timer, t)
            self.restored, t = None, time.perf_counter()
        if self.sent is not None:  # the preconditioner lags while its diagonal moves little (GMRES has the exact J)
            moved = self.op.moved(mine, self.sent)
            t = timer.add("other", t)
            if self._reduced(moved, timer) <= SIGMA_LAG:
                self.spare_sigma = mine  # (not kept: the next linearisation may write there)
                return
        self.spare_sigma = self.sent  # (the levels no longer hold it)
        self._build(mine, timer, t)

    def _build(self, mine: np.ndarray, timer, t: float) -> None:
        """The levels' diagonal from every rank's part (gathered: the levels are global)."""
        self.sent = mine
        t = timer.add("other", t)
        if self.device is not None:  # one rank on a GPU: the whole, on the device (Multigrid.set_sigma's device),
            with self.op.stream:  # on the stream the diagonal was made on (the backend's own)
                self.mg.set_sigma(mine, self.device)
            self.sigma_set = True
            timer.add("other", t)
            return
        parts = self.comm.allgather(mine)
        t = timer.add("wait", t)
        ny, nx = self.case.shape
        if len(parts) == 1 and parts[0].shape == (ny, nx):  # one rank: its part is the whole
            whole = parts[0]
        else:
            whole = np.zeros((ny, nx))
            for b, part in zip(self.blocks, parts):
                whole[b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = part
        self.mg.set_sigma(whole)
        self.sigma_set = True
        timer.add("other", t)

    def _apply(self, out, v, timer) -> None:
        """out = -J v (v's ghosts by the homogeneous rules)."""
        self._ready(v, timer, self.mg.grids[0].zero_fill)
        self.backend.timed(timer, lambda: self.op.apply(out, v))

    def _precondition(self, out, r, timer) -> None:
        """out = (one multigrid cycle from zero on r) / kappa. Where cycles are graph replays (one GPU: solver.multigrid.
        graphs), r is first copied into one field (Rt, free while GMRES runs): a graph is keyed by the fields its cycle
        starts from, and GMRES hands each of its basis vectors in turn, so every new vector was a new capture (8 of 13
        cycles captured in a small run, each costing more than the cycle)."""
        if self.mg.graphs is not None and r is not self.Rt:
            be, whole = self.backend, (0, self.Rt.shape[0], 0, self.Rt.shape[1])
            be.timed(timer, lambda: be.scale(self.Rt, self.dtype.type(1.0), r, whole))
            r = self.Rt
        self.pz, self.spare = self.mg.precondition(self.pz, self.spare, r, timer)
        self.cycles += 1
        self.backend.timed(timer, lambda: self.op.unscale(out, self.pz))
        self.mg._at(0, timer)

    def _search(self, reached: float, timer) -> tuple[float, int]:
        """The accepted step length and the trials it took (module docstring); 0 where none was found."""
        g0, be, n = self.mg.grids[0], self.backend, self.case.newton
        f0 = self.norm2
        slope = -2.0 * f0 * f0  # d/d lambda |R(u + lambda v)|^2 at 0 for an exact Newton step
        lam, t = 1.0, self.dtype.type
        for trial in range(1, MAX_TRIALS + 1):
            u, trial_u = g0.u, g0.t
            low = []
            be.timed(timer, lambda: low.append(self.op.trial(trial_u, u, t(lam), self.v)))
            self._residual(self.Rt, trial_u, timer, self.KRt)
            trial_kappa = self.op.last_kappa
            local = be.max_abs(self.Rt, g0.owned)
            top = self._reduced(local, timer)  # max |R| of the trial: its square is the dot's largest term
            f = math.sqrt(max(self._dot(self.Rt, self.Rt, timer, top * top), 0.0))
            lowest = -self._reduced(-low[0], timer)
            fine = math.isfinite(f) and lowest > 0
            if n.line_search == "none" or (fine and f <= (1.0 - ARMIJO * lam * (1.0 - min(reached, 1.0))) * f0):
                self._accept(f, local, top)
                self.kappa_R, self.KR, self.KRt = trial_kappa, self.KRt, self.KR
                return lam, trial
            phi, phi0 = f * f, f0 * f0
            model = -slope * lam * lam / (2.0 * (phi - phi0 - slope * lam)) if fine else SHRINK[1] * lam
            lam = min(max(model, SHRINK[0] * lam), SHRINK[1] * lam)
        floor = stops.rounding_floor(self.dtype, self._reduced(self.scale(), timer))
        self.ended = "floor" if self.norms[-1] <= floor else "line_search"  # (at the floor no step can lower it)
        self.floor = floor
        return 0.0, MAX_TRIALS

    def _accept(self, f: float, local: float, top: float) -> None:
        """The trial becomes the iterate: the fields swap, and so do the residuals (f: |R|_2; local, top: this rank's
        and every rank's max |R|)."""
        g0 = self.mg.grids[0]
        g0.u, g0.t = g0.t, g0.u
        self.R, self.Rt = self.Rt, self.R
        self.norm2 = f
        self.local = local
        self.norms.append(top)

    def balance(self, step: int):
        """The energy balance from this operator's rates (solver.nonlinear.energy)."""
        from .energy import NonlinearBalance

        from ..core.physics import time_step

        g0 = self.mg.grids[0]
        return NonlinearBalance(self.case, g0.place.block, time_step(self.case), step, self.op,
                                lambda: self.mg.grids[0].u, self.plan)
