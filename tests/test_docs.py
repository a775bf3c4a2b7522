"""The reference pages generated from the code (docs/case_file.md, docs/command_line.md; solver.cli.reference):
the committed pages are what `stencil docs` writes now, and they hold what a user looks for first."""

import re

from conftest import ROOT, stencil

from solver.cli import reference
from solver.case import Case, schema

DOCS = ROOT / "docs"


def test_the_committed_pages_are_what_the_code_generates():
    """A field or option added without `stencil docs` fails here: run `stencil docs` and commit the pages."""
    assert reference.stale(DOCS) == [], "docs out of date: run `stencil docs` and commit docs/case_file.md, command_line.md"


def test_stencil_docs_check_says_so_and_fails_on_a_stale_page(tmp_path):
    ok = stencil(["docs", "--check"])
    assert ok.returncode == 0 and "match the code" in ok.stdout, ok.stderr
    for name, make in reference.PAGES.items():
        (tmp_path / name).write_text(make().replace("| `", "| `x", 1))
    bad = stencil(["docs", "--check", "--dir", str(tmp_path)])
    assert bad.returncode == 1 and "run `stencil docs`" in bad.stderr


def test_every_case_field_is_in_the_case_reference_with_its_default():
    page = reference.case_page()
    defs = schema()["$defs"]
    for model in defs.values():
        for key in model.get("properties", {}):
            assert f".{key}` |" in page or f"`{key}` |" in page, key
    for section in ("grid", "physics", "run", "numerics", "backend", "parallel", "output"):
        assert f"## `{section}`" in page
    assert "| `numerics.dtype` | `float32` \\| `float64` | `float64` |" in page  # the default dtype, stated
    assert Case.model_fields["numerics"].get_default(call_default_factory=True).dtype == "float64"


def test_the_option_list_has_every_run_option_a_user_meets():
    page = reference.cli_page()
    run = page[page.index("## `run`"):page.index("## `validate`")]
    for option in ("--solver", "--scheme", "--tolerance", "--time-tile", "--balance", "--dtype", "--backend",
                   "--steps", "--threads", "--output", "--halo", "--decomposition", "--kernel", "--verify/--no-verify",
                   "--overwrite", "--quiet", "--restart", "--mpi/--no-mpi"):
        assert f"`{option}" in run, option
    assert "`--dtype` float64" in page  # the default dtype where a case names none
    for command in ("run", "validate", "sweep strong", "sweep weak", "sweep threads", "report", "model", "bench",
                    "bench bandwidth", "docs"):
        assert f"## `{command}`" in page, command


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to -."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_link_between_the_pages_resolves_to_a_file_and_a_heading():
    pages = [ROOT / "README.md", ROOT / "BENCHMARKS.md", ROOT / "CHANGELOG.md", ROOT / "tools" / "README.md",
             *sorted(DOCS.glob("*.md"))]
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.relative_to(ROOT)}: link to {target}: no such file"
            if anchor and dest.suffix == ".md":
                headings = {slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}
                assert anchor in headings, f"{page.relative_to(ROOT)}: link to {target}: no such heading"


def test_the_readme_takes_a_newcomer_to_the_main_picture_in_its_first_60_lines():
    head = (ROOT / "README.md").read_text().splitlines()[:60]
    text = "\n".join(head)
    assert "make run" in text and "![" in text and "docs/img/heat_4096.png" in text
    assert "make test" in text
