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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

from toolrun.core.text import excerpt

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


class DelimiterInItem(ValueError):
    """An item holds the character that separates the items, where the wire cannot tell the two apart."""

    def __init__(self, item: str, delimiter: str) -> None:
        super().__init__(item, delimiter)
        self.item, self.delimiter = item, delimiter


class UnsendableArgument(ValueError):
    """An argument the request cannot carry as the API would read it; the message is for the model."""


def query_text(text: str) -> str:
    """``text`` percent-encoded for a query string, as an HTML form writes it (a space as ``+``)."""
    return quote_plus(text, safe="")


def path_text(text: str) -> str:
    """``text`` percent-encoded as one path segment (``/`` included)."""
    return quote(text, safe="")


def _as_written(text: str) -> str:
    return text


# How each location writes an item's text; a header, a cookie (cookie_value encodes the whole) and a form
# field (httpx form-encodes it) as they are.
_ENCODINGS: dict[str, Callable[[str], str]] = {"query": query_text, "path": path_text}


def _encoding(placement: Placement) -> Callable[[str], str]:
    return _ENCODINGS.get(placement.location, _as_written)


def _joined(placement: Placement, texts: list[str], delimiter: str) -> str:
    """Items joined with ``delimiter``. In a query or path a comma goes as itself and a comma inside an item
    percent-encoded (RFC 6570: ``a,b%2Cc`` is two items); where the delimiter is encoded like the items' own
    characters (a space, |, tab; any delimiter in a header, cookie or form field), an item holding it is refused."""
    encode = _encoding(placement)
    if delimiter == "," and placement.location in _ENCODINGS:
        return delimiter.join(encode(text) for text in texts)
    for text in texts:
        if delimiter in text:
            raise DelimiterInItem(text, delimiter)
    return encode(delimiter.join(texts))


def _members(value: Mapping[Any, Any]) -> list[str]:
    """An object's keys and values, one after the other (``key,value,key,value``)."""
    return [text for key, item in value.items() for text in (str(key), scalar_text(item))]


def _exploded_members(placement: Placement, value: Mapping[Any, Any]) -> str:
    """``key=value`` pairs, comma-separated: a header or path object with explode: true."""
    encode = _encoding(placement)
    written = [(str(key), scalar_text(item)) for key, item in value.items()]
    if placement.location != "path":  # a header: nothing is encoded, so neither "," nor a key's "=" can be told
        for key, item in written:
            for text, separators in ((key, ",="), (item, ",")):
                if found := next((c for c in separators if c in text), None):
                    raise DelimiterInItem(text, found)
    return ",".join(f"{encode(key)}={encode(item)}" for key, item in written)


def pairs(placement: Placement, value: Any) -> list[tuple[str, str]]:
    """(name, text) pairs for a query parameter (percent-encoded, as they go on the wire) or a form field (as
    text: the form body is encoded whole), per style and explode."""
    name, style, explode = placement.name, placement.style, placement.explode
    encode = _encoding(placement)
    if isinstance(value, list):
        if explode and style == "form":
            return [(encode(name), encode(scalar_text(v))) for v in value]
        return [(encode(name), _joined(placement, [scalar_text(v) for v in value], _DELIMITERS.get(style, ",")))]
    if isinstance(value, dict):
        if style == "deepObject":
            return [(encode(f"{name}[{key}]"), encode(scalar_text(v))) for key, v in value.items()]
        if explode:
            return [(encode(str(key)), encode(scalar_text(v))) for key, v in value.items()]
        return [(encode(name), _joined(placement, _members(value), ","))]
    return [(encode(name), encode(scalar_text(value)))]


def simple_text(placement: Placement, value: Any) -> str:
    """A header or cookie value as text, a path value percent-encoded: arrays comma-separated (or as the style
    says), objects as key,value pairs (or key=value exploded)."""
    if isinstance(value, list):
        return _joined(placement, [scalar_text(v) for v in value], _DELIMITERS.get(placement.style, ","))
    if isinstance(value, dict):
        if placement.explode and placement.location != "cookie":
            return _exploded_members(placement, value)
        return _joined(placement, _members(value), ",")
    return _encoding(placement)(scalar_text(value))


@dataclass
class PlacedArguments:
    """The arguments of one call, sorted by where they go. Query pairs and path values are percent-encoded,
    as they go on the wire; the rest is text."""

    query: list[tuple[str, str]]
    headers: dict[str, str]
    cookies: list[tuple[str, str]]
    path: dict[str, str]
    body: dict[str, Any]
    form: list[tuple[str, str]]
    json_body: Any
    has_json_body: bool


_WHERE = {"query": "the query", "path": "the path", "header": "header {name}", "cookie": "cookie {name}",
          "form": "the form body"}


def place(arguments_config: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> PlacedArguments:
    """Where each given argument goes; absent arguments are left out (nulls too, except in a JSON body).
    ``UnsendableArgument`` when an item holds its own delimiter where the wire cannot tell them apart."""
    placed = PlacedArguments([], {}, [], {}, {}, [], None, False)
    for argument, placement in placements(arguments_config).items():
        if argument not in arguments:
            continue
        try:
            _place_one(placed, argument, placement, arguments[argument])
        except DelimiterInItem as exc:
            where = _WHERE[placement.location].format(name=placement.name)
            raise UnsendableArgument(
                f"the request was not sent: argument {argument!r} has an item {excerpt(exc.item, 60)!r} that holds "
                f"{exc.delimiter!r}, which separates its items in {where} (style {placement.style}): the API would "
                f"read it as more than one; send items without {exc.delimiter!r}") from None
    return placed


def _place_one(placed: PlacedArguments, argument: str, placement: Placement, value: Any) -> None:
    if placement.location == "body":
        placed.body[placement.name] = value
    elif placement.location == "json":
        placed.json_body, placed.has_json_body = value, True
    elif value is None:
        return
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
