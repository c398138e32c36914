"""schema_dialects: the one walker over a schema, and the order and limits of its two dialects.

The conversions' results on real tools are tested in test_export.py; here: what the walker
visits and in which order, what each dialect notes in which order (the export prints it and
the lint points at the first), and the depth limit of strict mode.
"""

from __future__ import annotations

from typing import Any

from toolrun.catalog.parameter_checks import _SCHEMA_KEYWORDS
from toolrun.schema_dialects import (
    STRICT_MAX_DEPTH,
    SUBSCHEMA_KEYWORDS,
    Place,
    SchemaNode,
    SchemaWalker,
    holds_subschemas,
    to_gemini,
    to_openai_strict,
)


class _Visits(SchemaWalker):
    """The default walker, remembering the path of every schema object it reaches."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def before(self, node: SchemaNode) -> None:
        self.paths.append(node.place.path)


def test_the_walker_reaches_every_subschema_in_key_order() -> None:
    schema = {
        "properties": {"a": {"items": {"type": "string"}}, "b": True},
        "anyOf": [{"not": {}}, {"if": {}, "then": {}, "else": {}}],
        "$defs": {"d": {"prefixItems": [{}]}},
        "additionalProperties": {"propertyNames": {}},
        "enum": [{"properties": {"not_a_schema": {}}}],  # a value, not a schema: never walked
    }
    walker = _Visits()
    assert walker.walk(schema, Place()) == schema
    assert walker.paths == ["", "properties.a", "properties.a.items", "anyOf.0", "anyOf.0.not", "anyOf.1",
                            "anyOf.1.if", "anyOf.1.then", "anyOf.1.else", "$defs.d", "$defs.d.prefixItems.0",
                            "additionalProperties", "additionalProperties.propertyNames"]


def test_holds_subschemas_goes_by_the_shape_of_the_value() -> None:
    assert holds_subschemas("properties", {}) and not holds_subschemas("properties", [])
    assert holds_subschemas("anyOf", []) and not holds_subschemas("anyOf", "not a list")
    assert holds_subschemas("items", True) and holds_subschemas("items", {})
    assert not holds_subschemas("enum", [])


def test_the_one_list_names_only_json_schema_keywords() -> None:
    assert SUBSCHEMA_KEYWORDS <= _SCHEMA_KEYWORDS


def _nested(levels: int, keyword: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        if keyword == "properties":
            schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
        elif keyword == "items":
            schema = {"type": "array", "items": schema}
        else:
            schema = {"anyOf": [schema, {"type": "integer"}]}
    return {"type": "object", "properties": {"x": schema}, "required": ["x"]}


def test_strict_mode_stops_below_its_depth_limit_of_properties_and_items() -> None:
    for keyword in ("properties", "items"):
        assert to_openai_strict(_nested(STRICT_MAX_DEPTH - 1, keyword)).compatible, keyword
        deep = to_openai_strict(_nested(STRICT_MAX_DEPTH, keyword))
        step = ".properties.a" if keyword == "properties" else ".items"
        assert [str(c) for c in deep.incompatible] == [
            f"properties.x{step * STRICT_MAX_DEPTH}: nested deeper than {STRICT_MAX_DEPTH} levels"], keyword
    # anyOf branches and $defs are the same level as their schema
    assert to_openai_strict(_nested(STRICT_MAX_DEPTH + 5, "anyOf")).compatible


def test_strict_changes_come_in_key_order_with_the_children_in_between() -> None:
    schema = {
        "type": "object",
        "x-first": 1,
        "properties": {"p": {"type": "string", "minLength": 1}, "q": {"oneOf": [{"type": "integer"}]}},
        "required": ["p"],
        "x-last": 2,
    }
    converted = to_openai_strict(schema)
    assert [str(change) for change in converted.changes] == [
        "parameters: x-first: 1 removed (not supported in strict mode)",
        "properties.p: minLength: 1 removed (not supported in strict mode)",
        "properties.q: oneOf became anyOf (strict mode has no oneOf)",
        "parameters: x-last: 2 removed (not supported in strict mode)",
        "parameters: additionalProperties: false added",
        "properties.q: optional: now required and nullable (null = not given)",
    ]
    assert converted.schema["properties"]["q"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_strict_merges_a_single_member_all_of_in_place() -> None:
    converted = to_openai_strict({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}}],
                                  "required": ["a"]})
    assert converted.compatible
    assert converted.schema == {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                                "additionalProperties": False}
    assert str(converted.changes[0]) == "parameters: single-member allOf merged into the schema"


def test_gemini_changes_come_in_order_ref_all_of_one_of_type_then_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/P", "description": "the p"}},
        "$defs": {"P": {"allOf": [{"required": ["a"]}], "oneOf": [{"type": "string"}],
                        "type": ["object", "null"], "format": "uri", "properties": {"a": {"const": 1}}}},
    }
    converted = to_gemini(schema)
    assert [str(change) for change in converted.changes] == [
        "properties.p: $ref '#/$defs/P' inlined",
        "properties.p: allOf merged into one schema",
        "properties.p: oneOf became anyOf (Gemini has no oneOf)",
        "properties.p: type [\"object\", \"null\"] became type 'object' + nullable",
        "properties.p: format 'uri' removed (not supported by Gemini)",
        "properties.p.properties.a: const 1 became enum [1]",
        "properties.p.properties.a: non-string enum moved into the description (Gemini enums are strings only)",
        "parameters: $defs inlined where referenced and removed",
    ]
    assert converted.schema["properties"]["p"] == {
        "type": "object", "description": "the p", "required": ["a"], "nullable": True,
        "properties": {"a": {"description": "Allowed values: 1."}}, "anyOf": [{"type": "string"}],
    }
