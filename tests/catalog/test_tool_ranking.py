"""The lexical ranking of a catalog for a text (``toolrun.catalog.tool_ranking``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolrun.catalog.tool_ranking import ToolIndex, ToolText, stem, terms

SAMPLE = Path(__file__).parent.parent / "fixtures" / "bfcl" / "sample.json"


@pytest.mark.parametrize(("word", "stemmed"), [
    ("locations", "locat"), ("located", "locat"), ("location", "locat"), ("locate", "locat"),
    ("forecasts", "forecast"), ("currencies", "currency"), ("running", "run"), ("speed", "speed"),
    ("address", "address"), ("status", "status"), ("searches", "search"), ("bus", "bus"),
])
def test_stem_takes_one_common_ending_off(word: str, stemmed: str) -> None:
    assert stem(word) == stemmed


def test_identifiers_split_into_words() -> None:
    assert terms("getCurrentWeather weather.get_by_coordinates") == ["get", "current", "weath", "weath", "get",
                                                                      "coordinat"]


def _index() -> ToolIndex:
    return ToolIndex([
        ToolText("get_current_weather", "Returns the current weather of a city.",
                 {"type": "object", "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}),
        ToolText("convert_currency", "Converts an amount of money.",
                 {"type": "object", "properties": {"from_currency": {"type": "string"}}}),
        ToolText("list_files", "Lists a folder's files.", {}),
    ])


def test_the_tool_a_text_is_about_comes_first_and_unrelated_tools_score_zero() -> None:
    ranked = _index().rank("What's the weather in Boston in fahrenheit?")
    assert ranked[0].name == "get_current_weather" and ranked[0].score > 0
    assert [tool.score for tool in ranked[1:]] == [0.0, 0.0]
    assert _index().rank("convert 20 euros to another currency", 1)[0].name == "convert_currency"


def test_the_ranking_is_the_same_every_time() -> None:
    text = "list the files, then the weather"
    assert _index().rank(text) == _index().rank(text)


def test_a_question_word_finds_the_tool_that_answers_it() -> None:
    index = ToolIndex([ToolText("get_event_date", "Retrieve the date of a historical event.", {}),
                       ToolText("get_event_place", "Retrieve where an event happened, by name.", {})])
    assert index.rank("When was the signing event of the treaty?")[0].name == "get_event_date"


def test_recall_on_a_sample_of_the_public_benchmark() -> None:
    sample = json.loads(SAMPLE.read_text())
    index = ToolIndex(ToolText(tool["name"], tool["description"], tool["parameters"]) for tool in sample["tools"])
    found = [set(question["functions"]) <= {tool.name for tool in index.rank(question["question"], 5)}
             for question in sample["questions"]]
    # a catalog of 71 tools and 30 questions: the right tool is in the top 5 of all but the odd one
    assert sum(found) >= len(found) - 2, [q["id"] for q, ok in zip(sample["questions"], found, strict=True) if not ok]
