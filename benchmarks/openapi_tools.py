"""Real tool definitions for calibration and benchmarks: the operations of an OpenAPI document.

The document is the repository's subset of OpenAI's official one
(tests/fixtures/specs/openai-openapi.subset.json: every operation, the schemas they use; see
scripts/trim_openai_openapi.py), so the tests that use these tools run from a bare clone.

Each operation becomes one Tool (operationId -> name, summary + description -> description,
path/query parameters and the JSON request body's properties -> parameters). The texts are
written by others, which is the point: thresholds are calibrated on them, not on our examples.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so `python benchmarks/x.py` finds toolrun without installing
    sys.path.insert(0, str(ROOT))

from toolrun.catalog.model import Catalog  # noqa: E402
from toolrun.core.tool import Annotations, BackendSpec, SourceLocation, Tool  # noqa: E402

OPENAI_SPEC = ROOT / "tests" / "fixtures" / "specs" / "openai-openapi.subset.json"
HTTP_METHODS = ("get", "post", "put", "patch", "delete")
MAX_REF_DEPTH = 3  # deep enough for realistic nested schemas, shallow enough to stay finite


@lru_cache(maxsize=2)
def load_spec(path: Path = OPENAI_SPEC) -> dict[str, Any]:
    """An OpenAPI document (JSON, or YAML with the C loader) as plain data, parsed once per process.

    Callers must not mutate it: ``operation_tools`` copies what it takes.
    """
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    with path.open("rb") as handle:
        return yaml.load(handle, Loader=yaml.CSafeLoader)


def _resolve(node: Any, spec: dict[str, Any], depth: int) -> Any:
    """Inline ``$ref``s up to MAX_REF_DEPTH; deeper ones become a described free-form object."""
    if isinstance(node, list):
        return [_resolve(item, spec, depth) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = node["$ref"].rsplit("/", 1)[-1]
        component = spec["components"]["schemas"].get(target, {})
        if depth >= MAX_REF_DEPTH:
            return {"type": "object", "description": component.get("description", target)}
        return _resolve(copy.deepcopy(component), spec, depth + 1)
    return {key: _resolve(value, spec, depth) for key, value in node.items() if not key.startswith("x-")}


def _tool_name(operation_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", operation_id)[:64]


def operation_tools(spec: dict[str, Any], source: Path = OPENAI_SPEC) -> list[Tool]:
    """One Tool per operation of ``spec``, in document order."""
    tools: list[Tool] = []
    for path, item in spec.get("paths", {}).items():
        for method in HTTP_METHODS:
            operation = item.get(method)
            if not operation or "operationId" not in operation:
                continue
            description = "\n\n".join(
                text.strip() for text in (operation.get("summary"), operation.get("description")) if text
            )
            properties: dict[str, Any] = {}
            required: list[str] = []
            for parameter in [*item.get("parameters", []), *operation.get("parameters", [])]:
                parameter = _resolve(parameter, spec, 0)
                if parameter.get("in") not in ("path", "query"):
                    continue
                schema = dict(parameter.get("schema", {}))
                if parameter.get("description"):
                    schema["description"] = parameter["description"]
                properties[parameter["name"]] = schema
                if parameter.get("required"):
                    required.append(parameter["name"])
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            body_schema = _resolve(body.get("schema", {}), spec, 0)
            properties.update(body_schema.get("properties", {}))
            required.extend(body_schema.get("required", []))
            parameters: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                parameters["required"] = sorted(set(required), key=required.index)
            tools.append(
                Tool(
                    name=_tool_name(operation["operationId"]),
                    description=description,
                    parameters=parameters,
                    backend=BackendSpec("http", {"method": method.upper(), "url": path}),
                    source=SourceLocation(source, 1),
                    annotations=Annotations(read_only=True) if method == "get" else None,
                )
            )
    return tools


def catalog_of(tools: list[Tool]) -> Catalog:
    """A Catalog of ``tools``, keyed by name (later duplicates get a numeric suffix)."""
    catalog = Catalog()
    for tool in tools:
        name = tool.name
        suffix = 2
        while name in catalog.tools:
            name = f"{tool.name}_{suffix}"
            suffix += 1
        tool.name = name
        catalog.tools[name] = tool
    return catalog
