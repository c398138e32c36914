"""schema_dialects: the one walker over a schema, and the order and limits of its two dialects.

The conversions' results on real tools are tested in test_export.py; here: what the walker
visits and in which order, what each dialect notes in which order (the export prints it and
the lint points at the first), the depth limit of strict mode, the limits of Gemini's $ref inlining,
and properties over random schemas.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli.test_cli_recipe import toolrun_in_process
from tests.property_budget import property_examples
from toolrun.catalog.parameter_checks import _SCHEMA_KEYWORDS
from toolrun.core.schema_dialects import (
    GEMINI_KEYWORDS,
    GEMINI_MAX_SCHEMAS,
    STRICT_MAX_DEPTH,
    SUBSCHEMA_KEYWORDS,
    Place,
    SchemaNode,
    SchemaWalker,
    holds_subschemas,
    to_gemini,
    to_openai_strict,
)

EXAMPLES = property_examples(80)


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


# ---------------------------------------------------------------- Gemini's $ref inlining: its limits


def test_gemini_takes_a_boolean_definition_as_the_schema_it_is(tmp_path: Path) -> None:
    # `$defs: {never: false}` is valid JSON Schema: it loads, and lint and export must not trip on it.
    parameters = {"type": "object", "properties": {"a": {"$ref": "#/$defs/never", "description": "never given"}},
                  "$defs": {"never": False}}
    converted = to_gemini(parameters)
    assert converted.schema is not None and converted.schema["properties"]["a"] == {"description": "never given"}
    assert "properties.a: boolean schema false replaced by an unconstrained one" in map(str, converted.changes)
    folder = tmp_path / "tools.d"
    folder.mkdir()
    (folder / "t.yaml").write_text(json.dumps({
        "name": "nothing_tool", "parameters": parameters, "backend": {"python": "json:dumps"},
        "description": "Takes a value that can never be given. Use it when testing boolean definitions only."}))
    for command in (["tools", "lint"], ["tools", "export", "--format", "gemini"]):  # in-process: an exception is raised
        run = toolrun_in_process(*command, "--tools-dir", str(folder))
        assert "Traceback" not in run.stderr and "internal error" not in run.stderr, (command, run.stderr[-500:])
        assert run.returncode in (0, 1), (command, run.stderr[-500:])  # 1: lint's findings; a bug also exits 1


def _doubling(levels: int) -> dict[str, Any]:
    """Parameters whose definitions each use the next one twice: 2**levels copies once inlined."""
    definitions: dict[str, Any] = {
        f"d{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"}, "b": {"$ref": f"#/$defs/d{i + 1}"}}}
        for i in range(levels)
    }
    definitions[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": definitions}


def test_gemini_stops_inlining_when_references_multiply() -> None:
    # 16 levels: 131,072 copies; 60 levels, a few lines of YAML, would never finish.
    converted = to_gemini(_doubling(16))
    # past the limit only the cut references are added: at most two per level still open
    assert len(_schema_objects(converted.schema)) <= GEMINI_MAX_SCHEMAS + 2 * 16
    cut = [change for change in converted.changes if "not inlined" in change.message]
    assert cut and all(change.lossy for change in cut)
    assert str(cut[0]).endswith(f"not inlined: the schema has grown past {GEMINI_MAX_SCHEMAS} schemas "
                                "(definitions used many times over); replaced by an object")
    small = to_gemini(_doubling(6))  # 127 schemas: all inlined
    assert not [change for change in small.changes if "not inlined" in change.message]
    assert len(_schema_objects(small.schema)) == 2 ** 7


def _schema_objects(schema: Any) -> list[dict[str, Any]]:
    """Every schema object of a Gemini result (properties, items, anyOf: all it keeps)."""
    found, stack = [], [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.append(node)
            stack.extend((node.get("properties") or {}).values())
            stack.extend([node["items"]] if "items" in node else [])
            stack.extend(node.get("anyOf", []))
    return found


# ---------------------------------------------------------------- properties over random schemas

_names = st.sampled_from(["a", "b", "c"])
_leaves = st.one_of(
    st.booleans(),
    st.fixed_dictionaries({"type": st.sampled_from(["string", "integer", "number", "boolean", "null"])},
                          optional={"enum": st.lists(st.one_of(st.none(), st.text(max_size=3), st.integers()),
                                                     max_size=3),
                                    "description": st.text(max_size=5), "format": st.sampled_from(["date", "int32"]),
                                    "minLength": st.integers(0, 3), "const": st.integers(0, 2)}),
    st.fixed_dictionaries({"$ref": st.sampled_from(["#/$defs/a", "#/$defs/b", "#/definitions/c", "#/nowhere"])}),
)


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(_names, children, max_size=3)},
                              optional={"required": st.lists(_names, max_size=2, unique=True),
                                        "additionalProperties": st.one_of(st.booleans(), children)}),
        st.fixed_dictionaries({"type": st.just("array"), "items": children}),
        st.sampled_from(["anyOf", "oneOf", "allOf"]).flatmap(
            lambda key: st.fixed_dictionaries({key: st.lists(children, min_size=1, max_size=3)})),
    )


_schemas = st.recursive(_leaves, _compound, max_leaves=10)
_parameters = st.fixed_dictionaries(
    {"type": st.just("object"), "properties": st.dictionaries(_names, _schemas, max_size=3)},
    optional={"$defs": st.dictionaries(_names, _schemas, max_size=2)},
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(_parameters)
def test_conversions_leave_their_input_alone_and_gemini_keeps_to_its_subset(schema: dict[str, Any]) -> None:
    before = copy.deepcopy(schema)
    gemini, strict = to_gemini(schema), to_openai_strict(schema)
    assert schema == before
    assert to_gemini(schema) == gemini and to_openai_strict(schema) == strict
    for node in _schema_objects(gemini.schema):
        assert set(node) <= GEMINI_KEYWORDS
        assert not isinstance(node.get("type"), list) and node.get("type") != "null"
        assert all(isinstance(value, str) for value in node.get("enum", []))
