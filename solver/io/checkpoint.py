"""checkpoint.h5: the state a run can continue from, with any rank count or decomposition.

Layout:
    /u   (ny, nx) in the case dtype: the interior field (no ghost layers) at `step`
    attributes: format = "stencil checkpoint", version = 1, step, time (the field's: solver.core.events), fingerprint
    (JSON: the case fields a restart must match), case (resolved YAML of the run that wrote it),
    ranks, dims, converged, tolerance (NaN when none), initial_residual (laplace: the unit of the relative
    residual; NaN when none), created, writer (fields.hdf5_writer: serial, streamed, mpio), segments (JSON:
    the run's segments up to `step`, solver.io.outputs.segment; a restart's record lists them), clock (adaptive
    steps, JSON: the step controller's state and every step tried so far, solver.core.controller; else empty).
    /residuals (checks, 2) float64: laplace's checks up to `step`, (step, max |residual|) each: multigrid's stop
    rules read this history (solver.core.stops), so a restart decides every later cycle as the run would have.
    /NAME (ny, nx), one per name in the attribute `state` (JSON list): the solver's own fields beyond u that
    decide its next step (laplace with multigrid.krylov cg: cg_r, cg_p, the residual and the search direction).
The boundary (every side's kind and value or flux) lives in the case and in the fingerprint, so a
restart with other boundaries is refused; ghost layers on physical sides are filled from the owned
points by their rules and those facing a neighbour by the first halo exchange, so a restart is bitwise
the uninterrupted run.

Writing is collective: blocks stream to rank 0 in bounded slabs (fields.for_each_block), rank 0 writes
them into a temporary file beside checkpoint.h5, closes and fsyncs it, and renames it over the old one;
a failure at any point leaves the previous checkpoint as it was. The temporary file's skeleton is
written by Python and its data space reserved before HDF5 writes into it (see fields.write_skeleton),
so a full disk is found before any data is written. With parallel HDF5 (hdf5_writer "mpio") rank 0
makes the same skeleton and reservation, then every rank opens the temporary file (driver "mpio": HDF5
allocates the chunks collectively at the open) and writes its own block in one collective write; the
ranks agree that every write succeeded before rank 0 fsyncs and renames. Reading: each rank reads its
own block.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.datafile import named
from ..core.errors import InputError
from ..core.stops import ENDINGS
from .fields import RESERVE_SLACK, chunk_rows, for_each_block, hdf5_writer, write_skeleton
from .safeio import WriteFailed, replaced, reserve, writing

NAME = "checkpoint.h5"
FORMAT = "stencil checkpoint"
VERSION = 1


FILE = "file "  # fingerprint keys of data files: "file physics.source.0.path" -> "sha256:<hex>" of its bytes


def fingerprint(case, dt: float, files: bool = True) -> dict:
    """The case fields a checkpoint's field depends on; a restart must match every one (bitwise). files: with the
    content hash of every data file the case names (solver.core.datafile.named; rank 0 hashes them, the other
    ranks leave them out)."""
    from ..core.boundary import fingerprint as boundary_fingerprint

    g, p = case.grid, case.physics
    fp = {"grid.nx": g.nx, "grid.ny": g.ny, "grid.lx": g.lx, "grid.ly": g.ly, "physics.equation": p.equation,
          **boundary_fingerprint(case), "numerics.dtype": case.numerics.dtype}
    if p.equation == "heat" or case.alpha_field:
        fp["physics.alpha"] = p.alpha if isinstance(p.alpha, float) else p.alpha.model_dump(mode="json")
    if p.equation == "heat":
        fp["physics.dt"] = dt  # resolved: dt null means safety x stable limit
    if p.source:  # absent when there is none, as in checkpoints written before sources existed
        fp["physics.source"] = [t.model_dump(mode="json") for t in p.source]
    if files:  # absent when the case names none, as in checkpoints written before they were hashed
        fp.update({FILE + f.name: digest(f.path) for f in named(case)})
    return fp


def digest(path: str) -> str:
    """'sha256:<hex>' of a file's bytes (read once per process while the file is unchanged)."""
    import os

    st = os.stat(path)
    return _digest(os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _digest(path: str, inode: int, size: int, mtime: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def differences(saved: dict, wanted: dict, paths: dict | None = None) -> list[str]:
    """Each fingerprint entry that differs, in words (a data file's: which file changed; paths: the case's file
    per field, for the message)."""
    out = []
    for k in sorted(set(saved) | set(wanted)):
        if saved.get(k) == wanted.get(k) or (k.startswith(FILE) and k not in wanted):  # (a rank that hashes none)
            continue
        name = k[len(FILE):]
        path = (paths or {}).get(name, "the file")
        if k.startswith(FILE) and k in saved:
            out.append(f"{name}: {path} changed since the checkpoint was written (its content's SHA-256 is not that "
                       "of the file the run read)")
        elif k.startswith(FILE):
            out.append(f"{name}: the checkpoint records no content hash of {path} (written before data files were "
                       "hashed), so its run may have read another file")
        else:
            out.append(f"{k} is {saved.get(k)!r} in the checkpoint but {wanted.get(k)!r} in the case")
    return out


def resolve(path: str | Path) -> Path:
    """A checkpoint file, or a run directory holding checkpoint.h5."""
    p = Path(path)
    return p / NAME if p.is_dir() else p


def saved_case(path: str | Path) -> tuple[dict, Path]:
    """(the resolved case of the run that wrote the checkpoint, with its overrides, as a mapping; the
    directory holding the checkpoint: that run's output directory), for `stencil run --restart DIR` alone."""
    import h5py
    import yaml

    from ..case.loading import load_yaml

    cp = Checkpoint.open(path)
    fix = f"give the case file too: stencil run CASE --restart {path}"
    try:
        with h5py.File(cp.path, "r") as f:
            text = f.attrs["case"]
        data = load_yaml(text if isinstance(text, str) else "")  # as the case file was read (YAML 1.2 numbers)
    except (OSError, KeyError) as exc:
        raise InputError(f"--restart: {cp.path} holds no readable case ({_first_line(exc)}); {fix}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"--restart: {cp.path} holds a case that is not YAML ({_first_line(exc)}); {fix}") from None
    if not isinstance(data, dict):
        raise InputError(f"--restart: {cp.path} holds no case mapping; {fix}")
    return data, cp.directory


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:80]


def _attributes(a, p: Path) -> tuple:
    """(step, time, fingerprint, converged, tolerance, initial_residual) from a checkpoint's attributes, each
    checked: a value of the wrong kind (a negative or fractional step, a fingerprint that is not a JSON
    object...) would continue a wrong run or rewrite the history of the directory's files."""
    def bad(name: str, value, want: str) -> InputError:
        value = value.item() if isinstance(value, np.generic) else value
        return InputError(f"--restart: {p} has attribute {name} = {value!r}, not {want}: the checkpoint is damaged; "
                          "restart from an intact copy")

    step, time, tol = a["step"], float(a["time"]), float(a["tolerance"])
    if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)) or step < 0:
        raise bad("step", step, "a whole number >= 0")
    if not math.isfinite(time) or time < 0:
        raise bad("time", time, "a finite number >= 0")
    fingerprint = json.loads(a["fingerprint"])
    if not isinstance(fingerprint, dict):
        raise bad("fingerprint", a["fingerprint"], "a JSON object")
    converged = a["converged"]
    if not isinstance(converged, (bool, np.bool_)):
        raise bad("converged", converged, "true or false")
    if not (math.isnan(tol) or tol > 0):
        raise bad("tolerance", tol, "a positive number (NaN: none)")
    r0 = float(a.get("initial_residual", np.nan))
    if not (math.isnan(r0) or (math.isfinite(r0) and r0 >= 0)):
        raise bad("initial_residual", r0, "a finite number >= 0 (NaN: none)")
    return int(step), time, fingerprint, bool(converged), None if math.isnan(tol) else tol, None if math.isnan(r0) else r0


def _segments(a, p: Path, step: int) -> tuple:
    """The checkpoint's run segments (solver.io.outputs.segment), each an object with its steps checked;
    a checkpoint written before segments were recorded gets one that says so."""
    if "segments" not in a:
        return ({"first_step": None, "last_step": step, "note": "a checkpoint written before segments were recorded"},)
    segs = json.loads(a["segments"])
    whole = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    for seg in segs if isinstance(segs, list) else [None]:
        if not (isinstance(seg, dict) and whole(seg.get("last_step")) and seg["last_step"] <= step
                and (seg.get("first_step") is None or whole(seg["first_step"]))
                and (seg.get("seconds") is None or (isinstance(seg["seconds"], (int, float)) and math.isfinite(seg["seconds"])))
                and isinstance(seg.get("hosts", []), list)):
            raise InputError(f"--restart: {p} has attribute segments = {str(segs)[:60]!r}, not a list of run "
                             f"segments up to step {step}: the checkpoint is damaged; restart from an intact copy")
    return tuple(segs)


def _residuals(f, p: Path, step: int) -> tuple:
    """The checks' (step, residual) history, each step a whole number after the last and up to `step`, each
    residual finite and >= 0 (a checkpoint written before histories were kept has none: empty)."""
    if "residuals" not in f:
        return ()
    h = f["residuals"]
    shape = getattr(h, "shape", None)  # a group where the dataset belongs: no shape
    data = h[()] if shape and len(shape) == 2 and shape[1] == 2 and shape[0] <= step + 1 else None
    if data is None or not np.all(np.isfinite(data)) or (len(data) and (
            np.any(data[:, 0] != np.round(data[:, 0])) or np.any(data < 0) or np.any(np.diff(data[:, 0]) <= 0)
            or data[-1, 0] > step)):
        raise InputError(f"--restart: {p} has a dataset residuals that is not a history of checks up to step {step}: "
                         "the checkpoint is damaged; restart from an intact copy")
    return tuple((int(k), float(r)) for k, r in data)


def _ended(a, p: Path) -> str | None:
    """The stop rule that ended the run that wrote the checkpoint (attribute `ended`), or None ('' or absent)."""
    ended = a.get("ended", "")
    if ended not in ("", *ENDINGS):
        raise InputError(f"--restart: {p} has attribute ended = {str(ended)[:40]!r}, not one of {', '.join(ENDINGS)} or "
                         "empty: the checkpoint is damaged; restart from an intact copy")
    return ended or None


def _clock(a, p: Path) -> dict | None:
    """Adaptive steps' state (attribute `clock`, JSON): {"controller": {...}, "taken": [...]}, or None."""
    text = a.get("clock", "")
    if not text:
        return None
    try:
        clock = json.loads(text)
    except ValueError:
        clock = None
    if not (isinstance(clock, dict) and isinstance(clock.get("controller"), dict) and isinstance(clock.get("taken"), list)):
        raise InputError(f"--restart: {p} has attribute clock = {str(text)[:40]!r}, not the step controller's state: "
                         "the checkpoint is damaged; restart from an intact copy")
    return clock


def _check_time(cp, case) -> None:
    """The checkpoint lies before the case's end, on one of its steps (fixed steps), with the controller's state
    where the steps adapt."""
    from ..core.events import close, plan_of

    plan = plan_of(case)
    if plan.adaptive:
        if cp.clock is None:
            raise InputError(f"run.time_tolerance: {cp.path} was written by a run of fixed steps; continue it with "
                             "fixed steps (remove run.time_tolerance) or run the case afresh")
        if cp.time >= plan.end or close(cp.time, plan.end):
            raise InputError(f"run.t_end: {plan.end:g} but the checkpoint is already at t = {cp.time:g}; use a "
                             "later run.t_end to continue the run")
        return
    if plan.heat and case.run.t_end is not None and cp.step >= plan.steps:
        raise InputError(f"run.t_end: {plan.end:g} but the checkpoint is already at t = {cp.time:g} (step "
                         f"{cp.step}); use a later run.t_end to continue the run")
    if cp.step >= plan.steps:
        raise InputError(f"run.steps: {plan.steps} but the checkpoint is already at step {cp.step}; "
                         f"use --steps above {cp.step} to continue the run")
    if plan.heat and not close(plan.time(cp.step), cp.time):
        raise InputError(f"--restart: the checkpoint is at step {cp.step}, t = {cp.time:.17g}, but this case's step "
                         f"{cp.step} ends at t = {plan.time(cp.step):.17g} (other output times or an end between "
                         "steps); restart with the output times and t_end of the run that wrote it")


def _state(f, p: Path) -> tuple:
    """The names of the solver's fields the checkpoint holds beside u, each a dataset shaped and typed as /u."""
    import h5py

    names = json.loads(f.attrs.get("state", "[]"))
    u = f["u"]
    if not (isinstance(names, list) and all(isinstance(n, str) and n != "u" and isinstance(f.get(n), h5py.Dataset)
                                            and f[n].shape == u.shape and f[n].dtype == u.dtype for n in names)):
        raise InputError(f"--restart: {p} has attribute state = {str(names)[:60]!r}, not the names of fields laid out "
                         "as /u: the checkpoint is damaged; restart from an intact copy")
    return tuple(names)


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int
    time: float
    fingerprint: dict
    converged: bool
    tolerance: float | None
    shape: tuple[int, int]
    r0: float | None = None  # laplace: the initial field's max residual, the unit of run.tolerance
    segments: tuple = ()  # the segments that led to `step` (dicts), oldest first
    residuals: tuple = ()  # laplace: the checks' (step, max |residual|) up to `step` (the stop rules' history)
    ended: str | None = None  # the stop rule that ended its run (core.stops.ENDINGS): there is nothing to continue
    state: tuple = ()  # names of the solver's own fields beside u (datasets laid out as /u: write_checkpoint)
    clock: dict | None = None  # adaptive steps: the step controller's state and the steps so far (attribute `clock`)

    @classmethod
    def open(cls, path: str | Path) -> Checkpoint:
        import h5py

        p = resolve(path)
        hint = "give the checkpoint.h5 of an earlier run (written with output.checkpoint_every or on SIGTERM)"
        if not p.is_file():
            raise InputError(f"--restart: {p} not found; {hint}")
        try:
            with h5py.File(p, "r") as f:
                a = f.attrs
                if a.get("format") != FORMAT or not isinstance(f.get("u"), h5py.Dataset):
                    raise InputError(f"--restart: {p} is not a stencil checkpoint; {hint}")
                step, time, fingerprint, converged, tol, r0 = _attributes(a, p)
                return cls(p.resolve(), step, time, fingerprint, converged, tol, tuple(f["u"].shape), r0=r0,
                           segments=_segments(a, p, step), residuals=_residuals(f, p, step), state=_state(f, p),
                           ended=_ended(a, p), clock=_clock(a, p))
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise InputError(f"--restart: {p} cannot be read as a checkpoint ({_first_line(exc)}); {hint}") from None

    def check(self, case, dt: float, files: bool = True) -> None:
        """InputError naming every difference that would make the continued run wrong (files: the data files'
        contents too)."""
        wanted = fingerprint(case, dt, files)
        self._refuse(differences(self.fingerprint, wanted, {f.name: f.path for f in named(case)}))
        if self.shape != case.shape:
            raise InputError(f"--restart: {self.path} holds a {self.shape} field, not {case.shape}; it is damaged")
        _check_time(self, case)
        if self.ended:
            why = {"floor": f"its residual reached {case.numerics.dtype}'s rounding floor",
                   "stalled": "its residual stalled far above the rounding floor",
                   "diverged": "its cycles diverged"}[self.ended]
            raise InputError(f"--restart: {self.path}: its run ended at step {self.step} ({why}); there is nothing to "
                             "continue: run the case again without --restart (with other multigrid settings to get "
                             "further)")
        tol = case.run.tolerance
        if self.converged and tol is not None and self.tolerance is not None and tol >= self.tolerance:
            raise InputError(f"run.tolerance: the checkpoint's run converged at step {self.step} (relative residual below "
                             f"{self.tolerance:g}); lower run.tolerance to continue it")

    def _refuse(self, diffs: list[str]) -> None:
        if diffs:
            raise InputError(f"--restart: {self.path} was written for another case: {'; '.join(diffs)}; use the same "
                             "values and data files (the checkpoint's case is in its 'case' attribute) or run without "
                             "--restart")

    def read_block(self, block, name: str = "u") -> np.ndarray:
        """This rank's owned block of the field `name` (u, or one of `state`), read directly from the file."""
        import h5py

        (r0, r1), (c0, c1) = block.rows, block.cols
        try:
            with h5py.File(self.path, "r") as f:
                return f[name][r0:r1, c0:c1]
        except OSError as exc:  # a chunk whose checksum (fletcher32) does not match, a truncated file
            raise InputError(f"--restart: dataset /{name} of {self.path} cannot be read (rows {r0}-{r1 - 1}: "
                             f"{str(exc).splitlines()[0][:80]}): the checkpoint is damaged; restart from an intact "
                             "copy") from None

    @property
    def directory(self) -> Path:
        return self.path.parent


def write_checkpoint(path: Path, comm, blocks, mine: np.ndarray, meta: dict, state: dict | None = None) -> None:
    """Collective. meta: step, time, fingerprint (dict), case (YAML), dims, converged, tolerance, r0, segments,
    residuals. state: the solver's own fields beyond u that decide its next step, by name (this rank's owned
    blocks, the same names on every rank: conjugate gradients' residual and direction), each a dataset of
    its own laid out as /u."""
    fields = {"u": mine, **(state or {})}
    if hdf5_writer(comm) == "mpio":
        return _write_parallel(path, comm, blocks, fields, meta)
    if comm.rank != 0:
        for a in fields.values():
            for_each_block(comm, blocks, a, None)
        return
    with replaced(path, durable=True) as tmp:
        _stream_into(tmp, comm, blocks, fields, meta)


def _stream_into(tmp: Path, comm, blocks, fields: dict, meta: dict) -> None:
    """Rank 0: every field's blocks into the temporary file. A write that fails still receives every later
    block (no rank is left blocked in its send) and is raised at the end."""
    import h5py

    opened, failed = {}, []

    def writer(name: str, dtype):
        def put(b, data) -> None:
            if not opened:  # at the first block: the skeleton, then room for all the data, then HDF5 writes
                _prepare(tmp, comm, blocks[0].shape, dtype, meta, list(fields))
                opened["f"] = h5py.File(tmp, "r+")
            if name not in opened:
                opened[name] = opened["f"][name]
            opened[name][b.rows[0]:b.rows[1], b.cols[0]:b.cols[1]] = data
        return put

    try:
        for name, a in fields.items():
            try:
                for_each_block(comm, blocks, a, None if failed else writer(name, a.dtype))
            except Exception as exc:  # noqa: BLE001 - raised below, once every block has arrived
                failed.append(exc)
    finally:
        if opened:
            opened["f"].close()
    if failed:
        raise failed[0]


def _prepare(tmp: Path, comm, shape, dtype, meta: dict, names: list[str]) -> None:
    """The temporary file's skeleton, written by Python, then room reserved for all of its data."""
    write_skeleton(tmp, lambda f: _create(f, shape, dtype, meta, comm.size, hdf5_writer(comm), names))
    nbytes = math.prod(shape) * dtype.itemsize * len(names)
    reserve(tmp, tmp.stat().st_size + nbytes + nbytes // 32 + RESERVE_SLACK)


def _write_parallel(path: Path, comm, blocks, fields: dict, meta: dict) -> None:
    """Parallel HDF5: rank 0 prepares the temporary file, every rank writes its blocks, rank 0 renames."""
    if comm.rank != 0:
        return _write_block(comm.bcast(None), path, comm, blocks[comm.rank], fields)
    with replaced(path, durable=True) as tmp:
        try:
            _prepare(tmp, comm, blocks[0].shape, fields["u"].dtype, meta, list(fields))
        except Exception:
            comm.bcast(None)  # the other ranks return; collective() reports this error on every rank
            raise
        comm.bcast(str(tmp))
        _write_block(tmp, path, comm, blocks[0], fields)


def _write_block(tmp, path: Path, comm, block, fields: dict) -> None:
    """Collective: every rank writes its own block of every field into `tmp` (None: rank 0 could not prepare it).

    Every rank learns whether every write succeeded; rank 0 raises if any failed, so the temporary
    file is removed and the previous checkpoint stays.
    """
    import h5py

    if tmp is None:
        return
    (r0, r1), (c0, c1) = block.rows, block.cols
    reason = None
    try:
        with writing(path), h5py.File(tmp, "r+", driver="mpio", comm=comm.mpi) as f:
            for name, mine in fields.items():
                d = f[name]  # one Dataset object: f[name] makes a new one each time, without the collective setting
                with d.collective:
                    d[r0:r1, c0:c1] = mine
    except WriteFailed as exc:
        reason = exc.reason
    failed = [r for r in comm.allgather(reason) if r]
    if reason is not None or (failed and comm.rank == 0):
        raise WriteFailed(path, OSError(None, reason or failed[0]))


def _create(f, shape, dtype, meta: dict, ranks: int, writer: str, names: list[str]):
    ny, nx = shape
    for name in names:  # u, then the solver's state; a checksum per chunk, verified by every read (restart)
        f.create_dataset(name, shape=shape, dtype=dtype, chunks=(min(ny, chunk_rows(nx, dtype.itemsize)), nx),
                         fletcher32=True)
    tol = meta.get("tolerance")
    f.attrs.update({"format": FORMAT, "version": VERSION, "step": int(meta["step"]), "time": float(meta["time"]),
                    "fingerprint": json.dumps(meta["fingerprint"]), "case": meta["case"], "ranks": ranks,
                    "dims": list(meta["dims"]), "converged": bool(meta.get("converged", False)),
                    "tolerance": float("nan") if tol is None else float(tol),
                    "initial_residual": float("nan") if meta.get("r0") is None else float(meta["r0"]),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "writer": writer,
                    "segments": json.dumps(meta.get("segments", [])), "state": json.dumps(names[1:]),
                    "ended": meta.get("ended") if meta.get("ended") in ENDINGS else "",
                    "clock": json.dumps(meta["clock"]) if meta.get("clock") else ""})
    f.create_dataset("residuals", data=np.array(meta.get("residuals", []), dtype=np.float64).reshape(-1, 2))
