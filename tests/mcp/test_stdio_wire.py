"""The stdio wire's line reading, on a real ``asyncio.StreamReader`` with a small limit: a line over
the limit is dropped whole (one stand-in for it, the next line intact), and a thread reading a
regular file stops reading ahead while the reader holds twice its limit."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from toolrun.mcp.stdio_wire import UNREADABLE_LINE, line_reader, next_line

LIMIT = 16


async def lines_of(chunks: list[bytes], *, end: bool = True) -> list[bytes]:
    reader = asyncio.StreamReader(limit=LIMIT)
    for chunk in chunks:
        reader.feed_data(chunk)
    if end:
        reader.feed_eof()
    lines = []
    while line := await next_line(reader):
        lines.append(line)
    return lines


@pytest.mark.parametrize(("chunks", "expected"), [
    ([b"a" * LIMIT + b"\n", b"ok\n"], [b"a" * LIMIT + b"\n", b"ok\n"]),  # the newline just past the limit: read
    ([b"a" * (LIMIT + 1) + b"\n", b"ok\n"], [UNREADABLE_LINE, b"ok\n"]),  # one byte more: dropped
    ([b"a" * 40, b"a" * 40, b"\nok\n"], [UNREADABLE_LINE, b"ok\n"]),  # the newline megabytes later, in another chunk
    ([b"a" * 40 + b"\n" + b"b" * 40 + b"\n" + b"ok\n"], [UNREADABLE_LINE, UNREADABLE_LINE, b"ok\n"]),  # one chunk
    ([b"ok\n", b"a" * 40], [b"ok\n", UNREADABLE_LINE]),  # the end in the middle of a long line
    ([b"ok\r\n", b"last"], [b"ok\r\n", b"last"]),  # the last line without its newline
])
def test_a_line_over_the_limit_comes_back_once_as_unreadable_and_the_next_one_whole(
        chunks: list[bytes], expected: list[bytes]) -> None:
    assert asyncio.run(lines_of(chunks)) == expected


def test_a_large_file_is_read_ahead_only_as_far_as_the_reader_can_hold(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    line = b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"pad": "' + b"x" * 900 + b'"}}\n'
    requests.write_bytes(line * 8000)  # 7.7 MB
    limit = 4096

    async def read_all(fd: int) -> tuple[int, int]:
        reader = await line_reader(fd, limit=limit)  # a regular file: a thread reads it
        assert await next_line(reader) == line
        await asyncio.sleep(0.3)  # time for the thread to read the whole file, were nothing holding it back
        read_ahead = os.lseek(fd, 0, os.SEEK_CUR)
        count = 1
        while await next_line(reader) == line:
            count += 1
        return read_ahead, count

    fd = os.open(requests, os.O_RDONLY)
    try:
        read_ahead, count = asyncio.run(read_all(fd))
    finally:
        os.close(fd)
    assert count == 8000  # every line, whole
    assert read_ahead <= 2 * limit + 6 * 65536  # the reader's two limits and the chunks on their way


def test_an_input_that_fails_to_read_is_its_end_not_a_wait_for_ever(tmp_path: Path) -> None:
    # a folder opened as stdin: epoll refuses it, so a thread reads it, and read() fails (EISDIR)
    async def first_line(fd: int) -> bytes:
        reader = await line_reader(fd)
        return await asyncio.wait_for(next_line(reader), timeout=10)

    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        assert asyncio.run(first_line(fd)) == b""
    finally:
        os.close(fd)
