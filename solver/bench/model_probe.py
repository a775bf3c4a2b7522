"""The scaling model's measurements (solver.model): one MPI program, started by a launcher on every rank.

    mpirun -n P python -m solver.bench.model_probe --json OUT [--dtype float32] [--occupancies 1,2,4]
                                                    [--shapes 256x4096,...] [--tiles 1,8] [--gpu-sizes 4096,...]

What it measures, every figure on the ranks as the launcher placed them (one numba thread per rank):
- kernel: for each occupancy o (the first o ranks of every node active, the others waiting at a
  barrier), block shape (ny x nx) and time tile k, every active rank times tiles of the step kernel
  on a middle block of a rows decomposition (neighbours on both sides), called as the halo mode calls
  it (overlap: the interior in bands, then the edge strips; k > 1: solver.parallel.deep's inner part in
  bands, then its frame), all at once with no messages; each rank's seconds per tile are kept in order,
  so the model replays the per-rank speed spread and its variation in time (what `stencil bench balance`
  shows). Also the convergence check's local reduction (max_update) on the block.
- exchange: the halo exchanger itself (solver.parallel.exchange, the run's mode) between the first two
  ranks of the first node, a ring of two (each has two sides, as a middle rank), no compute: seconds per
  exchange by message size. This is the CPU cost of messages inside a node (packing, MPI calls).
- pingpong: half round trips by message size between two ranks of one node, and between the first
  ranks of two nodes where there are several nodes (the link between them).
- allreduce: one 8-byte MPI_Allreduce (max) by rank count, the first n ranks.
- write: rank 0 writing a file with fsync (bytes per second), for the output part.
- gpu (--gpu-sizes): on rank 0's GPU, batches of 50 steps through the backend's advance() (the kernel
  and time tile a run would choose), the check's max_update, and staging one row to and from the host.

Prints nothing but errors; writes one JSON object (solver.model.inputs reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time

import numpy as np

SHAPES = ((64, 1024), (256, 1024), (1024, 1024), (4096, 1024), (64, 4096), (256, 4096), (1024, 4096),
          (4096, 4096), (64, 16384), (256, 16384), (1024, 16384))
TILES = (1, 8)
PINGPONG_BYTES = (8, 256, 4096, 32768, 262144, 2097152, 8388608)
EXCHANGE_WIDTHS = (64, 1024, 4096, 16384, 65536, 262144)  # points per halo message (deep GPU halos: 8 x 32768)
STAGE_ROWS = (1, 8, 64)  # GPU: strips staged to and from the host
SECONDS = 0.25  # target time of one kernel measurement
MIN_TILES = 8
MAX_TILES = 400  # per rank and point: enough for the spread, a short list in the cache
BANDS = 4  # overlap: interior bands (solver.parallel.halo.HostTransport.progress_bands)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m solver.bench.model_probe")
    ap.add_argument("--json", required=True)
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--halo", default="overlap")
    ap.add_argument("--occupancies", default="")
    ap.add_argument("--shapes", default=",".join(f"{a}x{b}" for a, b in SHAPES))
    ap.add_argument("--tiles", default=",".join(map(str, TILES)))
    ap.add_argument("--points", default="", help="explicit OCCUPANCY:NYxNX:K:PATTERN,... (PATTERN serial or halo) "
                    "instead of the product of the three above (pattern halo)")
    ap.add_argument("--seconds", type=float, default=SECONDS)
    ap.add_argument("--gpu-shapes", default="")
    ap.add_argument("--messages", choices=("auto", "yes", "no"), default="auto")
    ap.add_argument("--refresh", action="store_true")
    ap.add_argument("--write-dir", default=".")
    return ap.parse_args(argv)


def ints(text: str) -> list[int]:
    return [int(t) for t in text.split(",") if t.strip()]


def shapes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s.strip()]


# the kernel ---------------------------------------------------------------------------------------

class Tile:
    """The calls one rank makes for one tile of k steps on a block ny x nx: pattern "serial" as one process
    makes them (NumbaBackend.advance: one call per step or per tile on the whole block), "halo" as a middle
    rank of a rows decomposition does in its halo mode (see the module docstring)."""

    def __init__(self, be, ny: int, nx: int, k: int, overlap: bool, dtype: str, pattern: str = "halo"):
        from ..core.decomp import all_blocks
        from ..parallel.deep import DeepLayout
        from ..parallel.halo import bands
        from .stencil import bench_weights

        self.be, self.k, self.w = be, k, bench_weights(dtype)
        block = all_blocks((3 * ny, nx), (3, 1))[1]
        if pattern == "serial":
            block = all_blocks((ny, nx), (1, 1))[0]
            shape = block.padded
            self.calls = [(block.everything(), None if k == 1 else "fused")]
        elif k == 1:
            shape = block.padded
            self.calls = ([(r, None) for r in bands(block.interior(), BANDS)] + [(r, None) for r in block.edges()]
                          if overlap else [(block.everything(), None)])
        else:
            lay = DeepLayout(block, k)
            shape = lay.shape
            before, after = lay.valid(k, False), lay.valid(k, True)
            self.calls = ([(r, before) for r in bands(lay.inner(k), BANDS)] + [(r, after) for r in lay.frame(k)]
                          if overlap else [(lay.owned, after)])
        rng = np.random.default_rng(ny * 7 + nx)
        self.u = (1.0 + rng.random(shape)).astype(dtype)  # no zeros, no subnormals
        self.v = self.u.copy()
        self.region = block.everything()

    def run(self) -> float:
        t = time.perf_counter()
        for region, valid in self.calls:
            if valid is None:
                self.be.step(self.v, self.u, self.w, region)
            elif valid == "fused":
                w = self.w
                self.be.k.fused(self.v, self.u, w.wc, w.wx, w.wy, self.k, 1, self.be.column_blocks(region[3] - 1, self.k))
            else:
                self.be.tiled(self.v, self.u, self.w, self.k, region, *valid)
        self.u, self.v = self.v, self.u
        return time.perf_counter() - t

    def check(self) -> float:
        t = time.perf_counter()
        self.be.max_update(self.u, self.v, self.region)
        return time.perf_counter() - t


def numba_backend(dtype: str):
    from ..backends.numba_backend import NumbaBackend
    from ..case import BackendSettings

    return NumbaBackend(BackendSettings(name="numba", threads=1), dtype, 1)


def kernel_point(world, active: bool, be, shape, k: int, pattern: str, args) -> dict | None:
    """Every active rank times tiles of one (shape, k, pattern) at once; all ranks agree on the count."""
    tile = Tile(be, *shape, k, args.halo == "overlap", args.dtype, pattern) if active else None
    if active:
        tile.run()  # compile, first touch
    first = (tile.run() + tile.run()) / 2 if active else 0.0
    quiet_barrier(world)
    slowest = world.allreduce(first, op=_mpi().MAX)
    count = min(MAX_TILES, max(MIN_TILES, int(args.seconds / max(slowest, 1e-6))))
    quiet_barrier(world)
    times = [tile.run() for _ in range(count)] if active else []
    checks = float(np.median([tile.check() for _ in range(3)])) if active else 0.0
    quiet_barrier(world)
    rows = world.gather((times, checks) if active else None, root=0)
    if world.rank:
        return None
    kept = [r for r in rows if r is not None]
    return {"ny": shape[0], "nx": shape[1], "k": k, "pattern": pattern, "tiles": count, "tile_seconds": [r[0] for r in kept],
            "check_seconds": float(np.median([r[1] for r in kept]))}


# how the solver would run a block (for the model, which does not import the backends itself) ----------

def solver_tile(dtype: str, rows: int, case_tile: int | None, threads: int = 1) -> tuple[int, str]:
    """(k, source): the numba time tile a run takes for blocks of `rows` rows per thread: the case's
    backend.time_tile, else the stored `stencil bench --tune` choice, else the default rule."""
    from ..backends.numba_backend import default_time_tile, stored_tile

    if case_tile is not None:
        return case_tile, "the case's backend.time_tile"
    tuned = stored_tile(dtype, threads)
    if tuned:
        return int(tuned["time_tile"]), "stored by stencil bench --tune"
    return default_time_tile(rows), f"default for {rows} rows per rank (numba_backend.default_time_tile)"


def depth_cap(k: int, blocks) -> int:
    from ..parallel.deep import capped_depth

    return capped_depth(k, blocks)


# messages -----------------------------------------------------------------------------------------

def _mpi():
    from mpi4py import MPI

    return MPI


def quiet_barrier(comm) -> None:
    """A barrier that waits without spinning (MPI_Ibarrier tested between short sleeps): ranks that are not
    being measured leave their cores to those that are (an emulated node may have fewer cores than ranks,
    and MPICH's blocking calls poll)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.0005)


def pingpong(world, a: int, b: int, sizes) -> list[list[float]]:
    """[bytes, seconds] half round trips between ranks a and b (median of 5 batches); collective."""
    out = []
    for n in sizes:
        buf = np.zeros(max(n, 1), dtype=np.uint8)
        reps = max(4, min(200, int(4e6 / (n + 20000))))
        batches = []
        for _ in range(5):
            quiet_barrier(world)
            t = time.perf_counter()
            for _ in range(reps):
                if world.rank == a:
                    world.Send(buf, dest=b)
                    world.Recv(buf, source=b)
                elif world.rank == b:
                    world.Recv(buf, source=a)
                    world.Send(buf, dest=a)
            batches.append((time.perf_counter() - t) / (2 * reps))
        out.append([n, float(np.median(batches))])
    return out


def exchange_costs(world, pair: list[int], args) -> list[list[float]]:
    """[bytes per message, seconds per exchange] of the run's halo exchanger between the ranks of `pair`
    as a ring of two (two sides each); collective over world."""
    from ..core.decomp import all_blocks
    from ..core.timing import Timer
    from ..parallel.exchange import make_exchange

    sub = world.Split(0 if world.rank in pair else _mpi().UNDEFINED, world.rank)
    be = numba_backend(args.dtype)
    out = []
    for width in EXCHANGE_WIDTHS:
        quiet_barrier(world)
        if sub == _mpi().COMM_NULL:
            continue
        block = all_blocks((8, width), (2, 1), (True, False))[sub.rank]
        ex = make_exchange(args.halo, block, sub, be, Timer())
        u = np.ones(block.padded, dtype=args.dtype)
        times = []
        for _ in range(5):
            sub.Barrier()
            t = time.perf_counter()
            for _ in range(20):
                pending = ex.start(u)
                for _ in range(BANDS - 1):
                    ex.progress(pending)
                ex.finish(pending)
            times.append((time.perf_counter() - t) / 20)
        ex.close()
        out.append([width * np.dtype(args.dtype).itemsize, float(np.median(times))])
    if sub != _mpi().COMM_NULL:
        sub.Free()
    return out


def allreduce(world, counts) -> list[list[float]]:
    """[ranks, seconds] of one 8-byte MPI_Allreduce (max) among the first n ranks (median of 5 batches of 50)."""
    out = []
    x = np.zeros(1)
    y = np.zeros(1)
    for n in counts:
        sub = world.Split(0 if world.rank < n else _mpi().UNDEFINED, world.rank)
        batches = []
        if sub != _mpi().COMM_NULL:
            for _ in range(5):
                sub.Barrier()
                t = time.perf_counter()
                for _ in range(50):
                    sub.Allreduce(x, y, op=_mpi().MAX)
                batches.append((time.perf_counter() - t) / 50)
            sub.Free()
        quiet_barrier(world)
        if world.rank == 0:
            out.append([n, float(np.median(batches))])
    return out


def write_rate(directory: str, nbytes: int = 32 << 20) -> float:
    """Bytes per second of one file written and fsynced (median of 3)."""
    data = np.random.default_rng(0).random(nbytes // 8).tobytes()
    times = []
    for _ in range(3):
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".stencil-write-") as f:
            t = time.perf_counter()
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            times.append(time.perf_counter() - t)
    return nbytes / float(np.median(times))


# the GPU ------------------------------------------------------------------------------------------

def gpu_point(ny: int, nx: int, dtype: str) -> dict:
    """Seconds per step of batches of 50 steps (as a one-process run takes them between polls; every
    other batch keeps the previous field for the check), the check's max_update, one row staged."""
    from ..backends.cupy_backend import CupyBackend
    from ..core.physics import weights
    from .gpu import make_case
    from .tune import random_field

    case = make_case(ny, nx, dtype)
    be = CupyBackend(case.backend, dtype)
    shape, region = (ny + 2, nx + 2), (1, ny + 1, 1, nx + 1)
    u, v = random_field(be, shape), be.zeros(shape)
    w = weights(case).cast(dtype)
    be.prepare(u, v, w)
    be.plan({50})
    for previous in (False, True):
        u, v = be.advance(u, v, w, 50, region, previous)
    be.synchronize()
    batches = []
    for i in range(6):
        t = time.perf_counter()
        u, v = be.advance(u, v, w, 50, region, previous=bool(i % 2))
        be.synchronize()
        batches.append((time.perf_counter() - t) / 50)
    check = _timed(lambda: be.max_update(u, v, region))
    stages = [[rows * nx * np.dtype(dtype).itemsize, _stage(be, u, rows, nx)] for rows in STAGE_ROWS if rows < ny]
    variant, _, k, source = be.choice(shape)
    out = {"ny": ny, "nx": nx, "step_seconds": float(np.median(batches)), "check_seconds": check,
           "stage": stages, "kernel": variant,
           "time_tile": k, "choice": source, "gpu": be.gpu_name, "measured": _now()}
    return out


def _stage(be, u, rows: int, nx: int) -> float:
    """Seconds to pack `rows` rows into a host buffer and unpack them back (the staged transport's copies)."""
    buf = be.halo_buffer(rows * nx)
    return _timed(lambda: (be.pack(u, (1, 1 + rows, 1, nx + 1), buf), be.unpack(buf, u, (1, 1 + rows, 1, nx + 1)),
                           be.synchronize()))


def _free_gpu() -> None:
    import gc

    import cupy

    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()


def _timed(fn, repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


# the cache: one entry per machine, dtype, halo mode and link, grown by what each probe measures ------

CACHE = "model"


def cache_key(host: str, cpu: str, cpus: int, dtype: str, halo: str, link: str | None) -> str:
    """The entry for ranks placed on `host` (rank 0's; a node of tools/cluster.sh is node1) of a machine
    with this CPU model and logical CPU count, this dtype and halo mode, and the emulated link's shaping."""
    return f"{host}|{cpu}|cpus={cpus}|{dtype}|{halo}|link={link or 'none'}"


def here_key(dtype: str, halo: str) -> str:
    """The key for ranks started on this machine itself (no emulated cluster)."""
    from ..core.machine import cpu_model

    return cache_key(socket.gethostname(), cpu_model(), os.cpu_count() or 1, dtype, halo, None)


def load_entry(key: str) -> dict | None:
    """The cached entry for `key`, or None (also when it is invalid: it is said, and measured again)."""
    from ..core import cache

    return cache.load(CACHE, entry_problem, "it is measured again").get(key)


def entry_problem(key: str, entry) -> str | None:
    """Why a calibration entry (a model.json entry, or the file `stencil model --inputs` reads) cannot be used,
    or None: every value solver.model.inputs and the cache's users read, with its type and range (counts whole
    numbers >= 1, times and sizes finite and > 0, one host and node rank per rank of a kernel point)."""
    from ..core.cache import problem

    why = problem(entry, [("kernel", _listed, "a list"), ("gpu", _listed, "a list"),
                          ("messages", lambda v: isinstance(v, dict), "an object")], optional=("gpu", "messages"))
    for name, items, check in (("kernel", entry.get("kernel") if not why else [], _kernel_problem),
                               ("gpu", (entry.get("gpu") or []) if not why else [], _gpu_problem)):
        for i, p in enumerate(items):
            why = why or (f"{name}[{i}].{w}" if (w := check(p)) else None)
    m = None if why else entry.get("messages")
    if m:
        why = _messages_problem(m)
        why = f"messages.{why}" if why else None
    return why


def _listed(v) -> bool:
    return isinstance(v, list)


def _table(v) -> bool:
    """[[size, seconds], ...]: each a pair of finite numbers > 0."""
    from ..core.cache import positive

    return isinstance(v, list) and all(isinstance(r, list) and len(r) == 2 and all(positive(x) for x in r) for r in v)


_TABLE = (_table, "a table of [size, seconds] rows, each > 0")


def _kernel_problem(p) -> str | None:
    from ..core.cache import positive, problem, text, whole

    def rows(v) -> bool:  # per rank: a list of positive seconds
        return isinstance(v, list) and v != [] and all(isinstance(r, list) and r and all(positive(x) for x in r)
                                                       for r in v)

    why = problem(p, [*((k, whole(1), "a whole number >= 1") for k in ("ny", "nx", "k", "occupancy")),
                      ("tile_seconds", rows, "a list of seconds > 0 per rank"),
                      ("check_seconds", positive, "seconds > 0"),
                      ("hosts", lambda v: isinstance(v, list) and all(text(h) for h in v), "a list of host names"),
                      ("node_ranks", lambda v: isinstance(v, list) and all(whole(0)(r) for r in v),
                       "a list of whole numbers >= 0"),
                      ("pattern", lambda v: v in ("serial", "halo"), "serial or halo")], optional=("pattern",))
    if why is None and not len(p["hosts"]) == len(p["node_ranks"]) == len(p["tile_seconds"]):
        why = "hosts, node_ranks and tile_seconds differ in length (one entry per rank each)"
    return why


def _gpu_problem(p) -> str | None:
    from ..core.cache import positive, problem, whole

    return problem(p, [("ny", whole(1), "a whole number >= 1"), ("nx", whole(1), "a whole number >= 1"),
                       ("step_seconds", positive, "seconds > 0"), ("check_seconds", positive, "seconds > 0"),
                       ("time_tile", whole(1), "a whole number >= 1"), ("stage", *_TABLE),
                       ("stage_bytes", positive, "bytes > 0"), ("stage_seconds", positive, "seconds > 0")],
                   optional=("time_tile", "stage", "stage_bytes", "stage_seconds"))


def _messages_problem(m) -> str | None:
    from ..core.cache import positive, problem, whole

    return problem(m, [("ranks", whole(1), "a whole number >= 1"), ("per_node", whole(1), "a whole number >= 1"),
                       ("nodes", whole(1), "a whole number >= 1"),
                       ("pingpong", lambda v: isinstance(v, dict) and all(_table(v.get(n) or []) for n in ("intra", "inter")),
                        "intra and inter tables of [size, seconds] rows, each > 0"),
                       ("exchange", *_TABLE), ("allreduce", *_TABLE),
                       ("write_bytes_per_second", positive, "bytes per second > 0")],
                   optional=("nodes", "exchange", "allreduce", "write_bytes_per_second"))


def point_id(p: dict) -> tuple:
    return (p.get("occupancy", 1), p["ny"], p["nx"], p.get("k", 1), p.get("pattern", "halo"))


def missing_kernels(entry: dict | None, wanted: list[tuple]) -> list[tuple]:
    have = {point_id(p) for p in (entry or {}).get("kernel", [])}
    return [w for w in wanted if w not in have]


def needs_messages(entry: dict | None, where: dict) -> bool:
    m = (entry or {}).get("messages")
    if not m:
        return True
    return (m["ranks"] < where["ranks"] or m["per_node"] < where["per_node"]
            or (where["nodes"] > 1 and not m["pingpong"].get("inter")))


def merge(entry: dict | None, new: dict) -> dict:
    """The entry with the new points (replacing the same occupancy, shape and k) and messages."""
    out = dict(entry or {})
    for part in ("kernel", "gpu"):
        fresh = {point_id(p) for p in new.get(part, [])}
        out[part] = [p for p in out.get(part, []) if point_id(p) not in fresh] + new.get(part, [])
    if new.get("messages"):
        out["messages"] = new["messages"]
    out.update({k: new[k] for k in ("key", "dtype", "halo", "placement")})
    out["fingerprint"] = new["placement"]["fingerprint"]
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


# the whole probe ----------------------------------------------------------------------------------

def placement(world) -> dict:
    """Hosts, nodes and cores as the launcher placed the ranks (nodes: shared-memory groups)."""
    from ..core.machine import cpu_cores, cpu_model, fingerprint

    local = world.Split_type(_mpi().COMM_TYPE_SHARED)
    node_rank, per_node = local.Get_rank(), local.Get_size()
    cores = set().union(*local.allgather(cpu_cores()))
    local.Free()
    ranks = world.allgather((socket.gethostname(), node_rank))
    return {"ranks": world.size, "hosts": [h for h, _ in ranks], "node_ranks": [r for _, r in ranks],
            "per_node": per_node, "node_cores": len(cores), "cpu": cpu_model(), "fingerprint": fingerprint(),
            "mpi_library": _mpi().Get_library_version().splitlines()[0].strip(),
            "link": os.environ.get("STENCIL_CLUSTER_LINK"), "nodes": len(dict.fromkeys(h for h, _ in ranks))}


def pairs(hosts: list[str]) -> tuple[list[int] | None, list[int] | None]:
    """(two ranks of rank 0's node, rank 0 and the first rank of another node); None where there is none."""
    same = [r for r, h in enumerate(hosts) if h == hosts[0]]
    other = next((r for r, h in enumerate(hosts) if h != hosts[0]), None)
    return (same[:2] if len(same) > 1 else None), ([0, other] if other is not None else None)


def wanted(args, per_node: int) -> list[tuple]:
    """(occupancy, ny, nx, k, pattern) asked for (--points, else the product of --occupancies, --shapes,
    --tiles with pattern halo, and serial at occupancy 1); occupancies above the ranks per node are left out."""
    if args.points:
        pts = [(int(o), *shapes(s)[0], int(k), pat) for o, s, k, pat in (p.split(":") for p in args.points.split(",") if p)]
        return [p for p in pts if p[0] <= per_node]
    occ = ints(args.occupancies) or [o for o in (1, 2, 4, 8, 16, 32, 64, 128) if o < per_node] + [per_node]
    return [(o, ny, nx, k, pat) for o in sorted(set(occ)) if o <= per_node for pat in (("serial", "halo") if o == 1 else ("halo",))
            for ny, nx in shapes(args.shapes) for k in ints(args.tiles)]


def kernels(world, where: dict, todo: list[tuple], args) -> list[dict]:
    if not todo:
        return []
    be = numba_backend(args.dtype)
    out = []
    me = world.rank
    for o, ny, nx, k, pattern in todo:
        point = kernel_point(world, where["node_ranks"][me] < o, be, (ny, nx), k, pattern, args)
        if point:
            active = [r for r in range(world.size) if where["node_ranks"][r] < o]
            out.append({"occupancy": o, **point, "hosts": [where["hosts"][r] for r in active],
                        "node_ranks": [where["node_ranks"][r] for r in active], "measured": _now()})
    return out


def messages(world, where: dict, args) -> dict:
    intra, inter = pairs(where["hosts"])
    counts = sorted({n for n in (2, 4, 8, 16, 32, 64, 128, 256) if n < world.size} | {world.size} - {1})
    res = {"ranks": world.size, "per_node": where["per_node"], "nodes": where["nodes"], "measured": _now(),
           "exchange": exchange_costs(world, intra, args) if intra else [],
           "pingpong": {"intra": pingpong(world, *intra, PINGPONG_BYTES) if intra else [],
                        "inter": pingpong(world, *inter, PINGPONG_BYTES) if inter else []},
           "allreduce": allreduce(world, counts)}
    if world.rank == 0:
        res["write_bytes_per_second"] = write_rate(args.write_dir)
    return res


def probe(world, args) -> dict:
    """Measure what the cache lacks (everything with --refresh); rank 0 returns the merged entry."""
    where = placement(world)
    key = cache_key(where["hosts"][0], where["cpu"], where["fingerprint"]["cpus"], args.dtype, args.halo, where["link"])
    entry = None if args.refresh else (load_entry(key) if world.rank == 0 else None)
    plan = world.bcast((missing_kernels(entry, wanted(args, where["per_node"])),
                        args.messages == "yes" or (args.messages == "auto" and needs_messages(entry, where)))
                       if world.rank == 0 else None)
    new = {"key": key, "dtype": args.dtype, "halo": args.halo, "placement": where,
           "kernel": kernels(world, where, plan[0], args)}
    if plan[1]:
        new["messages"] = messages(world, where, args)
    if world.rank == 0:
        new["gpu"] = []
        for ny, nx in shapes(args.gpu_shapes):
            if args.refresh or not _has_gpu(entry, ny, nx):
                new["gpu"].append(gpu_point(ny, nx, args.dtype))
                _free_gpu()
        merged = merge(entry, new)
        from ..core import cache

        cache.update(CACHE, {key: merged})
        return {"key": key, "entry": merged, "measured_now": {"kernel": len(new["kernel"]),
                                                              "messages": bool(plan[1]), "gpu": len(new["gpu"])}}
    return {}


def _has_gpu(entry: dict | None, ny: int, nx: int) -> bool:
    return any(p["ny"] == ny and p["nx"] == nx for p in (entry or {}).get("gpu", []))


def main(argv=None) -> int:
    args = parse_args(argv)
    from mpi4py import MPI

    res = probe(MPI.COMM_WORLD, args)
    if MPI.COMM_WORLD.rank == 0:
        with open(args.json, "w") as f:
            json.dump(res, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
