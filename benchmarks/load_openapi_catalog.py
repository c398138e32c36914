"""A large catalog written by others, through the real loader: OpenAI's component schemas.

Each object schema of OpenAI's full OpenAPI document becomes one tool file
(a python tool whose parameters are the schema, with every schema it refers to under
``$defs``; OpenAPI keywords such as ``example`` and ``nullable`` kept as written). That is
~1,150 files and ~13 MB of YAML with deep ``$defs``, ``anyOf`` and ``$recursiveAnchor`` —
far heavier than hand-written tools. Printed: load time, the load problems by kind (the
document itself has some: draft-04 boolean ``exclusiveMinimum``, 2019-09
``$recursiveAnchor``, repeated ``required`` entries), then lint and the five exports over
the tools that loaded.

It needs the full document (github.com/openai/openai-openapi, 3 MB; the repository keeps only
the subset its tests use): by default ../shared/fixtures/specs/openai-openapi.yaml beside the
checkout, or the path given as the argument.

    .venv/bin/python benchmarks/load_openapi_catalog.py [PATH/TO/openai-openapi.yaml]
"""

from __future__ import annotations

import collections
import re
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from openapi_tools import ROOT, load_spec  # also puts the checkout on sys.path

from toolrun.catalog.lint import lint_catalog
from toolrun.catalog.loader import load_catalog
from toolrun.export import FORMATS, export_catalog

REF_PREFIX = "#/components/schemas/"
FULL_SPEC = ROOT.parent / "shared" / "fixtures" / "specs" / "openai-openapi.yaml"


def _referenced(node: Any, schemas: dict[str, Any], found: set[str]) -> set[str]:
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith(REF_PREFIX):
            name = reference.removeprefix(REF_PREFIX)
            if name not in found and name in schemas:
                found.add(name)
                _referenced(schemas[name], schemas, found)
        for value in node.values():
            _referenced(value, schemas, found)
    elif isinstance(node, list):
        for value in node:
            _referenced(value, schemas, found)
    return found


def _local_refs(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: (v.replace(REF_PREFIX, "#/$defs/") if k == "$ref" and isinstance(v, str) else _local_refs(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_local_refs(v) for v in node]
    return node


def write_catalog(folder: Path, spec: Path) -> int:
    """One tool file per object schema of the spec; returns how many were written."""
    schemas = load_spec(spec)["components"]["schemas"]
    (folder / "dummy.py").write_text("def run(**kwargs):\n    return kwargs\n", encoding="utf-8")
    written = 0
    for name, schema in schemas.items():
        if schema.get("type") != "object" and "properties" not in schema:
            continue
        parameters = {"type": "object", **_local_refs(schema)}
        used = sorted(_referenced(schema, schemas, set()))
        if used:
            parameters["$defs"] = {ref: _local_refs(schemas[ref]) for ref in used}
        tool = {
            "name": re.sub(r"[^A-Za-z0-9_-]", "_", f"make_{name}")[:64],
            "description": schema.get("description") or schema.get("title") or f"Builds a {name} object.",
            "parameters": parameters,
            "backend": {"python": "dummy.py:run"},
        }
        text = yaml.safe_dump(tool, allow_unicode=True, sort_keys=False, width=100)
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")
        written += 1
    return written


def timed(action: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def main() -> None:
    spec = Path(sys.argv[1]) if len(sys.argv) > 1 else FULL_SPEC
    if not spec.is_file():
        sys.exit(f"needs OpenAI's full OpenAPI document (github.com/openai/openai-openapi), not found at {spec}; "
                 "pass its path as the argument")
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        files = write_catalog(folder, spec)
        megabytes = sum(p.stat().st_size for p in folder.glob("*.yaml")) / 1e6
        print(f"{files} tool files, {megabytes:.1f} MB of YAML")
        seconds, result = timed(lambda: load_catalog(folder))
        print(f"load   {seconds:6.2f} s  {len(result.catalog)} tools, {len(result.problems)} problems")
        kinds = collections.Counter(re.sub(r"'[^']*'|\"[^\"]*\"|\S*\.\S*", "…", p.message.split(": ", 1)[-1])[:70]
                                    for p in result.problems)
        for kind, count in kinds.most_common(6):
            print(f"         {count:4d}  {kind}")
        seconds, findings = timed(lambda: lint_catalog(result.catalog))
        print(f"lint   {seconds:6.2f} s  {len(findings)} findings")
        for format_ in FORMATS:
            seconds, exported = timed(partial(export_catalog, result.catalog, format_))
            notes = sum(len(item.changes) for item in exported)
            print(f"export {seconds:6.2f} s  {format_} ({notes} schema-change notes)")


if __name__ == "__main__":
    sys.exit(main())
