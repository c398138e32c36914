"""A run under ``settings.context: summarize`` records its summary requests like any other and
replays offline from that recording, asking exactly what it asked live."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.loop.test_context_window import write_pages_recipe
from tests.loopback import Recorded, Reply
from toolrun.sessions.play import arun

SUMMARY = "Pages 1 and 2 were lorem ipsum."


def reading_model(pages: int):
    """An OpenAI Chat model that reads ``pages`` pages, then answers; a request without tools is a summary."""
    asked = [0]

    def handler(request: Recorded) -> Reply:
        usage = {"prompt_tokens": len(request.body) // 4, "completion_tokens": 10}
        if "tools" not in request.json():
            message: dict = {"role": "assistant", "content": SUMMARY}
        elif asked[0] < pages:
            asked[0] += 1
            call = {"id": f"call_{asked[0]}", "type": "function",
                    "function": {"name": "read_page", "arguments": json.dumps({"page": asked[0]})}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": "lorem ipsum, every page"}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return Reply(body={"choices": [{"index": 0, "finish_reason": finish, "message": message}], "usage": usage})
    return handler


def test_summary_requests_are_recorded_and_replayed_without_divergence(tmp_path: Path, loopback) -> None:
    server = loopback(reading_model(4))
    recipe = write_pages_recipe(tmp_path, pages=4, limit=8000)
    recipe.write_text(
        recipe.read_text(encoding="utf-8").replace("scripted:turns.yaml", "openai:gpt-4o-mini")
        .replace("{max_input_tokens: 8000}", "{max_input_tokens: 8000, strategy: summarize}, stream: false")
        + f"provider: {{base_url: '{server.url}/v1'}}\n", encoding="utf-8")
    cassette = tmp_path / "pages.cassette.json"
    live = asyncio.run(arun(recipe, mode="live", record=cassette, environ={}))
    summaries = [r for r in server.requests if "tools" not in r.json()]
    assert live.final == "lorem ipsum, every page" and summaries
    assert live.recorded_exchanges == len(server.requests) == 5 + len(summaries)
    assert SUMMARY in server.requests[-1].json()["messages"][0]["content"]  # the system prompt carries it

    replayed = asyncio.run(arun(recipe, mode="replay", environ={}))
    assert replayed.final == live.final and replayed.divergences == []
    assert replayed.context == live.context and any(e.get("summarized") for e in replayed.context["events"])
    assert len(server.requests) == 5 + len(summaries)  # the replay asked nobody
