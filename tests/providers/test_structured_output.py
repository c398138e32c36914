"""Structured final answers on every adapter: the request shape each provider documents, the
parsed answer, a repair turn after an invalid answer, and an answer cut by the output limit.

Request shapes are checked against the official OpenAI OpenAPI document (Chat, Responses) and
the Anthropic / Gemini rule checkers of their adapter tests; whole runs go through the real
runner against a loopback server speaking each wire format.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.loopback import Recorded, Reply
from tests.openapi_schemas import validate_against
from tests.provider_helpers import load_tools, recorded_body, user, with_provider
from tests.providers.test_provider_anthropic import anthropic_rejections
from tests.providers.test_provider_gemini import gemini_rejections
from toolrun.backends.base import CallContext
from toolrun.core.messages import ModelRequest, ModelSettings, StructuredOutput, ToolDefinition
from toolrun.loop.runner import RunResult, RunSettings, run_conversation
from toolrun.providers import anthropic, gemini, ollama, openai_chat, openai_responses
from toolrun.providers.anthropic import AnthropicProvider
from toolrun.providers.base import Provider, ProviderConfig
from toolrun.providers.gemini import GeminiProvider
from toolrun.providers.ollama import OllamaProvider
from toolrun.providers.openai_chat import OpenAIChatProvider
from toolrun.providers.openai_responses import OpenAIResponsesProvider
from toolrun.providers.transport import HttpxTransport

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "roses": {"type": "integer"},
                                           "note": {"type": "string"}},
          "required": ["city", "roses"], "additionalProperties": False}
OUTPUT = StructuredOutput(SCHEMA)
JSON_ONLY = StructuredOutput(None)
WEATHER = ToolDefinition("weather", "The weather of one place.",
                         {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]})


def _request(model: str, output: StructuredOutput, *, tools: list[ToolDefinition] | None = None,
             system: str | None = "You count flowers.") -> ModelRequest:
    return ModelRequest(model, system, user("How many roses in 北京?"), tools or [], ModelSettings(output=output))


# ---------------------------------------------------------------- request shapes


def test_openai_chat_asks_with_a_strict_json_schema_response_format():
    body = openai_chat.build_request_body(_request("gpt-4o-mini", OUTPUT, tools=[WEATHER]), stream=False)
    assert validate_against("CreateChatCompletionRequest", body) == []
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    sent = response_format["json_schema"]
    assert sent["name"] == "answer" and sent["strict"] is True
    # the strict dialect: every property required, the optional one nullable, objects closed
    assert sent["schema"]["required"] == ["city", "roses", "note"]
    assert sent["schema"]["properties"]["note"]["type"] == ["string", "null"]
    assert body["tools"][0]["function"]["name"] == "weather"  # tools and the answer's format together
    assert body["messages"][0] == {"role": "system", "content": "You count flowers."}


def test_openai_chat_json_mode_puts_the_word_json_in_the_system_prompt():
    body = openai_chat.build_request_body(_request("gpt-4o-mini", JSON_ONLY, system=None), stream=False)
    assert validate_against("CreateChatCompletionRequest", body) == []
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][0]["role"] == "system" and "JSON" in body["messages"][0]["content"]
    forced = openai_chat.build_request_body(_request("gpt-4o-mini", StructuredOutput(SCHEMA, mode="json")), stream=False)
    assert forced["response_format"] == {"type": "json_object"}
    assert json.dumps(SCHEMA, sort_keys=True) in forced["messages"][0]["content"]


def test_openai_chat_sends_a_schema_strict_mode_cannot_take_as_not_strict():
    listing = StructuredOutput({"type": "array", "items": {"type": "string"}})
    sent = openai_chat.build_request_body(_request("gpt-4o-mini", listing), stream=False)["response_format"]
    assert sent["json_schema"] == {"name": "answer", "schema": listing.schema, "strict": False}


def test_openai_responses_asks_with_text_format():
    body = openai_responses.build_request_body(_request("gpt-5-mini", OUTPUT, tools=[WEATHER]), stream=False)
    assert validate_against("CreateResponse", body) == []
    text_format = body["text"]["format"]
    assert text_format["type"] == "json_schema" and text_format["name"] == "answer" and text_format["strict"] is True
    assert text_format["schema"]["properties"]["note"]["type"] == ["string", "null"]
    json_body = openai_responses.build_request_body(_request("gpt-5-mini", JSON_ONLY), stream=False)
    assert validate_against("CreateResponse", json_body) == []
    assert json_body["text"] == {"format": {"type": "json_object"}} and "JSON" in json_body["instructions"]


def test_anthropic_asks_with_output_config_on_models_that_have_it():
    body = anthropic.build_request_body(_request("claude-sonnet-4-5", OUTPUT, tools=[WEATHER]), stream=False)
    assert anthropic_rejections(body) == []
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert body["tool_choice"] == {"type": "auto"}
    open_schema = StructuredOutput({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}})
    sent = anthropic.build_request_body(_request("claude-opus-4-1", open_schema), stream=False)
    schema = sent["output_config"]["format"]["schema"]
    assert schema["additionalProperties"] is False and schema["properties"]["a"]["additionalProperties"] is False


def test_anthropic_older_models_answer_through_a_forced_final_tool():
    alone = anthropic.build_request_body(_request("claude-3-5-haiku-latest", OUTPUT), stream=False)
    assert anthropic_rejections(alone) == [] and "output_config" not in alone
    assert alone["tools"] == [{"name": "final_answer", "description": alone["tools"][0]["description"],
                               "input_schema": SCHEMA}]
    assert alone["tool_choice"] == {"type": "tool", "name": "final_answer"}
    # with other tools: all offered, and some tool must be called, so the answer comes through final_answer
    together = anthropic.build_request_body(_request("claude-sonnet-4-20250514", OUTPUT, tools=[WEATHER]), stream=False)
    assert [tool["name"] for tool in together["tools"]] == ["weather", "final_answer"]
    assert together["tool_choice"] == {"type": "any"}


def test_anthropic_json_mode_is_the_system_prompt_alone():
    body = anthropic.build_request_body(_request("claude-sonnet-4-5", StructuredOutput(SCHEMA, mode="json")), stream=False)
    assert "output_config" not in body and "tools" not in body
    assert body["system"].startswith("You count flowers.\n\n") and json.dumps(SCHEMA, sort_keys=True) in body["system"]


def test_gemini_asks_with_response_schema_and_mime_type():
    body = gemini.build_request_body(_request("gemini-2.5-flash", OUTPUT), stream=False)
    assert gemini_rejections(body) == []
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseSchema"]["required"] == ["city", "roses"]
    assert "additionalProperties" not in config["responseSchema"]  # Gemini's subset, as for tools
    lossy = StructuredOutput({"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}})
    assert gemini.build_request_body(_request("gemini-2.5-flash", lossy), stream=False)["generationConfig"] == {
        "responseMimeType": "application/json", "responseJsonSchema": lossy.schema}


def test_gemini_before_3_with_tools_is_asked_in_the_system_prompt():
    older = gemini.build_request_body(_request("gemini-2.5-flash", OUTPUT, tools=[WEATHER]), stream=False)
    assert "generationConfig" not in older
    assert "JSON" in older["systemInstruction"]["parts"][0]["text"]
    newer = gemini.build_request_body(_request("gemini-3-pro-preview", OUTPUT, tools=[WEATHER]), stream=False)
    assert gemini_rejections(newer) == [] and newer["generationConfig"]["responseMimeType"] == "application/json"


def test_ollama_asks_with_format():
    assert ollama.build_request_body(_request("qwen3", OUTPUT), stream=False)["format"] == SCHEMA
    json_body = ollama.build_request_body(_request("qwen3", JSON_ONLY), stream=False)
    assert json_body["format"] == "json" and "JSON" in json_body["messages"][0]["content"]


def test_a_request_without_output_is_unchanged():
    request = _request("gpt-4o-mini", OUTPUT)
    request.settings.output = None
    assert "response_format" not in openai_chat.build_request_body(request, stream=False)
    assert "text" not in openai_responses.build_request_body(request, stream=False)
    assert "output_config" not in anthropic.build_request_body(request, stream=False)
    assert "generationConfig" not in gemini.build_request_body(request, stream=False)
    assert "format" not in ollama.build_request_body(request, stream=False)


# ---------------------------------------------------------------- whole runs on the wire


def _chat_body(text: str, cut: bool) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "length" if cut else "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 9}}


def _responses_body(text: str, cut: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "resp_1", "object": "response", "model": "gpt-5-mini",
                            "status": "incomplete" if cut else "completed",
                            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                                        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
                            "usage": {"input_tokens": 50, "output_tokens": 9}}
    if cut:
        body["incomplete_details"] = {"reason": "max_output_tokens"}
    return body


def _anthropic_body(text: str, cut: bool) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": text}], "stop_reason": "max_tokens" if cut else "end_turn",
            "usage": {"input_tokens": 50, "output_tokens": 9}}


def _gemini_body(text: str, cut: bool) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]},
                            "finishReason": "MAX_TOKENS" if cut else "STOP"}],
            "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 9}, "modelVersion": "gemini-2.5-flash"}


def _ollama_body(text: str, cut: bool) -> dict[str, Any]:
    return {"model": "qwen3", "message": {"role": "assistant", "content": text}, "done": True,
            "done_reason": "length" if cut else "stop", "prompt_eval_count": 50, "eval_count": 9}


ADAPTERS: dict[str, tuple[Callable[[str], Provider], Callable[[str, bool], dict[str, Any]]]] = {
    "openai": (lambda url: OpenAIChatProvider("gpt-4o-mini", ProviderConfig(url, "k"), HttpxTransport()), _chat_body),
    "openai-responses": (lambda url: OpenAIResponsesProvider("gpt-5-mini", ProviderConfig(url, "k"), HttpxTransport()),
                         _responses_body),
    "anthropic": (lambda url: AnthropicProvider("claude-sonnet-4-5", ProviderConfig(url, "k"), HttpxTransport()),
                  _anthropic_body),
    "gemini": (lambda url: GeminiProvider("gemini-2.5-flash", ProviderConfig(url, "k"), HttpxTransport()), _gemini_body),
    "ollama": (lambda url: OllamaProvider("qwen3", ProviderConfig(url), HttpxTransport()), _ollama_body),
}


def _run(provider: Provider, output: StructuredOutput, tools: list[Any] | None = None) -> RunResult:
    return with_provider(provider, lambda p: run_conversation(
        p, tools or [], system="You count flowers.", messages=user("How many roses in 北京?"),
        settings=RunSettings(stream=False, output=output), context=CallContext(environ={})))


def _serve(loopback, answers: list[dict[str, Any]]):
    replies = iter(answers)
    return loopback(lambda request: Reply(200, next(replies)))



@pytest.mark.parametrize("name", list(ADAPTERS))
def test_an_invalid_answer_gets_a_repair_turn_then_the_parsed_output(loopback, name):
    make, answer = ADAPTERS[name]
    server = _serve(loopback, [answer('{"city": "北京", "roses": "many"}', False),
                               answer('{"city": "北京", "roses": 100, "note": null}', False)])
    result = _run(make(server.url), OUTPUT)
    assert result.stop_reason == "stop" and not result.failed
    assert result.output == {"city": "北京", "roses": 100}  # the null strict mode asks for is gone
    assert result.to_json()["output"] == {"city": "北京", "roses": 100}
    assert len(server.requests) == 2
    repair = json.dumps(server.requests[1].json(), ensure_ascii=False)
    assert "at $.roses: expected integer, got \\\"many\\\"" in repair and "Answer again" in repair


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_an_answer_cut_by_the_output_limit_is_reported_incomplete(loopback, name):
    make, answer = ADAPTERS[name]
    server = _serve(loopback, [answer('{"city": "北京", "ro', True)])
    result = _run(make(server.url), OUTPUT)
    assert result.stop_reason == "length" and result.output is None and result.failed
    assert "cut off by the output limit" in (result.error or "") and "incomplete" in (result.error or "")
    assert result.to_json()["output"] is None
    assert len(server.requests) == 1  # no repair: the same limit would cut the next answer too


def test_a_structured_answer_cut_by_a_full_context_window_is_not_told_to_raise_max_tokens(loopback):
    make, answer = ADAPTERS["anthropic"]
    server = _serve(loopback, [{**answer('{"city": "北京", "ro', True), "stop_reason": "model_context_window_exceeded"}])
    result = _run(make(server.url), OUTPUT)
    assert result.stop_reason == "length" and result.output is None and result.failed
    assert "incomplete" in (result.error or "") and "settings.context" in (result.error or "")
    assert "max_tokens" not in (result.error or ""), result.error
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ["openai", "gemini"])
def test_an_answer_still_invalid_after_its_repairs_fails_the_run_naming_the_errors(loopback, name):
    make, answer = ADAPTERS[name]
    server = _serve(loopback, [answer('{"city": 1}', False), answer("not json", False), answer('{"city": 2}', False)])
    result = _run(make(server.url), StructuredOutput(SCHEMA, retries=2))
    assert result.stop_reason == "error" and result.output is None and result.failed
    assert result.error is not None and "after 2 repair turns" in result.error
    assert "missing required property 'roses'" in result.error and "expected string, got 2" in result.error
    assert len(server.requests) == 3


def test_an_openai_refusal_is_no_answer(loopback):
    body = _chat_body("", False)
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    server = _serve(loopback, [body])
    result = _run(ADAPTERS["openai"][0](server.url), OUTPUT)
    assert result.stop_reason == "content_filter" and result.output is None and result.failed


WEATHER_PY = "def weather(location):\n    return f'sunny in {location}'\n"
WEATHER_YAML = ("name: weather\ndescription: The weather of one place. Use it for weather questions only.\n"
                "parameters: {type: object, properties: {location: {type: string, description: A city}}, "
                "required: [location]}\nbackend: {python: 'tools.py:weather'}\n")


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_forced_final_tool_after_a_recorded_tool_turn(loopback, tmp_path, fixtures_dir, stream):
    """The recorded turn calls another tool first; the final tool's input is then the answer."""
    final = {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-3-5-haiku-latest",
             "content": [{"type": "text", "text": "Here it is."},
                         {"type": "tool_use", "id": "toolu_9", "name": "final_answer",
                          "input": {"city": "San Francisco", "roses": 3}}],
             "stop_reason": "tool_use", "usage": {"input_tokens": 900, "output_tokens": 30}}
    answers = iter([recorded_body(fixtures_dir, "anthropic-json-other-tool.1"), final])

    def handler(request: Recorded) -> Reply:
        body = next(answers)
        if not stream:
            return Reply(200, body)
        return Reply(200, chunks=_anthropic_events(body), headers={"Content-Type": "text/event-stream"})

    server = loopback(handler)
    provider = AnthropicProvider("claude-3-5-haiku-latest", ProviderConfig(server.url, "k"), HttpxTransport())
    tools = load_tools(tmp_path, WEATHER_PY, WEATHER_YAML)
    result = with_provider(provider, lambda p: run_conversation(
        p, tools, system=None, messages=user("Weather in San Francisco, as JSON"),
        settings=RunSettings(stream=stream, output=OUTPUT), context=CallContext(environ={})))
    assert result.output == {"city": "San Francisco", "roses": 3} and result.stop_reason == "stop"
    assert [call.name for call in result.tool_calls] == ["weather"]  # the final tool is no tool call
    for recorded in server.requests:
        body = recorded.json()
        assert anthropic_rejections(body) == []
        assert [tool["name"] for tool in body["tools"]] == ["weather", "final_answer"]
        assert body["tool_choice"] == {"type": "any"}


def _anthropic_events(body: dict[str, Any]) -> list[str]:
    """``body`` as the event stream that carries it."""
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {**body, "content": [], "stop_reason": None}}]
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            events += [{"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}}]
        else:
            events += [{"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}},
                       {"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}]
        events.append({"type": "content_block_stop", "index": index})
    events += [{"type": "message_delta", "delta": {"stop_reason": body["stop_reason"]}, "usage": {"output_tokens": 30}},
               {"type": "message_stop"}]
    return [f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events]
