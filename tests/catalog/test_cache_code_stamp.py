"""The catalog and recipe caches are stamped with toolrun's own sources: an edit to any module in
a development checkout makes a new cache, never a catalog built by the old code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import toolrun

PRINT_STAMP = "from toolrun.catalog.cache import code_stamp; print(code_stamp('4'))"


def stamp_of(package_parent: Path) -> str:
    done = subprocess.run([sys.executable, "-c", PRINT_STAMP], cwd=package_parent, capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_edit_to_any_toolrun_module_changes_the_cache_stamp(tmp_path: Path) -> None:
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
