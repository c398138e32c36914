"""A batch extracting fields: a recipe with ``output:`` over rows, each result line carrying the
row's parsed answer — against a loopback server speaking OpenAI Chat, with the real tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.batch.test_batch import FAKE_KEY, clean_env, invoke
from tests.batch_world import make_world, read_lines, write_rows
from tests.loopback import Recorded, Reply

OUTPUT_SECTION = """\
output:
  schema:
    type: object
    properties: {city: {type: string}, flower: {type: string}, count: {type: integer}}
    required: [city, flower, count]
    additionalProperties: false
expect:
  output: {city: 北京}
"""


def _answer(content: Any = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 10}}


def _extracting_model(request: Recorded) -> Reply:
    """Calls the stock tool for the row's city, then answers the fields it read from the result."""
    messages = request.json()["messages"]
    city = messages[0]["content"].split("的")[0]
    if messages[-1]["role"] != "tool":
        arguments = json.dumps({"city": city}, ensure_ascii=False)
        return Reply(200, _answer(calls=[{"id": "call_1", "type": "function",
                                          "function": {"name": "get_flower_inventory", "arguments": arguments}}]))
    flower, count = messages[-1]["content"].split(": ")
    return Reply(200, _answer(json.dumps({"city": city, "flower": flower, "count": int(count)}, ensure_ascii=False)))


def test_a_batch_extracts_fields_per_row(tmp_path: Path, loopback):
    recipe = make_world(tmp_path)
    text = recipe.read_text(encoding="utf-8")
    recipe.write_text(text[:text.index("expect:")] + OUTPUT_SECTION, encoding="utf-8")
    write_rows(tmp_path / "rows.jsonl", 3)
    server = loopback(_extracting_model)
    result = invoke("batch", str(recipe), "--inputs", str(tmp_path / "rows.jsonl"), "--out", str(tmp_path / "out.jsonl"),
                    "--no-log", env=clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=server.url))
    lines = sorted(read_lines(tmp_path / "out.jsonl"), key=lambda line: line["row"])
    assert [line["output"] for line in lines] == [{"city": "北京", "flower": "玫瑰", "count": 100},
                                                  {"city": "上海", "flower": "百合", "count": 80},
                                                  {"city": "深圳", "flower": "向日葵", "count": 200}]
    # expect.output holds every row to city 北京: the other two rows fail that check, by name
    assert [line["status"] for line in lines] == ["ok", "expect_failed", "expect_failed"]
    assert lines[1]["expect"]["failures"] == ['expect.output: city is "上海", not "北京"']
    assert result.exit_code == 0, result.stderr  # every run ran, whatever the pass rate
    asked = [request.json() for request in server.requests]
    assert all(body["response_format"]["type"] == "json_schema" for body in asked)
    assert all(body["tools"][0]["function"]["name"] == "get_flower_inventory" for body in asked)
