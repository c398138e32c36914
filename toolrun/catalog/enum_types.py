"""What the enum-type-mismatch lint rule sees: enum (or const) values a parameter's own ``type`` rejects.

``type: integer, enum: ["1", "2"]`` passes JSON Schema's own checks, yet no value can satisfy
both keywords: the model is offered values that validation then refuses, call after call.
YAML adds its own ways in: unquoted ``yes``/``no``/``on``/``off`` are booleans, ``2.5e3`` is text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

_JSON_TYPES = ("string", "integer", "number", "boolean", "null", "array", "object")
_PYTHON_TYPES: dict[str, type] = {"string": str, "boolean": bool, "array": list, "object": dict, "null": type(None)}


def fits_type(value: Any, type_name: str) -> bool:
    """Whether ``value`` (as YAML or JSON read it) is of the JSON Schema type ``type_name`` (1.0 is an integer)."""
    if type_name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if type_name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _PYTHON_TYPES[type_name])


def _declared_types(schema: dict[str, Any]) -> list[str] | None:
    """The schema's ``type`` as a list of JSON types; None when it has none this rule can judge by."""
    declared = schema.get("type")
    listed = declared if isinstance(declared, list) else [declared]
    types = [kind for kind in listed if isinstance(kind, str) and kind in _JSON_TYPES]
    if not types or len(types) != len(listed):
        return None  # no type, or a misspelt one: other checks say so
    return types


def _type_name(value: Any) -> str:
    for kind in ("boolean", "integer", "number", "string", "null", "array", "object"):
        if fits_type(value, kind):
            return kind
    return type(value).__name__


def _fix(types: list[str], wrong: list[Any]) -> str:
    """What to write instead: the values as the declared type, when each converts to it."""
    if all(value is None for value in wrong):
        return 'add "null" to the type (type: [' + ", ".join([*types, '"null"']) + "])"
    if types == ["string"] and any(isinstance(value, bool) for value in wrong):
        return ('quote them: unquoted yes, no, on, off, true and false are booleans in YAML (enum: ["yes", "no"])'
                "; or change the type")
    if types == ["string"]:
        quoted = ", ".join(json.dumps(value if isinstance(value, str) else json.dumps(value)) for value in wrong)
        return f"quote them ({quoted}), or change the type to what they are"
    converted = [_converted(value, types[0]) for value in wrong] if len(types) == 1 else []
    if converted and all(value is not None for value in converted):
        spelled = ", ".join(json.dumps(value, ensure_ascii=False) for value in converted)
        return f"write them as {types[0]} values, without quotes ({spelled}), or change the type"
    return f"make them {' or '.join(types)} values, or change the type to what they are"


def _converted(value: Any, type_name: str) -> Any:
    """``value`` as ``type_name`` when it is text that spells one ("1" -> 1), else None."""
    if not isinstance(value, str) or type_name not in ("integer", "number", "boolean"):
        return None
    if type_name == "boolean":
        return {"true": True, "false": False}.get(value.strip().lower())
    try:
        number = json.loads(value.strip())
    except ValueError:
        return None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return None
    return number if type_name == "number" or fits_type(number, "integer") else None


def enum_mismatch(display: str, schema: dict[str, Any]) -> str | None:
    """What is wrong with ``schema``'s enum (or const) values its own type rejects, and the fix; None when nothing is."""
    types = _declared_types(schema)
    keyword = "enum" if isinstance(schema.get("enum"), list) else "const" if "const" in schema else None
    if types is None or keyword is None:
        return None
    values = schema["enum"] if keyword == "enum" else [schema["const"]]
    # a null beside `nullable: true` is openapi-nullable's finding, whose fix covers it
    skip_null = schema.get("nullable") is True
    wrong = [value for value in values
             if not any(fits_type(value, kind) for kind in types) and not (value is None and skip_null)]
    if not wrong:
        return None
    shown = ", ".join(f"{json.dumps(value, ensure_ascii=False)} ({_type_name(value)})" for value in wrong[:5])
    more = f" and {len(wrong) - 5} more" if len(wrong) > 5 else ""
    declared = types[0] if len(types) == 1 else "[" + ", ".join(types) + "]"
    effect = ("no value can pass both, so every call that gives this parameter is rejected"
              if len(wrong) == len(values) else "a call that sends one of them is rejected")
    return (f"parameter {display!r} is type: {declared}, but its {keyword} holds {shown}{more}: {effect}; "
            f"{_fix(types, wrong)}")


def schemas_with_items(display: str, key_path: str, schema: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(display, key path, schema) of ``schema``, then of its ``items`` (an array of enumerated values), and theirs."""
    while isinstance(schema, dict):
        yield display, key_path, schema
        display, key_path, schema = f"{display}[]", f"{key_path}.items", schema.get("items")
