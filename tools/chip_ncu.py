#!/usr/bin/env python3
"""One `chip` launch of 64 steps per DTYPE:THREADSxROWS argument at 2048^2, for Nsight Compute (issue 26):

    ncu --clock-control none -k regex:^chip$ --section SpeedOfLight ... python3 tools/chip_ncu.py float64:512x4 float32:512x8

STENCIL_CHIP_LEVELS=1 or 2 picks one or two levels a pass (v6, or v8; docs/gpu_tiling_notes.md)."""
import sys

from solver.backends.cupy_backend import CupyBackend
from solver.bench.gpu import make_case
from solver.bench.tune import random_field
from solver.core.physics import weights

for item in sys.argv[1:]:
    dtype, shape = item.split(":")
    block = tuple(int(x) for x in shape.split("x"))
    case = make_case(2048, 2048, dtype)
    be = CupyBackend(case.backend, dtype)
    be.configure("chip", block, False, 64)
    be.use_graphs = False
    u = random_field(be, (2050, 2050))
    v = be.zeros(u.shape)
    be.advance(u, v, weights(case).cast(dtype), 64, (1, 2049, 1, 2049), False)
    be.synchronize()
    print("ncu_chip:", item, be.launch_facts(u.shape), flush=True)
    del be, u, v
