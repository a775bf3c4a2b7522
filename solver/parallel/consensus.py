"""One case for all ranks: every rank must run the same resolved case with the same options.

`mpirun -n 1 stencil run a.yaml : -n 2 stencil run b.yaml` (or case files that differ between nodes)
would otherwise run, and case.yaml and record.json would describe rank 0's file only. Each rank hashes
what it resolved (the validated case and the run options); the ranks compare the hashes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from ..core.errors import InputError


def digest(case, options) -> str:
    opts = dataclasses.asdict(options) if dataclasses.is_dataclass(options) else dict(options or {})
    opts.pop("quiet", None)  # the progress bar is rank 0's alone
    text = json.dumps([case.model_dump(mode="json"), opts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def check_same_case(comm, case, options) -> None:
    """Collective: InputError on every rank (run it inside parallel.comm.agree: one rank reports it)."""
    if comm.mpi is None or comm.size == 1:
        return
    mine = (digest(case, options), case.name)
    everyone = comm.allgather(mine)
    if len(set(everyone)) == 1:
        return
    groups: dict[tuple, list[int]] = {}
    for rank, key in enumerate(everyone):
        groups.setdefault(key, []).append(rank)
    parts = [f"{_ranks(ranks)} {'runs' if len(ranks) == 1 else 'run'} case {name!r} (hash {h[:12]})"
             for (h, name), ranks in groups.items()]
    raise InputError(f"the ranks were started with different cases or options: {'; '.join(parts)}; start every "
                     "rank with the same case file and the same options")


def _ranks(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ",".join(map(str, ranks))
