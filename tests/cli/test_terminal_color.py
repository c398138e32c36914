"""Colour and the live elapsed-time line: on a terminal only, NO_COLOR / FORCE_COLOR / --color honoured,
and colour added around escaped text, never through it. One real terminal (tmux) run; the rest in process."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.sessions.test_chat import EXITED, Terminal
from toolrun.cli.color import color_enabled, paint, remember_choice
from toolrun.cli.display import TerminalDisplay
from toolrun.cli.live_line import TICK_SECONDS, LiveElapsed
from toolrun.core.messages import ToolCall
from toolrun.loop.results import ToolCallRecord

ROOT = Path(__file__).resolve().parents[2]


class TerminalLike(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("environ", "choice", "tty", "expected"), [
    ({}, "auto", True, True),
    ({}, "auto", False, False),
    ({"NO_COLOR": "1"}, "auto", True, False),
    ({"FORCE_COLOR": "1"}, "auto", False, True),
    ({"NO_COLOR": "1"}, "always", False, True),
    ({"FORCE_COLOR": "1"}, "never", True, False),
    ({"TERM": "dumb"}, "auto", True, False),
])
def test_when_colour_is_on(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], choice: str, tty: bool,
                           expected: bool) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    stream = TerminalLike() if tty else io.StringIO()
    assert color_enabled(stream, choice) is expected


def test_model_text_cannot_bring_its_own_escapes_colour_comes_only_around_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = TerminalLike()
    display = TerminalDisplay(info_out=out, text_out=None, live=False)
    display.on_tool_call_start(ToolCall("c1", "get\x1b[8mhidden", {"city": "\x1b[2J北京"}, ""))
    display.on_tool_call_end(ToolCallRecord("c1", "get_x", {}, "boom \x1b]0;title\x07", True, 3))
    text = out.getvalue()
    assert "\\x1b[8m" in text and "\\u001b[2J" in text and "\\x1b]0;" in text  # the model's, shown escaped
    assert text.count("\x1b[") == 4  # only ours: two colours, each reset
    assert text.startswith(paint("→ get\\x1b[8mhidden", "call", True) + " ")
    assert "\x1b[1;31m✗ get_x\x1b[0m" in text


def test_no_colour_when_the_stream_is_no_terminal() -> None:
    out = io.StringIO()
    display = TerminalDisplay(info_out=out, text_out=None)
    display.on_tool_call_start(ToolCall("c1", "get_x", {}, "{}"))
    assert "\x1b" not in out.getvalue() and display.live is None


def test_the_live_line_names_only_calls_running_a_second_and_is_erased() -> None:
    out = TerminalLike()
    live = LiveElapsed(out)
    live._running = {"a": ("slow_report", 100.0), "b": ("quick", 101.5)}
    assert live.line(101.9) == "… slow_report 1.9 s"
    assert live.line(100.5) is None
    live._drawn = True
    live.ended("a")
    live.ended("b")
    assert out.getvalue() == "\r\x1b[K"


SLOW_TOOL = """
    name: slow_report
    description: Builds the weekly report, which takes a while. Use it when asked for the report; not for anything else.
    parameters: {type: object, properties: {}}
    annotations: {read_only: true}
    backend: {python: "slow.py:report"}
"""


def test_a_real_terminal_gets_colour_and_a_live_line_a_pipe_gets_neither(tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "slow.yaml").write_text(textwrap.dedent(SLOW_TOOL), encoding="utf-8")
    (tools / "slow.py").write_text("import time\ndef report():\n    time.sleep(1.3)\n    return 'ready'\n")
    (tmp_path / "script.yaml").write_text("- tool_calls: [{name: slow_report, arguments: {}}]\n- text: done\n")
    (tmp_path / "r.yaml").write_text("model: scripted:script.yaml\nmessages:\n  - user: the report\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    command = [sys.executable, "-m", "toolrun", "recipe", "r.yaml", "--tools-dir", "tools.d", "--no-log"]
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("tools.d", "script.yaml", "r.yaml"):
        (plain / name).symlink_to(tmp_path / name)
    # The three runs side by side: a terminal, a terminal with NO_COLOR, a pipe.
    terminal = Terminal(tmp_path, command, env)
    no_color = Terminal(plain, command, {**env, "NO_COLOR": "1"})
    try:
        _compare_the_three_runs(tmp_path, command, env, terminal, no_color)
    finally:  # each tmux server would outlive the suite
        terminal.close()
        no_color.close()


def _compare_the_three_runs(tmp_path: Path, command: list[str], env: dict[str, str], terminal: Terminal,
                            no_color: Terminal) -> None:
    piped = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen_live = False
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and EXITED not in (screen := terminal.screen()):
        seen_live = seen_live or "… slow_report 1." in screen
        time.sleep(0.05)
    coloured = terminal.tmux("capture-pane", "-p", "-e", "-t", "t", "-S", "-200")
    assert seen_live, screen
    assert "\x1b[36m→ slow_report" in coloured and "\x1b[32m← slow_report" in coloured
    assert "… slow_report" not in terminal.screen()  # erased when the call ended
    _, stderr = piped.communicate(timeout=30)
    assert "← slow_report" in stderr and "\x1b" not in stderr and "…" not in stderr
    no_color.wait_for(EXITED)
    assert "\x1b[3" not in no_color.tmux("capture-pane", "-p", "-e", "-t", "t", "-S", "-200")


def test_color_always_colours_a_pipe_and_errors_are_red(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from toolrun.cli import main

    (tmp_path / "t.yaml").write_text("name: x\ndescription: 'never closed\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["--color", "always", "tools", "lint", "--tools-dir", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.startswith("\x1b[1;31merror:\x1b[0m ")
    plain = CliRunner().invoke(main, ["tools", "lint", "--tools-dir", str(tmp_path)])
    assert plain.stderr.startswith("error: ")


def test_the_live_line_keeps_still_while_an_approval_question_is_up() -> None:
    out = TerminalLike()
    live = LiveElapsed(out)
    live.started("a", "deploy")
    live._running["a"] = ("deploy", time.monotonic() - 5)  # as if it had been running five seconds
    with live.paused():
        time.sleep(TICK_SECONDS * 1.5)  # a tick comes and draws nothing
        assert "deploy" not in out.getvalue()
    deadline = time.monotonic() + 5
    while "… deploy 5." not in out.getvalue() and time.monotonic() < deadline:  # the next tick draws again
        time.sleep(0.02)
    assert "… deploy 5." in out.getvalue()
    live.ended("a")
    assert out.getvalue().endswith("\r\x1b[K")


def test_a_color_choice_stays_with_the_command_that_made_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # two commands side by side in one process (a test runner's threads): each sees its own --color
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    terminal = TerminalLike()
    restore = remember_choice("never")
    elsewhere: list[bool] = []
    other = threading.Thread(target=lambda: elsewhere.append(color_enabled(terminal)))  # its own choice: auto
    other.start()
    other.join()
    assert color_enabled(terminal) is False and elsewhere == [True]
    restore()
    assert color_enabled(terminal) is True  # back to auto on a terminal
