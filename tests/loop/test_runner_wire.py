"""The loop through real provider adapters and a loopback server: what goes on the wire.

The runner is provider-agnostic; these tests check that what it does (unique ids, one
result per call in call order, tool_choice on the first request) comes out in each
provider's own spelling and order.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.flower_shop import INVENTORY_PY, INVENTORY_TOOL_ITEM, STOCK
from tests.loopback import Recorded, Reply
from toolrun.backends.base import CallContext
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.core.messages import Message, StructuredOutput, TextPart
from toolrun.core.tool import Tool
from toolrun.loop.runner import RunObserver, RunSettings, run_conversation
from toolrun.providers.anthropic import AnthropicProvider
from toolrun.providers.base import Provider, ProviderConfig
from toolrun.providers.gemini import GeminiProvider
from toolrun.providers.openai_chat import OpenAIChatProvider

CITIES = ("北京", "上海", "深圳")


@pytest.fixture
def inventory(tmp_path: Path) -> Tool:
    (tmp_path / "flowers.py").write_text(INVENTORY_PY, encoding="utf-8")
    (tmp_path / "flowers.yaml").write_text("tools:\n" + INVENTORY_TOOL_ITEM, encoding="utf-8")
    return load_catalog_or_raise(tmp_path).tools["get_flower_inventory"]


def play(provider: Provider, tool: Tool, settings: RunSettings):
    async def go():
        try:
            return await run_conversation(
                provider, [tool], system="You answer questions about our flower shops.",
                messages=[Message("user", [TextPart("北京、上海和深圳的鲜花库存是多少?")])],
                settings=settings, context=CallContext(environ={}))
        finally:
            await provider.aclose()
    return asyncio.run(go())


def answers(*replies: dict):
    """A handler that gives the replies in order."""
    queue = list(replies)

    def handler(request: Recorded) -> Reply:
        return Reply(body=queue.pop(0))
    return handler


def test_openai_chat_repeated_ids_become_unique_and_one_tool_message_per_call(loopback, inventory):
    calls = [{"id": "0", "type": "function", "function": {"name": "get_flower_inventory",
                                                          "arguments": f'{{"city": "{city}"}}'}} for city in CITIES]
    server = loopback(answers(
        {"choices": [{"index": 0, "finish_reason": "tool_calls",
                      "message": {"role": "assistant", "content": None, "tool_calls": calls}}],
         "usage": {"prompt_tokens": 95, "completion_tokens": 67}},
        {"choices": [{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": "北京100, 上海80, 深圳60"}}],
         "usage": {"prompt_tokens": 235, "completion_tokens": 90}},
    ))
    provider = OpenAIChatProvider("gpt-4o-mini", ProviderConfig(server.url + "/v1", "sk-test-key"))
    result = play(provider, inventory, RunSettings(stream=False, tool_choice="required"))

    assert result.stop_reason == "stop" and result.final == "北京100, 上海80, 深圳60"
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (330, 157, 2)
    first, second = (r.json() for r in server.requests)
    assert first["tool_choice"] == "required" and "tool_choice" not in second
    assistant, *results = second["messages"][-4:]
    sent_ids = [c["id"] for c in assistant["tool_calls"]]
    assert len(set(sent_ids)) == 3
    assert [(m["role"], m["tool_call_id"], m["content"]) for m in results] == [
        ("tool", call_id, STOCK[city]) for call_id, city in zip(sent_ids, CITIES, strict=True)]


def test_anthropic_results_travel_together_in_one_user_message(loopback, inventory):
    blocks = [{"type": "tool_use", "id": f"toolu_{i}", "name": "get_flower_inventory", "input": {"city": city}}
              for i, city in enumerate(CITIES)]
    server = loopback(answers(
        {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
         "content": [{"type": "text", "text": "Let me check."}, *blocks],
         "stop_reason": "tool_use", "usage": {"input_tokens": 50, "output_tokens": 40}},
        {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude",
         "content": [{"type": "text", "text": "北京100, 上海80, 深圳60"}],
         "stop_reason": "end_turn", "usage": {"input_tokens": 90, "output_tokens": 20}},
    ))
    provider = AnthropicProvider("claude-sonnet-4-5", ProviderConfig(server.url, "sk-ant-test"))
    result = play(provider, inventory, RunSettings(stream=False, parallel=False, tool_choice="get_flower_inventory"))

    assert result.stop_reason == "stop"
    first, second = (r.json() for r in server.requests)
    assert first["tool_choice"] == {"type": "tool", "name": "get_flower_inventory", "disable_parallel_tool_use": True}
    results = second["messages"][-1]
    assert results["role"] == "user"
    assert [(b["type"], b["tool_use_id"], b["content"]) for b in results["content"]] == [
        ("tool_result", f"toolu_{i}", STOCK[city]) for i, city in enumerate(CITIES)]


def test_gemini_calls_without_ids_are_answered_by_name_in_order(loopback, inventory):
    parts = [{"functionCall": {"name": "get_flower_inventory", "args": {"city": city}}} for city in CITIES]
    server = loopback(answers(
        {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
         "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 30}},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "北京100, 上海80, 深圳60"}]},
                         "finishReason": "STOP"}],
         "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 12}},
    ))
    provider = GeminiProvider("gemini-2.5-flash", ProviderConfig(server.url, "gm-test-key"))
    result = play(provider, inventory, RunSettings(stream=False))

    assert result.stop_reason == "stop" and result.final == "北京100, 上海80, 深圳60"
    ids = [c.id for c in result.tool_calls]
    assert len(set(ids)) == 3 and all(ids), "made-up ids tell the three calls apart"
    second = server.requests[1].json()
    responses = [p["functionResponse"] for p in second["contents"][-1]["parts"]]
    assert [r["name"] for r in responses] == ["get_flower_inventory"] * 3
    assert all("id" not in r for r in responses), "Gemini gets ids back only when it sent them"
    assert [STOCK[city] in str(r["response"]) for r, city in zip(responses, CITIES, strict=True)] == [True] * 3


@pytest.mark.parametrize(("provider_class", "base", "first"), [
    (OpenAIChatProvider, "/v1", {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": 7, "type": "function", "function": {"name": 5, "arguments": "{}"}}]}}]}),
    (AnthropicProvider, "", {"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
                             "content": [{"type": "tool_use", "id": "toolu_1", "name": ["get"], "input": {}}]}),
    (GeminiProvider, "", {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": 5, "args": {"city": "北京"}}}]}, "finishReason": "STOP"}]}),
])
def test_a_tool_name_or_id_that_is_not_text_is_an_unknown_tool_the_model_is_told_about(
        loopback, inventory, provider_class, base, first):
    last = {OpenAIChatProvider: {"choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": "sorry"}}]},
            AnthropicProvider: {"id": "msg_2", "type": "message", "role": "assistant", "stop_reason": "end_turn",
                                "content": [{"type": "text", "text": "sorry"}]},
            GeminiProvider: {"candidates": [{"content": {"role": "model", "parts": [{"text": "sorry"}]},
                                             "finishReason": "STOP"}]}}[provider_class]
    server = loopback(answers(first, last))
    provider = provider_class("some-model", ProviderConfig(server.url + base, "test-key"))
    result = play(provider, inventory, RunSettings(stream=False))

    assert result.stop_reason == "stop" and result.final == "sorry"
    (call,) = result.tool_calls
    assert isinstance(call.name, str) and isinstance(call.id, str) and call.is_error
    assert "unknown tool" in call.result and "get_flower_inventory" in call.result
    assert len(server.requests) == 2


@pytest.mark.parametrize(("provider_class", "first", "last"), [
    (AnthropicProvider,
     {"id": "msg_1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
      "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_flower_inventory", "input": '{"city": "北京"}'}]},
     {"id": "msg_2", "type": "message", "role": "assistant", "stop_reason": "end_turn",
      "content": [{"type": "text", "text": "sorry"}]}),
    (GeminiProvider,
     {"candidates": [{"content": {"role": "model", "parts": [
         {"functionCall": {"name": "get_flower_inventory", "args": '{"city": "北京"}'}}]}, "finishReason": "STOP"}]},
     {"candidates": [{"content": {"role": "model", "parts": [{"text": "sorry"}]}, "finishReason": "STOP"}]}),
])
def test_arguments_that_are_not_an_object_are_kept_as_sent_and_refused(loopback, inventory, provider_class, first, last):
    server = loopback(answers(first, last))
    provider = provider_class("some-model", ProviderConfig(server.url, "test-key"))
    result = play(provider, inventory, RunSettings(stream=False))

    (call,) = result.tool_calls
    assert call.is_error and "not a JSON object" in call.result, "not 'missing city': the model sent a string"
    assert call.arguments == '"{\\"city\\": \\"北京\\"}"', "the record holds what the model sent, not {}"


def _anthropic_events(*events: dict) -> Reply:
    return Reply(headers={"Content-Type": "text/event-stream"},
                 chunks=[f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in events])


@pytest.mark.parametrize(("provider_class", "stream", "reply"), [
    (GeminiProvider, False, Reply(body={"candidates": [{"content": {"role": "model", "parts": [{"text": 5}]},
                                                        "finishReason": "STOP"}]})),
    (AnthropicProvider, True, _anthropic_events(
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"})),
])
def test_answer_text_that_is_not_a_string_is_an_answer_toolrun_cannot_read(loopback, inventory, provider_class,
                                                                           stream, reply):
    server = loopback(lambda request: reply)
    provider = provider_class("some-model", ProviderConfig(server.url, "test-key"))
    shown: list[str] = []

    class Printer(RunObserver):  # what a terminal does with each piece of streamed text
        def on_text_delta(self, text: str) -> None:
            shown.append(text.strip())

    async def go():
        try:
            return await run_conversation(provider, [inventory], system=None, messages=[Message("user", [TextPart("hi")])],
                                          settings=RunSettings(stream=stream), context=CallContext(environ={}),
                                          observer=Printer())
        finally:
            await provider.aclose()
    result = asyncio.run(go())
    assert result.stop_reason == "error" and "text that is not a string: 5" in (result.error or "")
    assert shown == []


def test_nan_in_a_models_json_is_not_json_a_program_can_read(loopback, inventory):
    # Python's JSON reads NaN and Infinity; --json and the run log would then write them, which no reader takes.
    def chat_answer(message: dict, finish: str) -> dict:
        return {"choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}]}
    server = loopback(answers(
        chat_answer({"content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_flower_inventory", "arguments": '{"city": "北京", "limit": NaN}'}}]}, "tool_calls"),
        chat_answer({"content": '{"roses": Infinity}'}, "stop"),
        chat_answer({"content": '{"roses": 100}'}, "stop"),
    ))
    provider = OpenAIChatProvider("gpt-4o-mini", ProviderConfig(server.url + "/v1", "sk-test-key"))
    result = play(provider, inventory, RunSettings(stream=False, output=StructuredOutput(None)))

    (call,) = result.tool_calls
    assert call.is_error and "NaN is not a number JSON can carry" in call.result
    assert call.arguments == '{"city": "北京", "limit": NaN}', "kept as the text the model sent"
    assert "Infinity is not a number JSON can carry" in json.dumps(server.requests[2].json(), ensure_ascii=False)
    assert result.output == {"roses": 100} and result.stop_reason == "stop"
