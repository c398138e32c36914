"""Durations as users write them in YAML ("30s", "500ms", "2m") turned into seconds."""

from __future__ import annotations

import math
import re

_DURATION = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?$")
_SECONDS_PER_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: object, *, zero: bool = False) -> float:
    """Seconds for ``value``: a positive number (seconds) or a string like "30s", "500ms", "2m", "1h";
    with ``zero``, 0 too (a delay that may be none at all).

    Raises ValueError with a message naming what was given.
    """
    if isinstance(value, bool):  # bool is an int subclass: "timeout: yes" is a mistake
        raise ValueError(f"expected a duration such as 30s, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value.strip())
        if not match:
            raise ValueError(f"expected a duration such as 30s, 500ms or 2m, got {value!r}")
        seconds = float(match.group(1)) * _SECONDS_PER_UNIT[match.group(2)]
    else:
        raise ValueError(f"expected a duration such as 30s, got {type(value).__name__}")
    if not math.isfinite(seconds):  # YAML's .inf / .nan
        raise ValueError(f"expected a duration such as 30s, got {value!r}")
    if seconds < 0 or (seconds == 0 and not zero):
        raise ValueError(f"a duration must be more than 0, got {value!r}" if not zero
                         else f"a delay cannot be negative, got {value!r}")
    return seconds
