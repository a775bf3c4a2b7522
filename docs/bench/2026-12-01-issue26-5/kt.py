"""Kernel-only time per step of `chip` at 2048^2, v6 (STENCIL_CHIP_LEVELS=1) against v7 (2), and v7 with
parts compiled out (CHIP_EXP_NOWAIT: no wait for the blocks above / below; CHIP_EXP_NOSYNC: no barrier
a pass; results wrong by design, only their time counts) or SPRE changed. Not part of the project."""
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
src = (root / "chip.cu").read_text()
src = src.replace("__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)\n{",
                  "__device__ __forceinline__ void flag_wait(const unsigned* f, const unsigned v)\n{\n#ifdef CHIP_EXP_NOWAIT\n    return;\n#endif")
old = "pass2<FAST, false>(reg, k, c, rmax);\n        __syncthreads();"
assert old in src and "{\n#ifdef CHIP_EXP_NOWAIT" in src
src = src.replace(old, "pass2<FAST, false>(reg, k, c, rmax);\n#ifndef CHIP_EXP_NOSYNC\n        __syncthreads();\n#endif")
_src = gk.source
gk.source = lambda v: (root / "common.cu").read_text() + "\n" + src if v == "chip" else _src(v)


def run(dtype, block, levels, extra, steps=256, launches=8):
    EXTRA[:] = extra
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
    a, b = be.advance(a, b, w, steps, region, False)
    be.synchronize()
    ts = []
    for _ in range(5):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record(be.main)
        a, b = be.advance(a, b, w, steps * launches, region, False)
        e.record(be.main)
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e) / 1e3 / (steps * launches))
    fn = be._chip_function(block, (2048, 2048))
    row = {"dtype": dtype, "block": block, "levels": levels, "extra": extra, "us_per_step": float(np.median(ts)) * 1e6,
           "registers": getattr(fn, "num_regs", None), "local_bytes": getattr(fn, "local_size_bytes", None)}
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    out = []
    for dtype, block, levels, extra in (("float64", (512, 4), 1, []), ("float64", (512, 4), 2, []),
                                        ("float32", (512, 8), 1, []), ("float32", (512, 8), 2, []),
                                        ("float64", (512, 4), 2, ["-DCHIP_EXP_NOWAIT"]),
                                        ("float64", (512, 4), 2, ["-DCHIP_EXP_NOWAIT", "-DCHIP_EXP_NOSYNC"]),
                                        ("float64", (512, 4), 2, ["-DSPRE=0"]), ("float64", (512, 4), 2, ["-DSPRE=5"])):
        try:
            out.append(run(dtype, block, levels, extra))
        except Exception as e:  # noqa: BLE001
            print("FAILED", dtype, block, levels, extra, repr(e)[:300], flush=True)
        json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "kt.json"), "w"), indent=1)
