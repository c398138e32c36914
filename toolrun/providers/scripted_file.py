"""``--model scripted:FILE``: a model played from a YAML list of turns, for authors and CI.

Each item is one model answer, in order::

    - tool_calls:                       # the model calls tools (several: one turn)
        - {name: get_flower_inventory, arguments: {city: 北京}}
        - {name: get_flower_inventory, arguments: {city: 上海}}
    - text: 北京有玫瑰 100 枝，上海有百合 80 枝。   # the final answer

A recipe with ``output:`` gets its structured answer as ``- output: {city: 北京, roses: 100}``.
An item may hold both ``text`` and ``tool_calls`` (text said before the calls). The tools
run for real; only the model is scripted. A script that runs out before the run ends is
a provider failure saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolrun.core.errors import LoadError, Problem
from toolrun.core.yamlsource import LineDict, LineList, YamlSyntaxError, load_yaml_file, plain
from toolrun.providers.scripted import ScriptedModel

_EXAMPLE = "- tool_calls: [{name: my_tool, arguments: {key: value}}]\n- text: the answer"
_ITEM_KEYS = ("text", "tool_calls", "output")


def load_scripted_model(path: Path) -> ScriptedModel:
    """The ``ScriptedModel`` of a script file; ``LoadError`` naming file, line and fix for every mistake."""
    return scripted_model(read_script(path), path)


def read_script(path: Path) -> Any:
    """The YAML document of a script file (not checked yet: ``scripted_model`` does); ``LoadError`` if unreadable."""
    if not path.is_file():
        raise LoadError(Problem(path, None, "script file not found",
                                f"write the model's turns as a YAML list, e.g.\n{_EXAMPLE}"))
    try:
        return load_yaml_file(path)
    except YamlSyntaxError as exc:
        raise LoadError(exc.problem) from None


def scripted_model(document: Any, path: Path) -> ScriptedModel:
    """The ``ScriptedModel`` of a script's document; ``LoadError`` naming file, line and fix for every mistake."""
    return model_of_turns(script_turns(document, path), path)


# A script's turns once checked, as plain values (what a cache keeps): ("text", text), ("output", value),
# ("calls", text or None, ((name, arguments), ...)) with arguments a dict or a raw JSON string.
ScriptTurn = tuple[Any, ...]


def script_turns(document: Any, path: Path) -> list[ScriptTurn]:
    """The turns of a script's document, checked; ``LoadError`` naming file, line and fix for every mistake."""
    if not isinstance(document, LineList) or not document:
        raise LoadError(Problem(path, getattr(document, "line", 1) or 1, "a script is a non-empty list of model turns",
                                f"write e.g.\n{_EXAMPLE}"))
    problems: list[Problem] = []
    turns: list[ScriptTurn] = []
    for index, item in enumerate(document):
        line = document.item_lines[index]
        turn = _turn(item, path, line, problems)
        if turn is not None:
            turns.append(turn)
    if problems:
        raise LoadError(problems)
    return turns


def model_of_turns(turns: list[ScriptTurn], path: Path) -> ScriptedModel:
    """The ``ScriptedModel`` that plays ``turns`` (``script_turns``' checked turns)."""
    answers: list[Any] = []
    for kind, *rest in turns:
        if kind == "output":
            answers.append(ScriptedModel.output(rest[0]))
        elif kind == "calls":
            answers.append(ScriptedModel.calls(rest[1], text=rest[0]))
        else:
            answers.append(ScriptedModel.text(rest[0]))
    return ScriptedModel(answers, model=str(path))


def _turn(item: Any, path: Path, line: int, problems: list[Problem]) -> ScriptTurn | None:
    if isinstance(item, str):
        return ("text", item)  # a bare string is a text answer
    if not isinstance(item, LineDict) or not any(key in item for key in _ITEM_KEYS):
        problems.append(Problem(path, line, "a turn is {text: ...}, {output: {...}} or {tool_calls: [{name, arguments}]}",
                                f"write e.g.\n{_EXAMPLE}"))
        return None
    unknown = [key for key in item if key not in _ITEM_KEYS]
    if unknown:
        problems.append(Problem(path, item.key_lines.get(unknown[0], line), f"unknown key {unknown[0]!r} in a turn",
                                "a turn has only text, output and tool_calls"))
    if "output" in item:
        if "text" in item or "tool_calls" in item:
            problems.append(Problem(path, item.key_lines.get("output", line), "a turn with output is the final answer",
                                    "put text and tool_calls in turns of their own, before the output"))
            return None
        return ("output", plain(item["output"]))
    text = item.get("text")
    if text is not None and not isinstance(text, str):
        problems.append(Problem(path, item.key_lines.get("text", line), "text must be a string", "quote the answer"))
        return None
    calls = item.get("tool_calls")
    if calls is None:
        return ("text", text or "")
    if not isinstance(calls, LineList) or not calls:
        problems.append(Problem(path, item.key_lines.get("tool_calls", line), "tool_calls must be a non-empty list",
                                "write tool_calls: [{name: my_tool, arguments: {key: value}}]"))
        return None
    specs = tuple(spec for number, call in enumerate(calls)
                  if (spec := _call_spec(call, path, calls.item_lines[number], problems)) is not None)
    return ("calls", text, specs) if specs else None


def _call_spec(call: Any, path: Path, line: int, problems: list[Problem]) -> tuple[str, Any] | None:
    """(name, arguments) of one scripted tool call, or None after adding its problem."""
    name = call.get("name") if isinstance(call, LineDict) else None
    arguments = call.get("arguments", {}) if isinstance(call, LineDict) else None
    if not isinstance(name, str) or not name:
        problems.append(Problem(path, line, "a tool call needs a name", "write {name: my_tool, arguments: {key: value}}"))
        return None
    if not isinstance(arguments, (dict, str)):
        problems.append(Problem(path, line, f"the arguments of {name} must be a mapping (or a raw JSON string)",
                                "write arguments: {key: value}"))
        return None
    return name, plain(arguments)
