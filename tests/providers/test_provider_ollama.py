"""The Ollama native adapter against a loopback server speaking /api/chat (NDJSON streams)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.loopback import Reply
from tests.provider_helpers import STOCK_TOOL_PY, STOCK_TOOL_YAML, complete, load_tools, run_through_runner, tool_round, user
from toolrun.core.errors import ProviderError
from toolrun.core.messages import Message, ModelRequest, ModelSettings, TextDelta, TextPart, ToolDefinition, ToolResult
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig, ProviderOverrides
from toolrun.providers.ollama import OllamaProvider, OllamaStreamAssembler, build_request_body, normalise_host, parse_response
from toolrun.providers.transport import HttpxTransport

INVENTORY = ToolDefinition(
    "get_flower_inventory",
    "Returns the current flower stock of one city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def _request(**settings: Any) -> ModelRequest:
    return ModelRequest("qwen3:8b", "You answer questions about our flower shops.",
                        [Message("user", [TextPart("北京和上海的鲜花库存是多少?")])], [INVENTORY], ModelSettings(**settings))


def _line(message: dict[str, Any], done: bool = False, **extra: Any) -> dict[str, Any]:
    return {"model": "qwen3:8b", "created_at": "2026-11-29T20:00:00Z", "message": {"role": "assistant", **message},
            "done": done, **extra}


def _ndjson(lines: list[dict[str, Any]]) -> Reply:
    return Reply(200, headers={"Content-Type": "application/x-ndjson"},
                 chunks=[json.dumps(line, ensure_ascii=False) + "\n" for line in lines])


def _call(city: str, call_id: str | None = None) -> dict[str, Any]:
    wire: dict[str, Any] = {"function": {"name": "get_flower_inventory", "arguments": {"city": city}}}
    if call_id:
        wire["id"] = call_id
    return wire


def _provider(url: str) -> OllamaProvider:
    return OllamaProvider("qwen3:8b", ProviderConfig(url), HttpxTransport(max_retries=1))


def _answer(request: ModelRequest, response) -> ModelRequest:
    """What the runner does: unique ids where Ollama sent none, one result per call."""
    for position, call in enumerate(response.message.tool_calls):
        call.id = call.id or f"call_toolrun_{position}"
    results = [ToolResult(call.id, call.name, f"玫瑰: {100 * (n + 1)}", provider_id=call.provider_id)
               for n, call in enumerate(response.message.tool_calls)]
    request.messages += [response.message, Message("tool", list(results))]
    return request


def test_ndjson_stream_round_trip_over_loopback(loopback):
    first = [_line({"content": "我查"}), _line({"content": "一下。"}),
             _line({"content": "", "tool_calls": [_call("北京"), _call("上海")]}),
             _line({"content": ""}, True, done_reason="stop", prompt_eval_count=95, eval_count=67)]
    second = [_line({"content": "北京有玫瑰 100 枝。"}),
              _line({"content": ""}, True, done_reason="stop", prompt_eval_count=235, eval_count=90)]
    replies = iter([_ndjson(first), _ndjson(second)])
    server = loopback(lambda request: next(replies))
    response, final, events = tool_round(_provider(server.url), _request(), _answer, stream=True)
    calls = response.message.tool_calls
    assert [c.arguments for c in calls] == [{"city": "北京"}, {"city": "上海"}]
    assert [c.provider_id for c in calls] == [None, None]
    assert (response.message.text, response.stop_reason, response.usage.input_tokens, response.usage.output_tokens) == (
        "我查一下。", "tool_calls", 95, 67)
    assert (final.message.text, final.stop_reason, final.usage.input_tokens) == ("北京有玫瑰 100 枝。", "stop", 235)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["我查", "一下。", "北京有玫瑰 100 枝。"]

    assert server.requests[0].path == "/api/chat"
    opening, follow_up = (request.json() for request in server.requests)
    assert opening["stream"] is True
    assert opening["tools"] == [{"type": "function", "function": {"name": INVENTORY.name, "description": INVENTORY.description,
                                                                   "parameters": INVENTORY.parameters}}]
    assert follow_up["messages"][2:] == [
        {"role": "assistant", "content": "我查一下。", "tool_calls": [_call("北京"), _call("上海")]},
        {"role": "tool", "tool_name": "get_flower_inventory", "content": "玫瑰: 100"},
        {"role": "tool", "tool_name": "get_flower_inventory", "content": "玫瑰: 200"},
    ]
    assert "authorization" not in server.requests[0].headers  # no key needed, none sent


def test_ids_ollama_sent_are_echoed_and_results_tied_to_them(loopback):
    replies = iter([Reply(200, _line({"content": "", "tool_calls": [_call("深圳", "call_x1")]}, True, done_reason="stop",
                                     prompt_eval_count=20, eval_count=10)),
                    Reply(200, _line({"content": "好"}, True, done_reason="stop"))])
    server = loopback(lambda request: next(replies))
    response, _, _ = tool_round(_provider(server.url), _request(), _answer, stream=False)
    assert (response.message.tool_calls[0].id, response.stop_reason) == ("call_x1", "tool_calls")
    follow_up = server.requests[1].json()
    assert follow_up["stream"] is False
    assert follow_up["messages"][2]["tool_calls"] == [_call("深圳", "call_x1")]
    assert follow_up["messages"][3] == {"role": "tool", "tool_name": "get_flower_inventory", "content": "玫瑰: 100",
                                        "tool_call_id": "call_x1"}


def test_done_reason_length_and_string_arguments_are_normalised():
    cut = parse_response(_line({"content": "北京有玫"}, True, done_reason="length", prompt_eval_count=5, eval_count=3))
    assert (cut.stop_reason, cut.raw_stop_reason, cut.usage.output_tokens) == ("length", "length", 3)
    # Some Ollama-fronting gateways send the OpenAI string form: accept it too.
    odd = parse_response(_line({"tool_calls": [{"function": {"name": "get_flower_inventory", "arguments": '{"city": "北京"}'}}]},
                               True, done_reason="stop"))
    assert odd.message.tool_calls[0].arguments == {"city": "北京"}


def test_errors_carry_ollamas_message(loopback):
    server = loopback(lambda request: Reply(404, {"error": 'model "qwen3:8b" not found, try pulling it first'}))
    with pytest.raises(ProviderError, match='HTTP 404: model "qwen3:8b" not found'):
        complete(_provider(server.url), _request(), stream=False)
    with pytest.raises(ProviderError, match="not found"):
        complete(_provider(server.url), _request(), stream=True)
    assembler = OllamaStreamAssembler()
    assembler.feed(_line({"content": "北"}))
    with pytest.raises(ProviderError, match="out of memory"):
        assembler.feed({"error": "out of memory"})


def test_a_stream_without_its_done_line_is_an_error(loopback):
    server = loopback(lambda request: _ndjson([_line({"content": "北京"})]))
    with pytest.raises(ProviderError, match="before its final"):
        complete(_provider(server.url), _request(), stream=True)


def test_settings_map_to_options_and_tool_choice_none_hides_the_tools():
    request = _request(temperature=0, max_tokens=256, extra={"options": {"num_ctx": 8192}, "keep_alive": "5m"})
    body = build_request_body(request, stream=False)
    assert body["options"] == {"temperature": 0, "num_predict": 256, "num_ctx": 8192}
    assert (body["keep_alive"], body["stream"]) == ("5m", False)
    assert "tools" in body
    assert "tools" not in build_request_body(_request(tool_choice="none"), stream=True)


def test_host_configuration():
    assert normalise_host("0.0.0.0:11434") == "http://0.0.0.0:11434"
    assert normalise_host("https://ollama.internal/") == "https://ollama.internal"
    assert OllamaProvider.resolve_config(environ={}).base_url == "http://127.0.0.1:11434"
    assert OllamaProvider.resolve_config(environ={"OLLAMA_HOST": "gpu-box:11434"}).base_url == "http://gpu-box:11434"
    assert OllamaProvider.resolve_config(ProviderOverrides(base_url="10.0.0.5:11434"), environ={}).base_url == "http://10.0.0.5:11434"
    assert OllamaProvider.has_credentials(environ={})
    assert get_provider_class("ollama") is OllamaProvider


def test_a_whole_run_through_the_real_runner(loopback, tmp_path):
    tools = load_tools(tmp_path, STOCK_TOOL_PY, STOCK_TOOL_YAML)
    replies = iter([_ndjson([_line({"content": "", "tool_calls": [_call("北京"), _call("上海")]}),
                             _line({"content": ""}, True, done_reason="stop", prompt_eval_count=50, eval_count=20)]),
                    _ndjson([_line({"content": "北京 100, 上海 80"}, True, done_reason="stop", prompt_eval_count=90, eval_count=10)])])
    server = loopback(lambda request: next(replies))
    result = run_through_runner(_provider(server.url), tools, user("北京和上海?"))
    assert (result.stop_reason, result.final, result.usage.input_tokens, result.usage.requests) == ("stop", "北京 100, 上海 80", 140, 2)
    tool_messages = [m for m in server.requests[1].json()["messages"] if m["role"] == "tool"]
    assert tool_messages == [{"role": "tool", "tool_name": "get_flower_inventory", "content": "玫瑰: 100"},
                             {"role": "tool", "tool_name": "get_flower_inventory", "content": "玫瑰: 80"}]
