"""jsonschema's verdict on the JSON Schemas most tools, tool files and recipes are made of, without jsonschema.

Importing jsonschema costs 50-65 ms (referencing, rpds, attrs, its format checkers) and one
validation tens of microseconds; a replayed recipe needs neither when everything is valid.
``subset_check`` compiles a schema made of the keywords in ``SUPPORTED`` once into plain
Python: its check returns True exactly when ``Draft202012Validator(schema)`` accepts the
value — with no format checker, as toolrun always builds it, so ``format`` only annotates —
and False exactly when it refuses it. Where its verdict could differ from jsonschema's (a
Python type JSON has no word for, such as a subclass, a Decimal or a date; arithmetic
jsonschema does with fractions) it raises ``Undecided`` instead. A schema with any keyword
in ``DECLINED`` ($ref, patternProperties, unevaluatedProperties, ...) gets None.

Callers use ``surely_valid`` and ask jsonschema whenever it says False: jsonschema alone
words the errors. ``enum``, ``const`` and ``uniqueItems`` use jsonschema's own equality
(copied below): true is not 1, 1 is 1.0, and lists and objects compare item by item.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence, Sized
from contextvars import ContextVar
from itertools import pairwise
from typing import Any

Check = Callable[[Any], bool]


class Undecided(Exception):
    """A value whose verdict this module does not give for certain: jsonschema's to judge."""


# The only Python types a check judges; anything else (a subclass, a Decimal, a date) is left to jsonschema.
_NATIVE = frozenset({dict, list, str, int, float, bool, type(None)})
_TYPE_CHECKS: dict[str, Check] = {
    "object": lambda value: type(value) is dict,
    "array": lambda value: type(value) is list,
    "string": lambda value: type(value) is str,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "number": lambda value: type(value) is int or type(value) is float,
    # draft 2020-12: 1.0 is an integer; true is not
    "integer": lambda value: type(value) is int or type(value) is float and value.is_integer(),
}
# Keywords Draft202012Validator acts on that this module does not (plus older and reference keywords,
# to stay on the safe side): a schema using any of them is jsonschema's to judge.
DECLINED = frozenset({
    "$ref", "$dynamicRef", "contains", "minContains", "maxContains", "dependentRequired", "dependentSchemas",
    "prefixItems", "patternProperties", "unevaluatedItems", "unevaluatedProperties", "definitions", "dependencies",
})
_DRAFT_2020_12 = frozenset({"https://json-schema.org/draft/2020-12/schema",
                            "https://json-schema.org/draft/2020-12/schema#"})


def _accept_all(value: Any) -> bool:
    return True


def _refuse_all(value: Any) -> bool:
    return False


_compiled: dict[int, tuple[Any, Check | None]] = {}
_MAX_COMPILED = 16_384


def subset_check(schema: Any) -> Check | None:
    """``compile_subset_check(schema)``, compiled once per schema object."""
    # By identity: the entry keeps the schema alive, so its id stays its own.
    entry = _compiled.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    check = compile_subset_check(schema)
    if len(_compiled) >= _MAX_COMPILED:  # bounded: a long-lived server may see schemas come and go
        _compiled.clear()
    _compiled[id(schema)] = (schema, check)
    return check


def surely_valid(schema: Any, value: Any) -> bool:
    """True only when jsonschema would accept ``value`` under ``schema``; False means: ask jsonschema."""
    try:
        check = subset_check(schema)
    except RecursionError:  # a schema nested a few hundred levels: compiling recurses deeper than jsonschema
        return False
    if check is None:
        return False
    try:
        return check(value)
    except Exception:  # Undecided, or e.g. a RecursionError on a deeply nested value: jsonschema decides
        return False


def compile_subset_check(schema: Any) -> Check | None:
    """A check of a value against ``schema`` that agrees with jsonschema; None when the schema uses more than the subset."""
    token = _COMPILED_HERE.set({})
    try:
        return _compile(schema, root=True)
    finally:
        _COMPILED_HERE.reset(token)


# The subschemas compiled so far for the schema being compiled, by identity: a subschema reached twice (an
# object's properties, both fused and on their own; a $defs entry inlined in many places) is compiled once.
_COMPILED_HERE: ContextVar[dict[int, tuple[Any, Check | None]] | None] = ContextVar("compiled_here", default=None)


def _compile(schema: Any, *, root: bool = False) -> Check | None:
    compiled = _COMPILED_HERE.get()
    if compiled is None or root or type(schema) is not dict:
        return _compile_node(schema, root=root)
    entry = compiled.get(id(schema))
    if entry is not None and entry[0] is schema:  # the entry keeps the schema alive: its id stays its own
        return entry[1]
    check = _compile_node(schema)
    compiled[id(schema)] = (schema, check)
    return check


def _compile_node(schema: Any, *, root: bool = False) -> Check | None:
    if schema is True:
        return _accept_all
    if schema is False:
        return _refuse_all
    if type(schema) is not dict:
        return None
    checks: dict[str, Check] = {}
    for key, value in schema.items():
        if not isinstance(key, str) or key in DECLINED:
            return None
        if key.startswith("$"):
            if key == "$comment" or root and _harmless_root_keyword(key, value):
                continue
            return None  # $defs, $anchor, ...: only references would use them, but be sure
        builder = _BUILDERS.get(key)
        if builder is None:
            continue  # an annotation or an extension (x-..., nullable): jsonschema ignores it too
        built = builder(value, schema)
        if built is None:
            return None
        if built is not _accept_all:
            checks[key] = built
    # jsonschema runs every keyword of a schema, even after one has failed; multipleOf can raise
    # (NaN, infinity), so it runs first: a failing keyword before it must not hide that raise.
    ordered = sorted(checks, key=lambda keyword: keyword != "multipleOf")
    return _fused(schema, checks) or _node([checks[keyword] for keyword in ordered])


def _harmless_root_keyword(key: str, value: Any) -> bool:
    # The validator class fixes the dialect, and an $id matters only to a $ref.
    if key == "$schema":
        return isinstance(value, str) and value in _DRAFT_2020_12
    return key == "$id" and isinstance(value, str)


# The usual shapes as one function each (a tool call is checked in about a microsecond):
# an object of properties, a value of one type, a string from a list.
_OBJECT_KEYWORDS = frozenset({"type", "properties", "additionalProperties", "required"})
_SINGLE_TYPES: dict[str, frozenset[type]] = {
    "object": frozenset({dict}), "array": frozenset({list}), "string": frozenset({str}),
    "boolean": frozenset({bool}), "null": frozenset({type(None)}), "number": frozenset({int, float}),
}


def _fused(schema: dict[str, Any], checks: dict[str, Check]) -> Check | None:
    """One function for a schema of a usual shape whose keywords all compiled; None for the others."""
    kind = schema.get("type")
    if "type" not in checks or not isinstance(kind, str):
        return None
    if kind in _SINGLE_TYPES and checks.keys() == {"type"}:
        return _of_type(_SINGLE_TYPES[kind])
    if kind == "object" and checks.keys() <= _OBJECT_KEYWORDS:
        parts = _property_checks(schema)
        return None if parts is None else _object(*parts, tuple(schema.get("required", ())))
    if kind == "string" and checks.keys() == {"type", "enum"} and all(type(c) is str for c in schema["enum"]):
        return _string_from(frozenset(schema["enum"]))
    return None


def _of_type(types: frozenset[type]) -> Check:
    def of_type(value: Any) -> bool:
        if type(value) in types:
            return True
        if type(value) in _NATIVE:
            return False
        raise Undecided(type(value).__name__)

    return of_type


def _object(checks: dict[str, Check], extra: Check, required: tuple[str, ...]) -> Check:
    def object_of_properties(value: Any) -> bool:
        if type(value) is not dict:
            if type(value) in _NATIVE:
                return False
            raise Undecided(type(value).__name__)
        for name in required:
            if name not in value:
                return False
        for key, item in value.items():
            if not checks.get(key, extra)(item):
                return False
        return True

    return object_of_properties


def _string_from(texts: frozenset[str]) -> Check:
    def string_from(value: Any) -> bool:
        if type(value) is str:
            return value in texts
        if type(value) in _NATIVE:
            return False
        raise Undecided(type(value).__name__)

    return string_from


def _node(checks: list[Check]) -> Check:
    """One schema's checks, all of which must hold, guarded against values JSON has no type for."""
    if not checks:
        return _accept_all  # like {} and true: any value, of any type
    if len(checks) == 1:
        only = checks[0]

        def the_one(value: Any) -> bool:
            if type(value) not in _NATIVE:
                raise Undecided(type(value).__name__)
            return only(value)

        return the_one

    def every(value: Any) -> bool:
        if type(value) not in _NATIVE:
            raise Undecided(type(value).__name__)
        for check in checks:
            if not check(value):
                return False
        return True

    return every


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


# ---------------------------------------------------------------- keyword builders
# Each takes the keyword's value and its schema, and returns a check of a native value
# (_accept_all when the keyword asks nothing), or None for a value it will not judge.


def _type(value: Any, schema: dict[str, Any]) -> Check | None:
    names = [value] if isinstance(value, str) else value
    if type(names) is not list or not all(isinstance(name, str) and name in _TYPE_CHECKS for name in names):
        return None  # jsonschema raises for an unknown type name
    checks = [_TYPE_CHECKS[name] for name in names]
    if len(checks) == 1:
        return checks[0]
    return lambda instance: any(check(instance) for check in checks)


def _enum(value: Any, schema: dict[str, Any]) -> Check | None:
    if type(value) is not list:
        return None
    choices = tuple(value)
    texts = frozenset(choice for choice in choices if type(choice) is str)
    # jsonschema compares a string with ==, which no other JSON value equals: a set says the same
    by_set = all(type(choice) in _NATIVE for choice in choices)

    def one_of(instance: Any) -> bool:
        if by_set and type(instance) is str:
            return instance in texts
        return any(_equal(choice, instance) for choice in choices)

    return one_of


def _const(value: Any, schema: dict[str, Any]) -> Check | None:
    return lambda instance: _equal(instance, value)


def _bound(value: Any, is_violated: Callable[[Any, Any], bool]) -> Check | None:
    if not _is_number(value):
        return None
    # written as "not violated" like jsonschema's tests, so NaN gets the verdict jsonschema gives it
    return lambda instance: not _is_number(instance) or not is_violated(instance, value)


def _multiple_of(value: Any, schema: dict[str, Any]) -> Check | None:
    if not _is_number(value) or not value > 0:
        return None
    divide_as_float = isinstance(value, float)

    def is_multiple(instance: Any) -> bool:
        if not _is_number(instance):
            return True
        try:  # jsonschema's arithmetic, step by step
            if divide_as_float:
                quotient = instance / value
                failed = int(quotient) != quotient
            else:
                failed = instance % value
        except (ArithmeticError, ValueError) as exc:  # jsonschema falls back to fractions or fails: its call
            raise Undecided(str(exc)) from exc
        return not failed

    return is_multiple


def _size(applies_to: type[Sized], value: Any, is_violated: Callable[[int, Any], bool]) -> Check | None:
    if not _is_number(value):
        return None

    def within(instance: Any) -> bool:
        return type(instance) is not applies_to or not is_violated(len(instance), value)

    return within


def _pattern(value: Any, schema: dict[str, Any]) -> Check | None:
    if not isinstance(value, str):
        return None
    try:
        pattern = re.compile(value)  # what re.search(value, ...) in jsonschema compiles too
    except re.error:
        return None
    return lambda instance: type(instance) is not str or pattern.search(instance) is not None


def _required(value: Any, schema: dict[str, Any]) -> Check | None:
    if type(value) is not list or not all(isinstance(name, str) for name in value):
        return None
    if not value:
        return _accept_all
    names = tuple(value)
    return lambda instance: type(instance) is not dict or all(name in instance for name in names)


def _properties(value: Any, schema: dict[str, Any]) -> Check | None:
    """``properties`` and ``additionalProperties`` together: one pass over the given keys."""
    parts = _property_checks(schema)
    if parts is None:
        return None
    checks, extra = parts
    if extra is _accept_all and all(check is _accept_all for check in checks.values()):
        return _accept_all

    def each_property(instance: Any) -> bool:
        if type(instance) is not dict:
            return True
        for key, item in instance.items():
            check = checks.get(key, extra)
            if not check(item):
                return False
        return True

    return each_property


def _property_checks(schema: dict[str, Any]) -> tuple[dict[str, Check], Check] | None:
    """The check of each property, and the one of every other key (additionalProperties)."""
    properties = schema.get("properties", {})
    if type(properties) is not dict or not all(isinstance(name, str) for name in properties):
        return None
    checks: dict[str, Check] = {}
    for name, sub in properties.items():
        check = _compile(sub)
        if check is None:
            return None
        checks[name] = check
    extra = _compile(schema.get("additionalProperties", True))
    return None if extra is None else (checks, extra)


def _only_with_properties(value: Any, schema: dict[str, Any]) -> Check | None:
    # additionalProperties is judged with properties; alone, it is the same pass with no properties
    return _accept_all if "properties" in schema else _properties(value, schema)


def _property_names(value: Any, schema: dict[str, Any]) -> Check | None:
    check = _compile(value)
    if check is None:
        return None
    return lambda instance: type(instance) is not dict or all(check(key) for key in instance)


def _items(value: Any, schema: dict[str, Any]) -> Check | None:
    check = _compile(value)
    if check is None:
        return None
    return lambda instance: type(instance) is not list or all(check(item) for item in instance)


def _unique_items(value: Any, schema: dict[str, Any]) -> Check | None:
    if type(value) is not bool:
        return None
    if not value:
        return _accept_all
    return lambda instance: type(instance) is not list or _unique(instance)


def _ignored(value: Any, schema: dict[str, Any]) -> Check | None:
    return _accept_all


def _subschemas(value: Any) -> list[Check] | None:
    if type(value) is not list or not value:
        return None
    checks = [_compile(sub) for sub in value]
    return None if any(check is None for check in checks) else checks  # type: ignore[return-value]


def _all_of(value: Any, schema: dict[str, Any]) -> Check | None:
    checks = _subschemas(value)
    return None if checks is None else lambda instance: all(check(instance) for check in checks)


def _any_of(value: Any, schema: dict[str, Any]) -> Check | None:
    checks = _subschemas(value)
    return None if checks is None else lambda instance: any(check(instance) for check in checks)


def _one_of(value: Any, schema: dict[str, Any]) -> Check | None:
    checks = _subschemas(value)
    return None if checks is None else lambda instance: sum(1 for check in checks if check(instance)) == 1


def _not(value: Any, schema: dict[str, Any]) -> Check | None:
    check = _compile(value)
    return None if check is None else lambda instance: not check(instance)


def _if(value: Any, schema: dict[str, Any]) -> Check | None:
    # then and else count only beside an if (alone, jsonschema ignores them, so they are _ignored)
    condition, then, otherwise = _compile(value), _compile(schema.get("then", True)), _compile(schema.get("else", True))
    if condition is None or then is None or otherwise is None:
        return None
    return lambda instance: then(instance) if condition(instance) else otherwise(instance)


def _violated_below(instance: Any, bound: Any) -> bool:
    return instance < bound


def _violated_above(instance: Any, bound: Any) -> bool:
    return instance > bound


def _violated_at_or_below(instance: Any, bound: Any) -> bool:
    return instance <= bound


def _violated_at_or_above(instance: Any, bound: Any) -> bool:
    return instance >= bound


_BUILDERS: dict[str, Callable[[Any, dict[str, Any]], Check | None]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": lambda value, schema: _bound(value, _violated_below),
    "maximum": lambda value, schema: _bound(value, _violated_above),
    "exclusiveMinimum": lambda value, schema: _bound(value, _violated_at_or_below),
    "exclusiveMaximum": lambda value, schema: _bound(value, _violated_at_or_above),
    "multipleOf": _multiple_of,
    "minLength": lambda value, schema: _size(str, value, _violated_below),
    "maxLength": lambda value, schema: _size(str, value, _violated_above),
    "minItems": lambda value, schema: _size(list, value, _violated_below),
    "maxItems": lambda value, schema: _size(list, value, _violated_above),
    "minProperties": lambda value, schema: _size(dict, value, _violated_below),
    "maxProperties": lambda value, schema: _size(dict, value, _violated_above),
    "pattern": _pattern,
    "required": _required,
    "properties": _properties,
    "additionalProperties": _only_with_properties,
    "propertyNames": _property_names,
    "items": _items,
    "uniqueItems": _unique_items,
    "format": _ignored,  # toolrun's validators have no format checker: format only annotates
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
    "then": _ignored,
    "else": _ignored,
}
SUPPORTED = frozenset(_BUILDERS)


# ---------------------------------------------------------------- jsonschema's equality (jsonschema/_utils.py)


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's ``equal``: Python's ==, except that booleans are not numbers, also inside lists and objects."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(i, j) for i, j in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(key in two and _equal(value, two[key]) for key, value in one.items())
    return bool(_unbool(one) == _unbool(two))


_TRUE, _FALSE = object(), object()


def _unbool(element: Any) -> Any:
    if element is True:
        return _TRUE
    if element is False:
        return _FALSE
    return element


def _unique(container: list[Any]) -> bool:
    """jsonschema's ``uniq``, step for step (sorted neighbours, else every pair), so the verdicts agree."""
    try:
        ordered = sorted(_unbool(item) for item in container)
        for one, two in pairwise(ordered):
            if _equal(one, two):
                return False
    except (NotImplementedError, TypeError):
        seen: list[Any] = []
        for item in container:
            item = _unbool(item)
            if any(_equal(earlier, item) for earlier in seen):
                return False
            seen.append(item)
    return True
