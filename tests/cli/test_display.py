"""The terminal display and the JSON Lines transcript, fed the events a run produces."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toolrun.cli.display import TerminalDisplay, summary_line
from toolrun.core.messages import Message, ModelResponse, TextPart, ToolCall, Usage
from toolrun.core.secrets import Redactor, redacting, register_secret
from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
from toolrun.loop.runner import ObserverGroup, RunObserver
from toolrun.runlog.transcript_log import TranscriptLog

ROOT = Path(__file__).resolve().parents[2]


def answer(text: str | None, *calls: ToolCall, usage: Usage | None = None) -> ModelResponse:
    parts: list = [TextPart(text)] if text else []
    parts.extend(calls)
    return ModelResponse(Message("assistant", parts), "tool_calls" if calls else "stop", usage or Usage(10, 5, 1))


CALL = ToolCall("call_1", "get_flower_inventory", {"city": "北京"}, '{"city": "北京"}', "call_1")


def test_streamed_text_goes_to_stdout_as_it_arrives_and_calls_to_stderr():
    out, err = io.StringIO(), io.StringIO()
    display = TerminalDisplay(info_out=err, text_out=out)
    display.on_text_delta("北京的")
    assert out.getvalue() == "北京的"  # written before the answer is complete
    display.on_text_delta("库存")
    display.on_model_response(0, answer("北京的库存", CALL))  # not printed twice
    display.on_tool_call_start(CALL)
    display.on_tool_call_end(ToolCallRecord("call_1", "get_flower_inventory", {"city": "北京"}, "玫瑰: 100", False, 3))
    assert out.getvalue() == "北京的库存\n"
    assert err.getvalue().splitlines() == ['→ get_flower_inventory {"city": "北京"}', "← get_flower_inventory 3 ms: 玫瑰: 100"]


def test_non_streamed_text_is_printed_at_the_end_of_the_turn():
    out, err = io.StringIO(), io.StringIO()
    display = TerminalDisplay(info_out=err, text_out=out)
    display.on_model_response(0, answer("第一行\n第二行"))
    assert out.getvalue() == "第一行\n第二行\n"


def test_json_mode_prints_no_text_and_errors_are_marked():
    err = io.StringIO()
    display = TerminalDisplay(info_out=err, text_out=None)
    display.on_text_delta("hidden")
    display.on_model_response(0, answer("hidden"))
    display.on_tool_call_end(ToolCallRecord("c", "t", {}, "arguments are wrong:\nline two", True, 0))
    assert err.getvalue() == "✗ t 0 ms: error: arguments are wrong: ⏎ line two\n"


def test_summary_line_counts_turns_calls_and_tokens():
    turns = [TurnRecord("tool_calls", None, Usage(95, 67, 1)), TurnRecord("stop", "x", Usage(235, 90, 1))]
    assert summary_line(turns, 3, Usage(330, 157, 2), "replay") == "2 turns · 3 tool calls · 330 in / 157 out tokens · replay"
    assert summary_line(turns[:1], 1, Usage(1, 1, 1), "live") == "1 turn · 1 tool call · 1 in / 1 out tokens · live"


def test_display_never_prints_a_secret():
    register_secret("sk-display-secret-123")
    err = io.StringIO()
    TerminalDisplay(info_out=err, text_out=None).on_tool_call_end(
        ToolCallRecord("c", "t", {}, "token sk-display-secret-123", False, 1))
    assert "sk-display-secret-123" not in err.getvalue()


def _call_lines(*, secret: str | None) -> list[str]:
    """The lines of awkward calls (escapes, newlines, a long result, unparsed arguments, an error), shown in a
    run of their own that holds ``secret`` (None: no secret at all)."""
    err = io.StringIO()
    with redacting(Redactor([secret] if secret else [])):
        display = TerminalDisplay(info_out=err, text_out=None)
        display.on_tool_call_start(ToolCall("c1", "get\x1b[2Jstock", {"city": "北京城\u202e", "n": [1, None, True]}, "{}"))
        display.on_tool_call_start(ToolCall("c2", "get_stock", None, '{"city": "北\r\n'))
        display.on_tool_call_end(ToolCallRecord("c1", "get_stock", {}, "玫瑰: 100\r\n郁金香\x07: 150 " + "花" * 120, False, 12))
        display.on_tool_call_end(ToolCallRecord("c2", "get_stock", {}, "bad arguments\nline two", True, 0))
    return err.getvalue().splitlines()


def test_call_lines_are_the_same_whether_or_not_the_run_holds_a_secret():
    # A run without secrets takes a shorter way to the same line: every piece escaped, cut and marked alike.
    plain = _call_lines(secret=None)
    assert plain == _call_lines(secret="sk-nowhere-in-these-lines")
    assert plain[0] == '→ get\\x1b[2Jstock {"city": "北京城\\u202e", "n": [1, null, true]}'
    assert plain[1] == '→ get_stock {"city": "北 ⏎ '
    assert plain[2].startswith("← get_stock 12 ms: 玫瑰: 100 ⏎ 郁金香\\x07: 150 花") and plain[2].endswith("花…")
    assert len(plain[2]) == len("← get_stock 12 ms: ") + 100
    assert plain[3] == "✗ get_stock 0 ms: error: bad arguments ⏎ line two"


def test_call_lines_never_show_a_secret_in_a_name_arguments_or_result():
    lines = "\n".join(_call_lines(secret="北京城\u202e"))
    assert "北京" not in lines and lines.count("***") == 1
    lines = "\n".join(_call_lines(secret="ms: 玫瑰"))  # across the duration and the result's text
    assert "玫瑰" not in lines and "← get_stock 12 ***: 100" in lines
    lines = "\n".join(_call_lines(secret="\x1b[2Jstock"))
    assert "2Jstock" not in lines and lines.startswith("→ get***")


def test_observer_group_passes_every_event_in_order():
    seen: list[str] = []

    class Recorder(RunObserver):
        def __init__(self, name: str):
            self.name = name

        def on_text_delta(self, text: str) -> None:
            seen.append(f"{self.name}:{text}")

        def on_turn_end(self, turn: TurnRecord) -> None:
            seen.append(f"{self.name}:end")

    group = ObserverGroup(Recorder("a"), None, Recorder("b"))
    group.on_text_delta("x")
    group.on_turn_end(TurnRecord("stop", None, Usage()))
    group.on_tool_call_start(CALL)  # a no-op in both
    assert seen == ["a:x", "b:x", "a:end", "b:end"]


def test_transcript_log_writes_one_flushed_event_per_line(tmp_path: Path):
    path = tmp_path / "run.jsonl"
    log = TranscriptLog(path)
    assert not path.exists()  # created when the run starts, not before: bad input leaves no empty file
    log.on_run_start(recipe="inventory", model="openai:gpt-4o-mini", mode="replay")
    log.on_model_response(0, answer(None, CALL, usage=Usage(95, 67, 1)))
    # Read back while the log is still open: nothing waits for close() to reach the file.
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["run_start", "model_response"]
    assert "北京" in lines[1]
    log.on_tool_call_end(ToolCallRecord("call_1", "get_flower_inventory", {"city": "北京"}, "玫瑰: 100", False, 3))
    result = RunResult("done", "stop", Usage(95, 67, 1), [], [], recipe="inventory", model="openai:gpt-4o-mini",
                       mode="live")
    log.on_run_end(result)
    log.close()
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    times = [event.pop("at") for event in events]  # when each line was written: the timeline of toolrun view
    assert all(isinstance(t, float) for t in times) and times == sorted(times)
    started, ended = events[2].pop("started_at"), events[2].pop("ended_at")
    assert ended - started == pytest.approx(0.003, abs=2e-6) and times[1] <= ended <= times[2]
    assert events[1]["turn"] == 1
    assert events[1]["tool_calls"] == [{"id": "call_1", "name": "get_flower_inventory", "arguments": {"city": "北京"}}]
    assert events[2] == {"event": "tool_call", "turn": 1, "id": "call_1", "name": "get_flower_inventory",
                         "arguments": {"city": "北京"}, "result": "玫瑰: 100", "is_error": False, "duration_ms": 3}
    assert events[3] == {"event": "run_end", **result.to_json()}
    assert events[3]["final"] == "done" and events[3]["stop_reason"] == "stop" and events[3]["mode"] == "live"


def _shipped_tools_backed_by(tmp_path: Path, module: str, source: str) -> Path:
    """A tools.d holding the shipped flowers.yaml, its python backend moved to ``module``.py (``source``)."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    shipped = (ROOT / "tools.d" / "flowers.yaml").read_text(encoding="utf-8")
    (tools / "flowers.yaml").write_text(shipped.replace("flowers.py:", f"{module}.py:"), encoding="utf-8")
    (tools / f"{module}.py").write_text(source, encoding="utf-8")
    return tools


def _inventory_recipe_command(tools: Path, transcript: Path) -> list[str]:
    """The installed toolrun playing the shipped inventory recipe with ``tools``, logging to ``transcript``."""
    return [str(Path(sys.executable).parent / "toolrun"), "recipe", "recipes/inventory.yaml", "--tools-dir", str(tools),
            "--transcript", str(transcript)]


def _env_without_providers() -> dict[str, str]:
    """This environment without any provider key or base URL variable."""
    return {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}


def test_a_crash_mid_run_keeps_what_the_transcript_already_holds(tmp_path: Path):
    # The tool kills the whole toolrun process: no finally block, no atexit, nothing runs.
    tools = _shipped_tools_backed_by(tmp_path, "crash",
                                     "import os, signal\n\ndef get_flower_inventory(city):\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    transcript = tmp_path / "crash.jsonl"
    completed = subprocess.run(_inventory_recipe_command(tools, transcript),
                               cwd=ROOT, env=_env_without_providers(), capture_output=True, text=True, timeout=60)
    assert completed.returncode == -signal.SIGKILL
    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in events] == ["run_start", "notice", "model_response"]
    assert len(events[2]["tool_calls"]) == 3


def test_ctrl_c_exits_130_and_the_transcript_says_so(tmp_path: Path):
    tools = _shipped_tools_backed_by(tmp_path, "slow",
                                     "import time\n\ndef get_flower_inventory(city):\n    time.sleep(2)\n    return 'x'\n")
    transcript = tmp_path / "int.jsonl"
    process = subprocess.Popen(_inventory_recipe_command(tools, transcript),
                               cwd=ROOT, env=_env_without_providers(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    started = 0
    while started < 3:  # wait until the three calls are running
        line = process.stderr.readline()
        assert line, "toolrun ended before its calls started"
        started += line.startswith("→ get_flower_inventory")
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "interrupted" in rest and "Traceback" not in rest
    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert [e["event"] for e in events][-2:] == ["model_response", "interrupted"]


def test_ctrl_c_with_json_still_prints_the_run_as_far_as_it_got(tmp_path: Path):
    """--json promises one document: an interrupted run's holds its turns so far and says it was interrupted."""
    tools = _shipped_tools_backed_by(tmp_path, "slow", "import time\n\ndef get_flower_inventory(city):\n"
                                     "    if city != '北京':\n        time.sleep(5)\n    return '玫瑰: 100'\n")
    command = [*_inventory_recipe_command(tools, tmp_path / "int.jsonl"), "--json"]
    process = subprocess.Popen(command, cwd=ROOT, env=_env_without_providers(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen: list[str] = []
    while not (sum(line.startswith("→ get_flower_inventory") for line in seen) == 3
               and any(line.startswith("← get_flower_inventory") for line in seen)):
        line = process.stderr.readline()  # the three calls started, 北京's finished
        assert line, "toolrun ended before its calls started"
        seen.append(line)
    process.send_signal(signal.SIGINT)
    out, rest = process.communicate(timeout=30)
    assert process.returncode == 130 and "Traceback" not in rest
    document = json.loads(out)
    assert (document["recipe"], document["mode"], document["stop_reason"]) == ("inventory", "replay", "interrupted")
    assert document["error"] == "the run was interrupted (Ctrl-C) before it finished" and document["final"] is None
    assert document["usage"]["requests"] == 1 and document["divergences"] == []
    (turn,) = document["turns"]
    calls = {call["arguments"]["city"]: call for call in turn["tool_calls"]}
    assert list(calls) == ["北京", "上海", "深圳"]  # in the order the model asked
    assert (calls["北京"]["result"], calls["北京"]["is_error"]) == ("玫瑰: 100", False)
    for city in ("上海", "深圳"):
        assert calls[city]["is_error"] and "interrupted before this call finished" in calls[city]["result"]
