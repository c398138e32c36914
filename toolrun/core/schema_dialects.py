"""JSON-Schema dialects: a tool's schema rewritten for a provider that cannot take it as is.

- OpenAI strict mode (Structured Outputs): every object closed (``additionalProperties:
  false``), every property required, optional ones nullable, only a subset of keywords.
- Gemini ``parameters``: an OpenAPI 3.0 subset: no ``$ref``, ``additionalProperties``,
  ``const``, ``oneOf``, type arrays; ``nullable`` instead of ``"null"``; string enums only.

One walker (``SchemaWalker``) goes over a schema depth first, in key order; a dialect is a
subclass that fills its hooks: what a non-object schema becomes, what happens before a
node's keywords, to each keyword, and after them. Each conversion returns the new schema
and every change it made, with the schema path, so the export can tell the user and the
lint can point at the line. Input is never mutated.

Where a schema holds other schemas (``SUBSCHEMA_MAPS``, ``SUBSCHEMA_LISTS``,
``SUBSCHEMA_SINGLE``) is written down here once, for the whole package.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

JsonSchema = dict[str, Any]

# Keywords whose value holds schemas (draft 2020-12, plus draft 7's `definitions`), by the value's shape.
SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SUBSCHEMA_SINGLE = ("not", "if", "then", "else", "items", "contains", "additionalProperties",
                    "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
SUBSCHEMA_KEYWORDS = frozenset((*SUBSCHEMA_MAPS, *SUBSCHEMA_LISTS, *SUBSCHEMA_SINGLE))


def holds_subschemas(key: str, value: Any) -> bool:
    """Whether ``value`` has the shape the keyword ``key`` gives its schemas: a map, a list or one schema."""
    if key in SUBSCHEMA_MAPS:
        return isinstance(value, dict)
    if key in SUBSCHEMA_LISTS:
        return isinstance(value, list)
    return key in SUBSCHEMA_SINGLE


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


# ---------------------------------------------------------------- the walker


@dataclass(frozen=True)
class Place:
    """Where the walker stands: the dotted path, the nesting depth, the $refs being inlined around it."""

    path: str = ""
    depth: int = 0
    refs: tuple[str, ...] = ()

    def child(self, *keys: str, deeper: bool = False) -> Place:
        return Place(_join(self.path, *keys), self.depth + deeper, self.refs)


@dataclass
class SchemaNode:
    """One schema object being rewritten: what it says (``source``), where, and what it becomes."""

    source: JsonSchema
    place: Place
    result: JsonSchema = field(default_factory=dict)


@dataclass(frozen=True)
class Finished:
    """A hook's answer that ends a node: its result is ``schema``; the keywords left are not walked."""

    schema: Any


class SchemaWalker:
    """One walk over a JSON Schema, depth first and in key order; a dialect subclass fills the hooks.

    Left as is, it copies the schema. ``max_depth`` stops the walk below that many levels of
    the keywords in ``deeper``; ``too_deep`` says what such a node becomes.
    """

    max_depth: ClassVar[int | None] = None
    deeper: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self.changes: list[SchemaChange] = []
        self.incompatible: list[SchemaChange] = []

    def note(self, path: str, message: str, lossy: bool = False) -> None:
        self.changes.append(SchemaChange(path, message, lossy))

    def fail(self, path: str, message: str) -> None:
        self.incompatible.append(SchemaChange(path, message, lossy=True))

    def walk(self, schema: Any, place: Place) -> Any:
        """``schema`` rewritten by the hooks, with every change noted against ``place``."""
        if not isinstance(schema, dict):
            return self.not_an_object(schema, place)
        if self.max_depth is not None and place.depth > self.max_depth:
            return self.too_deep(schema, place)
        node = self.make_node(schema, place)
        finished = self.before(node)
        if finished is not None:
            return finished.schema
        for key, value in node.source.items():
            finished = self.keyword(node, key, value)
            if finished is not None:
                return finished.schema
        return self.after(node)

    def walk_subschemas(self, key: str, value: Any, place: Place) -> Any:
        """The value of ``key`` with each schema in it walked (``holds_subschemas(key, value)`` is true)."""
        deeper = key in self.deeper
        if key in SUBSCHEMA_MAPS:
            return {name: self.walk(sub, place.child(key, name, deeper=deeper)) for name, sub in value.items()}
        if key in SUBSCHEMA_LISTS:
            return [self.walk(sub, place.child(key, str(i), deeper=deeper)) for i, sub in enumerate(value)]
        return self.walk(value, place.child(key, deeper=deeper))

    # ---- hooks

    def not_an_object(self, schema: Any, place: Place) -> Any:
        """What a boolean (or malformed) schema becomes."""
        return schema

    def too_deep(self, schema: JsonSchema, place: Place) -> Any:
        """What a schema below ``max_depth`` becomes."""
        return schema

    def make_node(self, schema: JsonSchema, place: Place) -> SchemaNode:
        return SchemaNode(schema, place)

    def before(self, node: SchemaNode) -> Finished | None:
        """Before the keywords: may rewrite ``node.source`` and ``node.place``, or finish the node."""
        return None

    def keyword(self, node: SchemaNode, key: str, value: Any) -> Finished | None:
        """One keyword of ``node.source``: by default kept, its schemas walked."""
        node.result[key] = self.walk_subschemas(key, value, node.place) if holds_subschemas(key, value) \
            else copy.deepcopy(value)
        return None

    def after(self, node: SchemaNode) -> Any:
        """After the keywords: the node's result."""
        return node.result


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


class StrictWalker(SchemaWalker):
    """OpenAI strict mode: unsupported keywords dropped, objects closed, optional properties nullable."""

    max_depth = STRICT_MAX_DEPTH
    deeper = frozenset({"properties", "items"})
    walked = frozenset({"properties", "$defs", "definitions", "items", "anyOf"})  # the schema keywords kept

    def __init__(self) -> None:
        super().__init__()
        self.property_count = 0

    def not_an_object(self, schema: Any, place: Place) -> Any:
        if schema is True:  # `true` schema: any value, which strict mode cannot express
            self.fail(place.path, "accepts any value (`true`); strict mode needs a type")
        return schema

    def too_deep(self, schema: JsonSchema, place: Place) -> Any:
        self.fail(place.path, f"nested deeper than {STRICT_MAX_DEPTH} levels")
        return schema

    def keyword(self, node: SchemaNode, key: str, value: Any) -> Finished | None:
        path = node.place.path
        if key == "oneOf":
            self.note(path, "oneOf became anyOf (strict mode has no oneOf)", lossy=True)
            key = "anyOf"
        elif key == "allOf" and isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            self.note(path, "single-member allOf merged into the schema")
            return Finished(self.walk({**value[0], **{k: v for k, v in node.source.items() if k != "allOf"}}, node.place))
        elif self.dropped(key, value, path):  # a many-member allOf too: it is not a strict keyword
            return None
        descend = key in self.walked and holds_subschemas(key, value)
        node.result[key] = self.walk_subschemas(key, value, node.place) if descend else copy.deepcopy(value)
        return None

    def dropped(self, key: str, value: Any, path: str) -> bool:
        """Whether the keyword ``key`` is left out of the strict schema (and noted)."""
        if key == "$schema" and not path:
            self.note(path, "$schema removed")
        elif key in ("exclusiveMinimum", "exclusiveMaximum") and isinstance(value, bool):
            self.note(path, f"{key}: {_short(value)} removed (OpenAPI 3.0 form, not JSON Schema)")
        elif key not in STRICT_KEYWORDS:
            self.note(path, f"{key}: {_short(value)} removed (not supported in strict mode)", lossy=True)
        else:
            return False
        return True

    def after(self, node: SchemaNode) -> Any:
        result, path = node.result, node.place.path
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
            self.note(path, "additionalProperties: false added")
        properties = properties or {}
        self.property_count += len(properties)
        required = list(node.get("required", []))
        for name in properties:
            if name in required:
                continue
            required.append(name)
            properties[name] = _nullable(properties[name])
            self.note(_join(path, "properties", name), "optional: now required and nullable (null = not given)")
        if "properties" in node or "required" in node:
            node["required"] = required


def _nullable(node: Any) -> Any:
    """``node`` accepting null too, for an optional property that strict mode makes required."""
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
    walker = StrictWalker()
    result = walker.walk(schema, Place())
    if not isinstance(result, dict) or result.get("type") != "object":
        walker.fail("", "the root must be `type: object` in strict mode")
    if walker.property_count > STRICT_MAX_PROPERTIES:
        walker.fail("", f"more than {STRICT_MAX_PROPERTIES} properties in total")
    return ConvertedSchema(result, walker.changes, walker.incompatible)


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
# Past this many schema objects no $ref is inlined: a definition using another twice, forty deep, never ends.
GEMINI_MAX_SCHEMAS = 5000  # the largest of 23,000 real tools has 247
# Dropping these loses nothing a model needs to produce a valid call.
_GEMINI_QUIET_DROPS = frozenset({"$schema", "$id", "$comment", "$anchor", "deprecated", "readOnly", "writeOnly"})


@dataclass
class _GeminiNode(SchemaNode):
    """A schema object on its way to Gemini, with what is written into it after its keywords."""

    nullable: bool = False  # set by a "null" type, enum member or anyOf branch; written last
    enum_values: list[Any] | None = None  # from enum or const; written last, maybe into the description


_KeywordRule = Callable[["GeminiWalker", _GeminiNode, str, Any], bool]


class GeminiWalker(SchemaWalker):
    """Gemini's subset: $refs inlined, allOf merged, null spelt ``nullable``, unsupported keywords dropped."""

    def __init__(self, definitions: dict[str, Any]) -> None:
        super().__init__()
        self.definitions = definitions
        self.schemas_made = 0

    def not_an_object(self, schema: Any, place: Place) -> Any:
        self.note(place.path, f"boolean schema {_short(schema)} replaced by an unconstrained one", lossy=True)
        return {}

    def make_node(self, schema: JsonSchema, place: Place) -> SchemaNode:
        self.schemas_made += 1
        return _GeminiNode(dict(schema), place)

    def before(self, node: SchemaNode) -> Finished | None:
        assert isinstance(node, _GeminiNode)
        source, path = node.source, node.place.path
        if "$ref" in source:
            source = self.inline_ref(source, path, node.place.refs)
            if "$ref" in source:  # recursive or unresolvable: cut here
                return Finished({"type": "object", "description": source.get("description", "")})
            node.place = replace(node.place, refs=(*node.place.refs, source.pop("__ref__")))
        if "allOf" in source:
            source = self.merge_all_of(source, path)
        if "oneOf" in source:
            self.note(path, "oneOf became anyOf (Gemini has no oneOf)", lossy=True)
            source["anyOf"] = [*source.get("anyOf", []), *source.pop("oneOf")]
        node.source = source
        self.read_type(node)
        return None

    def read_type(self, node: _GeminiNode) -> None:
        """``type`` into the result: a list of types becomes one type or anyOf, ``"null"`` becomes nullable."""
        kind, path = node.source.get("type"), node.place.path
        if isinstance(kind, list):
            types = [t for t in kind if t != "null"]
            node.nullable = len(types) < len(kind)
            if len(types) == 1:
                node.result["type"] = types[0]
                self.note(path, f"type {_short(kind)} became type {types[0]!r} + nullable")
            elif types:
                node.result["anyOf"] = [{"type": t} for t in types]
                self.note(path, f"type {_short(kind)} became anyOf" + (" + nullable" if node.nullable else ""))
        elif kind == "null":
            node.nullable = True
            self.note(path, 'type "null" became nullable: true')
        elif kind is not None:
            node.result["type"] = kind

    def keyword(self, node: SchemaNode, key: str, value: Any) -> Finished | None:
        assert isinstance(node, _GeminiNode)
        rule = _GEMINI_RULES.get(key)
        if rule is not None and rule(self, node, key, value):
            return None
        if key in GEMINI_KEYWORDS:
            node.result[key] = copy.deepcopy(value)
        else:
            self.note(node.place.path, f"{key}: {_short(value)} removed (not supported by Gemini)", lossy=True)
        return None

    def after(self, node: SchemaNode) -> Any:
        assert isinstance(node, _GeminiNode)
        if node.enum_values is not None:  # after the keywords: it may write into the description
            self.set_enum(node.result, node.enum_values, node.place.path)
        if node.nullable:
            node.result["nullable"] = True
        return node.result

    # ---- one rule per keyword; True when the keyword is dealt with

    def _type(self, node: _GeminiNode, key: str, value: Any) -> bool:
        return True  # read before the other keywords

    def _const(self, node: _GeminiNode, key: str, value: Any) -> bool:
        node.enum_values = [value]
        self.note(node.place.path, f"const {_short(value)} became enum [{_short(value)}]")
        return True

    def _enum(self, node: _GeminiNode, key: str, value: Any) -> bool:
        if not isinstance(value, list):
            return False
        if None in value:
            node.nullable = True
            self.note(node.place.path, "null removed from enum, nullable: true instead")
        node.enum_values = [v for v in value if v is not None]
        return True

    def _properties(self, node: _GeminiNode, key: str, value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        node.result[key] = self.walk_subschemas(key, value, node.place)
        return True

    def _items(self, node: _GeminiNode, key: str, value: Any) -> bool:
        if isinstance(value, dict):
            node.result[key] = self.walk_subschemas(key, value, node.place)
        else:
            self.note(node.place.path, "items in tuple form removed", lossy=True)
        return True

    def _any_of(self, node: _GeminiNode, key: str, value: Any) -> bool:
        if not isinstance(value, list):
            return False
        branches = []
        for i, sub in enumerate(value):
            if isinstance(sub, dict) and sub.get("type") == "null" and len(sub) == 1:
                node.nullable = True
                self.note(node.place.path, 'anyOf member {"type": "null"} became nullable: true')
                continue
            branches.append(self.walk(sub, node.place.child("anyOf", str(i))))
        if len(branches) == 1 and not (set(branches[0]) & set(node.result)):
            node.result.update(branches[0])  # one branch left: it is the schema itself
        elif branches:
            node.result["anyOf"] = branches
        return True

    def _examples(self, node: _GeminiNode, key: str, value: Any) -> bool:
        if not (isinstance(value, list) and value):
            return False
        node.result["example"] = value[0]
        self.note(node.place.path, "examples became example (the first one)")
        return True

    def _format(self, node: _GeminiNode, key: str, value: Any) -> bool:
        kind_now = node.result.get("type")
        allowed = GEMINI_FORMATS.get(kind_now, set()) if isinstance(kind_now, str) else set()
        if value in allowed:
            node.result[key] = value
        else:
            self.note(node.place.path, f"format {value!r} removed (not supported by Gemini)")
        return True

    def _definitions(self, node: _GeminiNode, key: str, value: Any) -> bool:
        self.note(node.place.path, f"{key} inlined where referenced and removed")
        return True

    def _additional_properties(self, node: _GeminiNode, key: str, value: Any) -> bool:
        lossy = value not in (False, None)
        self.note(node.place.path, f"additionalProperties: {_short(value)} removed (not supported by Gemini)", lossy)
        return True

    def _quiet_drop(self, node: _GeminiNode, key: str, value: Any) -> bool:
        self.note(node.place.path, f"{key} removed")
        return True

    def _required(self, node: _GeminiNode, key: str, value: Any) -> bool:
        if not isinstance(value, list):
            return False
        node.result[key] = list(value)
        return True

    # ---- helpers

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
        if self.schemas_made > GEMINI_MAX_SCHEMAS:
            self.note(path, f"$ref {reference!r} not inlined: the schema has grown past {GEMINI_MAX_SCHEMAS} schemas "
                      "(definitions used many times over); replaced by an object", lossy=True)
            return {"$ref": reference, "description": node.get("description", "")}
        self.note(path, f"$ref {reference!r} inlined")
        definition = self.definitions[name]
        if not isinstance(definition, dict):  # `$defs: {never: false}`: the boolean schema, with the siblings
            definition = self.not_an_object(definition, Place(path))
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        # No copy: the walker never changes the nodes it reads, only the results it builds.
        return {**definition, **siblings, "__ref__": name}

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


_GEMINI_RULES: dict[str, _KeywordRule] = {
    "type": GeminiWalker._type,
    "const": GeminiWalker._const,
    "enum": GeminiWalker._enum,
    "properties": GeminiWalker._properties,
    "items": GeminiWalker._items,
    "anyOf": GeminiWalker._any_of,
    "examples": GeminiWalker._examples,
    "format": GeminiWalker._format,
    "$defs": GeminiWalker._definitions,
    "definitions": GeminiWalker._definitions,
    "additionalProperties": GeminiWalker._additional_properties,
    **{key: GeminiWalker._quiet_drop for key in _GEMINI_QUIET_DROPS},
    "required": GeminiWalker._required,
}


def to_gemini(schema: JsonSchema) -> ConvertedSchema:
    """``schema`` rewritten into Gemini's schema subset; ``schema`` is None for no parameters."""
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    walker = GeminiWalker(definitions)
    result = walker.walk(schema, Place())
    if not result.get("properties") and result.get("type") == "object":
        walker.note("", "no parameters: `parameters` omitted (Gemini rejects an object without properties)")
        return ConvertedSchema(None, walker.changes)
    return ConvertedSchema(result, walker.changes)
