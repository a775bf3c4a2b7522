"""Warm numba's on-disk cache at install time (`make venv` runs this): every shipped case (cases/*.yaml) and the
variants the README's examples add, run once in this process on a small grid for a few steps, so that each kernel
specialisation they need is compiled now and only loaded later. A first `stencil run` of any of them then loads its
kernels instead of compiling them (BENCHMARKS.md, "First runs and shared cores": 28-40 s of compilation per case
on a fresh cache, measured before; the figures after are there too).

usage: python tools/warm_cache.py [--quiet]

The runs write to a temporary directory (removed at the end) and measure no ceiling. Cases whose backend is not
available here (cupy without a GPU) are skipped. Prints one line per run with its wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SMALL = 48  # points a side of the grids run here: the kernels compiled do not depend on the grid's size
STEPS = 3  # steps (iterations, cycles) of each run: the first compiles everything a case's steps use
README = [  # (case, overrides): the README's examples beyond the cases as they are
    ("quickstart.yaml", {"physics.source": [{"kind": "gaussian", "center": [1.4, 0.5], "width": 0.1,
                                             "amplitude": 20000}],
                         "boundary.right": {"kind": "convective", "h": 5.0, "ambient": 0.0}}),
    ("laplace_square.yaml", {"physics.solver": "multigrid", "run.tolerance": 1e-12}),
    ("quickstart.yaml", {"numerics.dtype": "float32"}),
    ("laplace_square.yaml", {"numerics.dtype": "float32"}),
]


def runs() -> list[tuple[str, dict]]:
    """Every shipped case as it is, then the README's variants."""
    return [(p.name, {}) for p in sorted((ROOT / "cases").glob("*.yaml"))] + README


def warm(name: str, overrides: dict, out: Path) -> float | None:
    """Run one case small and short in this process; its wall time, or None where its backend is unavailable."""
    from solver import api
    from solver.backends import registry

    case = api.load_case(ROOT / "cases" / name, overrides)
    if registry()[case.backend.name].unavailable():
        return None
    from solver.core.errors import InputError
    from solver.core.physics import time_step

    short = {"output.dir": str(out), "output.vtk": False}
    if case.physics.equation == "laplace":
        short["run.steps"] = min(case.run.steps, STEPS)
    elif case.run.time_tolerance is not None:  # adaptive steps: a short end instead of a count
        short.update({"run.t_end": STEPS * time_step(case), "output.times": None, "output.interval": None,
                      "output.checkpoint_interval": None})
    else:
        short.update({"run.steps": STEPS, "run.t_end": None, "output.times": None, "output.interval": None,
                      "output.checkpoint_interval": None})
    small = {"grid.nx": min(case.grid.nx, SMALL), "grid.ny": min(case.grid.ny, SMALL)}
    if case.initial.kind == "file":  # a file of the case's own shape: keep the shape, run fewer steps
        small = {}
    t = time.perf_counter()
    try:
        shrunk = api.with_fields(case, {**short, **small})
    except InputError:  # shapes that a small grid cannot resolve (validate names the spacing): the case's own grid
        shrunk = api.with_fields(case, short)
    api.run(shrunk, overwrite=True, progress=False, ceiling=False, verify=False)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    os.chdir(ROOT)  # the cases name their data files relative to the repository's root
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="stencil-warm-") as tmp:
        for k, (name, overrides) in enumerate(runs()):
            took = warm(name, overrides, Path(tmp) / str(k))
            if not args.quiet:
                what = name + (f" with {', '.join(overrides)}" if overrides else "")
                print(f"warm_cache: {what}: " + ("backend unavailable here, skipped" if took is None else
                                                 f"{took:.1f} s"), flush=True)
    print(f"warm_cache: numba's cache holds the shipped cases' kernels ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
