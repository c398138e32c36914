"""Text typed where Python's own decoding is narrow reaches the model and the run log as it was typed.

Under ``LC_ALL=C`` with UTF-8 mode off, Python keeps each non-ASCII byte of an argument as a lone
surrogate; with ``PYTHONIOENCODING=ascii`` it cannot read a UTF-8 stdin at all. Both ended the run
with an internal error (the run log cannot store a surrogate). Real processes, the real script path.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ROOT, clean_env
from toolrun.core.text import text_as_sent
from toolrun.runlog import RunLog

SCRIPT = "scripted:recipes/inventory.script.yaml"  # the tool still runs for real
C_LOCALE = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
ASCII_STREAMS = {"PYTHONIOENCODING": "ascii"}


def toolrun(*args: str, tmp_path: Path, narrow: dict[str, str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "toolrun", *args], cwd=ROOT, input=stdin, capture_output=True,
                          timeout=120, env=clean_env(TOOLRUN_LOGS=str(tmp_path / "logs.db"), **narrow))


def logged(tmp_path: Path) -> list[tuple[str, str, list[str]]]:
    """Each run in the log: its command, its prompt and the texts of the user messages the model was sent."""
    with sqlite3.connect(tmp_path / "logs.db") as connection:
        runs = connection.execute("SELECT id, command, prompt FROM runs ORDER BY id").fetchall()
        found = []
        for run_id, command, prompt in runs:
            rows = connection.execute("SELECT content FROM messages WHERE run_id = ? AND role = 'user' ORDER BY seq",
                                      (run_id,)).fetchall()
            texts = [part["text"] for (content,) in rows for part in json.loads(content) if part["type"] == "text"]
            found.append((command, prompt, texts))
    return found


def test_arguments_typed_under_a_c_locale_reach_the_model_and_the_log_as_typed(tmp_path: Path) -> None:
    asked = toolrun("ask", "flowers in Zürich?", "--model", SCRIPT, tmp_path=tmp_path, narrow=C_LOCALE)
    assert asked.returncode == 0, asked.stderr
    played = toolrun("recipe", "recipes/inventory.yaml", "--var", "question=and in Malmö?", "--model", SCRIPT,
                     tmp_path=tmp_path, narrow=C_LOCALE)  # the recipe command's own parse, without click
    assert played.returncode == 0, played.stderr

    assert logged(tmp_path) == [("ask", "flowers in Zürich?", ["flowers in Zürich?"]),
                                ("recipe", None, ["and in Malmö?"])]
    found = toolrun("logs", "search", "Zürich", "--json", tmp_path=tmp_path, narrow=C_LOCALE)
    assert found.returncode == 0, found.stderr
    assert [hit["excerpt"] for hit in json.loads(found.stdout.decode("utf-8"))] == ["flowers in Zürich?"]


@pytest.mark.parametrize(("args", "expected"), [
    (("call", "grüß"), "no tool named 'grüß'"),
    (("tools", "show", "grüß"), "no tool named 'grüß'"),
    (("view", "batch-grüß"), "no runs of batch batch-grüß in the log"),
    (("logs", "list", "--batch", "batch-grüß"), "no runs match"),
    (("logs", "list", "--recipe", "grüß", "--tool", "grüß"), "no runs match"),
])
def test_a_name_typed_under_a_c_locale_is_looked_up_as_typed(args: tuple[str, ...], expected: str,
                                                              tmp_path: Path) -> None:
    RunLog.open(tmp_path / "logs.db").close()  # a log to look in, with no runs
    done = toolrun(*args, tmp_path=tmp_path, narrow=C_LOCALE)  # each ended with an internal error (surrogates)
    assert expected in done.stderr.decode("utf-8"), done.stderr
    assert done.returncode in (0, 2)


def test_a_recipe_s_prompt_typed_under_a_c_locale_reaches_the_model_as_typed(tmp_path: Path) -> None:
    played = toolrun("recipe", "recipes/inventory.yaml", "and in Malmö?", "--model", SCRIPT, tmp_path=tmp_path,
                     narrow=C_LOCALE)  # the recipe command's own parse, without click
    assert played.returncode == 0, played.stderr
    assert logged(tmp_path) == [("recipe", "and in Malmö?", ["and in Malmö?"])]


def test_a_file_name_typed_in_a_chat_under_a_c_locale_names_the_file_as_typed(tmp_path: Path) -> None:
    saved = toolrun("chat", "--model", SCRIPT, tmp_path=tmp_path, narrow=C_LOCALE,
                    stdin=f"grüß dich\n/save {tmp_path / 'grüße.yaml'}\n/exit\n".encode())
    assert saved.returncode == 0, saved.stderr  # the name read as UTF-8 could not be encoded to ASCII
    assert f"saved {tmp_path / 'grüße.yaml'}" in saved.stderr.decode("utf-8")
    assert sorted(path.name for path in tmp_path.glob("grü*")) == ["grüße.script.yaml", "grüße.yaml"]


def test_a_stdin_python_would_read_as_ascii_is_read_as_utf8(tmp_path: Path) -> None:
    chatted = toolrun("chat", "--model", SCRIPT, tmp_path=tmp_path, narrow=ASCII_STREAMS,
                      stdin="grüß dich 🌸\n/exit\n".encode())
    assert chatted.returncode == 0, chatted.stderr
    asked = toolrun("ask", "-", "--model", SCRIPT, tmp_path=tmp_path, narrow=ASCII_STREAMS,
                    stdin=b"caf\xe9 latin-1\n")  # not UTF-8: what cannot be read is marked, not an error
    assert asked.returncode == 0, asked.stderr

    assert [texts for _, _, texts in logged(tmp_path)] == [["grüß dich 🌸"], ["caf\ufffd latin-1"]]


def test_toolrun_s_own_lines_on_an_ascii_stderr_are_utf8_as_click_s_are(tmp_path: Path) -> None:
    done = toolrun("call", "no_such_tool", tmp_path=tmp_path, narrow=ASCII_STREAMS)
    assert done.returncode == 2
    stderr = done.stderr.decode("utf-8")
    assert "tools from tools.d — 0 errors" in stderr and "no tool named 'no_such_tool'" in stderr
    assert "\\u2014" not in stderr


@pytest.mark.parametrize(("argument", "typed"), [
    ("plain ascii", "plain ascii"),
    ("héllo 🌸", "héllo 🌸"),  # a UTF-8 locale decoded it already
    ("h\udcc3\udca9llo", "héllo"),  # a C locale's stand-ins for the bytes of é
    ("caf\udce9", "caf\ufffd"),  # bytes that are not UTF-8
    ("\ud800x", "\ufffdx"),  # a surrogate no decoding made
])
def test_text_as_sent_reads_a_c_locale_s_stand_ins_back_as_utf8(argument: str, typed: str) -> None:
    assert text_as_sent(argument) == typed


ODD_TOOL = """
name: odd_bytes
description: >-
  Returns a file name that is not UTF-8, for the on-call engineer. Use it when asked for odd names; it
  does not change anything.
parameters: {type: object, properties: {}}
backend:
  python: "odd.py:odd"
"""


def odd_bytes_tool(tmp_path: Path, before: str = "") -> Path:
    """A tools folder whose odd_bytes tool returns ``before`` (Python source), "caf" and the byte 0xE9, as Python
    reads a file name that is not UTF-8."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "odd.yaml").write_text(ODD_TOOL, encoding="utf-8")
    (tools / "odd.py").write_text(f'def odd() -> str:\n    return "{before}caf" + b"\\xe9".decode("utf-8", "surrogateescape")\n',
                                  encoding="utf-8")
    return tools


def test_a_lone_surrogate_in_a_result_or_a_path_is_logged_as_its_escape_not_an_internal_error(tmp_path: Path) -> None:
    # Python keeps a byte it cannot decode as a lone surrogate (os.listdir of a latin-1 name, a C locale's
    # argv); sqlite takes only UTF-8, and so does the transcript file: the run ended with an internal error
    tools = odd_bytes_tool(tmp_path)
    script = os.fsencode(tmp_path) + b"/sc\xe9nario.yaml"  # latin-1, not UTF-8
    with open(script, "w", encoding="utf-8") as turns:
        turns.write("- tool_calls: [{name: odd_bytes, arguments: {}}]\n- text: done\n")

    transcript = tmp_path / "run.jsonl"
    done = toolrun("ask", "odd?", "--tools-dir", str(tools), "--model", "scripted:" + os.fsdecode(script),
                   "--transcript", str(transcript), tmp_path=tmp_path, narrow=C_LOCALE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"done\n"
    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert "caf\udce9" in json.dumps(events, ensure_ascii=False)  # each line reads back the very string the tool returned
    with sqlite3.connect(tmp_path / "logs.db") as connection:
        model, = connection.execute("SELECT model FROM runs").fetchone()
        result, = connection.execute("SELECT result FROM tool_calls").fetchone()
        content, = connection.execute("SELECT content FROM messages WHERE role = 'tool'").fetchone()
    assert model.endswith("/sc\\udce9nario.yaml") and result == "caf\\udce9"
    assert json.loads(content)[0]["content"] == "caf\udce9"  # inside JSON the escape is the same string read back


def test_a_chat_in_a_terminal_under_a_c_locale_shows_its_prompt_and_reads_what_is_typed(tmp_path: Path) -> None:
    # input("› ") could not encode its prompt for an ASCII stdout: the chat ended before its first question
    env = clean_env(TOOLRUN_LOGS=str(tmp_path / "logs.db"), **C_LOCALE)
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the chat, in a real terminal
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "toolrun", "chat", "--model", SCRIPT], env)
    screen = bytearray()

    def read_until(marker: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while marker not in screen:
            assert time.monotonic() < deadline, f"{marker!r} did not appear; the screen:\n{screen.decode('utf-8', 'replace')}"
            if select.select([terminal], [], [], 0.1)[0]:
                try:
                    screen.extend(os.read(terminal, 65536))
                except OSError:  # the chat ended: its terminal is gone
                    raise AssertionError(f"the chat ended; the screen:\n{screen.decode('utf-8', 'replace')}") from None

    try:
        read_until("›".encode())
        os.write(terminal, "grüß dich 🌸\r".encode())
        read_until(b"chat so far: 1 answer")
        os.write(terminal, b"/exit\r")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(terminal)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "深圳：向日葵 200" in screen.decode("utf-8")
    assert [texts for _, _, texts in logged(tmp_path)] == [["grüß dich 🌸"]]


def test_a_lone_surrogate_printed_by_click_on_a_strict_stdout_is_its_escape_not_an_internal_error(
        tmp_path: Path) -> None:
    # the ASCII stdout made UTF-8 kept its strict error handler: click, which wrote an ASCII stdout through its
    # own UTF-8 "replace" wrapper, wrote to it as it is, and toolrun call ended with an internal error; so did
    # a strict UTF-8 stdout (a UTF-8 locale's own, as en_US.UTF-8 gives), which no lone surrogate fits either
    tools = odd_bytes_tool(tmp_path)
    for narrow in (ASCII_STREAMS, {"PYTHONIOENCODING": "ascii:strict"}, {"PYTHONIOENCODING": "utf-8:strict"}):
        called = toolrun("call", "odd_bytes", "--tools-dir", str(tools), tmp_path=tmp_path, narrow=narrow)
        assert (called.returncode, called.stdout) == (0, b"caf\\udce9\n"), called.stderr
        as_json = toolrun("call", "odd_bytes", "--json", "--tools-dir", str(tools), tmp_path=tmp_path, narrow=narrow)
        assert json.loads(as_json.stdout)["result"] == "caf\udce9"  # the escape is the same string read back


def test_a_lone_surrogate_goes_out_as_its_byte_in_text_and_as_an_escape_in_json_under_a_c_utf8_locale(
        tmp_path: Path) -> None:
    # A C.UTF-8 locale gives Python a stdout with surrogateescape: text gets the byte the tool read back (a file
    # name a shell can use), but --json printed it raw too, which is not UTF-8, so no JSON reader could read it
    tools = odd_bytes_tool(tmp_path)
    c_utf8 = {"PYTHONIOENCODING": "utf-8:surrogateescape"}
    called = toolrun("call", "odd_bytes", "--tools-dir", str(tools), tmp_path=tmp_path, narrow=c_utf8)
    assert (called.returncode, called.stdout) == (0, b"caf\xe9\n"), called.stderr
    as_json = toolrun("call", "odd_bytes", "--json", "--tools-dir", str(tools), tmp_path=tmp_path, narrow=c_utf8)
    assert json.loads(as_json.stdout.decode("utf-8"))["result"] == "caf\udce9"  # the same string read back


def test_a_lone_surrogate_no_byte_stands_for_is_escaped_on_a_surrogateescape_stdout(tmp_path: Path) -> None:
    # A C or C.UTF-8 locale gives stdout surrogateescape, which writes \udc80-\udcff as their bytes but no other
    # lone surrogate: "\ud800" from a JSON row or a tool's JSON ended toolrun call and toolrun logs with an internal error
    tools = odd_bytes_tool(tmp_path, before="a\\ud800b ")
    narrow = {"PYTHONIOENCODING": "utf-8:surrogateescape"}
    called = toolrun("call", "odd_bytes", "--tools-dir", str(tools), tmp_path=tmp_path, narrow=narrow)
    assert (called.returncode, called.stdout) == (0, b"a\\ud800b caf\xe9\n"), called.stderr  # the byte stays a byte
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls: [{name: odd_bytes, arguments: {}}]\n- text: done\n", encoding="utf-8")
    asked = toolrun("ask", "odd?", "--tools-dir", str(tools), "--model", f"scripted:{script}", tmp_path=tmp_path,
                    narrow=narrow)
    assert asked.returncode == 0, asked.stderr
    for command in (["logs", "show", "1"], ["logs", "show", "1", "--json"], ["logs", "--json"]):
        shown = toolrun(*command, tmp_path=tmp_path, narrow=narrow)
        assert shown.returncode == 0, (command, shown.stderr)
        assert b"internal error" not in shown.stderr
    assert json.loads(shown.stdout)[0]["calls"] == 1

