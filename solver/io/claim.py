"""The output directory: checked before anything is written, then claimed for the run's life.

1. check_output_dir (read-only, during set-up's checks): not the working directory nor a parent of it;
   a directory, or creatable; writable; no symbolic link where stencil writes (a planted `vtk ->
   elsewhere` would send the files out of the directory); results already there only with
   --overwrite; no input of this run (the case file, initial.path, --restart) among the files
   --overwrite removes or a restart rewrites; when appending, every file the run continues (see
   solver.io.continued).
2. claim (rank 0, once every check passed on every rank): the directory is made, then locked: an
   exclusive flock on LOCK, which also holds the holder's host, pid and start time. A second run on the
   same directory is refused (exit 2) naming that holder. A lock dies with its process, so the lock of a
   run killed outright (SIGKILL, a node lost) is taken over, with a note naming it. Under the lock the
   checks run again (a run that just finished may have written results); then --overwrite removes the
   files this project wrote (the MANIFEST of the last run, and the names stencil gives its files:
   never another file, never through a symbolic link), and temporary files of dead processes
   (`.NAME.tmpPID.EXT`, left by a kill during a write) are removed.
3. At the end rank 0 writes MANIFEST (every file of the run) and releases the lock (the lock file goes).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError, OutputError
from .outputs import RESULT_FILES, holds_results
from .safeio import describe, write_text
from .vtk import NAME as VTK_NAME

LOCK = ".stencil.lock"
MANIFEST = ".stencil-manifest.json"
TEMPORARY = re.compile(r"^\..+\.tmp\d+(\.[A-Za-z0-9]+)?$")  # safeio.temporary_name
PIECE = re.compile(r"^u_\d{8}_\d+\.vti$")  # vtk/u_SSSSSSSS/u_SSSSSSSS_R.vti
STORAGE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO)  # exit 5, not 2
FIX = "choose another --output"


def output_step(fn, what: str):
    """Run a set-up step that writes: an OSError becomes the OutputError (exit 5) naming the file."""
    try:
        return fn()
    except OSError as exc:
        raise OutputError(f"{describe(exc)} while {what}; free disk space, make it writable or {FIX}") from None


# 1. checks, before anything is written ---------------------------------------------------------------

def check_not_working_dir(d: Path) -> None:
    """Every rank: output.dir must be a directory of its own (`name: ..`, `-o ""`, `-o .` are not)."""
    here, there = Path.cwd().resolve(), d.resolve()
    if here == there or there in here.parents:
        what = "the working directory" if here == there else f"a parent of the working directory ({here})"
        raise InputError(f"output.dir: {str(d) or repr(str(d))} is {what}; stencil needs a directory of its own "
                         f"for its files, e.g. output/NAME; {FIX}")


def check_output_dir(d: Path, *, appending: bool, overwrite: bool, inputs: dict[str, Path],
                     locked: bool = False) -> None:
    """Rank 0, read-only: InputError (exit 2) or OutputError (exit 5: read-only filesystem) before any write."""
    if d.is_symlink() and not d.exists():
        raise InputError(f"output.dir: {d} is a symbolic link to {os.readlink(d)}, which does not exist; {FIX}")
    if d.exists() and not d.is_dir():
        raise InputError(f"output.dir: {d} exists and is not a directory; {FIX}")
    _check_writable(d)
    if not d.exists():
        return
    _check_links(d)
    if not locked:
        _check_not_held(d / LOCK)
    if not appending and holds_results(d) and not overwrite:
        raise InputError(f"output.dir: {d} already holds results; pass --overwrite to replace them, "
                         "or choose another --output directory")
    _check_inputs(d, inputs, appending, overwrite)


def _check_inputs(d: Path, inputs: dict[str, Path], appending: bool, overwrite: bool) -> None:
    """No input of the run among the files of `d` it will remove or rewrite: every file stencil wrote there
    with --overwrite, and when appending (a restart into its own directory) too, since a continued run
    rewrites case.yaml, the listings and the record and cuts fields.h5 back; the checkpoint it continues
    from is the one input it may replace (at its next checkpoint, once it has read it)."""
    if not (overwrite or appending):
        return
    ours = {p.resolve() for p in our_files(d)}
    verb = "the restart rewrites" if appending else "--overwrite would remove"
    for option, path in inputs.items():
        if path.resolve() in ours and not (appending and option == "--restart"):
            alone = f"continue with `stencil run --restart {d}` (the checkpoint's own case), " if appending else ""
            raise InputError(f"{option}: {path} is a file of output.dir {d} that {verb}; {alone}move or copy it out "
                             f"of {d} first, or {FIX}")


def _check_writable(d: Path) -> None:
    existing = next((p for p in (d, *d.absolute().parents) if p.exists()), Path("/"))
    if not existing.is_dir():
        raise InputError(f"output.dir: cannot create {d} ({existing} is a file); {FIX}")
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise OutputError(f"output.dir: cannot write {existing} (Read-only file system); remount it read-write "
                          f"or {FIX}")
    if not os.access(existing, os.W_OK | os.X_OK):
        verb = "is not writable" if existing == d else f"cannot be created ({existing} is not writable)"
        raise InputError(f"output.dir: {d} {verb}; choose a writable --output")


def _check_links(d: Path) -> None:
    """No symbolic link where stencil writes: it would send files out of the directory."""
    vtk = d / "vtk"
    places = [d / name for name in (*RESULT_FILES, "vtk", LOCK, MANIFEST)]
    if vtk.is_dir() and not vtk.is_symlink():
        places += [p for p in vtk.iterdir() if VTK_NAME.match(p.name)]
    for p in places:
        if p.is_symlink():
            raise InputError(f"output.dir: {p} is a symbolic link (to {os.readlink(p)}); stencil writes only real "
                             f"files and folders in its output directory; remove the link or {FIX}")


def our_files(d: Path) -> list[Path]:
    """The files of `d` this project wrote: the MANIFEST's entries and the names stencil gives its files,
    found without following a symbolic link. Directories are not listed (clear() removes them when empty)."""
    found = [d / n for n in (*RESULT_FILES, MANIFEST) if _plain(d / n)]
    found += _temporaries(d)
    vtk = d / "vtk"
    if _real_dir(vtk):
        for p in vtk.iterdir():
            if VTK_NAME.match(p.name) and _plain(p):
                found.append(p)
            elif VTK_NAME.match(p.name) and _real_dir(p):
                found += [q for q in p.iterdir() if PIECE.match(q.name) and _plain(q)]
    return sorted(set(found) | set(_manifest_entries(d)))


def _plain(p: Path) -> bool:
    return p.is_file() and not p.is_symlink()


def _real_dir(p: Path) -> bool:
    return p.is_dir() and not p.is_symlink()


def _temporaries(d: Path) -> list[Path]:
    dirs = [d]
    if _real_dir(d / "vtk"):
        dirs += [d / "vtk", *(p for p in (d / "vtk").iterdir() if VTK_NAME.match(p.name) and _real_dir(p))]
    return [p for folder in dirs for p in folder.iterdir() if TEMPORARY.match(p.name) and _plain(p)]


def _manifest_entries(d: Path) -> list[Path]:
    """Entries of the last run's MANIFEST that are plain files inside d, reached through real folders."""
    from ..core.readers import read_json

    try:
        names = read_json(d / MANIFEST, None, "").get("files", [])
    except (InputError, AttributeError):
        return []
    out = []
    for name in names if isinstance(names, list) else []:
        parts = Path(str(name)).parts
        if not parts or Path(str(name)).is_absolute() or any(part in ("..", ".") for part in parts):
            continue
        p = d.joinpath(*parts)
        if all(_real_dir(d.joinpath(*parts[:k])) for k in range(1, len(parts))) and _plain(p):
            out.append(p)
    return out


# 2. the claim -----------------------------------------------------------------------------------------

@dataclass
class Claim:
    """Rank 0's hold on the output directory; release() at the end of the run (also after an error)."""

    dir: Path
    fd: int | None = None
    taken_over: dict | None = None

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            (self.dir / LOCK).unlink(missing_ok=True)  # while still holding it: a waiting run then retries
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None


def claim(d: Path, *, appending: bool, overwrite: bool, inputs: dict[str, Path]) -> Claim:
    """Rank 0, after every check passed on every rank: make, lock and clear the directory (see the module)."""
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in STORAGE_ERRORS:
            raise
        raise InputError(f"output.dir: cannot create {d} ({exc.strerror}); choose a writable --output") from None
    c = Claim(d)
    c.fd, c.taken_over = _lock(d / LOCK)
    try:
        check_output_dir(d, appending=appending, overwrite=overwrite, inputs=inputs, locked=True)  # again, locked
        if overwrite and not appending:
            clear(d)
        for p in _temporaries(d):
            p.unlink(missing_ok=True)
    except BaseException:
        c.release()
        raise
    if c.taken_over:
        h = c.taken_over
        print(f"note: output.dir: {d} was locked by the run of pid {h.get('pid')} on {h.get('host')} (started "
              f"{h.get('started')}), which ended without releasing it; taken over", file=sys.stderr)
    return c


def clear(d: Path) -> None:
    """--overwrite: remove the files this project wrote (our_files), then vtk folders left empty."""
    for p in our_files(d):
        p.unlink(missing_ok=True)
    vtk = d / "vtk"
    if _real_dir(vtk):
        for p in vtk.iterdir():
            if VTK_NAME.match(p.name) and _real_dir(p) and not any(p.iterdir()):
                p.rmdir()
        if not any(vtk.iterdir()):
            vtk.rmdir()


def _holder_text() -> str:
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": " ".join(sys.argv)[:200]})


def _lock(path: Path) -> tuple[int, dict | None]:
    """An exclusive flock on `path` (created if needed), with this process's host and pid written in it.

    Returns (fd, the previous holder's record if one was left there). A lock file unlinked by its
    releasing holder between our open and our flock is not the lock any more: open it again.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            locked = _try_flock(fd)
            if locked is False:
                raise _held(path, _read_holder(fd))
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    previous = _read_holder(fd)
    if locked is None and previous and _alive(previous):  # no flock here: trust a live pid on this host
        os.close(fd)
        raise _held(path, previous)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_text().encode(), 0)
    except OSError as exc:
        os.close(fd)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    return fd, previous if previous and previous.get("pid") != os.getpid() else None


def _check_not_held(path: Path) -> None:
    """A directory another run holds is refused as such (not as one that 'holds results')."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return  # no lock there (claim() makes it)
    try:
        holder = _read_holder(fd)
        locked = _try_flock(fd)
        if locked is False or (locked is None and holder and _alive(holder)):
            raise _held(path, holder)
    finally:
        os.close(fd)  # a probe: closing releases what it took


def _try_flock(fd: int) -> bool | None:
    """True: locked; False: another process holds it; None: this filesystem has no flock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
            return None
        raise


def _read_holder(fd: int) -> dict | None:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"null")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _alive(holder: dict) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # cannot tell from here: assume it runs
    try:
        os.kill(int(holder.get("pid", 0)), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True
    return True


def _held(path: Path, holder: dict | None) -> InputError:
    who = (f"the run of pid {holder.get('pid')} on {holder.get('host')} (started {holder.get('started')})"
           if holder else "another run (starting now)")
    return InputError(f"output.dir: {path.parent} is in use by {who}; wait for it to end or {FIX} "
                      f"(the lock is {path})")


# 3. the end -------------------------------------------------------------------------------------------

def write_manifest(d: Path) -> None:
    """Rank 0, with the results: every file of the run, relative to d (what a later --overwrite removes)."""
    files = [str(p.relative_to(d)) for p in our_files(d) if p.name not in (MANIFEST,) and not TEMPORARY.match(p.name)]
    write_text(d / MANIFEST, json.dumps({"format": "stencil manifest", "version": 1, "files": files}, indent=0))
