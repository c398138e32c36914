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
