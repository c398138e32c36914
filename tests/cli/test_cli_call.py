"""`toolrun call` on real YAML: the repository's example tools and tools written in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.loopback import Recorded, Reply
from toolrun.catalog.lint import lint_catalog
from toolrun.catalog.loader import load_catalog
from toolrun.cli import main

ROOT = Path(__file__).resolve().parents[2]
TOOLS_D = ROOT / "tools.d"
TOKEN = "ops-token-7f3a9c-secret"


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["call", *args], env=env, catch_exceptions=False)


def write_tools(folder: Path, text: str) -> Path:
    (folder / "tools.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


@pytest.fixture
def echo_tools(tmp_path: Path) -> Path:
    (tmp_path / "echo.py").write_text(
        "def echo(**kwargs):\n    return {k: [v, type(v).__name__] for k, v in sorted(kwargs.items())}\n"
        "def fail():\n    raise RuntimeError('backend is down')\n", encoding="utf-8")
    return write_tools(tmp_path, """
        tools:
          - name: echo_types
            description: Echoes its arguments with their Python types. Use it in tests only; not for real work.
            parameters:
              type: object
              properties:
                count: {type: integer, description: A number}
                label: {type: string, description: A label}
                flags: {type: array, items: {type: string}, description: Some flags}
                ratio: {type: [number, "null"], description: A ratio or null}
            backend: {python: "echo.py:echo"}
          - name: always_fails
            description: Raises an error every time. Use it in tests only; not for real work.
            backend: {python: "echo.py:fail"}
    """)


def test_flower_result_is_printed_exactly() -> None:
    result = run("get_flower_inventory", "--arg", "city=北京", "--tools-dir", str(TOOLS_D))
    assert result.exit_code == 0
    assert result.stdout == "玫瑰: 100, 郁金香: 150\n"


def test_json_output_has_result_is_error_and_duration() -> None:
    result = run("get_flower_inventory", "--args", '{"city": "深圳"}', "--json", "--tools-dir", str(TOOLS_D))
    document = json.loads(result.stdout)
    assert set(document) == {"tool", "arguments", "result", "is_error", "duration_ms"}
    assert document["tool"] == "get_flower_inventory" and document["arguments"] == {"city": "深圳"}
    assert (document["result"], document["is_error"]) == ("向日葵: 200, 玉兰: 90", False)
    assert "向日葵" in result.stdout  # ensure_ascii=False


def test_json_reports_invalid_arguments_in_the_document_with_exit_1() -> None:
    result = run("get_flower_inventory", "--arg", "city=广州", "--json", "--tools-dir", str(TOOLS_D))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["is_error"] is True and document["arguments"] == {"city": "广州"}
    assert 'at $.city: expected one of ["北京", "上海", "深圳"], got "广州"' in document["result"]


def test_invalid_arguments_exit_2_with_path_expected_and_given() -> None:
    result = run("get_flower_inventory", "--arg", "city=广州", "--tools-dir", str(TOOLS_D))
    assert result.exit_code == 2
    assert 'at $.city: expected one of ["北京", "上海", "深圳"], got "广州"' in result.stderr
    assert "Traceback" not in result.output


def test_unknown_tool_exit_2_with_did_you_mean() -> None:
    result = run("get_flower_inventroy", "--tools-dir", str(TOOLS_D))
    assert result.exit_code == 2
    assert "no tool named 'get_flower_inventroy'" in result.stderr
    assert "did you mean get_flower_inventory?" in result.stderr


def test_arg_values_follow_the_schema_types(echo_tools: Path) -> None:
    result = run("echo_types", "--arg", "count=3", "--arg", "label=3", "--arg", 'flags=["a","北"]',
                 "--arg", "ratio=null", "--json", "--tools-dir", str(echo_tools))
    assert result.exit_code == 0, result.output
    echoed = json.loads(json.loads(result.stdout)["result"])
    assert echoed == {"count": [3, "int"], "label": ["3", "str"], "flags": [["a", "北"], "list"],
                      "ratio": [None, "NoneType"]}


def test_arg_wins_over_args_and_bad_values_are_reported(echo_tools: Path) -> None:
    merged = run("echo_types", "--args", '{"count": 1, "label": "x"}', "--arg", "count=2", "--tools-dir", str(echo_tools))
    assert json.loads(merged.stdout) == {"count": [2, "int"], "label": ["x", "str"]}
    not_a_number = run("echo_types", "--arg", "count=three", "--tools-dir", str(echo_tools))
    assert not_a_number.exit_code == 2 and 'at $.count: expected integer, got "three"' in not_a_number.stderr
    bad_json = run("echo_types", "--args", "{count: 1}", "--tools-dir", str(echo_tools))
    assert bad_json.exit_code == 2 and "--args is not valid JSON" in bad_json.stderr
    no_equals = run("echo_types", "--arg", "count", "--tools-dir", str(echo_tools))
    assert no_equals.exit_code == 2 and "is not K=V" in no_equals.stderr


def _call_process(*args: str, tools: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOOLRUN_CACHE_DIR": "off"}
    return subprocess.run([sys.executable, "-m", "toolrun", "call", *args, "--tools-dir", str(tools)],
                          capture_output=True, text=True, timeout=60, env=env)


def test_arguments_nested_thousands_deep_are_bad_input_not_an_internal_error(echo_tools: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    result = _call_process("echo_types", "--args", f'{{"flags": {deep}}}', "--arg", f"label={deep}",
                           tools=echo_tools)
    assert result.returncode == 2, result.stderr
    assert "--args is nested deeper than 64 levels" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_nan_and_infinity_are_refused_so_json_output_stays_json(echo_tools: Path) -> None:
    result = _call_process("echo_types", "--args", '{"ratio": NaN}', "--json", tools=echo_tools)
    assert result.returncode == 2
    document = json.loads(result.stdout, parse_constant=lambda text: pytest.fail(f"{text} in the --json output"))
    assert document["problems"][0]["message"] == "--args: NaN is not a number JSON can carry"
    too_large = run("echo_types", "--arg", "ratio=1e400", "--tools-dir", str(echo_tools))
    assert too_large.exit_code == 2 and "--arg ratio: 1e400 is not a number JSON can carry" in too_large.stderr


def test_nan_or_a_deep_json_text_for_a_parameter_that_takes_a_string_too_is_that_string(tmp_path: Path) -> None:
    # type: [string, integer]: "Infinity" (a band, a version name) is a string the schema accepts, not exit 2
    (tmp_path / "echo.py").write_text("def echo(**kwargs):\n    return {k: [v, type(v).__name__] for k, v in "
                                      "sorted(kwargs.items())}\n", encoding="utf-8")
    write_tools(tmp_path, """
        tools:
          - name: find_release
            description: Finds a release by its name or number. Use it in tests only; not for real work.
            parameters:
              type: object
              properties:
                release: {type: [string, integer], description: A release name or number}
            backend: {python: "echo.py:echo"}
    """)
    deep = "[" * 100 + "]" * 100
    for text in ("Infinity", "NaN", "1e400", deep):
        result = run("find_release", "--arg", f"release={text}", "--json", "--tools-dir", str(tmp_path))
        assert result.exit_code == 0, result.stderr
        assert json.loads(json.loads(result.stdout)["result"]) == {"release": [text, "str"]}
    assert json.loads(json.loads(run("find_release", "--arg", "release=7", "--json", "--tools-dir",
                                     str(tmp_path)).stdout)["result"]) == {"release": [7, "int"]}


def test_a_comma_list_for_an_array_gets_the_json_form_as_its_fix(echo_tools: Path) -> None:
    result = run("echo_types", "--arg", "flags=ops,sev2", "--tools-dir", str(echo_tools))
    assert result.exit_code == 2
    assert "--arg 'flags=[\"ops\",\"sev2\"]'" in result.stderr and "Traceback" not in result.stderr


def test_the_same_arg_twice_is_bad_input_not_last_one_wins(echo_tools: Path) -> None:
    twice = run("echo_types", "--arg", "label=a", "--arg", "label=b", "--tools-dir", str(echo_tools))
    assert twice.exit_code == 2 and "--arg label is given twice ('a' and 'b')" in twice.stderr
    not_an_object = run("echo_types", "--args", '["北京"]', "--tools-dir", str(echo_tools))
    assert not_an_object.exit_code == 2 and '["北京"]' in not_an_object.stderr


def test_tool_error_result_exits_1(echo_tools: Path) -> None:
    result = run("always_fails", "--tools-dir", str(echo_tools))
    assert result.exit_code == 1
    assert "RuntimeError: backend is down" in result.stderr
    as_json = run("always_fails", "--json", "--tools-dir", str(echo_tools))
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["is_error"] is True


def test_shell_example_reports_disk_usage_and_treats_options_as_paths(tmp_path: Path) -> None:
    good = run("get_disk_usage", "--arg", "path=/", "--tools-dir", str(TOOLS_D))
    assert good.exit_code == 0 and good.stdout.startswith("Filesystem")
    victim = tmp_path / "x"
    sneaky = run("get_disk_usage", "--arg", f"path=--output={victim}", "--tools-dir", str(TOOLS_D))
    assert sneaky.exit_code == 1 and not victim.exists()


def test_shell_true_example_lists_directories(tmp_path: Path) -> None:
    for name, size in (("big", 300_000), ("small", 10)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "data").write_bytes(b"x" * size)
    result = run("list_largest_directories", "--arg", f"path={tmp_path}", "--arg", "count=2", "--tools-dir", str(TOOLS_D))
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and len(lines) == 2
    assert lines[0].endswith(str(tmp_path)) and lines[1].endswith("big")


def _ops_api(request: Recorded) -> Reply:
    if request.path == "/api/v1/services/checkout/status":
        return Reply(200, {"service": "checkout", "status": "healthy", "seen_token": request.headers.get("authorization")})
    if request.path == "/api/v1/deployments":
        return Reply(200, {"deployments": [
            {"finished_at": "2026-11-29T10:00Z", "service": "checkout", "version": "1.4.2", "status": "succeeded",
             "author": "李雷"}]})
    if request.path == "/api/v1/services/checkout/restart" and request.method == "POST":
        return Reply(202, {"restart_id": "rs-42", "accepted": request.json()})
    return Reply(404, {"error": "no route"})


@pytest.fixture
def ops_env(loopback) -> tuple[dict[str, str], object]:
    server = loopback(_ops_api)
    return {"OPS_API_URL": server.url + "/api/v1", "OPS_API_TOKEN": TOKEN}, server


def test_http_example_sends_the_token_and_never_shows_it(ops_env) -> None:
    env, server = ops_env
    result = run("get_service_status", "--arg", "service=checkout", "--json", "--tools-dir", str(TOOLS_D), env=env)
    assert result.exit_code == 0, result.output
    assert server.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert server.requests[0].query == {}  # environment not given: left out
    assert TOKEN not in result.output
    assert json.loads(json.loads(result.stdout)["result"])["seen_token"] == "Bearer ***"


def test_http_example_result_template(ops_env) -> None:
    env, server = ops_env
    result = run("list_recent_deployments", "--arg", "service=checkout", "--arg", "limit=5",
                 "--tools-dir", str(TOOLS_D), env=env)
    assert result.stdout.strip() == "2026-11-29T10:00Z checkout 1.4.2 succeeded by 李雷"
    assert server.requests[0].query == {"service": ["checkout"], "limit": ["5"]}


def test_destructive_http_example_is_denied_without_a_terminal_and_runs_with_yes(ops_env) -> None:
    env, server = ops_env
    arguments = ["--arg", "service=checkout", "--arg", "environment=staging", "--arg", "reason=stuck after deploy"]
    denied = run("restart_service", *arguments, "--tools-dir", str(TOOLS_D), env=env)
    assert denied.exit_code == 1 and "the user denied this call" in denied.stderr
    assert server.requests == []
    approved = run("restart_service", *arguments, "--yes", "--tools-dir", str(TOOLS_D), env=env)
    assert approved.exit_code == 0 and approved.stdout == "rs-42\n"
    assert server.requests[0].json() == {"environment": "staging", "reason": "stuck after deploy"}


def test_example_tools_lint_clean() -> None:
    loaded = load_catalog(TOOLS_D)
    assert loaded.problems == []
    findings = [f for f in lint_catalog(loaded.catalog) if f.severity in ("error", "warning")]
    assert findings == []


def test_console_script_exit_codes_in_a_real_process() -> None:
    toolrun = Path(sys.executable).with_name("toolrun")
    command = [str(toolrun), "call", "get_flower_inventory", "--tools-dir", str(TOOLS_D)]
    ok = subprocess.run([*command, "--arg", "city=上海"], capture_output=True, text=True, timeout=60)
    bad = subprocess.run([*command, "--arg", "city=广州"], capture_output=True, text=True, timeout=60)
    assert (ok.returncode, ok.stdout) == (0, "百合: 80, 康乃馨: 120\n")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.parametrize(("answer", "approved"), [("y", True), ("n", False)])
def test_confirm_asks_on_a_real_terminal_showing_the_arguments(ops_env, answer: str, approved: bool) -> None:
    import pty

    env, server = ops_env
    controller, terminal = pty.openpty()
    toolrun = Path(sys.executable).with_name("toolrun")
    process = subprocess.Popen(
        [str(toolrun), "call", "restart_service", "--arg", "service=checkout", "--arg", "environment=production",
         "--arg", "reason=memory leak since 10:00", "--tools-dir", str(TOOLS_D)],
        stdin=terminal, stdout=subprocess.PIPE, stderr=terminal, env={**os.environ, **env})
    os.close(terminal)
    shown = b""
    while b"Allow this call" not in shown:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # Linux: EIO once the child closed the terminal without asking
            chunk = b""
        assert chunk, shown
        shown += chunk
    os.write(controller, answer.encode() + b"\n")
    stdout, _ = process.communicate(timeout=60)
    os.close(controller)
    assert b"restart_service" in shown and b"memory leak since 10:00" in shown
    assert process.returncode == (0 if approved else 1)
    assert (stdout == b"rs-42\n") is approved
    assert len(server.requests) == (1 if approved else 0)


def test_debug_prints_a_failing_tools_traceback_on_stderr_never_in_the_result(echo_tools: Path) -> None:
    quiet = run("always_fails", "--json", "--tools-dir", str(echo_tools))
    assert quiet.exit_code == 1 and "Traceback" not in quiet.output
    loud = CliRunner().invoke(main, ["--debug", "call", "always_fails", "--json", "--tools-dir", str(echo_tools)],
                              catch_exceptions=False)
    assert loud.exit_code == 1
    assert json.loads(loud.stdout)["result"] == "RuntimeError: backend is down"  # the model's view: one line
    assert "debug: python tool always_fails failed" in loud.stderr
    assert "Traceback (most recent call last)" in loud.stderr and "echo.py\", line 4, in fail" in loud.stderr
    again = run("always_fails", "--tools-dir", str(echo_tools))  # --debug ends with its command
    assert "Traceback" not in again.output


def test_debug_from_the_environment_through_the_console_script(echo_tools: Path) -> None:
    toolrun = Path(sys.executable).parent / "toolrun"
    env = {**os.environ, "TOOLRUN_DEBUG": "1"}
    result = subprocess.run([str(toolrun), "call", "always_fails", "--tools-dir", str(echo_tools)],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 1
    assert "error result: RuntimeError: backend is down" in result.stderr
    assert "Traceback (most recent call last)" in result.stderr and "RuntimeError: backend is down" in result.stderr
    assert result.stdout == ""


def test_json_reports_a_command_line_mistake_as_a_document_with_exit_2() -> None:
    unknown = run("get_flowr_inventory", "--json", "--tools-dir", str(TOOLS_D))
    assert unknown.exit_code == 2
    document = json.loads(unknown.stdout)
    assert document["is_error"] is True and document["result"] is None
    assert "no tool named 'get_flowr_inventory'" in document["problems"][0]["message"]
    assert "get_flower_inventory" in document["problems"][0]["fix"]
    broken = run("get_flower_inventory", "--json", "--args", "{bad", "--tools-dir", str(TOOLS_D))
    assert broken.exit_code == 2 and "--args is not valid JSON" in json.loads(broken.stdout)["problems"][0]["message"]


@pytest.mark.parametrize("mistake", [["--tools-dri", "x"], []])
def test_json_is_printed_for_a_mistake_click_finds_in_the_command_line_too(mistake: list[str]) -> None:
    # An unknown option or a missing NAME: CI that pipes --json into jq still gets one document (exit 2).
    args = ["get_flower_inventory", *mistake] if mistake else []
    result = CliRunner().invoke(main, ["call", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert (document["is_error"], document["result"]) == (True, None)
    [problem] = document["problems"]
    assert ("--tools-dri" if mistake else "NAME") in problem["message"]
    assert "toolrun call --help" in problem["fix"]
    assert "Error:" in result.stderr  # the usual message, for a person reading the log
