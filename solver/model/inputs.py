"""The model's measured inputs: one cache entry of solver.bench.model_probe, read and interpolated.

Kernel: mean seconds per point and step, by occupancy (ranks busy on a node), block shape and time tile;
between measured shapes interpolated linearly in log ny along each measured nx, then in log nx (clamped
at the ends); a tile depth k not measured is interpolated linearly in 1/k (the tiled kernel's traffic
per step falls as 1/k). The speed spread: the measured per-tile seconds of every rank, at the nearest
measured shape. Messages: tables by size, log-log between points (solver.model.interp).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from .interp import loglin, loglog

ASSUMED_STAGE_GBS = 25.0  # host <-> GPU copy rate for strips larger than any measured (pinned PCIe Gen5 x16, order of)


class Inputs:
    def __init__(self, entry: dict, origin: str):
        self.entry, self.origin = entry, origin
        self.kernel = entry.get("kernel", [])
        self.messages = entry.get("messages") or {}
        self.gpu = entry.get("gpu", [])

    @classmethod
    def from_file(cls, path: Path) -> Inputs:
        """A probe's JSON (its "entry"), or a cache file's entry when it holds one, read and checked as the cache's
        entries are (solver.bench.model_probe.entry_problem): every value the model reads, its type and range."""
        from ..bench.model_probe import entry_problem
        from ..core.readers import read_json

        fix = "give the JSON written by `stencil bench model --json`, or a model.json with one entry"
        data = read_json(path, "--inputs", fix)
        entry = (data.get("entry") if "entry" in data else next(iter(data.values())) if len(data) == 1 else None) \
            if isinstance(data, dict) else None
        if not isinstance(entry, dict):
            raise InputError(f"--inputs: {path}: holds no calibration (an object with one entry: 'entry', or one key of "
                             f"model.json); {fix}")
        why = entry_problem("entry", entry)
        if why:
            raise InputError(f"--inputs: {path}: entry {why}; {fix}")
        return cls(entry, f"file {path}")

    def node_ranks(self) -> int:
        """Ranks per node the inputs were measured with (the most busy at once)."""
        return max(self.occupancies() or [1])

    # kernel --------------------------------------------------------------------------------------
    def occupancies(self) -> list[int]:
        return sorted({p["occupancy"] for p in self.kernel})

    def _at(self, occ: int, k: int | None = None, pattern: str = "halo") -> list[dict]:
        return [p for p in self.kernel if p["occupancy"] == occ and (k is None or p["k"] == k)
                and p.get("pattern", "halo") == pattern]

    def per_update(self, ny: int, nx: int, k: int, occ: int, pattern: str = "halo") -> float:
        """Seconds per point and step of a block ny x nx at time tile k with occ ranks busy per node, called
        as one process calls it (pattern serial) or as a rank with neighbours (halo)."""
        ks = sorted({p["k"] for p in self._at(occ, None, pattern)})
        if not ks:
            raise InputError(f"the model has no kernel measured with {occ} rank(s) per node here; measure it with "
                             f"`stencil bench model --ranks {occ}` or choose --ranks-per-node among {self.occupancies()}")
        if k in ks:
            return self._shape(ny, nx, k, occ, pattern)
        lo, hi = max([x for x in ks if x < k], default=ks[0]), min([x for x in ks if x > k], default=ks[-1])
        a, b = self._shape(ny, nx, lo, occ, pattern), self._shape(ny, nx, hi, occ, pattern)
        if lo == hi:
            return a
        f = (1 / k - 1 / lo) / (1 / hi - 1 / lo)
        return a + f * (b - a)

    def _shape(self, ny: int, nx: int, k: int, occ: int, pattern: str) -> float:
        cols: dict[int, list] = {}
        for p in self._at(occ, k, pattern):
            cols.setdefault(p["nx"], []).append((p["ny"], _mean(p["tile_seconds"]) / (p["ny"] * p["nx"] * p["k"])))
        return loglin([(x, loglin(pts, ny)) for x, pts in cols.items()], nx)

    def tile_seconds(self, ny: int, nx: int, d: int, occ: int, pattern: str = "halo") -> float:
        return self.per_update(ny, nx, d, occ, pattern) * ny * nx * d

    def nearest(self, ny: int, nx: int, k: int, occ: int, pattern: str = "halo") -> dict:
        ks = {p["k"] for p in self._at(occ, None, pattern)}
        pts = self._at(occ, k, pattern) or self._at(occ, min(ks, key=lambda x: abs(x - k)), pattern)
        return min(pts, key=lambda p: abs(math.log(p["ny"] / ny)) + abs(math.log(p["nx"] / nx)))

    def factors(self, ny: int, nx: int, k: int, occ: int, pattern: str = "halo") -> dict:
        """{host: (ranks on it, tiles) factors in node-rank order} from the nearest point; the factors of
        all ranks together average 1."""
        p = self.nearest(ny, nx, k, occ, pattern)
        t = np.array([np.resize(np.asarray(s, float), min(map(len, p["tile_seconds"]))) for s in p["tile_seconds"]])
        t /= t.mean()
        by_host: dict[str, list] = {}
        for row, host, lr in zip(t, p["hosts"], p["node_ranks"]):
            by_host.setdefault(host, []).append((lr, row))
        return {h: np.array([r for _, r in sorted(rows, key=lambda x: x[0])]) for h, rows in by_host.items()}

    def check_seconds(self, ny: int, nx: int, occ: int) -> float:
        pts = [p for p in self.kernel if p["occupancy"] == occ] or self.kernel
        cols: dict[int, list] = {}
        for p in pts:
            cols.setdefault(p["nx"], []).append((p["ny"], p["check_seconds"] / (p["ny"] * p["nx"])))
        return loglin([(x, loglin(v, ny)) for x, v in cols.items()], nx) * ny * nx

    # messages ------------------------------------------------------------------------------------
    def exchange(self, nbytes: float) -> float:
        """CPU seconds of one exchange with two sides inside a node (the exchanger's own cost)."""
        table = self.messages.get("exchange") or []
        if table:
            return loglog(table, nbytes)
        intra = self.messages.get("pingpong", {}).get("intra") or []
        return 2 * loglog(intra, nbytes) if intra else 0.0

    def intra(self, nbytes: float) -> float:
        table = self.messages.get("pingpong", {}).get("intra") or []
        return loglog(table, nbytes) if table else 0.0

    def inter_table(self) -> list:
        return self.messages.get("pingpong", {}).get("inter") or []

    def allreduce(self, ranks: int, per_node: int, network) -> float:
        """One MPI_Allreduce of 8 bytes: measured up to the ranks measured; beyond, two trips per doubling
        over the network (recursive doubling: reduce, then broadcast)."""
        table = self.messages.get("allreduce") or []
        if ranks < 2 or not table:
            return 0.0
        top = max(n for n, _ in table)
        if ranks <= top:
            return loglin(table, ranks)
        base = loglin(table, min(per_node, top))
        nodes = -(-ranks // per_node)
        return base + 2 * math.ceil(math.log2(max(nodes, 2))) * network.seconds(8)

    def write_rate(self) -> float | None:
        return self.messages.get("write_bytes_per_second")

    # GPU -----------------------------------------------------------------------------------------
    def gpu_point(self, ny: int, nx: int) -> dict:
        if not self.gpu:
            raise InputError("--gpus: the model has no GPU measured here; measure one with `stencil bench model "
                             "--gpu` on a GPU machine, or pass --inputs FILE from such a machine")
        return min(self.gpu, key=lambda p: abs(math.log(p["ny"] * p["nx"] / (ny * nx))))

    def gpu_step(self, ny: int, nx: int) -> float:
        return loglog([(p["ny"] * p["nx"], p["step_seconds"]) for p in self.gpu], ny * nx)

    def gpu_check(self, ny: int, nx: int) -> float:
        return loglog([(p["ny"] * p["nx"], p["check_seconds"]) for p in self.gpu], ny * nx)

    def gpu_stage(self, nbytes: float) -> float:
        """Seconds to stage a strip of nbytes to the host and back: the measured strips (1, 8, 64 rows), log-log
        between them; beyond the largest, its time plus the extra bytes at ASSUMED_STAGE_GBS (an assumption,
        said by describe())."""
        table = self.stage_table()
        big = max(table)
        if nbytes <= big[0]:
            return loglog(table, nbytes)
        return big[1] + 2 * (nbytes - big[0]) / (ASSUMED_STAGE_GBS * 1e9)

    def stage_table(self) -> list[tuple[float, float]]:
        table = [tuple(x) for p in self.gpu for x in p.get("stage", [])]
        return table + [(p["stage_bytes"], p["stage_seconds"]) for p in self.gpu if "stage_bytes" in p]  # one row (older probes)

    # provenance ----------------------------------------------------------------------------------
    def describe(self) -> list[str]:
        pl = self.entry.get("placement", {})
        dates = sorted(p.get("measured", "")[:16] for p in self.kernel)
        lines = [f"kernel: {len(self.kernel)} points (occupancies {self.occupancies()}, shapes "
                 f"{len({(p['ny'], p['nx']) for p in self.kernel})}, time tiles {sorted({p['k'] for p in self.kernel})}), "
                 f"measured {dates[0] if dates else '-'}..{dates[-1] if dates else '-'} on {pl.get('hosts', ['?'])[0]} "
                 f"({pl.get('cpu', '?')})"]
        m = self.messages
        if m:
            lines.append(f"messages: exchange cost, ping-pong inside a node{', between nodes' if self.inter_table() else ''}, "
                         f"MPI_Allreduce up to {m.get('ranks')} ranks, measured {m.get('measured', '')[:16]} "
                         f"({m.get('nodes')} node(s) x {m.get('per_node')} ranks)")
        if self.gpu:
            lines.append(f"GPU: {len(self.gpu)} sizes on {self.gpu[0].get('gpu')}, measured "
                         f"{min(p.get('measured', '') for p in self.gpu)[:16]}; strips staged to the host measured up to "
                         f"{max(self.stage_table())[0] / 1024:.0f} KiB, larger ones assumed at {ASSUMED_STAGE_GBS:.0f} GB/s")
        return lines + [f"({self.origin}; cache entry {self.entry.get('key')})"]


def _mean(series: list[list[float]]) -> float:
    return float(np.mean([np.mean(s) for s in series]))
