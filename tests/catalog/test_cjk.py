"""CJK characters told by code point agree with the character class as a regex, before and
after ``cjk_count`` switches to the regex; and one tool's lint needs no similarity search."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property_budget import property_examples
from toolrun.catalog import cjk
from toolrun.catalog.lint import near_duplicate_findings
from toolrun.core.tool import BackendSpec, SourceLocation, Tool

REGEX = re.compile("[\u4e00-\u9fff\u3400-\u4dbf\u3040-\u30ff\uac00-\ud7af\uf900-\ufaff]")  # the class as it was written
# Around every range's ends, and plain text: an off-by-one at any end shows.
EDGES = [chr(code + delta) for first, last in cjk.CJK_RANGES for code in (first, last) for delta in (-1, 0, 1)]
texts = st.text(st.sampled_from(EDGES) | st.characters(), max_size=30)


def test_the_class_is_the_one_the_regex_was_written_with() -> None:
    assert cjk.CJK_CLASS == REGEX.pattern


@given(texts)
@settings(max_examples=property_examples(150), deadline=None)
def test_characters_told_by_code_point_agree_with_the_regex(text: str) -> None:
    assert cjk.is_cjk(text) == (REGEX.match(text) is not None)
    assert cjk.has_cjk(text) == (REGEX.search(text) is not None)
    assert cjk.cjk_count(text) == len(REGEX.findall(text))


@pytest.mark.parametrize("counted_so_far", [0, 10**9])  # counted by code point, then by the regex
def test_cjk_count_is_the_same_either_way(monkeypatch: pytest.MonkeyPatch, counted_so_far: int) -> None:
    monkeypatch.setattr(cjk, "_counted", counted_so_far)
    text = "".join(EDGES) + "北京、上海 abc カナ 한국"
    assert cjk.cjk_count(text) == len(REGEX.findall(text)) == 28  # 4 edge characters per range, and 8
    assert cjk.cjk_count("plain ascii") == 0


def test_one_tool_has_no_near_duplicate() -> None:
    tool = Tool(name="get_stock", description="Returns the stock.", parameters={"type": "object", "properties": {}},
                backend=BackendSpec("python", {"function": "x.py:f"}), source=SourceLocation(Path("t.yaml"), 1, {}))
    assert near_duplicate_findings([tool]) == near_duplicate_findings([]) == []
