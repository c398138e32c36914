"""The checks of ``core/formats.py``'s formats, standard library only (ipaddress, uuid and datetime cost
start-up time: imported only once a schema uses a checked format)."""

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


CHECKS: dict[str, Callable[[str], bool]] = {
    "date-time": _date_time, "date": _date, "time": _time, "uuid": _uuid,
    "email": lambda value: bool(_EMAIL.fullmatch(value)),
    "ipv4": _address(ipaddress.IPv4Address), "ipv6": _address(ipaddress.IPv6Address),
    "uri": lambda value: bool(_URI.fullmatch(value)),
}


def matches_format(name: str, value: Any) -> bool:
    """True when ``value`` has format ``name`` (any value for an unchecked format, any non-string)."""
    check = CHECKS.get(name)
    return check is None or not isinstance(value, str) or check(value)
