"""The offline replay of recipes/inventory.yaml never imports jsonschema (50-65 ms of imports):
the recipe, the tool files and every call's arguments are valid, and toolrun.core.schema_subset
says so on its own. Arguments that are not valid still get jsonschema's exact wording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.house.conftest import REPLAYS, InventoryReplays
from toolrun.core.tool import BackendSpec, SourceLocation, Tool
from toolrun.loop.execution import validate_arguments

ROOT = Path(__file__).resolve().parents[2]
@pytest.mark.xdist_group(REPLAYS)
def test_the_offline_replay_does_not_import_jsonschema(inventory_replays: InventoryReplays) -> None:
    for run, replay in (("cold catalog cache", inventory_replays.cold), ("warm catalog cache", inventory_replays.warm)):
        assert "玫瑰: 100" in replay.stdout, (run, replay.stdout, replay.stderr)
        assert replay.status == 0 and "jsonschema" not in replay.modules, (run, replay.stdout, replay.stderr)


def _tool(parameters: dict[str, Any]) -> Tool:
    return Tool(name="t", description="a test tool", parameters=parameters, backend=BackendSpec("shell", {"argv": ["true"]}),
                source=SourceLocation(Path("tools.yaml"), 1))


# Each schema with arguments it refuses, and the words toolrun used before the subset check
# existed (measured on main @ 4363b84): the fallback to jsonschema keeps them to the letter.
BEFORE = [
    ({"type": "object", "patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False},
     {"n_a": "x", "other": 1},
     ["at $: unexpected properties 'n_a', 'other' (this tool takes no arguments)", 'at $.n_a: expected integer, got "x"']),
    ({"type": "object", "properties": {"city": {"$ref": "#/$defs/city"}}, "required": ["city"],
      "$defs": {"city": {"type": "string", "enum": ["北京", "上海"]}}},
     {"city": "广州"},
     ['at $.city: expected one of ["北京", "上海"], got "广州"']),
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "dependentRequired": {"n": ["m"]}},
     {"n": 0},
     ["at $: 'm' is a dependency of 'n'", "at $.n: expected a number >= 1, got 0"]),
    ({"type": "object", "properties": {"city": {"type": "string", "enum": ["北京", "上海", "深圳"]}}, "required": ["city"],
      "additionalProperties": False},
     {"city": "广州", "day": 1},
     ["at $: unexpected property 'day' (allowed: city)", 'at $.city: expected one of ["北京", "上海", "深圳"], got "广州"']),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                                       "b": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 2}}},
     {"a": 1.5, "b": [1, 1.0, True]},
     ["at $.a: 1.5 is not valid under any of the given schemas", "at $.b: [1, 1.0, True] has non-unique elements",
      "at $.b: expected at most 2 items, got 3", "at $.b[2]: expected integer, got true"]),
    ({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3},
                                       "s": {"type": "string", "maxLength": 2, "pattern": "^a"}}},
     {"n": 4.0, "s": "b北京"},
     ["at $.n: 4.0 is not a multiple of 3", "at $.s: expected a string matching '^a', got \"b北京\"",
      'at $.s: expected at most 2 characters, got 3: "b北京"']),
]


@pytest.mark.parametrize(("parameters", "arguments", "expected"), BEFORE,
                         ids=["patternProperties", "ref", "dependentRequired", "enum", "anyOf-uniqueItems", "multipleOf"])
def test_refused_arguments_get_the_words_they_got_before(parameters: dict[str, Any], arguments: dict[str, Any],
                                                         expected: list[str]) -> None:
    assert validate_arguments(_tool(parameters), arguments) == expected
