"""Property: any case document either validates or fails as InputError (exit 2) - never a traceback."""

import string

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from solver.cli import app
from solver.case import validate_case
from solver.core.errors import InputError

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(string.printable, max_size=8), st.lists(st.integers(-5, 5), max_size=3))
keys = st.sampled_from(["nx", "ny", "lx", "ly", "equation", "alpha", "dt", "safety", "kind", "value", "radius",
                        "center", "seed", "path", "top", "bottom", "left", "right", "steps", "tolerance",
                        "check_every", "dtype", "name", "threads", "kernel", "block", "decomposition", "halo",
                        "dims", "dir", "every", "vtk", "trace", "bogus"])
sections = st.sampled_from(["grid", "physics", "initial", "boundary", "run", "numerics", "backend", "parallel",
                            "output", "verify", "name", "extra"])
documents = st.dictionaries(sections, st.one_of(scalars, st.dictionaries(keys, scalars, max_size=5)), max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_random_documents_validate_or_fail_cleanly(doc):
    try:
        case = validate_case(doc)
    except InputError as exc:
        msg = str(exc)
        assert msg and "Traceback" not in msg
        assert all(line.startswith("case: ") for line in msg.splitlines())
    else:
        assert case.grid.nx >= 3 and case.grid.ny >= 3


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(documents)
def test_random_documents_through_the_cli_exit_0_or_2(tmp_path, doc):
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(doc))
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code in (0, 2), res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
