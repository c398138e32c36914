"""Exports against the official schemas (OpenAI's OpenAPI document, MCP's JSON Schema), and the
schema conversions for OpenAI strict mode and Gemini, on our tools and on 288 real ones."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.openapi_schemas import openapi_components, validate_against
from toolrun.core.messages import Message, ModelRequest, TextPart
from toolrun.core.schema_dialects import GEMINI_KEYWORDS, STRICT_KEYWORDS, to_gemini, to_openai_strict
from toolrun.core.tool import Annotations, BackendSpec, SourceLocation, Tool
from toolrun.export import FORMATS, PROVIDER_FORMATS, export_catalog, export_tool, tools_payload
from toolrun.providers import anthropic, gemini, openai_chat, openai_responses

ROOT = Path(__file__).resolve().parent.parent
MCP_SCHEMA = ROOT / "tests" / "fixtures" / "specs" / "mcp-2025-11-25.schema.json"


def make_tool(parameters: dict[str, Any], annotations: Annotations | None = None, name: str = "get_flower_inventory") -> Tool:
    return Tool(
        name=name,
        description="Returns the flower stock of one city. Use it for stock questions, not for prices.",
        parameters=parameters,
        backend=BackendSpec("python", {"function": "flowers.py:get"}),
        source=SourceLocation(Path("tools.d/flowers.yaml"), 1),
        annotations=annotations,
    )


FLOWERS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["北京", "上海", "深圳"], "description": "City name"},
        "limit": {"type": "integer", "minimum": 1, "description": "How many kinds to return"},
    },
    "required": ["city"],
}


@lru_cache(maxsize=1)
def openapi_tools() -> list[Tool]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from openapi_tools import load_spec, operation_tools

    return operation_tools(load_spec())


@lru_cache(maxsize=1)
def mcp_document() -> dict[str, Any]:
    return json.loads(MCP_SCHEMA.read_text())


def mcp_errors(definition_name: str, instance: Any) -> list[str]:
    document = mcp_document()
    resource = Resource.from_contents(document)
    registry = Registry().with_resource("urn:mcp", resource)
    validator = Draft202012Validator({"$ref": f"urn:mcp#/$defs/{definition_name}"}, registry=registry)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(instance)]


def official_keys(schema_name: str) -> set[str]:
    return set(openapi_components()["schemas"][schema_name]["properties"])


def walk(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema of ``schema`` with its path."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in ("properties", "$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            yield from walk(sub, f"{path}.{key}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}.items")
    for key in ("anyOf", "oneOf", "allOf"):
        for index, sub in enumerate(schema.get(key) or []):
            yield from walk(sub, f"{path}.{key}.{index}")


# ---- the official schemas


def test_openai_export_is_a_chat_completion_tool() -> None:
    definition = export_tool(make_tool(FLOWERS), "openai").definition
    assert validate_against("ChatCompletionTool", definition) == []
    assert set(definition) <= official_keys("ChatCompletionTool")
    assert set(definition["function"]) <= official_keys("FunctionObject")
    assert definition["function"]["parameters"] == FLOWERS
    assert "strict" not in definition["function"]


def test_openai_strict_export_is_valid_and_says_what_changed() -> None:
    exported = export_tool(make_tool(FLOWERS), "openai", strict=True)
    function = exported.definition["function"]
    assert validate_against("ChatCompletionTool", exported.definition) == []
    assert function["strict"] is True
    assert function["parameters"]["required"] == ["city", "limit"]
    assert function["parameters"]["properties"]["limit"]["type"] == ["integer", "null"]
    assert function["parameters"]["additionalProperties"] is False
    assert any("limit" in change and "nullable" in change for change in exported.changes)


def test_responses_export_is_a_function_tool_with_explicit_strict() -> None:
    plain = export_tool(make_tool(FLOWERS), "openai-responses").definition
    strict = export_tool(make_tool(FLOWERS), "openai-responses", strict=True).definition
    for definition in (plain, strict):
        assert validate_against("FunctionTool", definition) == []
        assert set(definition) <= official_keys("FunctionTool")
        assert definition["type"] == "function" and definition["name"] == "get_flower_inventory"
    assert plain["strict"] is False  # Responses treats a missing strict as true
    assert strict["strict"] is True


def test_responses_export_falls_back_to_strict_false_and_says_why() -> None:
    free_form = {"type": "object", "properties": {"labels": {"type": "object", "description": "Any labels"}}}
    exported = export_tool(make_tool(free_form), "openai-responses", strict=True)
    assert exported.definition["strict"] is False
    assert exported.definition["parameters"] == free_form
    assert any("cannot be made strict" in change for change in exported.changes)


def test_mcp_export_is_a_tool_and_the_catalog_a_list_tools_result() -> None:
    annotations = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False, title="Flower stock")
    tools = [make_tool(FLOWERS, annotations), make_tool({"type": "object", "properties": {}}, name="ping")]
    exported = export_catalog(tools, "mcp")
    first = exported[0].definition
    assert mcp_errors("Tool", first) == []
    assert first["title"] == "Flower stock"
    assert first["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
        "title": "Flower stock",
    }
    assert "annotations" not in exported[1].definition  # no hints invented
    assert set(first) <= set(mcp_document()["$defs"]["Tool"]["properties"])
    payload = tools_payload([item.definition for item in exported], "mcp")
    assert mcp_errors("ListToolsResult", payload) == []


def test_mcp_schema_check_can_fail() -> None:
    assert mcp_errors("Tool", {"name": "x", "inputSchema": {"type": "array"}}) != []


def test_anthropic_and_gemini_shapes() -> None:
    anthropic = export_tool(make_tool(FLOWERS), "anthropic").definition
    assert anthropic == {"name": "get_flower_inventory", "description": anthropic["description"], "input_schema": FLOWERS}
    gemini = export_tool(make_tool(FLOWERS), "gemini").definition
    assert set(gemini) == {"name", "description", "parameters"}
    assert tools_payload([gemini], "gemini") == [{"functionDeclarations": [gemini]}]


def test_what_each_adapter_sends_is_the_export() -> None:
    tool = make_tool(FLOWERS)
    request = ModelRequest("m", None, [Message("user", [TextPart("q")])], [tool.definition()])
    builders = {"openai": openai_chat.build_request_body, "openai-responses": openai_responses.build_request_body,
                "anthropic": anthropic.build_request_body, "gemini": gemini.build_request_body}
    assert set(builders) == set(PROVIDER_FORMATS)
    for format, build in builders.items():
        sent = build(request, stream=False)["tools"]
        assert sent == tools_payload([export_tool(tool, format).definition], format), format


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown export format"):
        export_tool(make_tool(FLOWERS), "openai-chat")


def test_export_keeps_chinese_and_does_not_touch_the_tool() -> None:
    tool = make_tool(FLOWERS)
    before = json.dumps(tool.parameters, sort_keys=True)
    for format in FORMATS:
        export_tool(tool, format, strict=True)
    assert json.dumps(tool.parameters, sort_keys=True) == before
    assert "北京" in json.dumps(export_tool(tool, "gemini").definition, ensure_ascii=False)


# ---- 288 real tools


def test_every_openapi_operation_exports_valid_openai_and_responses_definitions() -> None:
    for tool in openapi_tools():
        for strict in (False, True):
            chat = export_tool(tool, "openai", strict=strict).definition
            assert validate_against("ChatCompletionTool", chat) == [], tool.name
            responses = export_tool(tool, "openai-responses", strict=strict).definition
            assert validate_against("FunctionTool", responses) == [], tool.name
            if strict and chat["function"]["strict"]:
                Draft202012Validator.check_schema(chat["function"]["parameters"])


def test_every_openapi_operation_exports_a_valid_mcp_catalog() -> None:
    exported = export_catalog(openapi_tools(), "mcp")
    assert mcp_errors("ListToolsResult", tools_payload([e.definition for e in exported], "mcp")) == []


def test_strict_conversions_of_real_schemas_follow_the_strict_rules() -> None:
    strict_count = 0
    for tool in openapi_tools():
        converted = to_openai_strict(tool.parameters)
        if not converted.compatible:
            continue
        strict_count += 1
        for path, node in walk(converted.schema):
            assert set(node) <= STRICT_KEYWORDS, (tool.name, path, set(node) - STRICT_KEYWORDS)
            if node.get("type") == "object" or "properties" in node:
                assert node.get("additionalProperties") is False, (tool.name, path)
                assert sorted(node.get("required", [])) == sorted(node.get("properties", {})), (tool.name, path)
    assert strict_count > 200  # most real schemas can be made strict


def test_gemini_conversions_of_real_schemas_use_only_the_subset() -> None:
    for tool in openapi_tools():
        converted = to_gemini(tool.parameters)
        if converted.schema is None:
            continue
        for path, node in walk(converted.schema):
            assert set(node) <= GEMINI_KEYWORDS, (tool.name, path, set(node) - GEMINI_KEYWORDS)
            assert not isinstance(node.get("type"), list), (tool.name, path)
            assert all(isinstance(value, str) for value in node.get("enum", [])), (tool.name, path)


# ---- conversions in detail


def test_a_strict_schema_takes_null_for_what_was_optional() -> None:
    strict_schema = to_openai_strict(FLOWERS).schema
    from_model = {"city": "北京", "limit": None}  # what a strict model sends for "not given"
    assert list(Draft202012Validator(strict_schema).iter_errors(from_model)) == []


def test_strict_nullable_enum_and_ref() -> None:
    schema = {
        "type": "object",
        "properties": {
            "color": {"type": "string", "enum": ["red", "blue"]},
            "where": {"$ref": "#/$defs/place"},
        },
        "$defs": {"place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
    }
    converted = to_openai_strict(schema)
    assert converted.compatible
    assert converted.schema["properties"]["color"]["enum"] == ["red", "blue", None]
    assert converted.schema["properties"]["where"] == {"anyOf": [{"$ref": "#/$defs/place"}, {"type": "null"}]}
    assert converted.schema["$defs"]["place"]["additionalProperties"] is False
    validator = Draft202012Validator(converted.schema)
    assert validator.is_valid({"color": None, "where": {"city": "北京"}})
    assert not validator.is_valid({"color": "green", "where": None})


def test_strict_removes_unsupported_keywords_and_reports_them() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "minLength": 2, "default": "x"}}, "required": ["name"]}
    converted = to_openai_strict(schema)
    assert converted.schema["properties"]["name"] == {"type": "string"}
    messages = [str(change) for change in converted.changes]
    assert any("minLength" in m for m in messages) and any("default" in m for m in messages)


def test_gemini_conversion_details() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "city": {"type": ["string", "null"], "description": "City"},
            "kind": {"const": "rose"},
            "size": {"enum": [1, 2, 3], "type": "integer", "description": "Size"},
            "when": {"oneOf": [{"type": "string", "format": "date"}, {"type": "integer"}]},
            "where": {"$ref": "#/$defs/place"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "$defs": {"place": {"type": "object", "properties": {"zip": {"type": "string"}}}},
    }
    converted = to_gemini(schema)
    properties = converted.schema["properties"]
    assert "$schema" not in converted.schema and "additionalProperties" not in converted.schema
    assert "$defs" not in converted.schema
    assert properties["city"] == {"type": "string", "description": "City", "nullable": True}
    assert properties["kind"] == {"enum": ["rose"], "type": "string"}
    assert properties["size"] == {"type": "integer", "description": "Size Allowed values: 1, 2, 3."}
    assert properties["when"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert properties["where"] == {"type": "object", "properties": {"zip": {"type": "string"}}}
    assert properties["note"] == {"type": "string", "nullable": True}
    text = " | ".join(str(change) for change in converted.changes)
    for expected in ("oneOf became anyOf", "const", "$ref", "non-string enum", "format 'date' removed"):
        assert expected in text


def test_gemini_cuts_recursive_refs_and_omits_empty_parameters() -> None:
    tree = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/node"}},
        "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
    }
    converted = to_gemini(tree)
    assert converted.schema["properties"]["node"]["properties"]["child"]["type"] == "object"
    assert any("recursive" in str(change) and change.lossy for change in converted.changes)
    empty = export_tool(make_tool({"type": "object", "properties": {}}), "gemini")
    assert "parameters" not in empty.definition
    assert any("parameters` omitted" in change for change in empty.changes)


def test_strict_export_of_a_tool_without_parameters() -> None:
    exported = export_tool(make_tool({"type": "object", "properties": {}}), "openai", strict=True)
    function = exported.definition["function"]
    assert function["strict"] is True
    assert function["parameters"] == {"type": "object", "properties": {}, "additionalProperties": False, "required": []}
    assert validate_against("ChatCompletionTool", exported.definition) == []


def test_gemini_conversion_leaves_the_tool_schema_untouched() -> None:
    # $refs are inlined without copying the definitions: the converter must only read them.
    import copy

    from toolrun.core.schema_dialects import to_gemini

    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/A", "description": "b"}},
        "$defs": {"A": {"allOf": [{"properties": {"x": {"type": "string"}}, "required": ["x"]}],
                        "oneOf": [{"type": "object"}, {"type": "null"}], "enum": [{"k": 1}, None]}},
    }
    before = copy.deepcopy(schema)
    first = to_gemini(schema).schema
    assert schema == before and to_gemini(schema).schema == first
