"""The cache folder is pruned once a day: bytecode of sources that are gone, toolrun's own cache files
nothing used for a month, temporary files a writer left; nothing that is not toolrun's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.test_cli_recipe import ROOT, clean_env
from toolrun.core.cache_folder import PRUNE_STAMP
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
    command = [sys.executable, "-m", "toolrun", "tools", "list", "--tools-dir", str(ROOT / "tools.d")]
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
