#!/usr/bin/env python3
"""Kernel-only time per step of `chip` at 2048^2 (one GPU; issue 26's diagnosis, docs/gpu_tiling_notes.md v6-v9):
median of 5 x 2048 steps in launches of 256, CUDA events. Each argument DTYPE:THREADSxROWS:LEVELS[:DEFINE,...]
is one kernel: LEVELS 1 (v6) or 2 (the two-level pass, STENCIL_CHIP_LEVELS), DEFINEs added to the compile. Two
are the probe's own: steps=N (launches of N steps instead of 256, 2048 steps in all), resid (every launch
folds the check's residual, in the module a check's batch runs) and every=N (each launch also flags NaN /
Inf at heat checks every N steps inside it, as core.loop's checks inside a batch). Others compile parts of the two-level pass
out: -DCHIP_EXP_NOWAIT (no wait for the blocks above / below), -DCHIP_EXP_NOSYNC (no barrier a pass): those
compute wrong results on purpose, only their time counts; -DCHIP_EXP_NOFENCE (a chip.cu up to cbe2efe: no
__threadfence before a pass's release, as the package's kernel releases since a0e581e). A suffix @PATH
compiles another chip.cu instead of the package's (an earlier version, to compare in the same call).

    python3 tools/chip_probe.py float64:512x4:1 float64:512x4:2 float64:256x5:2:-DCHIP_EXP_NOWAIT,-DCHIP_EXP_NOSYNC
    python3 tools/chip_probe.py float64:512x4:2@old/chip.cu float64:512x4:2 float64:512x4:2:steps=1024

One JSON line per kernel; all of them in $OUT/kt.json (or ./kt.json)."""
import json
import os
import sys
from importlib import resources

import numpy as np

from solver.backends import cupy_kernels as gk
from solver.backends.cupy_backend import CupyBackend
from solver.bench.gpu import make_case
from solver.bench.tune import random_field
from solver.core.physics import weights

_opts = gk.options
EXTRA = []
gk.options = lambda *a, **k: _opts(*a, **k) + tuple(EXTRA)
root = resources.files("solver.backends") / "kernels"


def probe_source(src: str) -> str:
    """chip.cu with the switches that compile out the neighbour waits and the barrier of a pass."""
    src = src.replace("__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)\n{",
                      "__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)\n{\n#ifdef CHIP_EXP_NOWAIT\n    return;\n#endif")
    fenced = "        __syncthreads();\n        if (c.tid == 0) {\n            __threadfence();\n"  # (v8 and before)
    plain = "        __syncthreads();\n        if (c.tid == 0) flag_release(c.flags + c.b, (unsigned)k + 2);"
    assert (fenced in src or plain in src) and "{\n#ifdef CHIP_EXP_NOWAIT" in src
    src = src.replace(fenced, "#ifndef CHIP_EXP_NOSYNC\n        __syncthreads();\n#endif\n        if (c.tid == 0) {\n"
                      "#ifndef CHIP_EXP_NOFENCE\n            __threadfence();\n#endif\n")
    return src.replace(plain, "#ifndef CHIP_EXP_NOSYNC\n" + plain.replace("\n        if", "\n#endif\n        if"))


SRC = [probe_source((root / "chip.cu").read_text())]  # the chip.cu compiled now
SOURCE = ["package"]  # where it came from (the row says)
_src = gk.source
gk.source = lambda v: (root / "common.cu").read_text() + "\n" + SRC[0] if v == "chip" else _src(v)


def run(dtype, block, levels, extra, total=2048):
    steps = next((int(e[6:]) for e in extra if e.startswith("steps=")), 256)
    every = next((int(e[6:]) for e in extra if e.startswith("every=")), 0)
    checks = list(range(every, steps, every)) if every else []
    resid = "resid" in extra
    EXTRA[:] = [e for e in extra if e != "resid" and not e.startswith(("steps=", "every="))]
    os.environ["STENCIL_CHIP_LEVELS"] = str(levels)
    case = make_case(2048, 2048, dtype)
    be = CupyBackend(case.backend, dtype)
    be.configure("chip", block, False, steps)
    be.use_graphs = False
    cp = be.cp
    shape = (2050, 2050)
    a, b = random_field(be, shape), be.zeros(shape)
    w = weights(case).cast(dtype)
    region = (1, 2049, 1, 2049)
    a, b = be.advance(a, b, w, steps, region, resid, checks)  # compiled and loaded before the timing
    be.synchronize()
    ts = []
    for _ in range(5):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(be.main)
        for _ in range(total // steps):  # one advance a launch: with `resid` each launch folds the residual
            a, b = be.advance(a, b, w, steps, region, resid, checks)
        e.record(be.main)
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3 / (total // steps * steps))
    fn = be._chip_function(block, (2048, 2048), resid)
    row = {"dtype": dtype, "block": block, "levels": levels, "extra": extra, "steps_a_launch": steps, "resid": resid, "checks_inside": len(checks), "source": SOURCE[0], "us_per_step": float(np.median(ts)) * 1e6,
           "registers": getattr(fn, "num_regs", None), "local_bytes": getattr(fn, "local_size_bytes", None)}
    print(json.dumps(row), flush=True)
    return row


def parse(item: str):
    item, _, path = item.partition("@")
    SRC[0] = probe_source(open(path).read() if path else (root / "chip.cu").read_text())
    SOURCE[0] = path or "package"
    dtype, shape, levels, *extra = item.split(":")
    return dtype, tuple(int(x) for x in shape.split("x")), int(levels), extra[0].split(",") if extra else []


if __name__ == "__main__":
    out = []
    for item in sys.argv[1:]:
        try:
            out.append(run(*parse(item)))
        except Exception as e:  # noqa: BLE001 - one kernel's failure (e.g. too many registers) ends only its row
            print("FAILED", item, repr(e)[:300], flush=True)
        with open(os.path.join(os.environ.get("OUT", "."), "kt.json"), "w") as f:
            json.dump(out, f, indent=1)
