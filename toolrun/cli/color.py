"""Colour on a terminal: errors, warnings, calls and results, painted around text that is already escaped.

``--color auto`` (the default) colours a stream that is a terminal, unless ``NO_COLOR`` is set;
``FORCE_COLOR`` colours a pipe too; ``--color always|never`` wins over both. Colour codes are
added after ``terminal_safe`` has escaped the text, never through it: a model's or a tool's
text can never bring an escape of its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import TextIO

from toolrun.cli.echo import echo

COLOR_CHOICES = ("auto", "always", "never")
# --color of the command running: per thread and per asyncio task, as click's context was, so
# commands run side by side (threads of a test runner or an embedding program) keep their own
_chosen: ContextVar[str] = ContextVar("toolrun_color", default="auto")

# SGR codes by what the text is.
STYLES = {
    "error": "1;31",  # bold red
    "warning": "33",  # yellow
    "info": "2",  # dim
    "call": "36",  # cyan
    "result": "32",  # green
    "dim": "2",
}


def remember_choice(choice: str) -> Callable[[], None]:
    """Keep ``--color`` where everything this command prints finds it (the tasks it starts too);
    returns what puts the previous choice back, to be called where this was (a test runner runs
    many commands in one process)."""
    token = _chosen.set(choice)
    return lambda: _chosen.reset(token)


def _choice() -> str:
    return _chosen.get()


def color_enabled(stream: TextIO | None, choice: str | None = None) -> bool:
    """Whether text written to ``stream`` is coloured: --color, then NO_COLOR, FORCE_COLOR, then a terminal."""
    choice = choice or _choice()
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):  # no-color.org: set and not empty
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


def paint(safe_text: str, style: str, enabled: bool) -> str:
    """``safe_text`` (already through ``terminal_safe``) in the colour of ``style`` when ``enabled``."""
    if not enabled or not safe_text:
        return safe_text
    return f"\x1b[{STYLES[style]}m{safe_text}\x1b[0m"


def echo_err(safe_text: str, style: str | None = None) -> None:
    """One escaped line on stderr, its first word (``error:``, ``warning:``) in ``style``'s colour when stderr takes colour."""
    enabled = color_enabled(sys.stderr)
    if style and enabled:
        head, sep, rest = safe_text.partition(" ")
        safe_text = paint(head, style, True) + sep + rest
    echo(safe_text, err=True)
