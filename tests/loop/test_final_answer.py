"""The final-answer step of the loop: reading a structured answer, removing strict mode's nulls,
validating, repair turns (on top of max_turns), and an answer cut by the output limit."""

from __future__ import annotations

import asyncio

import pytest

from toolrun.backends.base import CallContext
from toolrun.core.messages import Message, StructuredOutput, TextPart
from toolrun.loop.final_answer import check_answer, without_added_nulls
from toolrun.loop.runner import RunResult, RunSettings, run_conversation
from toolrun.providers.scripted import ScriptedModel

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city"],
          "properties": {"city": {"type": "string"}, "note": {"type": "string"},
                         "maybe": {"type": ["string", "null"]},
                         "shops": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                                                              "open": {"type": "boolean"}}}}}}
OUTPUT = StructuredOutput(SCHEMA)


def _run(model: ScriptedModel, output: StructuredOutput, **settings) -> RunResult:
    return asyncio.run(run_conversation(model, [], system=None, messages=[Message("user", [TextPart("q")])],
                                        settings=RunSettings(output=output, **settings), context=CallContext(environ={})))


def test_nulls_of_optional_properties_go_unless_the_schema_allows_null():
    answer = {"city": "北京", "note": None, "maybe": None, "shops": [{"name": "A", "open": None}]}
    assert without_added_nulls(answer, SCHEMA) == {"city": "北京", "maybe": None, "shops": [{"name": "A"}]}
    assert check_answer('{"city": null}', OUTPUT).errors == ["at $.city: expected string, got null"]  # required: kept


@pytest.mark.parametrize(("text", "error"), [
    ("", "the answer is empty, not JSON"),
    ('{"city": "北', "the answer is not valid JSON (Unterminated string starting at, character 9)"),
    ('{"city": "北京", "x": 1}', "at $: unexpected property 'x' (allowed: city, maybe, note, shops)"),
])
def test_an_unusable_answer_says_why(text, error):
    assert check_answer(text, OUTPUT).errors[0].startswith(error)


def test_a_code_fence_around_the_json_is_read_through():
    assert check_answer('```json\n{"city": "北京"}\n```', OUTPUT).value == {"city": "北京"}


def test_json_mode_takes_any_json():
    assert check_answer("[1, 2]", StructuredOutput(None)).value == [1, 2]


def test_repair_turns_come_on_top_of_max_turns():
    model = ScriptedModel([ScriptedModel.output({"town": "x"}), ScriptedModel.output({"city": "北京"})])
    result = _run(model, OUTPUT, max_turns=1)
    assert result.output == {"city": "北京"} and result.stop_reason == "stop" and len(result.turns) == 2
    repair = model.requests[1].messages[-1]
    assert repair.role == "user" and "missing required property 'city'" in (repair.text or "")


def test_no_retries_fail_at_the_first_invalid_answer():
    result = _run(ScriptedModel([ScriptedModel.output({"city": 1})]), StructuredOutput(SCHEMA, retries=0))
    assert result.stop_reason == "error" and result.failed and result.output is None
    assert result.error is not None and result.error.startswith("the structured answer is not valid: at $.city")


def test_an_answer_cut_by_the_limit_is_never_parsed():
    model = ScriptedModel([ScriptedModel.text('{"city": "北京"}', stop_reason="length")])  # parses, but was cut
    result = _run(model, OUTPUT)
    assert result.stop_reason == "length" and result.output is None and result.failed
    assert len(model.requests) == 1 and "incomplete" in (result.error or "")


def test_the_request_carries_the_output_to_the_adapter():
    model = ScriptedModel([ScriptedModel.output({"city": "北京"})])
    _run(model, OUTPUT)
    assert model.requests[0].settings.output is OUTPUT


def test_a_null_answer_is_an_answer_where_the_schema_allows_null():
    nullable = StructuredOutput({"type": ["object", "null"], "properties": {"city": {"type": "string"}}}, retries=0)
    result = _run(ScriptedModel([ScriptedModel.output(None)]), nullable)
    assert not result.failed and result.stop_reason == "stop" and result.output is None
    assert result.to_json()["output"] is None and "error" not in result.to_json()
    refused = _run(ScriptedModel([ScriptedModel.output(None)]), StructuredOutput(SCHEMA, retries=0))
    assert refused.failed and refused.stop_reason == "error" and "expected object, got null" in (refused.error or "")
