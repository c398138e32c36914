"""``toolrun recipe`` end to end: the real console script or click's runner, real tools,
a loopback OpenAI server for live runs, the shipped inventory cassette for replays."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.flower_shop import STOCK_BACKED_TOOL_YAML
from tests.loopback import Recorded, Reply
from toolrun import run as run_recipe
from toolrun.cli import main
from toolrun.core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "recipes" / "inventory.yaml"
INVENTORY_CASSETTE = ROOT / "recipes" / "inventory.cassette.json"
TOOLRUN = Path(sys.executable).parent / "toolrun"
FAKE_KEY = "sk-test-NEVER-IN-A-FILE-0123456789"
ANSWER = ("北京的鲜花库存为：玫瑰: 100, 郁金香: 150\n"
          "上海的鲜花库存为：百合: 80, 康乃馨: 120\n"
          "深圳的鲜花库存为：向日葵: 200, 玉兰: 90")
CALL_IDS = ["call_DhKVYSzAsqJ2DKkYLhmlhNYH", "call_EW6HrY9A0WUV40KsOifY7cfY", "call_g9yh7ebEzIU8vc1Cx0OkGYK8"]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh machine: no provider key or endpoint of the developer's."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith(("_API_KEY", "_BASE_URL")) and k != "OLLAMA_HOST"}
    env.update(extra)
    return env


def toolrun(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The real console script, as a user runs it."""
    return subprocess.run([str(TOOLRUN), *args], env=env or clean_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def invoke(*args: str, env: dict[str, str] | None = None):
    """click's runner (in-process, faster); stdout and stderr kept apart. ``env`` is the whole
    environment, as for a process: variables it leaves out are unset while the command runs."""
    wanted = env or clean_env()
    environment: dict[str, str | None] = {name: None for name in os.environ if name not in wanted}
    return CliRunner().invoke(main, list(args), env={**environment, **wanted}, catch_exceptions=False)


def toolrun_in_process(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``toolrun(...)`` without the process (each costs half a CPU second): click's runner in ``cwd``,
    the same fields back. For tests whose subject is not the process boundary."""
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        result = invoke(*args, env=env)
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess([str(TOOLRUN), *args], result.exit_code, result.stdout, result.stderr)


# ----------------------------------------------------------------- a small world of our own


STOCK_PY = """\
import time

STOCK = {{"北京": "玫瑰: 100, 郁金香: 150", "上海": "百合: {shanghai}, 康乃馨: 120", "深圳": "向日葵: 200, 玉兰: 90"}}


def get_flower_inventory(city):
    time.sleep({delay})
    return STOCK[city]
"""

RECIPE_YAML = """\
name: shops
model: openai:gpt-4o-mini
tools: [get_flower_inventory]
tools_dir: tools.d
messages:
  - user: "{{{{ question }}}}"
vars:
  question: 北京、上海和深圳的鲜花库存是多少?
settings: {{max_turns: 4, temperature: 0}}
expect:
  tools_called: [get_flower_inventory]
  final_contains: [{must_contain}]
"""


def make_world(folder: Path, *, shanghai: int = 80, delay: float = 0.0, must_contain: str = "玫瑰") -> Path:
    """A recipe and its tools directory in ``folder``; returns the recipe's path."""
    tools = folder / "tools.d"
    tools.mkdir(parents=True, exist_ok=True)
    (tools / "flowers.yaml").write_text(STOCK_BACKED_TOOL_YAML, encoding="utf-8")
    (tools / "stock.py").write_text(STOCK_PY.format(shanghai=shanghai, delay=delay), encoding="utf-8")
    recipe = folder / "shops.yaml"
    recipe.write_text(RECIPE_YAML.format(must_contain=must_contain), encoding="utf-8")
    return recipe


def make_meeting_world(folder: Path) -> Path:
    """make_world whose tool answers only when the three calls of a turn run at once (a barrier, 10 s at most)."""
    recipe = make_world(folder)
    stock = folder / "tools.d" / "stock.py"
    source = stock.read_text(encoding="utf-8")
    source = source.replace("import time\n", "import threading\n\nMEETING = threading.Barrier(3, timeout=10)\n")
    source = source.replace("    time.sleep(0.0)\n", "    MEETING.wait()\n")
    assert "MEETING.wait()" in source and "MEETING =" in source, "STOCK_PY changed: update this helper"
    stock.write_text(source, encoding="utf-8")
    return recipe


def completion(message: dict, finish_reason: str, prompt: int, output: int) -> dict:
    return {"id": "chatcmpl-x", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}}


CALLS_RESPONSE = completion({"role": "assistant", "content": None, "tool_calls": [
    {"id": call_id, "type": "function",
     "function": {"name": "get_flower_inventory", "arguments": json.dumps({"city": city}, ensure_ascii=False)}}
    for call_id, city in zip(CALL_IDS, ["北京", "上海", "深圳"], strict=True)]}, "tool_calls", 95, 67)
ANSWER_RESPONSE = completion({"role": "assistant", "content": ANSWER}, "stop", 235, 90)


def sse_chunks(body: dict) -> list[str]:
    """A chat.completion as OpenAI streams it: text word by word, call arguments in pieces."""
    message, choice = body["choices"][0]["message"], body["choices"][0]
    chunks: list[dict] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    content = message.get("content") or ""
    for start in range(0, len(content), 7):
        chunks.append({"choices": [{"index": 0, "delta": {"content": content[start:start + 7]}}]})
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}]}}]})
        for start in range(0, len(arguments), 5):
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": arguments[start:start + 5]}}]}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    chunks.append({"choices": [], "usage": body["usage"]})
    return [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]


def fake_openai(request: Recorded) -> Reply:
    """Calls first; the answer once the three results are there. Streams when asked to."""
    assert request.headers.get("authorization") == f"Bearer {FAKE_KEY}"
    body = request.json()
    has_results = any(m.get("role") == "tool" for m in body["messages"])
    response = ANSWER_RESPONSE if has_results else CALLS_RESPONSE
    if body.get("stream"):
        return Reply(headers={"Content-Type": "text/event-stream"}, chunks=sse_chunks(response))
    return Reply(body=response)


def live_env(server) -> dict[str, str]:
    return clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{server.url}/v1")


# ----------------------------------------------------------------- the shipped example, offline


def test_inventory_runs_offline_from_its_cassette_on_a_fresh_machine():
    completed = toolrun("recipe", "recipes/inventory.yaml")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == ANSWER
    err = completed.stderr
    assert ("no OPENAI_API_KEY set: replaying recipes/inventory.cassette.json; "
            "set the key for a live run, --live to refuse this") in err
    for city in ("北京", "上海", "深圳"):
        assert f'→ get_flower_inventory {{"city": "{city}"}}' in err
    assert "← get_flower_inventory" in err and "玫瑰: 100, 郁金香: 150" in err
    assert err.strip().splitlines()[-1] == "2 turns · 3 tool calls · 330 in / 157 out tokens · replay"
    assert "divergence" not in err


def test_inventory_json_is_the_section_4_transcript():
    completed = invoke("recipe", str(INVENTORY), "--json")
    assert completed.exit_code == 0, completed.stderr
    assert "北京" in completed.stdout  # ensure_ascii=False
    document = json.loads(completed.stdout)  # exactly one JSON document on stdout
    assert document["recipe"] == "inventory"
    assert document["model"] == "openai:gpt-4o-mini"
    assert document["mode"] == "replay"
    assert document["final"] == ANSWER
    assert document["stop_reason"] == "stop"
    assert document["usage"] == {"input_tokens": 330, "output_tokens": 157, "requests": 2}
    first, second = document["turns"]
    assert first["stop_reason"] == "tool_calls" and first["text"] is None
    assert first["usage"] == {"input_tokens": 95, "output_tokens": 67}
    assert [c["id"] for c in first["tool_calls"]] == CALL_IDS
    assert [c["arguments"] for c in first["tool_calls"]] == [{"city": "北京"}, {"city": "上海"}, {"city": "深圳"}]
    assert [c["result"] for c in first["tool_calls"]] == ["玫瑰: 100, 郁金香: 150", "百合: 80, 康乃馨: 120", "向日葵: 200, 玉兰: 90"]
    assert all(c["is_error"] is False and isinstance(c["duration_ms"], int) for c in first["tool_calls"])
    assert second["usage"] == {"input_tokens": 235, "output_tokens": 90} and second["tool_calls"] == []
    assert document["divergences"] == []
    assert "2 turns · 3 tool calls" in completed.stderr  # human output stays on stderr


def test_the_shipped_cassette_holds_the_published_exchanges():
    cassette = json.loads(INVENTORY_CASSETTE.read_text(encoding="utf-8"))
    first, second = cassette["exchanges"]
    calls = first["response"]["body"]["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in calls] == CALL_IDS
    assert first["response"]["body"]["usage"]["prompt_tokens"] == 95
    assert second["response"]["body"]["choices"][0]["message"]["content"] == ANSWER
    assert [m["role"] for m in second["request"]["body"]["messages"]][-3:] == ["tool", "tool", "tool"]
    assert all("authorization" not in {h.lower() for h in e["request"]["headers"]} for e in cassette["exchanges"])


def test_live_refuses_the_fallback_and_names_the_variable():
    completed = invoke("recipe", str(INVENTORY), "--live")
    assert completed.exit_code == 2
    assert "OPENAI_API_KEY" in completed.stderr
    assert "recipes/inventory.yaml" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_live_with_replay_is_a_bad_option():
    completed = invoke("recipe", str(INVENTORY), "--live", "--replay", str(INVENTORY_CASSETTE))
    assert completed.exit_code == 2
    assert "--live and --replay" in completed.stderr and "Traceback" not in completed.stderr


def test_no_credentials_and_no_cassette_is_exit_2(tmp_path: Path):
    recipe = make_world(tmp_path)
    result = invoke("recipe", str(recipe))
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.stderr and "--record" in result.stderr


def test_asking_for_streaming_on_a_non_streamed_recording_says_so():
    result = invoke("recipe", str(INVENTORY), "--stream")
    assert result.exit_code == 0, result.stderr
    assert "the recording was made without streaming: replaying as --no-stream" in result.stderr
    assert result.stdout.strip() == ANSWER


# ----------------------------------------------------------------- divergence and failures


def inventory_copy(folder: Path, *, tools: str = "[get_flower_inventory]", stock_change: tuple[str, str] | None = None) -> Path:
    """The shipped inventory recipe and tools in ``folder``, the stock possibly changed."""
    tools_dir = folder / "tools.d"
    tools_dir.mkdir(parents=True)
    (tools_dir / "flowers.yaml").write_text((ROOT / "tools.d" / "flowers.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    source = (ROOT / "tools.d" / "flowers.py").read_text(encoding="utf-8")
    if stock_change:
        assert stock_change[0] in source
        source = source.replace(*stock_change)
    (tools_dir / "flowers.py").write_text(source, encoding="utf-8")
    recipe = folder / "inventory.yaml"
    text = INVENTORY.read_text(encoding="utf-8").replace("tools_dir: ../tools.d", "tools_dir: tools.d")
    recipe.write_text(text.replace("tools: [get_flower_inventory]", f"tools: {tools}"), encoding="utf-8")
    return recipe


def test_a_changed_tool_result_is_reported_as_a_divergence(tmp_path: Path):
    recipe = inventory_copy(tmp_path, stock_change=('"百合": 80', '"百合": 0'))
    result = invoke("recipe", str(recipe), "--replay", str(INVENTORY_CASSETTE), "--json")
    assert result.exit_code == 0, result.stderr
    expected = (f"replay divergence at exchange 2: tool result for {CALL_IDS[1]} (get_flower_inventory) differs: "
                "recorded '百合: 80, 康乃馨: 120', now '百合: 0, 康乃馨: 120'")
    assert expected in result.stderr.splitlines()
    [finding] = json.loads(result.stdout)["divergences"]  # the only difference, reported once
    assert finding["kind"] == "tool_result" and finding["exchange"] == 2
    assert finding["recorded"] == "百合: 80, 康乃馨: 120" and finding["now"] == "百合: 0, 康乃馨: 120"


PRICES_YAML = """\
name: get_flower_prices
description: >-
  Returns today's price list of our shop in one city, as "flower: yuan" pairs. Use it when
  someone asks what flowers cost; call it once per city. Do not use it for stock levels.
parameters:
  type: object
  properties:
    city: {type: string, enum: [北京, 上海, 深圳], description: City of the shop}
  required: [city]
annotations: {read_only: true, destructive: false, idempotent: true}
backend:
  python: prices.py:get_flower_prices
"""


def test_replay_reports_a_different_tool_set(tmp_path: Path):
    recipe = inventory_copy(tmp_path, tools="[get_flower_inventory, get_flower_prices]")
    (tmp_path / "tools.d" / "prices.yaml").write_text(PRICES_YAML, encoding="utf-8")
    (tmp_path / "tools.d" / "prices.py").write_text("def get_flower_prices(city):\n    return '玫瑰: 5'\n", encoding="utf-8")
    result = invoke("recipe", str(recipe), "--replay", str(INVENTORY_CASSETTE), "--json")
    assert result.exit_code == 0, result.stderr
    assert ("replay divergence at exchange 1: a different tool set: recorded [get_flower_inventory], "
            "now [get_flower_inventory, get_flower_prices] (now also offers get_flower_prices)") in result.stderr
    findings = json.loads(result.stdout)["divergences"]
    assert [f["kind"] for f in findings] == ["tool_set"]  # said once, not again at exchange 2


def test_a_replay_of_the_same_run_shows_no_divergence(tmp_path: Path):
    recipe = inventory_copy(tmp_path)
    result = invoke("recipe", str(recipe), "--replay", str(INVENTORY_CASSETTE), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["divergences"] == []


def test_more_requests_than_recorded_is_a_run_failure(tmp_path: Path):
    cassette = json.loads(INVENTORY_CASSETTE.read_text(encoding="utf-8"))
    cassette["exchanges"] = cassette["exchanges"][:1]
    short = tmp_path / "short.cassette.json"
    short.write_text(json.dumps(cassette, ensure_ascii=False), encoding="utf-8")
    result = invoke("recipe", str(INVENTORY), "--replay", str(short), "--json")
    assert result.exit_code == 1
    assert "the recording has only 1 exchange" in result.stderr
    assert json.loads(result.stdout)["stop_reason"] == "error"


def test_a_failing_expect_check_exits_3(tmp_path: Path):
    recipe = make_world(tmp_path, must_contain="牡丹")
    result = invoke("recipe", str(recipe), "--replay", str(INVENTORY_CASSETTE))
    assert result.exit_code == 3
    assert "expect failed" in result.stderr and "牡丹" in result.stderr


def test_a_broken_cassette_is_bad_input(tmp_path: Path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    result = invoke("recipe", str(INVENTORY), "--replay", str(broken))
    assert result.exit_code == 2
    assert "broken.json" in result.stderr and "not valid JSON" in result.stderr


def test_a_bad_var_is_bad_input():
    result = invoke("recipe", str(INVENTORY), "--var", "no-equals-sign")
    assert result.exit_code == 2
    assert "KEY=VALUE" in result.stderr


# ----------------------------------------------------------------- live against a loopback OpenAI


def test_live_streamed_run_records_a_cassette_that_replays_without_divergence(loopback, tmp_path: Path):
    server = loopback(fake_openai)
    recipe = make_meeting_world(tmp_path)
    cassette = tmp_path / "run.cassette.json"
    transcript = tmp_path / "run.jsonl"
    completed = toolrun_in_process("recipe", str(recipe), "--record", str(cassette), "--transcript", str(transcript),
                                   env=live_env(server))
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == ANSWER  # streamed piece by piece, whole in the end
    assert completed.stderr.strip().splitlines()[-2] == "2 turns · 3 tool calls · 330 in / 157 out tokens · live"
    assert len(server.requests) == 2 and all(r.json().get("stream") for r in server.requests)

    text = cassette.read_text(encoding="utf-8")
    assert FAKE_KEY not in text and "北京" in text
    recorded = json.loads(text)
    assert len(recorded["exchanges"]) == 2 and all("lines" in e["response"] for e in recorded["exchanges"])

    events = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    assert kinds.count("model_response") == 2 and kinds.count("tool_call") == 3
    assert events[-1]["usage"] == {"input_tokens": 330, "output_tokens": 157, "requests": 2}
    assert FAKE_KEY not in transcript.read_text(encoding="utf-8")

    replayed = toolrun_in_process("recipe", str(recipe), "--replay", str(cassette), "--json")
    assert replayed.returncode == 0, replayed.stderr
    document = json.loads(replayed.stdout)
    assert document["divergences"] == [] and document["final"] == ANSWER
    assert document["usage"]["requests"] == 2


def test_a_run_recorded_through_openai_base_url_replays_strictly_where_it_is_not_set(loopback, tmp_path: Path):
    # A compatible server takes max_tokens, OpenAI's own API max_completion_tokens: the replay (CI, no
    # OPENAI_BASE_URL) must build the requests of the endpoint the recording was made with.
    server = loopback(fake_openai)
    recipe = make_world(tmp_path)
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("temperature: 0", "temperature: 0, max_tokens: 500"),
                      encoding="utf-8")
    recorded = toolrun_in_process("recipe", str(recipe), "--record", str(tmp_path / "shops.cassette.json"), "--no-log",
                                  env=live_env(server))
    assert recorded.returncode == 0, recorded.stderr
    assert all(r.json()["max_tokens"] == 500 for r in server.requests)

    replayed = toolrun_in_process("recipe", str(recipe), "--strict", "--json", "--no-log")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["divergences"] == []


def test_the_three_calls_of_one_turn_run_concurrently(loopback, tmp_path: Path):
    server = loopback(fake_openai)
    recipe = make_meeting_world(tmp_path)
    result = invoke("recipe", str(recipe), "--no-stream", "--json", env=live_env(server))
    assert result.exit_code == 0, result.stderr
    calls = json.loads(result.stdout)["turns"][0]["tool_calls"]
    assert [(c["arguments"]["city"], c["is_error"]) for c in calls] == [("北京", False), ("上海", False), ("深圳", False)]


def test_non_streamed_text_is_printed_at_the_end_of_the_turn(loopback, tmp_path: Path):
    server = loopback(fake_openai)
    recipe = make_world(tmp_path)
    result = invoke("recipe", str(recipe), "--no-stream", env=live_env(server))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ANSWER + "\n"
    assert all(r.json().get("stream") is None for r in server.requests)


def test_a_provider_error_is_a_run_failure_without_traceback(loopback, tmp_path: Path):
    server = loopback(lambda request: Reply(400, {"error": {"message": "Invalid schema for function"}}))
    recipe = make_world(tmp_path)
    result = invoke("recipe", str(recipe), env=live_env(server))
    assert result.exit_code == 1
    assert "Invalid schema for function" in result.stderr


# ----------------------------------------------------------------- the shipped recipes


OPS = ROOT / "recipes" / "ops-triage.yaml"
OPS_TOKEN = "ops-token-NEVER-SHOWN-42"
OPS_ANSWER = "checkout is healthy (v2.14.1); last deploy 2026-11-29 09:12 by lin; / has room."


def fake_ops_model(request: Recorded) -> Reply:
    """Plays the model of the ops recipe: three independent calls, then a short answer."""
    body = request.json()
    results = [m for m in body["messages"] if m.get("role") == "tool"]
    if results:
        return Reply(body=completion({"role": "assistant", "content": OPS_ANSWER}, "stop", 400, 40))
    offered = sorted(t["function"]["name"] for t in body["tools"])
    assert offered == ["get_disk_usage", "get_service_status", "list_largest_directories", "list_recent_deployments"]
    calls = [("call_status", "get_service_status", {"service": "checkout", "environment": "production"}),
             ("call_deploys", "list_recent_deployments", {"service": "checkout", "limit": 2}),
             ("call_disk", "get_disk_usage", {"path": "/"})]
    return Reply(body=completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]},
        "tool_calls", 300, 60))


def fake_ops_api(request: Recorded) -> Reply:
    """The internal ops API the HTTP tools talk to."""
    if request.headers.get("authorization") != f"Bearer {OPS_TOKEN}":
        return Reply(401, {"error": "missing token"})
    if request.path == "/api/v1/services/checkout/status":
        return Reply(body={"status": "healthy", "version": "v2.14.1", "replicas": {"ready": 3, "desired": 3}})
    if request.path == "/api/v1/deployments":
        return Reply(body={"deployments": [
            {"finished_at": "2026-11-29T09:12Z", "service": "checkout", "version": "v2.14.1", "status": "succeeded", "author": "lin"},
            {"finished_at": "2026-11-27T16:40Z", "service": "checkout", "version": "v2.14.0", "status": "rolled_back", "author": "sam"}]})
    return Reply(404, {"error": f"no route {request.path}"})


def test_ops_triage_runs_http_and_shell_tools_together(loopback, tmp_path: Path):
    model, ops = loopback(fake_ops_model), loopback(fake_ops_api)
    env = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=f"{model.url}/v1",
                    OPS_API_URL=f"{ops.url}/api/v1", OPS_API_TOKEN=OPS_TOKEN)
    transcript = tmp_path / "ops.jsonl"
    completed = toolrun_in_process("recipe", str(OPS), "--json", "--transcript", str(transcript), env=env)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    results = {c["name"]: c for c in document["turns"][0]["tool_calls"]}
    assert not any(c["is_error"] for c in results.values()), results
    assert json.loads(results["get_service_status"]["result"])["status"] == "healthy"
    assert "v2.14.0 rolled_back by sam" in results["list_recent_deployments"]["result"]
    assert "Filesystem" in results["get_disk_usage"]["result"]  # real df output
    assert document["final"] == OPS_ANSWER
    assert {r.path for r in ops.requests} == {"/api/v1/services/checkout/status", "/api/v1/deployments"}
    assert "Traceback" not in completed.stderr
    for text in (completed.stdout, completed.stderr, transcript.read_text(encoding="utf-8"),
                 json.dumps([r.json() for r in model.requests], ensure_ascii=False)):
        assert OPS_TOKEN not in text  # the token went to the ops API only


@pytest.mark.parametrize("name", ["inventory", "inventory-anthropic", "inventory-gemini", "inventory-responses"])
def test_each_shipped_cassette_replays_without_divergence(name: str):
    result = invoke("recipe", str(ROOT / "recipes" / f"{name}.yaml"), "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["mode"] == "replay" and document["divergences"] == []
    assert document["final"].endswith(ANSWER)
    assert len(document["turns"][0]["tool_calls"]) == 3


@pytest.mark.parametrize("name", ["inventory-ollama", "ops-triage"])
def test_live_only_recipes_load_and_select_their_tools(name: str):
    from toolrun.catalog.loader import load_catalog_or_raise
    from toolrun.sessions.recipe import load_recipe

    recipe = load_recipe(ROOT / "recipes" / f"{name}.yaml")
    tools = recipe.select_tools(load_catalog_or_raise(recipe.locate_tools_dir()))
    assert tools and recipe.render_messages()


def test_a_recording_cannot_be_replayed_through_another_provider():
    result = invoke("recipe", str(INVENTORY), "--model", "anthropic:claude-sonnet-4-5",
                    "--replay", str(INVENTORY_CASSETTE))
    assert result.exit_code == 2
    assert "cannot be replayed as anthropic:claude-sonnet-4-5" in result.stderr
    assert "--model openai:gpt-4o-mini" in result.stderr  # the fix
    fallback = invoke("recipe", str(INVENTORY), "--model", "anthropic:claude-sonnet-4-5")
    assert fallback.exit_code == 2
    assert "no ANTHROPIC_API_KEY set" in fallback.stderr


def test_unwritable_output_files_are_bad_input_before_the_run(tmp_path: Path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder", encoding="utf-8")
    result = invoke("recipe", str(INVENTORY), "--transcript", str(blocked / "run.jsonl"))
    assert result.exit_code == 2 and "--transcript: cannot write this file" in result.stderr
    result = invoke("recipe", str(INVENTORY), "--record", str(blocked / "x.cassette.json"),
                    env=clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL="http://127.0.0.1:9/v1"))
    assert result.exit_code == 2 and "--record: cannot write this file" in result.stderr


def test_a_record_path_in_a_missing_folder_is_bad_input_and_grows_no_folder(tmp_path: Path):
    # As for --transcript: a typo in a folder name must not grow a new folder tree.
    missing = tmp_path / "recordigns" / "x.cassette.json"
    result = invoke("recipe", str(INVENTORY), "--record", str(missing),
                    env=clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL="http://127.0.0.1:9/v1"))
    assert result.exit_code == 2
    assert f"--record: the folder {missing.parent} does not exist" in result.stderr
    assert not missing.parent.exists()


def test_an_output_file_that_is_an_input_of_the_run_is_bad_input_and_stays_as_it_was(tmp_path: Path):
    recipe = make_world(tmp_path)
    cassette = tmp_path / "shops.cassette.json"
    cassette.write_bytes(INVENTORY_CASSETTE.read_bytes())
    before = {path: path.read_bytes() for path in (recipe, cassette)}
    live = clean_env(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    for options, env, said in [
        (["--record", str(recipe)], live, "the recording (--record) would overwrite the recipe"),
        (["--transcript", str(tmp_path / "." / "shops.yaml")], None, "--transcript would overwrite the recipe"),
        (["--transcript", str(cassette)], None, "--transcript would overwrite the recording beside the recipe"),
        (["--replay", str(cassette), "--transcript", str(cassette)], None, "the recording it replays"),
        (["--record", str(tmp_path / "x.json"), "--transcript", str(tmp_path / "x.json")], live, "the file of --record"),
    ]:
        result = invoke("recipe", str(recipe), "--no-log", *options, env=env)
        assert result.exit_code == 2 and said in result.stderr, (options, result.stderr)
    with pytest.raises(UserError, match="would overwrite the recipe"):  # the library's record= too
        run_recipe(recipe, record=recipe)
    assert {path: path.read_bytes() for path in (recipe, cassette)} == before
    # recording the run again beside the recipe, with a transcript of it, is what --record is for
    again = invoke("recipe", str(recipe), "--no-log", "--record", str(cassette), "--transcript", str(tmp_path / "t.jsonl"),
                   env=live)
    assert again.exit_code == 1 and "cannot connect" in again.stderr, again.stderr


def test_json_output_still_uses_the_streaming_api_by_default(loopback, tmp_path: Path):
    server = loopback(fake_openai)
    recipe = make_world(tmp_path)
    result = invoke("recipe", str(recipe), "--json", env=live_env(server))
    assert result.exit_code == 0, result.stderr
    assert all(r.json().get("stream") is True for r in server.requests)
    assert json.loads(result.stdout)["final"] == ANSWER  # and nothing but the document on stdout


HANGING_TOOL_YAML = """\
name: wait_for_ledger
description: >-
  Waits for the ledger service to confirm a stock count. Use it after a stock lookup to
  confirm the count; do not use it for anything else.
timeout: 100ms
parameters:
  type: object
  properties:
    city: {type: string, description: City of the shop}
  required: [city]
backend:
  python: ledger.py:wait_for_ledger
"""


def test_a_python_tool_stuck_past_its_timeout_does_not_keep_toolrun_alive(loopback, tmp_path: Path):
    def model(request: Recorded) -> Reply:
        if any(m.get("role") == "tool" for m in request.json()["messages"]):
            return Reply(body=ANSWER_RESPONSE)
        return Reply(body=completion({"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "wait_for_ledger", "arguments": '{"city": "北京"}'}}]},
            "tool_calls", 10, 5))

    server = loopback(model)
    recipe = make_world(tmp_path)
    (tmp_path / "tools.d" / "ledger.yaml").write_text(HANGING_TOOL_YAML, encoding="utf-8")
    # The tool's thread sleeps 120 s: if toolrun waited for it, the run would outlive subprocess.run's timeout.
    (tmp_path / "tools.d" / "ledger.py").write_text("import time\n\ndef wait_for_ledger(city):\n    time.sleep(120)\n",
                                                    encoding="utf-8")
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("tools: [get_flower_inventory]", "tools: [wait_for_ledger]")
                      .replace("tools_called: [get_flower_inventory]", "tools_not_called: [get_flower_inventory]"),
                      encoding="utf-8")
    result = subprocess.run([str(TOOLRUN), "recipe", str(recipe), "--no-stream", "--json"], env=live_env(server),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["turns"][0]["tool_calls"][0]["result"] == "the tool timed out after 0.1s"


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_ctrl_c_while_waiting_for_the_provider_exits_130_not_as_a_timeout(loopback, tmp_path: Path, stream: str):
    # asyncio turns Ctrl-C into a cancellation; inside httpx it must not pass for a read timeout.
    def slow_model(request: Recorded) -> Reply:
        if request.json().get("stream"):  # the headers and a first event come at once, the rest later
            return Reply(headers={"Content-Type": "text/event-stream"}, chunks=sse_chunks(ANSWER_RESPONSE), chunk_delay=4)
        return Reply(body=ANSWER_RESPONSE, delay=4)

    server = loopback(slow_model)
    recipe = make_world(tmp_path)
    transcript = tmp_path / "run.jsonl"
    process = subprocess.Popen([str(TOOLRUN), "recipe", str(recipe), stream, "--transcript", str(transcript)],
                               env=live_env(server), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not server.requests and time.monotonic() < deadline:  # the request is out: toolrun waits in httpx
        time.sleep(0.05)
    time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "no answer" not in stderr and "Traceback" not in stderr
    events = [json.loads(line)["event"] for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert events == ["run_start", "interrupted"]


def test_a_recording_of_calls_without_ids_replays_without_divergence(loopback, tmp_path: Path):
    # vLLM sends no id, Gemini's OpenAI endpoint sends "": toolrun's own ids go into the follow-up
    # request, so they must come out the same when the run is replayed.
    def model(request: Recorded) -> Reply:
        if any(m.get("role") == "tool" for m in request.json()["messages"]):
            return Reply(body=ANSWER_RESPONSE)
        calls = [{"type": "function", "function": {"name": "get_flower_inventory",
                                                   "arguments": json.dumps({"city": city}, ensure_ascii=False)}}
                 for city in ["北京", "上海", "深圳"]]
        calls[0]["id"] = ""
        return Reply(body=completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls", 95, 67))

    server = loopback(model)
    recipe = make_world(tmp_path)
    cassette = tmp_path / "noids.cassette.json"
    live = invoke("recipe", str(recipe), "--no-stream", "--json", "--record", str(cassette), env=live_env(server))
    assert live.exit_code == 0, live.stderr
    replayed = invoke("recipe", str(recipe), "--replay", str(cassette), "--json")
    assert replayed.exit_code == 0, replayed.stderr
    document = json.loads(replayed.stdout)
    assert document["divergences"] == []
    ids = [[c["id"] for c in json.loads(out)["turns"][0]["tool_calls"]] for out in (live.stdout, replayed.stdout)]
    assert ids[0] == ids[1] and len(set(ids[0])) == 3


def test_half_a_surrogate_pair_a_model_escapes_goes_back_to_it_and_into_the_recording_as_sent(loopback, tmp_path: Path):
    # JSON may escape half of a pair ("\\udce9"): a model's text and arguments go back in the next request,
    # and into the recording, and UTF-8 cannot encode one: the run ended with an internal error at the second
    # request, and the recording could not be written. They now go out as the escapes the model sent.
    def escaped(message: dict, finish_reason: str) -> Reply:  # json.dumps escapes what is not ASCII
        return Reply(body=json.dumps(completion(message, finish_reason, 9, 9)), headers={"Content-Type": "application/json"})

    def model(request: Recorded) -> Reply:
        if any(m.get("role") == "tool" for m in request.json()["messages"]):
            return escaped({"role": "assistant", "content": "北京有玫瑰 \ud800"}, "stop")
        arguments = json.dumps({"city": "北京", "note": "caf\udce9"})
        call = {"id": "c1", "type": "function", "function": {"name": "get_flower_inventory", "arguments": arguments}}
        return escaped({"role": "assistant", "content": "caf\udce9", "tool_calls": [call]}, "tool_calls")

    server = loopback(model)
    recipe = make_world(tmp_path)
    cassette = tmp_path / "half.cassette.json"
    live = invoke("recipe", str(recipe), "--no-stream", "--json", "--record", str(cassette), env=live_env(server))
    assert live.exit_code in (0, 3), live.stderr  # 3: the recipe's expect may want more than this answer
    assert json.loads(live.stdout)["final"] == "北京有玫瑰 \ud800"
    follow_up = server.requests[1].body.decode("utf-8")  # UTF-8, with the model's own escapes in it
    sent = next(m for m in json.loads(follow_up)["messages"] if m["role"] == "assistant")
    assert sent["content"] == "caf\udce9"
    assert json.loads(sent["tool_calls"][0]["function"]["arguments"])["note"] == "caf\udce9"
    assert "caf\\udce9" in cassette.read_bytes().decode("utf-8")
    replayed = invoke("recipe", str(recipe), "--replay", str(cassette), "--strict", "--json")
    assert replayed.exit_code == live.exit_code and json.loads(replayed.stdout)["divergences"] == [], replayed.stderr


def test_request_timeout_and_max_retries_from_the_recipe_bound_a_stuck_provider(loopback, tmp_path: Path):
    # The server answers after 120 s: a run that waited for it would outlive subprocess.run's timeout.
    server = loopback(lambda request: Reply(body=ANSWER_RESPONSE, delay=120))
    recipe = make_world(tmp_path)
    recipe.write_text(recipe.read_text(encoding="utf-8").replace(
        "settings: {max_turns: 4, temperature: 0}",
        "settings: {max_turns: 4, temperature: 0, request_timeout: 300ms, max_retries: 1}"), encoding="utf-8")
    result = subprocess.run([str(TOOLRUN), "recipe", str(recipe), "--no-stream"], env=live_env(server),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert f"no answer from {server.url}/v1/chat/completions within 0.3 s" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert len(server.requests) == 2  # the first try and one retry


def test_a_bad_request_timeout_names_its_line(tmp_path: Path):
    recipe = make_world(tmp_path)
    recipe.write_text(recipe.read_text(encoding="utf-8").replace(
        "settings: {max_turns: 4, temperature: 0}", "settings: {max_turns: 4, request_timeout: soon}"), encoding="utf-8")
    result = invoke("recipe", str(recipe))
    assert result.exit_code == 2
    assert f"{recipe}:9:" in result.stderr and "request_timeout" in result.stderr
