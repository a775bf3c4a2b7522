"""The hand-written tables that list kinds (docs/discretisation.md, docs/physics.md: a table row, or a `kind: ...`
line of the section's example) hold every kind the case model has: a kind added to the code without its row fails
here (as a field added without `stencil docs` fails
tests/test_docs.py). The kinds are read from the models' `kind` literals, not listed here."""

import re
import typing

import pytest
from conftest import ROOT

from solver.case import boundary, materials, sources


def kinds(tp) -> set[str]:
    """Every `kind` literal of the pydantic models inside a (possibly annotated, nested) union type."""
    found = set()
    model_fields = getattr(tp, "model_fields", None)
    if model_fields and "kind" in model_fields:
        found |= set(typing.get_args(model_fields["kind"].annotation))
    elif model_fields:  # a model holding a union of kinds (alpha's regions)
        for field in model_fields.values():
            found |= kinds(field.annotation)
    for arg in typing.get_args(tp):
        found |= kinds(arg)
    return found


def section(page: str, heading: str) -> str:
    """The lines of a page from a heading to the next heading of the same or a higher level (lines in code blocks,
    a YAML comment among them, are no headings)."""
    lines, out, level, fenced = (ROOT / "docs" / page).read_text().splitlines(), None, len(heading.split()[0]), False
    for line in lines:
        fenced ^= line.startswith("```")
        is_heading = not fenced and re.match(r"#+ ", line)
        if out is not None and is_heading and len(line.split()[0]) <= level:
            break
        if out is None and line.startswith(heading):
            out = []
        if out is not None:
            out.append(line)
    assert out is not None, f"docs/{page}: no heading {heading!r}"
    return "\n".join(out)


TABLES = [  # (page, heading, the union whose kinds its table lists)
    ("discretisation.md", "## Boundary kinds", boundary.SideKind),
    ("physics.md", "## Sides", boundary.SideKind),
    ("physics.md", "## Sources", sources.Source),
    ("physics.md", "## Materials", materials.Alpha),
]


@pytest.mark.parametrize("page,heading,union", TABLES, ids=[f"{p}:{h[3:]}" for p, h, _ in TABLES])
def test_every_kind_in_the_code_has_its_row(page, heading, union):
    found = kinds(union)
    assert len(found) >= 2, found  # the models were read
    listed = section(page, heading)  # its table's rows, or its example's `kind: ...` lines
    missing = [k for k in sorted(found) if not re.search(rf"(`{k}`|kind: {k}\b|`{k},)", listed)]
    assert not missing, f"docs/{page} {heading!r}: no row for the kind(s) {missing}; add them to its table"


def test_the_kinds_are_read_from_the_models():
    assert kinds(boundary.SideKind) >= {"dirichlet", "neumann", "convective", "periodic"}
    assert kinds(sources.Source) >= {"constant", "gaussian", "rectangle", "file"}
    assert kinds(materials.Alpha) >= {"rectangle", "disk", "file"}
