"""One rate limiter for every run of a batch that talks to the same provider.

It spaces requests to ``settings.rate_limit`` (requests per minute) and pauses every run
when the provider says so: a 429/503 with ``retry-after``, or an ``x-ratelimit-remaining-*``
(``anthropic-ratelimit-*-remaining``) of 0 until its reset. The transport still retries the
request that was refused; the others wait instead of being refused too — a batch slows
down instead of failing.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime

from toolrun.core.retry_after import retry_delay

PAUSE_STATUSES = frozenset({429, 503, 529})
MAX_PAUSE_S = 120.0  # a longer wait (a daily quota) is the transport's to report, not ours to sleep
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class RateLimiter:
    """Hands out request slots: no faster than ``per_minute``, and not before a provider's pause ends."""

    def __init__(self, per_minute: float | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.clock = clock
        self._next_slot = 0.0
        self._paused_until = 0.0
        self.pauses = 0  # how often a provider asked the batch to slow down

    def reserve(self) -> float:
        """Take the next slot; returns the seconds to wait before using it."""
        now = self.clock()
        start = max(now, self._next_slot, self._paused_until)
        self._next_slot = start + self.interval
        return start - now

    async def wait(self) -> None:
        """Return when the next request may go out."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)

    def observe(self, status: int, headers: Mapping[str, str]) -> None:
        """Pause every run when a response says the provider's limit is reached."""
        self.pause(provider_pause(status, headers))

    def pause(self, seconds: float) -> None:
        """No slot before ``seconds`` from now (0: nothing changes)."""
        if seconds > 0:
            self.pauses += 1
            self._paused_until = max(self._paused_until, self.clock() + min(seconds, MAX_PAUSE_S))


def provider_pause(status: int, headers: Mapping[str, str]) -> float:
    """Seconds the provider asks everyone to wait after this response (0: no pause)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    if status in PAUSE_STATUSES:
        return retry_delay(lowered, 0)
    pause = 0.0
    for key, value in lowered.items():
        if _is_exhausted(key, value):
            pause = max(pause, _reset_seconds(lowered, key))
    return pause


def _is_exhausted(key: str, value: str) -> bool:
    limited = key.startswith("x-ratelimit-remaining-") or (key.startswith("anthropic-ratelimit-") and key.endswith("-remaining"))
    return limited and value.strip() == "0"


def _reset_seconds(headers: Mapping[str, str], remaining_key: str) -> float:
    """The reset header beside a ``remaining`` one: ``6m0s`` (OpenAI) or an RFC 3339 time (Anthropic)."""
    reset = headers.get(remaining_key.replace("remaining", "reset"), "")
    if not reset:
        return 1.0  # exhausted with no reset given: a short pause, then the server's word again
    parts = _DURATION_PART.findall(reset)
    if parts and "".join(number + unit for number, unit in parts) == reset.strip():
        return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    try:
        return max(0.0, float(reset))
    except ValueError:
        pass
    try:
        return max(0.0, datetime.fromisoformat(reset.replace("Z", "+00:00")).timestamp() - time.time())
    except ValueError:
        return 1.0
