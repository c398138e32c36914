"""Validate request bodies against OpenAI's official OpenAPI document (a helper for the test modules).

The document (``tests/fixtures/specs/openai-openapi.subset.json``: the official one's operations
and the schemas validated here, see tests/fixtures/README.md) is parsed once per session. It
declares ``openapi: 3.1.0`` but still uses the OpenAPI 3.0 ``nullable: true`` keyword, which
JSON Schema does not know; ``_translate_nullable`` turns it into a type union so that
``null`` values the API accepts validate here too.

Usage::

    from tests.openapi_schemas import validate_against
    assert validate_against("CreateChatCompletionRequest", body) == []
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

SPEC_PATH = Path(__file__).resolve().parent / "fixtures" / "specs" / "openai-openapi.subset.json"


def _translate_nullable(node: Any) -> Any:
    """OpenAPI 3.0 ``nullable: true`` -> a JSON Schema that also accepts null (recursively)."""
    if isinstance(node, list):
        return [_translate_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    translated = {key: _translate_nullable(value) for key, value in node.items()}
    if translated.pop("nullable", False) is not True:
        return translated
    if "type" in translated:
        types = translated["type"] if isinstance(translated["type"], list) else [translated["type"]]
        translated["type"] = [*types, "null"] if "null" not in types else types
        if "enum" in translated and None not in translated["enum"]:
            translated["enum"] = [*translated["enum"], None]
        return translated
    # No type to widen ($ref, oneOf, allOf ...): accept the schema or null.
    return {"anyOf": [translated, {"type": "null"}]}


@lru_cache(maxsize=1)
def openapi_components() -> dict[str, Any]:
    """``components`` of the OpenAI document, nullable translated; parsed once per session."""
    document = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    return _translate_nullable(document["components"])


@cache
def _validator(schema_name: str) -> Draft202012Validator:
    components = openapi_components()
    if schema_name not in components["schemas"]:
        raise KeyError(f"no schema {schema_name!r} in components.schemas of {SPEC_PATH.name}")
    # The whole components tree rides along in the root so "#/components/..." $refs resolve.
    root = {"$ref": f"#/components/schemas/{schema_name}", "components": components}
    return Draft202012Validator(root)


def _describe(error: ValidationError) -> str:
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    detail = error.message if len(error.message) <= 300 else error.message[:300] + "…"
    if error.context:  # oneOf/anyOf: say which branch came closest and why it failed
        closest = best_match(error.context)
        inner = "/".join(str(part) for part in closest.absolute_path) or "(root)"
        detail += f" [closest: {inner}: {closest.message[:300]}]"
    return f"{where}: {detail}"


def validate_against(schema_name: str, instance: Any) -> list[str]:
    """Every way ``instance`` breaks ``components.schemas[schema_name]``; [] when it is valid."""
    errors = sorted(_validator(schema_name).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    return [_describe(error) for error in errors]
