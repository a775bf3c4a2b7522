"""Installing prints no deprecation warning: setuptools' own build backend reads pyproject.toml (as pip does
when it installs) and says nothing deprecated; the old `license = {text = ...}` table, for contrast, is
still caught by the same check."""

import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

BUILD = "from setuptools import build_meta; build_meta.prepare_metadata_for_build_wheel('meta')"


def metadata_build(project):
    (project / "meta").mkdir()
    return subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True, cwd=project, timeout=120)


def copy_project(tmp_path, pyproject: str):
    (tmp_path / "solver").mkdir()
    shutil.copy(ROOT / "solver" / "__init__.py", tmp_path / "solver")
    shutil.copy(ROOT / "README.md", tmp_path)
    (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


def test_the_build_backend_prints_no_deprecation_warning(tmp_path):
    pytest.importorskip("setuptools", minversion="77")  # what [build-system] requires
    res = metadata_build(copy_project(tmp_path, (ROOT / "pyproject.toml").read_text()))
    assert res.returncode == 0, res.stderr
    assert "deprecat" not in (res.stdout + res.stderr).lower(), res.stderr
    assert "License-Expression: MIT" in (tmp_path / "meta" / "stencil-0.1.0.dist-info" / "METADATA").read_text()


def test_the_same_check_catches_a_license_table(tmp_path):
    pytest.importorskip("setuptools", minversion="77")
    old = (ROOT / "pyproject.toml").read_text().replace('license = "MIT"', 'license = {text = "MIT"}')
    res = metadata_build(copy_project(tmp_path, old))
    assert "deprecated" in res.stderr, res.stderr


def test_build_system_asks_for_a_setuptools_that_reads_the_license_string():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert data["project"]["license"] == "MIT"
    assert "setuptools>=77" in data["build-system"]["requires"][0]
