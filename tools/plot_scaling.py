"""Plot tools/mpi_scaling.py's JSON lines: speedup and bandwidth against ranks, strong and weak.

    python tools/plot_scaling.py results.jsonl out.png "machine and date for the title"
"""

import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path: str, out: str, where: str) -> None:
    rows = [json.loads(line) for line in open(path)]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["scaling"], r["decomposition"], r["halo"])].append(r)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    for ax, scaling in zip(axes[:2], ("strong", "weak")):
        ranks = sorted({r["ranks"] for r in rows})
        ax.plot(ranks, ranks, "k--", label="ideal")
        for (sc, dec, halo), rs in sorted(groups.items()):
            if sc != scaling or halo == "nonblocking" or "+" in halo:  # "+dynamic": see the tables
                continue
            rs.sort(key=lambda r: r["ranks"])
            t1 = rs[0]["seconds_per_step"]
            speedup = [t1 / r["seconds_per_step"] * (r["ranks"] if scaling == "weak" else 1) for r in rs]
            ax.plot([r["ranks"] for r in rs], speedup, marker="o", label=f"{dec}, {halo}")
        grid = "4096 x 4096" if scaling == "strong" else "1024 x 1024 per rank"
        ax.set(title=f"{scaling} scaling ({grid})", xlabel="MPI ranks (1 thread each)", ylabel="speedup vs 1 rank",
               xscale="log", yscale="log")
        ax.set_xticks(ranks, [str(r) for r in ranks])
        ax.legend()
    ax = axes[2]
    strong = sorted(groups[("strong", "rows", "overlap")], key=lambda r: r["ranks"])
    ranks = [r["ranks"] for r in strong]
    ax.plot(ranks, [r["copy_gbs"] for r in strong], "k--", marker="s", label="copy, ordinary stores, same ranks (ceiling)")
    if all("memcpy_gbs" in r for r in strong):
        ax.plot(ranks, [r["memcpy_gbs"] for r in strong], ":", color="grey", marker="s",
                label="memcpy (non-temporal stores), same ranks")
    for dec in ("rows", "cart"):
        rs = sorted(groups[("strong", dec, "overlap")], key=lambda r: r["ranks"])
        ax.plot(ranks, [r["gbs"] for r in rs], marker="o", label=f"stencil effective GB/s, {dec} overlap")
    ax.set(title="strong scaling: bandwidth against the ceiling", xlabel="MPI ranks", ylabel="GB/s (read + write)",
           xscale="log", yscale="log")
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.legend()
    fig.suptitle(f"stencil, numba per-step kernel, float64 - {where}")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    main(*sys.argv[1:4])
