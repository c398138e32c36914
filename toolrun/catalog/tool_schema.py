"""The published tool-file JSON Schema, and its errors translated into plain words with a fix.

jsonschema's own messages ("Additional properties are not allowed ...") name neither the
line nor the remedy; users need ``file:line: unknown key 'descripton' — did you mean
'description'?``. The schema carries ``x-expected`` / ``x-fix`` / ``x-example`` hints that
this module uses for those words, so the wording lives next to the rule it explains.
"""

from __future__ import annotations

import re
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
    return _inline_refs(schema, schema["$defs"])


@lru_cache(maxsize=1)
def tool_file_validator() -> Draft202012Validator:
    """A validator for whole tool files, built once, with the local $refs inlined (~40% faster)."""
    from jsonschema import Draft202012Validator  # 50-65 ms to import: only for a tool file with a mistake

    return Draft202012Validator(_inlined_tool_schema())


def _inline_refs(node: Any, definitions: dict[str, Any]) -> Any:
    # The packaged schema has no recursive $refs, so inlining terminates.
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            target = _inline_refs(definitions[reference.removeprefix("#/$defs/")], definitions)
            return {**target, **{k: _inline_refs(v, definitions) for k, v in node.items() if k != "$ref"}}
        return {k: _inline_refs(v, definitions) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(item, definitions) for item in node]
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


def _translate(error: ValidationError, document: Any, file: Path) -> list[tuple[tuple[Any, ...], Problem]]:
    """The generic wording comes from toolrun.core.schema_errors; a few keywords read better with tool-file hints."""
    path = tuple(error.absolute_path)
    where = describe_path(path) if path else "the file"
    line = line_of(document, path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    keyword = error.validator
    value = error.instance
    fix = schema.get("x-fix")

    if keyword == "additionalProperties" and isinstance(value, dict):
        allowed = set(schema.get("properties", {}))
        unknown = [key for key in value if key not in allowed]
        problems = error_problems(error, document, file)
        if not path:  # "in the document" says nothing at the top of a tool file
            problems = [Problem(p.file, p.line, p.message.replace(" in the document", ""), p.fix) for p in problems]
        return [(path + (key,), _with_home(problem, key)) for key, problem in zip(unknown, problems, strict=False)]
    if keyword == "required" and isinstance(value, dict):
        results = []
        for key in error.validator_value:
            if key not in value:
                example = _hint(schema.get("properties", {}).get(key, {}), "x-example") or "..."
                message = f"{where} is missing the required key '{key}'"
                results.append((path, Problem(file, line, message, f"add '{key}: {example}'")))
        return results
    if keyword == "enum":
        choices = list(dict.fromkeys(str(c).upper() if isinstance(c, str) else str(c) for c in error.validator_value))
        guess = did_you_mean(str(value).upper(), choices)
        message = f"{where} must be one of {', '.join(choices)}, not {describe_value(value)}"
        return [(path, Problem(file, line, message, f"did you mean '{guess}'?" if guess else fix))]
    if keyword in ("minProperties", "maxProperties", "minItems") and isinstance(value, (dict, list)):
        keys = ", ".join(str(k) for k in value) if isinstance(value, dict) else ""
        what = f"has {counted(len(value), 'key')} ({keys})" if keys else "is empty"
        return [(path, Problem(file, line, f"{where} {what}", fix))]
    if keyword == "pattern" and path[-1:] == ("name",) and isinstance(value, str):
        # "ChaDri.change_drink" (BFCL's module.function style) -> a name the providers accept
        suggestion = re.sub(r"[^A-Za-z0-9_-]+", "_", value.strip()).strip("_")[:64] or "get_weather"
        return [(path, Problem(p.file, p.line, p.message, f"rename it, e.g. {suggestion}"))
                for p in error_problems(error, document, file)]
    return [(path, problem) for problem in error_problems(error, document, file)]


__all__ = ["packaged_schema_text", "schema_problems", "tool_file_validator", "tool_schema"]
