"""Checks of a tool's ``parameters``: a valid draft 2020-12 schema, with no misspelt keywords.

The model sees this schema and every call is validated against it, so a schema that is
not JSON Schema, a ``required`` entry naming no property, or a ``descriptoin`` that silently
hides a description are load errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

from jsonschema import Draft202012Validator

from toolrun.errors import Problem
from toolrun.schema_errors import describe_path, did_you_mean
from toolrun.yamlsource import LineDict, line_of, plain

LineAt = Callable[..., "int | None"]  # the line of a path of keys inside a tool mapping

_JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
# JSON Schema 2020-12 keywords (core, applicator, validation, meta-data, format, content, unevaluated).
_SCHEMA_KEYWORDS = frozenset(
    "$schema $id $ref $anchor $dynamicRef $dynamicAnchor $vocabulary $comment $defs definitions "
    "allOf anyOf oneOf not if then else dependentSchemas prefixItems items contains properties "
    "patternProperties additionalProperties propertyNames unevaluatedItems unevaluatedProperties "
    "type const enum multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength minLength "
    "pattern maxItems minItems uniqueItems maxContains minContains maxProperties minProperties required "
    "dependentRequired title description default deprecated readOnly writeOnly examples format "
    "contentEncoding contentMediaType contentSchema nullable".split()
)
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_SINGLE = ("not", "if", "then", "else", "items", "contains", "additionalProperties",
                     "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema")

# Building the metaschema validator is slow; one instance serves every tool.
_METASCHEMA_VALIDATOR = Draft202012Validator(Draft202012Validator.META_SCHEMA)



# Keywords whose value rules are simple enough to check by hand (see _plainly_valid).
_TEXT_KEYWORDS = frozenset({"description", "title", "$comment", "format"})
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_COUNT_KEYWORDS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"})
_ANY_VALUE_KEYWORDS = frozenset({"default", "const"})


def parameter_problems(raw: LineDict, *, file: Path, document: Any, path: tuple[Any, ...] = ()) -> list[Problem]:
    """Only the checks of ``raw["parameters"]``: for a tool whose other parts are too broken to build."""
    if "parameters" not in raw:
        return []
    name = raw.get("name")
    label = f"tool '{name}'" if isinstance(name, str) else (describe_path(path) if path else "the tool")
    return parameter_schema_problems(
        plain(raw["parameters"]), file, label, lambda *steps: line_of(document, path + ("parameters", *steps))
    )


def parameter_schema_problems(parameters: Any, file: Path, label: str, at: LineAt) -> list[Problem]:
    """Problems of a plain ``parameters`` schema; ``at(*steps)`` gives the line of a path inside it."""
    problems = []
    errors = [] if _plainly_valid(parameters) else _METASCHEMA_VALIDATOR.iter_errors(parameters)
    for error in errors:
        where = describe_path(("parameters", *error.absolute_path))
        message = f"{label}: {where} is not a valid JSON Schema: {error.message}"
        fix = "fix it per JSON Schema draft 2020-12 (e.g. {type: string, description: ...})"
        if error.absolute_path and error.absolute_path[-1] == "type" and isinstance(error.instance, str):
            message = f"{label}: {where}: '{error.instance}' is not a JSON Schema type"
            guess = did_you_mean(error.instance, _JSON_TYPES)
            fix = f"did you mean '{guess}'?" if guess else f"use one of {', '.join(_JSON_TYPES)}"
        problems.append(Problem(file, at(*error.absolute_path), message, fix))
    if problems or not isinstance(parameters, dict):
        return problems
    for steps, keyword, guess in _keyword_typos(parameters):
        where = describe_path(("parameters", *steps))
        message = f"{label}: unknown JSON Schema keyword '{keyword}' in {where}"
        problems.append(Problem(file, at(*steps, keyword), message, f"did you mean '{guess}'?"))
    for steps, index, key, properties in _required_without_property(parameters):
        where = describe_path(("parameters", *steps))
        guess = did_you_mean(str(key), properties)
        message = f"{label}: {where}.required names '{key}', which is not under {where}.properties"
        fix = f"did you mean '{guess}'?" if guess else f"declare '{key}' under {where}.properties, or remove it"
        problems.append(Problem(file, at(*steps, "required", index), message, fix))
    return problems


def _required_without_property(
    schema: Any, steps: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], int, Any, dict[str, Any]]]:
    """``required`` entries with no matching property, in this object schema and the nested ones."""
    if not isinstance(schema, dict):
        return
    properties, required = schema.get("properties"), schema.get("required")
    if isinstance(properties, dict) and isinstance(required, list):
        for index, key in enumerate(required):
            if key not in properties:
                yield steps, index, key, properties
    if isinstance(properties, dict):
        for name, sub in properties.items():
            yield from _required_without_property(sub, steps + ("properties", name))
    if isinstance(schema.get("items"), dict):
        yield from _required_without_property(schema["items"], steps + ("items",))


def _keyword_typos(schema: Any, steps: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str, str]]:
    """Keys of a JSON Schema that look like a misspelt keyword ("descriptoin").

    Unknown keywords are legal JSON Schema (extensions), so only near-misses are reported.
    """
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from _keyword_typos(sub, steps + (key, name))
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                yield from _keyword_typos(sub, steps + (key, index))
        elif key in _SUBSCHEMA_SINGLE:
            yield from _keyword_typos(value, steps + (key,))
        elif key not in _SCHEMA_KEYWORDS and isinstance(key, str) and not key.startswith("x-"):
            guess = did_you_mean(key, _SCHEMA_KEYWORDS)
            if guess:
                yield steps, key, guess




def _plainly_valid(schema: Any) -> bool:
    """True only for schemas built from common keywords with well-typed values.

    Such a schema is certainly valid against the 2020-12 metaschema; checking it by hand
    is ~50x faster, which matters for catalogs of thousands of tools. Anything unusual
    returns False and goes through the full metaschema validation.
    """
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    for key, value in schema.items():
        if key == "type":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names or len(set(map(str, names))) != len(names):
                return False
            if not all(isinstance(name, str) and name in _JSON_TYPES for name in names):
                return False
        elif key == "properties":
            if not isinstance(value, dict) or not all(_plainly_valid(sub) for sub in value.values()):
                return False
        elif key in ("items", "additionalProperties"):
            if not _plainly_valid(value):
                return False
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
                return False
            if len(set(value)) != len(value):
                return False
        elif key == "enum":
            if not isinstance(value, list):
                return False
        elif key in _TEXT_KEYWORDS:
            if not isinstance(value, str):
                return False
        elif key in _NUMBER_KEYWORDS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (key == "multipleOf" and value <= 0):
                return False
        elif key in _COUNT_KEYWORDS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return False
        elif key == "uniqueItems":
            if not isinstance(value, bool):
                return False
        elif key not in _ANY_VALUE_KEYWORDS:
            return False
    return True
