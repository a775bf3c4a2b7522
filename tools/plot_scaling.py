"""Plot tools/mpi_scaling.py's JSON lines: speedup and bandwidth against ranks, strong and weak.

    python tools/plot_scaling.py results.jsonl out.png "machine and date for the title"

The figure is solver.results.report.fig_mpi_scaling, which `stencil report DIR` also draws for every
such file in DIR (titled with the file's name instead).
"""

import sys
from pathlib import Path

from solver.results.report import fig_mpi_scaling, load_scaling_rows


def main(path: str, out: str, where: str) -> None:
    rows = load_scaling_rows(Path(path))
    if rows is None:
        sys.exit(f"{path}: not tools/mpi_scaling.py JSON lines")
    fig_mpi_scaling(rows, where).savefig(out, dpi=90)


if __name__ == "__main__":
    main(*sys.argv[1:4])
