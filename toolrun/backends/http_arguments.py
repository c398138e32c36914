"""``arguments:`` of http tools: each argument sent where it belongs, serialised as OpenAPI says.

A mapping from argument name to a location — ``query``, ``header``, ``cookie``, ``path``,
``body`` (a member of the JSON object body), ``form`` (a field of a form body) or ``json``
(the argument is the whole JSON body) — written as the location alone or as
``{in: LOCATION, name: WIRE_NAME, style: STYLE, explode: BOOL}``. An argument the call
does not give is left out; arrays and objects follow OpenAPI's ``style``/``explode``.
Pure functions: the backend renders, httpx sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

LOCATIONS = ("query", "header", "cookie", "path", "body", "form", "json")
# Styles each location accepts, the first being its default (OpenAPI 3 names; tabDelimited for Swagger 2.0 tsv,
# and the delimited styles in a header or path for Swagger 2.0's collectionFormat there).
STYLES = {
    "query": ("form", "spaceDelimited", "pipeDelimited", "tabDelimited", "deepObject"),
    "form": ("form", "spaceDelimited", "pipeDelimited", "tabDelimited"),
    "header": ("simple", "spaceDelimited", "pipeDelimited", "tabDelimited"),
    "path": ("simple", "spaceDelimited", "pipeDelimited", "tabDelimited"),
    "cookie": ("form",),
    "body": (),
    "json": (),
}
# RFC 6265 cookie-octet, less "%" (kept for the escapes themselves): everything else in a value is percent-encoded,
# so a model's "; role=admin" stays one value instead of adding cookies.
_COOKIE_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '",;\\%')
# What no header value may hold: line breaks and NUL (a second header, a cut request) and the other controls,
# C1 included: Latin-1 would send NEL (\x85) and CSI (\x9b) as raw bytes, which some parsers split or obey.
_HEADER_CONTROLS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_DELIMITERS = {"form": ",", "simple": ",", "spaceDelimited": " ", "pipeDelimited": "|", "tabDelimited": "\t"}


@dataclass(frozen=True)
class Placement:
    """Where one argument goes and how it is written there."""

    location: str
    name: str
    style: str
    explode: bool


def placement_problems(arguments: Any) -> list[tuple[str, str, str]]:
    """(argument, what is wrong, fix) for each malformed entry of an ``arguments`` mapping."""
    if arguments is None:
        return []
    if not isinstance(arguments, Mapping):
        return [("", "arguments must map argument names to locations", "e.g. arguments: {limit: query}")]
    problems = []
    for name, spec in arguments.items():
        location = _location_of(spec)
        if location not in LOCATIONS:
            problems.append((str(name), f"unknown location {location!r}", f"use one of {', '.join(LOCATIONS)}"))
        elif isinstance(spec, Mapping):
            problems += [(str(name), what, fix) for what, fix in _option_problems(spec, location)]
    return problems + _body_problems(arguments)


def _option_problems(spec: Mapping[str, Any], location: str) -> list[tuple[str, str]]:
    """(what is wrong, fix) for the keys of one placement written as a mapping (``{in: query, style: form}``)."""
    problems = []
    unknown = sorted(set(spec) - {"in", "name", "style", "explode"})
    if unknown:
        problems.append((f"unknown key(s) {', '.join(map(str, unknown))}", "use in, name, style and explode"))
    style = spec.get("style")
    if style is not None and style not in STYLES[location]:
        allowed = ", ".join(STYLES[location]) or "none"
        problems.append((f"style {style!r} does not apply to {location}", f"use {allowed}"))
    if "explode" in spec and not isinstance(spec["explode"], bool):
        problems.append(("explode must be true or false", "e.g. explode: false"))
    if "name" in spec and not (isinstance(spec["name"], str) and spec["name"]):
        problems.append(("name must be a non-empty text", "the parameter's name on the wire"))
    return problems


def _body_problems(arguments: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Two whole JSON bodies, or a whole body with body or form members."""
    whole_body = [name for name, spec in arguments.items() if _location_of(spec) == "json"]
    problems = []
    if len(whole_body) > 1:
        problems.append((whole_body[1], "only one argument can be the whole JSON body (in: json)",
                         "keep one, or send the others as body members (in: body)"))
    if whole_body and any(_location_of(s) in ("body", "form") for s in arguments.values()):
        problems.append((whole_body[0], "an argument that is the whole body (in: json) excludes body and form members",
                         "use in: body for each member instead"))
    return problems


def _location_of(spec: Any) -> Any:
    return spec.get("in") if isinstance(spec, Mapping) else spec


def placements(arguments: Mapping[str, Any] | None) -> dict[str, Placement]:
    """The checked ``arguments`` mapping as Placements (defaults filled in)."""
    found: dict[str, Placement] = {}
    for argument, spec in (arguments or {}).items():
        options = spec if isinstance(spec, Mapping) else {"in": spec}
        location = str(options["in"])
        style = str(options.get("style") or (STYLES[location][0] if STYLES[location] else ""))
        explode = options.get("explode", style in ("form", "deepObject"))
        found[str(argument)] = Placement(location, str(options.get("name") or argument), style, bool(explode))
    return found


def scalar_text(value: Any) -> str:
    """A value as text on the wire: strings as they are, true/false, numbers and the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _joined(values: list[Any], style: str) -> str:
    return _DELIMITERS.get(style, ",").join(scalar_text(v) for v in values)


def pairs(placement: Placement, value: Any) -> list[tuple[str, str]]:
    """(name, text) pairs for a query parameter or form field, per style and explode."""
    name, style, explode = placement.name, placement.style, placement.explode
    if isinstance(value, list):
        if explode and style == "form":
            return [(name, scalar_text(v)) for v in value]
        return [(name, _joined(value, style))]
    if isinstance(value, dict):
        if style == "deepObject":
            return [(f"{name}[{key}]", scalar_text(v)) for key, v in value.items()]
        if explode:
            return [(str(key), scalar_text(v)) for key, v in value.items()]
        return [(name, ",".join(f"{key},{scalar_text(v)}" for key, v in value.items()))]
    return [(name, scalar_text(value))]


def simple_text(placement: Placement, value: Any) -> str:
    """A header, cookie or path value: arrays comma-separated (or as the style says), objects as key,value pairs
    (or key=value exploded)."""
    if isinstance(value, list):
        return _joined(value, placement.style)
    if isinstance(value, dict):
        joiner = "=" if placement.explode and placement.location != "cookie" else ","
        return ",".join(f"{key}{joiner}{scalar_text(v)}" for key, v in value.items())
    return scalar_text(value)


@dataclass
class PlacedArguments:
    """The arguments of one call, sorted by where they go."""

    query: list[tuple[str, str]]
    headers: dict[str, str]
    cookies: list[tuple[str, str]]
    path: dict[str, str]
    body: dict[str, Any]
    form: list[tuple[str, str]]
    json_body: Any
    has_json_body: bool


def place(arguments_config: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> PlacedArguments:
    """Where each given argument goes; absent arguments are left out (nulls too, except in a JSON body)."""
    placed = PlacedArguments([], {}, [], {}, {}, [], None, False)
    for argument, placement in placements(arguments_config).items():
        if argument not in arguments:
            continue
        value = arguments[argument]
        if placement.location == "body":
            placed.body[placement.name] = value
        elif placement.location == "json":
            placed.json_body, placed.has_json_body = value, True
        elif value is None:
            continue
        elif placement.location == "query":
            placed.query += pairs(placement, value)
        elif placement.location == "form":
            placed.form += pairs(placement, value)
        elif placement.location == "header":
            placed.headers[placement.name] = simple_text(placement, value)
        elif placement.location == "cookie":
            placed.cookies.append((placement.name, cookie_value(simple_text(placement, value))))
        elif placement.location == "path":
            placed.path[argument] = simple_text(placement, value)
    return placed


def cookie_value(text: str) -> str:
    """``text`` as one cookie value: every character outside RFC 6265's cookie-octet percent-encoded (UTF-8)."""
    return quote(text, safe=_COOKIE_SAFE)


def header_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be sent as header ``name`` (a line break, NUL or other control, or a character
    outside Latin-1), or None when it can."""
    control = _HEADER_CONTROLS.search(value)
    if control:
        return (f"the request was not sent: the value of header {name} holds the control character "
                f"{ascii(control.group())[1:-1]} (a line break or NUL could start another header)")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError as exc:
        return (f"the request was not sent: the value of header {name} holds {ascii(value[exc.start])[1:-1]}, "
                "which HTTP headers cannot carry (Latin-1 only); put the value in the query or body")
    return None
