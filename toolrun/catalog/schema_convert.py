"""Schema conversions for providers that cannot take a JSON Schema as is.

- OpenAI strict mode (Structured Outputs): every object closed (``additionalProperties:
  false``), every property required, optional ones nullable, only a subset of keywords.
- Gemini ``parameters``: an OpenAPI 3.0 subset: no ``$ref``, ``additionalProperties``,
  ``const``, ``oneOf``, type arrays; ``nullable`` instead of ``"null"``; string enums only.

Each conversion returns the new schema and every change it made, with the schema path, so
the export can tell the user and the lint can point at the line. Input is never mutated.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

JsonSchema = dict[str, Any]


@dataclass(frozen=True)
class SchemaChange:
    """One thing a conversion changed. ``lossy``: the result accepts or says something else."""

    path: str  # dotted, relative to the tool's parameters ("" is the root)
    message: str
    lossy: bool = False

    def __str__(self) -> str:
        return f"{self.path or 'parameters'}: {self.message}"


@dataclass
class ConvertedSchema:
    """A converted schema, what changed, and (strict mode) whether it could be converted."""

    schema: JsonSchema | None
    changes: list[SchemaChange] = field(default_factory=list)
    incompatible: list[SchemaChange] = field(default_factory=list)

    @property
    def compatible(self) -> bool:
        return not self.incompatible


def allows_null(schema: Any) -> bool:
    """Whether a JSON Schema accepts ``null``: by its type, its enum or an anyOf/oneOf branch.

    A boolean schema is itself the answer (``true`` accepts anything).
    """
    if not isinstance(schema, dict):
        return schema is True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    enum = schema.get("enum")
    if isinstance(enum, list) and None in enum:
        return True
    branches = [branch for key in ("anyOf", "oneOf") if isinstance(schema.get(key), list) for branch in schema[key]]
    return any(allows_null(branch) for branch in branches)


def _join(path: str, *keys: str) -> str:
    return ".".join(part for part in (path, *keys) if part)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- OpenAI strict mode

# Keywords Structured Outputs accepts (OpenAI function-calling guide, "Supported schemas").
STRICT_KEYWORDS = frozenset(
    {
        "type", "description", "title", "enum", "const", "anyOf", "$ref", "$defs", "definitions",
        "properties", "required", "additionalProperties", "items",
        "pattern", "format",
        "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
        "minItems", "maxItems",
    }
)  # fmt: skip
STRICT_MAX_DEPTH = 10
STRICT_MAX_PROPERTIES = 5000
STRICT_MAX_ENUM_VALUES = 1000


class _StrictConverter:
    def __init__(self) -> None:
        self.changes: list[SchemaChange] = []
        self.incompatible: list[SchemaChange] = []
        self.property_count = 0

    def fail(self, path: str, message: str) -> None:
        self.incompatible.append(SchemaChange(path, message, lossy=True))

    def convert(self, node: Any, path: str, depth: int) -> Any:
        if not isinstance(node, dict):
            if node is True:  # `true` schema: any value, which strict mode cannot express
                self.fail(path, "accepts any value (`true`); strict mode needs a type")
            return node
        if depth > STRICT_MAX_DEPTH:
            self.fail(path, f"nested deeper than {STRICT_MAX_DEPTH} levels")
            return node
        result: JsonSchema = {}
        for key, value in node.items():
            if key == "oneOf":
                self.changes.append(SchemaChange(path, "oneOf became anyOf (strict mode has no oneOf)", lossy=True))
                key = "anyOf"
            elif key == "allOf" and isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
                self.changes.append(SchemaChange(path, "single-member allOf merged into the schema"))
                merged = self.convert({**value[0], **{k: v for k, v in node.items() if k != "allOf"}}, path, depth)
                return merged
            elif key == "$schema" and not path:
                self.changes.append(SchemaChange(path, "$schema removed"))
                continue
            elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
                self.changes.append(SchemaChange(path, f"{key}: {_short(value)} removed (OpenAPI 3.0 form, not JSON Schema)"))
                continue
            elif key not in STRICT_KEYWORDS:
                self.changes.append(
                    SchemaChange(path, f"{key}: {_short(value)} removed (not supported in strict mode)", lossy=True)
                )
                continue
            if key == "allOf":
                self.fail(path, "allOf is not supported in strict mode")
                continue
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                result[key] = {
                    name: self.convert(sub, _join(path, key, name), depth + (key == "properties"))
                    for name, sub in value.items()
                }
            elif key == "items":
                result[key] = self.convert(value, _join(path, "items"), depth + 1)
            elif key == "anyOf" and isinstance(value, list):
                result[key] = [self.convert(sub, _join(path, "anyOf", str(i)), depth) for i, sub in enumerate(value)]
            else:
                result[key] = copy.deepcopy(value)
        if isinstance(result.get("enum"), list) and len(result["enum"]) > STRICT_MAX_ENUM_VALUES:
            self.fail(path, f"enum has more than {STRICT_MAX_ENUM_VALUES} values")
        if not any(k in result for k in ("type", "anyOf", "$ref", "enum", "const")):
            self.fail(path, "has no type; strict mode needs one on every schema")
        if _is_object(result):
            self.close_object(result, path)
        return result

    def close_object(self, node: JsonSchema, path: str) -> None:
        properties = node.get("properties")
        extra = node.get("additionalProperties")
        if extra not in (None, False):
            self.fail(path, "additionalProperties allows free-form keys; strict mode needs a closed object")
            return
        if not properties and path:
            self.fail(path, "object without properties (free-form); strict mode needs its keys listed")
            return
        if extra is None:
            node["additionalProperties"] = False
            self.changes.append(SchemaChange(path, "additionalProperties: false added"))
        properties = properties or {}
        self.property_count += len(properties)
        required = list(node.get("required", []))
        for name in properties:
            if name in required:
                continue
            required.append(name)
            properties[name] = self.make_nullable(properties[name], _join(path, "properties", name))
            self.changes.append(
                SchemaChange(_join(path, "properties", name), "optional: now required and nullable (null = not given)")
            )
        if "properties" in node or "required" in node:
            node["required"] = required

    def make_nullable(self, node: Any, path: str) -> Any:
        if not isinstance(node, dict):
            return node
        node = dict(node)
        kind = node.get("type")
        if isinstance(kind, str):
            if kind != "null":
                node["type"] = [kind, "null"]
        elif isinstance(kind, list):
            if "null" not in kind:
                node["type"] = [*kind, "null"]
        elif "anyOf" in node:
            if not any(isinstance(b, dict) and b.get("type") == "null" for b in node["anyOf"]):
                node["anyOf"] = [*node["anyOf"], {"type": "null"}]
            return node
        elif "$ref" in node:
            return {"anyOf": [node, {"type": "null"}]}
        if isinstance(node.get("enum"), list) and None not in node["enum"]:
            node["enum"] = [*node["enum"], None]
        if "const" in node:
            node["enum"] = [node.pop("const"), None]
        return node


def _is_object(node: JsonSchema) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def to_openai_strict(schema: JsonSchema) -> ConvertedSchema:
    """``schema`` rewritten for OpenAI strict mode; ``incompatible`` lists what prevents it."""
    converter = _StrictConverter()
    result = converter.convert(schema, "", 0)
    if not isinstance(result, dict) or result.get("type") != "object":
        converter.fail("", "the root must be `type: object` in strict mode")
    if converter.property_count > STRICT_MAX_PROPERTIES:
        converter.fail("", f"more than {STRICT_MAX_PROPERTIES} properties in total")
    return ConvertedSchema(result, converter.changes, converter.incompatible)


# ---------------------------------------------------------------- Gemini

# Fields of Gemini's Schema object (generativelanguage v1beta), in JSON Schema spelling.
GEMINI_KEYWORDS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "items",
        "properties", "required", "minProperties", "maxProperties", "propertyOrdering",
        "minItems", "maxItems", "minLength", "maxLength", "pattern",
        "minimum", "maximum", "default", "example", "anyOf",
    }
)  # fmt: skip
GEMINI_FORMATS = {"string": {"enum", "date-time"}, "integer": {"int32", "int64"}, "number": {"float", "double"}}
# Dropping these loses nothing a model needs to produce a valid call.
_GEMINI_QUIET_DROPS = frozenset({"$schema", "$id", "$comment", "$anchor", "deprecated", "readOnly", "writeOnly"})


class _GeminiConverter:
    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions = definitions
        self.changes: list[SchemaChange] = []

    def note(self, path: str, message: str, lossy: bool = False) -> None:
        self.changes.append(SchemaChange(path, message, lossy))

    def convert(self, node: Any, path: str, expanding: tuple[str, ...] = ()) -> JsonSchema:
        if not isinstance(node, dict):
            self.note(path, f"boolean schema {_short(node)} replaced by an unconstrained one", lossy=True)
            return {}
        node = dict(node)
        if "$ref" in node:
            node = self.inline_ref(node, path, expanding)
            if "$ref" in node:  # recursive: cut here
                return {"type": "object", "description": node.get("description", "")}
            expanding = (*expanding, node.pop("__ref__"))
        if "allOf" in node:
            node = self.merge_all_of(node, path)
        if "oneOf" in node:
            self.note(path, "oneOf became anyOf (Gemini has no oneOf)", lossy=True)
            node["anyOf"] = [*node.get("anyOf", []), *node.pop("oneOf")]
        result: JsonSchema = {}
        nullable = False
        enum_values: list[Any] | None = None
        kind = node.get("type")
        if isinstance(kind, list):
            types = [t for t in kind if t != "null"]
            nullable = len(types) < len(kind)
            if len(types) == 1:
                result["type"] = types[0]
                self.note(path, f"type {_short(kind)} became type {types[0]!r} + nullable")
            elif types:
                result["anyOf"] = [{"type": t} for t in types]
                self.note(path, f"type {_short(kind)} became anyOf" + (" + nullable" if nullable else ""))
        elif kind == "null":
            nullable = True
            self.note(path, 'type "null" became nullable: true')
        elif kind is not None:
            result["type"] = kind
        for key, value in node.items():
            if key == "type":
                continue
            if key == "const":
                enum_values = [value]
                self.note(path, f"const {_short(value)} became enum [{_short(value)}]")
            elif key == "enum" and isinstance(value, list):
                if None in value:
                    nullable = True
                    self.note(path, "null removed from enum, nullable: true instead")
                enum_values = [v for v in value if v is not None]
            elif key == "properties" and isinstance(value, dict):
                result[key] = {
                    name: self.convert(sub, _join(path, "properties", name), expanding) for name, sub in value.items()
                }
            elif key == "items":
                if isinstance(value, dict):
                    result[key] = self.convert(value, _join(path, "items"), expanding)
                else:
                    self.note(path, "items in tuple form removed", lossy=True)
            elif key == "anyOf" and isinstance(value, list):
                branches = []
                for i, sub in enumerate(value):
                    if isinstance(sub, dict) and sub.get("type") == "null" and len(sub) == 1:
                        nullable = True
                        self.note(path, 'anyOf member {"type": "null"} became nullable: true')
                        continue
                    branches.append(self.convert(sub, _join(path, "anyOf", str(i)), expanding))
                if len(branches) == 1 and not (set(branches[0]) & set(result)):
                    result.update(branches[0])  # one branch left: it is the schema itself
                elif branches:
                    result["anyOf"] = branches
            elif key == "examples" and isinstance(value, list) and value:
                result["example"] = value[0]
                self.note(path, "examples became example (the first one)")
            elif key == "format":
                kind_now = result.get("type")
                allowed = GEMINI_FORMATS.get(kind_now, set()) if isinstance(kind_now, str) else set()
                if value in allowed:
                    result[key] = value
                else:
                    self.note(path, f"format {value!r} removed (not supported by Gemini)")
            elif key in ("$defs", "definitions"):
                self.note(path, f"{key} inlined where referenced and removed")
            elif key == "additionalProperties":
                lossy = value not in (False, None)
                self.note(path, f"additionalProperties: {_short(value)} removed (not supported by Gemini)", lossy)
            elif key in _GEMINI_QUIET_DROPS:
                self.note(path, f"{key} removed")
            elif key == "required" and isinstance(value, list):
                result[key] = list(value)
            elif key in GEMINI_KEYWORDS:
                result[key] = copy.deepcopy(value)
            else:
                self.note(path, f"{key}: {_short(value)} removed (not supported by Gemini)", lossy=True)
        if enum_values is not None:  # after the loop: it may write into the description
            self.set_enum(result, enum_values, path)
        if nullable:
            result["nullable"] = True
        return result

    def set_enum(self, result: JsonSchema, values: list[Any], path: str) -> None:
        if all(isinstance(v, str) for v in values):
            result["enum"] = values
            result.setdefault("type", "string")
            return
        listed = ", ".join(_short(v) for v in values)
        described = result.get("description", "")
        result["description"] = f"{described} Allowed values: {listed}.".strip()
        self.note(path, "non-string enum moved into the description (Gemini enums are strings only)", lossy=True)

    def inline_ref(self, node: JsonSchema, path: str, expanding: tuple[str, ...]) -> JsonSchema:
        reference = node["$ref"]
        name = reference.rsplit("/", 1)[-1]
        if not reference.startswith(("#/$defs/", "#/definitions/")) or name not in self.definitions:
            self.note(path, f"$ref {reference!r} cannot be resolved; replaced by an object", lossy=True)
            return {"$ref": reference, "description": node.get("description", "")}
        if name in expanding:
            self.note(path, f"recursive $ref {reference!r} cut off here (Gemini has no $ref)", lossy=True)
            return {"$ref": reference, "description": node.get("description", name)}
        self.note(path, f"$ref {reference!r} inlined")
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        # No copy: convert() never changes the nodes it reads, only the results it builds.
        return {**self.definitions[name], **siblings, "__ref__": name}

    def merge_all_of(self, node: JsonSchema, path: str) -> JsonSchema:
        members = node.pop("allOf")
        merged: JsonSchema = dict(node)
        for member in members:
            if not isinstance(member, dict):
                continue
            for key, value in member.items():
                if key == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required":
                    merged["required"] = [*merged.get("required", []), *value]
                else:
                    merged.setdefault(key, value)
        self.note(path, "allOf merged into one schema", lossy=len(members) > 1)
        return merged


def to_gemini(schema: JsonSchema) -> ConvertedSchema:
    """``schema`` rewritten into Gemini's schema subset; ``schema`` is None for no parameters."""
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    converter = _GeminiConverter(definitions)
    result = converter.convert(schema, "")
    if not result.get("properties") and result.get("type") == "object":
        converter.note("", "no parameters: `parameters` omitted (Gemini rejects an object without properties)")
        return ConvertedSchema(None, converter.changes)
    return ConvertedSchema(result, converter.changes)
