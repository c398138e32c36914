"""A catalog that scales: call loads only the files that mention its tool, an unchanged file is
not parsed twice (and a changed one always is), and the side-by-side lint runs where tools
are offered together."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolrun.catalog import loader
from toolrun.catalog.gate import load_checked_catalog
from toolrun.cli import main
from toolrun.core.errors import LoadError

HOUR_AGO_NS = (int(time.time()) - 3600) * 1_000_000_000
WIRING = "Use it to check the wiring; not for real work."


def shell_tool(name: str, description: str, word: str = "hi") -> str:
    return textwrap.dedent(f"""\
        name: {name}
        description: {description}
        backend:
          shell: {{argv: [echo, {word}]}}
        """)


def write(folder: Path, file: str, text: str, *, settled: bool = True) -> Path:
    """Write a tool file; ``settled`` dates it an hour back (a file changed just now is never cached)."""
    path = folder / file
    path.write_text(text, encoding="utf-8")
    if settled:
        stamp = HOUR_AGO_NS + len(list(folder.iterdir())) * 1_000_000
        os.utime(path, ns=(stamp, stamp))
    return path


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the loader parses, in order."""
    parsed: list[str] = []
    real = loader.load_tool_file

    def counting(file: Path, **options: Any):
        parsed.append(file.name)
        return real(file, **options)

    monkeypatch.setattr(loader, "load_tool_file", counting)
    return parsed


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(folder))
    return folder


def test_call_reads_only_the_files_that_mention_the_tool(tmp_path: Path, parses: list[str]) -> None:
    write(tmp_path, "a_greet.yaml", shell_tool("greet", "Says hello on stdout. Use it to check the wiring; not for real work."))
    write(tmp_path, "b_other.yaml", shell_tool("greet_all", "Says hello to all. Use it to check the wiring; not for real work."))
    write(tmp_path, "c_broken.yaml", "name: broken\ndescription: [unclosed\n")
    result = CliRunner().invoke(main, ["call", "greet", "--tools-dir", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "hi"
    assert parses == ["a_greet.yaml"]  # greet_all is another word; the broken file is never parsed


def test_call_reports_a_broken_file_that_mentions_the_tool_and_a_name_defined_twice(tmp_path: Path) -> None:
    write(tmp_path, "a_greet.yaml", shell_tool("greet", "Says hello on stdout. Use it to check the wiring; not for real work."))
    write(tmp_path, "b_broken.yaml", "name: greet\ndescription: [unclosed\n")
    broken = CliRunner().invoke(main, ["call", "greet", "--tools-dir", str(tmp_path)])
    assert broken.exit_code == 2 and f"{tmp_path / 'b_broken.yaml'}:" in broken.stderr
    write(tmp_path, "b_broken.yaml", shell_tool("greet", "Says hello again. Use it to check the wiring; not for real work."))
    twice = CliRunner().invoke(main, ["call", "greet", "--tools-dir", str(tmp_path)])
    assert twice.exit_code == 2
    assert f"duplicate tool name 'greet' (also defined at {tmp_path / 'a_greet.yaml'}:1)" in twice.stderr


def test_an_unchanged_file_is_parsed_once_and_a_changed_one_again(tmp_path: Path, cache_dir: Path,
                                                                 parses: list[str]) -> None:
    tools = tmp_path / "tools.d"
    tools.mkdir()
    write(tools, "a.yaml", shell_tool("first_tool", "Prints the first greeting. Use it for the first check; not for others."))
    write(tools, "b.yaml", shell_tool("second_tool", "Prints the second greeting. Use it for the second check; not for others."))
    first = load_checked_catalog(tools)
    assert parses == ["a.yaml", "b.yaml"] and list(cache_dir.iterdir())
    again = load_checked_catalog(tools)
    assert parses == ["a.yaml", "b.yaml"]  # nothing parsed the second time
    assert [(t.name, t.description, t.backend, t.source) for t in again] == \
        [(t.name, t.description, t.backend, t.source) for t in first]
    assert again.findings == first.findings and [t.source.key_lines for t in again] == [t.source.key_lines for t in first]

    # Same size, new text and time: read again, never served stale.
    write(tools, "b.yaml", shell_tool("second_tool", "Prints the second greeting. Use it for the second check; not for OTHERS."))
    changed = load_checked_catalog(tools)
    assert parses == ["a.yaml", "b.yaml", "b.yaml"]
    assert changed.get("second_tool").description.endswith("not for OTHERS.")

    (tools / "a.yaml").unlink()
    assert list(load_checked_catalog(tools).tools) == ["second_tool"]


def test_a_file_changed_just_now_and_a_python_module_tool_are_parsed_every_time(tmp_path: Path, cache_dir: Path,
                                                                               parses: list[str]) -> None:
    package = tmp_path / "greetings"
    package.mkdir()
    write(package, "__init__.py", "")
    write(package, "hello.py", "def hello():\n    return 'hi'\n")
    write(tmp_path, "fresh.yaml", shell_tool("fresh_tool", "Prints a greeting. Use it to check the wiring; not for real work."),
          settled=False)
    # A pkg.mod target is found through the import system: what the check reads is not known by name.
    write(tmp_path, "py.yaml", "name: py_tool\ndescription: Returns a greeting. Use it to check the wiring; not for real work.\n"
                               "backend: {python: 'greetings.hello:hello'}\n")
    load_checked_catalog(tmp_path)
    load_checked_catalog(tmp_path)
    assert sorted(parses) == ["fresh.yaml", "fresh.yaml", "py.yaml", "py.yaml"]


def test_a_python_file_tool_is_kept_until_its_py_file_changes(tmp_path: Path, cache_dir: Path,
                                                              parses: list[str]) -> None:
    write(tmp_path, "hello.py", "def hello(name):\n    return 'hi ' + name\n")
    write(tmp_path, "py.yaml", textwrap.dedent("""\
        name: py_tool
        description: Returns a greeting. Use it to check the wiring; not for real work.
        parameters:
          type: object
          properties: {name: {type: string, description: Who to greet}}
          required: [name]
          additionalProperties: false
        backend: {python: 'hello.py:hello'}
        """))
    first = load_checked_catalog(tmp_path)
    again = load_checked_catalog(tmp_path)
    assert parses == ["py.yaml"]  # the second load came from the cache
    assert again.get("py_tool").parameters == first.get("py_tool").parameters
    # The function no longer takes the parameter: the check must see it, not a cached verdict.
    write(tmp_path, "hello.py", "def hello(who):\n    return 'hi ' + who\n")
    with pytest.raises(LoadError) as caught:
        load_checked_catalog(tmp_path)
    assert parses == ["py.yaml", "py.yaml"]
    assert "name" in str(caught.value) and "hello" in str(caught.value)
    (tmp_path / "hello.py").unlink()
    with pytest.raises(LoadError) as gone:
        load_checked_catalog(tmp_path)
    assert "python file not found" in str(gone.value)


def test_no_cache_is_written_when_it_is_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parses: list[str]) -> None:
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    write(tmp_path, "a.yaml", shell_tool("first_tool", "Prints the first greeting. Use it for the first check; not for others."))
    load_checked_catalog(tmp_path)
    load_checked_catalog(tmp_path)
    assert parses == ["a.yaml", "a.yaml"] and not (tmp_path / "xdg").exists()


def test_near_duplicates_are_linted_among_the_tools_offered_together(tmp_path: Path) -> None:
    same = "Lists the files of a folder with their sizes. Use it to look around; not to read files."
    write(tmp_path, "a.yaml", shell_tool("list_files", same))
    write(tmp_path, "b.yaml", shell_tool("list_files_again", same))
    write(tmp_path, "c.yaml", shell_tool("get_weather", "Returns the weather forecast of one city. Use it for trips; not for history."))

    def rules(catalog) -> set[str]:
        return {finding.rule for finding in catalog.findings}

    assert "near-duplicate" in rules(load_checked_catalog(tmp_path))  # the library: the whole catalog
    assert "near-duplicate" not in rules(load_checked_catalog(tmp_path, lint_together=None))
    pair = load_checked_catalog(tmp_path, lint_together=lambda c: [c.get("list_files"), c.get("list_files_again")])
    apart = load_checked_catalog(tmp_path, lint_together=lambda c: [c.get("list_files"), c.get("get_weather")])
    assert "near-duplicate" in rules(pair) and "near-duplicate" not in rules(apart)


def test_files_of_the_same_name_in_subfolders_are_kept_apart(tmp_path: Path, cache_dir: Path,
                                                              parses: list[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write(tmp_path / "a", "tools.yaml", shell_tool("first_tool", "Prints the first greeting. Use it first; not for others."))
    write(tmp_path / "b", "tools.yaml", shell_tool("second_tool", "Prints the second greeting. Use it second; not for others."))
    first = load_checked_catalog(tmp_path)
    again = load_checked_catalog(tmp_path)
    assert parses == ["tools.yaml", "tools.yaml"]  # each parsed once
    assert [(t.name, t.source.file) for t in again] == [(t.name, t.source.file) for t in first]
    assert [t.source.file.parent.name for t in again] == ["a", "b"]


def test_call_finds_its_file_through_the_cache_s_names_and_reads_a_changed_file(tmp_path: Path, cache_dir: Path,
                                                                               parses: list[str]) -> None:
    write(tmp_path, "a_greet.yaml", shell_tool("greet", "Says hello on stdout. Use it to check the wiring; not for real work."))
    write(tmp_path, "b_other.yaml", shell_tool("other", "Says goodbye on stdout. Use it to check the wiring; not for real work."))
    load_checked_catalog(tmp_path)  # fills the cache and its index
    parses.clear()
    called = CliRunner().invoke(main, ["call", "greet", "--tools-dir", str(tmp_path)])
    assert called.exit_code == 0 and called.stdout.strip() == "hi"
    assert parses == []  # found through the index, taken from the cache: no file parsed
    # b_other.yaml now defines greet too: changed since cached, so it is read, and the duplicate found.
    write(tmp_path, "b_other.yaml", shell_tool("greet", "Says hello again. Use it to check the wiring; not for real work."))
    twice = CliRunner().invoke(main, ["call", "greet", "--tools-dir", str(tmp_path)])
    assert twice.exit_code == 2 and "duplicate tool name 'greet'" in twice.stderr
    assert parses == ["b_other.yaml"]


def test_one_tool_of_a_large_toolset_file_comes_from_the_cache_until_the_file_changes(
        tmp_path: Path, cache_dir: Path, parses: list[str]) -> None:
    def toolset(last_word: str) -> str:
        tools = "".join(f"""\
  - name: greet_{index}
    description: Prints greeting number {index}. Use it to check the wiring; not for real work.
    backend: {{shell: {{argv: [echo, {last_word if index == 7 else f'n{index}'}]}}}}
""" for index in range(60))
        return "tools:\n" + tools
    write(tmp_path, "greetings.yaml", toolset("seven"))
    load_checked_catalog(tmp_path)
    parses.clear()
    first = CliRunner().invoke(main, ["call", "greet_7", "--tools-dir", str(tmp_path)])
    assert first.exit_code == 0 and first.stdout.strip() == "seven"
    assert parses == []
    write(tmp_path, "greetings.yaml", toolset("SEVEN"))  # same size, new text: never served stale
    second = CliRunner().invoke(main, ["call", "greet_7", "--tools-dir", str(tmp_path)])
    assert second.exit_code == 0 and second.stdout.strip() == "SEVEN"
    assert parses == ["greetings.yaml"]


def test_a_cache_whose_two_files_do_not_match_is_ignored(tmp_path: Path, cache_dir: Path, parses: list[str]) -> None:
    tools = tmp_path / "tools.d"
    tools.mkdir()
    write(tools, "a.yaml", shell_tool("first_tool", "Prints the first greeting. Use it for the first check; not for others."))
    load_checked_catalog(tools)
    (entries,) = cache_dir.glob("catalog-*.entries")
    saved = entries.read_bytes()
    write(tools, "b.yaml", shell_tool("second_tool", "Prints the second greeting. Use it for the second check; not for others."))
    load_checked_catalog(tools)  # writes a new pair
    entries.write_bytes(saved)  # as if another toolrun had replaced the entries in between
    parses.clear()
    again = load_checked_catalog(tools)
    assert list(again.tools) == ["first_tool", "second_tool"]
    assert parses == ["a.yaml", "b.yaml"]  # the pair does not match: every file read again


def test_a_py_file_replaced_with_an_old_time_while_its_tool_is_read_is_not_kept(tmp_path: Path, cache_dir: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "hello.py", "def hello(name):\n    return 'hi ' + name\n")
    write(tmp_path, "py.yaml", "name: py_tool\ndescription: Returns a greeting. Use it to check the wiring; not for "
                               "real work.\nparameters: {type: object, properties: {name: {type: string, description: "
                               "Who}}, required: [name], additionalProperties: false}\nbackend: {python: 'hello.py:hello'}\n")
    real = loader.load_tool_file

    def read_then_replace(file: Path, **options: Any):
        result = real(file, **options)  # the check has read hello.py; now it is replaced, keeping its old time (cp -p)
        write(tmp_path, "hello.py", "def hello(who):\n    return 'hi ' + who\n")
        os.utime(tmp_path / "hello.py", ns=(HOUR_AGO_NS, HOUR_AGO_NS))
        return result

    monkeypatch.setattr(loader, "load_tool_file", read_then_replace)
    load_checked_catalog(tmp_path)  # its verdict is about the old hello.py: it must not be kept
    monkeypatch.setattr(loader, "load_tool_file", real)
    with pytest.raises(LoadError) as caught:
        load_checked_catalog(tmp_path)
    assert "name" in str(caught.value)


@pytest.mark.parametrize("suffix", [".entries", ".index"])
def test_a_damaged_cache_file_is_read_again_never_served(tmp_path: Path, cache_dir: Path, parses: list[str],
                                                         suffix: str) -> None:
    # A byte changed on disk must not become another command (argv) or a garbled description.
    tools = tmp_path / "tools.d"
    tools.mkdir()
    write(tools, "a.yaml", shell_tool("first_tool", "Prints the first greeting. Use it for the first check; not for others.",
                                      word="hello"))
    load_checked_catalog(tools)
    (cached,) = cache_dir.glob(f"catalog-*{suffix}")
    data = cached.read_bytes()
    target = b"hello" if suffix == ".entries" else b"first_tool"
    assert target in data
    cached.write_bytes(data.replace(target, target[:-1] + b"X"))
    parses.clear()
    again = load_checked_catalog(tools)
    assert list(again.tools) == ["first_tool"]
    assert again.get("first_tool").backend.config["argv"] == ["echo", "hello"]
    assert parses == ["a.yaml"]


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files a name scan reads, in order."""
    read: list[str] = []
    real = loader.read_for_scan

    def counting(file: str) -> bytes:
        read.append(Path(file).name)
        return real(file)

    monkeypatch.setattr(loader, "read_for_scan", counting)
    return read


def _call(folder: Path, name: str) -> str:
    result = CliRunner().invoke(main, ["call", name, "--tools-dir", str(folder)])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_a_call_remembers_the_words_of_the_files_it_scanned_and_the_next_reads_only_its_own(
        tmp_path: Path, cache_dir: Path, parses: list[str], scans: list[str]) -> None:
    for index in range(5):
        write(tmp_path, f"t{index}.yaml", shell_tool(f"tool_{index}", f"Prints greeting {index}. Use it to check the "
                                                     "wiring; not for real work.", word=f"w{index}"))
    assert _call(tmp_path, "tool_1") == "w1"
    assert sorted(scans) == [f"t{index}.yaml" for index in range(5)] and parses == ["t1.yaml"]
    scans.clear()
    parses.clear()
    assert _call(tmp_path, "tool_3") == "w3"  # a file never loaded: its words say it spells tool_3
    assert scans == [] and parses == ["t3.yaml"]
    scans.clear()
    parses.clear()
    missing = CliRunner().invoke(main, ["call", "tool_9", "--tools-dir", str(tmp_path)])
    assert missing.exit_code != 0 and "no tool named 'tool_9'" in missing.stderr


ESCAPED_NAMES = {  # each spells get_user only once YAML has read its escape
    "plain": 'name: "get_\\x75ser"',
    "json": '{"name": "get_\\u0075ser", "description": "D", "backend": {"shell": {"argv": [echo, hi]}}}',
    "escaped key": '"n\\x61me": "get_\\U00000075ser"',
    "line break": 'name: "get_\\\n  user"',
    "tagged": 'name: !!str "get_\\x75ser"',  # a tag or an anchor may stand between the key and the value
    "anchored": 'name: &who "get_\\x75ser"',
    "aliased": 'description: &who "get_\\x75ser"\nname: *who\nbackend:\n  shell: {argv: [echo, hi]}\n',
}


def _escaped_tool(spelling: str) -> str:
    described = f"description: Prints who is logged in. {WIRING}"
    written = ESCAPED_NAMES[spelling]
    return written if "backend" in written else f"{written}\n{described}\nbackend:\n  shell: {{argv: [echo, hi]}}\n"


@pytest.mark.parametrize("cache", ["cold", "warm"])
@pytest.mark.parametrize("spelling", list(ESCAPED_NAMES))
def test_a_duplicate_name_written_with_a_yaml_escape_is_not_missed_by_call(
        tmp_path: Path, cache_dir: Path, parses: list[str], spelling: str, cache: str) -> None:
    write(tmp_path, "b_escaped.yaml", _escaped_tool(spelling))
    write(tmp_path, "c_other.yaml", shell_tool("other", f'"Prints a tab\\there. {WIRING}"'))  # an escape, not in a name
    if cache == "warm":  # a call of another tool scanned every file first, and kept what it learned
        assert _call(tmp_path, "other") == "hi"
    write(tmp_path, "a_literal.yaml", shell_tool("get_user", f"Prints the user. {WIRING}"))
    parses.clear()
    twice = CliRunner().invoke(main, ["call", "get_user", "--tools-dir", str(tmp_path)])
    assert twice.exit_code == 2, twice.output  # before: a_literal.yaml's tool ran, the duplicate unseen
    line = 2 if spelling == "aliased" else 1  # the name's line
    assert f"b_escaped.yaml:{line}: duplicate tool name 'get_user' (also defined at" in twice.stderr
    assert "c_other.yaml" not in parses  # a file is parsed for an escape in a name's place only


def test_a_name_written_with_a_yaml_escape_is_found_by_the_scan_without_loading_the_rest(
        tmp_path: Path, parses: list[str]) -> None:
    write(tmp_path, "b_escaped.yaml", _escaped_tool("plain"))
    write(tmp_path, "c_other.yaml", shell_tool("other", f"Prints other. {WIRING}"))
    assert _call(tmp_path, "get_user") == "hi"
    assert parses == ["b_escaped.yaml"]  # before: not found by the scan, so the whole catalog was loaded


@pytest.mark.parametrize("how", ["same size", "touch -r"])
def test_a_scanned_file_changed_since_is_read_again(tmp_path: Path, cache_dir: Path, scans: list[str], how: str) -> None:
    write(tmp_path, "a.yaml", shell_tool("tool_a", "Prints greeting a. Use it to check the wiring; not for real work."))
    other = write(tmp_path, "b.yaml", shell_tool("tool_b", "Prints greeting b. Use it to check the wiring; not for real work."))
    assert _call(tmp_path, "tool_a") == "hi"
    before = other.stat()
    # b.yaml now defines tool_c (same size), and keeps its old time (touch -r) or gets a new one.
    other.write_text(shell_tool("tool_c", "Prints greeting b. Use it to check the wiring; not for real work."), encoding="utf-8")
    assert other.stat().st_size == before.st_size
    if how == "touch -r":
        os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        write(tmp_path, "b.yaml", other.read_text(encoding="utf-8"))
    scans.clear()
    assert _call(tmp_path, "tool_c") == "hi"
    assert scans == ["b.yaml"]


def test_a_damaged_words_file_is_read_again_never_served(tmp_path: Path, cache_dir: Path, scans: list[str]) -> None:
    write(tmp_path, "a.yaml", shell_tool("tool_a", "Prints greeting a. Use it to check the wiring; not for real work."))
    write(tmp_path, "b.yaml", shell_tool("tool_b", "Prints greeting b. Use it to check the wiring; not for real work."))
    assert _call(tmp_path, "tool_a") == "hi"
    (words,) = cache_dir.glob("catalog-*.words")
    data = words.read_bytes()
    assert b" tool_b " in data
    words.write_bytes(data.replace(b" tool_b ", b" tool_x "))  # as if b.yaml spelled tool_x
    scans.clear()
    missing = CliRunner().invoke(main, ["call", "tool_x", "--tools-dir", str(tmp_path)])
    assert "no tool named 'tool_x'" in missing.stderr
    assert sorted(scans) == ["b.yaml"]  # the damaged file is not believed: b.yaml is read again


def test_an_mcp_server_file_is_remembered_as_one_whose_names_only_its_server_knows(
        tmp_path: Path, cache_dir: Path, scans: list[str]) -> None:
    write(tmp_path, "a.yaml", shell_tool("tool_a", "Prints greeting a. Use it to check the wiring; not for real work."))
    write(tmp_path, "server.yaml", "mcp_server:\n  command: [definitely-not-a-command-here]\n")
    cache = loader.CatalogCache.for_directory(tmp_path)
    server = str(tmp_path / "server.yaml")
    assert loader._NameScan(["tool_z"], cache).scan([server]) == [loader.SERVER_NAMES_UNKNOWN]
    cache.save()
    scans.clear()
    again = loader._NameScan(["tool_z"], loader.CatalogCache.for_directory(tmp_path))
    assert again.scan([server]) == [loader.SERVER_NAMES_UNKNOWN] and scans == []


def test_a_warm_lint_takes_the_side_by_side_findings_of_an_unchanged_catalog_from_the_cache(
        tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.catalog import gate

    compared: list[int] = []
    real = gate.near_duplicate_findings

    def counting(tools: list[Any]) -> Any:
        compared.append(len(tools))
        return real(tools)

    monkeypatch.setattr(gate, "near_duplicate_findings", counting)
    text = "Prints the daily greeting for the shop. Use it to check the wiring; not for real work."
    write(tmp_path, "a.yaml", shell_tool("greet_shop", text))
    write(tmp_path, "b.yaml", shell_tool("greet_store", text))
    first = load_checked_catalog(tmp_path)
    assert compared == [2] and "near-duplicate" in {f.rule for f in first.findings}
    again = load_checked_catalog(tmp_path)
    assert compared == [2] and again.findings == first.findings  # nothing changed: not compared again
    write(tmp_path, "b.yaml", shell_tool("greet_store", "Deletes every order of the shop. Use it at closing time only."))
    changed = load_checked_catalog(tmp_path)
    assert compared == [2, 2] and "near-duplicate" not in {f.rule for f in changed.findings}
    damaged = next(cache_dir.glob("catalog-*.together"))
    damaged.write_bytes(damaged.read_bytes()[:-3] + b"XYZ")
    assert load_checked_catalog(tmp_path).findings == changed.findings and compared == [2, 2, 2]
