"""The fast paths of a warm catalog keep its answers exact: the name scan's columns, the entry read
alone, the lint's findings rebuilt from the cache, the collector paused while a catalog loads."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.catalog.test_catalog_scale import shell_tool, write
from toolrun.catalog import cache as catalog_cache
from toolrun.catalog import gate, loader
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.lint import LintFinding
from toolrun.catalog.scan_words import ScanWords
from toolrun.cli import main

WIRING = "Use it to check the wiring; not for real work."


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the loader parses."""
    parsed: list[str] = []
    real = loader.load_tool_file
    monkeypatch.setattr(loader, "load_tool_file", lambda file, **options: parsed.append(file.name) or real(file, **options))
    return parsed


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files a name scan reads."""
    read: list[str] = []
    real = loader.read_for_scan
    monkeypatch.setattr(loader, "read_for_scan", lambda file: read.append(Path(file).name) or real(file))
    return read


def _call(folder: Path, name: str) -> str:
    result = CliRunner().invoke(main, ["call", name, "--tools-dir", str(folder)])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_scan_words_find_the_files_that_spell_a_name_and_keep_what_is_put_and_present() -> None:
    words = ScanWords.empty()
    words.put("a.yaml", ((1, 2, 3, 4), False, " name tool_a echo "))
    words.put("s.yaml", ((5, 6, 7, 8), True, ""))
    words.put("b.yaml", ((9, 9, 9, 9), False, " tool_b tool_a2 "))
    again = ScanWords.from_payload(words.payload())
    assert again is not None and again.keys == ["a.yaml", "b.yaml", "s.yaml"]
    assert {again.keys[place] for place in again.spelling([" tool_a "])} == {"a.yaml"}  # not tool_a2
    assert {again.keys[place] for place in again.spelling([" tool_b ", " echo "])} == {"a.yaml", "b.yaml"}
    assert again.get("s.yaml") == ((5, 6, 7, 8), True, "")
    again.put("a.yaml", ((1, 2, 3, 5), False, " tool_c "))  # read again after an edit: the new words win
    again.keep_only({"a.yaml", "s.yaml"})
    kept = ScanWords.from_payload(again.payload())
    assert kept is not None and kept.keys == ["a.yaml", "s.yaml"] and kept.get("a.yaml") == ((1, 2, 3, 5), False, " tool_c ")
    assert kept.spelling([" tool_b "]) == set() and ScanWords.from_payload({"keys": "x"}) is None


def test_a_file_added_after_a_call_is_scanned_and_a_removed_one_forgotten(tmp_path: Path, cache_dir: Path,
                                                                         scans: list[str]) -> None:
    write(tmp_path, "a.yaml", shell_tool("tool_a", f"Prints greeting a. {WIRING}"))
    gone = write(tmp_path, "b.yaml", shell_tool("tool_b", f"Prints greeting b. {WIRING}"))
    assert _call(tmp_path, "tool_a") == "hi"
    gone.unlink()
    write(tmp_path, "c.yaml", shell_tool("tool_c", f"Prints greeting c. {WIRING}", word="new"))
    scans.clear()
    assert _call(tmp_path, "tool_c") == "new"
    assert scans == ["c.yaml"]  # a.yaml is known unchanged; c.yaml is new
    (kept,) = cache_dir.glob("catalog-*.words")
    assert b"b.yaml" not in kept.read_bytes() and b"c.yaml" in kept.read_bytes()


def test_a_call_on_a_listed_cache_reads_its_entry_alone_and_a_damaged_one_is_parsed_again(
        tmp_path: Path, cache_dir: Path, parses: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(3):
        write(tmp_path, f"t{index}.yaml", shell_tool(f"tool_{index}", f"Prints greeting {index}. {WIRING}", word=f"w{index}"))
    assert CliRunner().invoke(main, ["tools", "list", "--tools-dir", str(tmp_path)]).exit_code == 0
    whole: list[Path] = []
    real = Path.read_bytes

    def counting(path: Path) -> bytes:
        whole.append(path)
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", counting)
    parses.clear()
    assert _call(tmp_path, "tool_1") == "w1"
    assert parses == [] and not [path for path in whole if path.suffix == ".entries"]
    (entries,) = cache_dir.glob("catalog-*.entries")
    entries.write_bytes(real(entries).replace(b"w1", b"w9"))  # a damaged byte in that entry
    assert _call(tmp_path, "tool_1") == "w1"
    assert parses == ["t1.yaml"]


def test_cached_findings_are_the_findings_the_lint_made(tmp_path: Path, cache_dir: Path) -> None:
    write(tmp_path, "a.yaml", shell_tool("tool_a", "Short."))
    first = load_checked_catalog(tmp_path, partial=True).findings
    again = load_checked_catalog(tmp_path, partial=True).findings  # from the cache
    assert first and again == first and [hash(finding) for finding in again] == [hash(finding) for finding in first]
    rebuilt = catalog_cache._finding("f.yaml", "t", 3, "rule", "warning", "message")
    assert rebuilt == LintFinding("t", "f.yaml", 3, "rule", "warning", "message") and str(rebuilt).startswith("f.yaml:3:")


def test_the_collector_is_off_while_catalogs_load_and_on_after_the_last(tmp_path: Path, cache_dir: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "a.yaml", shell_tool("tool_a", f"Prints greeting a. {WIRING}"))
    seen: list[bool] = []
    inner_started, outer_may_end = threading.Event(), threading.Event()
    real = loader.load_catalog

    def observing(*args: object, **options: object) -> object:
        seen.append(gc.isenabled())
        return real(*args, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(gate, "load_catalog", observing)

    def other_thread() -> None:
        with gate.collector_paused():
            inner_started.set()
            outer_may_end.wait(5)

    thread = threading.Thread(target=other_thread)
    thread.start()
    inner_started.wait(5)
    load_checked_catalog(tmp_path)  # ends while the other load is under way: the collector stays off
    assert seen == [False] and not gc.isenabled()
    outer_may_end.set()
    thread.join(5)
    assert gc.isenabled()
    gc.disable()  # an embedding program's choice is kept
    try:
        load_checked_catalog(tmp_path)
        assert not gc.isenabled()
    finally:
        gc.enable()
