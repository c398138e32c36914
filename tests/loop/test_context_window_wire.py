"""The context window on the wire: a long loop of 20 KB results through OpenAI Chat and Anthropic.

A loopback server plays the model (one call a turn, then an answer), counts each body's
tokens as a tokenizer would (here: a quarter of its bytes) and reports them as usage; the
window learns from those reports. Every body it received is checked: no more tokens than
``max_input_tokens`` by the server's count, and well-formed in the provider's own terms.
A request without tools is the window's summary request: the server answers it with a summary.
The fast suite plays 20 turns (all but the first two trimmed); ``-m integration`` all 200.
"""

from __future__ import annotations

import json
import math

import pytest

from tests.loop.test_context_window import LIMIT, loop_script, play, read_page, read_page_in_process  # noqa: F401
from tests.loopback import Recorded, Reply
from toolrun.loop.context_settings import ContextSettings
from toolrun.loop.runner import RunSettings
from toolrun.providers.anthropic import AnthropicProvider
from toolrun.providers.base import ProviderConfig
from toolrun.providers.openai_chat import OpenAIChatProvider

pytestmark = pytest.mark.xdist_group("context-wire")


_turns = [0]  # of the loop being played
_counter: list[int] = []  # the turns still to play


def server_tokens(request: Recorded) -> int:
    """The server's own count of a request's input: a quarter of the body's bytes."""
    return math.ceil(len(request.body) / 4)


def openai_model(request: Recorded) -> Reply:
    usage = {"prompt_tokens": server_tokens(request), "completion_tokens": 10}
    if "tools" not in request.json():
        message = {"role": "assistant", "content": "Pages read so far: all lorem ipsum."}
        return Reply(body={"choices": [{"index": 0, "finish_reason": "stop", "message": message}], "usage": usage})
    if _counter.pop(0) >= _turns[0] - 1:
        message = {"role": "assistant", "content": "I read every page."}
        return Reply(body={"choices": [{"index": 0, "finish_reason": "stop", "message": message}], "usage": usage})
    number = _turns[0] - len(_counter)
    call = {"id": f"call_{number}", "type": "function",
            "function": {"name": "read_page", "arguments": json.dumps({"page": number})}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return Reply(body={"choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}], "usage": usage})


def anthropic_model(request: Recorded) -> Reply:
    usage = {"input_tokens": server_tokens(request), "output_tokens": 10}
    if "tools" not in request.json():
        return Reply(body={"id": "msg", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                           "content": [{"type": "text", "text": "Pages read so far: all lorem ipsum."}], "usage": usage})
    if _counter.pop(0) >= _turns[0] - 1:
        return Reply(body={"id": "msg", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                           "content": [{"type": "text", "text": "I read every page."}], "usage": usage})
    number = _turns[0] - len(_counter)
    block = {"type": "tool_use", "id": f"toolu_{number}", "name": "read_page", "input": {"page": number}}
    return Reply(body={"id": "msg", "type": "message", "role": "assistant", "stop_reason": "tool_use",
                       "content": [block], "usage": usage})


def openai_problems(body: dict) -> list[str]:
    """Chat Completions: after the system message a user message; each tool message answers a
    call of the assistant message before its run of tool messages, and every call is answered."""
    messages = [m for m in body["messages"] if m["role"] != "system"]
    problems = [] if messages[0]["role"] == "user" else ["the first message is not the user's"]
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            if message["tool_call_id"] not in open_calls:
                problems.append(f"message {index} answers no open call")
            open_calls.discard(message["tool_call_id"])
            continue
        if open_calls:
            problems.append(f"message {index}: calls {sorted(open_calls)} were never answered")
        open_calls = {call["id"] for call in message.get("tool_calls") or []}
    return problems


def anthropic_problems(body: dict) -> list[str]:
    """Messages API: user first, strict alternation, and each assistant tool_use answered by a
    tool_result in the very next user message (and no tool_result without its tool_use)."""
    messages = body["messages"]
    problems = [] if messages[0]["role"] == "user" else ["the first message is not the user's"]
    previous_uses: set[str] = set()
    for index, message in enumerate(messages):
        if index and message["role"] == messages[index - 1]["role"]:
            problems.append(f"message {index}: two {message['role']} messages in a row")
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "user":
            results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
            if results != previous_uses:
                problems.append(f"message {index}: results {sorted(results)} for calls {sorted(previous_uses)}")
            previous_uses = set()
        else:
            previous_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    return problems


@pytest.mark.parametrize("turns", [20, pytest.param(200, marks=pytest.mark.integration)])
@pytest.mark.parametrize(("provider_class", "model", "handler", "problems", "strategy"), [
    (OpenAIChatProvider, "gpt-4o-mini", openai_model, openai_problems, "clear-tool-results"),
    (AnthropicProvider, "claude-sonnet-4-5", anthropic_model, anthropic_problems, "summarize"),
], ids=["openai", "anthropic"])
def test_a_long_loop_fits_the_limit_and_stays_well_formed_on_the_wire(
        loopback, read_page, provider_class, model, handler, problems, strategy, turns):  # noqa: F811
    _turns[0], _counter[:] = turns, list(range(turns))
    server = loopback(handler)
    provider = provider_class(model, ProviderConfig(server.url + ("/v1" if provider_class is OpenAIChatProvider else ""),
                                                    "sk-test-key"))
    settings = RunSettings(max_turns=turns, stream=False, context=ContextSettings(max_input_tokens=LIMIT, strategy=strategy))
    result = play(provider, [read_page], settings, execute=read_page_in_process)

    assert result.stop_reason == "stop" and result.final == "I read every page.", result.error
    answered = [request for request in server.requests if "tools" in request.json()]
    summaries = [request for request in server.requests if "tools" not in request.json()]
    assert len(answered) == turns and bool(summaries) == (strategy == "summarize")
    assert all("Pages read so far" in r.body.decode() for r in answered[-3:]) == bool(summaries)  # in the system prompt
    counts = [server_tokens(request) for request in server.requests]
    assert max(counts) <= LIMIT, max(counts)
    for number, request in enumerate(server.requests, 1):
        assert problems(request.json()) == [], f"request {number}"
    last = answered[-1].json()["messages"]
    assert f"page {turns - 1}: lorem" in json.dumps(last[-1], ensure_ascii=False)  # the newest result went out whole
    assert result.context["events"]
