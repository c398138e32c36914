"""``toolrun tools lint / show / export`` on real YAML files in a temp dir, through the loader."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from toolrun.cli import main

TOOLRUN = Path(sys.executable).parent / "toolrun"

GOOD_TOOL = """
    name: get_flower_inventory
    description: >-
      Returns the current flower stock of our shop in one city, as "flower: count" pairs.
      Use it when the user asks how many flowers a city's shop has; do not use it for prices.
    parameters:
      type: object
      properties:
        city:
          type: string
          enum: [北京, 上海, 深圳]
          description: The city whose shop stock to return.
        limit:
          type: integer
          description: How many kinds of flowers to return at most.
      required: [city]
    annotations: {read_only: true, title: Flower stock}
    backend:
      python: flowers.py:get_flower_inventory
"""

SHORT_TOOL = """
    name: get_prices
    description: Gets prices.
    parameters:
      type: object
      properties:
        city: {type: string, description: City name}
    annotations: {read_only: true}
    backend:
      python: flowers.py:get_prices
"""

FLOWERS_PY = """
def get_flower_inventory(city, limit=None, **_ignored):
    return {"玫瑰": 100}

def get_prices(city=None, **_ignored):
    return "1"
"""


def tools_dir(tmp_path: Path, *tools: str) -> Path:
    directory = tmp_path / "tools.d"
    directory.mkdir()
    (directory / "flowers.py").write_text(FLOWERS_PY, encoding="utf-8")
    for index, text in enumerate(tools):
        (directory / f"tool_{index}.yaml").write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return directory


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_lint_json_on_a_clean_catalog(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL)
    code, out, _ = run("tools", "lint", "--tools-dir", str(directory), "--json")
    assert code == 0
    document = json.loads(out)
    assert document["tools"] == 1
    assert {f["severity"] for f in document["findings"]} == {"info"}
    first = document["findings"][0]
    assert set(first) == {"tool", "file", "line", "rule", "severity", "message"}
    assert first["file"].endswith("tool_0.yaml") and first["line"] == 2  # the description key


def test_warnings_exit_zero_and_fail_with_strict(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL, SHORT_TOOL)
    code, out, err = run("tools", "lint", "--tools-dir", str(directory))
    assert code == 0
    assert "tool_1.yaml:2: warning: get_prices: description has 2 words" in out
    assert "[description-too-short]" in out and "1 warning," in err
    strict_code, _, _ = run("tools", "lint", "--tools-dir", str(directory), "--strict")
    assert strict_code == 1


def test_lint_errors_are_listed_and_exit_one(tmp_path: Path) -> None:
    hidden = GOOD_TOOL.replace("Returns the current", "Returns\u200b the current")
    directory = tools_dir(tmp_path, hidden)
    code, out, _ = run("tools", "lint", "--tools-dir", str(directory), "--json")
    assert code == 1
    errors = [f for f in json.loads(out)["findings"] if f["severity"] == "error"]
    assert [(f["rule"], f["line"]) for f in errors] == [("prompt-injection", 2)]
    assert "U+200B" in errors[0]["message"]


def test_load_errors_exit_two_without_traceback(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL.replace("annotations:", "anotations:"))
    code, out, err = run("tools", "lint", "--tools-dir", str(directory), "--json")
    assert code == 2
    assert "tool_0.yaml" in err and "Traceback" not in err
    document = json.loads(out)  # --json prints JSON whatever happens
    assert (document["tools"], document["findings"]) == (0, [])
    [problem] = document["problems"]
    assert set(problem) == {"file", "line", "message", "fix"}
    assert problem["file"] == str(directory / "tool_0.yaml") and problem["line"] == 16
    assert "anotations" in problem["message"] and "annotations" in problem["fix"]


def test_json_documents_when_the_tools_directory_is_missing_or_stopped_by_lint_errors(tmp_path: Path) -> None:
    for command in ("lint", "list"):
        code, out, err = run("tools", command, "--tools-dir", str(tmp_path / "nowhere"), "--json")
        assert code == 2 and "tools directory not found" in err
        document = json.loads(out)
        assert document["tools"] == 0 and document["findings"] == []
        assert document["problems"][0]["message"] == "tools directory not found"
    hidden = tools_dir(tmp_path, GOOD_TOOL.replace("Returns the current", "Returns\u200b the current"))
    code, out, _ = run("tools", "list", "--tools-dir", str(hidden), "--json")
    document = json.loads(out)
    assert code == 2 and document["tools"] == 0
    assert "[prompt-injection]" in document["problems"][0]["message"]
    assert "prompt-injection" in {finding["rule"] for finding in document["findings"]}


def test_an_empty_catalog_is_a_warning_for_list_and_lint(tmp_path: Path) -> None:
    empty = tmp_path / "tools.d"
    empty.mkdir()
    code, out, err = run("tools", "lint", "--tools-dir", str(empty), "--json")
    assert code == 0
    [warning] = [f for f in json.loads(out)["findings"] if f["severity"] == "warning"]
    assert warning["rule"] == "empty-catalog" and f"no tools in {empty}" in warning["message"]
    assert run("tools", "lint", "--tools-dir", str(empty), "--strict")[0] == 1
    code, out, err = run("tools", "list", "--tools-dir", str(empty))
    assert code == 0 and "0 tools from" in err and "1 warning (" in err and f"no tools in {empty}" in err


def test_show_readable_and_as_json(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL)
    code, out, _ = run("tools", "show", "get_flower_inventory", "--tools-dir", str(directory))
    assert code == 0
    assert "city (string, required)" in out and "北京" in out and "tokens per request" in out
    code, out, _ = run("tools", "show", "get_flower_inventory", "--format", "mcp", "--tools-dir", str(directory))
    assert code == 0
    definition = json.loads(out)
    assert definition["title"] == "Flower stock" and definition["annotations"]["readOnlyHint"] is True
    assert "北京" in out  # ensure_ascii=False


def test_show_unknown_tool_is_bad_input(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL)
    code, _, err = run("tools", "show", "get_weather", "--tools-dir", str(directory))
    assert code == 2 and "no tool named 'get_weather'" in err and "get_flower_inventory" in err


def test_export_each_format_with_notes_on_stderr(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL, SHORT_TOOL)
    expected_top = {
        "openai": list,
        "openai-responses": list,
        "anthropic": list,
        "gemini": list,
        "mcp": dict,
    }
    for format, kind in expected_top.items():
        code, out, _ = run("tools", "export", "--format", format, "--tools-dir", str(directory))
        assert code == 0, format
        assert isinstance(json.loads(out), kind)
    _, out, _ = run("tools", "export", "--format", "gemini", "--tools-dir", str(directory))
    declarations = json.loads(out)[0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["get_flower_inventory", "get_prices"]
    _, out, err = run("tools", "export", "--format", "openai-responses", "--strict-schema", "--tools-dir", str(directory))
    assert "note: get_flower_inventory: strict mode: properties.limit: optional: now required and nullable" in err
    assert all(tool["strict"] is True for tool in json.loads(out))


def test_export_notes_stay_short_for_a_tool_with_many_changes(tmp_path: Path) -> None:
    # A large OpenAPI-derived schema made ~40 notes per tool (60,000 lines for a real catalog).
    fields = "".join(f"    f{index}: {{type: [string, 'null'], description: Field {index}}}\n" for index in range(12))
    big = (
        "name: save_record\ndescription: Saves one record. Use it to store a record; not for reading.\n"
        "parameters:\n  type: object\n  properties:\n" + fields + "backend: {python: 'json:dumps'}\n"
    )
    directory = tools_dir(tmp_path, big)
    code, out, err = run("tools", "export", "--format", "gemini", "--tools-dir", str(directory))
    notes = [line for line in err.splitlines() if line.startswith("note: save_record")]
    assert code == 0 and len(notes) == 4
    assert notes[-1] == (
        "note: save_record: and 9 more changes: toolrun tools show save_record --format gemini lists them all"
    )
    _, _, err = run("tools", "show", "save_record", "--format", "gemini", "--tools-dir", str(directory))
    assert len([line for line in err.splitlines() if line.startswith("note: save_record")]) == 12


def test_export_without_format_gives_openai_chat_tools(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL)
    code, out, _ = run("tools", "export", "--tools-dir", str(directory))
    _, explicit, _ = run("tools", "export", "--format", "openai", "--tools-dir", str(directory))
    assert code == 0 and out == explicit
    assert json.loads(out)[0]["type"] == "function"


def test_the_console_script_end_to_end(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL, SHORT_TOOL)
    completed = subprocess.run(
        [str(TOOLRUN), "tools", "lint", "--json", "--strict", "--tools-dir", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 1
    assert json.loads(completed.stdout)["tools"] == 2


def test_lint_and_list_json_print_a_document_for_an_unknown_option() -> None:
    for command in ("lint", "list"):
        result = CliRunner().invoke(main, ["tools", command, "--json", "--tools-dri", "x"], catch_exceptions=False)
        assert result.exit_code == 2
        document = json.loads(result.stdout)
        assert (document["tools"], document["findings"]) == (0, [])
        assert "--tools-dri" in document["problems"][0]["message"]


def test_info_on_every_tool_is_one_line_unless_verbose(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL, SHORT_TOOL)
    _, out, _ = run("tools", "lint", "--tools-dir", str(directory))
    assert "info: token-cost on 2 tools (--verbose lists each" in out
    assert "get_prices: definition costs" not in out
    assert "the 2 tool definitions cost" in out  # the catalog's own total stays
    _, verbose, _ = run("tools", "lint", "--tools-dir", str(directory), "--verbose")
    assert "get_prices: definition costs" in verbose and "info: token-cost on" not in verbose
    _, as_json, _ = run("tools", "lint", "--tools-dir", str(directory), "--json")
    assert sum(f["rule"] == "token-cost" and f["tool"] is not None for f in json.loads(as_json)["findings"]) == 2


def test_rule_severity_and_tool_filters(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL, SHORT_TOOL)

    def shown(*options: str) -> set[tuple[str | None, str]]:
        _, out, _ = run("tools", "lint", "--tools-dir", str(directory), "--json", *options)
        return {(f["tool"], f["rule"]) for f in json.loads(out)["findings"]}

    assert shown("--severity", "warning") == {("get_prices", "description-too-short")}
    assert shown("--rule", "token-cost", "--tool", "get_f*") == {("get_flower_inventory", "token-cost")}
    assert shown("--tool", "nothing*") == set()
    code, out, err = run("tools", "lint", "--tools-dir", str(directory), "--rule", "token-cots")
    assert code == 2 and "did you mean 'token-cost'?" in err and "Traceback" not in err


def test_strict_counts_only_the_findings_shown(tmp_path: Path) -> None:
    directory = tools_dir(tmp_path, GOOD_TOOL, SHORT_TOOL)
    code, _, _ = run("tools", "lint", "--tools-dir", str(directory), "--strict", "--tool", "get_flower_inventory")
    assert code == 0
