"""The string formats a model gets wrong, checked in tool arguments: each with the form it expects.

``format`` in a parameter schema only annotates by default in JSON Schema; an API that reads
``since`` as a date-time answers ``since=yesterday`` with a 422 whose reason the model may
never see. The checks (``format_checks``, imported only once a schema uses one of these
formats) let the model fix its call before anything is sent.
"""

from __future__ import annotations

from typing import Any

# format -> the form the model is told to write (the checks: core/format_checks.py)
EXPECTED_FORMS: dict[str, str] = {
    "date-time": "a date-time in RFC 3339 form with a time zone, like 2024-05-01T09:30:00Z",
    "date": "a date in the form YYYY-MM-DD, like 2024-05-01",
    "time": "a time in the form HH:MM:SS, like 09:30:00 (optionally with Z or +02:00)",
    "uuid": "a UUID like 123e4567-e89b-12d3-a456-426614174000",
    "email": "an email address like name@example.com",
    "ipv4": "an IPv4 address like 192.0.2.10",
    "ipv6": "an IPv6 address like 2001:db8::1",
    "uri": "an absolute URI with its scheme, like https://example.com/path",
}


def expected_form(name: str) -> str:
    """What a value of format ``name`` looks like, for the model's error."""
    return EXPECTED_FORMS.get(name, f"a {name}")


def uses_checked_format(schema: Any, depth: int = 0) -> bool:
    """True when ``schema`` says ``format`` with a checked one anywhere (a property named "format" is no keyword)."""
    if depth > 64:
        return False
    if isinstance(schema, dict):
        if isinstance(schema.get("format"), str) and schema["format"] in EXPECTED_FORMS:
            return True
        return any(uses_checked_format(value, depth + 1) for value in schema.values())
    if isinstance(schema, list):
        return any(uses_checked_format(value, depth + 1) for value in schema)
    return False
