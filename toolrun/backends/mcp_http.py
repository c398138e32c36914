"""The HTTP client of ``mcp_server`` tools reached by ``url``: every response body decoded by toolrun, bounded.

The MCP SDK reads responses through an ``httpx2.AsyncClient`` (``aread``, SSE lines). Its own
decoding inflates a whole chunk at once and stacks codings; the transport here hands the SDK
bodies already decoded by ``content_decoding`` (one coding, ``MAX_RESPONSE_BYTES`` per
response), so a decompression bomb from a server ends that request with an error instead of
the process. Imported only when a url server is connected.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from toolrun.core.content_decoding import ACCEPT_ENCODING, RefusedBody, content_coding, decoded

MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # one JSON answer or one SSE stream, decoded


class _DecodedStream(httpx2.AsyncByteStream):
    """A response's raw stream, decoded piece by piece; a refusal is httpx2's DecodingError, which the SDK reports."""

    def __init__(self, raw: Any, coding: str, request: httpx2.Request, limit: int) -> None:
        self._raw = raw
        self._coding = coding
        self._request = request
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in decoded(self._raw, self._coding, self._limit):
                yield piece
        except RefusedBody as exc:
            raise httpx2.DecodingError(str(exc), request=self._request) from None

    async def aclose(self) -> None:
        await self._raw.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport so that no response body reaches the client undecoded or unbounded."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int = MAX_RESPONSE_BYTES) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        try:
            coding = content_coding(response.headers.get("content-encoding"))
        except RefusedBody as exc:
            await response.aclose()
            raise httpx2.DecodingError(str(exc), request=request) from None
        headers = [(name, value) for name, value in response.headers.multi_items()
                   if name.lower() not in ("content-encoding", "content-length")]
        return httpx2.Response(response.status_code, headers=headers, extensions=response.extensions,
                               stream=_DecodedStream(response.stream, coding, request, self._limit))

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounded_client(headers: Mapping[str, str], timeout: float | httpx2.Timeout,
                   event_hooks: dict[str, list[Any]]) -> httpx2.AsyncClient:
    """The client the SDK's streamable HTTP transport is given: bounded decoding, only codings toolrun decodes."""
    client = httpx2.AsyncClient(headers={"Accept-Encoding": ACCEPT_ENCODING, **headers}, timeout=timeout,
                                event_hooks=event_hooks)
    # Wrapped after the fact: passing transport= would drop the proxies httpx2 reads from the environment.
    client._transport = BoundedTransport(client._transport)
    client._mounts = {pattern: None if mounted is None else BoundedTransport(mounted)
                      for pattern, mounted in client._mounts.items()}
    return client


def http_transport(url: str, headers: Mapping[str, str], timeout: float, on_response: list[Any], legacy_sse: bool) -> Any:
    """The SDK transport for a url server: streamable HTTP, or the HTTP+SSE of protocol 2024-11-05."""
    hooks = {"response": on_response}
    if legacy_sse:
        def factory(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                    auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
            return bounded_client(headers or {}, timeout if timeout is not None else 30.0, hooks)

        # The SSE stream stays open between events for as long as the session lives.
        return sse_client(url, headers=dict(headers), timeout=timeout, sse_read_timeout=24 * 3600.0,
                          httpx_client_factory=factory)
    return streamable_http_client(url, http_client=bounded_client(headers, timeout, hooks))
