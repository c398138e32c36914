"""An answer an adapter cannot read is an ``UnreadableAnswer`` (a ``ProviderError``); an adapter's own bug is not.

Real servers on 127.0.0.1 send the answers; the runner is the real one.
"""

from __future__ import annotations

import pytest

from tests.loopback import Reply
from tests.provider_helpers import complete, run_through_runner, user, with_provider
from toolrun.core.errors import UnreadableAnswer
from toolrun.core.messages import Message, ModelRequest, TextPart
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig
from toolrun.providers.openai_chat import OpenAIChatProvider
from toolrun.providers.transport import HttpxTransport, WireRequest

PROVIDERS = ["openai", "openai-responses", "anthropic", "gemini", "ollama"]
REQUEST = ModelRequest("m", "system", [Message("user", [TextPart("hi")])], [])


def _provider(name: str, url: str):
    return get_provider_class(name)("m", ProviderConfig(url, "sk-unreadable-key"), HttpxTransport(max_retries=0))


@pytest.mark.parametrize("body", [["北京"], '"北京"', "7", "null"], ids=["list", "string", "number", "null"])
@pytest.mark.parametrize("name", PROVIDERS)
def test_every_adapter_refuses_a_body_that_is_not_an_object_the_same_way(loopback, name: str, body):
    server = loopback(lambda request: Reply(200, body, {"Content-Type": "application/json"}))  # a str: JSON text as is
    result = run_through_runner(_provider(name, server.url), [], user("北京?"), stream=False)
    assert result.stop_reason == "error"
    assert result.error.startswith("the provider failed: its answer has a shape toolrun cannot read (the body is ")
    assert result.error.endswith(f"is the server really {get_provider_class(name).name}-compatible?")


def test_the_error_names_the_provider_and_what_was_wrong(loopback):
    server = loopback(lambda request: Reply(200, {"choices": [{"message": "北京"}]}))
    with pytest.raises(UnreadableAnswer) as caught:
        complete(_provider("openai", server.url), REQUEST, stream=False)
    assert caught.value.provider == "openai"
    assert caught.value.problem.startswith("AttributeError: ")


class _BrokenRequest(OpenAIChatProvider):
    """An adapter with a bug where no answer is read: building the request."""

    def build_request(self, request: ModelRequest, *, stream: bool) -> WireRequest:
        return {}["url"]  # a KeyError of the adapter's own making


def test_an_adapter_bug_outside_parsing_surfaces_instead_of_ending_the_run(loopback):
    server = loopback(lambda request: Reply(200, {"choices": []}))
    provider = _BrokenRequest("m", ProviderConfig(server.url, "sk-unreadable-key"), HttpxTransport(max_retries=0))
    with pytest.raises(KeyError):
        run_through_runner(provider, [], user("hi"), stream=False)
    assert server.requests == []


def test_a_failing_event_sink_is_no_fault_of_the_answer(loopback):
    chunk = '{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}'
    server = loopback(lambda request: Reply(200, headers={"Content-Type": "text/event-stream"},
                                            chunks=[f"data: {chunk}\n\n", "data: [DONE]\n\n"]))

    def broken_sink(event) -> None:
        raise TypeError("the caller's own bug")

    with pytest.raises(TypeError, match="the caller's own bug"):
        with_provider(_provider("openai", server.url), lambda p: p.complete(REQUEST, stream=True, on_event=broken_sink))


# Text that is not text: each format's answer with a number where its text belongs.
TEXT_AS_A_NUMBER = {
    "openai": {"choices": [{"index": 0, "message": {"role": "assistant", "content": 42}, "finish_reason": "stop"}]},
    "openai-responses": {"status": "completed", "output": [{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": 42}]}]},
    "anthropic": {"content": [{"type": "text", "text": 42}], "stop_reason": "end_turn"},
    "gemini": {"candidates": [{"content": {"role": "model", "parts": [{"text": 42}]}, "finishReason": "STOP"}]},
    "ollama": {"message": {"role": "assistant", "content": 42}, "done": True, "done_reason": "stop"},
}


@pytest.mark.parametrize("name", PROVIDERS)
def test_an_answer_whose_text_is_a_number_ends_the_run_with_a_message_for_every_adapter(loopback, name: str):
    server = loopback(lambda request: Reply(200, TEXT_AS_A_NUMBER[name]))
    result = run_through_runner(_provider(name, server.url), [], user("北京?"), stream=False)
    assert result.stop_reason == "error", result.final  # not an answer with its text left out
    assert "cannot read" in result.error and "42" in result.error, result.error


@pytest.mark.parametrize("content", ["42", "true", '{"text": "北京"}'], ids=["number", "boolean", "object"])
def test_a_chat_stream_whose_content_is_not_text_ends_the_run_with_a_message(loopback, content: str):
    chunks = [f'data: {{"choices": [{{"index": 0, "delta": {{"content": {content}}}}}]}}\n\n',
              'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n', "data: [DONE]\n\n"]
    server = loopback(lambda request: Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=chunks))
    result = run_through_runner(_provider("openai", server.url), [], user("北京?"), stream=True)
    assert result.stop_reason == "error", result.final
    assert result.error.startswith("the provider failed: its answer has a shape toolrun cannot read (TypeError: ")
