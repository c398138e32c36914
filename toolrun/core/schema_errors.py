"""JSON Schema errors turned into Problems a person can act on: file, line, what, fix.

Shared by every YAML format toolrun reads against a published schema (recipes, tool
files). Schemas may carry two hint keywords that JSON Schema ignores: ``x-expected``
(how to describe a valid value) and ``x-fix`` (what to write instead).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.core.errors import Problem
from toolrun.core.schema_subset import surely_valid
from toolrun.core.text import counted, did_you_mean, excerpt
from toolrun.core.yamlsource import LineDict, line_of, plain

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

_JSON_TYPE_NAMES = {
    dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
    int: "an integer", float: "a number", type(None): "nothing (null)",
}


def schema_problems(document: Any, schema: dict[str, Any], file: Path | str | None) -> list[Problem]:
    """Every schema violation of ``document`` (YAML with lines), sorted by line."""
    instance = plain(document)
    if surely_valid(schema, instance):  # a valid document needs no jsonschema (50-65 ms to import)
        return []
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    problems: list[Problem] = []
    for error in validator.iter_errors(instance):
        problems.extend(error_problems(error, document, file))
    return sorted(_unique(problems), key=lambda p: (p.line or 0, p.message))


def error_problems(error: ValidationError, document: Any, file: Path | str | None) -> list[Problem]:
    """One validation error as one or more Problems (one per unknown key)."""
    path = list(error.absolute_path)
    where = describe_path(path)
    line = line_of(document, path)
    hints = error.schema if isinstance(error.schema, dict) else {}
    fix = hints.get("x-fix")
    validator = error.validator
    if validator == "additionalProperties" and isinstance(error.instance, dict):
        return _unknown_keys(error, document, path, file)
    if validator == "required":
        missing = _missing_key(error)
        return [Problem(file, line, f"{where} is missing the required key {missing!r}",
                        fix or f"add {missing}: to {where}")]
    if validator in ("type", "enum", "const", "pattern", "format"):
        expected = hints.get("x-expected") or _expected(error)
        if isinstance(error.instance, bool) and "string" in expected:
            fix = _QUOTE_BOOLEAN_FIX
        return [Problem(file, line, f"{where} must be {expected}, not {describe_value(error.instance)}",
                        fix or f"write {expected} here")]
    if validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                     "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"):
        expected = hints.get("x-expected") or _bound(error)
        return [Problem(file, line, f"{where} must be {expected}, not {describe_value(error.instance)}",
                        fix or f"write {expected} here")]
    if validator in ("oneOf", "anyOf") and error.context:
        from jsonschema.exceptions import best_match

        return error_problems(best_match(error.context), document, file)
    return [Problem(file, line, f"{where}: {error.message}", fix)]


# YAML 1.1 reads unquoted yes/no/on/off as booleans: a parameter named "on" becomes true.
_QUOTE_BOOLEAN_FIX = 'quote it ("on", "yes"): YAML reads unquoted yes/no/on/off/true/false as booleans'


def describe_path(path: Iterable[Any]) -> str:
    """``["settings", "max_turns"]`` -> ``settings.max_turns``; ``["messages", 0]`` -> ``messages[0]``."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "the document"


def describe_value(value: Any) -> str:
    """A short description of a YAML value for a message: its type and an excerpt."""
    kind = _JSON_TYPE_NAMES.get(type(plain(value)), type(value).__name__)
    if isinstance(value, (dict, list)):
        return kind
    shown = json.dumps(value, ensure_ascii=False, default=str)  # never fail on a value YAML produced
    shown = excerpt(shown, 60)
    return f"{kind} {shown}" if value is not None else kind


def _unknown_keys(error: ValidationError, document: Any, path: list[Any], file: Path | str | None) -> list[Problem]:
    schema = error.schema if isinstance(error.schema, dict) else {}
    allowed = list(schema.get("properties", {}))
    node = _node_at(document, path)
    where = describe_path(path)
    problems = []
    for key in error.instance:
        if key in allowed:
            continue
        line = node.key_lines.get(key) if isinstance(node, LineDict) else line_of(document, path)
        guess = did_you_mean(str(key), allowed)
        fix = f"did you mean {guess!r}?" if guess else f"allowed keys: {', '.join(allowed)}"
        problems.append(Problem(file, line, f"unknown key {key!r} in {where}", fix))
    return problems


def _node_at(document: Any, path: list[Any]) -> Any:
    node = document
    for step in path:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _missing_key(error: ValidationError) -> str:
    # jsonschema says "'messages' is a required property"; the key is the quoted part
    message = error.message
    return message.split("'")[1] if message.count("'") >= 2 else message


def _expected(error: ValidationError) -> str:
    value = error.validator_value
    if error.validator == "type":
        kinds = value if isinstance(value, list) else [value]
        names = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
                 "number": "a number", "boolean": "true or false", "null": "null"}
        return " or ".join(names.get(kind) or str(kind) for kind in kinds)
    if error.validator == "enum":
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in value)
    if error.validator == "const":
        return json.dumps(value, ensure_ascii=False)
    if error.validator == "pattern":
        return f"a string matching {value}"
    return str(value)


def _bound(error: ValidationError) -> str:
    value = error.validator_value
    return {
        "minimum": f"at least {value}", "maximum": f"at most {value}",
        "exclusiveMinimum": f"more than {value}", "exclusiveMaximum": f"less than {value}",
        "minItems": f"a list of at least {counted(value, 'item')}", "maxItems": f"a list of at most {counted(value, 'item')}",
        "minLength": f"at least {counted(value, 'character')}", "maxLength": f"at most {counted(value, 'character')}",
        "minProperties": f"a mapping with at least {counted(value, 'key')}",
        "maxProperties": f"a mapping with at most {counted(value, 'key')}",
    }[error.validator]


def _unique(problems: list[Problem]) -> list[Problem]:
    seen: set[tuple[Any, ...]] = set()
    result = []
    for problem in problems:
        key = (str(problem.file), problem.line, problem.message)
        if key not in seen:
            seen.add(key)
            result.append(problem)
    return result
