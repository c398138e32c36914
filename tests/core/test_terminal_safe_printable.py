"""terminal_safe returns printable text as it is, without a search: that holds only if no printable
character is one a terminal acts on."""

from __future__ import annotations

from toolrun.core.text import _terminal_control, terminal_safe


def test_no_printable_character_is_one_terminal_safe_escapes() -> None:
    # The characters terminal_safe escapes are all below U+10000 (C0, C1, bidi and line controls).
    printable = "".join(filter(str.isprintable, map(chr, range(0x10000))))
    assert _terminal_control().search(printable) is None
    assert terminal_safe(printable) is printable


def test_printable_lines_are_returned_without_a_search() -> None:
    text = "北京: 玫瑰 100\n\t上海: 百合 80\n"
    _terminal_control.cache_clear()
    assert terminal_safe(text) is text
    assert _terminal_control.cache_info().currsize == 0  # not searched: the pattern was not even compiled
    assert _terminal_control().search(text) is None  # and a search would have found nothing


def test_text_with_a_control_is_still_escaped() -> None:
    assert terminal_safe("a\x1b[31mb\rc\r\nd\u202e") == "a\\x1b[31mb\\x0dc\r\nd\\u202e"
