"""Token estimates of message text for the context window, and cutting a text to a number of tokens.

An estimate, not a tokenizer (none is downloaded at run time): CJK characters count one token
each, the rest ``chars_per_token`` characters a token, the figure each adapter states for its
models' tokenizers. The context window corrects it by the usage answers report.
"""

from __future__ import annotations

import math

from toolrun.catalog.cjk import cjk_count


def estimate_text(text: str, chars_per_token: float) -> int:
    """Estimated tokens of ``text``: CJK characters one each, the rest ``chars_per_token`` a token."""
    cjk = cjk_count(text)
    return cjk + math.ceil((len(text) - cjk) / chars_per_token)


def cut_to_tokens(text: str, tokens: int, chars_per_token: float, *, what: str) -> str:
    """``text`` cut to at most ``tokens`` by the estimate, with a marker saying how long it was."""
    marker = f"\n[… cut to fit the context window: {what} had {len(text):,} characters]"
    room = tokens - estimate_text(marker, chars_per_token)
    if room <= 0:
        return marker.strip()
    keep = min(len(text), int(room * chars_per_token))
    while keep > 0 and estimate_text(text[:keep], chars_per_token) > room:
        keep = int(keep * 0.9)
    return text[:keep] + marker
