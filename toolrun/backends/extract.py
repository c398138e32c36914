"""A small JMESPath-like path for picking a value out of a JSON response.

Supported: ``a.b`` (keys), ``"a.b"`` (a quoted key), ``[0]`` / ``[-1]`` (list index) and
``[*]`` (every item: the rest of the path is applied to each). Examples:
``data.items[0].name``, ``services[*].name``, ``"x-count"``.
"""

from __future__ import annotations

import re
from typing import Any

from toolrun.core.text import counted

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_$@][\w$@-]*)|\[\s*(-?\d+|\*)\s*\]|(\.))')
_MISSING = object()


class ExtractError(ValueError):
    """A path that does not parse, or that finds nothing in the value."""


def parse_path(path: str) -> list[str | int]:
    """The steps of ``path``: a str is a key, an int an index, and the string ``"[*]"`` every item."""
    steps: list[str | int] = []
    position = 0
    expect_key = True
    while position < len(path):
        match = _TOKEN.match(path, position)
        if not match or match.end() == position:
            raise ExtractError(f"cannot parse extract path {path!r} at character {position + 1}")
        quoted, name, index, dot = match.groups()
        if dot:
            if expect_key:
                raise ExtractError(f"unexpected '.' in extract path {path!r} at character {position + 1}")
            expect_key = True
        elif index is not None:
            steps.append("[*]" if index == "*" else int(index))
            expect_key = False
        else:
            if not expect_key:
                raise ExtractError(f"missing '.' before a key in extract path {path!r}")
            steps.append(quoted.replace('\\"', '"') if quoted is not None else name)
            expect_key = False
        position = match.end()
    if expect_key and steps:
        raise ExtractError(f"extract path {path!r} ends with '.'")
    if not steps:
        raise ExtractError("the extract path is empty")
    return steps


def _walk(value: Any, steps: list[str | int]) -> Any:
    for position, step in enumerate(steps):
        if step == "[*]":
            if not isinstance(value, list):
                return _MISSING
            rest = steps[position + 1 :]
            picked = [_walk(item, rest) for item in value]
            return [item for item in picked if item is not _MISSING]
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return _MISSING
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return _MISSING
            value = value[step]
    return value


def extract(value: Any, path: str) -> Any:
    """The value at ``path``; ExtractError naming what was there instead when nothing matches."""
    found = _walk(value, parse_path(path))
    if found is _MISSING:
        if isinstance(value, dict):
            what = "an object with keys " + ", ".join(list(value)[:20])
        elif isinstance(value, list):
            what = f"a list of {counted(len(value), 'item')}"
        else:
            what = f"a {type(value).__name__}"
        raise ExtractError(f"extract path {path!r} found nothing; the response is {what}")
    return found
