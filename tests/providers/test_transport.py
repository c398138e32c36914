"""The real HttpxTransport against a loopback server: retries, errors, streams."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.loopback import Reply
from toolrun.core.errors import ProviderError
from toolrun.core.retry_after import retry_delay
from toolrun.providers.transport import HttpxTransport, WireRequest, WireResponse, iter_sse


def _run(coro):
    return asyncio.run(coro)


def _send(request: WireRequest, **options: Any) -> WireResponse:
    """One request through a fresh HttpxTransport(**options), closed afterwards."""

    async def go() -> WireResponse:
        transport = HttpxTransport(**options)
        try:
            return await transport.send(request)
        finally:
            await transport.aclose()

    return _run(go())


def test_retry_after_headers_are_honoured():
    assert retry_delay({"retry-after-ms": "1500"}, 0) == 1.5
    assert retry_delay({"Retry-After": "2"}, 0) == 2.0
    assert 0 < retry_delay({}, 0) <= 0.75


def test_retries_a_429_then_succeeds(loopback):
    answers = iter([Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0"}), Reply(200, {"ok": True})])
    server = loopback(lambda request: next(answers))

    assert _send(WireRequest("POST", server.url + "/x", {}, {"a": 1}), max_retries=2).body == {"ok": True}
    assert len(server.requests) == 2


def test_error_status_gives_the_providers_message(loopback):
    server = loopback(lambda request: Reply(401, {"error": {"message": "Incorrect API key provided"}}))

    with pytest.raises(ProviderError, match="HTTP 401: Incorrect API key provided"):
        _send(WireRequest("POST", server.url, {}, {}), max_retries=0)


def test_should_retry_header_false_stops_retries(loopback):
    server = loopback(lambda request: Reply(503, {"error": {"message": "no"}}, {"x-should-retry": "false"}))

    with pytest.raises(ProviderError):
        _send(WireRequest("POST", server.url, {}, {}), max_retries=3)
    assert len(server.requests) == 1


def test_stream_lines_parse_as_sse_events(loopback):
    frames = ["event: a\ndata: {\"n\": 1}\n\n", ": comment\n\n", "data: {\"n\": 2}\n\n", "data: [DONE]\n\n"]
    server = loopback(lambda request: Reply(200, chunks=frames, headers={"Content-Type": "text/event-stream"}))

    async def go():
        transport = HttpxTransport()
        try:
            return [event async for event in iter_sse(transport.stream(WireRequest("POST", server.url, {}, {}, stream=True)))]
        finally:
            await transport.aclose()

    assert _run(go()) == [("a", '{"n": 1}'), (None, '{"n": 2}')]


def test_a_wait_longer_than_the_limit_is_reported_not_slept(loopback):
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota",
                      "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "86400s"}]}}
    server = loopback(lambda request: Reply(429, body))

    with pytest.raises(ProviderError, match="asks to wait 86400 s"):
        _send(WireRequest("POST", server.url, {}, {}), max_retries=2, max_retry_wait=5)
    assert len(server.requests) == 1


def test_a_stream_cut_after_some_lines_is_not_replayed_from_the_start(loopback):
    # A retry after lines were handed on would feed the adapter the same fragments twice.
    frames = ['data: {"n": 1}\n\n', 'data: {"n": 2}\n\n', 'data: {"n": 3}\n\n']
    replies = iter([Reply(200, chunks=frames, cut_after=1), Reply(200, chunks=frames)])
    server = loopback(lambda request: next(replies))
    seen: list[str] = []

    async def go():
        transport = HttpxTransport(max_retries=2)
        try:
            async for _event, data in iter_sse(transport.stream(WireRequest("POST", server.url, {}, {}, stream=True))):
                seen.append(data)
        finally:
            await transport.aclose()

    with pytest.raises(ProviderError, match="the stream broke off"):
        _run(go())
    assert seen == ['{"n": 1}']
    assert len(server.requests) == 1


def test_a_stream_cut_before_any_line_is_retried(loopback):
    frames = ['data: {"n": 1}\n\n', 'data: {"n": 2}\n\n']
    replies = iter([Reply(200, chunks=frames, cut_after=0), Reply(200, chunks=frames)])
    server = loopback(lambda request: next(replies))

    async def go():
        transport = HttpxTransport(max_retries=2)
        try:
            return [data async for _e, data in iter_sse(transport.stream(WireRequest("POST", server.url, {}, {}, stream=True)))]
        finally:
            await transport.aclose()

    assert _run(go()) == ['{"n": 1}', '{"n": 2}']
    assert len(server.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_that_does_not_answer_in_time_is_named_with_the_wait(loopback, stream: bool):
    server = loopback(lambda request: Reply(200, {"ok": True}, delay=1.5))

    async def go():
        transport = HttpxTransport(max_retries=0, timeout=0.3)
        request = WireRequest("POST", server.url + "/v1/chat", {}, {}, stream=stream)
        try:
            if stream:
                async for _line in transport.stream(request):
                    pass
            else:
                await transport.send(request)
        finally:
            await transport.aclose()

    with pytest.raises(ProviderError, match=r"no answer from http://127\.0\.0\.1:\d+/v1/chat within 0\.3 s"):
        _run(go())


def test_a_closed_port_says_it_cannot_connect():
    with pytest.raises(ProviderError, match=r"cannot connect to http://127\.0\.0\.1:9/v1/chat: .+"):
        _send(WireRequest("POST", "http://127.0.0.1:9/v1/chat", {}, {}), max_retries=0)
