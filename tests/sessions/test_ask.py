"""``toolrun ask``: one question with tools, played like a recipe — against a loopback
OpenAI server, the shipped recording and a scripted model; in-process (click's runner), and
through the real console script for the prompt read from stdin."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ANSWER, ROOT, TOOLRUN, clean_env, fake_openai, invoke, live_env, make_world
from tests.cli.test_cli_recipe import toolrun_in_process as run
from toolrun.core.templates import render
from toolrun.sessions.ask import adhoc_recipe, literal_template

QUESTION = "北京、上海和深圳的鲜花库存是多少?"


def _without_timing(document: dict) -> dict:
    for turn in document["turns"]:
        for call in turn["tool_calls"]:
            call.pop("duration_ms")
    return document


def test_ask_runs_the_three_calls_concurrently_and_prints_like_a_recipe(tmp_path: Path, loopback) -> None:
    server = loopback(fake_openai)
    recipe = make_world(tmp_path, delay=0.1)
    db = tmp_path / "logs.db"
    env = {**live_env(server), "TOOLRUN_LOGS": str(db)}
    asked = run("ask", QUESTION, "--tools", "get_flower_*", "--model", "openai:gpt-4o-mini", env=env, cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.strip() == ANSWER
    played = run("recipe", recipe.name, env=env, cwd=tmp_path)
    # the same lines as a recipe run: load summary, three calls, the summary line
    strip = [line for line in asked.stderr.splitlines() if " ms: " not in line]
    assert strip == [line for line in played.stderr.splitlines() if " ms: " not in line]
    assert asked.stderr.strip().splitlines()[-1] == "2 turns · 3 tool calls · 330 in / 157 out tokens · live"

    logged = json.loads(invoke("logs", "show", "1", "--json", env=env).stdout)
    assert (logged["command"], logged["recipe"], logged["prompt"]) == ("ask", "ask", QUESTION)
    calls = logged["turns"][0]["tool_calls"]
    assert len(calls) == 3
    latest_start, earliest_end = max(c["started_at"] for c in calls), min(c["ended_at"] for c in calls)
    assert latest_start < earliest_end, "the three calls ran one after another"


def test_ask_json_is_the_recipe_document(tmp_path: Path, loopback) -> None:
    server = loopback(fake_openai)
    recipe = make_world(tmp_path)
    asked = run("ask", QUESTION, "--tools", "get_flower_*", "--model", "openai:gpt-4o-mini", "--json",
                    "--no-log", env=live_env(server), cwd=tmp_path)
    played = run("recipe", str(recipe), "--json", "--no-log", env=live_env(server), cwd=tmp_path)
    assert asked.returncode == 0, asked.stderr
    document, expected = json.loads(asked.stdout), json.loads(played.stdout)
    assert document.pop("recipe") == "ask" and expected.pop("recipe") == "shops"
    assert _without_timing(document) == _without_timing(expected)


def test_ask_against_the_shipped_recording_reads_the_prompt_from_stdin() -> None:
    completed = subprocess.run(
        [str(TOOLRUN), "ask", "-", "--tools", "get_flower_*", "--replay", "recipes/inventory.cassette.json", "--no-log"],
        input=QUESTION + "\n", env=clean_env(), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == ANSWER  # the model comes from the recording: openai:gpt-4o-mini
    assert completed.stderr.strip().splitlines()[-1] == "2 turns · 3 tool calls · 330 in / 157 out tokens · replay"



def test_ask_recorded_replays_without_divergence_and_the_recipes_recording_with_some(tmp_path: Path, loopback) -> None:
    """What docs/history.md says of its two replay examples."""
    server = loopback(fake_openai)
    make_world(tmp_path)
    cassette = tmp_path / "asked.cassette.json"
    recorded = run("ask", QUESTION, "--tools", "get_flower_*", "--model", "openai:gpt-4o-mini", "--record",
                       str(cassette), "--no-log", env=live_env(server), cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    server.stop()
    replayed = run("ask", QUESTION, "--tools", "get_flower_*", "--replay", str(cassette), "--no-log", cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.strip() == ANSWER and "divergence" not in replayed.stderr
    shipped = run("ask", QUESTION, "--tools", "get_flower_*", "--replay", "recipes/inventory.cassette.json", "--no-log")
    assert shipped.returncode == 0 and shipped.stdout.strip() == ANSWER
    assert "replay divergence at exchange 1: request field temperature differs" in shipped.stderr

def test_ask_with_a_scripted_model_keeps_braces_as_typed(tmp_path: Path) -> None:
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls: [{name: get_flower_inventory, arguments: {city: 北京}}]\n- text: 北京有玫瑰。\n",
                      encoding="utf-8")
    prompt = "what is {{ city }} {% raw %}?"
    # --tools: the ticket MCP server beside them is left unstarted (seconds of start-up the test is not about)
    completed = run("ask", prompt, "--model", f"scripted:{script}", "--tools-dir", str(ROOT / "tools.d"),
                        "--tools", "get_flower_*", "--system", "Answer in {{ language }}.", "--json", "--no-log", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["mode"] == "scripted" and document["final"] == "北京有玫瑰。"
    assert document["turns"][0]["tool_calls"][0]["result"] == "玫瑰: 100, 郁金香: 150"


def test_ask_json_interrupted_prints_a_document_that_says_so(tmp_path: Path) -> None:
    make_world(tmp_path, delay=5)  # the tool sleeps: Ctrl-C comes while it runs
    script = tmp_path / "turns.yaml"
    script.write_text("- tool_calls: [{name: get_flower_inventory, arguments: {city: 上海}}]\n- text: 上海有百合。\n",
                      encoding="utf-8")
    process = subprocess.Popen([sys.executable, "-m", "toolrun", "ask", "上海?", "--model", f"scripted:{script}", "--json",
                                "--no-log"], cwd=tmp_path, env=clean_env(PYTHONPATH=str(ROOT)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    while not process.stderr.readline().startswith("→ get_flower_inventory"):
        assert process.poll() is None, "toolrun ended before its call started"
    process.send_signal(signal.SIGINT)
    out, rest = process.communicate(timeout=30)
    assert process.returncode == 130, rest
    document = json.loads(out)  # stdout holds the document, and nothing else
    assert (document["recipe"], document["mode"], document["stop_reason"]) == ("ask", "scripted", "interrupted")
    assert document["model"] == f"scripted:{script}" and "interrupted" in document["error"]
    (call,) = document["turns"][0]["tool_calls"]
    assert call["name"] == "get_flower_inventory" and call["arguments"] == {"city": "上海"} and call["is_error"]


def test_ask_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_key = run("ask", "hi", "--model", "openai:gpt-4o-mini", "--tools", "get_flower_*", cwd=ROOT)
    assert no_key.returncode == 2 and "no OPENAI_API_KEY set" in no_key.stderr and "Traceback" not in no_key.stderr
    monkeypatch.chdir(ROOT)
    no_model = invoke("ask", "hi")
    assert no_model.exit_code == 2
    assert "no model to ask — pass --model provider:model" in no_model.stderr
    typo = invoke("ask", "hi", "--model", "openai:gpt-4o-mini", "--tools", "get_flower_inventroy")
    assert typo.exit_code == 2 and "did you mean 'get_flower_inventory'" in typo.stderr
    monkeypatch.chdir(tmp_path)
    no_tools = invoke("ask", "hi", "--model", "openai:gpt-4o-mini")
    assert no_tools.exit_code == 2 and "tools.d: the tools directory does not exist" in no_tools.stderr


def test_literal_templates_render_to_the_text_itself() -> None:
    for text in ["plain 北京", "{{ x }}", "{% if %}", "a {# c #} b", "{% raw %}x{% endraw %}y", "{%- endraw -%}"]:
        assert render(literal_template(text), {}, environ={}) == text
    recipe = adhoc_recipe(name="ask", model="openai:gpt-4o-mini", tools_dir=ROOT / "tools.d",
                          messages=[("user", "{{ q }}"), ("assistant", "ok"), ("user", "again")])
    assert [(m.role, m.text) for m in recipe.render_messages()] == [("user", "{{ q }}"), ("assistant", "ok"),
                                                                    ("user", "again")]


@pytest.mark.parametrize("command", [["ask", "-"], ["chat"]])
@pytest.mark.parametrize("stdin", ["closed", "write-only"])
def test_a_closed_or_unreadable_stdin_ends_ask_and_chat_with_words_not_an_internal_error(
        tmp_path: Path, command: list[str], stdin: str) -> None:
    written = tmp_path / "written.txt"

    def no_readable_stdin() -> None:  # in the child, before toolrun starts: `<&-` or `0>file`
        os.close(0)
        if stdin == "write-only":
            os.open(written, os.O_WRONLY | os.O_CREAT)  # takes descriptor 0

    done = subprocess.run([str(TOOLRUN), *command, "--model", "scripted:recipes/inventory.script.yaml", "--no-log"],
                          cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60,
                          preexec_fn=no_readable_stdin)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    if command == ["chat"]:
        assert done.returncode == 0, done.stderr  # nothing to read: as at the end of stdin
    else:
        assert done.returncode == 2
        assert done.stderr.splitlines()[-1].startswith("error: cannot read the prompt from stdin: ")
