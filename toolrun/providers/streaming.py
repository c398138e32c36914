"""Reading a streamed answer, shared by every adapter: lines -> events -> parsed JSON.

``stream_lines`` closes the HTTP response when the adapter is done (not at garbage
collection); ``sse_json`` and ``ndjson_json`` parse each event and turn a body that is not a
stream at all (a proxy's login page, a plain JSON error) into a ``ProviderError`` that
shows it, instead of an empty answer.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from toolrun.core.errors import ProviderError
from toolrun.core.json_limits import MAX_BODY_DEPTH, loads_bounded
from toolrun.core.messages import StreamEvent
from toolrun.core.secrets import redact
from toolrun.core.text import excerpt
from toolrun.providers.transport import Transport, WireRequest, body_excerpt, iter_ndjson, iter_sse

EventSink = Callable[[StreamEvent], None]

_KEPT_LINES = 2000  # enough of a body that is not a stream to parse it whole (a plain JSON answer)
_SSE_LINE = re.compile(r"(data|event|id|retry)?:")  # a field or a comment: an event stream, if an empty one


class NotAnEventStream(ProviderError):
    """A streaming request answered with something that holds no event; ``text`` is its start."""

    def __init__(self, text: str):
        super().__init__(redact(f"the provider answered a streaming request with something that is not an event "
                                f"stream: {body_excerpt(text)}"))
        self.text = text


@asynccontextmanager
async def stream_lines(transport: Transport, wire: WireRequest) -> AsyncIterator[AsyncIterator[str]]:
    """The lines of a streamed answer; the HTTP response is closed on exit, not at garbage collection.

    Without it a stream left at ``[DONE]`` stays open until the generator is collected.
    """
    lines = transport.stream(wire)
    try:
        yield lines
    finally:
        close = getattr(lines, "aclose", None)
        if close is not None:
            await close()


async def sse_json(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, dict[str, Any]]]:
    """(event name, parsed JSON object) of an SSE stream.

    ``ProviderError`` for an event that is not JSON; ``NotAnEventStream`` when the body
    carried text but not one line of an event stream.
    """
    kept: list[str] = []
    events = 0
    async for event, data in iter_sse(_keep_first(lines, kept)):
        events += 1
        try:
            payload = loads_bounded(data, MAX_BODY_DEPTH)
        except ValueError:
            raise ProviderError(redact(f"the stream carried something that is not JSON: {excerpt(data)!r}")) from None
        if isinstance(payload, dict):
            yield event, payload
    if not events and not any(_SSE_LINE.match(line) for line in kept) and "".join(kept).strip():
        raise NotAnEventStream("\n".join(kept))


async def ndjson_json(lines: AsyncIterator[str], provider: str) -> AsyncIterator[dict[str, Any]]:
    """Parsed objects of a newline-delimited JSON stream (Ollama); ``ProviderError`` for a line that is not JSON."""
    async for line in iter_ndjson(lines):
        try:
            chunk = loads_bounded(line, MAX_BODY_DEPTH)
        except ValueError:
            raise ProviderError(redact(f"{provider}'s stream carried a line that is not JSON: "
                                       f"{body_excerpt(line)}")) from None
        if isinstance(chunk, dict):
            yield chunk


async def _keep_first(lines: AsyncIterator[str], kept: list[str]) -> AsyncIterator[str]:
    async for line in lines:
        if len(kept) < _KEPT_LINES:
            kept.append(line)
        yield line


def emit(events: list[StreamEvent], on_event: EventSink | None) -> None:
    """Hand an adapter's progress events to the caller's sink, if any."""
    if on_event is not None:
        for event in events:
            on_event(event)
