"""How long to wait before retrying an HTTP request: the server's word, else backoff.

Shared by the HTTP backend and the provider transport; it reads headers as any mapping so
it needs no HTTP client at import. ``email.utils`` and ``random`` (a few milliseconds of
imports) are imported when a retry is actually due: a run that never retries never needs them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from toolrun.core.json_limits import MAX_BODY_DEPTH, loads_bounded


def body_retry_delay(text: str | None) -> float | None:
    """Seconds from a Google ``RetryInfo`` detail in an error body (``"retryDelay": "34s"``)."""
    if not text or "retryDelay" not in text:
        return None
    try:
        body = loads_bounded(text, MAX_BODY_DEPTH)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else []:
        value = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(value, str) and value.endswith("s"):
            try:
                return max(0.0, float(value[:-1]))
            except ValueError:
                continue
    return None


def retry_delay(headers: Mapping[str, str], attempt: int, body: str | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): the server's word, else backoff.

    The server's word is a ``retry-after-ms`` / ``retry-after`` header or, for Gemini, a
    ``RetryInfo.retryDelay`` in the error ``body`` text.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    if "retry-after" in lowered:
        value = lowered["retry-after"]
        try:
            return max(0.0, float(value))
        except ValueError:
            import email.utils

            try:
                parsed = email.utils.parsedate_to_datetime(value) if value else None
            except (ValueError, TypeError):  # neither seconds nor a date: back off as without the header
                parsed = None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    from_body = body_retry_delay(body)
    if from_body is not None:
        return from_body
    import random

    return min(8.0, 0.5 * (2**attempt)) * (0.75 + random.random() / 2)
