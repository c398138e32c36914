"""A fast yes for arguments that a simple parameter schema surely accepts.

Most tools' parameters are an object of a few typed properties, some required, some with
an enum or bounds. For those, checking a model's arguments in plain Python costs about a
microsecond, where jsonschema's validator costs tens. ``acceptor`` builds such a check
for a schema made only of the keywords below; it answers True only when the arguments are
valid, and False when it cannot tell, so the caller then asks jsonschema (which also
words the errors). A schema with any other keyword gets no acceptor.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

# Keywords that never change what is valid.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "example", "$comment", "deprecated",
                          "readOnly", "writeOnly"})
_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"})
_VALUE_KEYS = frozenset({"type", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                         "minLength", "maxLength", "pattern", "items", "properties", "required",
                         "additionalProperties"})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# JSON types as jsonschema sees them; an integer-valued float is left to jsonschema (False).
_TYPES: dict[str, Check] = {
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}


def acceptor(schema: Any) -> Check | None:
    """A check of a tool's arguments (a dict) against ``schema``; None when the schema is not simple."""
    return _object_check(schema)


def _meaningful(schema: dict[str, Any]) -> set[str]:
    return {key for key in schema if key not in _ANNOTATIONS and not str(key).startswith("x-")}


def _object_check(schema: Any) -> Check | None:
    if not isinstance(schema, dict) or not _meaningful(schema) <= _OBJECT_KEYS:
        return None
    if schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(additional, bool):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    checks: dict[str, Check] = {}
    for name, sub in properties.items():
        check = _value_check(sub)
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)

    def accepts(value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        for name in needed:
            if name not in value:
                return False
        for key, item in value.items():
            check = checks.get(key)
            if check is None:
                if not additional:
                    return False
            elif not check(item):
                return False
        return True

    return accepts


def _value_check(schema: Any) -> Check | None:
    if schema is True:
        return lambda value: True
    if not isinstance(schema, dict):
        return None
    keys = _meaningful(schema)
    if not keys <= _VALUE_KEYS:
        return None
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or not all(isinstance(k, str) and k in _TYPES for k in kinds):
            return None
        type_checks = [_TYPES[k] for k in kinds]
        checks.append(type_checks[0] if len(type_checks) == 1 else lambda value: any(c(value) for c in type_checks))
    if "enum" in schema:
        choices = schema["enum"]
        if not isinstance(choices, list) or not all(isinstance(choice, str) for choice in choices):
            return None
        allowed = frozenset(choices)
        checks.append(lambda value: isinstance(value, str) and value in allowed)
    bounds = _bounds_check(schema)
    if bounds is None:
        return None
    checks += bounds
    if keys & {"properties", "required", "additionalProperties"}:
        nested = _object_check({key: schema[key] for key in keys & _OBJECT_KEYS})
        if nested is None:
            return None
        checks.append(lambda value: not isinstance(value, dict) or nested(value))
    if "items" in schema:
        item_check = _value_check(schema["items"])
        if item_check is None:
            return None
        checks.append(lambda value: not isinstance(value, list) or all(item_check(item) for item in value))
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


Comparison = Callable[[Any, Any], bool]
_NUMBER_BOUNDS: dict[str, Comparison] = {"minimum": operator.ge, "maximum": operator.le,
                                         "exclusiveMinimum": operator.gt, "exclusiveMaximum": operator.lt}
_LENGTH_BOUNDS: dict[str, Comparison] = {"minLength": operator.ge, "maxLength": operator.le}


def _number_bound(holds: Comparison, bound: Any) -> Check:
    return lambda value: not _is_number(value) or holds(value, bound)  # other types ignore the bound


def _length_bound(holds: Comparison, bound: int) -> Check:
    return lambda value: not isinstance(value, str) or holds(len(value), bound)


def _bounds_check(schema: dict[str, Any]) -> list[Check] | None:
    """Checks for the numeric and length bounds and the pattern; None when one is malformed."""
    checks: list[Check] = []
    for keyword, holds in _NUMBER_BOUNDS.items():
        if keyword in schema:
            if not _is_number(schema[keyword]):
                return None
            checks.append(_number_bound(holds, schema[keyword]))
    for keyword, holds in _LENGTH_BOUNDS.items():
        if keyword in schema:
            if not isinstance(schema[keyword], int) or isinstance(schema[keyword], bool):
                return None
            checks.append(_length_bound(holds, schema[keyword]))
    if "pattern" in schema:
        try:
            pattern = re.compile(schema["pattern"])
        except (re.error, TypeError):
            return None
        checks.append(lambda value: not isinstance(value, str) or pattern.search(value) is not None)
    return checks
