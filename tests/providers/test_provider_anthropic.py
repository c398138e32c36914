"""The Anthropic Messages adapter: recorded traffic parsed whole and streamed, request mapping,
and a loopback server speaking the wire format (SSE with ``event:`` names). Every follow-up
request is checked against the rules the API enforces (``anthropic_rejections``)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import Recorded, Reply
from tests.provider_helpers import (
    complete,
    load_tools,
    recorded_body,
    recorded_stream,
    run_through_runner,
    tool_round,
    with_provider,
)
from tests.provider_roundtrip import CITIES, assert_replayed_offline, record_then_replay
from tests.provider_roundtrip import WEATHER as CITY_WEATHER
from toolrun.backends.base import CallContext
from toolrun.core.errors import ProviderError, UserError
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OpaquePart,
    TextDelta,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
)
from toolrun.loop.runner import RunSettings, run_conversation
from toolrun.providers import get_provider_class
from toolrun.providers.anthropic import (
    AnthropicProvider,
    AnthropicStreamAssembler,
    build_request_body,
    normalise_stop_reason,
    parse_response,
)
from toolrun.providers.base import ProviderConfig
from toolrun.providers.transport import HttpxTransport

KEY = "sk-ant-test-key-0123456789"
WEATHER = ToolDefinition("weather", "Current weather of one city. Use for weather questions only.",
                         {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]})
UPDATE = ToolDefinition("updateIssueList", "Refreshes the issue list. Takes no arguments.",
                        {"type": "object", "properties": {}})
THINKING = {"type": "thinking", "thinking": "The user wants two cities; call weather twice.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr"}


def sse(events: list[dict[str, Any]]) -> list[str]:
    """Anthropic's framing: an ``event:`` line named after the type, then the data."""
    return [f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events]


def _request(messages: list[Message], **settings: Any) -> ModelRequest:
    return ModelRequest("claude-sonnet-4-5", "You answer weather questions.", messages, [WEATHER, UPDATE],
                        ModelSettings(**settings))


def _question() -> list[Message]:
    return [Message("user", [TextPart("What is the weather in 北京 and San Francisco?")])]


def _answer(response: ModelResponse) -> list[Message]:
    """What the runner appends after a tool-call turn: the message, then one result per call."""
    results = [ToolResult(call.id, call.name, f"sunny in {(call.arguments or {}).get('location', '?')}")
               for call in response.message.tool_calls]
    return [response.message, Message("tool", results)]


def anthropic_rejections(body: dict[str, Any]) -> list[str]:
    """Why the Messages API would refuse ``body`` (empty when it would accept it)."""
    problems: list[str] = []
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        problems.append("max_tokens is required")
    messages = body.get("messages") or []
    if not messages or messages[0].get("role") != "user":
        problems.append("the first message must be a user message")
    for index, message in enumerate(messages):
        if message.get("role") not in ("user", "assistant"):
            problems.append(f"messages[{index}]: role {message.get('role')!r} (system goes top-level)")
        if index and message.get("role") == messages[index - 1].get("role"):
            problems.append(f"messages[{index}]: two {message['role']} messages in a row")
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                problems.append(f"messages[{index}]: empty text block")
            if block.get("type") == "tool_use":
                if message["role"] != "assistant":
                    problems.append(f"messages[{index}]: tool_use outside an assistant message")
                if not re.fullmatch(r"[a-zA-Z0-9_-]+", str(block.get("id"))):
                    problems.append(f"messages[{index}]: tool_use id {block.get('id')!r}")
                if not isinstance(block.get("input"), dict):
                    problems.append(f"messages[{index}]: tool_use input must be an object")
        uses = [block["id"] for block in blocks if block.get("type") == "tool_use"]
        if len(set(uses)) != len(uses):
            problems.append(f"messages[{index}]: repeated tool_use ids")
        results = [block for block in blocks if block.get("type") == "tool_result"]
        if results and blocks[: len(results)] != results:
            problems.append(f"messages[{index}]: tool_result blocks must come first")
        if results:
            previous = messages[index - 1] if index else {}
            previous_uses = {b["id"] for b in previous.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"}
            given = [block.get("tool_use_id") for block in results]
            if set(given) != previous_uses or len(given) != len(previous_uses):
                problems.append(f"messages[{index}]: tool_result ids {given} do not answer tool_use ids {sorted(previous_uses)}")
        if uses and index + 1 < len(messages):
            following = messages[index + 1].get("content") or []
            answered = {b.get("tool_use_id") for b in following if isinstance(b, dict) and b.get("type") == "tool_result"}
            if answered != set(uses):
                problems.append(f"messages[{index + 1}]: every tool_use needs its tool_result in the next message")
    for tool in body.get("tools") or []:
        if set(tool) - {"name", "description", "input_schema", "cache_control"} or tool.get("input_schema", {}).get("type") != "object":
            problems.append(f"tool {tool.get('name')!r} is not {{name, description, input_schema: object}}")
    choice = body.get("tool_choice")
    if choice is not None and choice.get("type") not in ("auto", "any", "tool", "none"):
        problems.append(f"tool_choice type {choice.get('type')!r}")
    return problems


# ------------------------------------------------------------------- recorded traffic


def test_recorded_no_args_tool_whole(fixtures_dir):
    response = parse_response(recorded_body(fixtures_dir, "anthropic-tool-no-args"))
    assert response.stop_reason == "tool_calls" and response.raw_stop_reason == "tool_use"
    assert response.message.text.endswith("Okay, I will update the current issue list:")
    [call] = response.message.tool_calls
    assert (call.id, call.provider_id, call.name, call.arguments) == (
        "toolu_01LRmxn9vGM1d2DZSDBowdZ1", "toolu_01LRmxn9vGM1d2DZSDBowdZ1", "updateIssueList", {})
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.requests) == (602, 93, 1)


def test_recorded_no_args_tool_streamed(fixtures_dir):
    events: list[Any] = []
    assembler = AnthropicStreamAssembler()
    for event in recorded_stream(fixtures_dir, "anthropic-tool-no-args"):
        events += assembler.feed(event)
    response = assembler.finish()
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["I'll update the issue list for", " you."]
    assert response.message.text == "I'll update the issue list for you."
    [call] = response.message.tool_calls
    # the only input_json_delta is "": a tool without arguments gets {}
    assert (call.id, call.arguments, call.raw_arguments) == ("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", {}, "{}")
    assert response.stop_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (565, 48)


def test_recorded_object_input_whole_and_streamed_agree(fixtures_dir):
    whole = parse_response(recorded_body(fixtures_dir, "anthropic-json-other-tool.1"))
    assembler = AnthropicStreamAssembler()
    for event in recorded_stream(fixtures_dir, "anthropic-json-other-tool.1"):
        assembler.feed(event)
    streamed = assembler.finish()
    for response in (whole, streamed):
        [call] = response.message.tool_calls
        assert (call.name, call.arguments) == ("weather", {"location": "San Francisco"})
        assert response.message.text is None
        assert response.usage.input_tokens == 843 and response.usage.output_tokens == 28
    assert streamed.message.tool_calls[0].raw_arguments == '{"location": "San Francisco"}'


# ------------------------------------------------------------------------ the request


def test_request_body_puts_system_top_level_and_always_sets_max_tokens():
    body = build_request_body(_request(_question()), stream=False)
    assert body["system"] == "You answer weather questions."
    assert body["max_tokens"] == 4096 and "stream" not in body
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["messages"][0]["content"] == [{"type": "text", "text": "What is the weather in 北京 and San Francisco?"}]
    assert body["tools"][0] == {"name": "weather", "description": WEATHER.description, "input_schema": WEATHER.parameters}
    assert body["tool_choice"] == {"type": "auto"}
    assert anthropic_rejections(body) == []


def test_request_body_settings():
    body = build_request_body(_request(_question(), temperature=0, max_tokens=300, parallel_tool_calls=False,
                                       extra={"top_k": 5}), stream=True)
    assert (body["temperature"], body["max_tokens"], body["stream"], body["top_k"]) == (0, 300, True, 5)
    assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize("choice, expected", [
    ("auto", {"type": "auto"}),
    ("required", {"type": "any"}),
    ("none", {"type": "none"}),
    ("weather", {"type": "tool", "name": "weather"}),
])
def test_tool_choice(choice, expected):
    assert build_request_body(_request(_question(), tool_choice=choice), stream=False)["tool_choice"] == expected


def test_no_tools_sends_no_tool_choice():
    request = ModelRequest("claude-sonnet-4-5", None, _question(), [])
    body = build_request_body(request, stream=False)
    assert "tools" not in body and "tool_choice" not in body and "system" not in body


def test_history_echoes_thinking_in_place_and_sends_all_results_in_one_user_message():
    assistant = Message("assistant", [
        OpaquePart("anthropic", THINKING),
        TextPart("Let me check both."),
        ToolCall("toolu_A", "weather", {"location": "北京"}, '{"location": "北京"}', "toolu_A"),
        OpaquePart("anthropic", REDACTED),
        ToolCall("toolu_B", "weather", {"location": "San Francisco"}, "{}", "toolu_B"),
        OpaquePart("gemini", {"text": "not ours"}),
    ])
    # results arrive as two tool messages (one per call): they must still share one user message
    history = _question() + [assistant, Message("tool", [ToolResult("toolu_A", "weather", "晴 21°C")]),
                             Message("tool", [ToolResult("toolu_B", "weather", "HTTP 503", is_error=True)])]
    body = build_request_body(_request(history), stream=False)
    assert anthropic_rejections(body) == []
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        THINKING,
        {"type": "text", "text": "Let me check both."},
        {"type": "tool_use", "id": "toolu_A", "name": "weather", "input": {"location": "北京"}},
        REDACTED,
        {"type": "tool_use", "id": "toolu_B", "name": "weather", "input": {"location": "San Francisco"}},
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_A", "content": "晴 21°C"},
        {"type": "tool_result", "tool_use_id": "toolu_B", "content": "HTTP 503", "is_error": True},
    ]
    assert "晴 21°C" in json.dumps(body, ensure_ascii=False)


def test_history_uses_the_runners_ids_and_puts_results_before_text():
    # the runner rewrote a repeated provider id; tool_use and tool_result must agree on call.id
    call = ToolCall("toolu_X_2", "updateIssueList", None, "{not json", provider_id="toolu_X")
    history = _question() + [Message("assistant", [TextPart(""), call]),
                             Message("tool", [ToolResult("toolu_X_2", "updateIssueList", "bad arguments", True)]),
                             Message("user", [TextPart("and be quick")])]
    body = build_request_body(_request(history), stream=False)
    assert anthropic_rejections(body) == []
    assert body["messages"][1]["content"] == [{"type": "tool_use", "id": "toolu_X_2", "name": "updateIssueList", "input": {}}]
    assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "text"]


def test_the_rejection_checker_catches_split_results():
    body = {"max_tokens": 10, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}},
                                          {"type": "tool_use", "id": "b", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "2"}]},
    ]}
    assert anthropic_rejections(body)


# ------------------------------------------------------------------------ the response


@pytest.mark.parametrize("raw, expected", [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("tool_use", "tool_calls"), ("max_tokens", "length"),
    ("model_context_window_exceeded", "length"), ("refusal", "content_filter"), ("pause_turn", "paused"),
])
def test_stop_reasons(raw, expected):
    assert normalise_stop_reason(raw) == expected


def test_cache_tokens_count_as_input():
    body = {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000, "output_tokens": 5}}
    usage = parse_response(body).usage
    assert (usage.input_tokens, usage.output_tokens) == (1110, 5)


def test_streamed_thinking_block_is_rebuilt_exactly():
    events = [
        {"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 50, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants two cities; "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "call weather twice."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": THINKING["signature"]}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": REDACTED},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 30}},
        {"type": "message_stop"},
    ]
    assembler = AnthropicStreamAssembler()
    for event in events:
        assembler.feed(event)
    response = assembler.finish()
    assert response.message.parts == [OpaquePart("anthropic", THINKING), OpaquePart("anthropic", REDACTED)]
    assert response.message.text is None and response.stop_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (50, 30)


def test_interleaved_parallel_tool_use_blocks_are_assembled_per_index():
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"location": "S'}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"location": "北'}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": 'F"}'}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '京"}'}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    assembler = AnthropicStreamAssembler()
    for event in events:
        assembler.feed(event)
    calls = assembler.finish().message.tool_calls
    assert [(c.id, c.arguments) for c in calls] == [("toolu_1", {"location": "北京"}), ("toolu_2", {"location": "SF"})]


def test_cut_off_arguments_are_kept_raw():
    assembler = AnthropicStreamAssembler()
    for event in [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"locat'}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]:
        assembler.feed(event)
    response = assembler.finish()
    [call] = response.message.tool_calls
    assert (call.arguments, call.raw_arguments, response.stop_reason) == (None, '{"locat', "length")


def test_a_stream_that_stops_half_way_is_an_error():
    assembler = AnthropicStreamAssembler()
    assembler.feed({"type": "message_start", "message": {"usage": {"input_tokens": 5}}})
    with pytest.raises(ProviderError, match="message_stop"):
        assembler.finish()


def test_an_error_body_raises():
    with pytest.raises(ProviderError, match="invalid_request_error: bad") as caught:
        parse_response({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
    assert caught.value.retryable is False


# -------------------------------------------------------------- provider configuration


def test_registered_and_configured_from_the_environment():
    assert get_provider_class("anthropic") is AnthropicProvider
    config = AnthropicProvider.resolve_config(environ={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": "http://gw.local/"})
    assert (config.base_url, config.api_key) == ("http://gw.local", KEY)
    assert AnthropicProvider.resolve_config(environ={"ANTHROPIC_API_KEY": KEY}).base_url == "https://api.anthropic.com"
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider.resolve_config(environ={})


# ---------------------------------------------------------------- loopback, end to end


def _provider(server, **transport: Any) -> AnthropicProvider:
    config = ProviderConfig(base_url=server.url, api_key=KEY, headers={"x-gateway": "team-a"})
    return AnthropicProvider("claude-sonnet-4-5", config, HttpxTransport(**transport))


FINAL_EVENTS = [
    {"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 700, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "北京 and San Francisco "}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "are both sunny."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 12}},
    {"type": "message_stop"},
]
FINAL_BODY = {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
              "content": [{"type": "text", "text": "北京 and San Francisco are both sunny."}],
              "usage": {"input_tokens": 700, "output_tokens": 12}}

# thinking, then two parallel calls of the same tool: the shape a real turn with thinking has
PARALLEL_EVENTS = [
    {"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 600, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": THINKING["thinking"]}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": THINKING["signature"]}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_01A", "name": "weather", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"location": "北京"}'}},
    {"type": "content_block_stop", "index": 1},
    {"type": "ping"},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_01B", "name": "weather", "input": {}}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"location": '}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '"San Francisco"}'}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 80}},
    {"type": "message_stop"},
]


def _two_turns(server, *, stream: bool) -> tuple[ModelResponse, ModelResponse, list[Any]]:
    """Play one tool round against ``server`` as the runner would: ask, answer the calls, ask again."""
    return tool_round(_provider(server), _request(_question()),
                      lambda request, first: _request(_question() + _answer(first)), stream=stream)


def _check_http(server, *, stream: bool) -> None:
    for recorded in server.requests:
        assert recorded.method == "POST" and recorded.path == "/v1/messages" and recorded.query == {}
        assert recorded.headers["x-api-key"] == KEY and recorded.headers["anthropic-version"] == "2023-06-01"
        assert recorded.headers["x-gateway"] == "team-a"
        assert KEY not in recorded.path
        body = recorded.json()
        assert body.get("stream", False) is stream
        assert anthropic_rejections(body) == []


@pytest.mark.parametrize("name", ["anthropic-tool-no-args", "anthropic-json-other-tool.1"])
@pytest.mark.parametrize("stream", [False, True])
def test_recorded_turn_replayed_by_a_loopback_server(loopback, fixtures_dir, name, stream):
    def handler(request: Recorded) -> Reply:
        first = len(server.requests) == 1
        if stream:
            events = recorded_stream(fixtures_dir, name) if first else FINAL_EVENTS
            return Reply(200, chunks=sse(events), headers={"Content-Type": "text/event-stream"})
        return Reply(200, recorded_body(fixtures_dir, name) if first else FINAL_BODY)

    server = loopback(handler)
    first, second, _ = _two_turns(server, stream=stream)
    recording = recorded_stream(fixtures_dir, name) if stream else recorded_body(fixtures_dir, name)["content"]
    recorded_ids = [e["content_block"]["id"] for e in recording if e.get("type") == "content_block_start"
                    and e["content_block"]["type"] == "tool_use"] if stream else [b["id"] for b in recording if b["type"] == "tool_use"]
    assert [call.provider_id for call in first.message.tool_calls] == recorded_ids
    assert second.message.text == "北京 and San Francisco are both sunny." and second.stop_reason == "stop"
    _check_http(server, stream=stream)
    follow_up = server.requests[1].json()["messages"]
    assert [b["tool_use_id"] for b in follow_up[2]["content"]] == recorded_ids


def test_parallel_calls_with_thinking_streamed_end_to_end(loopback):
    answers = iter([PARALLEL_EVENTS, FINAL_EVENTS])
    server = loopback(lambda request: Reply(200, chunks=sse(next(answers)), headers={"Content-Type": "text/event-stream"}))
    first, second, events = _two_turns(server, stream=True)

    assert [(c.id, c.arguments) for c in first.message.tool_calls] == [
        ("toolu_01A", {"location": "北京"}), ("toolu_01B", {"location": "San Francisco"})]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "北京 and San Francisco are both sunny."
    assert (first.usage.input_tokens, first.usage.output_tokens) == (600, 80)
    _check_http(server, stream=True)
    follow_up = server.requests[1].json()["messages"]
    assert follow_up[1]["content"][0] == THINKING  # echoed unchanged, first, as received
    assert [b["type"] for b in follow_up[1]["content"]] == ["thinking", "tool_use", "tool_use"]
    assert follow_up[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "sunny in 北京"},
        {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "sunny in San Francisco"},
    ]


def test_error_event_mid_stream_raises_a_retryable_error(loopback):
    events = PARALLEL_EVENTS[:6] + [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    server = loopback(lambda request: Reply(200, chunks=sse(events), headers={"Content-Type": "text/event-stream"}))

    with pytest.raises(ProviderError, match="overloaded_error: Overloaded") as caught:
        complete(_provider(server), _request(_question()), stream=True)
    assert caught.value.retryable is True


@pytest.mark.parametrize("stream", [False, True])
def test_529_overloaded_is_retried_then_succeeds(loopback, stream):
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    answers = iter([Reply(529, overloaded, {"retry-after-ms": "20"}),
                    Reply(200, chunks=sse(FINAL_EVENTS)) if stream else Reply(200, FINAL_BODY)])
    server = loopback(lambda request: next(answers))

    response = complete(_provider(server), _request(_question()), stream=stream)
    assert response.message.text == "北京 and San Francisco are both sunny."
    assert len(server.requests) == 2


def test_invalid_request_is_not_retried_and_names_the_problem(loopback):
    server = loopback(lambda request: Reply(400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages.2: tool_use ids were found without tool_result blocks"}}))

    with pytest.raises(ProviderError, match="HTTP 400: messages.2: tool_use ids") as caught:
        complete(_provider(server), _request(_question()), stream=False)
    assert caught.value.status == 400 and len(server.requests) == 1


# ------------------------------------------------------- the real runner, end to end

TOOLS_PY = '''
def weather(location):
    return f"{location}: 18°C, sunny"

def update_issue_list():
    return "3 issues updated"
'''
TOOLS_YAML = '''
tools:
  - name: weather
    description: >-
      Returns the current weather of one city. Use it for weather questions; do not use it
      for forecasts beyond today.
    parameters:
      type: object
      properties: {location: {type: string, description: City name}}
      required: [location]
    backend: {python: "tools.py:weather"}
  - name: updateIssueList
    description: >-
      Refreshes the issue list from the tracker. Use it when asked to update issues; do not
      use it to read a single issue.
    parameters: {type: object, properties: {}}
    backend: {python: "tools.py:update_issue_list"}
'''


@pytest.fixture
def catalog_tools(tmp_path: Path):
    return load_tools(tmp_path, TOOLS_PY, TOOLS_YAML)


@pytest.mark.parametrize("name, tool, arguments, output", [
    ("anthropic-tool-no-args", "updateIssueList", {}, "3 issues updated"),
    ("anthropic-json-other-tool.1", "weather", {"location": "San Francisco"}, "San Francisco: 18°C, sunny"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_recorded_turn_through_the_runner(loopback, fixtures_dir, catalog_tools, name, tool, arguments, output, stream):

    def handler(request: Recorded) -> Reply:
        first = len(server.requests) == 1
        if stream:
            return Reply(200, chunks=sse(recorded_stream(fixtures_dir, name) if first else FINAL_EVENTS))
        return Reply(200, recorded_body(fixtures_dir, name) if first else FINAL_BODY)

    server = loopback(handler)
    result = run_through_runner(_provider(server), catalog_tools, _question(), system="You help.", stream=stream)
    assert (result.stop_reason, result.error, result.final) == ("stop", None, "北京 and San Francisco are both sunny.")
    recorded = parse_response(recorded_body(fixtures_dir, name)) if not stream else None
    [call] = result.turns[0].tool_calls
    assert (call.name, call.arguments, call.result, call.is_error) == (tool, arguments, output, False)
    if recorded is not None:
        assert call.id == recorded.message.tool_calls[0].provider_id  # a fresh, unique id is kept as sent
    _check_http(server, stream=stream)
    follow_up = server.requests[1].json()["messages"]
    assert follow_up[2]["content"] == [{"type": "tool_result", "tool_use_id": call.id, "content": output}]
    document = dataclasses.replace(result, recipe="weather", model="anthropic:claude-sonnet-4-5", mode="live").to_json()
    assert document["usage"]["requests"] == 2 and document["turns"][0]["stop_reason"] == "tool_calls"
    assert document["usage"]["output_tokens"] == sum(t.usage.output_tokens for t in result.turns)


def test_an_empty_assistant_answer_does_not_split_the_user_side():
    history = _question() + [Message("assistant", [TextPart("")]), Message("user", [TextPart("Please answer.")])]
    body = build_request_body(_request(history), stream=False)
    assert anthropic_rejections(body) == []
    assert [block["text"] for block in body["messages"][0]["content"]] == [
        "What is the weather in 北京 and San Francisco?", "Please answer."]


def test_streamed_server_tool_input_is_kept_on_its_opaque_block():
    assembler = AnthropicStreamAssembler()
    for event in [
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"query": "北京 天气"}'}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]:
        assembler.feed(event)
    assert assembler.finish().message.parts == [OpaquePart("anthropic", {
        "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "北京 天气"}})]


# ------------------------------------------- toolrun recipe: record live, replay offline


def _weather_server_handler(*, stream: bool):
    """An Anthropic server: three parallel calls, then an answer built from the results sent back."""

    def handler(request: Recorded) -> Reply:
        body = request.json()
        refused = anthropic_rejections(body) + ([] if request.headers.get("x-api-key") == KEY else ["no x-api-key"])
        if refused:  # answer as Anthropic would: 400 with the reasons
            return Reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "; ".join(refused)}})
        last = body["messages"][-1]["content"]
        if not any(block.get("type") == "tool_result" for block in last):
            blocks = [{"type": "thinking", "thinking": "Three cities, three calls.", "signature": "SIG-3"}] + [
                {"type": "tool_use", "id": f"toolu_0{i}", "name": "weather", "input": {"city": city}}
                for i, city in enumerate(CITIES)]
            answer = {"type": "message", "role": "assistant", "content": blocks, "stop_reason": "tool_use",
                      "usage": {"input_tokens": 300, "output_tokens": 90}}
        else:
            text = "；".join(f"{block['tool_use_id']}={block['content']}" for block in last)
            answer = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
                      "stop_reason": "end_turn", "usage": {"input_tokens": 500, "output_tokens": 40}}
        if not stream:
            return Reply(200, answer)
        events = [{"type": "message_start", "message": {**answer, "content": [], "stop_reason": None,
                                                        "usage": {"input_tokens": answer["usage"]["input_tokens"], "output_tokens": 1}}}]
        for index, block in enumerate(answer["content"]):
            if block["type"] == "tool_use":
                events += [{"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                           {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}},
                           {"type": "content_block_delta", "index": index, "delta": {
                               "type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}}]
            elif block["type"] == "thinking":
                events += [{"type": "content_block_start", "index": index,
                            "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                           {"type": "content_block_delta", "index": index,
                            "delta": {"type": "thinking_delta", "thinking": block["thinking"]}},
                           {"type": "content_block_delta", "index": index,
                            "delta": {"type": "signature_delta", "signature": block["signature"]}}]
            else:
                events += [{"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                           {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}]
            events += [{"type": "ping"}, {"type": "content_block_stop", "index": index}]
        events += [{"type": "message_delta", "delta": {"stop_reason": answer["stop_reason"]},
                    "usage": {"output_tokens": answer["usage"]["output_tokens"]}}, {"type": "message_stop"}]
        return Reply(200, chunks=sse(events), headers={"Content-Type": "text/event-stream"})

    return handler


@pytest.mark.parametrize("stream", [True, False])
def test_toolrun_recipe_records_live_and_replays_offline(loopback, tmp_path, stream):

    server = loopback(_weather_server_handler(stream=stream))
    roundtrip = record_then_replay(tmp_path, "anthropic:claude-sonnet-4-5",
                                   {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url}, stream=stream)
    live = roundtrip.live
    assert live["stop_reason"] == "stop" and live["usage"] == {"input_tokens": 800, "output_tokens": 130, "requests": 2}
    calls = live["turns"][0]["tool_calls"]
    assert [(c["id"], c["arguments"]["city"], c["result"]) for c in calls] == [
        (f"toolu_0{i}", city, CITY_WEATHER[city]) for i, city in enumerate(CITY_WEATHER)]
    assert live["final"] == "；".join(f"toolu_0{i}={CITY_WEATHER[city]}" for i, city in enumerate(CITY_WEATHER))
    assert_replayed_offline(roundtrip, server, KEY, keep_ids=True)


def test_an_error_event_never_shows_the_key():
    AnthropicProvider.resolve_config(environ={"ANTHROPIC_API_KEY": KEY})  # registers the key for redaction
    assembler = AnthropicStreamAssembler()
    with pytest.raises(ProviderError) as caught:
        assembler.feed({"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}})
    assert KEY not in str(caught.value) and "authentication_error" in str(caught.value)


# ------------------------------------------------------------- a paused turn (pause_turn)

SEARCH = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "北京 天气"}}
SEARCHED = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
    {"type": "web_search_result", "url": "https://weather.example/beijing", "title": "北京天气", "encrypted_content": "EqA1"}]}
CALL_WEATHER = {"type": "tool_use", "id": "toolu_01W", "name": "weather", "input": {"location": "北京"}}


def _message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": content,
            "stop_reason": stop_reason, "usage": {"input_tokens": 100, "output_tokens": 10}}


def _events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """``message`` as the stream that carries it: text and input in deltas, other blocks whole."""
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "model": message["model"], "content": [], "usage": {"input_tokens": 100, "output_tokens": 1}}}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events += [{"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}]
        elif "input" in block:
            events += [{"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                       {"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}}]
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    return events + [{"type": "message_delta", "delta": {"stop_reason": message["stop_reason"]}, "usage": {"output_tokens": 10}},
                     {"type": "message_stop"}]


def _answering(messages: list[dict[str, Any]], *, stream: bool):
    """A Messages server answering ``messages`` in turn (the last one again and again), refusing what the API refuses."""
    answers = list(messages)

    def handler(request: Recorded) -> Reply:
        refused = anthropic_rejections(request.json())
        if refused:
            return Reply(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "; ".join(refused)}})
        message = answers.pop(0) if len(answers) > 1 else answers[0]
        return Reply(200, chunks=sse(_events(message))) if stream else Reply(200, message)

    return handler


@pytest.mark.parametrize("stream", [False, True])
def test_a_paused_turn_is_sent_back_as_it_came_and_goes_on(loopback, catalog_tools, stream):
    # pause_turn ended the run as a finished answer ("stop"): the model had only said it would look something up.
    paused = _message([{"type": "text", "text": "我查一下。"}, SEARCH], "pause_turn")
    resumed = _message([SEARCHED, CALL_WEATHER], "tool_use")
    answered = _message([{"type": "text", "text": "北京 18°C。"}], "end_turn")
    server = loopback(_answering([paused, resumed, answered], stream=stream))
    result = run_through_runner(_provider(server), catalog_tools, _question(), stream=stream)
    assert (result.stop_reason, result.final, result.error) == ("stop", "北京 18°C。", None)
    assert [turn.stop_reason for turn in result.turns] == ["paused", "tool_calls", "stop"]
    assert result.turns[1].tool_calls[0].result == "北京: 18°C, sunny"
    question = {"role": "user", "content": [{"type": "text", "text": "What is the weather in 北京 and San Francisco?"}]}
    # the paused answer goes back as it came, as the last message: nothing added after it
    assert server.requests[1].json()["messages"] == [question, {"role": "assistant", "content": paused["content"]}]
    # and the turn it began goes back as one assistant message, answered by one user message
    assert server.requests[2].json()["messages"] == [
        question, {"role": "assistant", "content": paused["content"] + resumed["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01W", "content": "北京: 18°C, sunny"}]}]


def test_the_answer_of_a_paused_turn_is_its_text_before_and_after_the_pause(loopback, catalog_tools):
    paused = _message([{"type": "text", "text": "北京"}, SEARCH], "pause_turn")
    resumed = _message([SEARCHED, {"type": "text", "text": "有玫瑰。"}], "end_turn")
    server = loopback(_answering([paused, resumed], stream=True))
    result = run_through_runner(_provider(server), catalog_tools, _question(), stream=True)
    assert (result.stop_reason, result.final) == ("stop", "北京有玫瑰。")
    assert [(turn.stop_reason, turn.text) for turn in result.turns] == [("paused", "北京"), ("stop", "有玫瑰。")]


def test_a_turn_that_keeps_pausing_ends_at_max_turns(loopback, catalog_tools):
    server = loopback(_answering([_message([SEARCH], "pause_turn")], stream=False))
    settings = RunSettings(stream=False, max_turns=3)
    result = with_provider(_provider(server), lambda p: run_conversation(
        p, catalog_tools, system=None, messages=_question(), settings=settings, context=CallContext(environ={})))
    assert (result.stop_reason, len(server.requests)) == ("max_turns", 3)
    assert "max_turns is 3" in result.error
    assert server.requests[2].json()["messages"][1:] == [{"role": "assistant", "content": [SEARCH, SEARCH]}]
