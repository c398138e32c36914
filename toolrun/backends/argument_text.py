"""Arguments a command or a server can be given: text that UTF-8 can write.

JSON lets a model send half of a UTF-16 pair alone (``"\\udce9"``); Python keeps it as a lone
surrogate, which is no character. Encoding it fails deep inside a request (Python's own
``UnicodeEncodeError``), and ``os.fsencode`` even turns it into a raw byte on a command line. A
backend that hands arguments to another program refuses such a value first, naming it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from toolrun.core.text import lone_surrogate_in


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(where, text) of every string in ``value``, nested ones and mapping keys too: ``'tags[1]'``,
    ``'filter.color'``, ``'filter' (a key)``."""
    if isinstance(value, str):
        yield repr(path), value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield f"{path!r} (a key)", key
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def lone_surrogate_problem(arguments: Mapping[str, Any], receiver: str) -> str | None:
    """The error result for the first argument holding a lone surrogate (``receiver``: "the command", "the
    server"), or None when every string is text."""
    for name, value in arguments.items():
        for where, text in _strings(value, str(name)):
            found = lone_surrogate_in(text)
            if found:
                return (f"refused: argument {where} holds {found}, a lone UTF-16 surrogate "
                        f"(half of a \\u escape pair): it is no character, and {receiver} can only be sent UTF-8 "
                        "text. Send the character itself (é, or \\u00e9; past U+FFFF both halves of its pair)")
    return None
