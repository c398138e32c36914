"""Chinese, Japanese and Korean characters: which they are, and how many a text has.

As a regex the character class takes 3-10 ms to compile (a bitmap of every BMP code
point), more than a command that looks at one tool spends on all its lint. So characters
are told by code point, and the regex is compiled only once a process has counted enough
text for it to pay off.
"""

from __future__ import annotations

import functools
import re

# Ideographs (+ extension A, compatibility), kana, hangul: (first, last) code points.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x3040, 0x30FF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF))
CJK_CLASS = "[" + "".join(f"{chr(first)}-{chr(last)}" for first, last in CJK_RANGES) + "]"
# Characters counted one by one before the regex is compiled: about what its compiling costs.
_COUNTED_BEFORE_REGEX = 50_000
_counted = 0


def _is_cjk_code(code: int) -> bool:
    return (0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x3040 <= code <= 0x30FF
            or 0xAC00 <= code <= 0xD7AF or 0xF900 <= code <= 0xFAFF)


def is_cjk(char: str) -> bool:
    """True when ``char`` (its first character) is Chinese, Japanese or Korean."""
    return bool(char) and _is_cjk_code(ord(char[0]))


def has_cjk(text: str) -> bool:
    """True when any character of ``text`` is Chinese, Japanese or Korean."""
    return not text.isascii() and any(_is_cjk_code(ord(char)) for char in text)


@functools.cache
def cjk_pattern() -> re.Pattern[str]:
    """The character class as a compiled regex (compiled at the first call)."""
    return re.compile(CJK_CLASS)


def cjk_count(text: str) -> int:
    """How many characters of ``text`` are Chinese, Japanese or Korean."""
    global _counted
    if text.isascii():
        return 0
    if _counted < _COUNTED_BEFORE_REGEX:
        _counted += len(text)
        return sum(1 for char in text if _is_cjk_code(ord(char)))
    return len(cjk_pattern().findall(text))
