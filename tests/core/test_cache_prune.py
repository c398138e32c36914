"""The cache folder is pruned once a day: bytecode of sources that are gone, toolrun's own cache files
nothing used for a month, temporary files a writer left; nothing that is not toolrun's."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ROOT, clean_env
from toolrun.core import cache_folder
from toolrun.core.cache_folder import PRUNE_STAMP, prune_when_due
from toolrun.core.cache_prune import UNUSED_FOR_S, prune_cache_folder

DAY = 86_400.0
KEY = "0123456789abcdef01234567"  # the 24 hex digits naming a tools folder, recipe or server


def aged(path: Path, seconds: float, now: float) -> Path:
    """``path`` (made when missing), last read and written ``seconds`` before ``now``."""
    if not path.exists():
        path.write_text("cached\n")
    os.utime(path, (now - seconds, now - seconds))
    return path


def bytecode_of(cache: Path, source: Path, tag: str = "cpython-311") -> Path:
    """Where Python's pycache_prefix puts the bytecode of ``source`` in the cache folder."""
    kept = cache / "bytecode" / source.parent.relative_to("/") / f"{source.stem}.{tag}.pyc"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(b"\x00" * 64)
    return kept


def stale_and_kept(cache: Path, sources: Path, now: float) -> tuple[list[Path], list[Path]]:
    """A cache folder holding what a prune removes, and what it must keep; (removed, kept)."""
    live = sources / "live"
    live.mkdir(parents=True)
    (live / "mod.py").write_text("x = 1\n")
    (live / "script.pyw").write_text("x = 1\n")
    cache.mkdir(parents=True, exist_ok=True)
    removed = [
        bytecode_of(cache, sources / "gone" / "pkg" / "deep.py"),  # a virtual environment removed since
        bytecode_of(cache, sources / "gone" / "__init__.py", "cpython-311.opt-1"),
        bytecode_of(cache, live / "deleted.py"),  # a module whose source was deleted
        aged(cache / f"catalog-{KEY}.index", UNUSED_FOR_S + DAY, now),
        aged(cache / f"recipe-{KEY}.marshal", UNUSED_FOR_S + DAY, now),
        aged(cache / "modules-recipe-1a2b-cpython-311-a70d0d0a-opt0-2.marshal", UNUSED_FOR_S + DAY, now),
        aged(cache / f".catalog-{KEY}.index.00112233aabb.tmp", 2 * DAY, now),  # a writer stopped half-way
    ]
    kept = [
        bytecode_of(cache, live / "mod.py"),
        bytecode_of(cache, live / "script.pyw"),
        cache / "bytecode" / live.relative_to("/") / "notes.txt",  # not bytecode: not toolrun's to remove
        cache / "bytecode" / (sources / "gone").relative_to("/") / "README",  # likewise, so its folder stays too
        cache / f"catalog-{KEY}.entries",  # used this month
        cache / f"mcp-tools-{KEY}.json",
        cache / f".catalog-{KEY}.entries.00112233aabb.tmp",  # being written now
        cache / "recipe-notes.txt",  # the user's own, in a folder they chose
        cache / "notes.md",
    ]
    for path in kept[2:]:
        path.write_text("kept\n")
    aged(kept[4], UNUSED_FOR_S - DAY, now)
    aged(kept[-2], 10 * UNUSED_FOR_S, now)
    aged(kept[-1], 10 * UNUSED_FOR_S, now)
    return removed, kept


def test_pruning_removes_bytecode_of_gone_sources_and_unused_cache_files_and_nothing_else(tmp_path: Path) -> None:
    now = time.time()
    cache = tmp_path / "cache"
    removed, kept = stale_and_kept(cache, tmp_path / "src", now)
    sizes = sum(path.stat().st_size for path in removed)
    (cache / "dataclass-code-recipe.marshal").symlink_to(tmp_path / "src" / "live" / "mod.py")  # never followed

    pruned = prune_cache_folder(cache, now)

    assert [path for path in removed if path.exists()] == []
    assert [path for path in kept if not path.exists()] == []
    assert (pruned.files, pruned.bytes) == (len(removed), sizes)
    assert (tmp_path / "src" / "live" / "mod.py").exists() and (cache / "dataclass-code-recipe.marshal").is_symlink()
    assert not (cache / "bytecode" / (tmp_path / "src" / "gone" / "pkg").relative_to("/")).exists()  # emptied: removed
    assert (cache / PRUNE_STAMP).exists()
    assert prune_cache_folder(cache, now).files == 0


def test_a_command_prunes_its_cache_folder_as_it_ends_once_a_day(tmp_path: Path) -> None:
    now = time.time()
    cache = tmp_path / "cache"
    removed, kept = stale_and_kept(cache, tmp_path / "src", now)
    tools = tmp_path / "tools.d"  # the flower tool alone: tools.d's MCP server file would start its server
    tools.mkdir()
    for name in ("flowers.yaml", "flowers.py"):
        shutil.copy(ROOT / "tools.d" / name, tools / name)
    command = [sys.executable, "-m", "toolrun", "tools", "list", "--tools-dir", str(tools)]
    env = clean_env(TOOLRUN_CACHE_DIR=str(cache), TOOLRUN_LOGS=str(tmp_path / "logs.db"))
    (cache / PRUNE_STAMP).touch()
    aged(cache / PRUNE_STAMP, DAY - 600, now)  # pruned less than a day ago: not again

    listed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [path for path in removed if not path.exists()] == []

    aged(cache / PRUNE_STAMP, DAY + 600, now)
    listed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "get_flower_inventory" in listed.stdout and listed.stderr.count("\n") <= 2  # its own output, as ever
    assert [path for path in removed if path.exists()] == []
    assert [path for path in kept if not path.exists()] == []
    assert (cache / PRUNE_STAMP).stat().st_mtime >= now - 5


def test_a_bytecode_folder_that_is_a_link_or_holds_pycache_folders_is_not_pythons_prefix_tree(tmp_path: Path) -> None:
    # bytecode/ a link to a project (or a folder the user chose holding a "bytecode" package of their own): the
    # prefix layout read into it took every .pyc there for one of a source that is gone, __pycache__'s included
    project = tmp_path / "project"
    (project / "pkg" / "__pycache__").mkdir(parents=True)
    (project / "pkg" / "mod.py").write_text("x = 1\n")
    in_use = project / "pkg" / "__pycache__" / "mod.cpython-311.pyc"
    sourceless = project / "pkg" / "only.cpython-311.pyc"  # shipped without its source: nothing makes it again
    for path in (in_use, sourceless):
        path.write_bytes(b"\x00" * 64)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "bytecode").symlink_to(project)
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    own = chosen / "bytecode" / "__pycache__" / "__init__.cpython-311.pyc"
    own.parent.mkdir(parents=True)
    (chosen / "bytecode" / "__init__.py").write_text("")
    own.write_bytes(b"\x00" * 64)

    assert (prune_cache_folder(linked).files, prune_cache_folder(chosen).files) == (0, 0)
    assert in_use.exists() and sourceless.exists() and own.exists()


def test_ctrl_c_while_a_command_prunes_as_it_ends_stops_the_pruning_without_a_traceback(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    gone = tmp_path / "gone"  # sources deleted since: thousands of .pyc to remove, a prune that takes a while
    for folder in range(300):
        for module in range(20):
            bytecode_of(cache, gone / f"d{folder}" / f"m{module}.py")
    env = clean_env(TOOLRUN_CACHE_DIR=str(cache), TOOLRUN_LOGS=str(tmp_path / "logs.db"))
    process = subprocess.Popen([sys.executable, "-m", "toolrun", "--help"], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (cache / PRUNE_STAMP).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)  # the stamp is made as the pruning starts
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)

    assert "Usage:" in out and "Traceback" not in err and "Exception ignored" not in err, err
    assert process.returncode == 0  # the command had ended well
    assert any((cache / "bytecode").rglob("*.pyc"))  # the pruning was stopped, to go on when next due


def test_a_prune_module_that_cannot_be_imported_as_the_command_ends_leaves_its_outcome_alone(tmp_path: Path) -> None:
    # an install changed while a long command ran (upgraded to a version without the module, a checkout switched):
    # the import at exit fails; here a python tool makes it fail, as it would
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "swap.yaml").write_text(SWAP_TOOL)
    (tools / "swap.py").write_text('import sys\n\ndef swap() -> str:\n'
                                   '    sys.modules["toolrun.core.cache_prune"] = None\n'
                                   '    return "swapped"\n')
    cache = tmp_path / "cache"
    cache.mkdir()
    env = clean_env(TOOLRUN_CACHE_DIR=str(cache), TOOLRUN_LOGS=str(tmp_path / "logs.db"))
    called = subprocess.run([sys.executable, "-m", "toolrun", "call", "swap_install", "--tools-dir", str(tools)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert (called.returncode, called.stdout) == (0, "swapped\n"), called.stderr
    assert "Traceback" not in called.stderr and "Exception ignored" not in called.stderr, called.stderr


SWAP_TOOL = """
name: swap_install
description: >-
  Swaps the install under the running command, for the on-call engineer. Use it when asked to swap; it
  changes nothing else.
parameters: {type: object, properties: {}}
backend:
  python: "swap.py:swap"
"""


def test_a_stamp_a_day_or_more_ahead_of_the_clock_is_due_not_a_pause_until_the_clock_catches_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the clock was set back (it ran ahead, a restored backup's times): "pruned" a year ahead stopped pruning for a year
    cache = tmp_path / "cache"
    cache.mkdir()
    now = time.time()
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(cache))
    try:
        aged(cache / PRUNE_STAMP, -365 * DAY, now)
        assert prune_when_due(now)
        aged(cache / PRUNE_STAMP, -60, now)  # a few seconds ahead (another machine's clock on a shared disk): pruned
        assert not prune_when_due(now)
        aged(cache / PRUNE_STAMP, DAY - 60, now)
        assert not prune_when_due(now)
    finally:
        atexit.unregister(cache_folder._prune)  # this test process prunes nothing as it ends


def test_a_link_named_as_the_stamp_is_not_followed_and_nothing_is_pruned(tmp_path: Path) -> None:
    now = time.time()
    cache = tmp_path / "cache"
    removed, _ = stale_and_kept(cache, tmp_path / "src", now)
    users_file = aged(tmp_path / "diary.txt", 40 * DAY, now)
    (cache / PRUNE_STAMP).symlink_to(users_file)

    assert prune_cache_folder(cache, now).files == 0
    assert users_file.stat().st_mtime == now - 40 * DAY  # its date is the user's, not made "pruned just now"
    assert [path for path in removed if not path.exists()] == []
