#!/usr/bin/env python3
"""Static instruction mix of `chip`'s pass loop at 2048^2 on 132 multiprocessors (issue 26; no GPU needed):
each argument DTYPE:THREADSxROWS:LEVELS[@PATH] is compiled as the backend compiles its hot module (no residual,
every tile interior) with `nvcc -arch=sm_90 -cubin` and disassembled with `nvdisasm` (on PATH, or from the
`nvidia-cuda-nvdisasm` wheel: `pip install nvidia-cuda-nvdisasm`); PATH compiles another chip.cu. Printed:
the registers and spills (ptxas), and per backward branch of at least 200 instructions (the pass loop; the
longest first) the instructions a warp issues per iteration by opcode. docs/gpu_tiling_notes.md (v8).

    python3 tools/chip_sass.py float64:512x4:2 float64:512x4:2@old_chip.cu
"""
import collections
import glob
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from solver.backends import cupy_kernels as gk

root = Path(gk.__file__).parent / "kernels"


def nvdisasm() -> str:
    found = shutil.which("nvdisasm") or next(iter(glob.glob(sysconfig.get_paths()["purelib"] + "/nvidia/*/bin/nvdisasm")), None)
    if found is None:
        sys.exit("chip_sass: no nvdisasm on PATH or in the nvidia-cuda-nvdisasm wheel; pip install nvidia-cuda-nvdisasm")
    return found


def build(item: str, tmp: Path) -> tuple[str, str]:
    """(ptxas's register line, the SASS) of one DTYPE:THREADSxROWS:LEVELS[@PATH]."""
    item, _, path = item.partition("@")
    dtype, shape, levels = item.split(":")
    block = tuple(int(x) for x in shape.split("x"))
    layout = gk.chip_layout(dtype, (2048, 2048), 132, block, 232448, int(levels))
    v = gk.chip_columns(block[0])
    opts = gk.options("chip", dtype, (layout[2], block[1]), rt=layout[3], v=v, levels=int(levels), resid=False,
                      allfast=gk.chip_all_interior(layout, (2048, 2048), v))
    src = tmp / "chip.cu"
    src.write_text((root / "common.cu").read_text() + "\n" + (Path(path) if path else root / "chip.cu").read_text())
    cubin = tmp / "chip.cubin"
    p = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o", str(cubin), "-Xptxas", "-v", *opts, str(src)],
                       capture_output=True, text=True, check=True)
    regs = "; ".join(line.split(":")[-1].strip() for line in p.stderr.splitlines() if "registers" in line or "spill" in line)
    return regs, subprocess.run([nvdisasm(), "-c", str(cubin)], capture_output=True, text=True, check=True).stdout


def loops(sass: str, least: int = 200) -> list[collections.Counter]:
    """Opcode counts of each backward branch's body of at least `least` instructions, longest first."""
    ins, labels = [], {}
    for line in sass.splitlines():
        if m := re.match(r"^\s*(\.L_x_\d+):", line):
            labels[m.group(1)] = len(ins)
        elif m := re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?);", line):
            ins.append(re.sub(r"^@!?U?P\w+\s+", "", m.group(1).strip()).split()[0].split(".")[0])
    bodies = []
    for i, text in enumerate(re.findall(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", sass)):
        if (m := re.search(r"BRA\s+`\((\.L_x_\d+)\)", text)) and labels.get(m.group(1), i + 1) <= i:
            if i + 1 - labels[m.group(1)] >= least:
                bodies.append(collections.Counter(ins[labels[m.group(1)]:i + 1]))
    return sorted(bodies, key=lambda c: -sum(c.values()))


if __name__ == "__main__":
    for item in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            regs, sass = build(item, Path(tmp))
        print(f"{item}: {regs}")
        for body in loops(sass)[:1]:
            print(f"  pass loop: {sum(body.values())} instructions a warp:", ", ".join(f"{k} {n}" for k, n in body.most_common()))
