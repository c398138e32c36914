"""A one-file-per-tool catalog made of real tool definitions: the Berkeley Function Calling Leaderboard's.

The definitions come from the ``bfcl-eval`` wheel's data files (Apache-2.0), fetched once with
``pip download bfcl-eval --no-deps`` into the benchmark cache folder and read from the wheel
(never installed: it depends on vendor SDKs). Each definition becomes one tool file in the
"drop a file into tools.d" way: its name made valid (``math.sum`` -> ``math_sum``), BFCL's
Python and Java type names mapped to JSON Schema's (``any`` and the like to string), and a shell backend that echoes. The
3,258 distinct definitions are used in their order; beyond that they repeat with a suffix.

    python benchmarks/bfcl_catalog.py DIR [N]     # writes N tool files (default 4,852) into DIR
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolrun-bench"
TYPES = {"dict": "object", "HashMap": "object", "object": "object", "float": "number", "double": "number",
         "long": "integer", "int": "integer", "integer": "integer", "number": "number", "tuple": "array",
         "list": "array", "array": "array", "ArrayList": "array", "Array": "array", "String": "string",
         "string": "string", "char": "string", "str": "string", "Boolean": "boolean", "boolean": "boolean",
         "bool": "boolean"}
SCHEMA_KEYS = ("type", "description", "properties", "required", "items", "enum")


def bfcl_wheel() -> Path | None:
    """The bfcl-eval wheel in the cache folder, downloaded on first need; None when pip cannot get it."""
    found = sorted(CACHE.glob("bfcl_eval-*.whl"))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "bfcl-eval", "--no-deps", "-q", "-d", str(CACHE)],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        found = sorted(CACHE.glob("bfcl_eval-*.whl"))
    return found[-1] if found else None


def definitions(wheel: Path) -> list[dict[str, Any]]:
    """Every distinct function definition of the leaderboard's question files, in file order."""
    seen: set[str] = set()
    found: list[dict[str, Any]] = []
    with zipfile.ZipFile(wheel) as archive:
        for member in sorted(archive.namelist()):
            if not re.fullmatch(r"bfcl_eval/data/BFCL_v\d+_[a-z_]+\.json", member):
                continue
            for line in archive.read(member).decode("utf-8").splitlines():
                try:
                    question = json.loads(line)
                except ValueError:
                    continue
                for function in question.get("function") or []:
                    key = json.dumps(function, sort_keys=True)
                    if isinstance(function, dict) and "name" in function and key not in seen:
                        seen.add(key)
                        found.append(function)
    return found


def schema(node: Any) -> dict[str, Any]:
    """A BFCL parameter schema in JSON Schema's words (a type it has no word for: string)."""
    if not isinstance(node, dict):
        return {}
    converted: dict[str, Any] = {}
    for key in SCHEMA_KEYS:
        if key not in node:
            continue
        value = node[key]
        if key == "type":
            converted["type"] = TYPES.get(value, "string") if isinstance(value, str) else "string"
        elif key == "properties" and isinstance(value, dict):
            converted["properties"] = {str(name): schema(sub) for name, sub in value.items()}
        elif key == "items":
            converted["items"] = schema(value)
        elif key == "required" and isinstance(value, list):
            converted["required"] = [str(name) for name in value]
        elif key == "enum" and isinstance(value, list) and value:
            converted["enum"] = list(dict.fromkeys(json.dumps(item) for item in value))
            converted["enum"] = [json.loads(item) for item in converted["enum"]]
        elif key == "description" and isinstance(value, str) and value.strip():
            converted["description"] = value
    if "required" in converted and isinstance(converted.get("properties"), dict):
        converted["required"] = [name for name in dict.fromkeys(converted["required"]) if name in converted["properties"]]
    return converted


def tool_document(function: dict[str, Any], name: str) -> dict[str, Any]:
    parameters = schema(function.get("parameters"))
    parameters["type"] = "object"
    description = str(function.get("description") or "").strip() or f"Runs {name}."
    return {"name": name, "description": description, "parameters": parameters,
            "backend": {"shell": {"argv": ["echo", name]}}}


def write_bfcl_catalog(directory: Path, count: int, wheel: Path) -> list[str]:
    """``count`` tool files in ``directory`` (one tool each); their tool names in order."""
    functions = definitions(wheel)
    directory.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    used: set[str] = set()
    for index in range(count):
        function = functions[index % len(functions)]
        base = re.sub(r"[^A-Za-z0-9_-]", "_", str(function["name"]))[:56] or "tool"
        name, suffix = base, 2
        while name in used:
            name, suffix = f"{base}_{suffix}", suffix + 1
        used.add(name)
        names.append(name)
        text = yaml.safe_dump(tool_document(function, name), allow_unicode=True, sort_keys=False, width=100)
        (directory / f"{index:05d}_{name}.yaml").write_text(text, encoding="utf-8")
    return names


if __name__ == "__main__":
    target = Path(sys.argv[1])
    found_wheel = bfcl_wheel()
    if found_wheel is None:
        raise SystemExit("could not download bfcl-eval (pip download bfcl-eval --no-deps)")
    written = write_bfcl_catalog(target, int(sys.argv[2]) if len(sys.argv) > 2 else 4852, found_wheel)
    print(f"{len(written)} tool files in {target}")
