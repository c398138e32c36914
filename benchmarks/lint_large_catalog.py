"""How fast is the lint on a large catalog, and what does the inverted index buy?

Builds N tools (default 3,000) from the 288 operations of OpenAI's OpenAPI document,
repeated with variations (a numbered name and one extra sentence naming a team, so
copies are similar but not identical), then prints:

- lint_catalog: total seconds and tools/s;
- the near-duplicate pass with the inverted index vs the naive all-pairs baseline, both
  measured in this run on the same documents, their ratio, and that both found the same
  pairs.

Run: .venv/bin/python benchmarks/lint_large_catalog.py [N]
"""

from __future__ import annotations

import copy
import sys
import time

from openapi_tools import catalog_of, load_spec, operation_tools

from toolrun.catalog.lint import NEAR_DUPLICATE_THRESHOLD, lint_catalog
from toolrun.catalog.similarity import all_pairs_similar, similar_pairs

TEAMS = ["billing", "search", "payments", "identity", "storage", "analytics", "support", "growth", "infra", "mobile"]


def build_tools(count: int):
    base = operation_tools(load_spec())
    tools = []
    for index in range(count):
        tool = copy.deepcopy(base[index % len(base)])
        round_ = index // len(base)
        if round_:
            team = TEAMS[round_ % len(TEAMS)]
            tool.name = f"{tool.name[:56]}_{round_}"
            tool.description = f"{tool.description} Owned by the {team} team (variant {round_})."
        tools.append(tool)
    return tools


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    catalog = catalog_of(build_tools(count))
    tools = list(catalog)
    print(f"catalog: {len(tools)} tools built from {len(operation_tools(load_spec()))} OpenAPI operations")

    findings, seconds = timed(lint_catalog, catalog)
    print(f"lint_catalog: {seconds:.2f} s, {len(tools) / seconds:,.0f} tools/s, {len(findings):,} findings")

    documents = [f"{tool.name} {tool.description}" for tool in tools]
    indexed, indexed_seconds = timed(similar_pairs, documents, NEAR_DUPLICATE_THRESHOLD)
    naive, naive_seconds = timed(all_pairs_similar, documents, NEAR_DUPLICATE_THRESHOLD)
    same = [(p.first, p.second) for p in indexed] == [(p.first, p.second) for p in naive]
    print(
        f"near-duplicate pairs (cosine >= {NEAR_DUPLICATE_THRESHOLD}): indexed {indexed_seconds:.2f} s, "
        f"all pairs {naive_seconds:.2f} s, ratio {naive_seconds / indexed_seconds:.1f}x, "
        f"{len(indexed):,} pairs, same result: {same}"
    )


if __name__ == "__main__":
    main()
