"""How fast a large catalog loads: N realistic tool files in a temp dir, timed.

Prints tools/second for toolrun's loader (YAML with lines + schema + semantic checks +
backend checks) and the ratio against plain ``yaml.safe_load`` of the same files (the
brief's baseline, pure Python) and against libyaml's CSafeLoader (which the loader uses
when PyYAML has it). Best of 3 runs; other processes on the machine add noise.

    .venv/bin/python benchmarks/load_large_catalog.py [N ...]     # default: 1000 3000
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

from toolrun.catalog.loader import load_catalog

VERBS = ["get", "list", "create", "update", "delete", "search", "count", "export"]
NOUNS = ["flower", "order", "invoice", "customer", "shop", "supplier", "shipment", "price", "report", "ticket"]
CITIES = ["北京", "上海", "深圳", "广州", "杭州"]


def http_tool(index: int, rng: random.Random) -> str:
    verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
    method = {"create": "POST", "update": "PATCH", "delete": "DELETE"}.get(verb, "GET")
    return f"""\
name: {verb}_{noun}_{index}
description: >-
  {verb.capitalize()}s the {noun} records of one city from the inventory service ({index}).
  Use it when the user asks about a {noun}; do not use it for prices or other cities.
parameters:
  type: object
  properties:
    city: {{type: string, enum: [{", ".join(CITIES)}], description: City name}}
    limit: {{type: integer, minimum: 1, maximum: 100, description: How many records at most}}
    status: {{type: string, enum: [open, closed, all], description: Which records}}
  required: [city]
timeout: 15s
annotations: {{read_only: {str(method == "GET").lower()}, idempotent: true}}
backend:
  http:
    method: {method}
    url: https://inventory.example.com/api/{noun}s/{{city}}
    headers: {{Authorization: "Bearer ${{env:INVENTORY_TOKEN}}", X-Request: "{noun}-{{{{ status }}}}"}}
    query: {{limit: "{{{{ limit }}}}"}}
    retries: 2
"""


def shell_tool(index: int, rng: random.Random) -> str:
    noun = rng.choice(NOUNS)
    return f"""\
name: grep_{noun}_{index}
description: Counts the lines mentioning a city in the {noun} log ({index}). Use it for quick counts; not for totals.
parameters:
  type: object
  properties:
    city: {{type: string, description: City name}}
  required: [city]
backend:
  shell:
    argv: [grep, -c, "{{{{ city }}}}", logs/{noun}.log]
    env: {{LANG: C.UTF-8}}
"""


def toolset(index: int, rng: random.Random) -> str:
    tools = []
    for offset in range(5):
        noun = rng.choice(NOUNS)
        tools.append(f"""\
  - name: set{index}_{noun}_{offset}
    description: Returns one {noun} by id from toolset {index}. Use it when the id is known; not for search.
    parameters: {{type: object, properties: {{id: {{type: string, description: The {noun} id}}}}, required: [id]}}
    backend: {{http: {{url: "/{noun}s/{{id}}"}}}}
""")
    return f"""\
defaults:
  timeout: 20s
  http: {{base_url: "https://api{index}.example.com", headers: {{Accept: application/json}}, retries: 1}}
tools:
{"".join(tools)}"""


def write_catalog(directory: Path, tool_count: int, seed: int = 7) -> int:
    """Write files holding ``tool_count`` tools: mostly http, some shell, some 5-tool toolsets."""
    rng = random.Random(seed)
    written = index = 0
    while written < tool_count:
        kind = index % 10
        if kind == 9 and tool_count - written >= 5:
            text, count = toolset(index, rng), 5
        elif kind in (7, 8):
            text, count = shell_tool(index, rng), 1
        else:
            text, count = http_tool(index, rng), 1
        (directory / f"tool_{index:05d}.yaml").write_text(text, encoding="utf-8")
        written += count
        index += 1
    return index


def best_of(repeats: int, function) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    return min(timings)


def measure(tool_count: int) -> None:
    with tempfile.TemporaryDirectory() as temp:
        directory = Path(temp)
        file_count = write_catalog(directory, tool_count)
        files = sorted(directory.glob("*.yaml"))

        def baseline() -> None:
            for path in files:
                yaml.safe_load(path.read_text(encoding="utf-8"))

        def baseline_libyaml() -> None:
            for path in files:
                yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)  # noqa: S506

        result = load_catalog(directory)  # warm-up; also proves the generated catalog is clean
        if result.problems:
            raise SystemExit("generated catalog has problems:\n" + "\n".join(str(p) for p in result.problems[:5]))
        loaded = len(result.catalog)
        toolrun_seconds = best_of(3, lambda: load_catalog(directory))
        yaml_seconds = best_of(3, baseline)
        libyaml_seconds = best_of(3, baseline_libyaml) if yaml.__with_libyaml__ else float("nan")
    print(
        f"N={tool_count}: {loaded} tools in {file_count} files: load_catalog {toolrun_seconds:.2f}s "
        f"({loaded / toolrun_seconds:,.0f} tools/s); yaml.safe_load alone {yaml_seconds:.2f}s; "
        f"ratio {toolrun_seconds / yaml_seconds:.2f}x; "
        f"(yaml with libyaml alone {libyaml_seconds:.2f}s: ratio {toolrun_seconds / libyaml_seconds:.2f}x)"
    )


def main(argv: list[str]) -> None:
    for tool_count in [int(a) for a in argv] or [1000, 3000]:
        measure(tool_count)


if __name__ == "__main__":
    main(sys.argv[1:])
