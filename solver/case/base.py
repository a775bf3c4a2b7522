"""What every section of the case model shares: the strict base models, the input limits, quoting in errors,
and tables of pairs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..core.limits import MAX_LENGTH  # noqa: F401 - lx, ly, alpha, dt, widths, radii: the case's lengths' bound

VTK_AUTO_MAX_POINTS = 2048 * 2048  # output.vtk: null writes VTK up to this many points per snapshot
# Input limits (hostile or mistaken case files end with exit 2, never a traceback):
MAX_CASE_BYTES = 1 << 20  # a case file is a few hundred bytes; 1 MiB is far beyond any real one
MAX_DEPTH = 16  # mappings and lists nested in a case file (a real one nests 3 deep)
MAX_NODES = 10_000  # values, mappings and lists a case file's aliases may add (a real one: a section or two)
MAX_VALUE_CHARS = 4096  # one key or scalar value (paths included)
MAX_COUNT = 2**62  # steps, intervals: counted in int64 by the kernels and the files
QUOTE_CHARS = 80  # errors quote at most this much of a value


def quote(value) -> str:
    """repr(value), cut to about QUOTE_CHARS characters (a 2 MB string is not echoed whole)."""
    text = repr(value)
    return text if len(text) <= QUOTE_CHARS else f"{text[:QUOTE_CHARS - 3]}... ({len(text)} characters)"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)  # every number finite



# parts of a section (side values, sources, regions): the same strictness
Part = Section

MAX_TABLE = 10_000  # points of one table (a case file holds at most MAX_NODES values anyway)
MAX_PATH = 4096


def _pairs(rows: list[list[float]], name: str, what: str) -> list[list[float]]:
    """A table of [key, value] pairs, keys strictly increasing."""
    if not rows:
        raise ValueError(f"{name}: an empty table; give at least one pair [{what}, value]")
    for k, row in enumerate(rows):
        if len(row) != 2:
            raise ValueError(f"{name}: entry {k} has {len(row)} numbers; each entry is a pair [{what}, value]")
    keys = [r[0] for r in rows]
    for k in range(1, len(keys)):
        if keys[k] <= keys[k - 1]:
            raise ValueError(f"{name}: {what} {keys[k]:g} (entry {k}) does not come after {keys[k - 1]:g}; sort the "
                             f"table by {what}, each {what} once")
    return rows



OPTION_FIELDS = {  # CLI override -> case field, so errors name the option the user typed
    "--backend": ("backend", "name"),
    "--steps": ("run", "steps"),
    "--dtype": ("numerics", "dtype"),
    "--threads": ("backend", "threads"),
    "--output": ("output", "dir"),
    "--halo": ("parallel", "halo"),
    "--decomposition": ("parallel", "decomposition"),
    "--balance": ("parallel", "balance"),
    "--kernel": ("backend", "kernel"),
    "--time-tile": ("backend", "time_tile"),
    "--solver": ("physics", "solver"),
    "--scheme": ("physics", "scheme"),
    "--tolerance": ("run", "tolerance"),
}
