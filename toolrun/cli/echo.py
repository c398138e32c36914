"""One line on stdout or stderr, written as ``click.echo`` writes it, without importing click.

The commands a recipe run needs print through this, so ``toolrun recipe FILE`` can run
without click at all (``toolrun.cli.direct``). The stream is looked up at each call (a test
runner swaps ``sys.stdout`` per command), each write is flushed, and a stream whose encoding
cannot hold a character gets an escape for it rather than an error halfway through a line.
"""

from __future__ import annotations

import sys


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """``text`` (and a newline unless ``nl`` is false) on stderr when ``err``, else stdout."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # no console at all (pythonw): nowhere to write, as with click
        return
    line = f"{text}\n" if nl else text
    try:
        stream.write(line)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(line.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()
