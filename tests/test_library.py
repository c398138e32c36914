"""toolrun as a library: the names in ``toolrun.__all__`` are enough to load, call and run,
and each run keeps its secrets to itself."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import toolrun
from toolrun.core.secrets import Redactor, active_redactor

ROOT = Path(__file__).resolve().parent.parent


def _env_without_providers() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}


def test_every_public_name_resolves_and_import_is_light() -> None:
    script = textwrap.dedent("""
        import sys, toolrun
        assert "toolrun.cli" not in sys.modules and "httpx" not in sys.modules, sorted(sys.modules)
        missing = [name for name in toolrun.__all__ if getattr(toolrun, name, None) is None]
        assert not missing, missing
        assert "toolrun.cli" not in sys.modules, "the public API pulled in the command line"
        print(len(toolrun.__all__))
    """)
    completed = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert int(completed.stdout) >= 15


def test_unknown_public_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'play_recipe'"):
        toolrun.play_recipe  # noqa: B018 - the lookup is the test


def test_a_script_outside_the_repository_uses_only_exported_names(tmp_path: Path) -> None:
    """Replay the inventory recipe, load a catalog, call a tool, run a ScriptedModel conversation."""
    # The example's flower tools copied out too: the whole of tools.d would start the ticket MCP server (seconds)
    tools = tmp_path / "tools.d"
    tools.mkdir()
    for name in ("flowers.yaml", "flowers.py", "disk.yaml"):
        shutil.copy(ROOT / "tools.d" / name, tools / name)
    script = tmp_path / "embed.py"
    script.write_text(textwrap.dedent(f"""
        import json
        import toolrun

        root = {str(ROOT)!r}
        catalog = toolrun.load_catalog({str(tools)!r})
        out = toolrun.call(catalog, "get_flower_inventory", {{"city": "北京"}})
        bad = toolrun.call(catalog, "get_flower_inventory", {{"city": "广州"}})

        replayed = toolrun.run(root + "/recipes/inventory.yaml")   # no key: the recording beside it

        model = toolrun.ScriptedModel([
            toolrun.ScriptedModel.calls([("get_flower_inventory", {{"city": "上海"}})]),
            "上海: 百合 80, 康乃馨 120",
        ])
        scripted = toolrun.run(root + "/recipes/inventory.yaml", model=model, vars={{"question": "上海?"}})

        try:
            toolrun.load_catalog({str(tmp_path / "missing")!r})
        except toolrun.LoadError as exc:
            load_error = str(exc.problems[0])

        print(json.dumps({{
            "tools": len(catalog), "call": [out.result, out.is_error], "bad": [bad.is_error, bad.result],
            "replay": replayed.to_json(), "scripted": scripted.to_json(),
            "scripted_question": model.requests[0].messages[-1].text, "load_error": load_error,
        }}, ensure_ascii=False))
    """), encoding="utf-8")
    completed = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env_without_providers(),
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    out = json.loads(completed.stdout)
    assert out["tools"] >= 2
    assert out["call"] == ["玫瑰: 100, 郁金香: 150", False]
    assert out["bad"][0] is True and "expected one of" in out["bad"][1]
    replay = out["replay"]
    assert (replay["recipe"], replay["mode"], replay["stop_reason"]) == ("inventory", "replay", "stop")
    assert replay["usage"] == {"input_tokens": 330, "output_tokens": 157, "requests": 2}
    assert [c["arguments"]["city"] for c in replay["turns"][0]["tool_calls"]] == ["北京", "上海", "深圳"]
    assert replay["divergences"] == [] and "expect_failures" not in replay
    assert "玫瑰" in replay["final"]
    scripted = out["scripted"]
    assert scripted["model"] == "scripted:scripted" and scripted["final"] == "上海: 百合 80, 康乃馨 120"
    assert scripted["turns"][0]["tool_calls"][0]["result"] == "百合: 80, 康乃馨: 120"
    assert scripted["expect_failures"]  # the recipe expects 玫瑰 and 向日葵 too: checked, not skipped
    assert out["scripted_question"] == "上海?"
    assert "does not exist" in out["load_error"] or "not found" in out["load_error"]


# -- per-run secrets -----------------------------------------------------------------------

TOKEN_A = "tok-run-A-5f1c9e2b"
TOKEN_B = "tok-run-B-77d04a1e"


def _echo_token_project(tmp_path: Path) -> Path:
    """A recipe whose one tool prints the secret it was configured with (``${env:RUN_TOKEN}``)."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "echo.yaml").write_text(textwrap.dedent("""
        name: show_token
        description: >-
          Shows the token this deployment uses, for checking the wiring of the run. Use it when
          asked which token is configured; do not use it for anything else.
        parameters: {type: object, properties: {}, additionalProperties: false}
        annotations: {read_only: true}
        backend:
          shell:
            argv: [sh, -c, 'echo "token=$T"']
            env: {T: "${env:RUN_TOKEN}"}
    """), encoding="utf-8")
    recipe = tmp_path / "echo.yaml"
    recipe.write_text(textwrap.dedent("""
        name: echo
        model: openai:gpt-4o-mini
        tools_dir: tools.d
        messages: [{user: which token?}]
    """), encoding="utf-8")
    return recipe


def _model(token: str) -> toolrun.ScriptedModel:
    # The model repeats the secret it saw somewhere: its answer must be redacted too.
    return toolrun.ScriptedModel([toolrun.ScriptedModel.calls([("show_token", {})]), f"the token is {token}"])


def _check_isolated(result: toolrun.RunResult, own: str, other: str) -> None:
    text = json.dumps(result.to_json(), ensure_ascii=False)
    assert own not in text and "token=***" in text and "the token is ***" in text
    assert result.redactor is not None
    assert own in result.redactor.secrets and other not in result.redactor.secrets
    # what a library caller keeps is redacted too, not only the JSON document
    assert result.final == "the token is ***" and result.turns[-1].text == "the token is ***"


def test_two_concurrent_runs_as_tasks_keep_their_secrets_apart(tmp_path: Path, run_scope: Redactor) -> None:
    recipe = _echo_token_project(tmp_path)

    async def both() -> tuple[toolrun.RunResult, toolrun.RunResult]:
        return await asyncio.gather(
            toolrun.arun(recipe, model=_model(TOKEN_A), environ={"RUN_TOKEN": TOKEN_A, "PATH": os.environ["PATH"]}),
            toolrun.arun(recipe, model=_model(TOKEN_B), environ={"RUN_TOKEN": TOKEN_B, "PATH": os.environ["PATH"]}),
        )

    first, second = asyncio.run(both())
    _check_isolated(first, TOKEN_A, TOKEN_B)
    _check_isolated(second, TOKEN_B, TOKEN_A)
    # Nothing stays registered once the runs are over: the caller's scope never saw either.
    assert TOKEN_A not in run_scope.secrets and TOKEN_B not in run_scope.secrets
    assert active_redactor() is run_scope


def test_two_runs_in_threads_keep_their_secrets_apart(tmp_path: Path) -> None:
    recipe = _echo_token_project(tmp_path)
    results: dict[str, toolrun.RunResult] = {}
    barrier = threading.Barrier(2)

    def play(name: str, token: str) -> None:
        barrier.wait()
        results[name] = toolrun.run(recipe, model=_model(token), environ={"RUN_TOKEN": token, "PATH": os.environ["PATH"]})

    threads = [threading.Thread(target=play, args=("a", TOKEN_A)), threading.Thread(target=play, args=("b", TOKEN_B))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    _check_isolated(results["a"], TOKEN_A, TOKEN_B)
    _check_isolated(results["b"], TOKEN_B, TOKEN_A)


def test_a_single_call_redacts_its_secret_and_forgets_it(tmp_path: Path, run_scope: Redactor) -> None:
    _echo_token_project(tmp_path)
    catalog = toolrun.load_catalog(tmp_path / "tools.d")
    out = toolrun.call(catalog, "show_token", {}, environ={"RUN_TOKEN": TOKEN_A, "PATH": os.environ["PATH"]})
    assert out.result.strip() == "token=***" and out.is_error is False
    assert TOKEN_A not in run_scope.secrets


def test_calling_with_a_folder_name_instead_of_a_catalog_says_what_to_pass() -> None:
    with pytest.raises(TypeError, match=r"expected a Catalog \(catalog = toolrun.load_catalog\('tools.d'\)\), not str"):
        toolrun.call("tools.d", "get_flower_inventory", {"city": "北京"})  # type: ignore[arg-type]


@pytest.mark.parametrize("asked", [{"record": "x.cassette.json"}, {"replay": "x.cassette.json"}, {"mode": "replay"}])
def test_recording_or_replaying_a_model_object_is_refused_not_ignored(tmp_path: Path, asked: dict) -> None:
    recipe = _echo_token_project(tmp_path)
    options = {key: str(tmp_path / value) if key != "mode" else value for key, value in asked.items()}
    with pytest.raises(toolrun.UserError, match="a model object is used as it is: there is nothing to record or replay"):
        toolrun.run(recipe, model=_model(TOKEN_A), **options)
    assert not (tmp_path / "x.cassette.json").exists()


def test_a_result_can_be_copied_and_pickled_and_its_redactor_keeps_the_secrets_out_of_the_bytes(tmp_path: Path) -> None:
    import copy
    import pickle

    recipe = _echo_token_project(tmp_path)
    model = toolrun.ScriptedModel([toolrun.ScriptedModel.calls([("show_token", {})]), "done"])
    result = toolrun.run(recipe, model=model, environ={"RUN_TOKEN": TOKEN_A, "PATH": os.environ["PATH"]})
    assert result.redactor is not None and TOKEN_A in result.redactor.secrets
    copied = copy.deepcopy(result)  # a copy belongs to the same run: it redacts the same secrets
    assert copy.copy(result.redactor) is result.redactor
    assert copied.redactor is result.redactor and copied.redact(f"x {TOKEN_A}") == "x ***"
    data = pickle.dumps(result)
    assert TOKEN_A.encode() not in data  # the tool's output was redacted, and the redactor travels empty
    restored = pickle.loads(data)
    assert restored.to_json() == result.to_json() and restored.tool_calls[0].result.strip() == "token=***"
