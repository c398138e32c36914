"""Text on stdout or stderr, written as ``click.echo`` writes it, without importing click.

The commands a recipe run needs print through this, so ``toolrun recipe FILE`` can run
without click at all (``toolrun.cli.direct``). The stream is looked up at each call (a test
runner swaps ``sys.stdout`` per command) and each write is flushed. A text an ASCII stream
cannot hold (``PYTHONIOENCODING=ascii``, a C locale) goes out as UTF-8 bytes, as click writes
it, so a ``--json`` document stays valid JSON. Any other narrow stream (latin-1, cp1252) keeps
its own encoding, with ``\\uXXXX`` for what it cannot hold, which is also valid inside JSON; so does a
strict UTF-8 stream for a lone surrogate. The toolrun script sets the same for click's output, and makes
its ASCII streams UTF-8 (``fit_narrow_streams``).
"""

from __future__ import annotations

import codecs
import io
import sys
from typing import TextIO

ESCAPES = "toolrun-json-escapes"  # an error handler: \uXXXX (surrogate pairs past U+FFFF), as JSON escapes


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    escaped = []
    for char in error.object[error.start:error.end]:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), error.end


codecs.register_error(ESCAPES, _json_escapes)

BYTES_OR_ESCAPES = "toolrun-bytes-or-json-escapes"  # surrogateescape's own bytes, and \uXXXX for what it cannot hold


def _bytes_or_json_escapes(error: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = bytearray()
    for index in range(error.start, error.end):
        code = ord(error.object[index])
        if 0xDC80 <= code <= 0xDCFF:  # a byte Python could not decode: the byte itself, as surrogateescape writes it
            out.append(code - 0xDC00)
        else:  # a lone surrogate from JSON ("\ud800"), which no byte stands for
            out += _json_escapes(UnicodeEncodeError(error.encoding, error.object, index, index + 1, error.reason))[0].encode()
    return bytes(out), error.end


codecs.register_error(BYTES_OR_ESCAPES, _bytes_or_json_escapes)


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """``text`` (and a newline unless ``nl`` is false) on stderr when ``err``, else stdout."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # no console at all (pythonw): nowhere to write, as with click
        return
    write_flushed(stream, f"{text}\n" if nl else text)


def write_flushed(stream: TextIO, text: str) -> None:
    """``text`` on ``stream``, flushed, also when the stream's encoding cannot hold it (see the module's docstring)."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        _write_unencodable(stream, text)
    stream.flush()


def fit_narrow_streams() -> None:
    """The toolrun script's standard streams, where Python's encoding for them is narrow.

    An ASCII one (``PYTHONIOENCODING=ascii``, a C locale without UTF-8 mode) is UTF-8 instead, as
    click writes it: stdin is read as UTF-8 (U+FFFD for bytes that are not), and stdout and stderr
    are written as UTF-8, so that a chat's prompt in a terminal, an answer and toolrun's own lines
    come out whole. A strict stdout escapes what its encoding cannot hold instead of ending the command
    with an error: one that is neither UTF-8 nor ASCII (latin-1, cp1252) keeps its encoding; a UTF-8 one
    can hold anything but a lone surrogate (a byte Python could not decode), which becomes ``\\udcXX``.
    """
    stdin, stdout, stderr = sys.stdin, sys.stdout, sys.stderr
    if isinstance(stdin, io.TextIOWrapper) and _codec_name(stdin.encoding) == "ascii":
        stdin.reconfigure(encoding="utf-8", errors="replace")  # before anything is read: it may still change
    # A strict stdout escapes what it cannot hold. Of a UTF-8 one (a UTF-8 locale's own, PYTHONIOENCODING=utf-8)
    # that is only a lone surrogate: a byte Python could not decode (a file name, a shell tool's output), which
    # click.echo writes as it is, so the command ended with an internal error. Python's own choice for a C locale,
    # surrogateescape (the byte itself), is left alone.
    # surrogateescape (a C or C.UTF-8 locale) writes a byte Python kept as \udc80-\udcff, but not a lone
    # surrogate that stands for no byte ("\ud800" in a JSON row or result): that one is escaped too.
    escapes = isinstance(stdout, io.TextIOWrapper) and stdout.errors in ("strict", "surrogateescape")
    for stream in (stdout, stderr):
        if isinstance(stream, io.TextIOWrapper) and _codec_name(stream.encoding) == "ascii":
            stream.reconfigure(encoding="utf-8", errors=stream.errors)  # a C locale's surrogateescape stays
    if escapes and isinstance(stdout, io.TextIOWrapper):
        stdout.reconfigure(errors=ESCAPES if stdout.errors == "strict" else BYTES_OR_ESCAPES)


def _codec_name(encoding: str | None) -> str:
    """The codec's own name ("ascii" for "ANSI_X3.4-1968" or "us-ascii"); ascii when there is none or it is unknown."""
    try:
        return codecs.lookup(encoding or "ascii").name
    except LookupError:
        return "ascii"


def _write_unencodable(stream: TextIO, text: str) -> None:
    """``text``, which ``stream``'s encoding cannot hold: as UTF-8 bytes beneath an ASCII stream, else in
    the stream's own encoding with escapes (one encoding per stream, even when text comes in pieces)."""
    codec = _codec_name(getattr(stream, "encoding", None))
    buffer = getattr(stream, "buffer", None)
    if buffer is None or codec != "ascii":
        stream.write(text.encode(codec, ESCAPES).decode(codec))
        return
    stream.flush()  # what the text layer holds goes first
    try:
        data = text.encode("utf-8", "surrogateescape")  # an argument or file name that was not UTF-8: its own bytes
    except UnicodeEncodeError:
        data = text.encode("utf-8", "backslashreplace")
    buffer.write(data)
    buffer.flush()
