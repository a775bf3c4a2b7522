"""tools/ has an index, and the pages cite only tools and commands that exist (BENCHMARKS.md's commands
included): a renamed or removed tool fails here until its citations follow."""

import re

from conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "tools" / "README.md"]


def index_rows() -> list[str]:
    text = (ROOT / "tools" / "README.md").read_text()
    table = text[:text.index("Earlier names")]
    return re.findall(r"^\| `([^`]+)` \|", table, re.M)


def test_every_tool_has_one_line_in_the_index_and_every_line_a_tool():
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in (ROOT / "tools").iterdir()
                     if p.name not in ("README.md", "__pycache__"))
    rows = index_rows()
    assert sorted(rows) == entries, (sorted(set(entries) - set(rows)), sorted(set(rows) - set(entries)))


def test_pages_cite_only_tools_that_exist():
    for page in PAGES:
        text = page.read_text()
        if page.name == "README.md" and page.parent.name == "tools":
            text = text[:text.index("Earlier names")]  # the table of earlier names quotes the old ones on purpose
        for path in re.findall(r"tools/[\w./-]*\w", text):
            assert (ROOT / path).exists(), f"{page.relative_to(ROOT)} cites {path}, which does not exist"


def test_pages_cite_only_stencil_commands_that_exist():
    from solver.cli.reference import cli_page

    commands = set(re.findall(r"^## `([a-z -]+)`", cli_page(), re.M))
    firsts = {c.split()[0] for c in commands}
    groups = {c.split()[0] for c in commands if " " in c}  # bench, sweep: a word after them is a subcommand
    for page in PAGES:
        for cmd in re.findall(r"`stencil ([a-z][a-z-]*(?: [a-z][a-z-]*)?)", page.read_text()):
            first, *rest = cmd.split()
            assert first in firsts, f"{page.relative_to(ROOT)} cites `stencil {cmd}`: no command {first}"
            if first in groups and rest:
                assert cmd in commands, f"{page.relative_to(ROOT)} cites `stencil {cmd}`, which is no command"
