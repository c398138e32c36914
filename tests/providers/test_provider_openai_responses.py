"""The OpenAI Responses adapter: a hand-written event stream that follows the documented Responses
streaming events and the OpenAPI event schemas (each event is validated against its schema), replayed by a
loopback server; every request body is checked against ``CreateResponse``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.loopback import Reply
from tests.openapi_schemas import validate_against
from tests.provider_helpers import STOCK_TOOL_PY, STOCK_TOOL_YAML, complete, load_tools, run_through_runner, tool_round, user
from toolrun.core.errors import ProviderError
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelSettings,
    OpaquePart,
    TextDelta,
    TextPart,
    ToolDefinition,
    ToolResult,
)
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig
from toolrun.providers.openai_responses import (
    OpenAIResponsesProvider,
    ResponsesStreamAssembler,
    build_request_body,
    parse_response,
)
from toolrun.providers.transport import HttpxTransport

INVENTORY = ToolDefinition(
    "get_flower_inventory",
    "Returns the current flower stock of one city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
EVENT_SCHEMAS = {
    "response.created": "ResponseCreatedEvent",
    "response.output_item.added": "ResponseOutputItemAddedEvent",
    "response.output_item.done": "ResponseOutputItemDoneEvent",
    "response.output_text.delta": "ResponseTextDeltaEvent",
    "response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaEvent",
    "response.function_call_arguments.done": "ResponseFunctionCallArgumentsDoneEvent",
    "response.completed": "ResponseCompletedEvent",
    "response.incomplete": "ResponseIncompleteEvent",
    "error": "ResponseErrorEvent",
}


def _request(**settings: Any) -> ModelRequest:
    return ModelRequest("gpt-4o-mini", "You answer questions about our flower shops.",
                        [Message("user", [TextPart("北京和上海的鲜花库存是多少?")])], [INVENTORY], ModelSettings(**settings))


def _response(output: list[dict[str, Any]], status: str = "completed", reason: str | None = None,
              usage: tuple[int, int] = (95, 67)) -> dict[str, Any]:
    """A Response object with every field the OpenAPI schema requires."""
    return {
        "id": "resp_1", "object": "response", "created_at": 1770000000, "status": status, "model": "gpt-4o-mini",
        "output": output, "error": None, "incomplete_details": {"reason": reason} if reason else None,
        "instructions": None, "tools": [], "parallel_tool_calls": True, "metadata": {}, "tool_choice": "auto",
        "temperature": 1.0, "top_p": 1.0,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage),
                  "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


def _function_call(item_id: str, call_id: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": "get_flower_inventory",
            "arguments": arguments, "status": status}


def _text_message(text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if text else []
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": status, "content": content}


def _tool_call_events() -> list[dict[str, Any]]:
    """Text, then two parallel calls whose argument deltas interleave (matched by item_id)."""
    args = {"fc_1": '{"city": "北京"}', "fc_2": '{"city": "上海"}'}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response([], "in_progress")},
        {"type": "response.output_item.added", "output_index": 0, "item": _text_message("", "in_progress")},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "我查一下",
         "logprobs": []},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "。", "logprobs": []},
        {"type": "response.output_item.done", "output_index": 0, "item": _text_message("我查一下。")},
        {"type": "response.output_item.added", "output_index": 1, "item": _function_call("fc_1", "call_A", "", "in_progress")},
        {"type": "response.output_item.added", "output_index": 2, "item": _function_call("fc_2", "call_B", "", "in_progress")},
    ]
    for piece in (0, 1):  # halves of each call's arguments, alternating between the two items
        for item_id, output_index in (("fc_2", 2), ("fc_1", 1)):
            text = args[item_id]
            half = text[: len(text) // 2] if piece == 0 else text[len(text) // 2:]
            events.append({"type": "response.function_call_arguments.delta", "item_id": item_id,
                           "output_index": output_index, "delta": half})
    for item_id, output_index, call_id in (("fc_1", 1, "call_A"), ("fc_2", 2, "call_B")):
        events.append({"type": "response.function_call_arguments.done", "item_id": item_id, "name": "get_flower_inventory",
                       "output_index": output_index, "arguments": args[item_id]})
        events.append({"type": "response.output_item.done", "output_index": output_index,
                       "item": _function_call(item_id, call_id, args[item_id])})
    output = [_text_message("我查一下。"), _function_call("fc_1", "call_A", args["fc_1"]), _function_call("fc_2", "call_B", args["fc_2"])]
    events.append({"type": "response.completed", "response": _response(output)})
    return [dict(event, sequence_number=number) for number, event in enumerate(events)]


def _final_text_events() -> list[dict[str, Any]]:
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": _text_message("", "in_progress")},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
         "delta": "北京有玫瑰 100 枝。", "logprobs": []},
        {"type": "response.output_item.done", "output_index": 0, "item": _text_message("北京有玫瑰 100 枝。")},
        {"type": "response.completed", "response": _response([_text_message("北京有玫瑰 100 枝。")], usage=(235, 90))},
    ]
    return [dict(event, sequence_number=number) for number, event in enumerate(events)]


def _sse(events: list[dict[str, Any]]) -> Reply:
    frames = [f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n" for e in events]
    return Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=frames)


def _provider(url: str) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider("gpt-4o-mini", ProviderConfig(url + "/v1", "sk-resp-key"), HttpxTransport(max_retries=1))


def _answer(request: ModelRequest, response) -> ModelRequest:
    results = [ToolResult(call.id, call.name, f"玫瑰: {100 * (n + 1)}") for n, call in enumerate(response.message.tool_calls)]
    request.messages += [response.message, Message("tool", list(results))]
    return request


def _assert_valid_body(body: dict[str, Any]) -> None:
    assert validate_against("CreateResponse", body) == []
    for item in body["input"]:  # the union is loose; hold each item to its own schema too
        schema = {"function_call": "FunctionToolCall", "function_call_output": "FunctionCallOutputItemParam",
                  "reasoning": "ReasoningItem"}.get(item.get("type"), "EasyInputMessage")
        assert validate_against(schema, item) == [], item


def test_the_hand_written_events_follow_the_openapi_event_schemas():
    for event in _tool_call_events() + _final_text_events():
        assert validate_against(EVENT_SCHEMAS[event["type"]], event) == [], event["type"]


def test_stream_round_trip_over_loopback_with_a_valid_follow_up(loopback):
    replies = iter([_sse(_tool_call_events()), _sse(_final_text_events())])
    server = loopback(lambda request: next(replies))
    first, final, events = tool_round(_provider(server.url), _request(), _answer, stream=True)
    calls = first.message.tool_calls
    assert [(c.id, c.provider_id, c.arguments) for c in calls] == [("call_A", "call_A", {"city": "北京"}),
                                                                   ("call_B", "call_B", {"city": "上海"})]
    assert calls[0].provider_data == {"openai-responses": {"item_id": "fc_1"}}
    assert (first.message.text, first.stop_reason, first.usage.input_tokens, first.usage.output_tokens) == (
        "我查一下。", "tool_calls", 95, 67)
    assert (final.message.text, final.stop_reason, final.usage.input_tokens) == ("北京有玫瑰 100 枝。", "stop", 235)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["我查一下", "。", "北京有玫瑰 100 枝。"]

    [opening, follow_up] = [request.json() for request in server.requests]
    assert server.requests[0].path == "/v1/responses"
    assert server.requests[0].headers["authorization"] == "Bearer sk-resp-key"
    _assert_valid_body(opening)
    _assert_valid_body(follow_up)
    assert (opening["instructions"], opening["store"], opening["stream"]) == ("You answer questions about our flower shops.", False, True)
    assert opening["tools"][0]["type"] == "function" and opening["tools"][0]["name"] == "get_flower_inventory"
    assert follow_up["input"] == [
        {"role": "user", "content": "北京和上海的鲜花库存是多少?"},
        {"role": "assistant", "content": "我查一下。"},
        {"type": "function_call", "call_id": "call_A", "name": "get_flower_inventory", "arguments": '{"city": "北京"}'},
        {"type": "function_call", "call_id": "call_B", "name": "get_flower_inventory", "arguments": '{"city": "上海"}'},
        {"type": "function_call_output", "call_id": "call_A", "output": "玫瑰: 100"},
        {"type": "function_call_output", "call_id": "call_B", "output": "玫瑰: 200"},
    ]


def test_deltas_are_matched_by_item_id_not_arrival_order():
    assembler = ResponsesStreamAssembler()
    for event in _tool_call_events():
        if event["type"] in ("response.function_call_arguments.done", "response.output_item.done"):
            continue  # only deltas: the assembly must not need the "done" copies
        assembler.feed({**event, "response": {**event["response"], "output": []}} if "response" in event else event, event["type"])
    calls = assembler.finish().message.tool_calls
    assert [c.arguments for c in calls] == [{"city": "北京"}, {"city": "上海"}]
    assert assembler.finish().message.text == "我查一下。"


def test_a_whole_response_parses_and_incomplete_means_length():
    whole = parse_response(_response([_function_call("fc_9", "call_9", '{"city": "深圳"}')]))
    [call] = whole.message.tool_calls
    assert (call.id, call.arguments, whole.stop_reason) == ("call_9", {"city": "深圳"}, "tool_calls")
    cut = parse_response(_response([_text_message("北京有玫", "incomplete")], "incomplete", "max_output_tokens"))
    assert (cut.stop_reason, cut.raw_stop_reason, cut.message.text) == ("length", "max_output_tokens", "北京有玫")
    broken = parse_response(_response([_function_call("fc_8", "call_8", '{"city": ')]))
    assert (broken.message.tool_calls[0].arguments, broken.message.tool_calls[0].raw_arguments) == (None, '{"city": ')


def test_failed_response_and_error_event_raise_the_providers_message(loopback):
    failed = {**_response([], "failed"), "error": {"code": "server_error", "message": "The model crashed"}}
    with pytest.raises(ProviderError, match="The model crashed"):
        parse_response(failed)
    error_event = {"type": "error", "code": "rate_limit_exceeded", "message": "Too many tokens", "param": None, "sequence_number": 3}
    assert validate_against("ResponseErrorEvent", error_event) == []
    server = loopback(lambda request: _sse(_final_text_events()[:2] + [error_event]))
    with pytest.raises(ProviderError, match="Too many tokens"):
        complete(_provider(server.url), _request(), stream=True)


def test_a_stream_cut_before_completed_is_an_error_not_a_silent_partial_answer(loopback):
    server = loopback(lambda request: _sse(_tool_call_events()[:-1]))
    with pytest.raises(ProviderError, match="before response.completed"):
        complete(_provider(server.url), _request(), stream=True)


def test_non_streamed_call_over_loopback(loopback):
    server = loopback(lambda request: Reply(200, _response([_function_call("fc_1", "call_1", '{"city": "北京"}')])))
    response = complete(_provider(server.url), _request(), stream=False)
    assert response.message.tool_calls[0].arguments == {"city": "北京"}
    body = server.requests[0].json()
    assert "stream" not in body
    _assert_valid_body(body)


def test_reasoning_items_are_echoed_with_their_call_item_ids_only_when_encrypted():
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB..."}
    output = [reasoning, _function_call("fc_1", "call_1", '{"city": "北京"}')]
    with_reasoning = parse_response(_response(output))
    assert with_reasoning.message.parts[0] == OpaquePart("openai-responses", reasoning)
    request = _request(extra={"include": ["reasoning.encrypted_content"]})
    body = build_request_body(_answer(request, with_reasoning), stream=False)
    assert body["input"][1] == reasoning
    assert body["input"][2]["id"] == "fc_1"  # the call keeps its item id next to its reasoning
    _assert_valid_body(body)

    plain = parse_response(_response([{**reasoning, "encrypted_content": None}, _function_call("fc_2", "call_2", "{}")]))
    body = build_request_body(_answer(_request(), plain), stream=False)
    assert [item.get("type") for item in body["input"]] == [None, "function_call", "function_call_output"]
    assert "id" not in body["input"][1]  # without its reasoning item OpenAI would reject the id


@pytest.mark.parametrize("choice, expected", [
    ("required", "required"), ("none", "none"),
    ("get_flower_inventory", {"type": "function", "name": "get_flower_inventory"}),
])
def test_settings_map_to_valid_bodies(choice: str, expected: Any):
    body = build_request_body(_request(tool_choice=choice, parallel_tool_calls=False, temperature=0.2, max_tokens=300), stream=True)
    assert body["tool_choice"] == expected
    assert (body["parallel_tool_calls"], body["temperature"], body["max_output_tokens"]) == (False, 0.2, 300)
    _assert_valid_body(body)


def test_registered_and_configured_like_openai():
    assert get_provider_class("openai-responses") is OpenAIResponsesProvider
    config = OpenAIResponsesProvider.resolve_config(environ={"OPENAI_API_KEY": "sk-abcdef", "OPENAI_BASE_URL": "http://gw.internal/v1"})
    assert (config.base_url, config.api_key) == ("http://gw.internal/v1", "sk-abcdef")


def test_a_whole_run_through_the_real_runner(loopback, tmp_path):
    tools = load_tools(tmp_path, STOCK_TOOL_PY, STOCK_TOOL_YAML)
    replies = iter([_sse(_tool_call_events()), _sse(_final_text_events())])
    server = loopback(lambda request: next(replies))
    result = run_through_runner(_provider(server.url), tools, user("北京和上海?"), system="Flower shops.")
    assert (result.stop_reason, result.final, result.usage.input_tokens) == ("stop", "北京有玫瑰 100 枝。", 95 + 235)
    follow_up = server.requests[1].json()
    _assert_valid_body(follow_up)
    outputs = [item for item in follow_up["input"] if item.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [("call_A", "玫瑰: 100"), ("call_B", "玫瑰: 80")]
