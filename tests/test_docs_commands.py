"""Every command of README.md and docs/*.md runs as written, in order, on a fresh copy of the repository.

What runs: the fenced blocks tagged `bash` (each with `bash -e`: a failing command fails the page) and those
tagged `python` (exec'd in one namespace per page, so a block sees the names of the blocks before it), in the
page's order, from the copy's root. Blocks
tagged otherwise (`text`, `yaml`, output) are not commands; an untagged block, or one whose lines start like a
command (`stencil`, `mpirun`, `python`, `make`, `tools/`), fails the test until it is tagged.

Not run, by a marker in the page on the line before the block, with its reason:

    <!-- not run by tests/test_docs_commands.py: REASON -->

REASON starts with one of SKIP_REASONS (a GPU, a cluster's launcher or scheduler, root, ParaView, packages from
the network, the test suite itself); any other reason fails the test.

Each page runs in a fresh copy of the repository (two pages at a time, each in its own) (its tracked and new files, as git lists them: no outputs, no
caches), with the venv's `stencil` and `mpirun` first on PATH (`.venv` in the copy is the repository's, and the copy's
pyproject.toml is dated before its install, so `make` there finds it up to date: `make test` made it so first). Overrides, for time only (the commands stay as written otherwise; each
is said here):
- one ceiling and model cache for all pages (as one machine's ~/.cache/stencil would be), a copy of the test
  session's: measured once; and
  the copy's solver/ a link to the repository's (fresh_copy): the same package the venv's `stencil` imports,
  so `python -m solver` in the copy (sweep points) loads the kernels numba compiled for the rest of the suite
  instead of compiling its own (a minute on a fresh clone);
- the copy's case files with more than SHRINK_ABOVE points are shrunk to 256 x 256 and at most SHRUNK_STEPS steps
  (cases/heat_4096.yaml, heat_implicit.yaml, laplace_multigrid.yaml: each takes a minute or more at its size on
  2 cores);
- STENCIL_BANDWIDTH_MIB=16: copy ceilings measured on 16 MiB arrays, not 256 MiB ones;
- OVERRIDES: command rewrites (rank counts above the test machine's cores, repeats and sizes of benchmarks,
  the block shapes the scaling model's probe measures), each with its reason.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, clean_env

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!-- not run by tests/test_docs_commands.py: (.+?) -->\s*$")
SKIP_REASONS = ("needs a GPU", "needs a cluster", "needs root", "needs ParaView", "installs from the network",
                "is the test suite itself")
COMMANDS = re.compile(r"^\s*(stencil|mpirun|srun|sbatch|python3?|make|tools/|pip)\b(?!\S*:)(?! \S+:)")  # not output ("make run: ...")
SHRINK_ABOVE = 1024 * 1024
SHRUNK_STEPS = 50  # and their steps to at most this (200 implicit steps of 256^2 take half a minute)
SMALL_BENCH = "--size 256 --repeats 1 --steps 4"
OVERRIDES = [  # (pattern, replacement, why): re.sub on each command line as written
    (r"\bmpirun -n (?:[3-9]|\d\d+)\b", "mpirun -n 2", "more ranks than the test machine's 2 cores take minutes"),
    (r"--ranks \d+(?:,\d+)+", "--ranks 1,2", "sweep points above 2 ranks oversubscribe the test machine's 2 cores"),
    (r"--threads ([\d,]+,[\d,]+)", "--threads 1,2", "thread sweeps above 2 threads oversubscribe 2 cores"),
    (r"--repeats \d+", "--repeats 1", "repeats multiply a command's time"),
    (r"^((?:mpirun -n \d+ )?stencil bench (?:bandwidth|reduction|vectorize|access)(?!.*--repeats).*)$", r"\1 --repeats 1",
     "the benchmarks' five repeats"),
    (r"^(stencil bench)(?= |$)(?! (bandwidth|reduction|vectorize|access|balance|model))(.*)$",
     rf"\1\3 {SMALL_BENCH}", "the stencil benchmark at 4096^2 takes minutes"),
    (r"^((?:mpirun -n \d+ )?stencil bench bandwidth.*)$", r"\1 --threads 1,2", "thread counts beyond the cores"),
    (r"^((?:mpirun -n \d+ )?stencil bench reduction.*)$", r"\1 --size 65536 --lock-size 4096",
     "2^25 elements per rank take a minute"),
    (r"^(stencil bench vectorize.*)$", r"\1 --sizes 64,512", "a grid far beyond L3 takes a minute"),
    (r"^(stencil bench access.*)$", r"\1 --sizes 4K-1M --min-time 0.001", "sizes to 4x the last cache take minutes"),
    (r"^(stencil sweep (?:strong|weak) (?!.*--(?:no-)?model\b).*)$", r"\1 --no-model",
     "the model's inputs measured for every new block shape (docs/scaling_model.md's sweep, `--model`, keeps them)"),
    (r"^(.*stencil bench balance.*)$", r"\1 --block 64 --steps 10 --copy-mib 1", "1024^2 blocks x 200 steps"),
    (r"^(stencil bench model .*)$", r"\1 --shapes 64x256 --time-tile 1", "the default block shapes take minutes"),
]


def blocks(page: Path) -> list[tuple[str, str, str | None, int]]:
    """(language, text, skip reason or None, line) of every fenced block of a page."""
    out, lines, i = [], page.read_text().splitlines(), 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, j = i, i + 1
        while not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        mark = MARK.match(prev.strip())
        out.append((m.group(1), "\n".join(lines[start + 1:j]), mark.group(1) if mark else None, start + 1))
        i = j + 1
    return out


def override(line: str) -> str:
    """The line with OVERRIDES applied to its command (a trailing `# comment` kept after it)."""
    command, comment = re.match(r"^(.*?)(\s+#.*)?$", line).groups()
    for pattern, replacement, _ in OVERRIDES:
        command = re.sub(pattern, replacement, command)
    return command + (comment or "")


def fresh_copy(dest: Path) -> Path:
    """The repository's files at `dest`, nothing else: what a page's commands wrote there before is gone. solver/
    is a link to the repository's package (what the venv's editable install imports anyway), so its compiled
    kernels (numba's, in __pycache__) are the test session's; no command writes into it."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file() and name.split("/")[0] != "solver":
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / "solver").symlink_to(ROOT / "solver")
    (dest / ".venv").symlink_to(ROOT / ".venv")  # make's venv step: `python3 -m venv .venv` fails on it, never reinstalls
    installed = (ROOT / ".venv" / "bin" / "stencil").stat().st_mtime
    os.utime(dest / "pyproject.toml", (installed - 1, installed - 1))  # the venv is up to date with the copy: make skips it
    for case in (dest / "cases").glob("*.yaml"):
        shrink(case)
    return dest


def shrink(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    grid = data["grid"]
    if grid["nx"] * grid["ny"] > SHRINK_ABOVE:
        grid.update(nx=256, ny=256)
        data.setdefault("run", {})["steps"] = min(data.get("run", {}).get("steps", 1000), SHRUNK_STEPS)
        path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """One directory for the module: the copy (repo/, fresh for each page) and the ceiling cache (cache/), which
    starts as a copy of the test session's (conftest's STENCIL_CACHE_DIR: this machine's ceilings, measured once)."""
    work = tmp_path_factory.mktemp("docs")
    shared = Path(os.environ["STENCIL_CACHE_DIR"])
    if shared.is_dir():
        shutil.copytree(shared, work / "cache")
    return work


def env_for(cache: Path) -> dict:
    venv = ROOT / ".venv" / "bin"
    return clean_env(PATH=f"{venv}:{os.environ['PATH']}", STENCIL_CACHE_DIR=str(cache),
                     STENCIL_BANDWIDTH_MIB="16", COLUMNS="120")


def driver(page: Path) -> str | None:
    """A Python script that runs the page's runnable blocks in their order: each bash block with `bash -e` (the
    overrides applied), each python block exec'd in one namespace (a later block sees an earlier one's names).
    None when the page has nothing to run."""
    steps = [(lang, "\n".join(override(x) for x in text.splitlines()) if lang == "bash" else text, f"{page.name}:{line}")
             for lang, text, skip, line in blocks(page) if skip is None and lang in ("bash", "python")]
    if not steps:
        return None
    return f"""import subprocess, sys
steps = {steps!r}
space = {{"__name__": "__main__"}}
for lang, text, where in steps:
    print(f"=== {{where}} ({{lang}})", flush=True)
    if lang == "bash":
        res = subprocess.run(["bash", "-x", "-e", "-u", "-o", "pipefail", "-c", text])
        if res.returncode:
            sys.exit(f"{{where}}: exit {{res.returncode}}")
    else:
        exec(compile(text, where, "exec"), space)
"""


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_block_is_tagged_and_every_skip_says_why(page):
    for lang, text, skip, line in blocks(page):
        where = f"{page.relative_to(ROOT)}:{line}"
        assert lang, f"{where}: an untagged block; tag it bash or python (run), or text/yaml (not a command)"
        if lang not in ("bash", "python"):
            assert not any(COMMANDS.match(x) for x in text.splitlines()), f"{where}: commands in a {lang} block"
        if skip is not None:
            assert skip.startswith(SKIP_REASONS), f"{where}: skip reason {skip!r} is none of {SKIP_REASONS}"


WORKERS = 2  # pages run two at a time, each in a copy of its own (the test machine has 2 cores)


def run_page(page: Path, slot: Path, cache: Path) -> str | None:
    """Run a page's commands in a fresh copy at `slot`; None when they all succeed, else what failed."""
    repo = fresh_copy(slot / "repo")
    (slot / "page.py").write_text(driver(page))  # outside the copy: `solver` is the installed package
    res = subprocess.run([sys.executable, str(slot / "page.py")], cwd=repo, env=env_for(cache), capture_output=True,
                         text=True, timeout=900)
    return None if res.returncode == 0 else f"{page.name}: a command failed\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"


@pytest.mark.slow
def test_the_commands_of_every_page_run_on_a_fresh_copy(workspace):
    """Every page with commands, WORKERS at a time (the longest first), each in a fresh copy of its own."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    pages = sorted((p for p in PAGES if driver(p)), key=lambda p: -len(driver(p)))
    slots = queue.Queue()
    for k in range(WORKERS):
        slots.put(workspace / f"slot{k}")

    def one(page: Path) -> str | None:
        slot = slots.get()
        try:
            return run_page(page, slot, workspace / "cache")
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(WORKERS) as pool:
        failed = [f for f in pool.map(one, pages) if f]
    assert not failed, "\n\n".join(failed)
    assert {p.name for p in pages} >= {"README.md", "python.md", "output.md", "sweeps.md"}


def test_overrides_rewrite_only_what_they_say():
    assert override("make run") == "make run"
    assert override("stencil sweep threads cases/heat_4096.yaml --threads 1,2,4") == \
        "stencil sweep threads cases/heat_4096.yaml --threads 1,2"
    assert override("mpirun -n 16 stencil bench balance") == \
        "mpirun -n 2 stencil bench balance --block 64 --steps 10 --copy-mib 1"
    assert override("mpirun -n 2 stencil run cases/quickstart.yaml") == "mpirun -n 2 stencil run cases/quickstart.yaml"
    assert override("stencil sweep strong cases/heat_4096.yaml --ranks 1,2,4,8 --repeats 3") == \
        "stencil sweep strong cases/heat_4096.yaml --ranks 1,2 --repeats 1 --no-model"
    assert override("stencil bench") == f"stencil bench {SMALL_BENCH}"
    assert override("stencil bench access   # a comment") == \
        "stencil bench access --repeats 1 --sizes 4K-1M --min-time 0.001   # a comment"
    assert override("stencil bench --tune") == f"stencil bench --tune {SMALL_BENCH}"
