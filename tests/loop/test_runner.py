"""The loop against a scripted offline model, with real tools loaded from YAML in tmp_path."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import textwrap
from itertools import pairwise
from pathlib import Path

import pytest

from toolrun.backends.base import CallContext
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.core.errors import ProviderError, UserError
from toolrun.core.messages import Message, ModelResponse, TextPart, ToolCall, Usage
from toolrun.core.secrets import register_secret
from toolrun.core.tool import Tool
from toolrun.loop.results import dumps
from toolrun.loop.runner import RunObserver, RunSettings, ToolCallRecord, TurnRecord, run_conversation
from toolrun.providers.scripted import ScriptedModel

TOOLS_PY = '''
import json, threading, time

LOG = {log!r}
MEETING = threading.Barrier(4, timeout=10)  # four calls get through only when all four are running at once

def _log(name, started):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps({{"name": name, "start": started, "end": time.monotonic()}}) + "\\n")

def get_flower_inventory(city):
    started = time.monotonic()
    time.sleep(0.05)
    _log("get_flower_inventory", started)
    return {{"北京": "玫瑰: 100, 郁金香: 150", "上海": "玫瑰: 80", "深圳": "玫瑰: 60"}}[city]

def slow(seconds=0.5):
    started = time.monotonic()
    time.sleep(seconds)
    _log("slow", started)
    return "slept"

def exclusive(seconds=0.2):
    started = time.monotonic()
    time.sleep(seconds)
    _log("exclusive", started)
    return "done alone"

def meet():
    MEETING.wait()
    return "met"

def explode():
    raise RuntimeError("the flower database is down")

def leak():
    return "token is s3cr3t-flower-token"
'''

TOOLS_YAML = '''
tools:
  - name: get_flower_inventory
    description: >-
      Returns the current flower stock of one city. Use it when asked about stock or
      inventory; do not use it for prices.
    parameters:
      type: object
      properties:
        city: {type: string, enum: [北京, 上海, 深圳], description: City name}
      required: [city]
      additionalProperties: false
    backend: {python: "tools.py:get_flower_inventory"}
  - name: slow
    description: Sleeps for a while and says so. Use it to test concurrency; never in production.
    parameters:
      type: object
      properties:
        seconds: {type: number, description: How long to sleep}
    backend: {python: "tools.py:slow"}
  - name: exclusive
    description: Sleeps alone; must never overlap another call. Use it to test barriers only.
    sequential: true
    parameters:
      type: object
      properties:
        seconds: {type: number, description: How long to sleep}
    backend: {python: "tools.py:exclusive"}
  - name: meet
    description: Waits until four calls are running together, then says so. Use it to test concurrency; never otherwise.
    parameters: {type: object, properties: {}}
    backend: {python: "tools.py:meet"}
  - name: explode
    description: Always fails with an exception. Use it to test error results; never otherwise.
    parameters: {type: object, properties: {}}
    backend: {python: "tools.py:explode"}
  - name: leak
    description: Returns a text containing a secret. Use it to test redaction; never otherwise.
    parameters: {type: object, properties: {}}
    backend: {python: "tools.py:leak"}
'''


@pytest.fixture
def tool_log(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


@pytest.fixture
def tools(tmp_path: Path, tool_log: Path) -> dict[str, Tool]:
    directory = tmp_path / "tools.d"
    directory.mkdir()
    (directory / "tools.py").write_text(TOOLS_PY.format(log=str(tool_log)), encoding="utf-8")
    (directory / "flowers.yaml").write_text(textwrap.dedent(TOOLS_YAML), encoding="utf-8")
    return load_catalog_or_raise(directory).tools


def intervals(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def overlaps(a: dict, b: dict) -> bool:
    return a["start"] < b["end"] and b["start"] < a["end"]


def run(model: ScriptedModel, tools: list[Tool], settings: RunSettings | None = None, **kwargs):
    return asyncio.run(run_conversation(
        model, tools, system=kwargs.pop("system", None),
        messages=kwargs.pop("messages", [Message("user", [TextPart("北京、上海和深圳的鲜花库存是多少?")])]),
        settings=settings or RunSettings(), context=CallContext(environ={}), **kwargs,
    ))


def tool_message(request) -> Message:
    message = request.messages[-1]
    assert message.role == "tool"
    return message


def test_three_cities_in_one_turn_results_in_call_order_with_their_ids(tools, tool_log):
    model = ScriptedModel([
        ScriptedModel.calls([("get_flower_inventory", {"city": "北京"}, "call_bj"),
                             ("get_flower_inventory", {"city": "上海"}, "call_sh"),
                             ("get_flower_inventory", {"city": "深圳"}, "call_sz")]),
        ScriptedModel.text("北京玫瑰100, 上海玫瑰80, 深圳玫瑰60"),
    ])
    result = run(model, [tools["get_flower_inventory"]])

    assert result.stop_reason == "stop" and result.error is None
    assert result.final == "北京玫瑰100, 上海玫瑰80, 深圳玫瑰60"
    sent = tool_message(model.requests[1])
    assert [(r.call_id, r.content, r.is_error) for r in sent.tool_results] == [
        ("call_bj", "玫瑰: 100, 郁金香: 150", False), ("call_sh", "玫瑰: 80", False), ("call_sz", "玫瑰: 60", False)]
    # the assistant's call message is sent back verbatim before the results
    assert [c.id for c in model.requests[1].messages[-2].tool_calls] == ["call_bj", "call_sh", "call_sz"]
    calls = intervals(tool_log)
    assert len(calls) == 3
    assert overlaps(calls[0], calls[1]) or overlaps(calls[1], calls[2]), "the three calls ran one after another"


def test_four_calls_of_one_turn_run_concurrently(tools):
    # Each call waits at a four-party barrier: one after another, the first would wait alone and break it.
    model = ScriptedModel([ScriptedModel.calls([("meet", {})] * 4), "done"])
    result = run(model, [tools["meet"]])
    assert [(c.result, c.is_error) for c in result.tool_calls] == [("met", False)] * 4


def test_a_sequential_tool_never_overlaps_another_call(tools, tool_log):
    script = [("slow", {"seconds": 0.05}), ("slow", {"seconds": 0.05}), ("exclusive", {"seconds": 0.05}),
              ("slow", {"seconds": 0.05}), ("slow", {"seconds": 0.05})]
    model = ScriptedModel([ScriptedModel.calls(script), "done"])
    result = run(model, [tools["slow"], tools["exclusive"]])

    assert [c.name for c in result.tool_calls] == [name for name, _ in script]
    calls = intervals(tool_log)
    alone = [c for c in calls if c["name"] == "exclusive"]
    others = [c for c in calls if c["name"] == "slow"]
    assert len(alone) == 1 and len(others) == 4
    assert not any(overlaps(alone[0], other) for other in others)
    before = sorted(others, key=lambda c: c["start"])[:2]
    assert overlaps(before[0], before[1]), "the calls around the barrier should still run together"
    assert all(o["end"] <= alone[0]["start"] or o["start"] >= alone[0]["end"] for o in others)


def test_parallel_false_serialises_every_call(tools, tool_log):
    model = ScriptedModel([ScriptedModel.calls([("slow", {"seconds": 0.05})] * 3), "done"])
    run(model, [tools["slow"]], RunSettings(parallel=False))
    calls = sorted(intervals(tool_log), key=lambda c: c["start"])
    assert len(calls) == 3
    assert not any(overlaps(a, b) for a, b in pairwise(calls))
    assert model.requests[0].settings.parallel_tool_calls is False


def test_bad_calls_become_error_results_and_the_run_goes_on(tools):
    model = ScriptedModel([
        ScriptedModel.calls([
            ("get_flower_inventry", {"city": "北京"}, "c1"),        # unknown tool
            ("get_flower_inventory", '{"city": 北京}', "c2"),       # malformed JSON
            ("get_flower_inventory", {"city": "广州"}, "c3"),       # schema violation
            ("explode", {}, "c4"),                                  # tool exception
            ("get_flower_inventory", {"city": "北京"}, "c5"),       # fine
        ]),
        ScriptedModel.text("北京有玫瑰 100"),
    ])
    result = run(model, [tools["get_flower_inventory"], tools["explode"]])

    assert result.stop_reason == "stop" and result.final == "北京有玫瑰 100"
    results = {r.call_id: r for r in tool_message(model.requests[1]).tool_results}
    assert [r.is_error for r in results.values()] == [True, True, True, True, False]
    assert "unknown tool 'get_flower_inventry'" in results["c1"].content
    assert "did you mean 'get_flower_inventory'" in results["c1"].content
    assert "explode" in results["c1"].content  # names the available tools
    assert "not valid JSON" in results["c2"].content and '{"city": 北京}' in results["c2"].content
    assert "city" in results["c3"].content and "广州" in results["c3"].content
    assert "the flower database is down" in results["c4"].content
    assert results["c5"].content == "玫瑰: 100, 郁金香: 150"
    # the transcript keeps the raw text of arguments that did not parse
    assert result.tool_calls[1].arguments == '{"city": 北京}'


def test_arguments_cut_off_by_the_length_limit_are_reported_as_such(tools):
    model = ScriptedModel([
        ScriptedModel.calls([("get_flower_inventory", '{"city": "北')], stop_reason="length"),
        "ok",
    ])
    result = run(model, [tools["get_flower_inventory"]])
    message = result.tool_calls[0].result
    assert result.tool_calls[0].is_error
    assert "cut off by the output limit" in message and "length" in message


def test_repeated_empty_and_missing_provider_ids_are_made_unique_for_the_run(tools):
    model = ScriptedModel([
        ScriptedModel.calls([("get_flower_inventory", {"city": "北京"}, "0"),
                             ("get_flower_inventory", {"city": "上海"}, "0"),
                             ("get_flower_inventory", {"city": "深圳"}, "")]),
        ScriptedModel.calls([("get_flower_inventory", {"city": "北京"}, "0"),
                             ("get_flower_inventory", {"city": "上海"})]),
        "done",
    ])
    result = run(model, [tools["get_flower_inventory"]])

    ids = [c.id for c in result.tool_calls]
    assert len(set(ids)) == 5 and all(ids)
    assert ids[0] == "0", "a first, non-empty provider id is kept"
    first_turn = model.requests[1].messages[-2].tool_calls
    assert [c.provider_id for c in first_turn] == ["0", "0", ""], "what the provider sent is kept"
    stock = {"北京": "玫瑰: 100, 郁金香: 150", "上海": "玫瑰: 80", "深圳": "玫瑰: 60"}
    for request in model.requests[1:]:  # each result carries the (rewritten) id of its own call
        calls, results = request.messages[-2].tool_calls, request.messages[-1].tool_results
        assert [c.id for c in calls] == [r.call_id for r in results]
        assert [stock[c.arguments["city"]] for c in calls] == [r.content for r in results]


def test_a_limit_of_one_turn_is_said_in_the_singular(tools):
    model = ScriptedModel.from_function(lambda request: ScriptedModel.calls([("get_flower_inventory", {"city": "北京"})]))
    result = run(model, [tools["get_flower_inventory"]], RunSettings(max_turns=1))
    assert result.error.startswith("stopped after 1 model request without a final answer (max_turns is 1)")


def test_max_turns_stops_a_model_that_keeps_calling(tools):
    model = ScriptedModel.from_function(
        lambda request: ScriptedModel.calls([("get_flower_inventory", {"city": "北京"})]))
    result = run(model, [tools["get_flower_inventory"]], RunSettings(max_turns=3))
    assert result.stop_reason == "max_turns"
    assert len(model.requests) == 3 and len(result.turns) == 3
    assert "max_turns" in result.error and "3" in result.error
    assert result.usage.requests == 3


def test_consecutive_failing_calls_stop_the_run(tools):
    model = ScriptedModel.from_function(lambda request: ScriptedModel.calls([("explode", {})]))
    result = run(model, [tools["explode"]], RunSettings(max_consecutive_failures=3))
    assert result.stop_reason == "error"
    assert result.error.startswith("stopped after 3 consecutive failing tool calls; last: explode")
    assert "the flower database is down" in result.error
    assert len(result.turns) == 3


def test_one_turn_of_many_failing_calls_is_shown_to_the_model_before_the_limit_applies(tools):
    # Six bad calls in one answer: the model has not yet seen a single error, so it gets to fix them.
    turn = [("explode", {})] * 3 + [("no_such_tool", {}), ("get_flower_inventory", {"city": "巴黎"}), ("explode", {})]
    model = ScriptedModel([ScriptedModel.calls(turn), "done"])
    result = run(model, list(tools.values()), RunSettings(max_consecutive_failures=5))
    assert (result.stop_reason, result.final, result.error) == ("stop", "done", None)
    assert len(result.turns[0].tool_calls) == 6 and all(c.is_error for c in result.turns[0].tool_calls)


def test_failures_that_go_on_after_the_model_saw_them_stop_the_run(tools):
    turn = [("explode", {})] * 6
    model = ScriptedModel([ScriptedModel.calls(turn), ScriptedModel.calls([("explode", {})]), "done"])
    result = run(model, list(tools.values()), RunSettings(max_consecutive_failures=5))
    assert result.stop_reason == "error" and len(result.turns) == 2
    assert result.error.startswith("stopped after 7 consecutive failing tool calls; last: explode")


def test_a_success_resets_the_failure_count(tools):
    turn = [("explode", {}), ("get_flower_inventory", {"city": "北京"})]
    model = ScriptedModel([ScriptedModel.calls(turn)] * 4 + ["done"])
    result = run(model, list(tools.values()), RunSettings(max_consecutive_failures=2))
    assert result.stop_reason == "stop" and result.final == "done"


def test_a_provider_error_mid_run_keeps_the_turns_done(tools):
    model = ScriptedModel([
        ScriptedModel.calls([("get_flower_inventory", {"city": "北京"}, "call_1")]),
        ProviderError("HTTP 500 from the provider", status=500),
    ])
    result = run(model, [tools["get_flower_inventory"]])
    assert result.stop_reason == "error" and "HTTP 500" in result.error
    assert len(result.turns) == 1 and result.turns[0].tool_calls[0].result == "玫瑰: 100, 郁金香: 150"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]


def test_tool_choice_goes_into_the_first_request_then_auto(tools):
    model = ScriptedModel([ScriptedModel.calls([("get_flower_inventory", {"city": "北京"})]), "done"])
    run(model, [tools["get_flower_inventory"]], RunSettings(tool_choice="get_flower_inventory", temperature=0, max_tokens=99))
    first, second = (r.settings for r in model.requests)
    assert (first.tool_choice, first.temperature, first.max_tokens) == ("get_flower_inventory", 0, 99)
    assert second.tool_choice == "auto"
    assert [d.name for d in model.requests[0].tools] == ["get_flower_inventory"]


def test_tool_choice_none_stays_none(tools):
    model = ScriptedModel([ScriptedModel.calls([("get_flower_inventory", {"city": "北京"})]), "done"])
    run(model, [tools["get_flower_inventory"]], RunSettings(tool_choice="none"))
    assert [r.settings.tool_choice for r in model.requests] == ["none", "none"]


def test_tool_choice_required_with_no_tools_is_a_user_error():
    with pytest.raises(UserError, match="tool_choice 'required' makes the model call a tool, but no tools are selected"):
        run(ScriptedModel(["x"]), [], RunSettings(tool_choice="required"))


def test_tool_choice_naming_no_tool_is_a_user_error(tools):
    with pytest.raises(UserError, match="tool_choice 'get_weather'"):
        run(ScriptedModel(["x"]), [tools["get_flower_inventory"]], RunSettings(tool_choice="get_weather"))


def test_a_cut_off_answer_ends_with_length(tools):
    result = run(ScriptedModel([ScriptedModel.text("北京有玫", stop_reason="length")]), [])
    assert result.stop_reason == "length" and result.final == "北京有玫" and "max_tokens" in result.error


def test_system_and_history_reach_the_model(tools):
    history = [Message("user", [TextPart("hi")]), Message("assistant", [TextPart("hello")]),
               Message("user", [TextPart("stock?")])]
    model = ScriptedModel(["fine"])
    result = run(model, [], system="You answer questions about our flower shops.", messages=history)
    assert model.requests[0].system == "You answer questions about our flower shops."
    assert [m.text for m in model.requests[0].messages] == ["hi", "hello", "stock?"]
    assert result.final == "fine"


class Recorder(RunObserver):
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def on_text_delta(self, text: str) -> None:
        self.events.append(("delta", text))

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        self.events.append(("response", turn_index))

    def on_tool_call_start(self, call: ToolCall) -> None:
        self.events.append(("start", call.id))

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        self.events.append(("end", record.id, record.duration_ms))

    def on_turn_end(self, turn: TurnRecord) -> None:
        self.events.append(("turn", turn.stop_reason))


def test_observer_sees_deltas_calls_and_turns_in_order(tools):
    recorder = Recorder()
    model = ScriptedModel([ScriptedModel.calls([("slow", {"seconds": 0.05}, "a")], text="Let me check."),
                           "All done now."])
    run(model, [tools["slow"]], observer=recorder)
    kinds = [e[0] for e in recorder.events]
    assert "".join(e[1] for e in recorder.events if e[0] == "delta") == "Let me check.All done now."
    assert kinds.index("start") < kinds.index("end") < kinds.index("turn")
    assert ("response", 0) in recorder.events and ("response", 1) in recorder.events
    end = next(e for e in recorder.events if e[0] == "end")
    assert end[1] == "a" and end[2] >= 40
    assert kinds.count("turn") == 2


def test_no_deltas_without_streaming(tools):
    recorder = Recorder()
    run(ScriptedModel(["hello there"]), [], RunSettings(stream=False), observer=recorder)
    assert not [e for e in recorder.events if e[0] == "delta"]


def test_transcript_document_has_the_contract_shape(tools):
    usage1, usage2 = Usage(95, 67, 1), Usage(235, 90, 1)
    model = ScriptedModel([
        ScriptedModel.calls([("get_flower_inventory", {"city": "北京"}, "call_1"),
                             ("get_flower_inventory", "{oops", "call_2")], usage=usage1),
        ScriptedModel.text("北京: 玫瑰 100", usage=usage2),
    ])
    result = run(model, [tools["get_flower_inventory"]])
    document = dataclasses.replace(result, recipe="inventory", model="openai:gpt-4o-mini", mode="replay").to_json()

    assert list(document) == ["recipe", "model", "mode", "final", "stop_reason", "usage", "turns"]
    assert document["mode"] == "replay" and document["final"] == "北京: 玫瑰 100"
    assert document["usage"] == {"input_tokens": 330, "output_tokens": 157, "requests": 2}
    first = document["turns"][0]
    assert first["stop_reason"] == "tool_calls" and first["text"] is None
    assert first["usage"] == {"input_tokens": 95, "output_tokens": 67}
    call = first["tool_calls"][0]
    assert set(call) == {"id", "name", "arguments", "result", "is_error", "duration_ms"}
    assert call["arguments"] == {"city": "北京"} and call["id"] == "call_1"
    assert first["tool_calls"][1]["arguments"] == "{oops" and first["tool_calls"][1]["is_error"] is True
    text = dumps(document)
    assert "北京" in text and "\\u5317" not in text
    json.loads(text)


def test_secrets_never_reach_the_model_or_the_transcript(tools):
    register_secret("s3cr3t-flower-token")
    model = ScriptedModel([ScriptedModel.calls([("leak", {})]), "done"])
    result = run(model, [tools["leak"]])
    sent = tool_message(model.requests[1]).tool_results[0].content
    assert "s3cr3t-flower-token" not in sent
    text = dumps(dataclasses.replace(result, recipe="r", model="m:x", mode="live").to_json())
    assert "s3cr3t-flower-token" not in text and "token is" in text


# ---- more calls than max_concurrency: workers take the calls in turn

SEEN: contextvars.ContextVar[int | None] = contextvars.ContextVar("seen", default=None)
CALL_SECONDS = 0.05  # each call of the executor below


async def _remembering_executor(tool, call, context, approver, *, turn=()):
    """An executor whose calls each set a context variable, and swallow a cancellation."""
    from toolrun.loop.execution import ToolOutcome

    seen = SEEN.get()
    SEEN.set(call.arguments["city"])
    try:
        await asyncio.sleep(CALL_SECONDS)
    except asyncio.CancelledError:
        return ToolOutcome(f"interrupted, saw {seen}", True, 0)
    return ToolOutcome(f"saw {seen}", False, 0)


def test_calls_beyond_the_slots_do_not_see_each_others_context_variables(tools):
    cities = ["北京", "上海", "深圳"] * 2
    model = ScriptedModel([ScriptedModel.calls([("get_flower_inventory", {"city": c}) for c in cities]), "done"])
    result = run(model, [tools["get_flower_inventory"]], RunSettings(max_concurrency=2), execute=_remembering_executor)
    assert [r.result for r in result.turns[0].tool_calls] == ["saw None"] * 6


def test_a_cancelled_run_starts_no_further_call_even_when_a_call_swallows_the_cancellation(tools):
    started: list[str] = []

    class Starts(RunObserver):
        def on_tool_call_start(self, call: ToolCall) -> None:
            started.append(call.arguments["city"])

    cities = ["北京", "上海", "深圳", "北京", "上海", "深圳"]
    model = ScriptedModel([ScriptedModel.calls([("get_flower_inventory", {"city": c}) for c in cities]), "done"])

    async def cancel_mid_batch() -> None:
        task = asyncio.create_task(run_conversation(
            model, [tools["get_flower_inventory"]], system=None, messages=[Message("user", [TextPart("go")])],
            settings=RunSettings(max_concurrency=2), context=CallContext(environ={}), observer=Starts(),
            execute=_remembering_executor))
        for _ in range(500):  # until both slots have a call running (the calls take CALL_SECONDS each)
            if len(started) >= 2:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(4 * CALL_SECONDS)  # long enough for further calls to start, were any to

    asyncio.run(cancel_mid_batch())
    assert started == ["北京", "上海"]
