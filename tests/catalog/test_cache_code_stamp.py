"""The catalog and recipe caches are stamped with toolrun's own sources: an edit to any module in
a development checkout makes a new cache, never a catalog built by the old code."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import toolrun
from toolrun.catalog import cache


@pytest.fixture
def stamp_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], str]]:
    """``stamp_of(folder)``: the stamp code whose package is ``folder/toolrun`` would compute, in this process
    (the stamp of the sources is read once per process: it is read afresh for each call, and again after)."""

    def stamp_of(package_parent: Path) -> str:
        monkeypatch.setattr(cache, "_PACKAGE", package_parent / "toolrun")
        cache._sources_stamp.cache_clear()
        return cache.code_stamp("4")

    yield stamp_of
    cache._sources_stamp.cache_clear()


def test_the_stamp_is_of_the_package_that_runs() -> None:
    assert cache._PACKAGE == Path(toolrun.__file__).resolve().parent


def test_an_edit_to_any_toolrun_module_changes_the_cache_stamp(tmp_path: Path, stamp_of: Callable[[Path], str]) -> None:
    copy = tmp_path / "toolrun"
    shutil.copytree(Path(toolrun.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    stamps = [stamp_of(tmp_path)]
    # modules a hand-kept list once missed, a provider, and a new module in a subfolder
    for edited in ("secrets.py", "template_sandbox.py", "plugins.py", "errors.py", "providers/base.py"):
        with (copy / edited).open("a", encoding="utf-8") as source:
            source.write("\n# edited\n")
        stamps.append(stamp_of(tmp_path))
    (copy / "backends" / "new_backend.py").write_text("X = 1\n", encoding="utf-8")
    stamps.append(stamp_of(tmp_path))
    assert len(set(stamps)) == len(stamps)
    # compiled bytecode is not a source: writing it leaves the stamp alone
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "extra.cpython-311.pyc").write_bytes(b"\0")
    assert stamp_of(tmp_path) == stamps[-1]
