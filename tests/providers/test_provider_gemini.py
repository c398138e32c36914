"""The Gemini generateContent adapter: recorded traffic parsed whole and streamed, request
mapping, and a loopback server speaking the wire format (SSE ``data:`` frames, each a whole
GenerateContentResponse). Every follow-up request is checked against the rules the API
enforces (``gemini_rejections``)."""

from __future__ import annotations

import dataclasses
import json
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
from toolrun.core.retry_after import retry_delay
from toolrun.loop.runner import RunSettings, run_conversation
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig
from toolrun.providers.gemini import (
    GeminiProvider,
    GeminiStreamAssembler,
    build_request_body,
    json_path_steps,
    normalise_stop_reason,
    parse_response,
)
from toolrun.providers.transport import HttpxTransport

KEY = "AIzaSy-test-key-0123456789"
WEATHER = ToolDefinition("weather", "Current weather of one city. Use for weather questions only.",
                         {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]})
READ_SCREEN = ToolDefinition("read_screen", "Reads one screen of the design by id.",
                             {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})
READ_THEME = ToolDefinition("read_theme", "Reads the design theme. Takes no arguments.", {"type": "object", "properties": {}})
RECORDED_WHOLE = ["google-tool-call", "google-tool-call-gemini3"]
RECORDED_STREAMS = ["google-tool-call", "google-stream-no-args-tool-call"]
EXPECTED_CALLS = {  # what each recording asked for: (name, arguments) per call
    "google-tool-call": [("weather", {"location": "San Francisco"})],
    "google-tool-call-gemini3": [("weather", {"location": "San Francisco"})],
    "google-stream-no-args-tool-call": [("read_theme", {}), ("read_screen", {"id": "A"}),
                                        ("read_screen", {"id": "B"}), ("read_screen", {"id": "C"})],
}


def _recorded_signatures(recording: list[dict[str, Any]]) -> list[str]:
    return [part["thoughtSignature"] for chunk in recording for candidate in chunk.get("candidates", [])
            for part in candidate["content"].get("parts", []) if "functionCall" in part and "thoughtSignature" in part]


def sse(chunks: list[dict[str, Any]]) -> list[str]:
    """Gemini's framing with alt=sse: ``data:`` lines only."""
    return [f"data: {json.dumps(chunk, ensure_ascii=False)}\r\n\r\n" for chunk in chunks]


def _request(messages: list[Message], **settings: Any) -> ModelRequest:
    return ModelRequest("gemini-3-pro-preview", "You answer weather questions.", messages,
                        [WEATHER, READ_SCREEN, READ_THEME], ModelSettings(**settings))


def _question() -> list[Message]:
    return [Message("user", [TextPart("What is the weather in 北京 and San Francisco?")])]


def _make_ids_unique(message: Message) -> None:
    """What the runner does with Gemini's missing ids: its own unique ``ToolCall.id``."""
    for number, call in enumerate(message.tool_calls, start=1):
        call.id = call.provider_id or f"call_{number}"


def _answer(response: ModelResponse, *, reverse: bool = False) -> list[Message]:
    """The runner's appendix after a tool-call turn: the message, then one result per call."""
    _make_ids_unique(response.message)
    results = [ToolResult(call.id, call.name, f"result of {call.name} {json.dumps(call.arguments, ensure_ascii=False)}")
               for call in response.message.tool_calls]
    return [response.message, Message("tool", results[::-1] if reverse else results)]


def gemini_rejections(body: dict[str, Any]) -> list[str]:
    """Why generateContent would refuse ``body`` (empty when it would accept it)."""
    problems: list[str] = []
    contents = body.get("contents") or []
    if not contents or contents[0].get("role") != "user":
        problems.append("contents must start with a user turn")
    for index, content in enumerate(contents):
        role = content.get("role")
        if role not in ("user", "model"):
            problems.append(f"contents[{index}]: role {role!r}")
        if index and role == contents[index - 1].get("role"):
            problems.append(f"contents[{index}]: two {role} turns in a row")
        parts = content.get("parts") or []
        if not parts:
            problems.append(f"contents[{index}]: no parts")
        for part in parts:
            data_fields = {"text", "functionCall", "functionResponse", "inlineData", "executableCode", "codeExecutionResult"} & set(part)
            if len(data_fields) != 1:
                problems.append(f"contents[{index}]: a part needs exactly one data field, has {sorted(data_fields)}")
            if "functionCall" in part and role != "model":
                problems.append(f"contents[{index}]: functionCall in a {role} turn")
            if "functionResponse" in part:
                if role != "user":
                    problems.append(f"contents[{index}]: functionResponse in a {role} turn")
                response = part["functionResponse"]
                if not isinstance(response.get("response"), dict) or not response.get("name"):
                    problems.append(f"contents[{index}]: functionResponse needs a name and a response object")
        calls = [part["functionCall"] for part in parts if "functionCall" in part]
        if calls and index + 1 < len(contents):
            answers = [part["functionResponse"] for part in contents[index + 1].get("parts") or [] if "functionResponse" in part]
            if [a.get("name") for a in answers] != [c.get("name") for c in calls]:
                problems.append(f"contents[{index + 1}]: functionResponse names {[a.get('name') for a in answers]} "
                                f"do not answer the calls {[c.get('name') for c in calls]} in order")
            if [a.get("id") for a in answers] != [c.get("id") for c in calls]:
                problems.append(f"contents[{index + 1}]: functionResponse ids must echo the call ids (or be absent)")
    for tool in body.get("tools") or []:
        for declaration in tool.get("functionDeclarations") or []:
            if not declaration.get("name") or ("parameters" in declaration and "parametersJsonSchema" in declaration):
                problems.append(f"functionDeclaration {declaration.get('name')!r}")
            problems.extend(f"functionDeclaration {declaration.get('name')!r}: {problem}"
                            for problem in _outside_gemini_subset(declaration.get("parameters")))
    mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
    if mode is not None and mode not in ("AUTO", "ANY", "NONE", "VALIDATED"):
        problems.append(f"functionCallingConfig.mode {mode!r}")
    return problems


def _outside_gemini_subset(schema: Any, path: str = "parameters") -> list[str]:
    """Keywords of ``parameters`` (OpenAPI subset) that generateContent refuses."""
    if isinstance(schema, list):
        return [p for i, item in enumerate(schema) for p in _outside_gemini_subset(item, f"{path}[{i}]")]
    if not isinstance(schema, dict):
        return []
    problems = [f"{path}.{key}" for key in ("additionalProperties", "$ref", "$defs", "oneOf", "allOf", "const", "$schema")
                if key in schema]
    if isinstance(schema.get("type"), list):
        problems.append(f"{path}.type is a list")
    if schema.get("type") == "object" and "properties" in schema and not schema["properties"]:
        problems.append(f"{path}.properties is empty for an object")
    for key in ("properties",):
        for name, sub in (schema.get(key) or {}).items():
            problems.extend(_outside_gemini_subset(sub, f"{path}.{key}.{name}"))
    for key in ("items", "anyOf"):
        if key in schema:
            problems.extend(_outside_gemini_subset(schema[key], f"{path}.{key}"))
    return problems


# ------------------------------------------------------------------- recorded traffic


@pytest.mark.parametrize("name", RECORDED_WHOLE)
def test_recorded_call_whole(fixtures_dir, name):
    body = recorded_body(fixtures_dir, name)
    response = parse_response(body)
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == EXPECTED_CALLS[name]
    [call] = response.message.tool_calls
    assert (call.id, call.provider_id) == ("", None)  # Gemini sent no id: the runner makes one
    assert call.provider_data == {"gemini": {"thoughtSignature": body["candidates"][0]["content"]["parts"][0]["thoughtSignature"]}}
    assert response.stop_reason == "tool_calls" and response.raw_stop_reason == "STOP"
    usage = body["usageMetadata"]  # thinking tokens are output the request paid for
    assert (response.usage.input_tokens, response.usage.output_tokens) == (
        29, usage["candidatesTokenCount"] + usage["thoughtsTokenCount"])


@pytest.mark.parametrize("name", RECORDED_STREAMS)
def test_recorded_call_streamed(fixtures_dir, name):
    events: list[Any] = []
    assembler = GeminiStreamAssembler()
    recording = recorded_stream(fixtures_dir, name)
    for chunk in recording:
        events += assembler.feed(chunk)
    response = assembler.finish()
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == EXPECTED_CALLS[name]
    assert response.stop_reason == "tool_calls"
    signatures = [c.provider_data["gemini"]["thoughtSignature"] for c in response.message.tool_calls if c.provider_data]
    assert signatures == _recorded_signatures(recording)
    assert response.message.text is None  # thought summaries are not the answer
    assert not [e for e in events if isinstance(e, TextDelta)]


def test_streamed_arguments_are_put_back_together(fixtures_dir):
    assembler = GeminiStreamAssembler()
    for chunk in recorded_stream(fixtures_dir, "google-stream-no-args-tool-call"):
        assembler.feed(chunk)
    response = assembler.finish()
    thought, *calls = response.message.parts
    assert isinstance(thought, OpaquePart) and thought.data["thought"] is True
    assert [c.raw_arguments for c in calls] == ["{}", '{"id": "A"}', '{"id": "B"}', '{"id": "C"}']
    assert (response.usage.input_tokens, response.usage.output_tokens) == (249, 58 + 183)


def test_streamed_arguments_of_several_types():
    chunks = [
        {"functionCall": {"name": "book", "willContinue": True}},
        {"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "北", "willContinue": True}], "willContinue": True}},
        {"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "京"}], "willContinue": True}},
        {"functionCall": {"partialArgs": [{"jsonPath": "$.nights", "numberValue": 2},
                                          {"jsonPath": "$.rooms[1].view", "boolValue": True},
                                          {"jsonPath": "$['late checkout']", "nullValue": None}], "willContinue": True}},
        {"functionCall": {}},
    ]
    assembler = GeminiStreamAssembler()
    for part in chunks:
        assembler.feed({"candidates": [{"content": {"role": "model", "parts": [part]}}]})
    assembler.feed({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]})
    [call] = assembler.finish().message.tool_calls
    assert call.arguments == {"city": "北京", "nights": 2, "rooms": [None, {"view": True}], "late checkout": None}


def test_json_path_steps():
    assert json_path_steps("$.a.b[2]['c d']") == ["a", "b", 2, "c d"]
    with pytest.raises(ValueError):
        json_path_steps("a.b")


def test_streamed_text_is_merged_and_its_signature_kept():
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "北京 is "}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "sunny."}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "SIG-TEXT"}]}, "finishReason": "STOP"}],
         "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4}},
    ]
    events: list[Any] = []
    assembler = GeminiStreamAssembler()
    for chunk in chunks:
        events += assembler.feed(chunk)
    response = assembler.finish()
    assert response.message.parts == [TextPart("北京 is sunny.")]
    assert [e.text for e in events] == ["北京 is ", "sunny."]
    assert response.stop_reason == "stop"
    history = _question() + [response.message, Message("user", [TextPart("and tomorrow?")])]
    body = build_request_body(_request(history), stream=True)
    assert body["contents"][1] == {"role": "model", "parts": [{"text": "北京 is sunny.", "thoughtSignature": "SIG-TEXT"}]}
    assert gemini_rejections(body) == []


# ------------------------------------------------------------------------ the request


def test_request_body_basics():
    body = build_request_body(_request(_question(), temperature=0.2, max_tokens=256, extra={"safetySettings": []}), stream=False)
    assert body["contents"] == [{"role": "user", "parts": [{"text": "What is the weather in 北京 and San Francisco?"}]}]
    assert body["systemInstruction"] == {"parts": [{"text": "You answer weather questions."}]}
    assert body["generationConfig"] == {"temperature": 0.2, "maxOutputTokens": 256}
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert body["safetySettings"] == []
    [tools] = body["tools"]
    assert [d["name"] for d in tools["functionDeclarations"]] == ["weather", "read_screen", "read_theme"]
    assert tools["functionDeclarations"][0]["description"] == WEATHER.description
    assert gemini_rejections(body) == []


def test_tool_schemas_go_through_the_catalogs_gemini_conversion():
    strict_style = ToolDefinition("book", "Books a room in one city.", {
        "type": "object", "additionalProperties": False, "required": ["city", "note"],
        "properties": {"city": {"type": "string", "enum": ["北京", "上海"]},
                       "note": {"type": ["string", "null"], "description": "free text"}}})
    request = ModelRequest("gemini-2.5-flash", None, _question(), [strict_style, READ_THEME])
    body = build_request_body(request, stream=False)
    assert gemini_rejections(body) == []
    book, theme = body["tools"][0]["functionDeclarations"]
    assert book["parameters"]["properties"]["note"] == {"type": "string", "description": "free text", "nullable": True}
    assert "parameters" not in theme  # a tool without arguments declares none


def test_extra_settings_merge_into_the_generation_config():
    extra = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    body = build_request_body(_request(_question(), temperature=0, extra=extra), stream=False)
    assert body["generationConfig"] == {"temperature": 0, "thinkingConfig": {"includeThoughts": True}}


@pytest.mark.parametrize("choice, expected", [
    ("auto", {"mode": "AUTO"}),
    ("required", {"mode": "ANY"}),
    ("none", {"mode": "NONE"}),
    ("weather", {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
])
def test_tool_choice(choice, expected):
    body = build_request_body(_request(_question(), tool_choice=choice), stream=False)
    assert body["toolConfig"] == {"functionCallingConfig": expected}


def test_history_echoes_signatures_on_their_part_and_answers_in_call_order():
    thought = {"text": "Two cities: two calls.", "thought": True}
    first = ToolCall("call_1", "weather", {"location": "北京"}, '{"location": "北京"}', None, {"gemini": {"thoughtSignature": "SIG-1"}})
    second = ToolCall("call_2", "weather", {"location": "San Francisco"}, "{}", None)
    with_id = ToolCall("fc_7", "read_theme", {}, "{}", "fc_7")
    assistant = Message("assistant", [OpaquePart("gemini", thought), TextPart("Checking."), first, second, with_id,
                                      OpaquePart("anthropic", {"type": "thinking"})])
    # results arrive out of order and in separate tool messages
    history = _question() + [assistant,
                             Message("tool", [ToolResult("fc_7", "read_theme", "dark", provider_id="fc_7")]),
                             Message("tool", [ToolResult("call_2", "weather", "HTTP 503", is_error=True),
                                              ToolResult("call_1", "weather", "晴")])]
    body = build_request_body(_request(history), stream=False)
    assert gemini_rejections(body) == []
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][1]["parts"] == [
        thought,
        {"text": "Checking."},
        {"functionCall": {"name": "weather", "args": {"location": "北京"}}, "thoughtSignature": "SIG-1"},
        {"functionCall": {"name": "weather", "args": {"location": "San Francisco"}}},
        {"functionCall": {"name": "read_theme", "args": {}, "id": "fc_7"}},
    ]
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "weather", "response": {"output": "晴"}}},
        {"functionResponse": {"name": "weather", "response": {"error": "HTTP 503"}}},
        {"functionResponse": {"name": "read_theme", "id": "fc_7", "response": {"output": "dark"}}},
    ]


def test_the_rejection_checker_catches_a_missing_answer():
    body = {"contents": [
        {"role": "user", "parts": [{"text": "q"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "a", "args": {}}}, {"functionCall": {"name": "b", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "b", "response": {"output": "1"}}}]},
    ]}
    assert gemini_rejections(body)


# ------------------------------------------------------------------------ the response


@pytest.mark.parametrize("raw, has_calls, expected", [
    ("STOP", False, "stop"), ("STOP", True, "tool_calls"), (None, True, "tool_calls"),
    ("MAX_TOKENS", False, "length"), ("MAX_TOKENS", True, "length"),
    ("SAFETY", False, "content_filter"), ("RECITATION", False, "content_filter"), ("BLOCKLIST", False, "content_filter"),
    ("PROHIBITED_CONTENT", False, "content_filter"), ("SPII", False, "content_filter"),
    ("MALFORMED_FUNCTION_CALL", False, "error"), ("MALFORMED_FUNCTION_CALL", True, "tool_calls"),
    ("UNEXPECTED_TOOL_CALL", True, "error"),
])
def test_stop_reasons(raw, has_calls, expected):
    assert normalise_stop_reason(raw, has_calls) == expected


def test_a_blocked_prompt_is_a_content_filter_stop():
    response = parse_response({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 8}})
    assert (response.stop_reason, response.message.parts, response.usage.input_tokens) == ("content_filter", [], 8)


def test_an_error_body_raises():
    with pytest.raises(ProviderError, match="INVALID_ARGUMENT: bad schema") as caught:
        parse_response({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "bad schema"}})
    assert caught.value.retryable is False


def test_a_stream_that_stops_half_way_is_an_error(fixtures_dir):
    assembler = GeminiStreamAssembler()
    for chunk in recorded_stream(fixtures_dir, "google-stream-no-args-tool-call")[:4]:  # inside a streamed call
        assembler.feed(chunk)
    with pytest.raises(ProviderError, match="finishReason"):
        assembler.finish()


# -------------------------------------------------------------- provider configuration


def test_registered_and_configured_from_the_environment():
    assert get_provider_class("gemini") is GeminiProvider
    assert GeminiProvider.resolve_config(environ={"GOOGLE_API_KEY": KEY}).api_key == KEY
    config = GeminiProvider.resolve_config(environ={"GEMINI_API_KEY": KEY, "GOOGLE_API_KEY": "other-key",
                                                    "GEMINI_BASE_URL": "http://gw.local/"})
    assert (config.api_key, config.base_url) == (KEY, "http://gw.local")
    with pytest.raises(UserError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiProvider.resolve_config(environ={})


def test_retry_delay_from_a_retry_info_body():
    body = json.dumps({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota", "details": [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34s"}]}})
    assert retry_delay({}, 0, body) == 34.0
    assert retry_delay({"retry-after": "2"}, 0, body) == 2.0  # a header still wins


# ---------------------------------------------------------------- loopback, end to end


def _provider(server, **transport: Any) -> GeminiProvider:
    config = ProviderConfig(base_url=server.url, api_key=KEY)
    return GeminiProvider("gemini-3-pro-preview", config, HttpxTransport(**transport))


FINAL_CHUNKS = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "北京 and San Francisco "}]}}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "are both sunny."}]}, "finishReason": "STOP"}],
     "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 9, "totalTokenCount": 129}},
]
FINAL_BODY = {"candidates": [{"content": {"role": "model", "parts": [{"text": "北京 and San Francisco are both sunny."}]},
                              "finishReason": "STOP"}],
              "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 9, "totalTokenCount": 129}}
PARALLEL_CHUNKS = [  # two calls of one tool in one chunk; the signature rides on the first only
    {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "weather", "args": {"location": "北京"}}, "thoughtSignature": "SIG-PARALLEL"},
        {"functionCall": {"name": "weather", "args": {"location": "San Francisco"}}}]}}],
     "usageMetadata": {"promptTokenCount": 60, "candidatesTokenCount": 20}},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}],
     "usageMetadata": {"promptTokenCount": 60, "candidatesTokenCount": 20, "thoughtsTokenCount": 100}},
]


def _two_turns(server, *, stream: bool, reverse: bool = False) -> tuple[ModelResponse, ModelResponse, list[Any]]:
    """Play one tool round as the runner would: ask, answer the calls, ask again."""
    return tool_round(_provider(server), _request(_question()),
                      lambda request, first: _request(_question() + _answer(first, reverse=reverse)), stream=stream)


def _check_http(server, *, stream: bool) -> None:
    for recorded in server.requests:
        method = "streamGenerateContent" if stream else "generateContent"
        assert recorded.method == "POST" and recorded.path == f"/v1beta/models/gemini-3-pro-preview:{method}"
        assert recorded.query == ({"alt": ["sse"]} if stream else {})  # and never ?key=
        assert recorded.headers["x-goog-api-key"] == KEY
        assert gemini_rejections(recorded.json()) == []


def _model_turn_of_recording(fixtures_dir: Path, name: str, stream: bool) -> list[dict[str, Any]]:
    if not stream:
        return recorded_body(fixtures_dir, name)["candidates"][0]["content"]["parts"]
    return [part for chunk in recorded_stream(fixtures_dir, name) for part in chunk["candidates"][0]["content"]["parts"]]


@pytest.mark.parametrize("name, stream", [("google-tool-call", False), ("google-tool-call-gemini3", False),
                                          ("google-tool-call", True)])
def test_recorded_turn_replayed_by_a_loopback_server(loopback, fixtures_dir, name, stream):
    def handler(request: Recorded) -> Reply:
        first = len(server.requests) == 1
        if stream:
            chunks = recorded_stream(fixtures_dir, name) if first else FINAL_CHUNKS
            return Reply(200, chunks=sse(chunks), headers={"Content-Type": "text/event-stream"})
        return Reply(200, recorded_body(fixtures_dir, name) if first else FINAL_BODY)

    server = loopback(handler)
    first, second, _ = _two_turns(server, stream=stream)
    assert [(c.name, c.arguments) for c in first.message.tool_calls] == EXPECTED_CALLS[name]
    assert second.message.text == "北京 and San Francisco are both sunny." and second.stop_reason == "stop"
    _check_http(server, stream=stream)
    follow_up = server.requests[1].json()["contents"]
    recorded_parts = [p for p in _model_turn_of_recording(fixtures_dir, name, stream) if "functionCall" in p]
    # the call part goes back exactly as recorded: same call, same signature on the same part
    assert [p for p in follow_up[1]["parts"] if "functionCall" in p] == recorded_parts
    assert follow_up[2]["parts"] == [{"functionResponse": {"name": "weather", "response": {
        "output": 'result of weather {"location": "San Francisco"}'}}}]


def test_streamed_arguments_recording_replayed_by_a_loopback_server(loopback, fixtures_dir):
    answers = iter([recorded_stream(fixtures_dir, "google-stream-no-args-tool-call"), FINAL_CHUNKS])
    server = loopback(lambda request: Reply(200, chunks=sse(next(answers))))
    first, second, _ = _two_turns(server, stream=True)
    _check_http(server, stream=True)
    model_turn, answers_turn = server.requests[1].json()["contents"][1:3]
    calls = [part for part in model_turn["parts"] if "functionCall" in part]
    assert [c["functionCall"] for c in calls] == [
        {"name": "read_theme", "args": {}}, {"name": "read_screen", "args": {"id": "A"}},
        {"name": "read_screen", "args": {"id": "B"}}, {"name": "read_screen", "args": {"id": "C"}}]
    assert calls[0]["thoughtSignature"].startswith("AY89a18a8") and all("thoughtSignature" not in c for c in calls[1:])
    assert [a["functionResponse"]["name"] for a in answers_turn["parts"]] == ["read_theme", "read_screen", "read_screen", "read_screen"]
    assert "partialArgs" not in json.dumps(model_turn) and "willContinue" not in json.dumps(model_turn)


@pytest.mark.parametrize("stream", [False, True])
def test_parallel_calls_without_ids_end_to_end(loopback, stream):
    whole = {"candidates": [{"content": {"role": "model", "parts": [
        part for chunk in PARALLEL_CHUNKS for part in chunk["candidates"][0]["content"]["parts"] if "functionCall" in part]},
        "finishReason": "STOP"}], "usageMetadata": PARALLEL_CHUNKS[-1]["usageMetadata"]}
    answers = iter([PARALLEL_CHUNKS, FINAL_CHUNKS] if stream else [whole, FINAL_BODY])
    server = loopback(lambda request: Reply(200, chunks=sse(next(answers))) if stream else Reply(200, next(answers)))
    first, second, events = _two_turns(server, stream=stream, reverse=True)

    assert [c.arguments for c in first.message.tool_calls] == [{"location": "北京"}, {"location": "San Francisco"}]
    assert [c.id for c in first.message.tool_calls] == ["call_1", "call_2"]  # given by the "runner"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (60, 120)
    _check_http(server, stream=stream)
    model_turn, answers_turn = server.requests[1].json()["contents"][1:3]
    assert model_turn["parts"][0]["thoughtSignature"] == "SIG-PARALLEL" and "thoughtSignature" not in model_turn["parts"][1]
    # results were handed over in reverse; they go back in call order, without ids Gemini never sent
    assert answers_turn["parts"] == [
        {"functionResponse": {"name": "weather", "response": {"output": 'result of weather {"location": "北京"}'}}},
        {"functionResponse": {"name": "weather", "response": {"output": 'result of weather {"location": "San Francisco"}'}}},
    ]
    if stream:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "北京 and San Francisco are both sunny."


def test_an_error_mid_stream_raises(loopback):
    chunks = FINAL_CHUNKS[:1] + [{"error": {"code": 503, "status": "UNAVAILABLE", "message": "The model is overloaded."}}]
    server = loopback(lambda request: Reply(200, chunks=sse(chunks)))

    with pytest.raises(ProviderError, match="UNAVAILABLE: The model is overloaded") as caught:
        complete(_provider(server), _request(_question()), stream=True)
    assert caught.value.retryable is True


@pytest.mark.parametrize("stream", [False, True])
def test_429_with_retry_info_is_retried_then_succeeds(loopback, stream):
    exhausted = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}]}}
    answers = iter([Reply(429, exhausted), Reply(200, chunks=sse(FINAL_CHUNKS)) if stream else Reply(200, FINAL_BODY)])
    server = loopback(lambda request: next(answers))

    response = complete(_provider(server), _request(_question()), stream=stream)
    assert response.message.text == "北京 and San Francisco are both sunny."
    assert len(server.requests) == 2


def test_a_bad_request_names_the_problem_and_keeps_the_key_out(loopback):
    server = loopback(lambda request: Reply(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                             "message": f"API key {KEY} not valid"}}))

    GeminiProvider.resolve_config(environ={"GEMINI_API_KEY": KEY})  # registers the key for redaction
    with pytest.raises(ProviderError) as caught:
        complete(_provider(server, max_retries=0), _request(_question()), stream=False)
    assert "HTTP 400" in str(caught.value) and KEY not in str(caught.value)


# ------------------------------------------------------- the real runner, end to end

TOOLS_PY = '''
def weather(location):
    return f"{location}: 18°C, sunny"

def read_theme():
    return "dark theme"

def read_screen(id):
    return f"screen {id}: login form"
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
  - name: read_theme
    description: >-
      Reads the design theme of the app. Use it before reading screens; do not use it to
      change the theme.
    parameters: {type: object, properties: {}}
    backend: {python: "tools.py:read_theme"}
  - name: read_screen
    description: >-
      Reads one screen of the design by its id. Use it once per screen; do not use it for
      the theme.
    parameters:
      type: object
      properties: {id: {type: string, description: Screen id such as A}}
      required: [id]
    backend: {python: "tools.py:read_screen"}
'''


@pytest.fixture
def catalog_tools(tmp_path: Path):
    return load_tools(tmp_path, TOOLS_PY, TOOLS_YAML)


@pytest.mark.parametrize("name, stream", [
    ("google-tool-call", False), ("google-tool-call-gemini3", False),
    ("google-tool-call", True), ("google-stream-no-args-tool-call", True),
])
def test_recorded_turn_through_the_runner(loopback, fixtures_dir, catalog_tools, name, stream):

    def handler(request: Recorded) -> Reply:
        first = len(server.requests) == 1
        if stream:
            return Reply(200, chunks=sse(recorded_stream(fixtures_dir, name) if first else FINAL_CHUNKS))
        return Reply(200, recorded_body(fixtures_dir, name) if first else FINAL_BODY)

    server = loopback(handler)
    result = run_through_runner(_provider(server), catalog_tools, _question(), system="You help.", stream=stream)
    assert (result.stop_reason, result.error, result.final) == ("stop", None, "北京 and San Francisco are both sunny.")
    calls = result.turns[0].tool_calls
    assert [(c.name, c.arguments) for c in calls] == EXPECTED_CALLS[name]
    assert not any(c.is_error for c in calls)
    assert len({c.id for c in calls}) == len(calls) and all(c.id for c in calls)  # the runner's unique ids
    _check_http(server, stream=stream)
    model_turn, answers = server.requests[1].json()["contents"][1:3]
    assert [p["functionCall"]["name"] for p in model_turn["parts"] if "functionCall" in p] == [c.name for c in calls]
    assert answers["parts"] == [{"functionResponse": {"name": c.name, "response": {"output": c.result}}} for c in calls]
    recording = recorded_stream(fixtures_dir, name) if stream else [recorded_body(fixtures_dir, name)]
    assert [p["thoughtSignature"] for p in model_turn["parts"] if "thoughtSignature" in p] == _recorded_signatures(recording)
    document = dataclasses.replace(result, recipe="design", model="gemini:gemini-3-pro-preview", mode="live").to_json()
    assert [c["name"] for c in document["turns"][0]["tool_calls"]] == [c.name for c in calls]
    assert document["usage"]["requests"] == 2


def test_an_empty_model_answer_does_not_split_the_user_side():
    history = _question() + [Message("assistant", []), Message("user", [TextPart("Please answer.")])]
    body = build_request_body(_request(history), stream=False)
    assert gemini_rejections(body) == []
    assert body["contents"] == [{"role": "user", "parts": [
        {"text": "What is the weather in 北京 and San Francisco?"}, {"text": "Please answer."}]}]


# ------------------------------------------- toolrun recipe: record live, replay offline


def _weather_server_handler(*, stream: bool):
    """A Gemini server: three parallel calls without ids, then an answer built from the results."""

    def handler(request: Recorded) -> Reply:
        body = request.json()
        refused = gemini_rejections(body) + ([] if request.headers.get("x-goog-api-key") == KEY else ["no key header"])
        if refused or "key" in request.query:  # answer as Gemini would: 400 with the reasons
            return Reply(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "; ".join(refused) or "key in URL"}})
        last = body["contents"][-1]["parts"]
        if not any("functionResponse" in part for part in last):
            parts = [{"text": "Three cities.", "thought": True}] + [
                {"functionCall": {"name": "weather", "args": {"city": city}}} for city in CITIES]
            parts[1]["thoughtSignature"] = "SIG-3"
            usage = {"promptTokenCount": 300, "candidatesTokenCount": 60, "thoughtsTokenCount": 30}
        else:
            if body["contents"][-2]["parts"][1].get("thoughtSignature") != "SIG-3":  # Gemini 3 refuses this
                return Reply(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                             "message": "Function call is missing a thought_signature"}})
            text = "；".join(f"{p['functionResponse']['name']}={p['functionResponse']['response']['output']}" for p in last)
            parts = [{"text": text}]
            usage = {"promptTokenCount": 500, "candidatesTokenCount": 40}
        if not stream:
            return Reply(200, {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
                               "usageMetadata": usage})
        chunks = [{"candidates": [{"content": {"role": "model", "parts": [part]}}]} for part in parts]
        chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}],
                       "usageMetadata": usage})
        return Reply(200, chunks=sse(chunks), headers={"Content-Type": "text/event-stream"})

    return handler


@pytest.mark.parametrize("stream", [True, False])
def test_toolrun_recipe_records_live_and_replays_offline(loopback, tmp_path, stream):

    server = loopback(_weather_server_handler(stream=stream))
    roundtrip = record_then_replay(tmp_path, "gemini:gemini-2.5-flash",
                                   {"GEMINI_API_KEY": KEY, "GEMINI_BASE_URL": server.url}, stream=stream)
    live = roundtrip.live
    assert live["stop_reason"] == "stop" and live["usage"] == {"input_tokens": 800, "output_tokens": 130, "requests": 2}
    calls = live["turns"][0]["tool_calls"]
    assert [(c["arguments"]["city"], c["result"]) for c in calls] == list(CITY_WEATHER.items())
    assert len({c["id"] for c in calls}) == 3  # Gemini sent no ids: the runner made three
    assert live["final"] == "；".join(f"weather={result}" for result in CITY_WEATHER.values())
    # made-up ids never go on the wire, so a replay sends the very same requests
    assert_replayed_offline(roundtrip, server, KEY, keep_ids=False)


def test_an_error_chunk_never_shows_the_key():
    GeminiProvider.resolve_config(environ={"GEMINI_API_KEY": KEY})  # registers the key for redaction
    with pytest.raises(ProviderError) as caught:
        GeminiStreamAssembler().feed({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": f"API key {KEY} not valid"}})
    assert KEY not in str(caught.value) and "INVALID_ARGUMENT" in str(caught.value)


def test_a_signature_on_an_empty_part_after_calls_is_echoed_but_is_no_text():
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "read_theme", "args": {}}}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "SIG-END"}]},
                         "finishReason": "STOP"}]},
    ]
    assembler = GeminiStreamAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    response = assembler.finish()
    assert response.message.text is None and response.stop_reason == "tool_calls"
    history = _question() + _answer(response)
    model_turn = build_request_body(_request(history), stream=True)["contents"][1]
    assert model_turn["parts"] == [{"functionCall": {"name": "read_theme", "args": {}}}, {"text": "", "thoughtSignature": "SIG-END"}]


# ------------------------------------------------------------ calls that cannot be read


def _answer_then_final(first_parts: list[dict[str, Any]], *, stream: bool, finish: str = "STOP", **candidate: Any):
    """A server whose first answer holds ``first_parts`` (a chunk each when streamed), then FINAL; every
    request is checked against what Gemini refuses, and refused as Gemini would."""
    whole = {"candidates": [{"content": {"role": "model", "parts": first_parts}, "finishReason": finish, **candidate}],
             "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 10}}
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [part]}}]} for part in first_parts]
    chunks.append({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": finish, **candidate}],
                   "usageMetadata": whole["usageMetadata"]})

    if stream:
        answers = iter([Reply(200, chunks=sse(chunks)), Reply(200, chunks=sse(FINAL_CHUNKS))])
    else:
        answers = iter([Reply(200, whole), Reply(200, FINAL_BODY)])

    def handler(request: Recorded) -> Reply:
        refused = gemini_rejections(request.json())
        if refused:
            return Reply(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "; ".join(refused)}})
        return next(answers, Reply(500, "no more answers"))

    return handler


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_without_a_name_is_told_to_the_model_and_never_sent_back_as_a_call(loopback, catalog_tools, stream):
    # The stream left it out (the model never heard of it); a whole answer sent it back nameless, which Gemini refuses.
    nameless = {"functionCall": {"args": {"location": "北京"}}}
    named = {"functionCall": {"name": "weather", "args": {"location": "San Francisco"}}}
    server = loopback(_answer_then_final([nameless, named], stream=stream))
    result = run_through_runner(_provider(server), catalog_tools, _question(), stream=stream)
    assert (result.stop_reason, result.final) == ("stop", "北京 and San Francisco are both sunny."), result.error
    unread, weather = result.turns[0].tool_calls
    assert (unread.name, unread.arguments, unread.is_error) == ("", {"location": "北京"}, True)
    assert unread.result.startswith("your function call could not be read: it names no function. Nothing ran.")
    assert "weather, read_theme, read_screen" in unread.result
    assert (weather.result, weather.is_error) == ("San Francisco: 18°C, sunny", False)
    model_turn, answers = server.requests[1].json()["contents"][1:3]
    assert model_turn["parts"] == [named]
    assert answers["parts"] == [{"functionResponse": {"name": "weather", "response": {"output": weather.result}}},
                                {"text": unread.result}]


QUOTED = "Malformed function call: print(default_api.weather(location='北京'))"


@pytest.mark.parametrize("stream", [False, True])
def test_a_malformed_function_call_is_told_to_the_model_which_may_call_again(loopback, catalog_tools, stream):
    # MALFORMED_FUNCTION_CALL ended the run with an error; the model only wrote a call Gemini could not parse.
    server = loopback(_answer_then_final([], stream=stream, finish="MALFORMED_FUNCTION_CALL", finishMessage=QUOTED))
    result = run_through_runner(_provider(server), catalog_tools, _question(), stream=stream)
    assert (result.stop_reason, result.final) == ("stop", "北京 and San Francisco are both sunny."), result.error
    first = result.turns[0]
    assert first.stop_reason == "tool_calls" and len(first.tool_calls) == 1
    call = first.tool_calls[0]
    assert (call.name, call.arguments, call.is_error) == ("", QUOTED, True)  # the transcript shows what Gemini quoted
    assert call.result.startswith(f"your function call could not be read: Gemini could not parse it "
                                  f"(MALFORMED_FUNCTION_CALL: {QUOTED}). Nothing ran.")
    # no model turn to send back (no part held the call): the question and what the model is told, as one user turn
    contents = server.requests[1].json()["contents"]
    assert contents == [{"role": "user", "parts": [{"text": "What is the weather in 北京 and San Francisco?"},
                                                  {"text": call.result}]}]


def test_malformed_calls_over_and_over_end_the_run_within_its_limits(loopback, catalog_tools):
    malformed = {"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL"}], "usageMetadata": {"promptTokenCount": 5}}
    server = loopback(lambda request: Reply(200, malformed))
    settings = RunSettings(stream=False, max_turns=3)
    result = with_provider(_provider(server), lambda p: run_conversation(
        p, catalog_tools, system=None, messages=_question(), settings=settings, context=CallContext(environ={})))
    assert (result.stop_reason, len(server.requests)) == ("max_turns", 3)
    assert all(turn.tool_calls[0].result.startswith("your function call could not be read: Gemini could not parse it "
                                                    "(MALFORMED_FUNCTION_CALL). Nothing ran.") for turn in result.turns)

    result = run_through_runner(_provider(server), catalog_tools, _question(), stream=False)  # max_turns 10
    assert result.stop_reason == "error" and len(server.requests) == 3 + 5
    assert result.error.startswith("stopped after 5 consecutive failing tool calls; last: a call without a name: ")


@pytest.mark.parametrize("stream", [False, True])
def test_the_signature_of_a_call_without_a_name_stays_on_the_model_turn_sent_back(loopback, catalog_tools, stream):
    # Of parallel calls only the first carries the thoughtSignature, and Gemini 3 refuses a model turn whose
    # first call has none. Leaving the nameless first call out took its signature with it.
    nameless = {"functionCall": {"args": {"location": "北京"}}, "thoughtSignature": "SIG-1"}
    named = {"functionCall": {"name": "weather", "args": {"location": "San Francisco"}}}
    server = loopback(_answer_then_final([nameless, named], stream=stream))
    result = run_through_runner(_provider(server), catalog_tools, _question(), stream=stream)
    assert (result.stop_reason, result.error) == ("stop", None)
    model_turn = server.requests[1].json()["contents"][1]
    assert model_turn["parts"] == [{**named, "thoughtSignature": "SIG-1"}]


def test_the_signature_of_a_lone_call_without_a_name_is_sent_back_on_an_empty_part():
    response = parse_response({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "checking"}, {"functionCall": {"args": {}}, "thoughtSignature": "SIG-1"}]}, "finishReason": "STOP"}]})
    history = _question() + _answer(response)
    model_turn = build_request_body(_request(history), stream=False)["contents"][1]
    assert model_turn["parts"] == [{"text": "checking"}, {"text": "", "thoughtSignature": "SIG-1"}]
