"""A recipe's ``expect:`` checks, run against a finished run. Failing checks -> exit code 3."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from toolrun.core.text import counted, excerpt
from toolrun.core.tool import FIND_TOOLS
from toolrun.loop.runner import RunResult

_EXCERPT_CHARS = 120


@dataclass
class Expectations:
    """What a recipe expects of its run. Empty lists and None check nothing."""

    tools_called: list[str] = field(default_factory=list)
    tools_not_called: list[str] = field(default_factory=list)
    final_contains: list[str] = field(default_factory=list)
    final_not_contains: list[str] = field(default_factory=list)
    max_turns: int | None = None
    stop_reason: str | None = None
    output: dict[str, Any] = field(default_factory=dict)  # dotted path -> the value the structured answer has there

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any] | None) -> Expectations:
        """From a validated ``expect:`` mapping; a single string counts as a list of one."""
        mapping = mapping or {}

        def as_list(key: str) -> list[str]:
            value = mapping.get(key) or []
            return [value] if isinstance(value, str) else [str(v) for v in value]

        return cls(
            tools_called=as_list("tools_called"),
            tools_not_called=as_list("tools_not_called"),
            final_contains=as_list("final_contains"),
            final_not_contains=as_list("final_not_contains"),
            max_turns=mapping.get("max_turns"),
            stop_reason=mapping.get("stop_reason"),
            # a path YAML read as a number (0: for the first item of a list answer) is the same path as text
            output={str(path): value for path, value in (mapping.get("output") or {}).items()},
        )

    def __bool__(self) -> bool:
        return bool(self.tools_called or self.tools_not_called or self.final_contains
                    or self.final_not_contains or self.max_turns is not None or self.stop_reason or self.output)


def check_expectations(expect: Expectations | None, result: RunResult) -> list[str]:
    """One sentence per failing check; an empty list when every check passes.

    ``tools_called`` needs a call with a successful result (a call the model got wrong
    and never fixed does not count); ``tools_not_called`` counts every call, failed or not.
    Tool names may be fnmatch globs.
    """
    if not expect:
        return []
    return [failure for check in _CHECKS for failure in check(expect, result)]


def _tools_called(expect: Expectations, result: RunResult) -> list[str]:
    failures = []
    calls = [call for call in result.tool_calls if call.name != FIND_TOOLS]  # a search is not a use of a tool
    for pattern in expect.tools_called:
        matching = [c for c in calls if fnmatchcase(c.name, pattern)]
        if not matching:
            called = sorted({c.name for c in calls})
            failures.append(f"expect.tools_called: {pattern} was not called "
                            f"(called: {', '.join(called) if called else 'no tool'})")
        elif all(c.is_error for c in matching):
            failures.append(f"expect.tools_called: {pattern} was called {counted(len(matching), 'time')} "
                            f"but every call failed; last result: {excerpt(matching[-1].result, _EXCERPT_CHARS)}")
    return failures


def _tools_not_called(expect: Expectations, result: RunResult) -> list[str]:
    failures = []
    for pattern in expect.tools_not_called:
        matching = [c for c in result.tool_calls if fnmatchcase(c.name, pattern)]
        if matching:
            failures.append(f"expect.tools_not_called: {pattern} was called {counted(len(matching), 'time')}")
    return failures


def _final_answer(expect: Expectations, result: RunResult) -> list[str]:
    final = result.final or ""
    missing = [f"expect.final_contains: {text!r} is not in the final answer: {_shown(result.final)}"
               for text in expect.final_contains if text not in final]
    present = [f"expect.final_not_contains: {text!r} is in the final answer: {_shown(result.final)}"
               for text in expect.final_not_contains if text in final]
    return missing + present


def _how_it_ended(expect: Expectations, result: RunResult) -> list[str]:
    failures = []
    if expect.max_turns is not None and len(result.turns) > expect.max_turns:
        failures.append(f"expect.max_turns: the run took {counted(len(result.turns), 'model request')}, "
                        f"more than {expect.max_turns}")
    if expect.stop_reason is not None and result.stop_reason != expect.stop_reason:
        failures.append(f"expect.stop_reason: the run stopped with {result.stop_reason!r}, "
                        f"not {expect.stop_reason!r}" + (f" ({result.error})" if result.error else ""))
    return failures


_MISSING = object()


def _structured_answer(expect: Expectations, result: RunResult) -> list[str]:
    failures = []
    for path, wanted in expect.output.items():
        found = value_at(result.output, path)
        if found is _MISSING:
            if not result.output_valid:
                where = "there is no structured answer"
            else:
                where = "the answer is null" if result.output is None else "the answer has no such key"
            failures.append(f"expect.output: {path}: {where}")
        elif not _same(found, wanted):
            failures.append(f"expect.output: {path} is {_json(found)}, not {_json(wanted)}")
    return failures


def value_at(value: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``address.city``, ``items.0.name``); ``_MISSING`` when there is none.

    A key that holds a dot itself is found whole first: ``{"a.b": 1}`` answers ``a.b``.
    """
    if isinstance(value, dict) and path in value:
        return value[path]
    head, dot, rest = path.partition(".")
    if isinstance(value, dict) and head in value:
        inner = value[head]
    elif isinstance(value, list) and head.isdigit() and int(head) < len(value):
        inner = value[int(head)]
    else:
        return _MISSING
    return value_at(inner, rest) if dot else inner


def _same(found: Any, wanted: Any) -> bool:
    """JSON equality: ``true`` is not ``1`` and ``false`` is not ``0`` (Python's ``==`` says they are)."""
    if isinstance(found, bool) or isinstance(wanted, bool):
        return type(found) is type(wanted) and found == wanted
    if isinstance(found, dict) and isinstance(wanted, dict):
        return found.keys() == wanted.keys() and all(_same(found[key], wanted[key]) for key in found)
    if isinstance(found, list) and isinstance(wanted, list):
        return len(found) == len(wanted) and all(map(_same, found, wanted))
    return bool(found == wanted)


def _json(value: Any) -> str:
    return excerpt(json.dumps(value, ensure_ascii=False), _EXCERPT_CHARS)


# in the order a report lists them
_CHECKS: tuple[Callable[[Expectations, RunResult], list[str]], ...] = (
    _tools_called, _tools_not_called, _final_answer, _structured_answer, _how_it_ended)


def _shown(final: str | None) -> str:
    return "(no final answer)" if not final else repr(excerpt(final, _EXCERPT_CHARS))
