"""solver.core.cache: the one JSON cache both the copy ceilings and the tuned GPU kernels use."""

import json

import pytest

from solver.core import cache


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "c"))
    return tmp_path / "c"


def anything(key, entry):
    return None


def load(name):
    return cache.load(name, anything, "measured again")


def test_update_merges_and_leaves_no_temporary_file(root):
    assert load("x") == {}
    assert cache.update("x", {"a": {"v": 1}}) and cache.update("x", {"b": {"v": 2}})
    assert load("x") == {"a": {"v": 1}, "b": {"v": 2}}
    assert json.loads((root / "x.json").read_text())["b"] == {"v": 2}
    assert sorted(p.name for p in root.iterdir()) == ["x.json"]


def test_corrupt_or_foreign_files_read_as_empty(root):
    root.mkdir()
    (root / "x.json").write_text('{"a": ')
    assert load("x") == {}
    (root / "x.json").write_text("[1, 2]")
    assert load("x") == {}
    assert cache.update("x", {"a": 1}) and load("x") == {"a": 1}


def test_an_unwritable_directory_stores_nothing_and_does_not_raise(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("STENCIL_CACHE_DIR", str(tmp_path / "file" / "c"))  # below a file: no mkdir, even as root
    assert cache.update("x", {"a": 1}) is False and load("x") == {}


def test_both_caches_live_in_the_one_directory(root):
    from solver.backends import tuned
    from solver.bench import bandwidth

    assert bandwidth.cache_path().parent == tuned.tune_path().parent == root
