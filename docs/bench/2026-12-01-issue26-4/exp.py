"""Timing of chip variants at 2048^2 (not part of the project): exp_chip.cu (chip.cu with CHIP_EXP_NOWAIT:
no wait for the neighbouring blocks, CHIP_EXP_NOSYNC: no block barrier; PRE / REL definable) compiled
in place of chip.cu. Results of the EXP variants are wrong by design; only their time counts."""
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

_opts, _src = gk.options, gk.source
EXTRA = []
gk.options = lambda *a, **k: _opts(*a, **k) + tuple(EXTRA)
root = resources.files("solver.backends") / "kernels"
gk.source = lambda v: (root / "common.cu").read_text() + "\n" + open("exp_chip.cu").read() if v == "chip" else _src(v)


def run(dtype, block, extra, steps=256, launches=8):
    EXTRA[:] = extra
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
    row = {"dtype": dtype, "block": block, "extra": extra, "us_per_step": float(np.median(ts)) * 1e6}
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    out = []
    full = ([], ["-DCHIP_EXP_NOWAIT"], ["-DCHIP_EXP_NOSYNC"], ["-DCHIP_EXP_NOWAIT", "-DCHIP_EXP_NOSYNC"],
            ["-DPRE=2", "-DREL=2"], ["-DPRE=0", "-DREL=2"])
    for dtype, blocks, extras in (("float64", [(512, 4), (256, 6)], full),
                                  ("float32", [(512, 8), (256, 12)], full[:1] + full[3:4])):
        for block in blocks:
            for extra in extras:
                try:
                    out.append(run(dtype, block, extra))
                except Exception as e:  # noqa: BLE001
                    print("FAILED", dtype, block, extra, repr(e)[:200], flush=True)
                    sys.exit(1)
    json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "exp.json"), "w"), indent=1)
