"""The published tool-file JSON Schema, and its errors translated into plain words with a fix.

jsonschema's own messages ("Additional properties are not allowed ...") name neither the
line nor the remedy; users need ``file:line: unknown key 'descripton' — did you mean
'description'?``. The schema carries ``x-expected`` / ``x-fix`` / ``x-example`` hints that
this module uses for those words, so the wording lives next to the rule it explains.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.core.errors import Problem
from toolrun.core.packaged_schemas import packaged_schema, packaged_schema_text
from toolrun.core.schema_errors import describe_path, describe_value, error_problems
from toolrun.core.schema_subset import surely_valid
from toolrun.core.text import counted, did_you_mean
from toolrun.core.yamlsource import line_of, plain

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


@lru_cache(maxsize=1)
def tool_schema() -> dict[str, Any]:
    """The tool-file schema as a dict (loaded once)."""
    return packaged_schema("tool")


@lru_cache(maxsize=1)
def _inlined_tool_schema() -> dict[str, Any]:
    """The tool-file schema with its local $refs inlined: what tool files are validated against."""
    schema = tool_schema()
    return _inline_refs(schema, schema["$defs"], {})


@lru_cache(maxsize=1)
def tool_file_validator() -> Draft202012Validator:
    """A validator for whole tool files, built once, with the local $refs inlined (~40% faster)."""
    from jsonschema import Draft202012Validator  # 50-65 ms to import: only for a tool file with a mistake

    return Draft202012Validator(_inlined_tool_schema())


def _inline_refs(node: Any, definitions: dict[str, Any], inlined: dict[str, Any]) -> Any:
    """``node`` with each local $ref replaced by its definition; ``inlined`` keeps each definition inlined
    once, so a definition used in many places is one object (its check is compiled once)."""
    # The packaged schema has no recursive $refs, so inlining terminates.
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            name = reference.removeprefix("#/$defs/")
            if name not in inlined:
                inlined[name] = _inline_refs(definitions[name], definitions, inlined)
            siblings = {k: _inline_refs(v, definitions, inlined) for k, v in node.items() if k != "$ref"}
            return {**inlined[name], **siblings} if siblings else inlined[name]
        return {k: _inline_refs(v, definitions, inlined) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(item, definitions, inlined) for item in node]
    return node


def schema_problems(document: Any, file: Path) -> list[tuple[tuple[Any, ...], Problem]]:
    """Every schema violation of one parsed tool file, as (instance path, Problem) pairs."""
    if surely_valid(_inlined_tool_schema(), plain(document)):  # most files: no jsonschema needed
        return []
    found: list[tuple[tuple[Any, ...], Problem]] = []
    seen: set[str] = set()
    for error in tool_file_validator().iter_errors(document):
        for path, problem in _translate(error, document, file):
            key = str(problem)
            if key not in seen:
                seen.add(key)
                found.append((path, problem))
    return found


def _resolve(schema: Any) -> dict[str, Any]:
    # Local "$ref": "#/$defs/x" only: that is all the packaged schema uses.
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/$defs/"):
        return tool_schema()["$defs"][schema["$ref"].removeprefix("#/$defs/")]
    return schema if isinstance(schema, dict) else {}


def _hint(schema: dict[str, Any], key: str) -> str | None:
    return schema.get(key) or _resolve(schema).get(key)


@lru_cache(maxsize=1)
def _key_homes() -> dict[str, list[str]]:
    """Every key of the tool-file format -> the places it may be written ("backend.http", "defaults")."""
    homes: dict[str, list[str]] = {}

    def walk(schema: Any, where: str) -> None:
        for key, sub in _resolve(schema).get("properties", {}).items():
            homes.setdefault(key, []).append(where or "the top of the tool")
            if key not in ("parameters", "json"):  # free-form inside: not the format's keys
                walk(sub, f"{where}.{key}" if where else key)

    definitions = tool_schema()["$defs"]
    walk(definitions["tool"], "")
    walk(definitions["defaults"], "defaults")
    return homes


def _with_home(problem: Problem, key: Any) -> Problem:
    # "unknown key 'base_url'" with no close spelling: say where that key does belong.
    if problem.fix and problem.fix.startswith("did you mean"):
        return problem
    homes = _key_homes().get(str(key))
    if not homes:
        return problem
    return Problem(problem.file, problem.line, problem.message, f"'{key}' belongs under {' or '.join(homes)}")


_Found = list[tuple[tuple[Any, ...], Problem]]


@dataclass(frozen=True)
class _Violation:
    """One schema error of a tool file, with what every wording of it needs."""

    error: ValidationError
    document: Any
    file: Path
    path: tuple[Any, ...]
    where: str  # the path in words, "the file" at the top
    line: int | None
    schema: dict[str, Any]  # the failing subschema, with its x- hints
    value: Any

    @property
    def fix(self) -> str | None:
        return self.schema.get("x-fix")

    def generic(self) -> list[Problem]:
        return error_problems(self.error, self.document, self.file)


def _translate(error: ValidationError, document: Any, file: Path) -> _Found:
    """The generic wording comes from toolrun.core.schema_errors; a few keywords read better with tool-file hints."""
    path = tuple(error.absolute_path)
    violation = _Violation(error, document, file, path, describe_path(path) if path else "the file",
                           line_of(document, path), error.schema if isinstance(error.schema, dict) else {},
                           error.instance)
    rule = _RULES.get(str(error.validator))
    found = rule(violation) if rule is not None else None
    if found is not None:
        return found
    return [(path, problem) for problem in violation.generic()]


def _unknown_keys(violation: _Violation) -> _Found | None:
    """Each unknown key on its own, with the place it belongs when it belongs elsewhere."""
    if not isinstance(violation.value, dict):
        return None
    allowed = set(violation.schema.get("properties", {}))
    unknown = [key for key in violation.value if key not in allowed]
    problems = violation.generic()
    if not violation.path:  # "in the document" says nothing at the top of a tool file
        problems = [Problem(p.file, p.line, p.message.replace(" in the document", ""), p.fix) for p in problems]
    return [(violation.path + (key,), _with_home(problem, key))
            for key, problem in zip(unknown, problems, strict=False)]


def _missing_keys(violation: _Violation) -> _Found | None:
    """Each missing required key, with an example of it to add."""
    if not isinstance(violation.value, dict):
        return None
    results = []
    for key in violation.error.validator_value:
        if key not in violation.value:
            example = _hint(violation.schema.get("properties", {}).get(key, {}), "x-example") or "..."
            message = f"{violation.where} is missing the required key '{key}'"
            results.append((violation.path, Problem(violation.file, violation.line, message, f"add '{key}: {example}'")))
    return results


def _not_one_of(violation: _Violation) -> _Found | None:
    """A value outside an enum: the choices, and the closest of them."""
    choices = list(dict.fromkeys(str(c).upper() if isinstance(c, str) else str(c)
                                 for c in violation.error.validator_value))
    guess = did_you_mean(str(violation.value).upper(), choices)
    message = f"{violation.where} must be one of {', '.join(choices)}, not {describe_value(violation.value)}"
    fix = f"did you mean '{guess}'?" if guess else violation.fix
    return [(violation.path, Problem(violation.file, violation.line, message, fix))]


def _wrong_count(violation: _Violation) -> _Found | None:
    """A mapping or list with too few or too many members: what it has."""
    value = violation.value
    if not isinstance(value, (dict, list)):
        return None
    keys = ", ".join(str(k) for k in value) if isinstance(value, dict) else ""
    what = f"has {counted(len(value), 'key')} ({keys})" if keys else "is empty"
    return [(violation.path, Problem(violation.file, violation.line, f"{violation.where} {what}", violation.fix))]


def _unusable_name(violation: _Violation) -> _Found | None:
    """A tool name the providers refuse: a name they accept, made of it."""
    if violation.path[-1:] != ("name",) or not isinstance(violation.value, str):
        return None
    # "ChaDri.change_drink" (BFCL's module.function style) -> a name the providers accept
    suggestion = re.sub(r"[^A-Za-z0-9_-]+", "_", violation.value.strip()).strip("_")[:64] or "get_weather"
    return [(violation.path, Problem(p.file, p.line, p.message, f"rename it, e.g. {suggestion}"))
            for p in violation.generic()]


# a JSON Schema keyword -> its tool-file wording (None where it does not apply: the generic one then)
_RULES: dict[str, Callable[[_Violation], _Found | None]] = {
    "additionalProperties": _unknown_keys,
    "required": _missing_keys,
    "enum": _not_one_of,
    "minProperties": _wrong_count,
    "maxProperties": _wrong_count,
    "minItems": _wrong_count,
    "pattern": _unusable_name,
}


__all__ = ["packaged_schema_text", "schema_problems", "tool_file_validator", "tool_schema"]
