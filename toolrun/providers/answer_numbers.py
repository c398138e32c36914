"""Numbers in a provider's answer, checked like every other field of it.

JSON lets a server send ``1e400``, ``Infinity``, ``NaN``, ``-3``, ``2.5`` or ``true`` where a
count belongs; ``int()`` of the first two raises OverflowError, a traceback instead of the
one-line provider error. Every adapter reads its token counts and stream indexes here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolrun.core.errors import ProviderError
from toolrun.core.text import excerpt

MAX_TOKEN_COUNT = 10**12  # no request reads or writes a trillion tokens
MAX_STREAM_INDEX = 2**31  # content blocks and calls of one answer


def whole_number(value: Any, field: str, limit: int) -> int:
    """``value`` as an int from 0 to ``limit`` (a float only when whole); ProviderError naming ``field`` otherwise."""
    if isinstance(value, float) and value.is_integer():  # 7.0 as some servers write it; never inf or NaN
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ProviderError(f"the provider's answer has an impossible {field}: {_shown(value)} "
                            f"(expected a whole number from 0 to {limit:,})")
    return value


def token_count(fields: Mapping[str, Any], key: str, where: str = "usage") -> int:
    """The token count under ``key`` of a usage object (0 when absent or null)."""
    value = fields.get(key)
    return 0 if value is None else whole_number(value, f"{where}.{key}", MAX_TOKEN_COUNT)


def stream_index(value: Any, field: str = "index") -> int:
    """A stream event's index of a content block or call."""
    return whole_number(value, field, MAX_STREAM_INDEX)


def _shown(value: Any) -> str:
    try:
        return excerpt(json.dumps(value), 40)  # as the server wrote it: Infinity, true, "12"
    except ValueError:  # an int of more digits than Python will print
        return "a number too long to show"
