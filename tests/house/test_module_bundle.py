"""The toolrun script reads toolrun's own modules from one file in the cache folder: a run that
reads them must behave as one that imports them as usual, and an edited source must never run
its old code. Each run is a real process of a copy of the package (edited here, never the
checkout), with its mtimes set an hour back as a checkout's are."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.cli.test_cli_recipe import ROOT, clean_env

COMMAND = ["schema", "tool"]  # a short command: 25 toolrun modules, and toolrun.core.text among them

# Runs COMMAND as the script does, then reports which toolrun modules came from the file.
RUN_AND_REPORT = r'''
import atexit, inspect, json, sys
report, *args = sys.argv[1:]

def write_report():
    from toolrun.cli.module_bundle import KeptModuleLoader
    modules = {name: module for name, module in sys.modules.items() if name == "toolrun" or name.startswith("toolrun.")}
    text = modules["toolrun.core.text"]
    with open(report, "w", encoding="utf-8") as out:
        json.dump({
            "from_file": sorted(name for name, module in modules.items()
                                if isinstance(getattr(module.__spec__, "loader", None), KeptModuleLoader)),
            "files": {name: getattr(module, "__file__", None) for name, module in modules.items()},
            "text_doc": text.__doc__,
            "counted_source": inspect.getsource(text.counted).splitlines()[0],
            "loader_source": text.__loader__.get_source("toolrun.core.text")[:3],
        }, out)

atexit.register(write_report)
sys.argv = ["toolrun", *args]
from toolrun.cli import main
main()
'''


def package_copy(where: Path) -> Path:
    """A copy of the toolrun package under ``where`` (its parent goes on PYTHONPATH), sources an hour old."""
    copy = where / "toolrun"
    shutil.copytree(ROOT / "toolrun", copy, ignore=shutil.ignore_patterns("__pycache__"))
    hour_ago = time.time() - 3600
    for path in copy.rglob("*"):
        os.utime(path, (hour_ago, hour_ago))
    return copy


def run(root: Path, cache: Path, report: Path, **env_extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """COMMAND with ``root``'s toolrun and ``cache`` as the cache folder; its output and report."""
    env = {**clean_env(), "PYTHONPATH": str(root), "TOOLRUN_CACHE_DIR": str(cache), **env_extra}
    done = subprocess.run([sys.executable, "-c", RUN_AND_REPORT, str(report), *COMMAND], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done, json.loads(report.read_text(encoding="utf-8"))


def run_once(tmp_path: Path) -> tuple[Path, Path, Path, dict[str, Any]]:
    """A copy of the package run once with a cache folder of its own: the copy, the folder, the report file, the report."""
    package = package_copy(tmp_path / "one")
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    _, seen = run(package.parent, cache, report)
    return package, cache, report, seen


def test_a_run_that_reads_the_modules_from_the_file_is_the_run_that_imports_them(tmp_path: Path) -> None:
    package = package_copy(tmp_path / "one")
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    first, before = run(package.parent, cache, report)
    again, after = run(package.parent, cache, report)
    off, _ = run(package.parent, Path("off"), report)
    assert before["from_file"] == [] and len(after["from_file"]) > 10  # the command's modules, all but packages
    assert "toolrun.cli" not in after["from_file"] and "toolrun.core.text" in after["from_file"]
    assert again.stdout == first.stdout == off.stdout
    assert all(before["files"].get(name, file) == file for name, file in after["files"].items())  # its own source
    assert after["counted_source"].startswith("def counted(")  # inspect reads the source
    assert after["loader_source"] == '"""'  # and so does the module's loader
    assert len(list(cache.glob("modules-schema-*.marshal"))) == 1


def test_an_edited_module_runs_its_new_code(tmp_path: Path) -> None:
    package, cache, report, first = run_once(tmp_path)
    source = package / "core" / "text.py"
    status, text, old_doc = source.stat(), source.read_text(encoding="utf-8"), first["text_doc"]
    # The same bytes written again, mtime set back: Python would run its .pyc of before (its check is mtime and
    # size), so the file must not be read for it either; its change time says it was written.
    source.write_text(text, encoding="utf-8")
    os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns))
    _, rewritten = run(package.parent, cache, report)
    assert "toolrun.core.text" not in rewritten["from_file"] and len(rewritten["from_file"]) > 10
    # A real edit, mtime set back (touch -r): the new code runs
    source.write_text(text.replace(old_doc[0], "XX" if old_doc[0] != "X" else "YY", 1), encoding="utf-8")
    os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns))
    _, edited = run(package.parent, cache, report)
    assert edited["text_doc"] != old_doc and edited["text_doc"][2:] == old_doc[1:]
    assert "toolrun.core.text" not in edited["from_file"]


def test_two_toolruns_sharing_a_cache_folder_each_run_their_own_modules(tmp_path: Path) -> None:
    one, two = package_copy(tmp_path / "one"), package_copy(tmp_path / "two")
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    for package in (one, two, one):
        _, seen = run(package.parent, cache, report)
        assert all(file is None or file.startswith(str(package)) for file in seen["files"].values()), seen["files"]
    assert len(seen["from_file"]) > 10  # one's own, kept by its first run
    assert len(list(cache.glob("modules-schema-*.marshal"))) == 2


def test_a_damaged_file_is_imported_around(tmp_path: Path) -> None:
    package = package_copy(tmp_path / "one")
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    first, _ = run(package.parent, cache, report)
    [kept] = cache.glob("modules-schema-*.marshal")
    kept.write_bytes(kept.read_bytes()[: kept.stat().st_size // 2])  # cut short
    damaged, seen = run(package.parent, cache, report)
    assert damaged.stdout == first.stdout and seen["from_file"] == []
    kept_again = marshal.loads(kept.read_bytes())  # written again whole by that run
    *statuses, _ = kept_again["toolrun.core.text"]
    kept_again["toolrun.core.text"] = (*statuses, b"\xe3 not marshalled code")  # one entry damaged
    kept.write_bytes(marshal.dumps(kept_again))
    one_damaged, seen = run(package.parent, cache, report)
    assert one_damaged.stdout == first.stdout
    assert "toolrun.core.text" not in seen["from_file"] and len(seen["from_file"]) > 10


def test_code_kept_at_one_optimization_level_is_not_run_at_another(tmp_path: Path) -> None:
    package = package_copy(tmp_path / "one")
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    run(package.parent, cache, report, PYTHONOPTIMIZE="2")  # -OO: code without docstrings
    _, stripped = run(package.parent, cache, report, PYTHONOPTIMIZE="2")
    assert stripped["text_doc"] is None and len(stripped["from_file"]) > 10
    run(package.parent, cache, report)
    _, plain = run(package.parent, cache, report)
    assert plain["text_doc"] and len(plain["from_file"]) > 10
    assert len(list(cache.glob("modules-schema-*.marshal"))) == 2


def test_a_package_made_beside_a_kept_module_is_what_runs(tmp_path: Path) -> None:
    package = package_copy(tmp_path / "one")
    cache, report = tmp_path / "cache", tmp_path / "report.json"
    _, kept = run(package.parent, cache, report)
    run(package.parent, cache, report)
    text = (package / "core" / "text.py").read_text(encoding="utf-8")
    (package / "core" / "text").mkdir()  # Python imports a package before a module of the same name
    (package / "core" / "text" / "__init__.py").write_text(text.replace(kept["text_doc"][:5], "Pkg: ", 1), encoding="utf-8")
    _, seen = run(package.parent, cache, report)
    assert seen["text_doc"].startswith("Pkg: ") and "toolrun.core.text" not in seen["from_file"]


def test_a_same_size_edit_with_its_mtime_set_back_is_kept_from_the_source_not_the_old_pyc(tmp_path: Path) -> None:
    package, cache, report, first = run_once(tmp_path)
    source = package / "core" / "text.py"
    status, text, old_doc = source.stat(), source.read_text(encoding="utf-8"), first["text_doc"]
    source.write_text(text.replace(old_doc[0], "X" if old_doc[0] != "X" else "Y", 1), encoding="utf-8")  # same size
    os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns))  # touch -r: Python's .pyc check cannot see it
    run(package.parent, cache, report)  # imported as usual (from the .pyc of before), and kept from the source
    _, later = run(package.parent, cache, report)
    assert later["text_doc"] != old_doc and later["text_doc"][1:] == old_doc[1:]
    assert "toolrun.core.text" in later["from_file"]
