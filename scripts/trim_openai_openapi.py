"""Write the subset of OpenAI's OpenAPI document that the tests use (tests/fixtures/specs/).

The official document (github.com/openai/openai-openapi, 3 MB of YAML, 1.5 s to parse) is
more than the tests need. The subset keeps, copied unchanged apart from ``x-`` extension
keys (code samples, docs metadata: ignored by JSON Schema and by the benchmark's tool
builder alike):

- ``openapi``, ``info``, ``servers`` and every path with its operations, less their
  ``responses`` (optional in OpenAPI 3.1; nothing here reads them);
- the component schemas the tests validate against (``VALIDATED``), with every schema they
  refer to, so each validator is exactly the one the full document gives;
- the component schemas the paths reach within ``benchmarks/openapi_tools.MAX_REF_DEPTH``
  (the depth to which that builder inlines ``$ref``s), so the tools built from the subset
  are exactly the tools built from the full document — checked before writing. Schemas
  only reached deeper than that are left out, so a few deep ``$ref``s point outside the subset.

Usage (from the repository root; the original is not part of the repository)::

    python scripts/trim_openai_openapi.py PATH/TO/openai-openapi.yaml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from openapi_tools import HTTP_METHODS, MAX_REF_DEPTH, OPENAI_SPEC, operation_tools  # noqa: E402

# Every components.schemas name the tests pass to tests/openapi_schemas.py.
VALIDATED = [
    "ChatCompletionTool", "FunctionObject", "FunctionTool", "CreateChatCompletionRequest", "CreateResponse",
    "FunctionToolCall", "FunctionCallOutputItemParam", "ReasoningItem", "EasyInputMessage",
    "ResponseCreatedEvent", "ResponseOutputItemAddedEvent", "ResponseOutputItemDoneEvent", "ResponseTextDeltaEvent",
    "ResponseFunctionCallArgumentsDeltaEvent", "ResponseFunctionCallArgumentsDoneEvent", "ResponseCompletedEvent",
    "ResponseIncompleteEvent", "ResponseErrorEvent",
]
SCHEMA_REF = "#/components/schemas/"


def without_extensions(node: Any) -> Any:
    """``node`` with every ``x-`` key dropped, recursively."""
    if isinstance(node, dict):
        return {key: without_extensions(value) for key, value in node.items() if not key.startswith("x-")}
    if isinstance(node, list):
        return [without_extensions(item) for item in node]
    return node


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node))
    return set()


def referenced_closure(roots: list[str], schemas: dict[str, Any]) -> set[str]:
    """``roots`` and every component schema they refer to, transitively."""
    pending, seen = list(roots), set[str]()
    while pending:
        name = pending.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        pending += [ref.removeprefix(SCHEMA_REF) for ref in _refs(schemas[name]) if ref.startswith(SCHEMA_REF)]
    return seen


def reached_by_operations(spec: dict[str, Any]) -> set[str]:
    """The component schemas ``operation_tools`` looks up (it inlines refs MAX_REF_DEPTH deep)."""
    schemas, reached = spec["components"]["schemas"], set[str]()

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, depth)
        elif isinstance(node, dict) and "$ref" in node:
            target = node["$ref"].rsplit("/", 1)[-1]
            reached.add(target)
            if depth < MAX_REF_DEPTH:
                walk(schemas.get(target, {}), depth + 1)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value, depth)

    for item in spec["paths"].values():
        for method in HTTP_METHODS:
            operation = item.get(method) or {}
            for parameter in [*item.get("parameters", []), *operation.get("parameters", [])]:
                walk(parameter, 0)
            walk(operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {}), 0)
    return reached & set(schemas)


def trimmed(spec: dict[str, Any]) -> dict[str, Any]:
    """The subset described in the module docstring."""
    schemas = spec["components"]["schemas"]
    kept = referenced_closure(VALIDATED, schemas) | reached_by_operations(spec)
    subset = {key: spec[key] for key in ("openapi", "info", "servers")}
    subset["paths"] = {
        path: {key: ({k: v for k, v in value.items() if k != "responses"} if key in HTTP_METHODS else value)
               for key, value in item.items()}
        for path, item in spec["paths"].items()
    }
    subset["components"] = {"schemas": {name: schemas[name] for name in schemas if name in kept}}
    return without_extensions(subset)


def _tool_view(spec: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(t.name, t.description, t.parameters, t.backend, t.annotations) for t in operation_tools(spec)]


def main(source: Path) -> None:
    with source.open("rb") as handle:
        spec = yaml.load(handle, Loader=yaml.CSafeLoader)
    subset = trimmed(spec)
    missing = [name for name in VALIDATED if name not in subset["components"]["schemas"]]
    if missing or _tool_view(subset) != _tool_view(spec):
        sys.exit(f"the subset would change what the tests see (missing: {missing or 'none'}); not written")
    OPENAI_SPEC.write_text(json.dumps(subset, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    kept, total = len(subset["components"]["schemas"]), len(spec["components"]["schemas"])
    print(f"wrote {OPENAI_SPEC.relative_to(ROOT)}: {len(subset['paths'])} paths, {kept} of {total} component schemas")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
