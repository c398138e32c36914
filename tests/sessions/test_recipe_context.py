"""``settings.context`` in recipes and chats: read, checked, saved, and on by default in a chat."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.cli.test_cli_recipe import ROOT
from tests.loop.test_context_window import write_pages_recipe
from tests.sessions.test_chat import QUESTION, chat_server
from tests.sessions.test_recipe import make_project, problems_of, write
from toolrun.loop.context_settings import ContextSettings
from toolrun.sessions.chat import ChatSession
from toolrun.sessions.play import arun
from toolrun.sessions.recipe import load_recipe

LONG_ANSWER = "这家店的玫瑰很好。" * 200  # ~1,800 tokens by the estimate


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def test_a_recipe_reads_its_context_settings_and_leaves_them_off_by_default(project):
    recipe = load_recipe(write(project, """\
        messages: [{user: hi}]
        settings:
          context: {max_input_tokens: 8000, strategy: clear-tool-results}
        """))
    assert recipe.settings.context == ContextSettings(max_input_tokens=8000, strategy="clear-tool-results")
    assert load_recipe(write(project, "messages: [{user: hi}]\nsettings: {context: {}}\n", "b.yaml")).settings.context \
        == ContextSettings()
    assert load_recipe(write(project, "messages: [{user: hi}]\n", "c.yaml")).settings.context is None


def test_bad_context_settings_are_reported_with_their_lines_and_fixes(project):
    problems = problems_of(write(project, """\
        messages: [{user: hi}]
        settings:
          context:
            max_input_tokens: 100
            strategy: drop-newest
            window: 9000
        """))
    assert [(p.line, p.message) for p in problems] == [
        (4, "settings.context.max_input_tokens must be at least 256, not an integer 100"),
        (5, 'settings.context.strategy must be one of "drop-oldest", "clear-tool-results", "summarize", '
            'not a string "drop-newest"'),
        (6, "unknown key 'window' in settings.context"),
    ]


def test_a_recipe_run_document_says_what_each_request_left_out(tmp_path):
    path = write_pages_recipe(tmp_path, pages=3, limit=8000)
    document = asyncio.run(arun(path)).to_json()

    assert document["final"] == "lorem ipsum, every page"
    context = document["context"]
    assert (context["max_input_tokens"], context["strategy"]) == (8000, "drop-oldest")
    assert [event["request"] for event in context["events"]] == [3, 4]
    assert [event["dropped_calls"] for event in context["events"]] == [[turn["tool_calls"][0]["id"]]
                                                                       for turn in document["turns"][:2]]
    assert all(event["tokens_after"] <= 8000 < event["tokens_before"] for event in context["events"])


def test_a_chat_keeps_under_the_models_window_by_default(tmp_path, loopback):
    server = loopback(chat_server)
    env = {"OPENAI_API_KEY": "sk-test-chat-0123456789", "OPENAI_BASE_URL": f"{server.url}/v1"}
    session = ChatSession.open(model="openai:gpt-4o-mini", tools=["get_flower_*"], tools_dir=ROOT / "tools.d",
                               environ=env)
    try:
        result = asyncio.run(session.answer(QUESTION))
        saved = session.save(tmp_path / "saved.yaml")
    finally:
        session.close()
    assert result.context == {"max_input_tokens": 112_000, "strategy": "drop-oldest", "events": []}  # 128k less 1/8
    document = yaml.safe_load(saved[0].read_text(encoding="utf-8"))
    assert document["settings"]["context"] == {"strategy": "drop-oldest"}  # replayed as it was played
    assert load_recipe(saved[0]).settings.context == ContextSettings()


def test_a_long_chat_drops_its_oldest_exchanges_under_its_recipes_limit(project, tmp_path):
    script = tmp_path / "turns.yaml"
    script.write_text(yaml.safe_dump([{"text": f"{number}: {LONG_ANSWER}"} for number in range(4)],
                                     allow_unicode=True), encoding="utf-8")
    recipe = write(project, textwrap.dedent("""\
        model: openai:gpt-4o-mini
        tools_dir: ../tools.d
        messages: [{user: hi}]
        settings:
          context: {max_input_tokens: 5000}
        """))
    session = ChatSession.open(recipe=recipe, model=f"scripted:{script}", tools=["get_flower_*"])
    try:
        results = [asyncio.run(session.answer(f"question {number}")) for number in range(4)]
    finally:
        session.close()
    assert [r.final.split(":")[0] for r in results] == ["0", "1", "2", "3"]
    last = session._scripted.requests[-1].messages  # type: ignore[union-attr]
    assert last[-1].text == "question 3" and last[0].text.startswith("question ")
    assert len(last) < 7  # earlier exchanges went, whole: a question then its answer
    assert [m.role for m in last] == ["user", "assistant"] * (len(last) // 2) + ["user"]
    assert json.dumps(results[-1].context["events"][0]).startswith('{"request": 1')
