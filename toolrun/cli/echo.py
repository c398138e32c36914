"""One line on stdout or stderr, written as ``click.echo`` writes it, without importing click.

The commands a recipe run needs print through this, so ``toolrun recipe FILE`` can run
without click at all (``toolrun.cli.direct``). The stream is looked up at each call (a test
runner swaps ``sys.stdout`` per command) and each write is flushed. A line the stream's
encoding cannot hold (``PYTHONIOENCODING=ascii``) goes out as UTF-8 bytes, as click writes
it, so a ``--json`` document stays valid JSON; a stream with no bytes beneath gets escapes.
"""

from __future__ import annotations

import sys
from typing import TextIO


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """``text`` (and a newline unless ``nl`` is false) on stderr when ``err``, else stdout."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # no console at all (pythonw): nowhere to write, as with click
        return
    write_flushed(stream, f"{text}\n" if nl else text)


def write_flushed(stream: TextIO, text: str) -> None:
    """``text`` on ``stream``, flushed; as UTF-8 bytes when the stream's encoding cannot hold it."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        _write_utf8(stream, text)
    stream.flush()


def _write_utf8(stream: TextIO, line: str) -> None:
    """``line`` as UTF-8 bytes beneath a text stream whose encoding cannot hold it (escaped where there are no bytes)."""
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(line.encode(encoding, "backslashreplace").decode(encoding))
        return
    stream.flush()  # what the text layer holds goes first
    try:
        data = line.encode("utf-8", "surrogateescape")  # an argument or file name that was not UTF-8: its own bytes
    except UnicodeEncodeError:
        data = line.encode("utf-8", "backslashreplace")
    buffer.write(data)
    buffer.flush()
