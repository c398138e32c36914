"""The scripted offline model: what it answers, what it records, how it streams."""

from __future__ import annotations

import asyncio

import pytest

from toolrun.core.errors import ProviderError
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    TextDelta,
    TextPart,
    Usage,
)
from toolrun.providers.scripted import ScriptedModel, ScriptExhausted, tool_call


def request(text: str = "hi") -> ModelRequest:
    return ModelRequest("scripted", None, [Message("user", [TextPart(text)])], [])


def complete(model: ScriptedModel, req: ModelRequest | None = None, *, stream: bool = False, events=None):
    return asyncio.run(model.complete(req or request(), stream=stream, on_event=events.append if events is not None else None))


def test_answers_in_script_order_and_records_each_request():
    model = ScriptedModel(["first", ScriptedModel.text("second", usage=Usage(3, 4, 1))])
    one = complete(model, request("a"))
    two = complete(model, request("b"))
    assert (one.message.text, one.stop_reason) == ("first", "stop")
    assert (two.message.text, two.usage) == ("second", Usage(3, 4, 1))
    assert [r.messages[0].text for r in model.requests] == ["a", "b"]
    assert model.remaining == 0


def test_recorded_requests_are_copies():
    model = ScriptedModel(["x"])
    req = request("a")
    complete(model, req)
    req.messages.append(Message("user", [TextPart("later")]))
    assert len(model.requests[0].messages) == 1


def test_running_out_of_script_is_a_clear_provider_error():
    model = ScriptedModel(["only one"])
    complete(model)
    with pytest.raises(ScriptExhausted, match="no answer left for request 2") as caught:
        complete(model)
    assert isinstance(caught.value, ProviderError)


def test_calls_helper_builds_parsed_and_broken_calls():
    response = ScriptedModel.calls([("get_flower_inventory", {"city": "北京"}, "call_1"),
                                    ("get_flower_inventory", '{"city": "上')], text="checking")
    first, second = response.message.tool_calls
    assert (first.id, first.provider_id, first.arguments, first.raw_arguments) == (
        "call_1", "call_1", {"city": "北京"}, '{"city": "北京"}')
    assert (second.id, second.provider_id, second.arguments) == ("", None, None)
    assert response.stop_reason == "tool_calls" and response.message.text == "checking"


def test_a_scripted_call_whose_arguments_give_a_key_twice_is_read_as_a_model_s_would_be():
    call = tool_call("get_flower_inventory", '{"city": "北京", "city": "上海"}')
    assert (call.arguments, call.raw_arguments) == (None, '{"city": "北京", "city": "上海"}')


def test_function_items_see_the_request():
    def echo(req: ModelRequest) -> str:
        return f"you said {req.messages[-1].text}"

    model = ScriptedModel([echo, lambda req: ScriptedModel.text("bye")])
    assert complete(model, request("北京")).message.text == "you said 北京"
    assert complete(model).message.text == "bye"


def test_from_function_answers_every_request():
    model = ScriptedModel.from_function(lambda req: f"#{len(req.messages)}")
    assert [complete(model, request()).message.text for _ in range(3)] == ["#1", "#1", "#1"]
    assert len(model.requests) == 3


def test_exceptions_in_the_script_are_raised():
    model = ScriptedModel([ProviderError("rate limited", status=429)])
    with pytest.raises(ProviderError, match="rate limited"):
        complete(model)


def test_a_reused_response_is_handed_out_fresh_each_time():
    response = ScriptedModel.calls([("t", {})])
    model = ScriptedModel([response, response])
    first = complete(model)
    first.message.tool_calls[0].id = "rewritten by the runner"
    assert complete(model).message.tool_calls[0].id == ""


def test_streams_text_word_by_word():
    events: list = []
    model = ScriptedModel([ScriptedModel.calls([("a", {}), ("b", {})], text="Let me look that up.")])
    complete(model, stream=True, events=events)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == "Let me look that up." and len(deltas) == 5


def test_no_events_without_stream():
    events: list = []
    complete(ScriptedModel(["hello world"]), stream=False, events=events)
    assert events == []


def test_a_bad_script_item_is_a_type_error():
    with pytest.raises(TypeError, match="ModelResponse or a str"):
        complete(ScriptedModel([lambda req: 42]))


def test_it_never_needs_credentials_or_a_network():
    model = ScriptedModel(["x"])
    assert model.model == "scripted" and model.config.api_key is None
    with pytest.raises(ProviderError, match="offline"):
        from toolrun.providers.transport import WireRequest
        asyncio.run(model.transport.send(WireRequest("POST", "http://127.0.0.1:9/", {}, {})))


def test_tool_call_helper_keeps_chinese_in_raw_arguments():
    call = tool_call("get_flower_inventory", {"city": "深圳"})
    assert call.raw_arguments == '{"city": "深圳"}'
    assert isinstance(ScriptedModel.text("x"), ModelResponse)


def test_a_summary_request_is_answered_without_using_a_scripted_turn():
    model = ScriptedModel(["the one scripted answer"])
    asked = ModelRequest("scripted", "condense this", [Message("user", [TextPart("user: read page 1\n" * 50)])], [],
                         purpose="summary")
    summary = asyncio.run(model.complete(asked, stream=False))
    assert summary.message.text.startswith("(scripted summary) user: read page 1 user: read page 1")
    assert len(summary.message.text) < 330
    assert model.remaining == 1 and model.requests == [] and model.summary_requests == [asked]
    answer = asyncio.run(model.complete(ModelRequest("scripted", None, [], []), stream=False))
    assert answer.message.text == "the one scripted answer"
