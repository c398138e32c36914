"""The context window: long tool loops and chats whose every request fits ``settings.context``.

The runner is real, the tool a real python backend returning 20 KB, the model scripted; each
request the model got is checked: under the limit by the estimate, and well-formed (it starts
with a question, every call has its result right after it, every result its call).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from toolrun.backends.base import CallContext
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.core.messages import Message, ModelRequest, TextPart, ToolCall, Usage
from toolrun.core.tool import Tool
from toolrun.loop.context_estimate import estimate_text
from toolrun.loop.context_settings import ContextSettings
from toolrun.loop.context_window import ContextEvent, ContextWindow, placeholder
from toolrun.loop.execution import ToolOutcome
from toolrun.loop.runner import RunObserver, RunSettings, run_conversation
from toolrun.providers.anthropic import AnthropicProvider
from toolrun.providers.openai_chat import OpenAIChatProvider
from toolrun.providers.scripted import ScriptedModel

RESULT_CHARS = 20_000
LIMIT = 8_000

BIG_TOOL_PY = """\
def read_page(page):
    line = f"page {page}: " + "lorem ipsum dolor sit amet " * 3 + "\\n"
    return (line * (20_000 // len(line) + 1))[:20_000]
"""
BIG_TOOL_YAML = """\
tools:
  - name: read_page
    description: Returns one page (20 KB of text) of the long document the user asks about.
    parameters:
      type: object
      properties: {page: {type: integer, description: "Page number, from 1"}}
      required: [page]
    backend: {python: "pages.py:read_page"}
"""


@pytest.fixture(scope="module")
def read_page(tmp_path_factory: pytest.TempPathFactory) -> Tool:
    folder = tmp_path_factory.mktemp("pages")
    (folder / "pages.py").write_text(BIG_TOOL_PY, encoding="utf-8")
    (folder / "pages.yaml").write_text(BIG_TOOL_YAML, encoding="utf-8")
    return load_catalog_or_raise(folder).tools["read_page"]


def write_pages_recipe(folder: Path, *, pages: int, limit: int) -> Path:
    """A recipe in ``folder`` whose scripted model reads ``pages`` pages, then answers, under ``limit`` tokens."""
    tools = folder / "tools.d"
    tools.mkdir()
    (tools / "pages.py").write_text(BIG_TOOL_PY, encoding="utf-8")
    (tools / "pages.yaml").write_text(BIG_TOOL_YAML, encoding="utf-8")
    turns = [f"- tool_calls: [{{name: read_page, arguments: {{page: {page}}}}}]" for page in range(1, pages + 1)]
    (folder / "turns.yaml").write_text("\n".join([*turns, "- text: lorem ipsum, every page"]) + "\n", encoding="utf-8")
    path = folder / "pages.yaml"
    path.write_text("model: scripted:turns.yaml\nmessages: [{user: read it all}]\n"
                    f"settings: {{context: {{max_input_tokens: {limit}}}}}\n", encoding="utf-8")
    return path


class Events(RunObserver):
    def __init__(self) -> None:
        self.events: list[ContextEvent] = []

    def on_context(self, event: ContextEvent) -> None:
        self.events.append(event)


def loop_script(turns: int, calls_per_turn: int = 1) -> list:
    script: list = [ScriptedModel.calls([("read_page", {"page": turn * calls_per_turn + k + 1})
                                         for k in range(calls_per_turn)]) for turn in range(turns - 1)]
    return [*script, ScriptedModel.text("I read every page.")]


async def read_page_in_process(tool: Tool, call: ToolCall, context: CallContext, approver: object,
                               *, turn: object = ()) -> ToolOutcome:
    """``read_page`` without a thread hop per call: the 200-turn loops test the history, not the backend."""
    namespace: dict = {}
    exec(BIG_TOOL_PY, namespace)
    return ToolOutcome(namespace["read_page"](**call.arguments), False, 0)


def play(model, tools: list[Tool], settings: RunSettings, messages: list[Message] | None = None,
         observer: RunObserver | None = None, system: str | None = "You read long documents.", execute=None):
    results = []

    async def go() -> None:  # returns nothing: asyncio.run's exit would repr a returned result (MBs here)
        results.append(await run_conversation(
            model, tools, system=system,
            messages=messages or [Message("user", [TextPart("Read the whole document and tell me what it says.")])],
            settings=settings, context=CallContext(environ={}), observer=observer, execute=execute))

    asyncio.run(go())
    return results[0]


def request_estimate(request: ModelRequest, chars_per_token: float = 4.0) -> int:
    """The estimate of a request as sent, made afresh (not the window's cached figures)."""
    window = ContextWindow(ContextSettings(max_input_tokens=10**9), window=None, max_tokens=None,
                           chars_per_token=chars_per_token)
    return window._estimate(request, request.messages)


def well_formedness_problems(messages: list[Message]) -> list[str]:
    """What a provider would refuse: a first message that is no question, a call without its
    result right after it, a result without its call right before it, two answers in a row."""
    problems = []
    if not messages or messages[0].role != "user":
        problems.append("the first message is not the user's")
    for index, message in enumerate(messages):
        before = messages[index - 1] if index else None
        after = messages[index + 1] if index + 1 < len(messages) else None
        if message.tool_calls and after is not None:
            answered = {result.call_id for result in after.tool_results}
            missing = [call.id for call in message.tool_calls if call.id not in answered]
            if missing:
                problems.append(f"message {index}: calls {missing} have no result after them")
        if message.tool_results:
            called = {call.id for call in before.tool_calls} if before is not None else set()
            orphans = [result.call_id for result in message.tool_results if result.call_id not in called]
            if orphans:
                problems.append(f"message {index}: results {orphans} have no call before them")
        if message.role == "assistant" and before is not None and before.role == "assistant":
            problems.append(f"message {index}: two assistant messages in a row")
    return problems


@pytest.mark.parametrize("strategy", ["drop-oldest", "clear-tool-results", "summarize"])
def test_a_200_turn_loop_of_20_kb_results_fits_8000_tokens_in_every_request(read_page, strategy):
    model = ScriptedModel(loop_script(200))
    observer = Events()
    settings = RunSettings(max_turns=200, context=ContextSettings(max_input_tokens=LIMIT, strategy=strategy))
    result = play(model, [read_page], settings, observer=observer, execute=read_page_in_process)

    assert result.stop_reason == "stop" and result.final == "I read every page.", result.error
    assert len(model.requests) == 200 and len(result.tool_calls) == 199
    assert len(result.tool_calls[0].result) == RESULT_CHARS  # the record keeps what the tool returned
    assert max(request_estimate(r) for r in model.requests) <= LIMIT
    for number, request in enumerate(model.requests, 1):
        assert well_formedness_problems(request.messages) == [], f"request {number}"
        assert request.messages[0].text == "Read the whole document and tell me what it says."
    last = model.requests[-1].messages
    assert last[-1].tool_results[0].content == result.tool_calls[-1].result  # the newest result goes whole
    assert observer.events and result.context is not None
    assert result.context["events"] == [event.to_json() for event in observer.events]
    assert result.to_json()["context"]["max_input_tokens"] == LIMIT
    if strategy == "summarize":
        assert model.summary_requests and "(scripted summary)" in (last_system := model.requests[-1].system or "")
        assert last_system.startswith("You read long documents.")
        assert all(request_estimate(r) <= LIMIT for r in model.summary_requests)
        assert all(not r.tools for r in model.summary_requests)


def test_clear_tool_results_keeps_the_calls_and_names_each_cleared_one(read_page):
    model = ScriptedModel(loop_script(4))
    settings = RunSettings(context=ContextSettings(max_input_tokens=9_000, strategy="clear-tool-results"))
    result = play(model, [read_page], settings)

    last = model.requests[-1].messages
    assert [m.role for m in last] == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    first_call = result.tool_calls[0]
    cleared = last[2].tool_results[0]
    assert cleared.content.startswith(f"[result of read_page (call {first_call.id}, 20,000 characters) cleared")
    assert "\n" not in cleared.content
    assert last[-1].tool_results[0].content == result.tool_calls[-1].result
    assert [event["cleared_calls"] for event in result.context["events"]] == [[first_call.id], [result.tool_calls[1].id]]


def test_drop_oldest_drops_calls_with_their_results_and_says_so(read_page):
    model = ScriptedModel(loop_script(4))
    observer = Events()
    settings = RunSettings(context=ContextSettings(max_input_tokens=9_000))
    result = play(model, [read_page], settings, observer=observer)

    assert [len(r.messages) for r in model.requests] == [1, 3, 3, 3]  # question + the newest call and result
    first, second = result.tool_calls[0].id, result.tool_calls[1].id
    assert [e.to_json()["dropped_calls"] for e in observer.events] == [[first], [second]]
    assert observer.events[0].request == 3 and observer.events[0].dropped_messages == 2
    assert str(observer.events[0]).startswith("context, request 3: dropped 2 earlier messages (1 call)")
    assert len(result.messages) == 8  # the run's own history keeps everything


def test_a_newest_result_over_the_limit_alone_is_cut_to_fit_with_a_marker(read_page):
    model = ScriptedModel(loop_script(2))
    settings = RunSettings(context=ContextSettings(max_input_tokens=2_000))
    result = play(model, [read_page], settings)

    sent = model.requests[1]
    content = sent.messages[-1].tool_results[0].content
    assert content.endswith("[… cut to fit the context window: the result of read_page had 20,000 characters]")
    assert content.startswith("page 1: lorem ipsum")
    assert request_estimate(sent) <= 2_000
    assert result.context["events"][0]["cut_calls"] == [result.tool_calls[0].id]
    assert len(result.tool_calls[0].result) == RESULT_CHARS


def test_a_question_that_alone_is_over_the_limit_ends_the_run_with_a_fix(read_page):
    model = ScriptedModel(["never asked"])
    question = Message("user", [TextPart("word " * 2_000)])
    result = play(model, [read_page], RunSettings(context=ContextSettings(max_input_tokens=1_000)), [question])

    assert result.stop_reason == "error" and not model.requests
    assert result.error.startswith("the context is full: the system prompt, the tools, the question")
    assert "more than the limit of 1,000 input tokens; raise settings.context.max_input_tokens" in result.error


def test_a_chat_history_drops_whole_earlier_exchanges_first(read_page):
    history = []
    for number in range(6):
        history += [Message("user", [TextPart(f"question {number}: " + "why " * 1_000)]),
                    Message("assistant", [TextPart(f"answer {number}: " + "because " * 500)])]
    history.append(Message("user", [TextPart("and now?")]))
    model = ScriptedModel(["now this."])
    result = play(model, [read_page], RunSettings(context=ContextSettings(max_input_tokens=4_000)), history)

    sent = model.requests[0].messages
    assert result.final == "now this." and sent[-1].text == "and now?"
    assert sent[0].text.startswith("question ") and len(sent) % 2 == 1  # whole exchanges, the question last
    assert request_estimate(model.requests[0]) <= 3_000  # trimmed to 3/4 of the limit: room for the next turns


def test_estimates_follow_the_usage_answers_report(read_page):
    def usage(input_tokens: int) -> Usage:
        return Usage(input_tokens=input_tokens, requests=1)

    # The model counts twice what the estimate says: the window must leave out twice as much.
    doubled = []

    def answer(request: ModelRequest):
        doubled.append(request)
        turn = len(doubled)
        tokens = 2 * request_estimate(request)
        if turn == 4:
            return ScriptedModel.text("done", usage=usage(tokens))
        return ScriptedModel.calls([("read_page", {"page": turn})], usage=usage(tokens))

    model = ScriptedModel.from_function(answer)
    play(model, [read_page], RunSettings(context=ContextSettings(max_input_tokens=16_000)))
    assert [len(r.messages) for r in doubled] == [1, 3, 3, 3]  # 2 results fit 16,000 by the estimate, not by usage
    assert all(2 * request_estimate(r) <= 16_000 for r in doubled)


def test_the_limit_defaults_to_the_models_window_less_room_for_the_answer():
    assert OpenAIChatProvider.context_window("gpt-4o-mini-2024-07-18") == 128_000
    assert OpenAIChatProvider.context_window("gpt-4.1-nano") == 1_047_576
    assert OpenAIChatProvider.context_window("my-local-model") is None
    assert AnthropicProvider.context_window("claude-sonnet-4-5") == 200_000
    window = ContextWindow(ContextSettings(), window=200_000, max_tokens=None)
    assert window.limit == 175_000
    assert ContextWindow(ContextSettings(), window=200_000, max_tokens=8_000).limit == 192_000
    assert ContextWindow(ContextSettings(max_input_tokens=9_000), window=200_000, max_tokens=None).limit == 9_000
    assert ContextWindow(ContextSettings(), window=None, max_tokens=None).limit is None
    assert ContextWindow(None, window=200_000, max_tokens=None).limit is None


def test_without_context_settings_every_request_carries_the_whole_history(read_page):
    model = ScriptedModel(loop_script(4))
    result = play(model, [read_page], RunSettings())
    assert [len(r.messages) for r in model.requests] == [1, 3, 5, 7]
    assert result.context is None and "context" not in result.to_json()


def test_cut_and_placeholder_texts_are_estimated_small():
    from toolrun.core.messages import ToolResult

    line = placeholder(ToolResult("call_1", "read_page", "x" * 20_000))
    assert estimate_text(line, 4.0) < 40
