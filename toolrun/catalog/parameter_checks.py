"""Checks of a tool's ``parameters``: a valid draft 2020-12 schema, with no misspelt keywords.

The model sees this schema and every call is validated against it, so a schema that is
not JSON Schema, a ``required`` entry naming no property, or a ``descriptoin`` that silently
hides a description are load errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.core.errors import Problem
from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, nesting_depth
from toolrun.core.schema_dialects import SUBSCHEMA_LISTS, SUBSCHEMA_MAPS, SUBSCHEMA_SINGLE
from toolrun.core.schema_errors import describe_path, describe_value
from toolrun.core.text import did_you_mean
from toolrun.core.yamlsource import LineDict, line_of, plain

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

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
    "contentEncoding contentMediaType contentSchema".split()
)
# OpenAPI's own schema keywords: JSON Schema ignores them, and they are nobody's misspelling.
_OPENAPI_KEYWORDS = frozenset({"nullable", "example", "discriminator", "xml", "externalDocs"})
# Mappings and lists a ``parameters`` schema may nest. Past about 255, the MCP SDK cannot send the tool list
# ("Circular reference detected (depth exceeded)": every client's tools/list failed), and some 400 ended the
# checks, the lint and the exports, which walk it recursively, in RecursionError. An object in an object 99
# times over fits, as do the 64 levels of arguments a call may send (MAX_ARGUMENT_DEPTH), written plainly.
MAX_SCHEMA_DEPTH = 200


@lru_cache(maxsize=1)
def _metaschema_validator() -> Draft202012Validator:
    """Building the metaschema validator is slow; one instance serves every tool, built when first needed."""
    from jsonschema import Draft202012Validator  # 50-65 ms to import: not for a catalog served from the cache

    return Draft202012Validator(Draft202012Validator.META_SCHEMA)


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
    depth = nesting_depth(parameters)
    if depth > MAX_SCHEMA_DEPTH:
        return [Problem(file, at(), f"{label}: parameters nest {depth} levels of mappings and lists, more than the "
                        f"{MAX_SCHEMA_DEPTH} toolrun reads (arguments may nest {MAX_ARGUMENT_DEPTH} levels)",
                        "flatten the schema: a shape used at many levels goes under $defs once, "
                        "and each level points at it with $ref")]
    problems = [
        Problem(file, at(*steps, key), f"{label}: {describe_path(('parameters', *steps))}: the name "
                f"{json.dumps(key)} is not text (YAML read it as {describe_value(key)})", _quote_fix(key))
        for steps, key in _non_text_names(parameters)
    ]
    if problems:  # JSON has only text keys: every later check and every export would trip on these
        return problems
    valueless: set[tuple[Any, ...]] = set()
    for steps, keys, cut in _null_valued_keywords(parameters):
        valueless.update(steps + (key,) for key in keys)
        problems.append(Problem(file, at(*steps, keys[0]), _valueless_message(label, steps, keys),
                                _valueless_fix(cut)))
    for steps, error in _metaschema_errors(parameters):
        if steps not in valueless:  # said above, with the likelier cause
            message, fix = _explain(error, label, describe_path(("parameters", *steps)))
            problems.append(Problem(file, at(*steps), message, fix))
    if problems or not isinstance(parameters, dict):
        return problems
    for steps, keyword, guess in _keyword_typos(parameters):
        where = describe_path(("parameters", *steps))
        message = f"{label}: unknown JSON Schema keyword '{keyword}' in {where}"
        problems.append(Problem(file, at(*steps, keyword), message, f"did you mean '{guess}'?"))
    for steps, keyword, message, fix in unusable_values(parameters, parameters):
        where = describe_path(("parameters", *steps))
        problems.append(Problem(file, at(*steps, keyword), f"{label}: {where}: {message}", fix))
    for steps, index, key, properties in _required_without_property(parameters):
        where = describe_path(("parameters", *steps))
        meant = did_you_mean(str(key), properties)
        message = f"{label}: {where}.required names '{key}', which is not under {where}.properties"
        fix = f"did you mean '{meant}'?" if meant else f"declare '{key}' under {where}.properties, or remove it"
        problems.append(Problem(file, at(*steps, "required", index), message, fix))
    return problems


# Type names from programming languages (BFCL's "dict", "float", "tuple") -> the JSON Schema type.
_FOREIGN_TYPE_NAMES = {
    "dict": "object", "map": "object", "hash": "object", "mapping": "object",
    "float": "number", "double": "number", "decimal": "number",
    "int": "integer", "long": "integer", "str": "string", "text": "string", "bool": "boolean",
    "list": "array", "tuple": "array", "set": "array", "none": "null",
}
_GENERIC_FIX = "fix it per JSON Schema draft 2020-12 (e.g. {type: string, description: ...})"


def _explain(error: ValidationError, label: str, where: str) -> tuple[str, str]:
    """(message, fix) for one metaschema error, in YAML terms rather than Python reprs."""
    keyword = error.absolute_path[-1] if error.absolute_path else None
    value = error.instance
    if keyword == "type" and isinstance(value, str) or error.validator == "enum" and isinstance(value, str):
        meant = _FOREIGN_TYPE_NAMES.get(value.lower()) or did_you_mean(value, _JSON_TYPES)
        if value.lower() == "any":
            return f"{label}: {where}: 'any' is not a JSON Schema type", "remove 'type' to accept any value"
        fix = f"write type: {meant}" if meant else f"use one of {', '.join(_JSON_TYPES)}"
        return f"{label}: {where}: '{value}' is not a JSON Schema type", fix
    if keyword in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
        bound = "minimum" if keyword == "exclusiveMinimum" else "maximum"
        return (
            f"{label}: {where}: {str(value).lower()} is the draft-04 form; in draft 2020-12 {keyword} is a number",
            f"write {keyword}: <the {bound} value> and remove {bound}" if value else f"remove {keyword}: false",
        )
    if keyword in ("$recursiveAnchor", "$recursiveRef"):
        return (
            f"{label}: {where} is a draft 2019-09 keyword, not valid in draft 2020-12",
            "remove it: a plain $ref to the schema handles recursion (or use $dynamicAnchor/$dynamicRef)",
        )
    if error.validator == "uniqueItems" and isinstance(value, list):
        repeated = sorted({str(item) for item in value if value.count(item) > 1})
        return f"{label}: {where} lists {', '.join(repeated)} more than once", "list each entry once"
    if error.validator == "type":
        expected = " or ".join(_as_list(error.validator_value))
        return f"{label}: {where} must be of type {expected}, not {describe_value(value)}", f"write a {expected} value here"
    return f"{label}: {where} is not a valid JSON Schema: {error.message}", _GENERIC_FIX


def _as_list(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def _non_text_names(node: Any, steps: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(steps, key) for every mapping key that is not a string (``200:``, ``null:``, ``on:``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                yield steps, key
            yield from _non_text_names(value, steps + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _non_text_names(value, steps + (index,))


def _quote_fix(key: Any) -> str:
    if isinstance(key, bool):  # on/yes/true all read as True: the text written is unknown here
        return 'quote it as you wrote it, e.g. "on" or "yes"'
    return f'quote it: "{json.dumps(key)}"'


# Keywords whose value may well be null: a null default, a const null, OpenAPI's example.
_NULL_ALLOWED = frozenset({"default", "const", "example"})


def _null_valued_keywords(
    node: Any, steps: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], list[str], tuple[str, str] | None]]:
    """(steps, keys, cut) for keys of a schema node (or of its ``properties``) that have no value.

    In a YAML flow mapping ``{description: City, in English}`` the comma ends the text and
    ``in English`` becomes a key with a null value: the schema the model gets is silently
    wrong. Keys that follow a text value one after the other are one group, and ``cut`` is
    that key and its text as probably meant (``("description", "City, in English")``).
    """
    if not isinstance(node, dict):
        return
    maps = [(steps, node)] + [(steps + (key,), node[key]) for key in SUBSCHEMA_MAPS if isinstance(node.get(key), dict)]
    for where, mapping in maps:
        keys = list(mapping)
        index = 0
        while index < len(keys):
            key = keys[index]
            if mapping[key] is not None or key in _NULL_ALLOWED or str(key).startswith("x-"):
                index += 1
                continue
            group = [str(key)]
            while index + len(group) < len(keys) and mapping[keys[index + len(group)]] is None:
                group.append(str(keys[index + len(group)]))
            before = mapping[keys[index - 1]] if index else None
            cut = (str(keys[index - 1]), ", ".join([before, *group])) if isinstance(before, str) else None
            yield where, group, cut
            index += len(group)
    for child_steps, child in _subschemas(node):
        yield from _null_valued_keywords(child, steps + child_steps)


def _valueless_message(label: str, steps: tuple[Any, ...], keys: list[str]) -> str:
    names = " and ".join(json.dumps(key, ensure_ascii=False) for key in keys)
    verb = "has" if len(keys) == 1 else "have"
    return (f"{label}: {describe_path(('parameters', *steps))}: {names} {verb} no value "
            "(in a YAML flow mapping {...} a comma ends a text, and the rest becomes a key)")


def _valueless_fix(cut: tuple[str, str] | None) -> str:
    if cut is None:
        return ("quote a text that holds a comma (description: \"City, in English\"), or write the schema in "
                "block style, one key per line; a keyword left empty needs a value")
    key, text = cut
    return f"quote the text: {key}: {json.dumps(text, ensure_ascii=False)} (or write it in block style)"


def unusable_values(node: Any, root: dict[str, Any], steps: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """(steps, keyword, message, fix) for a $ref that points nowhere and a pattern that is no regex.

    Valid JSON Schema, but every call would fail to validate: better said at load time.
    """
    if not isinstance(node, dict):
        return
    reference = node.get("$ref")
    if isinstance(reference, str) and not _resolves(reference, root):
        target = reference.rsplit("/", 1)[-1]
        fix = (
            f"add {target} under parameters.$defs, or fix the name" if reference.startswith("#/")
            else "only references inside the tool work: write $ref: '#/$defs/Name' and put Name under parameters.$defs"
        )
        yield steps, "$ref", f"$ref '{reference}' points to nothing", fix
    for keyword, value in node.items():  # .nan passes every bound; JSON (a request, an export) cannot carry it
        if any(isinstance(item, float) and item != item for item in (value if isinstance(value, list) else [value])):
            yield steps, keyword, f"{keyword} is .nan, which is not a number JSON can carry", "write a number"
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as exc:
            yield steps, "pattern", f"{pattern!r} is not a valid regular expression ({exc})", "fix the pattern"
    for child_steps, child in _subschemas(node):
        yield from unusable_values(child, root, steps + child_steps)


def _resolves(reference: str, root: dict[str, Any]) -> bool:
    """True when ``reference`` is a JSON pointer into ``root`` ("#", "#/$defs/Item") that exists."""
    if not reference.startswith("#"):
        return False
    node: Any = root
    for part in reference[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


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
        if key in SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield from _keyword_typos(sub, steps + (key, name))
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                yield from _keyword_typos(sub, steps + (key, index))
        elif key in SUBSCHEMA_SINGLE:
            yield from _keyword_typos(value, steps + (key,))
        elif isinstance(key, str) and key not in _SCHEMA_KEYWORDS | _OPENAPI_KEYWORDS and not key.startswith("x-"):
            guess = did_you_mean(key, _SCHEMA_KEYWORDS)
            if guess:
                yield steps, key, guess



def _metaschema_errors(schema: Any, steps: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], ValidationError]]:
    """The draft 2020-12 metaschema's errors for ``schema``, as (path inside it, error).

    Each subschema's own keywords are checked by hand (~50x faster than the metaschema,
    which matters for catalogs of thousands of large schemas); only a node with something
    unusual ($id, $anchor, 2019-09 keywords, a wrong value) goes to the metaschema, and then
    alone, its subschemas stubbed with ``true``, so one odd keyword deep inside a large
    schema costs one small validation, not one of the whole schema.
    """
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict) or not _locally_valid(schema):
        for error in _metaschema_validator().iter_errors(_with_stubbed_subschemas(schema)):
            yield steps + tuple(error.absolute_path), error
    if isinstance(schema, dict):
        for child_steps, child in _subschemas(schema):
            yield from _metaschema_errors(child, steps + child_steps)


def _subschemas(schema: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(steps, subschema) for every schema-valued keyword of one schema node."""
    for key, value in schema.items():
        if key in SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                if isinstance(sub, (dict, bool)):
                    yield (key, name), sub
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                if isinstance(sub, (dict, bool)):
                    yield (key, index), sub
        elif key in SUBSCHEMA_SINGLE and isinstance(value, (dict, bool)):
            yield (key,), value


def _with_stubbed_subschemas(schema: Any) -> Any:
    # Subschemas are checked on their own; here only their container shape matters.
    if not isinstance(schema, dict):
        return schema
    stubbed = dict(schema)
    for (key, *rest), _ in _subschemas(schema):
        if not rest:
            stubbed[key] = True
        elif isinstance(stubbed[key], dict):
            stubbed[key] = {**stubbed[key], rest[0]: True}
        else:
            stubbed[key] = [True if index == rest[0] else item for index, item in enumerate(stubbed[key])]
    return stubbed


def _locally_valid(schema: dict[str, Any]) -> bool:
    """True when every keyword value of this node is certainly valid (subschemas: shape only)."""
    for key, value in schema.items():
        check = _VALUE_CHECKS.get(key)
        if check is None:
            if key in _METASCHEMA_ONLY_KEYWORDS:
                return False
            continue  # an unknown keyword is legal with any value; typos are found separately
        if not check(value):
            return False
    return True


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_schema(value: Any) -> bool:
    return isinstance(value, (dict, bool))


def _is_schema_map(value: Any) -> bool:
    return isinstance(value, dict) and all(map(_is_schema, value.values()))


def _is_schema_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(map(_is_schema, value))


def _is_unique_names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(n, str) for n in value) and len(set(value)) == len(value)


def _is_type(value: Any) -> bool:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        return False
    return len(set(names)) == len(names) and all(name in _JSON_TYPES for name in names)


# Keyword -> a hand check of its value, matching the 2020-12 metaschema for these values.
_VALUE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "type": _is_type,
    "enum": lambda value: isinstance(value, list),
    "required": _is_unique_names,
    "dependentRequired": lambda value: isinstance(value, dict) and all(_is_unique_names(v) for v in value.values()),
    "examples": lambda value: isinstance(value, list),
    "multipleOf": lambda value: _is_number(value) and value > 0,
    **{key: _is_text for key in ("description", "title", "$comment", "format", "pattern", "$ref",
                                 "contentEncoding", "contentMediaType")},
    **{key: _is_number for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")},
    **{key: _is_count for key in ("minLength", "maxLength", "minItems", "maxItems", "minProperties",
                                  "maxProperties", "minContains", "maxContains")},
    **{key: (lambda value: isinstance(value, bool)) for key in ("uniqueItems", "deprecated", "readOnly", "writeOnly")},
    **{key: _is_schema_map for key in SUBSCHEMA_MAPS if key != "definitions"},  # draft 7's: the metaschema's
    **{key: _is_schema_list for key in SUBSCHEMA_LISTS},
    **{key: _is_schema for key in SUBSCHEMA_SINGLE},
}
# Keywords the metaschema checks in ways not worth repeating by hand (URIs, anchors, 2019-09 names).
_METASCHEMA_ONLY_KEYWORDS = frozenset(
    {"$id", "$schema", "$anchor", "$dynamicAnchor", "$dynamicRef", "$vocabulary",
     "$recursiveAnchor", "$recursiveRef", "definitions", "dependencies"}
)
