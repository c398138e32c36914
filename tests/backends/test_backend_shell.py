"""The shell backend with real subprocesses: no shell injection, clean environment, kills."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.backend_helpers import call, make_tool
from toolrun.backends import shell
from toolrun.backends.base import CallContext
from toolrun.backends.shell import NO_OUTPUT, ShellBackend
from toolrun.core.secrets import register_secret

INJECTIONS = ["x; touch {marker}", "$(touch {marker})", "`touch {marker}`", "x && touch {marker}",
              "x | touch {marker}", "x\ntouch {marker}"]


def shell_tool(folder: Path, config: dict, **kwargs):
    kwargs.setdefault("properties", {"value": {"type": "string"}})
    return make_tool("shell", config, folder=folder, **kwargs)


def _process_exists(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait a moment for init to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


@pytest.mark.parametrize("template", INJECTIONS)
def test_argv_values_are_data_never_shell_syntax(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "owned"
    value = template.format(marker=marker)
    tool = shell_tool(tmp_path, {"argv": ["printf", "%s", "--", "{{ value }}"]})
    outcome = call(tool, {"value": value})
    assert not outcome.is_error
    assert outcome.result == "--" + value.rstrip("\n")  # printf prints "--" as the first %s
    assert not marker.exists()


@pytest.mark.parametrize("config", [
    {"argv": ["cat"], "stdin": "{{ value }}"},  # was Python's UnicodeEncodeError as the result
    {"argv": ["printf", "%s", "--", "{{ value }}"]},  # was the raw byte 0xE9 on the command line
    {"shell": True, "command": 'printf "%s" "$TOOLRUN_ARG_VALUE"'},
])
def test_a_lone_surrogate_in_an_argument_is_refused_before_the_command_runs(tmp_path: Path, config: dict) -> None:
    outcome = call(shell_tool(tmp_path, config), json.loads('{"value": "caf\\udce9"}'))
    assert outcome.is_error is True
    assert outcome.result.startswith("refused: argument 'value' holds \\udce9, a lone UTF-16 surrogate")
    assert "the command can only be sent UTF-8 text" in outcome.result


@pytest.mark.parametrize("template", INJECTIONS)
def test_shell_true_gets_arguments_only_as_environment_variables(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "owned"
    value = template.format(marker=marker)
    tool = shell_tool(tmp_path, {"shell": True, "command": 'printf "%s" "$TOOLRUN_ARG_VALUE"'})
    outcome = call(tool, {"value": value})
    assert outcome.result == value.rstrip("\n")
    assert not marker.exists()


def test_dollar_id_comes_back_literally(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, {"argv": ["echo", "{{ value }}"]})
    assert call(tool, {"value": "$(id)"}).result == "$(id)"


def test_option_like_value_after_double_dash_is_a_positional_argument(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, {"argv": ["touch", "--", "{{ value }}"]})
    outcome = call(tool, {"value": "--version"})
    # After "--", touch took "--version" as a file name (in the tool's folder), not as an option.
    assert (outcome.result, outcome.is_error) == (NO_OUTPUT, False)
    assert (tmp_path / "--version").is_file()


def test_output_option_from_the_model_does_not_write_elsewhere(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    tool = shell_tool(tmp_path, {"argv": ["df", "-P", "--", "{{ value }}"]})
    outcome = call(tool, {"value": f"--output={victim}"})
    assert outcome.is_error and "--output=" in outcome.result  # df looked for a file of that name
    assert not victim.exists()


def test_child_gets_only_path_the_tool_env_and_no_secrets_of_the_parent(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PARENT_ONLY_SECRET", "do-not-leak-1234")
    tool = shell_tool(tmp_path, {"argv": ["env"], "env": {"REGION": "{{ value }}", "TOKEN": "${env:MY_TOKEN}"}})
    outcome = call(tool, {"value": "cn-north"}, environ={"MY_TOKEN": "tok-secret-5678"})
    names = {line.split("=", 1)[0] for line in outcome.result.splitlines()}
    assert names <= {"PATH", "REGION", "TOKEN", "PWD", "SHLVL", "_"}
    assert "REGION=cn-north" in outcome.result
    assert "do-not-leak-1234" not in outcome.result
    assert "tok-secret-5678" not in outcome.result  # the tool's own secret is redacted from its output
    assert "TOKEN=***" in outcome.result


def test_shell_true_passes_non_strings_as_json(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, {"shell": True, "command": 'echo "$TOOLRUN_ARG_COUNT|$TOOLRUN_ARG_TAGS|$TOOLRUN_ARG_ON"'},
                      properties={"count": {"type": "integer"}, "tags": {"type": "array"}, "on": {"type": "boolean"}})
    assert call(tool, {"count": 3, "tags": ["北京", "b"], "on": True}).result == '3|["北京", "b"]|true'


def test_stdin_and_cwd_are_templates(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    tool = shell_tool(tmp_path, {"argv": ["sh", "-c", "pwd; cat"], "cwd": "sub", "stdin": "hello {{ value }}"})
    outcome = call(tool, {"value": "上海"})
    assert outcome.result.splitlines() == [str(tmp_path / "sub"), "hello 上海"]


def test_optional_flag_element_is_dropped_when_it_renders_empty(tmp_path: Path) -> None:
    config = {"argv": ["printf", "[%s]", "{% if loud %}--loud{% endif %}", "x"]}
    tool = shell_tool(tmp_path, config, properties={"loud": {"type": "boolean"}})
    assert call(tool, {"loud": False}).result == "[x]"
    assert call(tool, {"loud": True}).result == "[--loud][x]"


def test_nonzero_exit_is_an_error_with_code_and_stderr_tail(tmp_path: Path) -> None:
    script = "for i in $(seq 1 50); do echo line$i >&2; done; exit 3"
    outcome = call(shell_tool(tmp_path, {"argv": ["sh", "-c", script]}), {})
    assert outcome.is_error
    assert "exited with code 3" in outcome.result
    assert "line50" in outcome.result and "line31" in outcome.result
    assert "line30\n" not in outcome.result  # only the last 20 lines


def test_missing_command_is_an_error_result(tmp_path: Path) -> None:
    outcome = call(shell_tool(tmp_path, {"argv": ["definitely-not-a-command-xyz"]}), {})
    assert outcome.is_error and "command not found: definitely-not-a-command-xyz" in outcome.result


def test_timeout_kills_the_whole_process_group_quickly(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = f"sleep 30 & echo $! > {pid_file}; sleep 30"
    tool = shell_tool(tmp_path, {"argv": ["sh", "-c", script]}, timeout=0.2)
    outcome = call(tool, {})
    assert outcome.is_error and "timed out" in outcome.result  # not the script's end 30 s on
    background = int(pid_file.read_text())
    deadline = time.monotonic() + 2
    while _process_exists(background) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _process_exists(background)


def test_backend_timeout_option_kills_too(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, {"argv": ["sleep", "30"], "timeout": "100ms"})
    outcome = call(tool, {})
    assert outcome.is_error and "timed out after 0.1s" in outcome.result


def test_term_ignoring_child_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shell, "KILL_GRACE_SECONDS", 0.2)  # the grace a TERM-ignoring command gets before SIGKILL
    pid_file = tmp_path / "pids"
    script = f"trap '' TERM; sleep 30 & echo $$ $! > {pid_file}; wait"  # the sleep inherits the ignored TERM
    tool = shell_tool(tmp_path, {"argv": ["sh", "-c", script]}, timeout=0.2)
    started = time.perf_counter()
    assert call(tool, {}).is_error
    assert time.perf_counter() - started < 5
    pids = [int(pid) for pid in pid_file.read_text().split()]
    deadline = time.monotonic() + 2
    while any(_process_exists(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_process_exists(pid) for pid in pids)


def test_placeholders_cover_argv_env_stdin_and_shell_variables(tmp_path: Path) -> None:
    backend = ShellBackend()
    tool = shell_tool(tmp_path, {"argv": ["grep", "--", "{{ pattern }}"], "env": {"A": "{{ region }}"},
                                 "stdin": "{{ text }}", "cwd": "{{ folder }}"})
    assert backend.placeholders(tool) == {"pattern", "region", "text", "folder"}
    sh = shell_tool(tmp_path, {"shell": True, "command": 'grep -c "$TOOLRUN_ARG_CITY" "$TOOLRUN_ARG_TYPO"'},
                    properties={"city": {"type": "string"}})
    assert backend.placeholders(sh) == {"city", "typo"}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"argv": []}, "non-empty list"),
        ({"argv": ["ls", 3]}, "must be a string"),
        ({"argv": ["echo", "{{ value "]}, "template syntax error"),
        ({"shell": True, "command": "grep {{ value }} f"}, "must not contain"),
        ({"argv": ["ls"], "timeout": "soon"}, "duration"),
    ],
)
def test_check_reports_static_problems(tmp_path: Path, config: dict, expected: str) -> None:
    problems = ShellBackend().check(shell_tool(tmp_path, config))
    assert len(problems) == 1 and expected in problems[0].message


def test_check_accepts_the_good_forms(tmp_path: Path) -> None:
    backend = ShellBackend()
    assert backend.check(shell_tool(tmp_path, {"argv": ["df", "-h", "--", "{{ value }}"]})) == []
    assert backend.check(shell_tool(tmp_path, {"shell": True, "command": 'echo "$TOOLRUN_ARG_VALUE"'})) == []


@pytest.mark.parametrize("value", ["--output=/etc/x", "-rf", "-"])
def test_a_model_value_that_would_be_an_option_is_refused_before_anything_runs(tmp_path: Path, value: str) -> None:
    # The author forgot "--": touch would read "--output=..." as an option; the call must not run.
    marker = tmp_path / "ran"
    tool = shell_tool(tmp_path, {"argv": ["sh", "-c", f"touch {marker}", "sh", "{{ value }}"]})
    outcome = call(tool, {"value": value})
    assert outcome.is_error and not marker.exists()
    assert "'value' starts with '-'" in outcome.result and "--" in outcome.result


def test_a_refused_option_value_is_quoted_without_part_of_a_secret(tmp_path: Path) -> None:
    register_secret("sk-live-abcdef123456")
    tool = shell_tool(tmp_path, {"argv": ["echo", "{{ value }}"]})
    outcome = call(tool, {"value": "-" + "x" * 50 + "sk-live-abcdef123456"})  # the quote is cut at 60 characters
    assert outcome.is_error and "starts with '-'" in outcome.result
    assert "sk-live" not in outcome.result


def test_values_after_double_dash_or_inside_an_element_or_enumerated_may_start_with_dash(tmp_path: Path) -> None:
    after = shell_tool(tmp_path, {"argv": ["printf", "%s|", "--", "{{ value }}"]})
    assert call(after, {"value": "-x"}).result == "--|-x|"
    inside = shell_tool(tmp_path, {"argv": ["printf", "%s|", "name={{ value }}"]})
    assert call(inside, {"value": "-x"}).result == "name=-x|"
    flags = shell_tool(tmp_path, {"argv": ["printf", "%s|", "{{ value }}"]},
                       properties={"value": {"type": "string", "enum": ["-l", "-a"]}})
    assert call(flags, {"value": "-l"}).result == "-l|"


# --- ok_exit_codes and the result template -------------------------------------------------------


def test_grep_finding_nothing_is_a_result_when_exit_code_one_is_ok(tmp_path: Path) -> None:
    (tmp_path / "stock.txt").write_text("北京 玫瑰\n上海 百合\n", encoding="utf-8")
    argv = ["grep", "--", "{{ value }}", "stock.txt"]
    strict = call(shell_tool(tmp_path, {"argv": argv}), {"value": "深圳"})
    assert strict.is_error and "exited with code 1" in strict.result
    tolerant = shell_tool(tmp_path, {"argv": argv, "ok_exit_codes": [0, 1]})
    assert call(tolerant, {"value": "北京"}).result == "北京 玫瑰"
    nothing = call(tolerant, {"value": "深圳"})
    assert (nothing.result, nothing.is_error) == ("(the command printed nothing; exit code 1)", False)
    missing_file = call(shell_tool(tmp_path, {"argv": ["grep", "x", "nofile.txt"], "ok_exit_codes": [0, 1]}), {})
    assert missing_file.is_error and "exited with code 2" in missing_file.result  # grep's real failure stays one


def test_the_result_template_sees_stdout_stderr_exit_code_and_the_arguments(tmp_path: Path) -> None:
    (tmp_path / "stock.txt").write_text("北京 玫瑰\n", encoding="utf-8")
    template = ("{% if exit_code == 0 %}{{ value }}: {{ stdout | trim }}"
                "{% else %}no stock line mentions {{ value }}{% endif %}")
    tool = shell_tool(tmp_path, {"argv": ["grep", "--", "{{ value }}", "stock.txt"], "ok_exit_codes": [0, 1],
                                 "result": template})
    assert call(tool, {"value": "北京"}).result == "北京: 北京 玫瑰"
    assert call(tool, {"value": "深圳"}).result == "no stock line mentions 深圳"
    both = shell_tool(tmp_path, {"shell": True, "command": "echo out; echo err >&2",
                                 "result": "[{{ stdout | trim }}|{{ stderr | trim }}|{{ exit_code }}]"})
    assert call(both, {}).result == "[out|err|0]"


def test_a_failing_result_template_is_an_error_that_shows_the_output(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, {"argv": ["echo", "not json"], "result": "{{ (stdout | int) // 0 }}"})
    outcome = call(tool, {})
    assert outcome.is_error
    assert outcome.result.startswith("the tool's result template failed (") and outcome.result.endswith("not json")


def test_the_result_template_is_sandboxed(tmp_path: Path) -> None:
    tool = shell_tool(tmp_path, {"argv": ["echo", "x"], "result": "{{ stdout.__class__.__mro__ }}"})
    outcome = call(tool, {})
    assert outcome.is_error and "result template failed" in outcome.result


def test_result_and_ok_exit_codes_are_checked_at_load(tmp_path: Path) -> None:
    backend = ShellBackend()
    tool = shell_tool(tmp_path, {"argv": ["true"], "result": "{{ stdout | upper }}"})
    assert backend.placeholders(tool) == set()  # stdout, stderr and exit_code are not arguments
    assert backend.check(tool) == []
    with_arg = shell_tool(tmp_path, {"argv": ["true"], "result": "{{ value }}: {{ stdout }}"})
    assert backend.placeholders(with_arg) == {"value"}
    [syntax] = backend.check(shell_tool(tmp_path, {"argv": ["true"], "result": "{{ stdout "}))
    assert "template syntax error" in syntax.message
    for codes in ([], ["1"], [256], [-1], [True]):
        [problem] = backend.check(shell_tool(tmp_path, {"argv": ["true"], "ok_exit_codes": codes}))
        assert "ok_exit_codes must be a non-empty list of exit codes 0-255" in problem.message
        assert problem.fix == "e.g. ok_exit_codes: [0, 1] (grep: 1 means nothing found)"


def test_grep_without_ok_exit_codes_is_a_lint_warning(tmp_path: Path) -> None:
    backend = ShellBackend()

    def exit_code_warnings(config: dict) -> list:  # the backend also warns of a tool without annotations
        return [w for w in backend.warnings(shell_tool(tmp_path, config)) if w.rule == "shell-exit-code"]

    [warning] = exit_code_warnings({"argv": ["/usr/bin/grep", "-c", "x", "f"]})
    assert warning.rule == "shell-exit-code" and warning.key_path == "backend.shell.argv"
    assert "grep exits with code 1 when it finds nothing" in warning.message
    assert "add ok_exit_codes: [0, 1]" in warning.message
    assert exit_code_warnings({"argv": ["grep", "x", "f"], "ok_exit_codes": [0]}) == []
    assert exit_code_warnings({"argv": ["df", "-h"]}) == []


def _running_with(word: str) -> list[int]:
    """The live processes whose command line holds ``word``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and word.encode() in (entry / "cmdline").read_bytes() and _process_exists(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_call_cancelled_while_its_process_starts_ends_at_once_and_leaves_nothing_running(tmp_path: Path) -> None:
    # asyncio killed only the process it had started: sh -c's sleep outlived the call, and the cancelled call
    # often waited for that sleep to end (its pipes stayed open)
    tool = shell_tool(tmp_path, {"command": "sleep 29.$TOOLRUN_ARG_VALUE", "shell": True})
    marks = [f"{number:06d}{os.getpid()}" for number in range(24)]

    async def cancel_each_while_it_starts() -> None:
        for mark, steps in zip(marks, list(range(2, 10)) * 3, strict=True):  # from before the fork to the pipes' connection
            task = asyncio.create_task(ShellBackend().run(tool, {"value": mark}, CallContext(environ={})))
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=5)
            assert done, f"cancelled {steps} loop steps into its start, the call was still running 5 s later"

    try:
        asyncio.run(cancel_each_while_it_starts())
        time.sleep(0.1)  # a killed sleep's parent is gone: init reaps it
    finally:
        left = [pid for mark in marks for pid in _running_with(f"29.{mark}")]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert not left


def test_a_call_cancelled_again_while_its_start_is_awaited_still_leaves_nothing_running(tmp_path: Path) -> None:
    # the second cancellation (a second Ctrl-C, a client's cancel and then the end of its stdin) reached the
    # shielded start: asyncio killed only sh, and sh -c's sleep outlived the call
    tool = shell_tool(tmp_path, {"command": "sleep 28.$TOOLRUN_ARG_VALUE", "shell": True})
    marks = [f"{number:06d}{os.getpid()}" for number in range(24)]

    async def cancel_each_again_and_again() -> None:
        for mark, steps in zip(marks, list(range(1, 9)) * 3, strict=True):
            task = asyncio.create_task(ShellBackend().run(tool, {"value": mark}, CallContext(environ={})))
            for _ in range(steps):
                await asyncio.sleep(0)
            for _ in range(4):
                task.cancel()
                await asyncio.sleep(0)
            done, _ = await asyncio.wait({task}, timeout=5)
            assert done, f"cancelled {steps} loop steps into its start, the call was still running 5 s later"
            assert task.cancelled() or task.result().is_error is False
        # a cancellation during the kill ends the call before its killed sh is reaped: the loop reaps it
        await asyncio.sleep(0.2)

    try:
        asyncio.run(cancel_each_again_and_again())
    finally:
        left = [pid for mark in marks for pid in _running_with(f"28.{mark}")]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert not left
