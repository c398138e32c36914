"""The order a person sees: call lines go out together at the end of each pass of the event loop, yet
before anything a tool prints, before an approval's answer, and before the process can die in a tool —
run as the real command, its stdout and stderr on one pipe or on a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TOOLS = """\
tools:
  - name: loud_sync
    description: Prints what it does to stdout and stderr, then answers. For tests of the display only.
    parameters: {type: object, properties: {n: {type: integer, description: which call}}, required: [n]}
    backend: {python: "loud.py:loud_sync"}
  - name: loud_async
    description: Prints what it does to stdout and stderr, then answers, as a coroutine. For tests only.
    parameters: {type: object, properties: {n: {type: integer, description: which call}}, required: [n]}
    backend: {python: "loud.py:loud_async"}
  - name: guarded
    description: Needs a person's approval for every call. For tests of the display only; never approved.
    parameters: {type: object, properties: {n: {type: integer, description: which call}}, required: [n]}
    confirm: true
    backend: {python: "loud.py:loud_sync"}
  - name: fatal
    description: Prints a last word and kills the process that runs it. For tests of the display only.
    parameters: {type: object, properties: {n: {type: integer, description: which call}}, required: [n]}
    backend: {python: "loud.py:fatal"}
"""

LOUD_PY = """\
import os, signal, sys

print("loud imported", flush=True)


def _say(stream, line):
    stream.write(line + "\\n")  # one write: the lines of calls running at once never run into each other
    stream.flush()


def loud_sync(n):
    _say(sys.stdout, f"said {n}")
    _say(sys.stderr, f"warned {n}")
    return f"done {n}"


async def loud_async(n):
    _say(sys.stdout, f"said {n}")
    _say(sys.stderr, f"warned {n}")
    return f"done {n}"


def fatal(n):
    _say(sys.stderr, f"dying {n}")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _project(tmp_path: Path, calls: list[tuple[str, int]]) -> Path:
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "loud.yaml").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "tools.d" / "loud.py").write_text(LOUD_PY, encoding="utf-8")
    lines = "".join(f"    - {{name: {name}, arguments: {{n: {n}}}}}\n" for name, n in calls)
    (tmp_path / "turns.yaml").write_text(f"- tool_calls:\n{lines}- text: all done\n", encoding="utf-8")
    recipe = tmp_path / "loud.yaml"
    recipe.write_text("name: loud\nmodel: scripted:turns.yaml\nmessages: [{user: go}]\n", encoding="utf-8")
    return recipe


def _command(recipe: Path) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}  # every print at once
    return [sys.executable, "-m", "toolrun", "recipe", str(recipe), "--no-log"], env


def _on_one_pipe(recipe: Path) -> tuple[int, list[str]]:
    argv, env = _command(recipe)
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=120)
    return done.returncode, done.stdout.splitlines()


def _assert_each_call_in_order(lines: list[str], name: str, numbers: range) -> None:
    for n in numbers:
        start = lines.index(f'→ {name} {{"n": {n}}}')
        end = next(i for i, line in enumerate(lines) if re.fullmatch(rf"← {name} \d+ ms: done {n}", line))
        assert start < lines.index(f"said {n}") < end and start < lines.index(f"warned {n}") < end, lines


def test_what_tools_print_comes_after_their_call_lines(tmp_path: Path) -> None:
    recipe = _project(tmp_path, [("loud_sync", n) for n in range(20)] + [("loud_async", n) for n in range(20, 30)])
    code, lines = _on_one_pipe(recipe)
    assert code == 0, lines
    assert lines.index('→ loud_sync {"n": 0}') < lines.index("loud imported")  # the module's import prints too
    _assert_each_call_in_order(lines, "loud_sync", range(20))
    _assert_each_call_in_order(lines, "loud_async", range(20, 30))
    assert lines[-2:] == ["all done", "2 turns · 30 tool calls · 0 in / 0 out tokens · scripted"]


def test_the_order_holds_on_a_terminal(tmp_path: Path) -> None:
    recipe = _project(tmp_path, [("loud_sync", n) for n in range(5)] + [("loud_async", n) for n in range(5, 8)])
    argv, env = _command(recipe)
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(argv, env=env, stdin=terminal, stdout=terminal, stderr=terminal)
        os.close(terminal)
        output = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the command ended: its side of the terminal is closed
                break
            if not chunk:
                break
            output += chunk
        assert process.wait(timeout=60) == 0
    finally:
        os.close(controller)
    lines = output.decode("utf-8").replace("\x1b[K", "").replace("\r\n", "\n").split("\n")
    _assert_each_call_in_order(lines, "loud_sync", range(5))
    _assert_each_call_in_order(lines, "loud_async", range(5, 8))


def test_a_denied_call_is_said_after_its_line(tmp_path: Path) -> None:
    code, lines = _on_one_pipe(_project(tmp_path, [("loud_sync", 0), ("guarded", 1)]))
    assert code == 0, lines
    start = lines.index('→ guarded {"n": 1}')
    denied = next(i for i, line in enumerate(lines) if line.startswith("toolrun: denied guarded"))
    refused = next(i for i, line in enumerate(lines) if line.startswith("✗ guarded"))
    assert start < denied < refused, lines


def test_a_tool_that_kills_the_process_leaves_every_call_line_before_it(tmp_path: Path) -> None:
    code, lines = _on_one_pipe(_project(tmp_path, [("loud_sync", 0), ("loud_sync", 1), ("fatal", 2)]))
    assert code == -9, lines
    assert lines.index('→ fatal {"n": 2}') < lines.index("dying 2"), lines
    assert {'→ loud_sync {"n": 0}', '→ loud_sync {"n": 1}'} <= set(lines)
