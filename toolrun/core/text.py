"""Small text helpers every layer shares: excerpts, did-you-mean, counted nouns, name globs.

Each was written several times with different limits; one place keeps messages alike.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Any

from toolrun.core.secrets import redact

ELLIPSIS = "…"


def excerpt(text: str, limit: int = 200, *, flatten: bool = False, empty: str = "") -> str:
    """``text`` with the active run's secrets redacted, then cut to ``limit`` characters with ``…``.

    Redacting first matters: a secret straddling the cut would no longer be recognised,
    and its prefix would be shown — with untrusted text, at a length an attacker chose.
    ``flatten`` first folds every run of whitespace into one space (an HTML error page on
    one line); ``empty`` is what to say when nothing is left.
    """
    text = redact(text)
    if flatten:
        text = " ".join(text.split())
    if not text:
        return empty
    return text if len(text) <= limit else text[:limit] + ELLIPSIS


def close_matches(word: str, choices: Iterable[str], *, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """The choices closest to ``word`` that are close enough to be a typo of it, best first."""
    import difflib  # only a mistake needs it: not imported on every command's start

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest choice to ``word``, if one is close enough to be a typo."""
    close = close_matches(word, choices)
    return close[0] if close else None


def is_glob(pattern: str) -> bool:
    """Whether a tool-name pattern is a glob (``*``, ``?`` or ``[``) rather than one name."""
    return any(character in pattern for character in "*?[")


def matches_any(name: str, globs: Sequence[str] | None) -> bool:
    """Whether ``name`` matches one of ``globs`` (case-sensitive, as tool names are); None matches every name."""
    return globs is None or any(fnmatchcase(name, glob) for glob in globs)


def counted(number: int, noun: str) -> str:
    """``1 turn``, ``3 turns``: a number with its noun in the right form."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


# What a terminal acts on instead of showing: C0 and C1 controls (ESC starts ANSI and OSC
# sequences, a lone CR overwrites a line), DEL, and the line separators and bidirectional
# controls that move or reorder text. Newlines, tabs and a CR before a newline stay. Compiled at the
# first text that holds one (0.2-0.5 ms): a run whose output is printable lines never needs it.
_TERMINAL_CONTROLS = "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_LONE_SURROGATES = "\ud800-\udfff"  # a byte Python could not decode, or a client's "\ud800": no UTF-8 holds one


@functools.cache
def _terminal_control() -> re.Pattern[str]:
    return re.compile(f"[{_TERMINAL_CONTROLS}]|\r(?!\n)")


@functools.cache
def _json_unsafe() -> re.Pattern[str]:
    return re.compile(f"[{_TERMINAL_CONTROLS}{_LONE_SURROGATES}]|\r(?!\n)")


@functools.cache
def _lone_surrogate() -> re.Pattern[str]:
    return re.compile(f"[{_LONE_SURROGATES}]")


_LINE_BREAKS_AND_TABS = str.maketrans("", "", "\n\t")  # not printable, yet a terminal shows them as they are


@functools.cache
def _terminal_escape() -> re.Pattern[str]:
    return re.compile(
        r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erases
        r"|\x9b[0-?]*[ -/]*[@-~]"  # the same, introduced by its one-byte form
        r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: a window title, a hyperlink's target; ended by BEL or ST
        r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
        r"|\x1b[ -/]*[0-~]"  # the other escape sequences (character sets, keypad modes)
    )


def without_terminal_escapes(text: str) -> str:
    """``text`` as a terminal shows it: its ANSI escape sequences (colours, cursor moves, OSC hyperlinks and
    titles) removed, the text between them kept — ``\\x1b[31mRED\\x1b[0m`` reads ``RED``."""
    if "\x1b" not in text and "\x9b" not in text:  # most text holds none: no pattern to compile or run
        return text
    return _terminal_escape().sub("", text)


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on shown as an escape (``\\x1b``):
    untrusted text (a tool's result, a model's arguments) cannot colour, retitle or forge a line."""
    if text.isprintable():  # none of them is printable: most text needs no search (a warm lint's 14,000 lines)
        return text
    if text.translate(_LINE_BREAKS_AND_TABS).isprintable():  # lines of printable text (a model's answer)
        return text
    return _terminal_control().sub(_escaped, text)


def json_terminal_safe(json_text: str) -> str:
    """A JSON text (``json.dumps``) with every character a terminal acts on, and every lone surrogate, as a
    ``\\u`` escape: the same JSON, safe to print and to append to a UTF-8 log (``json.dumps`` with
    ``ensure_ascii=False`` keeps C1 controls, separators, bidi controls and lone surrogates raw)."""
    return _json_unsafe().sub(_json_escaped, json_text)


def json_printable(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as a JSON document to print (``--json``): Chinese stays Chinese, and what a terminal acts on
    or UTF-8 cannot hold (a lone surrogate, from a file name that is not UTF-8) is a ``\\u`` escape, so the
    document is valid UTF-8 JSON whatever the locale's stdout does with such characters."""
    return json_terminal_safe(json.dumps(value, ensure_ascii=False, indent=indent))


def surrogates_escaped(text: str) -> str:
    """``text`` with each lone surrogate as its ``\\uXXXX`` escape: inside JSON, the same string read back;
    in plain text, a readable stand-in that UTF-8 (a file, sqlite) can hold."""
    return text if text.isascii() else _lone_surrogate().sub(_json_escaped, text)


def lone_surrogate_in(text: str) -> str | None:
    """The first lone surrogate of ``text`` as its ``\\uXXXX`` escape, or None when UTF-8 can hold the text."""
    if text.isascii():
        return None
    found = _lone_surrogate().search(text)
    return f"\\u{ord(found.group()):04x}" if found else None


def _json_escaped(match: re.Match[str]) -> str:
    return "".join(f"\\u{ord(char):04x}" for char in match.group())


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text_as_sent(text: str) -> str:
    """The text a terminal or a program sent, where Python kept each byte it could not decode as a
    lone surrogate: an argument under an ASCII locale with Python's UTF-8 mode off (``LC_ALL=C
    PYTHONUTF8=0``), a tool's result holding a file name that is not UTF-8. Neither a model's
    request, the run log nor the MCP SDK can hold a lone surrogate; those bytes read as UTF-8
    (U+FFFD for what is not UTF-8) are what was sent. Only for text: a path keeps its surrogates,
    which stand for its bytes on disk."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text  # no lone surrogate: the common case, as it is
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that no decoding made (U+D800): nothing to read back
        return _lone_surrogate().sub("\ufffd", text)


def exception_text(exc: BaseException) -> str:
    """``RuntimeError: the disk is full``; ``RuntimeError (no message)`` for one raised without text."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else f"{type(exc).__name__} (no message)"

