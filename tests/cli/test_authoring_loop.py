"""The author's loop with no provider at all: a scripted model from a file, a prompt on the
command line, strict replays for CI, and mistakes reported before credentials are asked for."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ANSWER, INVENTORY, clean_env, invoke, toolrun_in_process
from tests.loopback import Recorded, Reply

SCRIPT = """\
# two turns: the model asks for two cities at once, then answers
- tool_calls:
    - {name: get_flower_inventory, arguments: {city: 北京}}
    - {name: get_flower_inventory, arguments: {city: 上海}}
- text: 北京有玫瑰 100 枝，上海有百合 80 枝。
"""


def _script(tmp_path: Path, text: str = SCRIPT) -> Path:
    path = tmp_path / "turns.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_scripted_model_from_a_file_runs_the_real_tools_offline(tmp_path: Path) -> None:
    completed = toolrun_in_process("recipe", str(INVENTORY), "--model", f"scripted:{_script(tmp_path)}", "--json")
    assert completed.returncode == 3, completed.stderr  # runs; the recipe's expect wants 向日葵 too
    document = json.loads(completed.stdout)
    assert document["mode"] == "scripted" and document["final"] == "北京有玫瑰 100 枝，上海有百合 80 枝。"
    calls = document["turns"][0]["tool_calls"]
    assert [(c["arguments"]["city"], c["result"]) for c in calls] == [("北京", "玫瑰: 100, 郁金香: 150"),
                                                                      ("上海", "百合: 80, 康乃馨: 120")]
    assert "expect failed: final answer does not contain" in completed.stderr or "向日葵" in completed.stderr
    assert "OPENAI_API_KEY" not in completed.stderr


def test_a_recipe_may_name_its_script_relative_to_itself(tmp_path: Path) -> None:
    _script(tmp_path)
    recipe = tmp_path / "try.yaml"
    recipe.write_text(textwrap.dedent(f"""
        name: try
        model: scripted:turns.yaml
        tools: [get_flower_inventory]
        tools_dir: {INVENTORY.parent.parent / 'tools.d'}
        messages: [{{user: 北京和上海?}}]
        expect: {{final_contains: [玫瑰, 百合]}}
    """), encoding="utf-8")
    completed = toolrun_in_process("recipe", str(recipe), cwd=Path("/"))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == "北京有玫瑰 100 枝，上海有百合 80 枝。\n"
    assert completed.stderr.rstrip().endswith("· scripted")


def test_a_broken_script_names_file_line_and_fix(tmp_path: Path) -> None:
    script = _script(tmp_path, "- tool_calls:\n    - {arguments: {city: 北京}}\n- {answer: hi}\n")
    result = invoke("recipe", str(INVENTORY), "--model", f"scripted:{script}")
    assert result.exit_code == 2
    assert f"{script}:2: a tool call needs a name" in result.stderr
    assert f"{script}:3: a turn is {{text: ...}}, {{output: {{...}}}} or {{tool_calls: [{{name, arguments}}]}}" in result.stderr


def test_a_missing_script_is_named_before_the_tools_load(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-turns.yaml"
    for command in (("recipe", str(INVENTORY)), ("ask", "北京?", "--tools-dir", str(INVENTORY.parent.parent / "tools.d"),
                                                 "--tools", "get_flower_*")):
        result = invoke(*command, "--model", f"scripted:{missing}", "--no-log")
        assert result.exit_code == 2, result.stderr
        assert f"{missing}: script file not found" in result.stderr
        assert " from " not in result.stderr  # the catalog's summary line: the tools were never loaded


def test_a_script_that_runs_out_fails_the_run_with_a_reason(tmp_path: Path) -> None:
    script = _script(tmp_path, "- tool_calls: [{name: get_flower_inventory, arguments: {city: 北京}}]\n")
    result = invoke("recipe", str(INVENTORY), "--model", f"scripted:{script}")
    assert result.exit_code == 1
    assert "error: the run failed:" in result.stderr and "script" in result.stderr.split("error: the run failed:")[1]


def test_a_prompt_argument_replaces_the_recipes_messages(tmp_path: Path) -> None:
    completed = toolrun_in_process("recipe", str(INVENTORY), "只看北京", "--model", f"scripted:{_script(tmp_path)}", "--json")
    document = json.loads(completed.stdout)
    assert document["final"].startswith("北京")
    # the scripted model's first request held one user message: the prompt
    result = invoke("recipe", str(INVENTORY), "只看北京", "--model", f"scripted:{_script(tmp_path)}", "--transcript",
                    str(tmp_path / "t.jsonl"))
    assert result.exit_code == 3  # expect still applies
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text(encoding="utf-8").splitlines()]
    assert events[0]["event"] == "run_start" and events[0]["mode"] == "scripted"


def test_a_tool_typo_is_reported_before_the_missing_key(tmp_path: Path) -> None:
    recipe = tmp_path / "typo.yaml"
    recipe.write_text(textwrap.dedent(f"""
        name: typo
        model: openai:gpt-4o-mini
        tools: [get_flower_inventroy]
        tools_dir: {INVENTORY.parent.parent / 'tools.d'}
        messages: [{{user: hi}}]
    """), encoding="utf-8")
    result = invoke("recipe", str(recipe), env=clean_env())
    assert result.exit_code == 2
    assert "get_flower_inventory" in result.stderr and "did you mean" in result.stderr
    assert "OPENAI_API_KEY" not in result.stderr


def test_strict_replay_fails_on_a_divergence_and_passes_a_faithful_one() -> None:
    faithful = invoke("recipe", str(INVENTORY), "--strict")
    assert faithful.exit_code == 0, faithful.stderr
    assert faithful.stdout.rstrip("\n") == ANSWER
    diverged = invoke("recipe", str(INVENTORY), "--strict", "--var", "question=只看北京", "--json")
    assert diverged.exit_code == 1
    document = json.loads(diverged.stdout)
    assert document["stop_reason"] == "error" and document["divergences"]
    assert document["error"].startswith("the replay stopped: strict: the run diverged from its recording")
    assert document["turns"] == []  # stopped at the first divergence: no tool ran on a changed conversation
    # without --strict the same run reports the divergence but is not failed by it
    lenient = invoke("recipe", str(INVENTORY), "--var", "question=只看北京")
    assert lenient.exit_code == 0 and "diverge" in lenient.stderr.lower()


def test_a_transcript_in_a_missing_folder_is_refused_not_created(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "t.jsonl"
    result = invoke("recipe", str(INVENTORY), "--transcript", str(target))
    assert result.exit_code == 2 and "does not exist" in result.stderr
    assert not (tmp_path / "no").exists()


def _tools_that_must_not_run(tmp_path: Path) -> Path:
    """The shipped flower tool, its function replaced by one that fails loudly if it ever runs."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    shipped = (INVENTORY.parent.parent / "tools.d" / "flowers.yaml").read_text(encoding="utf-8")
    (tools / "flowers.yaml").write_text(shipped, encoding="utf-8")
    (tools / "flowers.py").write_text("def get_flower_inventory(city):\n    raise RuntimeError('the tool ran')\n",
                                      encoding="utf-8")
    return tools


@pytest.mark.parametrize("recipe", ["inventory", "inventory-anthropic", "inventory-gemini", "inventory-responses"])
def test_replay_tools_plays_the_recorded_results_and_runs_nothing(tmp_path: Path, recipe: str) -> None:
    tools = _tools_that_must_not_run(tmp_path)
    path = INVENTORY.parent / f"{recipe}.yaml"
    played = invoke("recipe", str(path), "--replay-tools", "--strict", "--json", "--tools-dir", str(tools))
    assert played.exit_code == 0, played.stderr
    document = json.loads(played.stdout)
    results = [(call["arguments"]["city"], call["result"], call["is_error"]) for call in document["turns"][0]["tool_calls"]]
    assert results == [("北京", "玫瑰: 100, 郁金香: 150", False), ("上海", "百合: 80, 康乃馨: 120", False),
                       ("深圳", "向日葵: 200, 玉兰: 90", False)]
    assert "the tool ran" not in played.stdout + played.stderr
    # the same run without --replay-tools does run the tool (and so fails its calls)
    ran = invoke("recipe", str(path), "--json", "--tools-dir", str(tools))
    assert "the tool ran" in ran.stdout


def test_replay_tools_needs_a_replay(tmp_path: Path) -> None:
    result = invoke("recipe", str(INVENTORY), "--replay-tools", "--model", f"scripted:{_script(tmp_path)}")
    assert result.exit_code == 2 and "needs a replay" in result.stderr


def test_a_local_server_needs_no_key(loopback, tmp_path: Path) -> None:
    def local_model(request: Recorded) -> Reply:
        assert "authorization" not in request.headers  # nothing made up, nothing sent
        return Reply(body={"choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": "本地模型在此"}}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 3}})

    server = loopback(local_model)
    recipe = tmp_path / "local.yaml"
    recipe.write_text(textwrap.dedent(f"""
        name: local
        model: openai:qwen2.5-7b
        provider: {{base_url: "{server.url}/v1"}}
        tools_dir: {INVENTORY.parent.parent / 'tools.d'}
        tools: [get_flower_inventory]
        messages: [{{user: 你好}}]
        settings: {{stream: false}}
    """), encoding="utf-8")
    result = invoke("recipe", str(recipe), env=clean_env())
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "本地模型在此\n" and result.stderr.rstrip().endswith("· live")
    assert len(server.requests) == 1
    # a remote endpoint still needs its key, and says which variable holds it
    remote = tmp_path / "remote.yaml"
    remote.write_text(recipe.read_text(encoding="utf-8").replace(server.url, "https://llm.internal.example"),
                      encoding="utf-8")
    refused = invoke("recipe", str(remote), env=clean_env())
    assert refused.exit_code == 2 and "OPENAI_API_KEY" in refused.stderr


def test_replay_tools_alone_replays_the_recording_beside_the_recipe_even_with_a_local_provider(tmp_path: Path) -> None:
    # a local base_url needs no key, so the run would be live: --replay-tools says it is a replay
    recipe = tmp_path / "inventory.yaml"
    recipe.write_text(INVENTORY.read_text(encoding="utf-8").replace(
        "tools_dir: ../tools.d", f"tools_dir: {INVENTORY.parent.parent / 'tools.d'}\nprovider: {{base_url: 'http://127.0.0.1:9/v1'}}"),
        encoding="utf-8")
    (tmp_path / "inventory.cassette.json").write_text(
        (INVENTORY.parent / "inventory.cassette.json").read_text(encoding="utf-8"), encoding="utf-8")
    result = invoke("recipe", str(recipe), "--replay-tools", "--strict")
    assert result.exit_code == 0, result.stderr
    assert "tool results are played back from the recording" in result.stderr
    assert result.stdout.rstrip("\n") == ANSWER


def test_an_empty_prompt_is_refused_not_ignored() -> None:
    result = invoke("recipe", str(INVENTORY), "  ")
    assert result.exit_code == 2 and "the prompt is empty" in result.stderr


def test_the_blocking_twins_say_what_to_use_inside_a_running_loop() -> None:
    import asyncio

    import toolrun

    async def inside() -> str:
        try:
            toolrun.run(INVENTORY)
        except toolrun.UserError as exc:
            return str(exc)
        return "no error"

    assert "use await toolrun.arun(...)" in asyncio.run(inside())
