"""JSON from untrusted hands: its depth measured without recursion, parsing bounded, one-line encoding."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from toolrun.core.json_limits import DuplicateKey, TooDeep, compact_encoder, compact_json, loads_bounded, nesting_depth
from toolrun.core.yamlsource import LineDict


@pytest.mark.parametrize(("value", "depth"), [
    ("text", 0), (3, 0), (None, 0), ({}, 1), ([], 1), ({"city": "北京", "n": 2, "ok": None}, 1),
    ({"city": "北京", "days": [1, 2]}, 2), ({"a": {"b": {}}}, 3), ([{"a": [[]]}], 4),
    ({"a": (1, 2)}, 1),  # a tuple is no JSON container: never walked, here as in the walk
    (LineDict(a=[1]), 2), ({"a": LineDict(b=1)}, 2),  # subclasses count as what they are
])
def test_nesting_depth_counts_the_levels_of_dicts_and_lists(value: object, depth: int) -> None:
    assert nesting_depth(value) == depth


def test_nesting_depth_walks_a_value_far_deeper_than_recursion_could() -> None:
    deep: dict = {}
    node = deep
    for _ in range(100_000):
        node["a"] = {}
        node = node["a"]
    assert nesting_depth(deep) == 100_001
    with pytest.raises(TooDeep):
        loads_bounded("[" * 65 + "]" * 65, 64)


@pytest.mark.parametrize("value", [{"city": "北京", "n": [1, 2.5, None, True]}, "a\u202e\"b", [], {"k": float("nan")},
                                   {"tab\t": "line\nbreak", "emoji": "🌹"}])
def test_compact_json_writes_what_json_dumps_writes(value: object) -> None:
    assert compact_json(value) == json.dumps(value, ensure_ascii=False)


def test_compact_json_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        compact_json({"s": {1}})


def test_a_compact_encoder_with_a_default_writes_what_json_dumps_writes_with_it() -> None:
    value = {"price": Decimal("1.50"), "set": {1}, "城": "北京"}
    assert compact_encoder(default=str)(value) == json.dumps(value, ensure_ascii=False, default=str)


@pytest.mark.parametrize(("text", "key"), [('{"city": "北京", "city": "上海"}', "city"),
                                           ('{"filter": {"a": 1, "b": 2, "a": 3}}', "a"),
                                           ('[{"n": 1}, {"n": 2, "n": 2}]', "n")])
def test_unique_keys_refuses_an_object_that_gives_a_key_twice_at_any_depth(text: str, key: str) -> None:
    assert isinstance(loads_bounded(text, 64), (dict, list))  # Python's JSON keeps the last value
    with pytest.raises(DuplicateKey) as caught:
        loads_bounded(text, 64, finite=True, unique_keys=True)
    assert caught.value.key == key and isinstance(caught.value, ValueError)


def test_unique_keys_reads_everything_else_as_json_loads_does() -> None:
    text = '{"city": "北京", "days": [1, 2.5, {"a": null}], "nested": {"city": "上海"}}'
    assert loads_bounded(text, 64, finite=True, unique_keys=True) == json.loads(text)
