"""How providers reach the network: one seam, so tests, recording and replay plug in here.

A ``Transport`` sends one JSON request and returns either a whole JSON body or the lines of
a stream. ``HttpxTransport`` is the real one (retries with ``Retry-After``); the recording
and replay transports in ``toolrun.replay.recording`` wrap or replace it.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import json
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from toolrun.core.errors import ProviderError
from toolrun.core.json_limits import MAX_BODY_DEPTH, loads_bounded
from toolrun.core.secrets import redact
from toolrun.core.text import surrogates_escaped

if TYPE_CHECKING:
    import httpx  # imported by HttpxTransport when made: a replay or a scripted run never needs it

MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a whole answer or stream; a real one is far smaller
MAX_LINE_CHARS = 16 * 1024 * 1024  # one line of a stream (an SSE event, an NDJSON object)
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def json_body(body: dict[str, Any]) -> bytes:
    """A request's JSON as UTF-8, Chinese as it is. A lone surrogate (half of a pair a model escaped in its
    answer, which goes back in the next request) is its ``\\u`` escape: the same JSON string, which UTF-8,
    and so httpx's own ``json=``, cannot encode."""
    return surrogates_escaped(json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)).encode()


@dataclass
class WireRequest:
    """One JSON request to a provider, as the adapter built it (``stream``: read the answer as lines)."""

    method: str
    url: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    stream: bool = False


@dataclass
class WireResponse:
    """A whole response: its status, headers and parsed JSON body."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None


class RequestGate(Protocol):
    """Paces the requests of many runs sharing one transport (a batch's rate limiter)."""

    async def wait(self) -> None:
        """Return when the next request may go out."""

    def observe(self, status: int, headers: Mapping[str, str]) -> None:
        """See every response's status and headers (``retry-after``, ``x-ratelimit-*``)."""


class Transport(ABC):
    @abstractmethod
    async def send(self, request: WireRequest) -> WireResponse:
        """Send a JSON request; raise ``ProviderError`` for an error status after retries."""

    @abstractmethod
    def stream(self, request: WireRequest) -> AsyncIterator[str]:
        """Lines of a streamed response as they arrive (an async generator)."""

    async def aclose(self) -> None:
        return None


def body_excerpt(text: str, limit: int = 200) -> str:
    """A body shown in an error: an HTML page (a proxy's, usually) by its title, else its start, quoted."""
    stripped = redact(text).strip()  # before cutting: a secret straddling the cut would not be recognised
    if stripped[:1] == "<":
        match = _html_title().search(stripped)
        if match and match.group(1).strip():
            return f"an HTML page titled {match.group(1).strip()!r} (a proxy between toolrun and the provider?)"
    return repr(stripped[:limit] + ("…" if len(stripped) > limit else "")) if stripped else "(empty body)"


@functools.cache
def _html_title() -> re.Pattern[str]:
    # Compiled for the first error body shown, not by every run that imports the transport.
    return re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def error_message(status: int, text: str) -> str:
    """The provider's own error message out of its JSON error body, or a short excerpt."""
    try:
        body = loads_bounded(text, MAX_BODY_DEPTH)
    except ValueError:
        body = None
    message = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message") or error.get("status")
        elif isinstance(error, str):
            message = error
    if not message:
        message = body_excerpt(text, 300)
    return redact(f"HTTP {status}: {message}")


class HttpxTransport(Transport):
    """The real network, through httpx, with bounded retries on retryable statuses."""

    def __init__(
        self,
        *,
        max_retries: int = 2,
        timeout: float = 600.0,
        max_retry_wait: float = 60.0,
        client: httpx.AsyncClient | None = None,
        gate: RequestGate | None = None,
    ):
        import httpx

        # start-up: what only a request over the network needs; a replay or a scripted run never makes one
        from toolrun.core.content_decoding import ACCEPT_ENCODING
        from toolrun.core.retry_policy import RetryPolicy  # a live run's retries only: a replay never waits
        from toolrun.core.tls import shared_ssl_context
        from toolrun.core.version import USER_AGENT

        self.retry = RetryPolicy(max_retries, RETRYABLE_STATUS, max_retry_wait, should_retry_header=True)
        self.gate = gate  # None: no pacing beyond the retries' own waits
        self.timeout = timeout  # from request to last byte; httpx's read timeout is the idle bound
        self._transport_error = httpx.TransportError
        self._client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=15.0),
                                                   verify=shared_ssl_context())
        self._headers = {"Accept-Encoding": ACCEPT_ENCODING, "User-Agent": USER_AGENT}  # only what content_decoding bounds

    @property
    def max_retry_wait(self) -> float:
        """The longest wait a retry sleeps; a longer one (a daily quota) is reported, not slept."""
        return self.retry.max_wait

    def _retry_wait(self, response: httpx.Response, text: str, attempt: int) -> float:
        """Seconds to wait before retrying; raises the final ``ProviderError`` when not retrying."""
        message = error_message(response.status_code, text)
        if self.retry.retries_status(response.status_code, response.headers, attempt):
            delay = self.retry.wait_for_status(response.headers, attempt, text)
            if not self.retry.too_long(delay):
                return delay
            message += f" (the provider asks to wait {delay:.0f} s before a retry; toolrun waits at most {self.retry.max_wait:.0f} s)"
        raise ProviderError(message, status=response.status_code, retryable=response.status_code in RETRYABLE_STATUS)

    def _built(self, request: WireRequest) -> httpx.Request:
        headers = {**self._headers, **request.headers}
        if request.body is None:
            return self._client.build_request(request.method, request.url, headers=headers)
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/json"
        return self._client.build_request(request.method, request.url, headers=headers, content=json_body(request.body))

    async def send(self, request: WireRequest) -> WireResponse:
        attempt = 0
        while True:
            if self.gate is not None:  # waiting for a slot is not part of the request's time
                await self.gate.wait()
            try:
                async with asyncio.timeout(self.timeout):  # the whole answer, however slowly it drips
                    response = await self._client.send(self._built(request), stream=True)
                    try:  # whatever happens next, the connection goes back to the pool
                        if self.gate is not None:
                            self.gate.observe(response.status_code, response.headers)
                        content = await _read_capped(response, MAX_ANSWER_BYTES)
                    finally:
                        await response.aclose()
            except (self._transport_error, TimeoutError) as exc:
                if self.retry.may_retry(attempt):
                    await asyncio.sleep(self.retry.wait_after_failure(attempt))
                    attempt += 1
                    continue
                raise ProviderError(self._failure(request.url, exc), retryable=True) from None
            text = content.decode(response.encoding or "utf-8", "replace")
            if response.status_code >= 400:
                await asyncio.sleep(self._retry_wait(response, text, attempt))
                attempt += 1
                continue
            try:
                body = loads_bounded(content, MAX_BODY_DEPTH)
            except ValueError:
                raise ProviderError(redact(f"HTTP {response.status_code}: the answer is not JSON: "
                                           f"{body_excerpt(text)}")) from None
            return WireResponse(response.status_code, dict(response.headers), body=body)

    async def stream(self, request: WireRequest) -> AsyncIterator[str]:
        attempt = 0
        delivered = 0
        while True:
            if self.gate is not None:  # waiting for a slot is not part of the request's time
                await self.gate.wait()
            deadline = asyncio.get_running_loop().time() + self.timeout  # the whole answer, keep-alives or not
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self._client.send(self._built(request), stream=True)
                try:  # whatever happens next, the connection goes back to the pool
                    if self.gate is not None:
                        self.gate.observe(response.status_code, response.headers)
                    if response.status_code >= 400:
                        async with asyncio.timeout_at(deadline):
                            content = await _read_capped(response, MAX_ANSWER_BYTES)
                        delay = self._retry_wait(response, content.decode("utf-8", "replace"), attempt)
                    else:
                        lines = capped_lines(_decoded_text(response, MAX_ANSWER_BYTES), MAX_LINE_CHARS, MAX_ANSWER_BYTES)
                        while True:
                            try:
                                async with asyncio.timeout_at(deadline):
                                    line = await anext(lines)
                            except StopAsyncIteration:
                                return
                            delivered += 1
                            yield line
                finally:
                    await response.aclose()
            except (self._transport_error, TimeoutError) as exc:
                if delivered:  # the lines already handed on cannot be taken back: no retry
                    raise ProviderError(
                        f"the stream broke off after {delivered} line{'s' if delivered != 1 else ''}: "
                        + self._failure(request.url, exc), retryable=True) from None
                if not self.retry.may_retry(attempt):
                    raise ProviderError(self._failure(request.url, exc), retryable=True) from None
                delay = self.retry.wait_after_failure(attempt)
            await asyncio.sleep(delay)
            attempt += 1

    def _failure(self, url: str, exc: httpx.TransportError | TimeoutError) -> str:
        """What went wrong on the way to ``url``, in words (httpx's timeouts have empty messages)."""
        import httpx

        timeout = self._client.timeout
        if isinstance(exc, TimeoutError):
            message = (f"no answer from {url} within {self.timeout:g} s (request_timeout bounds the whole "
                       "answer: the provider or a proxy is stuck, slow or sending without end)")
        elif isinstance(exc, httpx.ConnectTimeout):
            message = f"cannot connect to {url}: no connection within {timeout.connect:g} s"
        elif isinstance(exc, httpx.TimeoutException):
            message = f"no answer from {url} within {timeout.read:g} s (the provider or a proxy is stuck or slow)"
        elif isinstance(exc, httpx.ConnectError):
            message = f"cannot connect to {url}: {exc or type(exc).__name__}"
        else:
            message = f"the connection to {url} failed: {exc or type(exc).__name__}"
        return redact(message)

    async def aclose(self) -> None:
        await self._client.aclose()


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, str]]:
    """Server-sent events as (event name or None, data) pairs; ``[DONE]`` ends the stream."""
    event: str | None = None
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data:
                payload = "\n".join(data)
                if payload.strip() == "[DONE]":
                    return
                yield event, payload
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        payload = "\n".join(data)
        if payload.strip() != "[DONE]":
            yield event, payload


async def iter_ndjson(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Non-empty lines of a newline-delimited JSON stream (Ollama)."""
    async for raw in lines:
        if raw.strip():
            yield raw


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    """The body of a streamed response, decoded within bounds; ``ProviderError`` past ``limit`` decoded bytes."""
    content = bytearray()
    async for piece in _decoded_pieces(response, limit):
        content += piece
    return bytes(content)


async def _decoded_pieces(response: httpx.Response, limit: int) -> AsyncIterator[bytes]:
    """The body's bytes as toolrun decodes them (one bounded coding: content_decoding), errors as ProviderError."""
    from toolrun.core.content_decoding import BodyTooLarge, RefusedBody, decoded  # start-up: a live answer only

    try:
        async for piece in decoded(response.aiter_raw(), response.headers.get("content-encoding"), limit):
            yield piece
    except BodyTooLarge:
        raise ProviderError(f"the answer is larger than {limit // (1024 * 1024)} MB: toolrun stopped reading it") from None
    except RefusedBody as exc:
        raise ProviderError(f"HTTP {response.status_code}: {exc}") from None


async def _decoded_text(response: httpx.Response, limit: int) -> AsyncIterator[str]:
    """The body as text, piece by piece, in the response's charset (UTF-8 unless it says otherwise)."""
    text = codecs.getincrementaldecoder(_codec(response.encoding))("replace")
    async for piece in _decoded_pieces(response, limit):
        if chunk := text.decode(piece):
            yield chunk
    if rest := text.decode(b"", final=True):
        yield rest


def _codec(name: str | None) -> str:
    try:
        return codecs.lookup(name or "utf-8").name
    except LookupError:  # a charset Python does not know: read it as UTF-8, as httpx would
        return "utf-8"


@functools.cache
def _line_break() -> re.Pattern[str]:
    # Compiled for the first live stream, not by every run that imports the transport.
    return re.compile(r"\r\n|\r|\n")


async def capped_lines(texts: AsyncIterator[str], max_line: int, max_total: int) -> AsyncIterator[str]:
    """Lines of streamed text (\\n, \\r\\n or \\r ends one); ``ProviderError`` for a line or a whole
    stream past its limit, so a server sending without end cannot grow memory without end. Only the new
    text is searched for line ends: a line arriving in many pieces costs its length, not its length squared."""
    pending: list[str] = []  # the pieces of the line not yet ended
    pending_chars = 0
    held = ""  # a final \r, maybe the first half of \r\n: decided by the next piece
    total = 0
    async for text in texts:
        total += len(text)
        if total > max_total:
            raise ProviderError(f"the stream is larger than {max_total // (1024 * 1024)} MB: toolrun stopped reading it")
        text, held = held + text, ""
        if text.endswith("\r"):
            text, held = text[:-1], "\r"
        parts = _line_break().split(text)
        if len(parts) > 1:
            yield "".join(pending) + parts[0]
            for line in parts[1:-1]:
                yield line
            pending, pending_chars = [], 0
        pending.append(parts[-1])
        pending_chars += len(parts[-1])
        if pending_chars > max_line:
            raise ProviderError(f"a line of the stream is longer than {max_line // (1024 * 1024)} MB: "
                                "toolrun stopped reading it")
    if held or pending_chars:  # a final \r ends its line, an empty one too
        yield "".join(pending)
