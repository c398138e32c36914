"""Every provider adapter against a server that misbehaves: each case is a ProviderError
with a message that says what happened — never a silent empty answer, never a traceback.

The servers are loopback HTTP servers; the adapters are the real ones over HttpxTransport.
"""

from __future__ import annotations

import json

import pytest

from tests.loopback import Reply
from tests.provider_helpers import complete, run_through_runner, user
from toolrun.core.errors import ProviderError
from toolrun.core.messages import Message, ModelRequest, TextPart, ToolDefinition
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig
from toolrun.providers.transport import HttpxTransport

PROVIDERS = ["openai", "openai-responses", "anthropic", "gemini", "ollama"]
SSE_PROVIDERS = ["openai", "openai-responses", "anthropic", "gemini"]
TOOL = ToolDefinition("get_flower_inventory", "Stock of one city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
LOGIN_PAGE = "<html><head><title>Proxy login</title></head><body>Please log in to the proxy</body></html>"
BAD_GATEWAY = ("<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>"
               "</center><hr><center>nginx</center></body></html>")

# The first event of each wire format's stream: a stream that stops after it is incomplete.
FIRST_EVENT = {
    "openai": 'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "北京"}}]}\n\n',
    "openai-responses": 'event: response.created\ndata: {"type": "response.created", "response": {"id": "r1"}}\n\n',
    "anthropic": ('event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "model": "c",'
                  ' "content": [], "usage": {"input_tokens": 3, "output_tokens": 0}}}\n\n'),
    "gemini": 'data: {"candidates": [{"content": {"role": "model", "parts": [{"text": "北京"}]}}]}\n\n',
    "ollama": '{"model": "m", "message": {"role": "assistant", "content": "北京"}, "done": false}\n',
}


def _complete(name: str, url: str, *, stream: bool):
    provider_class = get_provider_class(name)
    provider = provider_class("m", ProviderConfig(url, "sk-hostile-key"), HttpxTransport(max_retries=1))
    request = ModelRequest("m", "system", [Message("user", [TextPart("北京的库存?")])], [TOOL])
    return complete(provider, request, stream=stream)


@pytest.mark.parametrize("name", SSE_PROVIDERS)
def test_a_streaming_request_answered_with_an_html_page_says_so(loopback, name: str):
    server = loopback(lambda request: Reply(200, LOGIN_PAGE, {"Content-Type": "text/html"}))
    with pytest.raises(ProviderError, match="not an event stream: an HTML page titled 'Proxy login'"):
        _complete(name, server.url, stream=True)


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_whole_answer_that_is_an_html_page_says_so(loopback, name: str):
    server = loopback(lambda request: Reply(200, LOGIN_PAGE, {"Content-Type": "text/html"}))
    with pytest.raises(ProviderError, match="not JSON: an HTML page titled 'Proxy login'"):
        _complete(name, server.url, stream=False)


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_proxy_error_page_is_named_by_its_title(loopback, name: str):
    # Retry-After: 0 so the one retry a 502 earns comes at once instead of after the backoff.
    server = loopback(lambda request: Reply(502, BAD_GATEWAY, {"Content-Type": "text/html", "Retry-After": "0"}))
    with pytest.raises(ProviderError) as caught:
        _complete(name, server.url, stream=False)
    assert str(caught.value) == "HTTP 502: an HTML page titled '502 Bad Gateway' (a proxy between toolrun and the provider?)"
    assert len(server.requests) == 2


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_stream_that_ends_after_its_first_event_is_incomplete(loopback, name: str):
    content_type = "application/x-ndjson" if name == "ollama" else "text/event-stream"
    server = loopback(lambda request: Reply(200, headers={"Content-Type": content_type}, chunks=[FIRST_EVENT[name]]))
    with pytest.raises(ProviderError, match="ended before"):
        _complete(name, server.url, stream=True)


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_stream_cut_mid_way_is_one_request_and_says_it_broke_off(loopback, name: str):
    server = loopback(lambda request: Reply(200, headers={"Content-Type": "text/event-stream"},
                                            chunks=[FIRST_EVENT[name], FIRST_EVENT[name]], cut_after=1))
    with pytest.raises(ProviderError, match=r"the stream broke off after \d+ lines?: "):
        _complete(name, server.url, stream=True)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_400_gives_the_providers_message_and_never_the_key(loopback, name: str):
    body = {"error": {"message": "messages.1: bad thing (key sk-hostile-key)", "type": "invalid_request_error"}}
    server = loopback(lambda request: Reply(400, body))
    with pytest.raises(ProviderError, match="HTTP 400: messages.1: bad thing") as caught:
        _complete(name, server.url, stream=True)
    assert "sk-hostile-key" not in str(caught.value)
    assert len(server.requests) == 1  # a 400 is not retried


def test_the_stream_request_bodies_were_json(loopback):
    # Guard for this file: the servers above really received each adapter's JSON request.
    server = loopback(lambda request: Reply(400, {"error": {"message": "x"}}))
    for name in PROVIDERS:
        with pytest.raises(ProviderError):
            _complete(name, server.url, stream=True)
    assert all(isinstance(json.loads(r.body), dict) for r in server.requests)
    assert len(server.requests) == len(PROVIDERS)


@pytest.mark.parametrize("name", SSE_PROVIDERS)
def test_a_stream_of_keep_alive_comments_only_is_an_incomplete_stream(loopback, name: str):
    server = loopback(lambda request: Reply(200, headers={"Content-Type": "text/event-stream"},
                                            chunks=[": keep-alive\n\n", ": keep-alive\n\n"]))
    with pytest.raises(ProviderError, match="ended before"):
        _complete(name, server.url, stream=True)


# Valid JSON in the wrong shape: what a server that only looks compatible sends back.
WRONG_SHAPES = {
    "openai": {"choices": [{"message": "北京"}]},
    "openai-responses": {"output": [None]},
    "anthropic": {"content": "北京"},
    "gemini": {"candidates": [{"content": {"parts": [{"functionCall": "北京"}]}}]},
    "ollama": {"message": {"tool_calls": "北京"}, "done": True},
}


@pytest.mark.parametrize("name", PROVIDERS)
def test_an_answer_of_the_wrong_shape_ends_the_run_with_a_message(loopback, name: str):
    server = loopback(lambda request: Reply(200, WRONG_SHAPES[name]))
    provider = get_provider_class(name)("m", ProviderConfig(server.url, "sk-hostile-key"), HttpxTransport(max_retries=0))
    result = run_through_runner(provider, [], user("北京?"), stream=False)
    assert result.stop_reason == "error"
    assert result.error.startswith("the provider failed: its answer has a shape toolrun cannot read (")


# Numbers in an answer: a usage count of 1e400 or Infinity is a float Python cannot make an int of.
N = "__NUMBER__"
ANSWERS_WITH_USAGE = {
    "openai": ({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": N, "completion_tokens": 1}}, "prompt_tokens"),
    "openai-responses": ({"status": "completed", "output": [{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "hi"}]}], "usage": {"input_tokens": 2, "output_tokens": N}}, "output_tokens"),
    "anthropic": ({"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 2, "cache_read_input_tokens": N, "output_tokens": 1}},
                  "cache_read_input_tokens"),
    "gemini": ({"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 2, "thoughtsTokenCount": N}}, "thoughtsTokenCount"),
    "ollama": ({"message": {"role": "assistant", "content": "hi"}, "done": True, "done_reason": "stop",
                "prompt_eval_count": N, "eval_count": 1}, "prompt_eval_count"),
}
STREAMS_WITH_USAGE = {
    "openai": ('data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}\n\n'
               'data: {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": __NUMBER__}}\n\n'
               'data: [DONE]\n\n', "completion_tokens"),
    "openai-responses": ('event: response.completed\ndata: {"type": "response.completed", "response": {"status": '
                         '"completed", "output": [{"type": "message", "role": "assistant", "content": [{"type": '
                         '"output_text", "text": "hi"}]}], "usage": {"input_tokens": __NUMBER__, '
                         '"output_tokens": 1}}}\n\n', "input_tokens"),
    "anthropic": ('event: message_start\ndata: {"type": "message_start", "message": {"model": "c", "content": [], '
                  '"usage": {"input_tokens": 3, "output_tokens": 0}}}\n\n'
                  'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, '
                  '"usage": {"output_tokens": __NUMBER__}}\n\n'
                  'event: message_stop\ndata: {"type": "message_stop"}\n\n', "output_tokens"),
    "gemini": ('data: {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": '
               '"STOP"}], "usageMetadata": {"promptTokenCount": __NUMBER__}}\n\n', "promptTokenCount"),
    "ollama": ('{"message": {"role": "assistant", "content": "hi"}, "done": false}\n'
               '{"message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop", '
               '"prompt_eval_count": 2, "eval_count": __NUMBER__}\n', "eval_count"),
}
IMPOSSIBLE_COUNTS = ["1e400", "-1e400", "Infinity", "NaN", "-1", "1.5", "true", '"12"', "1e15", "[1]"]


def _answer_text(name: str, number: str) -> tuple[str, str]:
    body, field = ANSWERS_WITH_USAGE[name]
    return json.dumps(body).replace(f'"{N}"', number), field


def _provider(name: str, url: str):
    return get_provider_class(name)("m", ProviderConfig(url, "sk-hostile-key"), HttpxTransport(max_retries=0))


@pytest.mark.parametrize("number", IMPOSSIBLE_COUNTS)
@pytest.mark.parametrize("name", PROVIDERS)
def test_an_impossible_token_count_ends_the_run_with_a_message_naming_the_field(loopback, name: str, number: str):
    text, field = _answer_text(name, number)
    server = loopback(lambda request: Reply(200, text, {"Content-Type": "application/json"}))
    result = run_through_runner(_provider(name, server.url), [], user("北京?"), stream=False)
    assert result.stop_reason == "error"
    assert field in result.error and "\n" not in result.error, result.error


@pytest.mark.parametrize("number", ["1e400", "Infinity", "NaN", "-3", "2.5"])
@pytest.mark.parametrize("name", PROVIDERS)
def test_an_impossible_token_count_in_a_stream_ends_the_run_with_a_message(loopback, name: str, number: str):
    stream, field = STREAMS_WITH_USAGE[name]
    content_type = "application/x-ndjson" if name == "ollama" else "text/event-stream"
    server = loopback(lambda request: Reply(200, headers={"Content-Type": content_type},
                                            chunks=[stream.replace(N, number)]))
    result = run_through_runner(_provider(name, server.url), [], user("北京?"), stream=True)
    assert result.stop_reason == "error"
    assert field in result.error and "\n" not in result.error, result.error


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("number", ["7", "7.0"])
def test_a_whole_token_count_is_read_as_before(loopback, name: str, number: str):
    text, _ = _answer_text(name, number)
    server = loopback(lambda request: Reply(200, text, {"Content-Type": "application/json"}))
    result = run_through_runner(_provider(name, server.url), [], user("北京?"), stream=False)
    assert result.stop_reason != "error", result.error
    assert result.usage.input_tokens + result.usage.output_tokens in (8, 9, 10)  # 7 plus the fixed counts


@pytest.mark.parametrize("index", ["1e400", "Infinity", "-1", "NaN"])
def test_an_impossible_block_index_in_an_anthropic_stream_is_a_provider_error(loopback, index: str):
    stream = ('event: message_start\ndata: {"type": "message_start", "message": {"model": "c", "content": [], '
              '"usage": {"input_tokens": 3, "output_tokens": 0}}}\n\n'
              'event: content_block_start\ndata: {"type": "content_block_start", "index": ' + index + ', '
              '"content_block": {"type": "text", "text": ""}}\n\n')
    server = loopback(lambda request: Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=[stream]))
    result = run_through_runner(_provider("anthropic", server.url), [], user("北京?"), stream=True)
    assert result.stop_reason == "error"
    assert "index" in result.error and "\n" not in result.error, result.error


# A number Python will not read: int() stops at 4,300 digits (a ValueError that is not a JSONDecodeError).
HUGE = "1" + "0" * 5000
CALLS_WITH_A_HUGE_NUMBER = {
    "openai": ({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "t", "arguments": '{"n": ' + HUGE + "}"}}]}}]}, False),
    "openai-responses": ({"status": "completed", "output": [{"type": "function_call", "call_id": "c1", "name": "t",
                                                             "arguments": '{"n": ' + HUGE + "}"}]}, False),
    "anthropic": ('event: message_start\ndata: {"type": "message_start", "message": {"model": "c", "content": []}}\n\n'
                  'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, "content_block": '
                  '{"type": "tool_use", "id": "c1", "name": "t", "input": {}}}\n\n'
                  'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": '
                  '{"type": "input_json_delta", "partial_json": "{\\"n\\": ' + HUGE + '}"}}\n\n'
                  'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
                  'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}\n\n'
                  'event: message_stop\ndata: {"type": "message_stop"}\n\n', True),
}


@pytest.mark.parametrize("name", list(CALLS_WITH_A_HUGE_NUMBER))
def test_a_number_too_long_for_python_in_a_calls_arguments_is_an_error_the_model_sees(loopback, tmp_path, name: str):
    from tests.backend_helpers import make_tool

    answer, streamed = CALLS_WITH_A_HUGE_NUMBER[name]
    replies = iter([Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=[answer]) if streamed
                    else Reply(200, json.dumps(answer), {"Content-Type": "application/json"})])
    server = loopback(lambda request: next(replies, Reply(500, "no more answers")))
    tool = make_tool("shell", {"argv": ["echo", "ran"]}, folder=tmp_path, properties={"n": {"type": "integer"}})
    result = run_through_runner(_provider(name, server.url), [tool], user("北京?"), stream=streamed)
    call = result.turns[0].tool_calls[0]  # the run went on: the model was told, nothing ran
    assert call.is_error and "not valid JSON" in call.result and "ran" not in call.result, call.result


def test_a_full_context_window_is_told_apart_from_the_output_limit(loopback):
    # Anthropic stops with model_context_window_exceeded when the conversation filled the window: the run
    # said "raise settings.max_tokens", which cannot help; settings.context bounds what is sent.
    answer = {"id": "m", "type": "message", "role": "assistant", "model": "c",
              "content": [{"type": "text", "text": "北京有"}], "stop_reason": "model_context_window_exceeded",
              "usage": {"input_tokens": 199990, "output_tokens": 10}}
    server = loopback(lambda request: Reply(200, json.dumps(answer), {"Content-Type": "application/json"}))
    result = run_through_runner(_provider("anthropic", server.url), [], user("北京?"), stream=False)
    assert result.stop_reason == "length" and "settings.context" in result.error and "max_tokens" not in result.error


# A key given twice: Python's JSON keeps the last value, but which city the model meant is a guess.
TWICE = '{"city": "北京", "city": "上海"}'
CALLS_WITH_A_KEY_TWICE = {
    "openai": ({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "t", "arguments": TWICE}}]}}]}, False),
    "openai-responses": ({"status": "completed", "output": [{"type": "function_call", "call_id": "c1", "name": "t",
                                                             "arguments": TWICE}]}, False),
    "anthropic": ('event: message_start\ndata: {"type": "message_start", "message": {"model": "c", "content": []}}\n\n'
                  'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, "content_block": '
                  '{"type": "tool_use", "id": "c1", "name": "t", "input": {}}}\n\n'
                  'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": '
                  '{"type": "input_json_delta", "partial_json": ' + json.dumps(TWICE) + '}}\n\n'
                  'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
                  'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}\n\n'
                  'event: message_stop\ndata: {"type": "message_stop"}\n\n', True),
}
FINAL_ANSWERS = {
    "openai": {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "好"}}]},
    "openai-responses": {"status": "completed", "output": [{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "好"}]}]},
    "anthropic": ('event: message_start\ndata: {"type": "message_start", "message": {"model": "c", "content": []}}\n\n'
                  'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, "content_block": '
                  '{"type": "text", "text": "好"}}\n\n'
                  'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}\n\n'
                  'event: message_stop\ndata: {"type": "message_stop"}\n\n'),
}


def _reply(answer, streamed: bool) -> Reply:
    if streamed:
        return Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=[answer])
    return Reply(200, json.dumps(answer), {"Content-Type": "application/json"})


@pytest.mark.parametrize("name", list(CALLS_WITH_A_KEY_TWICE))
def test_arguments_that_give_a_key_twice_are_an_error_the_model_sees_naming_the_key(loopback, tmp_path, name: str):
    from tests.backend_helpers import make_tool

    answer, streamed = CALLS_WITH_A_KEY_TWICE[name]
    replies = iter([_reply(answer, streamed), _reply(FINAL_ANSWERS[name], streamed)])
    server = loopback(lambda request: next(replies, Reply(500, "no more answers")))
    tool = make_tool("shell", {"argv": ["echo", "ran"]}, folder=tmp_path, properties={"city": {"type": "string"}})
    result = run_through_runner(_provider(name, server.url), [tool], user("北京?"), stream=streamed)
    call = result.turns[0].tool_calls[0]  # nothing ran; the model was told which key, and answered
    assert call.is_error and "ran" not in call.result, call.result
    assert call.result.startswith("the arguments give the key 'city' more than once: "), call.result
    assert call.arguments == TWICE  # the transcript shows what the model sent, not the value Python kept
    assert "the key 'city' more than once" in server.requests[1].body.decode()
    assert result.final == "好"
