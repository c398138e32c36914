"""toolrun.core.schema_subset against jsonschema itself: the same verdict on every schema it compiles.

Random schemas of the supported keywords and random JSON values (hypothesis): wherever the
subset check answers, it says what ``Draft202012Validator`` says, so ``surely_valid`` never
says yes to what jsonschema refuses, and says yes to everything jsonschema accepts. Schemas
with a declined keyword anywhere get no check. Then the JSON Schema corners by example, and
toolrun's own recipe and tool-file schemas on real documents, broken at random.
"""

from __future__ import annotations

import copy
import re
from collections import OrderedDict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.property_budget import property_examples
from toolrun.catalog.tool_schema import _inlined_tool_schema, tool_file_validator
from toolrun.core.schema_subset import DECLINED, SUPPORTED, Undecided, compile_subset_check, surely_valid
from toolrun.core.yamlsource import load_yaml_file, plain
from toolrun.sessions.recipe import recipe_schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = property_examples(75)
PROPERTY = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

KEYS = ["a", "b", "city", "北京", ""]
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]

# Finite, moderate numbers: where jsonschema's arithmetic and Python's agree to the last bit.
scalars = (st.none() | st.booleans() | st.integers(-50, 50) | st.integers(-2**53, 2**53)
           | st.integers(-6, 6).map(float) | st.floats(-1e9, 1e9, allow_nan=False)
           | st.text(alphabet="ab北é0 ", max_size=4))
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(KEYS), children, max_size=4),
    max_leaves=10,
)
numbers = st.integers(-5, 5) | st.sampled_from([0.5, -1.5, 2.0, 1e-3, 3.25])
counts = st.integers(0, 4) | st.sampled_from([1.0, 2.5])
patterns = st.sampled_from(["^a", "b$", "[0-9]", "^$", "北|é", "^.{2}$", "(?i)A", "^[a-z]*$"])
string_choices = st.fixed_dictionaries({"type": st.just("string"), "enum": st.lists(st.text("ab北", max_size=2), min_size=1)})


def _schemas(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    values: dict[str, st.SearchStrategy[Any]] = {
        "type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
        "enum": st.lists(json_values, min_size=1, max_size=4),
        "const": json_values,
        "minimum": numbers, "maximum": numbers, "exclusiveMinimum": numbers, "exclusiveMaximum": numbers,
        "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.1, 2.5, 1e-3]),
        "minLength": counts, "maxLength": counts, "minItems": counts, "maxItems": counts,
        "minProperties": counts, "maxProperties": counts,
        "pattern": patterns,
        "required": st.lists(st.sampled_from(KEYS), max_size=3, unique=True),
        "properties": st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
        "additionalProperties": children, "propertyNames": children, "items": children,
        "uniqueItems": st.booleans(),
        "allOf": st.lists(children, min_size=1, max_size=3), "anyOf": st.lists(children, min_size=1, max_size=3),
        "oneOf": st.lists(children, min_size=1, max_size=3),
        "not": children, "if": children, "then": children, "else": children,
        "format": st.sampled_from(["date", "email", "uri", "ipv4"]),
        "description": st.text(max_size=5), "x-hint": json_values, "nullable": st.booleans(), "$comment": st.text(max_size=3),
    }
    any_keywords = st.lists(st.sampled_from(sorted(values)), max_size=4, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({key: values[key] for key in keys}))
    # the shape of most tools' parameters, which the subset checks in one function
    tool_shaped = st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(st.sampled_from(KEYS), children | string_choices, max_size=3)},
        optional={"required": values["required"], "additionalProperties": st.booleans() | children,
                  "description": st.just("what it does")})
    return any_keywords | tool_shaped


small_schemas = st.fixed_dictionaries({}, optional={
    "type": st.sampled_from(TYPES), "minimum": numbers, "maxLength": counts, "pattern": patterns,
    "enum": st.lists(scalars, min_size=1, max_size=3), "const": scalars})
leaf_schemas = st.booleans() | string_choices | st.sampled_from([{"type": name} for name in TYPES]) | small_schemas
schemas = st.recursive(leaf_schemas, _schemas, max_leaves=8)


def _values_in(schema: Any) -> list[Any]:
    """The enum and const values of a schema: instances that make it past those keywords."""
    found: list[Any] = []
    if isinstance(schema, dict):
        found += schema.get("enum", []) if isinstance(schema.get("enum"), list) else []
        found += [schema["const"]] if "const" in schema else []
        for value in schema.values():
            found += _values_in(value) if isinstance(value, (dict, list)) else []
    elif isinstance(schema, list):
        for item in schema:
            found += _values_in(item)
    return found


@st.composite
def schemas_and_instances(draw: st.DrawFn) -> tuple[Any, Any]:
    schema = draw(schemas)
    known = _values_in(schema)
    instance = draw(json_values | st.sampled_from(known)) if known else draw(json_values)
    if draw(st.booleans()):  # an object of the keys the schemas name, to reach properties and required
        instance = draw(st.dictionaries(st.sampled_from(KEYS), json_values | st.sampled_from(known or [0]), max_size=4))
    return schema, instance


def _verdict(check: Any, instance: Any) -> bool | None:
    try:
        return bool(check(instance))
    except Undecided:
        return None


@PROPERTY
@given(schemas_and_instances())
def test_the_subset_check_says_what_jsonschema_says(pair: tuple[Any, Any]) -> None:
    schema, instance = pair
    check = compile_subset_check(schema)
    assert check is not None, schema  # every keyword drawn is supported
    expected = Draft202012Validator(schema).is_valid(instance)
    assert _verdict(check, instance) == expected, (schema, instance)
    assert surely_valid(schema, instance) == expected


wild_numbers = (st.floats() | st.integers(-2**1100, 2**1100) | st.sampled_from([1e308, -1e308, 5e-324]))


@PROPERTY
@given(schemas, st.recursive(wild_numbers | scalars, lambda c: st.lists(c, max_size=3), max_leaves=6))
def test_with_nan_infinity_and_huge_numbers_it_never_says_yes_to_what_jsonschema_refuses(schema: Any, instance: Any) -> None:
    try:
        expected: bool | None = Draft202012Validator(schema).is_valid(instance)
    except Exception:  # jsonschema's own arithmetic can overflow; then toolrun reports that, as before
        expected = None
    if surely_valid(schema, instance):
        assert expected is True, (schema, instance)


def _with_declined(schema: Any, keyword: str, where: int) -> Any:
    planted = {keyword: {} if keyword not in ("$ref", "$dynamicRef", "required") else "#"}
    if keyword in ("prefixItems",):
        planted = {keyword: [{}]}
    return [
        {**schema, **planted} if isinstance(schema, dict) else planted,
        {"properties": {"a": planted}, "anyOf": [schema]},
        {"items": {"not": planted}},
        {"allOf": [schema, {"if": planted}]},
        {"additionalProperties": planted},
    ][where]


@PROPERTY
@given(schemas, st.sampled_from(sorted(DECLINED)), st.integers(0, 4), json_values)
def test_a_declined_keyword_anywhere_means_no_check(schema: Any, keyword: str, where: int, instance: Any) -> None:
    planted = _with_declined(schema, keyword, where)
    assert compile_subset_check(planted) is None, planted
    assert surely_valid(planted, instance) is False


def test_every_keyword_jsonschema_validates_is_supported_or_declined() -> None:
    validating = set(Draft202012Validator.VALIDATORS)
    assert validating <= SUPPORTED | DECLINED, validating - SUPPORTED - DECLINED
    assert not SUPPORTED & DECLINED


def test_only_the_format_checking_path_builds_a_format_checker() -> None:
    # The subset ignores "format": the one validator with a format checker (loop/execution.py) serves only schemas
    # that use a checked format, and those never take the subset's shortcut (tests/test_argument_formats.py).
    sources = [path for path in (ROOT / "toolrun").rglob("*.py")
               if re.search(r"format_checker|FormatChecker", path.read_text(encoding="utf-8"))]
    assert sources == [ROOT / "toolrun" / "loop" / "execution.py"]


# ---------------------------------------------------------------- the corners, by example


def _agree(schema: dict[str, Any], instance: Any) -> bool:
    check = compile_subset_check(schema)
    assert check is not None
    verdict = check(instance)
    assert verdict == Draft202012Validator(schema).is_valid(instance), (schema, instance)
    return verdict


def test_booleans_are_not_numbers_and_one_point_zero_is_an_integer() -> None:
    assert [_agree({"type": "integer"}, v) for v in (1, 1.0, 1.5, True, "1")] == [True, True, False, False, False]
    assert [_agree({"type": "number"}, v) for v in (0, 0.5, False, None)] == [True, True, False, False]
    assert [_agree({"type": ["boolean", "null"]}, v) for v in (True, None, 0)] == [True, True, False]
    assert _agree({"minimum": 5}, True) is True  # a bound ignores what is not a number


def test_enum_const_and_unique_items_use_json_equality() -> None:
    assert [_agree({"enum": [1, "a"]}, v) for v in (1, 1.0, True, "a", "A")] == [True, True, False, True, False]
    assert [_agree({"enum": [False, None]}, v) for v in (0, False, None)] == [False, True, True]
    assert [_agree({"const": [1, {"a": True}]}, v) for v in ([1.0, {"a": True}], [True, {"a": True}],
                                                              [1, {"a": 1}])] == [True, False, False]
    assert [_agree({"uniqueItems": True}, v) for v in ([1, True], [1, 1.0], [[0], [False]], [{"a": 1}, {"a": 1.0}],
                                                       ["a", "b", "a"])] == [True, False, True, False, False]


def test_lengths_count_code_points_and_patterns_search_anywhere() -> None:
    assert [_agree({"maxLength": 2}, v) for v in ("北京", "北京市", "é", "😀😀")] == [True, False, True, True]
    assert [_agree({"pattern": "[0-9]"}, v) for v in ("ab3", "abc", 3)] == [True, False, True]
    # re.search, like jsonschema: $ matches before a final newline
    assert [_agree({"pattern": "^ab$"}, v) for v in ("ab", "abc", "ab\n")] == [True, False, True]


def test_multiple_of_follows_jsonschema_arithmetic() -> None:
    assert [_agree({"multipleOf": 0.1}, v) for v in (0.3, 1, 0.35)] == [
        Draft202012Validator({"multipleOf": 0.1}).is_valid(v) for v in (0.3, 1, 0.35)]
    assert [_agree({"multipleOf": 3}, v) for v in (9, 9.0, 10, True)] == [True, True, False, True]


def test_a_multiple_of_jsonschema_cannot_compute_is_never_hidden_by_a_failing_keyword() -> None:
    # jsonschema runs multipleOf on NaN in the first branch even though its type fails, and raises.
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string", "multipleOf": 0.5},
                                                             {"type": "number"}]}}}
    with pytest.raises(ValueError):
        list(Draft202012Validator(schema).iter_errors({"x": float("nan")}))
    assert surely_valid(schema, {"x": float("nan")}) is False
    assert surely_valid(schema, {"x": 1.5}) is True


def test_applicators_combine_exact_verdicts() -> None:
    assert [_agree({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, v) for v in (-1, 1, 0.5, "x")] == [
        True, False, True, True]  # "x": minimum ignores a string, so exactly one holds
    assert [_agree({"not": {"type": "string"}}, v) for v in ("a", 1)] == [False, True]
    conditional = {"if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {"maxProperties": 0}}
    assert [_agree(conditional, v) for v in ({"a": 1, "b": 2}, {"a": 1}, {}, {"b": 1}, 7)] == [
        True, False, True, False, True]
    assert _agree({"then": False}, 1) is True  # then without if: jsonschema ignores it


def test_format_and_unknown_keywords_only_annotate() -> None:
    assert _agree({"format": "email", "x-fix": "no", "nullable": True, "example": 1}, "not an email") is True


def test_values_json_has_no_type_for_are_left_to_jsonschema() -> None:
    check = compile_subset_check({"type": "object", "properties": {"n": {"type": "number", "maximum": 1}}})
    assert check is not None
    for odd in ({"n": Decimal(5)}, {"n": (1,)}):
        assert surely_valid({"type": "object", "properties": {"n": {"type": "number", "maximum": 1}}}, odd) is False
    assert check({"n": 0.5}) is True

    class Text(str):
        pass

    city = {"type": "object", "properties": {"city": {"type": "string", "enum": ["北京"]}}, "required": ["city"]}
    city_check = compile_subset_check(city)
    assert city_check is not None
    for odd in ({"city": Text("北京")}, OrderedDict(city="北京"), {"city": Decimal(1)}):
        with pytest.raises(Undecided):
            city_check(odd)
        assert surely_valid(city, odd) is False


def test_schemas_it_cannot_judge_get_no_check() -> None:
    for schema in ({"type": "any"}, {"pattern": "("}, {"required": "a"}, {"enum": "ab"}, {"items": [{}]},
                   {"properties": {"a": {"$id": "x"}}}, {"$schema": "http://json-schema.org/draft-04/schema#"},
                   {"minimum": True}, {"multipleOf": 0}, {"anyOf": []}, 3):
        assert compile_subset_check(schema) is None, schema


def test_a_schema_is_compiled_once() -> None:
    from toolrun.core.schema_subset import subset_check

    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    assert subset_check(schema) is subset_check(schema)


def test_each_subschema_is_compiled_once_however_often_it_is_reached(monkeypatch: pytest.MonkeyPatch) -> None:
    # An object's properties are reached twice (fused, and on their own): compiled each time, nesting 30 objects
    # took 2**30 compiles. Shared subschemas (a tool file's inlined $defs) are compiled once too.
    from toolrun.core import schema_subset

    compiled: list[int] = []
    compile_node = schema_subset._compile_node

    def counted(schema: Any, *, root: bool = False) -> Any:
        if isinstance(schema, dict):  # true and false cost nothing to compile
            compiled.append(id(schema))
        return compile_node(schema, root=root)

    monkeypatch.setattr(schema_subset, "_compile_node", counted)
    shared: dict[str, Any] = {"type": "string", "maxLength": 3}
    schema: dict[str, Any] = {"type": "object", "properties": {"a": shared, "b": {"type": "array", "items": shared}}}
    for _ in range(30):
        schema = {"type": "object", "properties": {"inner": schema, "also": shared}, "additionalProperties": False}
    check = compile_subset_check(schema)
    assert check is not None
    assert sorted(compiled) == sorted(set(compiled))  # no dict compiled twice
    assert len(compiled) <= 40
    value: Any = {"a": "abc", "b": ["x"]}
    for _ in range(30):
        value = {"inner": value, "also": "ok"}
    assert check(value) is Draft202012Validator(schema).is_valid(value) is True


def test_a_schema_too_deep_to_compile_is_left_to_jsonschema() -> None:
    # Compiling recurses a few frames per level; jsonschema validates the same schema (an author's, or a caller's).
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(400):
        schema = {"items": schema}
    assert Draft202012Validator(schema).is_valid(["x"])
    assert surely_valid(schema, ["x"]) is False  # not a RecursionError: "ask jsonschema"


# ---------------------------------------------------------------- toolrun's own schemas, on real documents


def _documents(pattern: str) -> list[Any]:
    # NAME.script.yaml beside a recipe is a scripted model's turns, not a recipe.
    return [plain(load_yaml_file(path)) for path in sorted(ROOT.glob(pattern)) if not path.name.endswith(".script.yaml")]


def _mutations(document: Any) -> st.SearchStrategy[Any]:
    """A copy of ``document`` with one value somewhere replaced, one key added or one removed."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, path + (key,))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, path + (index,))

    walk(document, ())

    def mutate(path: tuple[Any, ...], how: int, value: Any) -> Any:
        changed = copy.deepcopy(document)
        parent: Any = changed
        for step in path[:-1]:
            parent = parent[step]
        node = parent[path[-1]] if path else changed
        if how == 0 and path:
            parent[path[-1]] = value
        elif how == 1 and isinstance(node, dict):
            node[value if isinstance(value, str) else "extra"] = value
        elif how == 2 and path and isinstance(parent, dict):
            del parent[path[-1]]
        elif how == 3 and isinstance(node, list):
            node.append(value)
        return changed

    return st.builds(mutate, st.sampled_from(paths), st.integers(0, 3),
                     json_values | st.sampled_from(["", "x", "30s", "-1", "GET", "北京", "a b"]))


@st.composite
def broken_recipes(draw: st.DrawFn) -> Any:
    return draw(_mutations(draw(st.sampled_from(_documents("recipes/*.yaml")))))


@st.composite
def broken_tool_files(draw: st.DrawFn) -> Any:
    return draw(_mutations(draw(st.sampled_from(_documents("tools.d/*.yaml")))))


def test_toolrun_schemas_are_in_the_subset_and_accept_the_shipped_files() -> None:
    for schema, documents in ((recipe_schema(), _documents("recipes/*.yaml")),
                              (_inlined_tool_schema(), _documents("tools.d/*.yaml"))):
        assert documents
        assert compile_subset_check(schema) is not None
        assert all(surely_valid(schema, document) for document in documents)


@PROPERTY
@given(broken_recipes())
def test_recipes_get_jsonschemas_verdict(document: Any) -> None:
    assert _verdict(compile_subset_check(recipe_schema()), document) == \
        Draft202012Validator(recipe_schema()).is_valid(document), document


@PROPERTY
@given(broken_tool_files())
def test_tool_files_get_jsonschemas_verdict(document: Any) -> None:
    assert _verdict(compile_subset_check(_inlined_tool_schema()), document) == \
        tool_file_validator().is_valid(document), document
