"""The OpenAI Chat Completions adapter: recorded traffic, quirks of compatible servers, and a
loopback server speaking the wire format; every request body is checked against OpenAI's
official OpenAPI schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import Reply
from tests.openapi_schemas import validate_against
from tests.provider_helpers import (
    complete,
    recorded_body,
    recorded_stream,
    run_through_runner,
    tool_round,
    user,
    with_provider,
    write_catalog,
)
from toolrun.core.errors import ProviderError, UserError
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelSettings,
    TextDelta,
    TextPart,
    ToolDefinition,
    ToolResult,
)
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig
from toolrun.providers.openai_chat import (
    ChatStreamAssembler,
    OpenAIChatProvider,
    build_request_body,
    parse_arguments,
    parse_response,
)
from toolrun.providers.transport import HttpxTransport

INVENTORY = ToolDefinition(
    "get_flower_inventory",
    "Returns the current flower stock of one city.",
    {"type": "object", "properties": {"city": {"type": "string", "enum": ["北京", "上海", "深圳"]}}, "required": ["city"]},
)
RECORDED_BODIES = ["groq", "deepseek", "alibaba"]
RECORDED_STREAMS = ["groq", "deepseek", "alibaba", "mistral", "mistral-incremental"]
EXPECTED_CALL = {  # what each recording asked for: (tool name, arguments)
    "groq": ("weather", {}),
    "deepseek": ("weather", {"location": "San Francisco"}),
    "alibaba": ("weather", {"location": "San Francisco"}),
    "mistral": ("weather", {"location": "San Francisco"}),
    "mistral-incremental": ("webSearchTool", {"query": "current Berlin weather"}),
}


def _request(messages: list[Message] | None = None, **settings: Any) -> ModelRequest:
    messages = messages or [Message("user", [TextPart("北京、上海和深圳的鲜花库存是多少?")])]
    return ModelRequest("gpt-4o-mini", "You answer questions about our flower shops.", messages, [INVENTORY],
                        ModelSettings(**settings))


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict | None = None) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": choices, "usage": usage}


def _sse(chunks: list[dict[str, Any]]) -> Reply:
    frames = [f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=frames)


def _completion(message: dict[str, Any], finish: str, prompt: int = 10, completion: int = 5) -> dict[str, Any]:
    return {"id": "chatcmpl-2", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


def _provider(url: str, transport: HttpxTransport | None = None, **headers: str) -> OpenAIChatProvider:
    return OpenAIChatProvider("gpt-4o-mini", ProviderConfig(url + "/v1", "sk-test-key", dict(headers)),
                              transport or HttpxTransport(max_retries=2))


def _answer_calls(request: ModelRequest, response, results: dict[str, str] | None = None) -> ModelRequest:
    """What the runner does between turns: unique ids, the assistant message, one result per call."""
    for position, call in enumerate(response.message.tool_calls):
        call.id = call.id if call.id and call.id not in {"0", "1"} else f"call_toolrun_{position}"
    tool_results = [ToolResult(call.id, call.name, (results or {}).get(call.id, f"玫瑰: {position}"))
                    for position, call in enumerate(response.message.tool_calls)]
    request.messages += [response.message, Message("tool", list(tool_results))]
    return request


def _assert_valid(body: dict[str, Any]) -> None:
    assert validate_against("CreateChatCompletionRequest", body) == []


# ---------------------------------------------------------------- recorded traffic


@pytest.mark.parametrize("name", RECORDED_BODIES)
def test_recorded_body_parses_to_one_call(fixtures_dir: Path, name: str):
    body = recorded_body(fixtures_dir, f"{name}-tool-call")
    response = parse_response(body)
    [call] = response.message.tool_calls
    assert (call.name, call.arguments) == EXPECTED_CALL[name]
    assert call.id == call.provider_id == body["choices"][0]["message"]["tool_calls"][0]["id"]
    assert response.stop_reason == "tool_calls"
    assert response.usage.input_tokens == body["usage"]["prompt_tokens"]
    assert response.usage.output_tokens == body["usage"]["completion_tokens"]
    assert response.message.text is None  # "" content and DeepSeek's reasoning_content are not text


@pytest.mark.parametrize("name", RECORDED_STREAMS)
def test_recorded_stream_assembles_the_same_call(fixtures_dir: Path, name: str):
    assembler, events = ChatStreamAssembler(), []
    for chunk in recorded_stream(fixtures_dir, f"{name}-tool-call"):
        events += assembler.feed(chunk)
    response = assembler.finish()
    [call] = response.message.tool_calls
    assert (call.name, call.arguments) == EXPECTED_CALL[name]
    assert call.id and call.id == call.provider_id
    assert response.stop_reason == "tool_calls"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert events == []  # a call-only stream has no text to show


@pytest.mark.parametrize("name", RECORDED_STREAMS)
def test_recorded_stream_replayed_over_loopback_sse(fixtures_dir: Path, loopback, name: str):
    chunks = recorded_stream(fixtures_dir, f"{name}-tool-call")
    server = loopback(lambda request: _sse(chunks))
    response = complete(_provider(server.url), _request(), stream=True)
    assert (response.message.tool_calls[0].name, response.message.tool_calls[0].arguments) == EXPECTED_CALL[name]
    _assert_valid(server.requests[0].json())


# ---------------------------------------------------------------- a whole round over loopback


def test_parallel_interleaved_stream_then_follow_up_is_valid(loopback):
    cities = ["北京", "上海", "深圳"]
    first = [_chunk({"role": "assistant", "content": None})]
    first += [_chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                      "function": {"name": "get_flower_inventory", "arguments": ""}}]}) for i in range(3)]
    for i in (2, 0, 1):  # arguments interleave across calls
        first.append(_chunk({"tool_calls": [{"index": i, "function": {"arguments": '{"city": '}}]}))
    for i in (1, 2, 0):
        first.append(_chunk({"tool_calls": [{"index": i, "function": {"arguments": json.dumps(cities[i], ensure_ascii=False) + "}"}}]}))
    first += [_chunk({}, "tool_calls"), _chunk(None, usage={"prompt_tokens": 95, "completion_tokens": 67})]
    second = [_chunk({"content": "北京有"}), _chunk({"content": "玫瑰 100 枝。"}, "stop"),
              _chunk(None, usage={"prompt_tokens": 235, "completion_tokens": 90})]
    replies = iter([_sse(first), _sse(second)])
    server = loopback(lambda request: next(replies))
    response, final, events = tool_round(_provider(server.url), _request(), _answer_calls, stream=True)
    assert [(c.id, c.arguments) for c in response.message.tool_calls] == [(f"call_{i}", {"city": c}) for i, c in enumerate(cities)]
    assert (response.stop_reason, response.usage.input_tokens, response.usage.output_tokens) == ("tool_calls", 95, 67)
    assert (final.message.text, final.stop_reason, final.usage.input_tokens) == ("北京有玫瑰 100 枝。", "stop", 235)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["北京有", "玫瑰 100 枝。"]

    follow_up = server.requests[1].json()
    _assert_valid(server.requests[0].json())
    _assert_valid(follow_up)
    assert [m["role"] for m in follow_up["messages"]] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assistant = follow_up["messages"][2]
    assert assistant["content"] is None
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_1", "call_2"]
    assert json.loads(assistant["tool_calls"][1]["function"]["arguments"]) == {"city": "上海"}
    assert [m["tool_call_id"] for m in follow_up["messages"][3:]] == ["call_0", "call_1", "call_2"]
    assert "上海" in server.requests[1].body.decode("utf-8")  # ensure_ascii=False on the wire


def test_missing_ids_in_a_stream_still_assemble_and_answer_with_the_runners_ids(loopback):
    # vLLM: no "id" at all in the fragments.
    first = [_chunk({"tool_calls": [{"index": i, "type": "function", "function": {"name": "get_flower_inventory"}}]}) for i in range(2)]
    first += [_chunk({"tool_calls": [{"index": i, "function": {"arguments": '{"city": "深圳"}'}}]}) for i in range(2)]
    first += [_chunk({}, "tool_calls")]
    replies = iter([_sse(first), _sse([_chunk({"content": "好"}, "stop")])])
    server = loopback(lambda request: next(replies))

    def answer(request: ModelRequest, response) -> ModelRequest:
        assert [(c.id, c.provider_id) for c in response.message.tool_calls] == [("", None), ("", None)]
        return _answer_calls(request, response)

    _, final, _ = tool_round(_provider(server.url), _request(), answer, stream=True)
    assert final.message.text == "好"
    follow_up = server.requests[1].json()
    _assert_valid(follow_up)
    assert [c["id"] for c in follow_up["messages"][2]["tool_calls"]] == ["call_toolrun_0", "call_toolrun_1"]
    assert [m["tool_call_id"] for m in follow_up["messages"][3:]] == ["call_toolrun_0", "call_toolrun_1"]


def test_index_stuck_at_zero_with_a_new_id_is_a_new_call():
    # lmdeploy / SGLang: every call at index 0, ids "0", "1"; a final empty-arguments repeat.
    assembler = ChatStreamAssembler()
    for chunk in [
        _chunk({"tool_calls": [{"index": 0, "id": "0", "function": {"name": "get_flower_inventory", "arguments": '{"city":'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "北京"}'}}]}),
        _chunk({"tool_calls": [{"index": 0, "id": "1", "function": {"name": "get_flower_inventory", "arguments": '{"city": "上海"}'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}, "tool_calls"),
    ]:
        assembler.feed(chunk)
    calls = assembler.finish().message.tool_calls
    assert [(c.provider_id, c.arguments) for c in calls] == [("0", {"city": "北京"}), ("1", {"city": "上海"})]


def test_empty_id_is_kept_empty_for_the_runner_to_replace():
    # Gemini's OpenAI endpoint sends id: "".
    body = _completion({"content": None, "tool_calls": [
        {"id": "", "type": "function", "function": {"name": "get_flower_inventory", "arguments": '{"city":"北京"}'}}]}, "tool_calls")
    [call] = parse_response(body).message.tool_calls
    assert (call.id, call.provider_id, call.arguments) == ("", "", {"city": "北京"})


def test_arguments_sent_as_an_object_are_used_and_reserialised(loopback):
    body = _completion({"content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_flower_inventory", "arguments": {"city": "北京"}}}]}, "tool_calls")
    stream = [_chunk({"tool_calls": [{"index": 0, "id": "call_b",
                                      "function": {"name": "get_flower_inventory", "arguments": {"city": "上海"}}}]}),
              _chunk({}, "tool_calls")]
    replies = iter([Reply(200, body), _sse(stream), Reply(200, _completion({"content": "ok"}, "stop"))])
    server = loopback(lambda request: next(replies))

    async def play(provider: OpenAIChatProvider):
        request = _request()
        whole = await provider.complete(request, stream=False)
        streamed = await provider.complete(request, stream=True)
        await provider.complete(_answer_calls(request, whole), stream=False)
        return whole, streamed

    whole, streamed = with_provider(_provider(server.url), play)
    assert whole.message.tool_calls[0].arguments == {"city": "北京"}
    assert whole.message.tool_calls[0].raw_arguments == '{"city": "北京"}'
    assert streamed.message.tool_calls[0].arguments == {"city": "上海"}
    follow_up = server.requests[2].json()
    _assert_valid(follow_up)
    assert follow_up["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"city": "北京"}'


def test_invalid_json_arguments_keep_the_raw_text_for_an_error_result():
    body = _completion({"tool_calls": [
        {"id": "call_x", "type": "function", "function": {"name": "get_flower_inventory", "arguments": '{"city": "北京"'}}]}, "tool_calls")
    [call] = parse_response(body).message.tool_calls
    assert (call.arguments, call.raw_arguments) == (None, '{"city": "北京"')
    assert parse_arguments("[1, 2]") == (None, "[1, 2]")  # JSON, but not an object
    assert parse_arguments("") == ({}, "{}")


def test_finish_reason_length_and_content_filter_are_normalised():
    cut = parse_response(_completion({"content": "北京有玫"}, "length"))
    assert (cut.stop_reason, cut.raw_stop_reason, cut.message.text) == ("length", "length", "北京有玫")
    assert parse_response(_completion({"content": None}, "content_filter")).stop_reason == "content_filter"
    # Some servers say "stop" although they called a tool: the calls decide.
    called = parse_response(_completion({"tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_flower_inventory", "arguments": "{}"}}]}, "stop"))
    assert called.stop_reason == "tool_calls"


def test_a_429_with_retry_after_zero_is_retried_then_succeeds(loopback):
    replies = iter([Reply(429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {"retry-after": "0"}),
                    Reply(200, _completion({"content": "ok"}, "stop"))])
    server = loopback(lambda request: next(replies))
    response = complete(_provider(server.url), _request(), stream=False)
    assert response.message.text == "ok"
    assert len(server.requests) == 2


def test_a_401_gives_the_providers_message_without_the_key(loopback):
    server = loopback(lambda request: Reply(401, {"error": {
        "message": "Incorrect API key provided: sk-test-key.", "type": "invalid_request_error", "code": "invalid_api_key"}}))
    for stream in (False, True):
        with pytest.raises(ProviderError, match="HTTP 401: Incorrect API key provided") as caught:
            complete(_provider(server.url), _request(), stream=stream)
        assert "sk-test-key" not in str(caught.value)  # the key is registered as a secret
        assert caught.value.status == 401


def test_an_error_event_mid_stream_is_a_provider_error(loopback):
    server = loopback(lambda request: _sse([_chunk({"content": "北"}), {"error": {"message": "model overloaded"}}]))
    with pytest.raises(ProviderError, match="model overloaded"):
        complete(_provider(server.url), _request(), stream=True)


# ---------------------------------------------------------------- request bodies


def test_request_body_shape_and_headers(loopback):
    server = loopback(lambda request: Reply(200, _completion({"content": "ok"}, "stop")))
    complete(_provider(server.url, **{"X-Gateway": "team-a"}), _request(temperature=0, max_tokens=200), stream=False)
    [sent] = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-key"
    assert sent.headers["x-gateway"] == "team-a"
    body = sent.json()
    _assert_valid(body)
    assert body["messages"][0] == {"role": "system", "content": "You answer questions about our flower shops."}
    assert body["tools"][0]["function"]["name"] == "get_flower_inventory"
    assert body["tools"][0]["function"]["parameters"] == INVENTORY.parameters
    assert body["temperature"] == 0
    assert body["max_tokens"] == 200  # a compatible server (loopback), not api.openai.com
    assert "stream" not in body and "tool_choice" not in body and "parallel_tool_calls" not in body


@pytest.mark.parametrize("choice, expected", [
    ("none", "none"), ("required", "required"),
    ("get_flower_inventory", {"type": "function", "function": {"name": "get_flower_inventory"}}),
])
def test_tool_choice_variants_are_valid(choice: str, expected: Any):
    body = build_request_body(_request(tool_choice=choice, parallel_tool_calls=False), stream=True)
    assert body["tool_choice"] == expected
    assert body["parallel_tool_calls"] is False
    assert body["stream_options"] == {"include_usage": True}
    _assert_valid(body)


def test_official_openai_uses_max_completion_tokens_and_extra_settings_merge():
    body = build_request_body(_request(max_tokens=50, extra={"seed": 7, "user": "ops"}), stream=False)
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body
    assert (body["seed"], body["user"]) == (7, "ops")
    _assert_valid(body)
    provider = OpenAIChatProvider("gpt-4o-mini", ProviderConfig("https://api.openai.com/v1", "k"))
    assert provider.max_tokens_field() == "max_completion_tokens"


def test_without_tools_no_tool_keys_are_sent():
    request = ModelRequest("gpt-4o-mini", None, [Message("user", [TextPart("hi")])], [],
                           ModelSettings(tool_choice="none", parallel_tool_calls=False))
    body = build_request_body(request, stream=False)
    assert body == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def test_the_schema_check_itself_catches_a_broken_body():
    broken = build_request_body(_request(), stream=False)
    broken["messages"].append({"role": "tool", "content": "no call id"})
    assert validate_against("CreateChatCompletionRequest", broken) != []


# ---------------------------------------------------------------- configuration


def test_configuration_comes_from_the_environment():
    config = OpenAIChatProvider.resolve_config(environ={"OPENAI_API_KEY": "sk-env-key", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1/"})
    assert (config.base_url, config.api_key) == ("http://127.0.0.1:8000/v1", "sk-env-key")
    assert OpenAIChatProvider.resolve_config(environ={"OPENAI_API_KEY": "k" * 8}).base_url == "https://api.openai.com/v1"
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAIChatProvider.resolve_config(environ={})
    assert get_provider_class("openai") is OpenAIChatProvider


# ---------------------------------------------------------------- the real runner over loopback

WEATHER_PY = '''
def weather(location="Berlin"):
    return {"location": location, "temperature_c": 18}

def get_flower_inventory(city):
    return {"北京": "玫瑰: 100", "上海": "玫瑰: 80", "深圳": "玫瑰: 60"}[city]
'''
WEATHER_YAML = '''
tools:
  - name: weather
    description: Returns the current weather of one place. Use it for weather questions only.
    parameters:
      type: object
      properties:
        location: {type: string, description: A city name}
    backend: {python: "tools.py:weather"}
  - name: get_flower_inventory
    description: Returns the current flower stock of one city. Use it for stock questions only.
    parameters:
      type: object
      properties:
        city: {type: string, enum: [北京, 上海, 深圳], description: City name}
      required: [city]
    backend: {python: "tools.py:get_flower_inventory"}
'''


@pytest.mark.parametrize("name", RECORDED_STREAMS)
def test_recorded_stream_drives_a_whole_run_and_every_follow_up_is_valid(fixtures_dir: Path, loopback, tmp_path: Path, name: str):
    catalog = write_catalog(tmp_path, WEATHER_PY, WEATHER_YAML)
    replies = iter([_sse(recorded_stream(fixtures_dir, f"{name}-tool-call")),
                    _sse([_chunk({"content": "18°C in San Francisco."}, "stop")])])
    server = loopback(lambda request: next(replies))
    tool_name = EXPECTED_CALL[name][0]
    tools = [catalog.get("weather")] if tool_name == "weather" else []
    result = run_through_runner(_provider(server.url), tools, user("What is the weather in San Francisco?"), stream=True)

    assert (result.stop_reason, result.final, result.error) == ("stop", "18°C in San Francisco.", None)
    for request in server.requests:
        _assert_valid(request.json())
    recorded_id = result.turns[0].tool_calls[0].id
    follow_up = server.requests[1].json()["messages"]
    assert follow_up[-2]["tool_calls"][0]["id"] == follow_up[-1]["tool_call_id"] == recorded_id
    if tool_name == "weather":  # the real tool ran and its result went back
        assert json.loads(follow_up[-1]["content"])["temperature_c"] == 18
    else:  # a tool the catalog does not have: an error result the model can act on, not a crash
        assert result.turns[0].tool_calls[0].is_error


@pytest.mark.parametrize("name", RECORDED_BODIES)
def test_recorded_body_drives_a_whole_run(fixtures_dir: Path, loopback, tmp_path: Path, name: str):
    body = recorded_body(fixtures_dir, f"{name}-tool-call")
    replies = iter([Reply(200, body), Reply(200, _completion({"content": "18°C."}, "stop"))])
    server = loopback(lambda request: next(replies))
    weather = write_catalog(tmp_path, WEATHER_PY, WEATHER_YAML).get("weather")
    result = run_through_runner(_provider(server.url), [weather], user("Weather in San Francisco?"), stream=False)
    assert (result.stop_reason, result.final) == ("stop", "18°C.")
    assert result.usage.input_tokens == body["usage"]["prompt_tokens"] + 10
    follow_up = server.requests[1].json()
    _assert_valid(follow_up)
    assert follow_up["messages"][-1]["tool_call_id"] == body["choices"][0]["message"]["tool_calls"][0]["id"]


def test_ids_repeated_across_turns_are_made_unique_by_the_run(loopback, tmp_path: Path):
    # SGLang / lmdeploy: every turn numbers its calls "0", "1" again, index stuck at 0.
    def turn(city: str) -> Reply:
        return _sse([_chunk({"tool_calls": [{"index": 0, "id": "0", "type": "function",
                                             "function": {"name": "get_flower_inventory",
                                                          "arguments": json.dumps({"city": city}, ensure_ascii=False)}}]}),
                     _chunk({}, "tool_calls")])

    replies = iter([turn("北京"), turn("上海"), _sse([_chunk({"content": "北京 100, 上海 80"}, "stop")])])
    server = loopback(lambda request: next(replies))
    inventory = write_catalog(tmp_path, WEATHER_PY, WEATHER_YAML).get("get_flower_inventory")
    result = run_through_runner(_provider(server.url), [inventory], user("北京和上海?"), stream=True)
    assert result.final == "北京 100, 上海 80"
    last = server.requests[2].json()
    _assert_valid(last)
    sent_ids = [m["tool_calls"][0]["id"] for m in last["messages"] if m["role"] == "assistant"]
    result_ids = [m["tool_call_id"] for m in last["messages"] if m["role"] == "tool"]
    assert sent_ids == result_ids and len(set(sent_ids)) == 2
    assert [m["content"] for m in last["messages"] if m["role"] == "tool"] == ["玫瑰: 100", "玫瑰: 80"]


@pytest.mark.parametrize("kind", ["json", "chunks.txt"])
def test_deepseek_reasoning_of_a_tool_call_turn_is_sent_back(fixtures_dir: Path, kind: str):
    # DeepSeek's thinking mode answers 400 when a tool-call turn's reasoning_content is missing.
    path = fixtures_dir / "recorded" / f"vercel-ai--deepseek-tool-call.{kind}"
    if kind == "json":
        response = parse_response(json.loads(path.read_text()))
    else:
        assembler = ChatStreamAssembler()
        for line in path.read_text().splitlines():
            assembler.feed(json.loads(line))
        response = assembler.finish()
    reasoning = response.message.provider_data["openai"]["reasoning_content"]
    assert reasoning.startswith("The user is asking for the weather in San Francisco")
    body = build_request_body(_answer_calls(_request(), response), stream=False)
    _assert_valid(body)
    assert body["messages"][2]["reasoning_content"] == reasoning
    # A plain answer's reasoning is not kept (DeepSeek ignores it there; others may reject it).
    plain = parse_response(_completion({"content": "ok", "reasoning_content": "thinking..."}, "stop"))
    assert plain.message.provider_data == {}
    assert "reasoning_content" not in build_request_body(_answer_calls(_request(), plain), stream=False)["messages"][2]


def test_a_server_that_ignores_stream_and_answers_with_one_body_still_works(loopback):
    # Older LM Studio / vLLM builds answered tool requests with a plain JSON body despite "stream": true.
    body = _completion({"content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_flower_inventory", "arguments": '{"city": "北京"}'}}]}, "tool_calls")
    server = loopback(lambda request: Reply(200, body))
    response = complete(_provider(server.url), _request(), stream=True)
    assert (response.message.tool_calls[0].arguments, response.stop_reason) == ({"city": "北京"}, "tool_calls")


def test_content_as_a_list_of_parts_keeps_only_the_text():
    # Mistral's reasoning models answer with typed chunks; thinking is not the answer.
    content = [{"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]}, {"type": "text", "text": "北京有玫瑰。"}]
    assert parse_response(_completion({"content": content}, "stop")).message.text == "北京有玫瑰。"
    assembler = ChatStreamAssembler()
    events = assembler.feed(_chunk({"content": [{"type": "text", "text": "北京"}]}))
    events += assembler.feed(_chunk({"content": "有玫瑰。"}, "stop"))
    assert [e.text for e in events] == ["北京", "有玫瑰。"]
    assert assembler.finish().message.text == "北京有玫瑰。"
