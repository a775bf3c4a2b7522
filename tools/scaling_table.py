"""Turn tools/mpi_scaling.py's JSON lines into the markdown tables for BENCHMARKS.md.

    python tools/scaling_table.py results.jsonl
Speedup and efficiency are against the same configuration at the smallest rank count measured
(strong: t1 / (P tP) ; weak: t1 / tP); a "+dynamic" row (parallel.balance dynamic) is compared with
the plain halo mode's smallest rank count. "of copy" = effective GB/s over the copy bandwidth measured with
the same number of processes in the same launch.
"""

import json
import sys
from collections import defaultdict


def main(path: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["scaling"], r["decomposition"], r["halo"])].append(r)
    for scaling in ("strong", "weak"):
        print(f"\n### {scaling} scaling\n")
        print("| decomposition | halo | ranks | grid | ms/step | MLUP/s | speedup | efficiency | comm (max) | "
              "wait (max) | wait (mean) | imbalance | GB/s | copy GB/s | of copy | memcpy GB/s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (sc, dec, halo), rs in sorted(groups.items()):
            if sc != scaling:
                continue
            rs.sort(key=lambda r: r["ranks"])
            # "overlap+dynamic" has no 1-rank run (nothing to balance): its base is plain overlap's
            plain = sorted(groups.get((sc, dec, halo.split("+")[0]), rs), key=lambda r: r["ranks"])
            base = min(rs[0], plain[0], key=lambda r: r["ranks"])
            for r in rs:
                ratio = base["seconds_per_step"] / r["seconds_per_step"]
                speedup = ratio * (r["ranks"] / base["ranks"] if scaling == "weak" else 1)
                eff = ratio / (r["ranks"] / base["ranks"]) if scaling == "strong" else ratio
                print(f"| {dec} | {halo} | {r['ranks']} | {r['ny']}x{r['nx']} | {r['seconds_per_step'] * 1e3:.3f} | "
                      f"{r['mlups']:.0f} | {speedup:.2f} | {eff:.0%} | {r['comm_max']:.1%} | {r['wait_max']:.1%} | "
                      f"{_pct(r.get('wait_mean'))} | {r['imbalance']:.2f} | {r['gbs']:.1f} | {r['copy_gbs']:.1f} | "
                      f"{r['gbs'] / r['copy_gbs']:.0%} | {_num(r.get('memcpy_gbs'))} |")


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x) -> str:
    return "-" if x is None else f"{x:.1f}"


if __name__ == "__main__":
    main(sys.argv[1])
