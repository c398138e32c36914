"""The string formats a model gets wrong, checked in tool arguments: each with the form it expects.

``format`` in a parameter schema only annotates by default in JSON Schema; an API that reads
``since`` as a date-time answers ``since=yesterday`` with a 422 whose reason the model may
never see. These checks (standard library only) let the model fix its call before anything
is sent. A schema that uses none of these formats never runs them.
"""

from __future__ import annotations

import ipaddress
import re
import uuid
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")


def _date_time(value: str) -> bool:
    if not _DATE_TIME.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:  # 2024-13-40T25:00:00Z has the shape, not the meaning
        return False
    return True


def _date(value: str) -> bool:
    if not _DATE.fullmatch(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _time(value: str) -> bool:
    match = _TIME.fullmatch(value)
    return match is not None and int(match.group(1)) < 24 and int(match.group(2)) < 60 and int(match.group(3)) <= 60


def _address(kind: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            kind(value)
        except ValueError:
            return False
        return True

    return check


def _uuid(value: str) -> bool:
    return bool(_UUID.fullmatch(value)) and _address(uuid.UUID)(value)


# format -> (check of a string, the form the model is told to write)
FORMATS: dict[str, tuple[Callable[[str], bool], str]] = {
    "date-time": (_date_time, "a date-time in RFC 3339 form with a time zone, like 2024-05-01T09:30:00Z"),
    "date": (_date, "a date in the form YYYY-MM-DD, like 2024-05-01"),
    "time": (_time, "a time in the form HH:MM:SS, like 09:30:00 (optionally with Z or +02:00)"),
    "uuid": (_uuid, "a UUID like 123e4567-e89b-12d3-a456-426614174000"),
    "email": (lambda value: bool(_EMAIL.fullmatch(value)), "an email address like name@example.com"),
    "ipv4": (_address(ipaddress.IPv4Address), "an IPv4 address like 192.0.2.10"),
    "ipv6": (_address(ipaddress.IPv6Address), "an IPv6 address like 2001:db8::1"),
    "uri": (lambda value: bool(_URI.fullmatch(value)), "an absolute URI with its scheme, like https://example.com/path"),
}


def matches_format(name: str, value: Any) -> bool:
    """True when ``value`` has format ``name`` (any value for an unchecked format, any non-string)."""
    check = FORMATS.get(name)
    return check is None or not isinstance(value, str) or check[0](value)


def expected_form(name: str) -> str:
    """What a value of format ``name`` looks like, for the model's error."""
    return FORMATS[name][1] if name in FORMATS else f"a {name}"


def uses_checked_format(schema: Any, depth: int = 0) -> bool:
    """True when ``schema`` says ``format`` with one of FORMATS anywhere (a property named "format" is no keyword)."""
    if depth > 64:
        return False
    if isinstance(schema, dict):
        if isinstance(schema.get("format"), str) and schema["format"] in FORMATS:
            return True
        return any(uses_checked_format(value, depth + 1) for value in schema.values())
    if isinstance(schema, list):
        return any(uses_checked_format(value, depth + 1) for value in schema)
    return False
