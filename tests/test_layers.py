"""The project checks its own layering: import contracts in pyproject.toml, run by import-linter (the real
tool on the real import graph, function-level imports included); and its documents name no file outside
the repository."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def lint_imports(config: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "lint-imports"
    if not exe.exists():
        exe = shutil.which("lint-imports")
    assert exe, "import-linter is not installed: pip install -e '.[dev]'"
    return subprocess.run([str(exe), str(config), "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_import_contracts_are_kept():
    res = lint_imports(ROOT / "pyproject.toml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "packages import only downwards KEPT" in res.stdout and "0 broken" in res.stdout, res.stdout


def test_a_broken_layer_is_reported(tmp_path):
    """The same tool with the layers upside down must fail and name an import that breaks them: the check
    really reads the graph."""
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("[tool.importlinter]")
    upside_down = text[start:].replace('    "solver.cli | (solver.api)",\n', "").replace(
        '    "solver.core",\n', '    "solver.core",\n    "solver.cli",\n')
    config = tmp_path / "pyproject.toml"
    config.write_text(upside_down)
    res = lint_imports(config)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "BROKEN" in res.stdout and "solver.cli" in res.stdout, res.stdout


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_documents_name_no_file_outside_the_repository(doc):
    text = doc.read_text()
    outside = [m for m in re.findall(r"(?<![\w.])\.\./[\w./-]*", text)
               if not (doc.parent / m).resolve().is_relative_to(ROOT)]
    assert not outside, f"{doc.name} names {outside}: files outside the repository do not exist in a clone"
    assert "/work/" not in text and "shared/tools" not in text
