"""The process's stdin and stdout as the protocol's wire, with asyncio and the standard library only.

While serving, fd 0 reads the null device and fd 1 writes to stderr (as the MCP SDK's stdio
transport arranges), so a tool's child process can neither eat the client's messages nor
write into the protocol; the wire is served from private copies of the two descriptors.
``ReplayedLines`` and ``WireText`` hand the same wire to the SDK's transport.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

MAX_LINE_BYTES = 64 * 1024 * 1024  # one message; a longer line is answered as unreadable, not buffered forever
UNREADABLE_LINE = b"\x00 (a line longer than the limit)\n"  # what stands for it: not JSON, so a parse error
# At the end of stdin, how long the requests already read may take to be answered (both servers): a piped
# script's requests get their answers, and a call that never ends does not hold the process for ever.
EOF_GRACE_SECONDS = 1.0


@contextmanager
def claimed_stdio() -> Iterator[tuple[int, int]]:
    """(the wire's input, its output): private descriptors; fd 0 and fd 1 are restored at exit."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)  # not inherited: a tool's process never holds the wire
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    try:
        yield wire_in, wire_out
    finally:
        sys.stdout.flush()
        for fd in (wire_in, wire_out):  # asyncio made them non-blocking; a terminal shared with a shell must not stay so
            os.set_blocking(fd, True)
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


async def line_reader(fd: int, limit: int = MAX_LINE_BYTES) -> asyncio.StreamReader:
    """The lines arriving on ``fd``: an asyncio pipe when the loop can watch it, else a thread reads it
    (a regular file, or a device such as /dev/null, which epoll refuses)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    if _watchable(fd):
        pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
            return reader
        except ValueError:  # not a pipe, socket or terminal after all
            pass
    flow = _ThreadFlow()
    reader.set_transport(flow)
    # its own descriptor, which it closes: the wire's is closed when serving ends, maybe while it reads
    threading.Thread(target=_feed, args=(os.dup(fd), reader, loop, flow), daemon=True).start()
    return reader


def _watchable(fd: int) -> bool:
    """Whether the event loop can wait for ``fd`` to be readable. The loop would only find out later, in
    a callback, and then never read: /dev/null as stdin hung the server after a traceback."""
    selector = selectors.DefaultSelector()
    try:
        selector.register(fd, selectors.EVENT_READ)
    except (OSError, ValueError):
        return False
    finally:
        selector.close()
    return True


class _ThreadFlow(asyncio.ReadTransport):
    """The reading thread's flow control: the reader pauses it past twice its limit and resumes it once
    it has read down to its limit, as it does an asyncio pipe; and a few chunks at most are on their way.
    Without it a thread reading a large file held all of it in memory (1.5 GB of requests: 879 MB)."""

    def __init__(self) -> None:
        super().__init__()
        self.resumed = threading.Event()
        self.resumed.set()
        self.chunks_on_their_way = threading.BoundedSemaphore(4)

    def pause_reading(self) -> None:
        self.resumed.clear()

    def resume_reading(self) -> None:
        self.resumed.set()

    def is_reading(self) -> bool:
        return self.resumed.is_set()


def _feed(fd: int, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop, flow: _ThreadFlow) -> None:
    def deliver(chunk: bytes) -> None:
        reader.feed_data(chunk)
        flow.chunks_on_their_way.release()

    try:
        while flow.resumed.wait() and (chunk := _read_chunk(fd)):
            flow.chunks_on_their_way.acquire()
            loop.call_soon_threadsafe(deliver, chunk)
        loop.call_soon_threadsafe(reader.feed_eof)
    except RuntimeError:  # the loop was closed: the server is done
        pass
    finally:
        os.close(fd)


def _read_chunk(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO, EISDIR and the like: nothing more will come, so it is the end (not a wait for ever)
        return b""


class LineWriter:
    """Writes whole messages to ``fd``: through an asyncio pipe transport (never blocks the loop) when it
    is a pipe, else directly. A client that went away is not an error: what it would have read is dropped."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._transport: asyncio.WriteTransport | None = None

    async def open(self) -> LineWriter:
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(self.fd, "wb", buffering=0, closefd=False)
        try:
            self._transport, _ = await loop.connect_write_pipe(asyncio.Protocol, pipe)
        except ValueError:  # a regular file: plain writes
            self._transport = None
        return self

    def write(self, data: bytes) -> None:
        if self._transport is not None:
            if not self._transport.is_closing():
                self._transport.write(data)
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:  # the client closed its end
            pass

    async def drain(self) -> None:
        """Wait until what was written has left (before the process exits)."""
        transport = self._transport
        while transport is not None and not transport.is_closing() and transport.get_write_buffer_size():
            await asyncio.sleep(0.01)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def next_line(reader: asyncio.StreamReader) -> bytes:
    """The next line (b"" at the end); a line over the reader's limit is dropped whole and comes back as
    ``UNREADABLE_LINE``: one error for it, and its tail is not taken for the next message."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as end:  # the last line, without its newline (b"" when there is none)
        return end.partial
    except asyncio.LimitOverrunError:
        await _drop_line(reader)
        return UNREADABLE_LINE


async def _drop_line(reader: asyncio.StreamReader) -> None:
    """Read up to and including the next newline (or the end) and keep none of it."""
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as overrun:  # past the limit: drop what was looked at, then look on
            await reader.readexactly(overrun.consumed)  # (up to the newline, when it was found past the limit)
        except asyncio.IncompleteReadError:
            return


class ReplayedLines:
    """The wire's input for the SDK's stdio transport: ``first`` (already read), then every later line."""

    def __init__(self, first: str, reader: asyncio.StreamReader) -> None:
        self._first = first
        self._reader = reader

    async def __aiter__(self) -> AsyncIterator[str]:
        yield self._first
        while line := await next_line(self._reader):
            yield line.decode("utf-8", "replace")


class WireText:
    """The wire's output for the SDK's stdio transport (its ``write`` and ``flush``)."""

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> Any:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await asyncio.sleep(0)  # the transport sends as soon as it can; nothing is held back here
