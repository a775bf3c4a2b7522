"""The case model: one strict pydantic model per section, YAML in, one-line errors out.

Orientation (the one place it is written down): a field has shape (ny, nx); row i lies at
y = (i+1)*dy and column j at x = (j+1)*dx, with dx = lx/(nx+1), dy = ly/(ny+1) where both sides of an axis are
Dirichlet (solver.core.boundary gives the spacing for every side kind). So `bottom` is the boundary at y = 0,
`top` at y = ly, `left` at x = 0 and `right` at x = lx (ParaView's y-up view).

The package by section: base (limits, the strict base model), grid, physics (sources, materials), initial,
boundary (values that vary: values), settings (run, multigrid, numerics, backend, parallel, output), model (the
whole Case and its cross-section checks), loading (YAML, --set, overrides), errors (one-line messages), schema.
"""

from .base import (MAX_CASE_BYTES, MAX_COUNT, MAX_DEPTH, MAX_LENGTH, MAX_NODES, MAX_VALUE_CHARS, QUOTE_CHARS,
                   VTK_AUTO_MAX_POINTS, quote)
from .boundary import BOUNDARY_KINDS, Boundary
from .loading import OPTION_FIELDS, case_from_data, load_case, parse_sets, read_yaml, set_field, validate_case
from .model import Case
from .schema import DESCRIPTIONS, schema
from .settings import BackendSettings, Multigrid, Numerics, Output, Parallel, Run

__all__ = ["MAX_CASE_BYTES", "MAX_COUNT", "MAX_DEPTH", "MAX_LENGTH", "MAX_NODES", "MAX_VALUE_CHARS", "QUOTE_CHARS",
           "VTK_AUTO_MAX_POINTS", "quote", "BOUNDARY_KINDS", "Boundary", "OPTION_FIELDS", "case_from_data", "load_case",
           "parse_sets", "read_yaml", "set_field", "validate_case", "Case", "DESCRIPTIONS", "schema", "BackendSettings",
           "Multigrid", "Numerics", "Output", "Parallel", "Run"]
