"""JSON from untrusted hands, parsed and measured without recursion they can reach.

``json.loads`` recurses once per level and raises ``RecursionError`` near a thousand; code
that walks the parsed value (redaction, validation, serialising it again) recurses too.
A model's arguments or a server's body deeper than any real one is refused here, as a
``ValueError`` the caller already handles, instead of a traceback further down.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

MAX_ARGUMENT_DEPTH = 64  # a tool's parameters are a handful of levels; a model nesting deeper is attacking
MAX_BODY_DEPTH = 256  # a provider's body wraps arguments in ~10 levels of its own


class TooDeep(ValueError):
    """JSON nested deeper than the limit of the place it came in."""

    def __init__(self, limit: int):
        super().__init__(f"nested deeper than {limit} levels")
        self.limit = limit


def nesting_depth(value: Any) -> int:
    """How many levels of dicts and lists ``value`` has (a scalar: 0), walked without recursion."""
    if type(value) is dict:  # the usual arguments, flat: checked twice per tool call, without the walk
        for child in value.values():
            if isinstance(child, (dict, list)):
                break
        else:
            return 1
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def compact_encoder(default: Callable[[Any], Any] = _not_json) -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, default=default)`` with the C encoder made once instead of per
    call (a model's arguments encoded per tool call: half the cost of a small dict's ``json.dumps``)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator (another Python): the plain way
        return lambda value: json.dumps(value, ensure_ascii=False, default=default)
    # no circular-reference check (a cycle ends in RecursionError, as deep nesting does): its memo
    # would be shared by every call
    encode = make(None, default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    return lambda value: "".join(encode(value, 0))


compact_json = compact_encoder()
"""``json.dumps(value, ensure_ascii=False)``, its encoder made once (see ``compact_encoder``)."""


def non_finite(value: Any) -> Iterator[tuple[tuple[Any, ...], float]]:
    """The path and value of each number in ``value`` (mappings and lists, walked without recursion) that JSON
    cannot carry: NaN and Infinity, which YAML (``.nan``, ``.inf``) and Python's JSON reader both give."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        steps, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            yield steps, node
        elif isinstance(node, dict):
            stack.extend((steps + (key,), item) for key, item in node.items())
        elif isinstance(node, list):
            stack.extend((steps + (index,), item) for index, item in enumerate(node))


class NotFinite(ValueError):
    """A number JSON cannot carry: ``NaN``, ``Infinity``, or one too large for a float (``1e400``)."""


def _finite(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise NotFinite(f"{text} is not a number JSON can carry")
    return value


def _no_constant(text: str) -> Any:
    raise NotFinite(f"{text} is not a number JSON can carry")


class DuplicateKey(ValueError):
    """An object that gives one key twice (``{"city": "a", "city": "b"}``): Python's JSON keeps the last
    value, but which one the writer meant is anyone's guess."""

    def __init__(self, key: str):
        super().__init__(f"the key {key!r} appears more than once in one object")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):  # the usual object costs one dict and one comparison
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return value


def loads_bounded(text: str | bytes, max_depth: int, *, finite: bool = False, unique_keys: bool = False) -> Any:
    """``json.loads(text)``; ``TooDeep`` (a ``ValueError``) when it nests deeper than ``max_depth``; with
    ``finite``, ``NotFinite`` (one too) for ``NaN``, ``Infinity`` or ``1e400``, which Python's JSON reads; with
    ``unique_keys``, ``DuplicateKey`` (one too) for an object that gives a key twice, which it reads as the last."""
    options: dict[str, Any] = {"parse_constant": _no_constant, "parse_float": _finite} if finite else {}
    if unique_keys:
        options["object_pairs_hook"] = _unique_keys
    try:
        value = json.loads(text, **options)
    except RecursionError:
        raise TooDeep(max_depth) from None
    except (json.JSONDecodeError, NotFinite, DuplicateKey):
        raise
    except ValueError:  # int() refuses a number past sys.get_int_max_str_digits(): bad JSON like any other
        raise json.JSONDecodeError(f"a number longer than {sys.get_int_max_str_digits()} digits",
                                   text if isinstance(text, str) else text.decode("utf-8", "replace"), 0) from None
    if nesting_depth(value) > max_depth:
        raise TooDeep(max_depth)
    return value
