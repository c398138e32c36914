"""The SDK's memory streams wrapped: what a wrapper only hands on to the stream inside, written once.

``toolrun.mcp.unreadable`` and ``toolrun.mcp.stdio`` put wrappers between the SDK's stdio
transport and its server; each overrides ``receive`` or ``send`` and inherits the rest.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self


class WrappedStream:
    """A stream that closes, and is a context manager, as the stream it wraps."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()


class WrappedReceiveStream(WrappedStream):
    """A receive stream: ``receive`` is the wrapper's own; iteration ends where the stream does."""

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's context streams keep it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        return await self._inner.receive()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
