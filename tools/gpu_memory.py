"""What holds a GPU run's memory at its peak (issue 45: Newton at 16384^2 needs more than an H100's 80 GB).

    python tools/gpu_memory.py N [--linear] [--out DIR] [--top 25]

Runs tools/nonlinear_bench.py's plate (Newton; --linear: the same grid's linear solve) at N x N on the cupy backend
with a CuPy memory hook that keeps every live allocation of the memory pool with the solver lines that made it (the
three innermost frames under solver/ or tools/), and prints, at the peak of live bytes: the peak in GB and in fields
of the finest level's padded size, and the largest holders (bytes, count, lines). The numbers are the pool's live
bytes, which is what an allocation that fails is measured against (CuPy frees its cached blocks and retries first).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nonlinear_bench  # noqa: E402

BIG = 1 << 20  # allocations from this size on are traced to their lines


def where() -> str:
    frames = [f for f in traceback.extract_stack()[:-3] if "/solver/" in f.filename or "/tools/" in f.filename]
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno}({f.name})" for f in reversed(frames[-3:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("--linear", action="store_true")
    ap.add_argument("--out", default="/tmp/stencil-gpu-memory")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    import cupy

    class Peak(cupy.cuda.MemoryHook):
        name = "stencil_peak"

        def __init__(self):
            self.live, self.now, self.peak, self.at_peak, self.phase, self.peaks = {}, 0, 0, {}, "set-up", {}

        def malloc_postprocess(self, **kw):
            size = kw["mem_size"]
            self.live[kw["mem_ptr"]] = (size, where() if size >= BIG else "(small)")
            self.now += size
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0), self.now)
            if self.now > self.peak:
                self.peak = self.now
                if self.now - sum(self.at_peak.values()) > BIG * 64 or not self.at_peak:  # (a new snapshot per 64 MB)
                    held = defaultdict(int)
                    for s, w in self.live.values():
                        held[w] += s
                    self.at_peak = dict(held)
                    self.peak_phase = self.phase

        def free_postprocess(self, **kw):
            e = self.live.pop(kw["mem_ptr"], None)
            if e is not None:
                self.now -= e[0]

    from solver.case import validate_case
    from solver.parallel.comm import Comm
    from solver.run import Options, Run

    c = validate_case(nonlinear_bench.case_data(a.n, "cupy", a.out, a.linear))
    field = (a.n + 4) * (a.n + 4) * 8
    hook = Peak()
    with hook:
        r = nonlinear_bench.prepared(Run(c, Comm(), Options(ceiling=False, quiet=True, overwrite=True)))
        after_setup = hook.now
        hook.phase = "solve"
        try:
            r.execute()
        except cupy.cuda.memory.OutOfMemoryError as e:
            print(f"out of memory in the solve: {e}")
    gb = 1e9
    print(f"N = {a.n} ({'linear' if a.linear else 'Newton'}): a field {field / gb:.3f} GB; live after set-up "
          f"{after_setup / gb:.2f} GB ({after_setup / field:.1f} fields); peak by phase "
          + ", ".join(f"{k} {v / gb:.2f} GB ({v / field:.1f} fields)" for k, v in hook.peaks.items())
          + f"; the holders at the peak ({hook.peak_phase}):")
    for w, s in sorted(hook.at_peak.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"  {s / gb:7.2f} GB {s / field:5.1f} fields  {w}")


if __name__ == "__main__":
    main()
