"""What each event of a ``--transcript`` file holds, checked before the run is drawn from it.

A transcript is a file a person may edit, or an artifact from another machine: a field of the
wrong type — a text that is a number, ``tool_calls`` that are not a list, a time that is not
seconds since 1970 — is a problem naming the line and the field, never a crash of the page.
Every field may be missing (an older transcript lacks some) or null; one that is there has the
type ``--transcript`` writes. Fields the page does not read are not checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrun.core.errors import Problem

LATEST_TIME = 253402300800.0  # the start of the year 10000: seconds since 1970 past it are no time of a run


@dataclass(frozen=True)
class Wrong:
    """What is wrong with a value: where inside it (``[0].id``, or ``""``), what is there, what should be."""

    where: str
    found: Any
    expected: str

    def inside(self, step: str) -> Wrong:
        return Wrong(step + self.where, self.found, self.expected)


# A check takes a present, non-null value and says what is wrong with it, or None when it is right.
Check = Callable[[Any], "Wrong | None"]


def _describe(value: Any) -> str:
    """What a JSON value is, in a person's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a text"
    return "a list" if isinstance(value, list) else "an object"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: Any) -> Wrong | None:
    return None if isinstance(value, str) else Wrong("", value, "a text")


def _flag(value: Any) -> Wrong | None:
    return None if isinstance(value, bool) else Wrong("", value, "true or false")


def _whole_number(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _count(value: Any) -> Wrong | None:
    return None if _whole_number(value, 0) else Wrong("", value, "a whole number, 0 or more")


def _turn_number(value: Any) -> Wrong | None:
    return None if _whole_number(value, 1) else Wrong("", value, "a turn number (1, 2, ...)")


def _milliseconds(value: Any) -> Wrong | None:
    return None if _is_number(value) and value >= 0 else Wrong("", value, "a number of milliseconds, 0 or more")


def _time(value: Any) -> Wrong | None:
    return None if _is_number(value) and 0 <= value < LATEST_TIME else Wrong("", value, "a time in seconds since 1970")


def _fields(checks: dict[str, Check]) -> Check:
    """An object whose fields named in ``checks`` (when present and not null) pass their check."""
    def check(value: Any) -> Wrong | None:
        if not isinstance(value, dict):
            return Wrong("", value, "an object")
        for name, field_check in checks.items():
            if value.get(name) is None:
                continue
            wrong = field_check(value[name])
            if wrong is not None:
                return wrong.inside(f".{name}")
        return None
    return check


def _list_of(item_check: Check, what: str) -> Check:
    """A list whose every item passes ``item_check`` (null items included: a list holds no gaps)."""
    def check(value: Any) -> Wrong | None:
        if not isinstance(value, list):
            return Wrong("", value, what)
        for index, item in enumerate(value):
            wrong = item_check(item) if item is not None else Wrong("", None, "no null item")
            if wrong is not None:
                return wrong.inside(f"[{index}]")
        return None
    return check


_USAGE = _fields({"input_tokens": _count, "output_tokens": _count, "requests": _count})
_CALLS = _list_of(_fields({"id": _text, "name": _text}), "a list of calls")

EVENT_FIELDS: dict[str, dict[str, Check]] = {
    "run_start": {"at": _time, "recipe": _text, "model": _text, "mode": _text, "started_at": _text},
    "notice": {"at": _time, "message": _text},
    "divergence": {"at": _time, "message": _text},
    "model_response": {"at": _time, "turn": _turn_number, "stop_reason": _text, "text": _text, "usage": _USAGE,
                       "tool_calls": _CALLS},
    "tool_call": {"at": _time, "turn": _turn_number, "id": _text, "name": _text, "result": _text, "is_error": _flag,
                  "duration_ms": _milliseconds, "started_at": _time, "ended_at": _time},
    "interrupted": {"at": _time, "message": _text},
    "run_end": {"at": _time, "recipe": _text, "final": _text, "error": _text, "stop_reason": _text, "usage": _USAGE,
                "turns": _list_of(_fields({"usage": _USAGE}), "a list of turns"),
                "expect_failures": _list_of(_text, "a list of texts")},
}


def event_problems(path: Path, line: int, event: dict[str, Any]) -> list[Problem]:
    """Every field of one transcript event (line ``line`` of ``path``) that is not of the type it should be."""
    problems = []
    for name, check in EVENT_FIELDS.get(event["event"], {}).items():
        value = event.get(name)
        if value is None:
            continue
        wrong = check(value)
        if wrong is not None:
            problems.append(Problem(path, line, f"{event['event']} event: \"{name}{wrong.where}\" is "
                                    f"{_describe(wrong.found)}, where a transcript has {wrong.expected}",
                                    "correct the line, or write the transcript again with --transcript"))
    return problems
