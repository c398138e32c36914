"""When to try an HTTP request again and how long to wait first: one policy for the provider
transport and the http backend.

Each caller keeps its own loop (a stream cannot retry once lines went out; a tool call
returns the last response rather than raising) and asks the policy the same questions:
may attempt N be retried, does this status ask for a retry, and how long to wait — the
server's ``Retry-After`` word, else backoff with jitter (``retry_after``), never past ``max_wait``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from toolrun.core.retry_after import retry_delay


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` after the first attempt, on ``statuses`` and connection failures."""

    retries: int
    statuses: frozenset[int]
    max_wait: float  # a longer wait the server asks for is not slept: the caller reports the answer
    # Honour a server's ``x-should-retry: true|false`` over the status (Anthropic and OpenAI send it).
    should_retry_header: bool = False

    def may_retry(self, attempt: int) -> bool:
        """Whether attempt ``attempt`` (0-based) that failed may be followed by another."""
        return attempt < self.retries

    def retries_status(self, status: int, headers: Mapping[str, str], attempt: int) -> bool:
        """Whether a response with ``status`` after attempt ``attempt`` is worth another attempt."""
        if not self.may_retry(attempt):
            return False
        hint = headers.get("x-should-retry") if self.should_retry_header else None
        if hint is not None:
            return hint.lower() == "true"
        return status in self.statuses

    def wait_for_status(self, headers: Mapping[str, str], attempt: int, body: str | None = None) -> float:
        """Seconds before the next attempt after an error status: the server's word, else backoff.

        May exceed ``max_wait``: the caller compares (``too_long``) and says what the server asked.
        """
        return retry_delay(headers, attempt, body)

    def too_long(self, delay: float) -> bool:
        return delay > self.max_wait

    def wait_after_failure(self, attempt: int) -> float:
        """Seconds before the next attempt after a connection failure or timeout: backoff, at most ``max_wait``."""
        return min(retry_delay({}, attempt), self.max_wait)
