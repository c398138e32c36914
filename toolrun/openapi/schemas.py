"""OpenAPI schemas -> self-contained JSON Schema (draft 2020-12) for a tool's arguments.

``$ref``s are followed (inside the document, to files beside it, to URLs) and inlined;
a schema that refers to itself is cut where it recurs, and nesting stops after
``MAX_REF_DEPTH`` references, so no document loops and none explodes. OpenAPI's own
dialect is translated: ``nullable: true`` becomes a type with ``null``, 3.0's boolean
``exclusiveMinimum`` a number, Swagger 2.0's ``type: file`` is reported. Keywords a model
does not need (examples, xml, discriminator, vendor extensions) are dropped, and so are
``readOnly`` properties: the server sets those, the caller does not send them.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from toolrun.core.schema_dialects import SUBSCHEMA_LISTS as _SUBSCHEMA_LISTS  # what _KEPT leaves of them is walked
from toolrun.core.schema_dialects import SUBSCHEMA_SINGLE as _SUBSCHEMA
from toolrun.openapi.document import Documents, OpenAPIError, RefusedFetch, is_url, join_location, url_scheme
from toolrun.openapi.references import EXTERNAL_FLAG, ReferenceRules
from toolrun.openapi.text import clean_description

MAX_REF_DEPTH = 3  # deep enough for realistic bodies; OpenAI's document stays under 1 MB of YAML
MAX_SCHEMA_CHARS = 12_000  # ~3,000 tokens of JSON: past this, nesting is cut shallower
# What one import may expand, in schema nodes and listed values: GitHub's 13 MB document needs ~11,400,
# a few KB of schemas that refer to each other 80 times over would need hundreds of millions.
MAX_EXPANDED_NODES = 200_000
# A schema still this large with its $refs cut shallowest (YAML aliases expand without any $ref): not a tool definition.
MAX_TOOL_SCHEMA_CHARS = 4 * MAX_SCHEMA_CHARS
# What one import may write of schemas, a shared one counted each time it is written: GitHub's needs ~920,000.
# Each character costs the lint that reads the file back; 1,500 operations sharing an 11 KB body wrote 16 MB.
MAX_WRITTEN_SCHEMA_CHARS = 8_000_000
JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_KEPT = frozenset(
    "type enum const default format title description properties required items prefixItems additionalProperties "
    "patternProperties propertyNames allOf anyOf oneOf not minimum maximum exclusiveMinimum exclusiveMaximum "
    "multipleOf minLength maxLength pattern minItems maxItems uniqueItems contains minProperties maxProperties "
    "dependentRequired".split()
)
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COUNT_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
# What a keyword's value must be for JSON Schema; a document that says otherwise (`enum: abc`,
# `required: true` on a property) loses that keyword, not the operation. Numbers are checked in _dialect.
_SHAPES: dict[str, type | tuple[type, ...]] = {
    "properties": dict, "patternProperties": dict, "dependentRequired": dict, "enum": list, "required": list,
    "format": str, "pattern": str, "uniqueItems": bool, "type": (str, list),
    **{keyword: (dict, bool) for keyword in _SUBSCHEMA}, **{keyword: list for keyword in _SUBSCHEMA_LISTS},
}
_MERGEABLE = frozenset({"type", "properties", "required", "description", "title", "additionalProperties"})


class RefusedReference(OpenAPIError):
    """A ``$ref`` to a place the document may not make the import read: the import stops."""


class DanglingRef(Exception):
    """A ``$ref`` that points nowhere; the message names it."""


class OversizedSchema(Exception):
    """A schema past MAX_TOOL_SCHEMA_CHARS even with its $refs cut shallowest: its operation is skipped."""


class _Oversized(Exception):
    """One attempt at a schema already holds more than MAX_SCHEMA_CHARS: try shallower nesting."""


def too_many_expansions(root: str) -> OpenAPIError:
    """The error for a document whose ``$ref``s expand past MAX_EXPANDED_NODES."""
    return OpenAPIError(f"the document's $refs expand to more than {MAX_EXPANDED_NODES:,} schema nodes "
                        "(schemas that refer to each other many times over)",
                        "import a part of it with --include/--tag, or inline the shared schemas", root)


class FileUpload(Exception):
    """A schema of Swagger 2.0's ``type: file``: a file upload, which a JSON tool cannot send."""


@dataclass
class Resolver:
    """Follows ``$ref``s across the documents of one import."""

    documents: Documents
    root: str  # location of the main document
    rules: ReferenceRules
    dangling: list[str] = field(default_factory=list)  # broken $refs met inside schemas, since the last look
    expanded: int = 0  # schema nodes and listed values converted so far, against MAX_EXPANDED_NODES
    written: int = 0  # characters of schemas handed out so far, against MAX_WRITTEN_SCHEMA_CHARS
    _cache: dict[tuple[str, str], tuple[Any, list[str], int]] = field(default_factory=dict)

    def follow(self, node: Any, base: str) -> tuple[Any, str]:
        """``node`` with its ``$ref`` chain followed (siblings of the last $ref kept), and the location it lives in."""
        seen: set[tuple[str, str]] = set()
        siblings: dict[str, Any] = {}
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            reference = node["$ref"]
            siblings = {**{k: v for k, v in node.items() if k != "$ref"}, **siblings}
            base, pointer = self._split(reference, base)
            if (base, pointer) in seen:
                raise DanglingRef(f"$ref {reference!r} refers to itself")
            seen.add((base, pointer))
            node = self._target(base, pointer, reference)
        if siblings and isinstance(node, dict):
            node = {**node, **siblings}
        return node, base

    def ref_key(self, node: Any, base: str) -> tuple[str, str] | None:
        """Where a ``$ref`` node points (location, pointer), or None for a node without one."""
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            return self._split(node["$ref"], base)
        return None

    def _split(self, reference: str, base: str) -> tuple[str, str]:
        location, _, pointer = reference.partition("#")
        return (join_location(base, location) if location else base), pointer

    def _target(self, location: str, pointer: str, reference: str) -> Any:
        if location not in self.documents.cache:
            self._check(location, reference)
        try:
            node = self.documents.load(location, lambda url: self.rules.refusal(url, is_url=True))
        except RefusedFetch as exc:
            raise RefusedReference(f"$ref {reference!r} is refused: {exc.problems[0].message}",
                                   f"if you trust the document, import again with {EXTERNAL_FLAG}", self.root) from None
        except OpenAPIError as exc:
            problem = exc.problems[0]  # where and what, without the fix meant for the document named on the command line
            raise DanglingRef(f"$ref {reference!r} cannot be read: {replace(problem, fix=None)}") from None
        for part in [p for p in pointer.split("/") if p != ""]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise DanglingRef(f"$ref {reference!r} points to nothing")
        return node

    def _check(self, location: str, reference: str) -> None:
        """Refuse, for the whole import, a $ref to a place the document may not make us read."""
        url = is_url(location)
        why: str | None
        if not url and (url_scheme(reference.partition("#")[0]) or Path(unquote(reference)).is_absolute()):
            scheme = url_scheme(reference)
            why = "an absolute file path" if scheme in ("", "file") else f"a {scheme}: URL, never read"
        else:
            why = self.rules.refusal(location, is_url=url)
        if why is None or (self.rules.allow_external and "never" not in why):
            return
        fix = ("nothing reads it" if "never" in why
               else f"if you trust the document, import again with {EXTERNAL_FLAG}")
        raise RefusedReference(f"$ref {reference!r} is refused: {why}", fix, self.root)

    def schema(self, node: Any, base: str) -> Any:
        """``node`` as a self-contained JSON Schema (see the module's docstring).

        Nesting stops after MAX_REF_DEPTH references, or fewer when the schema would
        otherwise outgrow MAX_SCHEMA_CHARS: a tool definition of tens of thousands of
        tokens helps no model, and a document of 2,000 operations stays a file one can load.
        """
        key = self.ref_key(node, base)
        if key is not None and key in self._cache:  # a body schema shared by many operations
            converted, dangling, size = self._cache[key]
            self.dangling += dangling
            self._write(size)
            return converted
        before = len(self.dangling)
        for limit in range(MAX_REF_DEPTH, 0, -1):
            del self.dangling[before:]
            try:  # the last attempt is kept up to MAX_TOOL_SCHEMA_CHARS: the import's budget bounds the work
                converted = _Converter(self, limit, size_cap=limit > 1).convert(node, base, (), 0)
            except _Oversized:
                continue
            size = len(json.dumps(converted, default=str))
            if size <= MAX_SCHEMA_CHARS:
                break
        if key is not None:
            self._cache[key] = (converted, self.dangling[before:], size)
        self._write(size)
        return converted

    def _write(self, size: int) -> None:
        """Count a schema about to be written into a tool; refuse one too large, or an import writing too much."""
        if size > MAX_TOOL_SCHEMA_CHARS:
            raise OversizedSchema(f"a schema of its arguments is {size:,} characters even with $refs cut "
                                  f"shallowest (the limit is {MAX_TOOL_SCHEMA_CHARS:,}): too large for a tool")
        self.written += size
        if self.written > MAX_WRITTEN_SCHEMA_CHARS:
            raise OpenAPIError(f"the document's schemas write more than {MAX_WRITTEN_SCHEMA_CHARS:,} characters "
                               "into its tools (a large schema shared by many operations is written into each)",
                               "import a part of it with --include/--tag", self.root)


@dataclass
class _Converter:
    """Turns an OpenAPI schema into a tool's JSON Schema, following each $ref up to ``max_depth`` deep (a cycle is cut)."""

    resolver: Resolver
    max_depth: int  # references followed before a schema is cut
    size_cap: bool = False  # give up (_Oversized) once the output must exceed MAX_SCHEMA_CHARS
    chars: int = 0  # a lower bound of the output's JSON size so far

    def spend(self, nodes: int, chars: int) -> None:
        """Count what one node adds: the import's budget, and this attempt's size."""
        self.resolver.expanded += nodes
        if self.resolver.expanded > MAX_EXPANDED_NODES:
            raise too_many_expansions(self.resolver.root)
        self.chars += chars
        if self.size_cap and self.chars > MAX_SCHEMA_CHARS:
            raise _Oversized

    def convert(self, node: Any, base: str, stack: tuple[tuple[str, str], ...], depth: int) -> Any:
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            return {}
        self.spend(1, 2)  # a dict is at least "{}" in the output
        key = self.resolver.ref_key(node, base)
        if key is not None:
            return self._referenced(node, base, stack, depth, key)
        if node.get("type") == "file":
            raise FileUpload("a file upload (type: file)")
        out: dict[str, Any] = {}
        for keyword, value in node.items():
            if _kept(keyword, value):
                self._keep(out, keyword, value, base, stack, depth)
        return self._dialect(out, node)

    def _referenced(self, node: dict[str, Any], base: str, stack: tuple[tuple[str, str], ...], depth: int,
                    key: tuple[str, str]) -> Any:
        """A $ref's target converted, or a stand-in where the reference is broken, recurs or nests too deep."""
        try:
            target, target_base = self.resolver.follow(node, base)
        except DanglingRef as exc:  # one hole in a schema: the rest of the operation still imports
            self.resolver.dangling.append(str(exc))
            return {"type": list(JSON_TYPES), "description": "(not described: the document's $ref is broken)"}
        if key in stack or depth >= self.max_depth:
            cut = _cut(target, recursive=key in stack)
            self.spend(1, len(cut["description"]) + 20)  # its description and type, quoted
            return cut
        return self.convert(target, target_base, (*stack, key), depth + 1)

    def _keep(self, out: dict[str, Any], keyword: str, value: Any, base: str, stack: tuple[tuple[str, str], ...],
              depth: int) -> None:
        """One kept keyword into ``out``: subschemas converted, text cleaned, the rest as plain data."""
        if keyword == "properties":
            out[keyword] = self._properties(value, base, stack, depth)
        elif keyword in _SUBSCHEMA:
            out[keyword] = self.convert(value, base, stack, depth)
        elif keyword in _SUBSCHEMA_LISTS:
            out[keyword] = [self.convert(item, base, stack, depth) for item in value]
        elif keyword == "patternProperties":
            out[keyword] = {k: self.convert(v, base, stack, depth) for k, v in value.items()}
        elif keyword in ("description", "title"):
            if isinstance(value, str) and value.strip():
                out[keyword] = clean_description(value) if keyword == "description" else value.strip()
                self.spend(0, len(out[keyword]))
        else:
            out[keyword] = plain_value(value)
            listed = len(value) if isinstance(value, (list, dict)) else 0
            self.spend(listed, listed + (len(value) if isinstance(value, str) else 0))

    def _properties(self, properties: dict[str, Any], base: str, stack: tuple[tuple[str, str], ...],
                    depth: int) -> dict[str, Any]:
        converted = {}
        for name, sub in properties.items():
            if _read_only(sub, self.resolver, base):
                continue  # set by the server: the caller does not send it
            self.spend(0, len(str(name)) + 4)  # "name": and a separator
            schema = self.convert(sub, base, stack, depth)
            if schema is not False:  # `false`: no value is allowed, so nothing to send
                converted[str(name)] = typed(schema)
        return converted

    def _dialect(self, out: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
        """OpenAPI's dialect as JSON Schema: known types, numeric bounds, usable values, merged allOf, nullable."""
        out = _with_json_type(out)
        _numeric_exclusive_bounds(out)
        _drop_unusable_values(out)
        if isinstance(out.get("allOf"), list):
            out = _merge_all_of(out)
        if node.get("nullable") is True:  # 3.1 documents use it too (OpenAI's)
            out = _with_null(out)
        return _described_union(out)


def _kept(keyword: str, value: Any) -> bool:
    """Whether a schema keyword goes into the tool's schema: one JSON Schema knows, of the shape it needs."""
    if keyword not in _KEPT or (value is None and keyword not in ("const", "default")):
        return False
    return keyword not in _SHAPES or isinstance(value, _SHAPES[keyword])


def _with_json_type(out: dict[str, Any]) -> dict[str, Any]:
    """``type`` kept only as JSON Schema types; where none is left, the one the keywords imply."""
    kind = out.get("type")
    if isinstance(kind, list):
        kind = [t for t in kind if t in JSON_TYPES] or None
    elif kind is not None and kind not in JSON_TYPES:
        kind = None  # "int", "date": not JSON Schema types; the format or description still says
    if kind is not None:
        out["type"] = kind
        return out
    out.pop("type", None)
    implied = _implied_type(out)
    if implied:  # `items` without `type: array`: say what the keywords already mean
        return {"type": implied, **out}
    return out


def _numeric_exclusive_bounds(out: dict[str, Any]) -> None:
    """3.0's boolean ``exclusiveMinimum: true`` beside ``minimum`` -> 2020-12's numeric ``exclusiveMinimum``."""
    for bound, plain_bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(out.get(bound), bool):
            if out.pop(bound) and plain_bound in out:
                out[bound] = out.pop(plain_bound)


def _drop_unusable_values(out: dict[str, Any]) -> None:
    """Bounds that are no numbers, counts that are no counts, patterns that do not compile; unknown required names."""
    for keyword in _NUMBER_KEYWORDS:
        if keyword in out and (isinstance(out[keyword], bool) or not isinstance(out[keyword], (int, float))):
            out.pop(keyword)  # "1e-05" as text, or a leftover boolean: not a bound JSON Schema can use
    for keyword in _COUNT_KEYWORDS:
        if keyword in out and (isinstance(out[keyword], bool) or not isinstance(out[keyword], int)
                               or out[keyword] < 0):
            out.pop(keyword)
    if isinstance(out.get("pattern"), str) and not _compiles(out["pattern"]):
        out.pop("pattern")
    if isinstance(out.get("required"), list):
        _keep_known_required(out)


def _keep_known_required(out: dict[str, Any]) -> None:
    """``required`` as distinct names of the schema's properties; dropped when none is left."""
    names = list(dict.fromkeys(n for n in out["required"] if isinstance(n, str)))
    if isinstance(out.get("properties"), dict):
        names = [n for n in names if n in out["properties"]]
    if names:
        out["required"] = names
    else:
        out.pop("required")


_KEYWORDS_OF_TYPE = {
    "object": ("properties", "additionalProperties", "patternProperties", "minProperties", "maxProperties"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems"),
    "string": ("minLength", "maxLength", "pattern"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}


def typed(schema: Any) -> dict[str, Any]:
    """An argument's schema that says no type (``{}``, a description alone) as what it means: any value.

    Said outright, as the lint asks of every argument: a typeless one is a lint error, and the tool would not load.
    """
    if not isinstance(schema, dict):
        return {"type": list(JSON_TYPES)}  # `true`, or a value that is no schema at all
    if any(k in schema for k in ("type", "enum", "const", "anyOf", "oneOf", "allOf")):
        return schema
    return {"type": list(JSON_TYPES), **schema}


def _implied_type(schema: dict[str, Any]) -> str | None:
    """The one type a typeless schema's keywords imply, unless it combines or lists values."""
    if any(k in schema for k in ("anyOf", "oneOf", "allOf", "enum", "const", "not")):
        return None
    implied = [kind for kind, keywords in _KEYWORDS_OF_TYPE.items() if any(k in schema for k in keywords)]
    return implied[0] if len(implied) == 1 else None


def _read_only(schema: Any, resolver: Resolver, base: str) -> bool:
    try:
        target, _ = resolver.follow(schema, base)
    except DanglingRef:
        return False
    return isinstance(target, dict) and target.get("readOnly") is True


def _cut(target: Any, *, recursive: bool) -> dict[str, Any]:
    """A stand-in for a schema not expanded further: its type and description, free-form inside."""
    cut: dict[str, Any] = {}
    kind = target.get("type") if isinstance(target, dict) else None
    if isinstance(kind, str) and kind in JSON_TYPES:
        cut["type"] = kind
    elif isinstance(target, dict) and "properties" in target:
        cut["type"] = "object"
    else:  # a union or a bare schema: any value, said outright (a schema without a type is a lint error)
        cut["type"] = list(JSON_TYPES)
    why = "recursive: the same structure again, not spelled out" if recursive else "nested too deep to spell out"
    described = clean_description(str(target.get("description") or "")) if isinstance(target, dict) else ""
    cut["description"] = f"{described} ({why})" if described else f"({why})"
    return cut


def _described_union(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [{description: D, ...}, {type: null}]`` -> ``description: D, anyOf: [{...}, {type: null}]``.

    3.1's way to say nullable puts the description in a branch: said once on top, a reader
    and the lint find it where every other argument has its own.
    """
    if "description" in schema:
        return schema
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if not isinstance(branches, list) or not all(isinstance(b, dict) for b in branches):
            continue
        described = [b for b in branches if b.get("description")]
        others = [b for b in branches if not b.get("description")]
        if len(described) == 1 and others and all(b == {"type": "null"} for b in others):
            bare = {k: v for k, v in described[0].items() if k != "description"}
            hoisted = [bare if b is described[0] else b for b in branches]
            return {"description": described[0]["description"], **{k: v for k, v in schema.items() if k != keyword},
                    keyword: hoisted}
    return schema


def _with_null(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if kind is None:
        return {"anyOf": [schema, {"type": "null"}]} if schema else schema
    types = kind if isinstance(kind, list) else [kind]
    widened = {**schema, "type": types if "null" in types else [*types, "null"]}
    if isinstance(widened.get("enum"), list) and None not in widened["enum"]:
        widened["enum"] = [*widened["enum"], None]
    return widened


def _merge_all_of(schema: dict[str, Any]) -> dict[str, Any]:
    """``allOf`` of plain object schemas merged into one (what a reader and Gemini want); others kept."""
    parts = [p for p in schema["allOf"] if p != {}]
    if not _plain_objects(parts):
        return schema
    merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
    properties, required = _merged_members(merged, parts)
    for part in parts:
        for key in ("description", "title", "additionalProperties"):
            if key in part and key not in merged:  # the schema's own first, then the first part's that says it
                merged[key] = part[key]
    merged["type"] = "object"
    if properties:
        merged["properties"] = properties
    required = [r for r in required if r in properties] if properties else required
    if required:
        merged["required"] = required
    return merged


def _merged_members(schema: dict[str, Any], parts: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The properties and required names of a schema and its allOf parts together, a later part's winning."""
    properties: dict[str, Any] = dict(schema.get("properties") or {})
    required: list[str] = list(schema.get("required") or [])
    for part in parts:
        properties.update(part.get("properties") or {})
        required += [r for r in part.get("required") or [] if r not in required]
    return properties, required


def _plain_objects(parts: list[Any]) -> bool:
    """Whether every part of an allOf is an object schema of members alone, which merge without losing anything."""
    if not all(isinstance(p, dict) and set(p) <= _MERGEABLE for p in parts):
        return False
    return all(p.get("type", "object") == "object" for p in parts)


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def plain_value(value: Any) -> Any:
    """A YAML value as JSON data: dates as ISO text, mapping keys as text."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_value(v) for v in value]
    return value


def object_members(schema: Any) -> tuple[dict[str, Any], list[str]] | None:
    """(properties, required) of an object schema whose members can be separate arguments, else None."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    if schema.get("type", "object") != "object" or any(k in schema for k in ("anyOf", "oneOf", "allOf")):
        return None
    if schema["properties"] == {}:
        return None
    return schema["properties"], list(schema.get("required") or [])
