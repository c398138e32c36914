"""Response bodies decoded by toolrun itself, bounded while they inflate.

httpx decodes a ``Content-Encoding`` a whole network chunk at a time and stacks as many
codings as a server names: a few KB sent as ``gzip, gzip`` inflate to gigabytes in one
call, before any size limit can look. Every HTTP read of toolrun therefore reads the raw
bytes and decodes them here instead:

- one content-coding at most (``identity`` does not count); two or more are refused;
- only ``gzip``, ``x-gzip`` and ``deflate`` (what ``ACCEPT_ENCODING`` asks for); any
  other coding is refused, never passed on as if it were text;
- each step of inflating makes at most ``STEP_BYTES`` of output, and the whole body at
  most ``limit`` bytes: past it ``BodyTooLarge`` is raised before more work is done;
- the async reader gives the event loop a turn after each step, so a body being decoded
  never blocks other calls.

Pure standard library: the backends, the providers and the importer all use it.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator

ACCEPT_ENCODING = "gzip, deflate"  # what toolrun can decode within bounds: send it as Accept-Encoding
STEP_BYTES = 64 * 1024  # output of one inflate step: a bounded piece of work and of memory
_GZIP = "gzip"
_DEFLATE = "deflate"
_IDENTITY = "identity"
_NAMES = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": _DEFLATE, "identity": _IDENTITY}


class RefusedBody(ValueError):
    """A response body toolrun will not read; the message is one sentence for an error result."""


class BodyTooLarge(RefusedBody):
    """The decoded body passed its limit; ``encoding`` says whether it was compressed."""

    def __init__(self, limit: int, encoding: str):
        compressed = f" (Content-Encoding: {encoding})" if encoding != _IDENTITY else ""
        super().__init__(f"the response body decodes to more than {_size(limit)}{compressed}: "
                         "toolrun stopped reading it")
        self.limit = limit
        self.encoding = encoding


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit} bytes"


def content_coding(header: str | None) -> str:
    """The one coding a ``Content-Encoding`` header names ("identity" for none); ``RefusedBody`` otherwise."""
    names = [name.strip().lower() for name in (header or "").split(",")]
    codings = [name for name in names if name and name != _IDENTITY]
    if len(codings) > 1:
        raise RefusedBody(f"refused: the response stacks content encodings ({_printable(header)}); "
                          "toolrun decodes at most one")
    if not codings:
        return _IDENTITY
    if codings[0] not in _NAMES:
        raise RefusedBody(f"refused: the response has an unsupported content encoding ({_printable(header)}); "
                          f"toolrun decodes {ACCEPT_ENCODING}")
    return _NAMES[codings[0]]


def _printable(text: str | None) -> str:
    shown = (text or "")[:60]
    return ascii(shown)[1:-1] + ("…" if len(text or "") > 60 else "")


class BoundedDecoder:
    """Decodes one body piece by piece: ``feed`` raw bytes, then ``finish``; each yields decoded pieces."""

    def __init__(self, coding: str, limit: int):
        self.coding = coding
        self.limit = limit
        self.total = 0
        self._inflater: zlib._Decompress | None = self._new_inflater()
        self._started = False  # deflate: whether the zlib header guess has been confirmed

    def _new_inflater(self) -> zlib._Decompress | None:
        if self.coding == _GZIP:
            return zlib.decompressobj(zlib.MAX_WBITS | 16)
        if self.coding == _DEFLATE:
            return zlib.decompressobj()  # zlib-wrapped, as the RFC says; raw deflate is tried on a bad header
        return None

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """Decoded pieces of ``raw`` (at most STEP_BYTES each); ``RefusedBody`` on a corrupt stream or past the limit."""
        if self.coding == _IDENTITY:
            yield from self._counted(raw[i:i + STEP_BYTES] for i in range(0, len(raw), STEP_BYTES))
        else:
            yield from self._counted(self._inflate(raw))

    def finish(self) -> Iterator[bytes]:
        """What the decoder still holds once the body has ended."""
        if self._inflater is not None:
            yield from self._counted([self._inflater.flush(STEP_BYTES)])

    def _inflate(self, raw: bytes) -> Iterator[bytes]:
        pending = raw
        while pending and self._inflater is not None:
            try:
                piece = self._inflater.decompress(pending, STEP_BYTES)
            except zlib.error as exc:
                if self.coding == _DEFLATE and not self._started:  # a server sending raw deflate, as many do
                    self._started, self._inflater = True, zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise RefusedBody(f"the response body is not valid {self.coding} data ({exc})") from None
            self._started = True
            pending = self._inflater.unconsumed_tail
            if self._inflater.eof:
                pending = self._inflater.unused_data
                # gzip allows members one after another; anything else after the end is ignored, unkept
                self._inflater = self._new_inflater() if self.coding == _GZIP and pending[:2] == b"\x1f\x8b" else None
            yield piece

    def _counted(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            if not piece:
                continue
            room = self.limit - self.total
            if len(piece) > room:
                if room > 0:
                    self.total += room
                    yield piece[:room]  # the caller may keep a plain body up to the limit
                raise BodyTooLarge(self.limit, self.coding)
            self.total += len(piece)
            yield piece


async def decoded(raw: AsyncIterable[bytes], content_encoding: str | None, limit: int) -> AsyncIterator[bytes]:
    """The decoded pieces of a body read as ``raw`` chunks, giving the event loop a turn after each piece."""
    decoder = BoundedDecoder(content_coding(content_encoding), limit)
    async for chunk in raw:
        for piece in decoder.feed(chunk):
            yield piece
            await asyncio.sleep(0)
    for piece in decoder.finish():
        yield piece


def decoded_sync(raw: Iterable[bytes], content_encoding: str | None, limit: int) -> Iterator[bytes]:
    """``decoded`` for a blocking read (the importer's fetch of a document)."""
    decoder = BoundedDecoder(content_coding(content_encoding), limit)
    for chunk in raw:
        yield from decoder.feed(chunk)
    yield from decoder.finish()
