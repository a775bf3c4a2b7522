"""The network between nodes: a preset (solver/model/networks/*.yaml) or a file of the same form.

    name: infiniband-hdr
    latency_us: 1.1        # MPI half round trip of a small message, microseconds
    bandwidth_gbs: 24.0    # one-way rate of large messages, GB/s, per node (shared by its ranks' messages)
    source: where the figures come from

A message of b bytes between nodes takes latency + b / bandwidth (Hockney's model, LogGP's L + G b with
the overheads in the measured exchange cost); the messages that leave one node at the same time share
its bandwidth. "measured" is the link measured by the model's probe between two nodes of the launch
that calibrated the model (solver.model.inputs: a ping-pong table, interpolated by size), e.g. the
emulated cluster of tools/cluster.sh.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


from ..core.errors import InputError

PRESETS = Path(__file__).with_name("networks")
FIELDS = {"name": str, "latency_us": (int, float), "bandwidth_gbs": (int, float), "source": str}
MEASURED = "measured"


@dataclass(frozen=True)
class Network:
    name: str
    latency: float  # seconds
    bandwidth: float  # bytes per second
    source: str
    table: tuple[tuple[float, float], ...] = ()  # measured (bytes, seconds); empty for a preset

    def seconds(self, nbytes: float, sharing: float = 1.0) -> float:
        """One message of nbytes while `sharing` messages leave the node at once."""
        if self.table:
            from .interp import loglog

            return loglog(self.table, nbytes) + (sharing - 1) * nbytes / self.bandwidth
        return self.latency + sharing * nbytes / self.bandwidth


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS.glob("*.yaml"))


def load(spec: str, measured: list | None = None) -> Network:
    """A preset name, "measured" (the probe's table between two nodes), or a YAML file."""
    if spec == MEASURED:
        return from_table(measured)
    path = PRESETS / f"{spec}.yaml"
    if not path.exists():
        path = Path(spec)
    if not path.exists():
        raise InputError(f"--network: {spec!r} is neither a preset ({', '.join(preset_names())}, {MEASURED}) nor a "
                         "file; name a preset or give a YAML file with name, latency_us, bandwidth_gbs, source")
    return from_data(_read(path), f"--network: {path}")


def _read(path: Path) -> dict:
    from ..core.readers import read_yaml

    fix = "give a YAML file with name, latency_us, bandwidth_gbs, source"
    data = read_yaml(path, "--network", fix)
    if not isinstance(data, dict):
        raise InputError(f"--network: {path}: not a mapping; {fix}")
    return data


def from_data(data: dict, where: str) -> Network:
    for key in data:
        if key not in FIELDS:
            raise InputError(f"{where}: unknown field {key!r}; the fields are {', '.join(FIELDS)}")
    for key, kind in FIELDS.items():
        value = data.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, kind):
            raise InputError(f"{where}: {key} is missing or not a {'number' if kind != str else 'text'}; e.g. "
                             f"{key}: {_EXAMPLE[key]}")
        if kind != str and not 0 < value < 1e9:
            raise InputError(f"{where}: {key} = {value} must be positive; e.g. {key}: {_EXAMPLE[key]}")
    return Network(data["name"], data["latency_us"] * 1e-6, data["bandwidth_gbs"] * 1e9, data["source"].strip())


_EXAMPLE = {"name": "my-cluster", "latency_us": 1.5, "bandwidth_gbs": 20.0, "source": "osu_latency, osu_bw on 2 nodes"}


def from_table(table: list | None) -> Network:
    if not table:
        raise InputError(f"--network: {MEASURED!r} needs a calibration measured across two nodes (none here); "
                         f"name a preset ({', '.join(preset_names())}) or run the calibration under a launcher "
                         "that spans nodes (e.g. tools/cluster.sh)")
    pts = tuple((float(b), float(s)) for b, s in table)
    big = pts[-1]
    return Network(MEASURED, pts[0][1], big[0] / big[1], "ping-pong measured between two nodes by the model's probe",
                   pts)
