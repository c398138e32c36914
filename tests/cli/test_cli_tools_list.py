"""`toolrun tools list` and `toolrun schema` through click's runner and the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolrun.catalog.tool_schema import packaged_schema_text
from toolrun.cli import main
from toolrun.cli.tools_list import first_sentence

INVENTORY = """
defaults:
  timeout: 10s
  http: {base_url: "https://inventory.example.com"}
tools:
  - name: get_flower_inventory
    description: >-
      Returns the current flower stock of one city. Use it when the user asks how many
      flowers a shop has; not for prices.
    parameters:
      type: object
      properties:
        city: {type: string, enum: [北京, 上海, 深圳], description: City name}
      required: [city]
    annotations: {read_only: true}
    backend:
      http: {method: GET, url: "/inventory/{city}"}
  - name: restock
    description: 补货。Orders more flowers for one city. Use it only when the user asks to restock.
    parameters:
      type: object
      properties:
        city: {type: string, description: City name}
      required: [city]
    sequential: true
    confirm: true
    backend:
      http: {method: POST, url: "/restock/{city}"}
"""

NOW = """
name: now
description: Tells the current date and time on the server. Use it when the user asks for the time; not for time zones.
backend:
  shell: {argv: [date]}
"""


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools.d"
    directory.mkdir()
    (directory / "inventory.yaml").write_text(textwrap.dedent(INVENTORY).lstrip(), encoding="utf-8")
    (directory / "now.yml").write_text(textwrap.dedent(NOW).lstrip(), encoding="utf-8")
    return directory


def run(*args: str) -> subprocess.CompletedProcess:
    """``toolrun ARGS`` in-process (click's runner: a process start-up costs more than most of these
    tests; completion starts the real console script once)."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return subprocess.CompletedProcess(["toolrun", *args], result.exit_code, result.stdout, result.stderr)


def test_table_lists_name_backend_first_sentence_and_file(tools_dir: Path) -> None:
    result = CliRunner().invoke(main, ["tools", "list", "--tools-dir", str(tools_dir)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "BACKEND", "DESCRIPTION", "FILE"]
    assert len(lines) == 4
    inventory = next(line for line in lines if line.startswith("get_flower_inventory"))
    assert "  http  " in inventory
    assert "Returns the current flower stock of one city." in inventory
    assert "Use it when" not in inventory  # first sentence only
    assert inventory.endswith("inventory.yaml:5")
    assert "now.yml:1" in next(line for line in lines if line.startswith("now "))
    assert "补货。" in next(line for line in lines if line.startswith("restock"))


def test_json_lists_every_field_and_keeps_chinese(tools_dir: Path) -> None:
    completed = run("tools", "list", "--tools-dir", str(tools_dir), "--json")
    assert completed.returncode == 0, completed.stderr
    assert "北京" in completed.stdout and "\\u5317" not in completed.stdout
    listing = {entry["name"]: entry for entry in json.loads(completed.stdout)}
    assert list(listing) == ["get_flower_inventory", "restock", "now"]  # file order, then tool order
    inventory = listing["get_flower_inventory"]
    assert inventory["backend"] == "http"
    assert inventory["file"] == str(tools_dir / "inventory.yaml") and inventory["line"] == 5
    assert inventory["parameters"]["properties"]["city"]["enum"] == ["北京", "上海", "深圳"]
    assert inventory["timeout"] == 10.0 and inventory["sequential"] is False
    assert inventory["annotations"]["read_only"] is True
    assert listing["restock"]["sequential"] is True and listing["restock"]["confirm"] is True
    assert listing["now"]["timeout"] == 30.0 and listing["now"]["annotations"] is None
    assert listing["now"]["parameters"] == {"type": "object", "properties": {}}


def test_a_summary_line_goes_to_stderr(tools_dir: Path) -> None:
    completed = run("tools", "list", "--tools-dir", str(tools_dir), "--json")
    summary = [line for line in completed.stderr.splitlines() if line.startswith("toolrun: ")]
    assert len(summary) == 1
    assert summary[0].startswith(f"toolrun: 3 tools from {tools_dir} — 0 errors, ")


def test_default_tools_dir_is_tools_d_in_the_current_folder(tools_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tools_dir.parent)
    completed = run("tools", "list")
    assert completed.returncode == 0, completed.stderr
    assert "tools.d/now.yml:1" in completed.stdout


def test_missing_tools_dir_is_exit_2_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    completed = run("tools", "list")
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert completed.stderr.startswith("error: tools.d: tools directory not found — pass --tools-dir")


def test_a_broken_file_is_exit_2_with_file_and_line(tools_dir: Path) -> None:
    (tools_dir / "zz.yaml").write_text("name: zz\ndescription: Z.\nbackend: {python: json:dumps}\ntimeuot: 3s\n", encoding="utf-8")
    completed = run("tools", "list", "--tools-dir", str(tools_dir))
    assert completed.returncode == 2
    listed = [line.split()[0] for line in completed.stdout.splitlines()[1:]]
    assert listed and "zz" not in listed  # what did load is listed, the broken file's problem follows
    # the summary above it does not read as all well: "0 errors" counts lint findings of the tools that loaded
    assert f"toolrun: 3 tools from {tools_dir} (1 problem loading it, below) — 0 errors, " in completed.stderr
    assert f"error: {tools_dir / 'zz.yaml'}:4: unknown key 'timeuot' — did you mean 'timeout'?" in completed.stderr.splitlines()


def test_a_broken_tool_beside_a_good_one_is_a_problem_not_a_file_left_out(tools_dir: Path) -> None:
    # the file's other tool loads: the summary counts the problem, not the file as "not loaded"
    (tools_dir / "two.yaml").write_text(
        "tools:\n"
        "  - {name: kept, description: Looks things up. Use it for lookups; not for writes., backend: {python: json:dumps}}\n"
        "  - {name: broken, description: Looks things up. Use it for lookups; not for writes., timeuot: 3,\n"
        "     backend: {python: json:dumps}}\n", encoding="utf-8")
    completed = run("tools", "list", "--tools-dir", str(tools_dir))
    assert "kept" in [line.split()[0] for line in completed.stdout.splitlines()[1:]]
    assert "(1 problem loading it, below) — 0 errors" in completed.stderr, completed.stderr
    assert "not loaded" not in completed.stderr


def test_lint_errors_stop_loading(tools_dir: Path) -> None:
    # A parameter without a type is a lint error, and lint errors stop loading.
    (tools_dir / "untyped.yaml").write_text(
        "name: untyped\ndescription: Looks things up. Use it for lookups; not for writes.\n"
        "parameters: {type: object, properties: {key: {description: The key}}}\n"
        "backend: {python: json:dumps}\n",
        encoding="utf-8",
    )
    completed = run("tools", "list", "--tools-dir", str(tools_dir))
    assert completed.returncode == 2
    assert f"error: {tools_dir / 'untyped.yaml'}:3: untyped: " in completed.stderr
    assert "— 1 error, 2 warnings" in completed.stderr  # counted, not "1 errors"


def test_empty_tools_dir(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["tools", "list", "--tools-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert f"no tools in {tmp_path}" in result.stderr


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("Returns the stock. Use it when asked.", "Returns the stock."),
        ("Returns  the\n stock of v1.2 shops! More.", "Returns the stock of v1.2 shops!"),
        ("返回库存。仅用于查询。", "返回库存。"),
        ("No full stop at all", "No full stop at all"),
        ("x" * 100, "x" * 79 + "…"),
    ],
)
def test_first_sentence(text: str, sentence: str) -> None:
    assert first_sentence(text) == sentence


def test_schema_tool_prints_the_packaged_schema() -> None:
    completed = run("schema", "tool")
    assert completed.returncode == 0
    assert json.loads(completed.stdout) == json.loads(packaged_schema_text("tool"))
    assert json.loads(completed.stdout)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_recipe_prints_the_packaged_recipe_schema() -> None:
    text = packaged_schema_text("recipe")
    assert text is not None, "toolrun/schemas/recipe.schema.json is not packaged"
    completed = run("schema", "recipe")
    assert completed.returncode == 0
    assert json.loads(completed.stdout) == json.loads(text)


def test_schema_unknown_name_is_exit_2() -> None:
    completed = run("schema", "toolz")
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr


def _complete(words: str, cwd: Path, shell: str = "bash") -> subprocess.CompletedProcess:
    toolrun = Path(sys.executable).parent / "toolrun"
    env = {**os.environ, "_TOOLRUN_COMPLETE": f"{shell}_complete", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split(" ")) - 1)}
    return subprocess.run([str(toolrun)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def _complete_in_process(words: str, cwd: Path, shell: str = "bash", monkeypatch: pytest.MonkeyPatch | None = None):
    """``_complete`` through click's runner (half a CPU second less each): the same variables, in ``cwd``."""
    assert monkeypatch is not None
    monkeypatch.chdir(cwd)
    env = {"_TOOLRUN_COMPLETE": f"{shell}_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
    return CliRunner().invoke(main, [], prog_name="toolrun", env=env)


def test_tool_names_complete_for_call_and_tools_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The console script, as a shell runs it: ./tools.d by default; then in-process, the --tools-dir given.
    repository = Path(__file__).resolve().parents[2]
    called = _complete("toolrun call get_", repository)
    assert called.returncode == 0 and called.stderr == ""
    assert called.stdout.splitlines() == ["plain,get_disk_usage", "plain,get_flower_inventory", "plain,get_service_status",
                                          "plain,get_ticket"]  # tickets.yaml names it: its server is not started
    ticket = _complete_in_process(f"toolrun call --tools-dir {repository / 'tools.d'} get_t", tmp_path, "zsh", monkeypatch)
    assert ticket.stdout.splitlines() == ["plain", "get_ticket", "a tool of an MCP server"]  # named, not started
    shown = _complete_in_process(f"toolrun tools show --tools-dir {repository / 'tools.d'} list_", tmp_path, "zsh", monkeypatch)
    lines = shown.stdout.splitlines()
    assert lines[:3] == ["plain", "list_largest_directories",
                         "Lists the biggest direct subdirectories of a directory with their total sizes,…"]
    assert "list_recent_deployments" in lines


def test_completion_stays_quiet_without_a_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "broken.yaml").write_text("name: [unclosed\n", encoding="utf-8")
    for cwd in (tmp_path, tmp_path / "tools.d"):  # a broken file; no tools.d at all
        completed = _complete_in_process("toolrun call ", cwd, monkeypatch=monkeypatch)
        assert (completed.exit_code, completed.stdout.strip(), completed.stderr) == (0, "", "")
