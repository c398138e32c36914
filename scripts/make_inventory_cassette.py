"""Regenerate the inventory recipes' cassettes by running toolrun itself against fake servers.

``recipes/inventory.cassette.json`` (OpenAI Chat, not streamed) is reconstructed from the
published transcript of the classic three-city example: three ``get_flower_inventory``
calls in one turn (ids call_DhKV…, call_EW6H…, call_g9yh…; finish_reason ``tool_calls``;
95 in / 67 out tokens), then the answer (finish_reason ``stop``; 235 in / 90 out).

``recipes/inventory-anthropic.cassette.json`` (Anthropic Messages, streamed),
``recipes/inventory-gemini.cassette.json`` (Gemini, streamed) and
``recipes/inventory-responses.cassette.json`` (OpenAI Responses, not streamed) show the
same conversation in those wire formats. Their ids, texts and token counts are made up (plausible, not
published); their cassettes' ``note`` says so.

For each, a fake provider server on 127.0.0.1 answers with those responses, in the
provider's own wire format, and the real console script runs the recipe against it with
``--record`` — so every request in a cassette is exactly what toolrun sends, the tools ran
for real, and a replay shows no divergence. Afterwards each cassette is tidied for
publication (its note says so): the loopback URL becomes the provider's public endpoint
(where a live run goes) and the fake server's own response headers are dropped.

Usage (from the repository root)::

    .venv/bin/python scripts/make_inventory_cassette.py [--check] [openai|anthropic|gemini|openai-responses ...]

``--check`` regenerates into memory and fails if a committed cassette's exchanges differ
(the ``recorded_at`` stamp aside): run it after changing an adapter or the flower tool.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.loopback import LoopbackServer, Recorded, Reply  # noqa: E402

CITIES = ["北京", "上海", "深圳"]
RESULTS = {"北京": "玫瑰: 100, 郁金香: 150", "上海": "百合: 80, 康乃馨: 120", "深圳": "向日葵: 200, 玉兰: 90"}
ANSWER = ("北京的鲜花库存为：玫瑰: 100, 郁金香: 150\n"
          "上海的鲜花库存为：百合: 80, 康乃馨: 120\n"
          "深圳的鲜花库存为：向日葵: 200, 玉兰: 90")
FAKE_KEY = "sk-fake-key-for-the-loopback-recording-only"
GENERATED_BY = "recorded by scripts/make_inventory_cassette.py, which runs toolrun --record against a loopback server"
TIDIED = "URL and response headers normalised"


@dataclass
class Scenario:
    """One recipe, the fake provider that plays its model, and how to point toolrun at it."""

    recipe: str
    environment: Callable[[str], dict[str, str]]  # loopback URL -> variables for toolrun
    handler: Callable[[Recorded], Reply]
    public_origin: str  # what replaces the loopback server's origin in the cassette
    stream: bool
    note: str

    @property
    def recipe_path(self) -> Path:
        return ROOT / "recipes" / f"{self.recipe}.yaml"

    @property
    def cassette_path(self) -> Path:
        return ROOT / "recipes" / f"{self.recipe}.cassette.json"


def refuse(message: str) -> Reply:
    return Reply(400, {"error": {"message": message}})


def sse(events: list[tuple[str | None, dict]]) -> list[str]:
    """Server-sent events, one chunk per event, as a provider streams them."""
    chunks = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        chunks.append(f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n")
    return chunks


# --------------------------------------------------------------------------- OpenAI Chat (published)

OPENAI_CALL_IDS = ["call_DhKVYSzAsqJ2DKkYLhmlhNYH", "call_EW6HrY9A0WUV40KsOifY7cfY", "call_g9yh7ebEzIU8vc1Cx0OkGYK8"]
OPENAI_CREATED = 1_732_000_000  # fixed, so the cassette is reproducible


def openai_completion(number: int, message: dict, finish_reason: str, prompt: int, output: int) -> dict:
    return {
        "id": f"chatcmpl-inventory-example-{number}",
        "object": "chat.completion",
        "created": OPENAI_CREATED + number,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output},
    }


OPENAI_CALLS = openai_completion(1, {
    "role": "assistant", "content": None, "refusal": None,
    "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "get_flower_inventory", "arguments": json.dumps({"city": city}, ensure_ascii=False)}}
        for call_id, city in zip(OPENAI_CALL_IDS, CITIES, strict=True)
    ],
}, "tool_calls", 95, 67)
OPENAI_ANSWER = openai_completion(2, {"role": "assistant", "content": ANSWER, "refusal": None}, "stop", 235, 90)


def fake_openai(request: Recorded) -> Reply:
    """First request: the three calls. Second (which must carry the three results): the answer."""
    if request.path != "/v1/chat/completions":
        return Reply(404, {"error": {"message": f"no route {request.path}"}})
    results = [m for m in request.json().get("messages", []) if m.get("role") == "tool"]
    if not results:
        return Reply(body=OPENAI_CALLS)
    if sorted(m.get("tool_call_id") for m in results) != sorted(OPENAI_CALL_IDS):
        return refuse(f"unexpected tool results: {results}")
    return Reply(body=OPENAI_ANSWER)


# --------------------------------------------------------------------------- Anthropic (made up)

ANTHROPIC_MODEL = "claude-sonnet-4-5"
ANTHROPIC_IDS = ["toolu_01Inventory0000Beijing01", "toolu_01Inventory000Shanghai02", "toolu_01Inventory00000Shenzhen3"]
ANTHROPIC_PREAMBLE = "我来查询这三个城市的鲜花库存。"


def anthropic_stream(number: int, blocks: list[dict], stop_reason: str, input_tokens: int, output_tokens: int) -> list[str]:
    """A Messages stream: message_start, each block started/streamed/stopped, message_delta, message_stop."""
    events: list[tuple[str | None, dict]] = [("message_start", {"type": "message_start", "message": {
        "id": f"msg_01InventoryExample{number:04d}", "type": "message", "role": "assistant", "model": ANTHROPIC_MODEL,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1}}})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            text = block["text"]
            for start in range(0, len(text), 8):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "text_delta", "text": text[start:start + 8]}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            arguments = json.dumps(block["input"], ensure_ascii=False)
            for piece in ["", arguments[:6], arguments[6:]]:
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "input_json_delta", "partial_json": piece}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                     "usage": {"output_tokens": output_tokens}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return sse(events)


def fake_anthropic(request: Recorded) -> Reply:
    if request.path != "/v1/messages":
        return Reply(404, {"type": "error", "error": {"type": "not_found_error", "message": request.path}})
    body = request.json()
    if not body.get("stream"):
        return refuse("this fake server only streams")
    last = body["messages"][-1]
    results = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(last.get("content"), list) else []
    headers = {"Content-Type": "text/event-stream"}
    if not results:
        blocks = [{"type": "text", "text": ANTHROPIC_PREAMBLE}] + [
            {"type": "tool_use", "id": tool_id, "name": "get_flower_inventory", "input": {"city": city}}
            for tool_id, city in zip(ANTHROPIC_IDS, CITIES, strict=True)]
        return Reply(headers=headers, chunks=anthropic_stream(1, blocks, "tool_use", 1046, 142))
    if sorted(b.get("tool_use_id") for b in results) != sorted(ANTHROPIC_IDS):
        return refuse(f"unexpected tool results: {results}")
    return Reply(headers=headers, chunks=anthropic_stream(2, [{"type": "text", "text": ANSWER}], "end_turn", 1298, 87))


# --------------------------------------------------------------------------- Gemini (made up)

GEMINI_MODEL = "gemini-2.5-flash"


def gemini_chunk(parts: list[dict], finish: str | None, usage: tuple[int, int] | None) -> dict:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": GEMINI_MODEL}
    if usage:
        chunk["usageMetadata"] = {"promptTokenCount": usage[0], "candidatesTokenCount": usage[1],
                                  "totalTokenCount": sum(usage)}
    return chunk


def fake_gemini(request: Recorded) -> Reply:
    if request.path != f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent":
        return Reply(404, {"error": {"code": 404, "message": request.path, "status": "NOT_FOUND"}})
    contents = request.json().get("contents", [])
    results = [p["functionResponse"] for p in contents[-1].get("parts", []) if "functionResponse" in p]
    headers = {"Content-Type": "text/event-stream"}
    if not results:
        # Gemini sends whole calls, and no ids: toolrun makes them up
        calls = [{"functionCall": {"name": "get_flower_inventory", "args": {"city": city}}} for city in CITIES]
        return Reply(headers=headers, chunks=sse([(None, gemini_chunk(calls, "STOP", (312, 45)))]))
    if [r.get("name") for r in results] != ["get_flower_inventory"] * 3:
        return refuse(f"unexpected function responses: {results}")
    lines = ANSWER.split("\n")
    chunks = [gemini_chunk([{"text": line + ("\n" if i < len(lines) - 1 else "")}], None, None)
              for i, line in enumerate(lines)]
    chunks[-1] = gemini_chunk(chunks[-1]["candidates"][0]["content"]["parts"], "STOP", (433, 71))
    return Reply(headers=headers, chunks=sse([(None, chunk) for chunk in chunks]))


# --------------------------------------------------------------------------- OpenAI Responses (made up)

RESPONSES_MODEL = "gpt-4.1-mini"
RESPONSES_CALL_IDS = ["call_InventoryExampleBeijing01", "call_InventoryExampleShanghai2", "call_InventoryExampleShenzhen3"]


def responses_body(number: int, output: list[dict], input_tokens: int, output_tokens: int) -> dict:
    return {"id": f"resp_inventory_example_{number}", "object": "response", "created_at": OPENAI_CREATED + number,
            "status": "completed", "model": RESPONSES_MODEL, "output": output,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens}}


def fake_responses(request: Recorded) -> Reply:
    if request.path != "/v1/responses":
        return Reply(404, {"error": {"message": f"no route {request.path}"}})
    items = request.json().get("input") or []
    outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
    if not outputs:
        calls = [{"type": "function_call", "id": f"fc_inventory_example_{n}", "call_id": call_id,
                  "name": "get_flower_inventory", "arguments": json.dumps({"city": city}, ensure_ascii=False),
                  "status": "completed"}
                 for n, (call_id, city) in enumerate(zip(RESPONSES_CALL_IDS, CITIES, strict=True), start=1)]
        return Reply(body=responses_body(1, calls, 288, 71))
    if sorted(o.get("call_id") for o in outputs) != sorted(RESPONSES_CALL_IDS):
        return refuse(f"unexpected function_call_output items: {outputs}")
    message = {"type": "message", "id": "msg_inventory_example", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]}
    return Reply(body=responses_body(2, [message], 431, 92))


SCENARIOS = {
    "openai": Scenario(
        "inventory",
        lambda url: {"OPENAI_API_KEY": FAKE_KEY, "OPENAI_BASE_URL": f"{url}/v1"},
        fake_openai, "https://api.openai.com", stream=False,
        note=("Reconstructed from the published transcript of the three-city example (call ids, "
              f"finish reasons, token counts, answer): {GENERATED_BY} answering with the published "
              f"responses; {TIDIED}.")),
    "anthropic": Scenario(
        "inventory-anthropic",
        lambda url: {"ANTHROPIC_API_KEY": FAKE_KEY, "ANTHROPIC_BASE_URL": url},
        fake_anthropic, "https://api.anthropic.com", stream=True,
        note=(f"A demonstration, not a real Claude run: {GENERATED_BY} speaking the Messages "
              f"streaming format; its ids, texts and token counts are made up; {TIDIED}.")),
    "gemini": Scenario(
        "inventory-gemini",
        lambda url: {"GEMINI_API_KEY": FAKE_KEY, "GEMINI_BASE_URL": url},
        fake_gemini, "https://generativelanguage.googleapis.com", stream=True,
        note=(f"A demonstration, not a real Gemini run: {GENERATED_BY} speaking the "
              f"streamGenerateContent format; its texts and token counts are made up; {TIDIED}.")),
    "openai-responses": Scenario(
        "inventory-responses",
        lambda url: {"OPENAI_API_KEY": FAKE_KEY, "OPENAI_BASE_URL": f"{url}/v1"},
        fake_responses, "https://api.openai.com", stream=False,
        note=(f"A demonstration, not a real OpenAI run: {GENERATED_BY} speaking the Responses "
              f"format (not streamed); its ids and token counts are made up; {TIDIED}.")),
}


def record(scenario: Scenario, destination: Path) -> str:
    """Run the recipe through the real console script against the fake server, recording.

    Returns the fake server's URL (``http://127.0.0.1:PORT``).
    """
    server = LoopbackServer(scenario.handler).start()
    try:
        toolrun = shutil.which("toolrun", path=str(Path(sys.executable).parent)) or "toolrun"
        env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
        env.update(scenario.environment(server.url))
        mode = "--stream" if scenario.stream else "--no-stream"
        completed = subprocess.run(
            [toolrun, "recipe", str(scenario.recipe_path), "--live", mode, "--record", str(destination)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )
        if completed.returncode != 0:  # the run's own output only when it explains a failure
            sys.stderr.write(completed.stdout + completed.stderr)
            raise SystemExit(f"toolrun exited with {completed.returncode}; no cassette written")
        if len(server.requests) != 2:
            raise SystemExit(f"expected 2 model requests, the fake server got {len(server.requests)}")
        return server.url
    finally:
        server.stop()


def tidy(document: dict, scenario: Scenario, loopback_url: str) -> dict:
    """The public endpoint instead of the loopback one; no fake-server headers; a note saying so."""
    for exchange in document["exchanges"]:
        exchange["request"]["url"] = exchange["request"]["url"].replace(loopback_url, scenario.public_origin, 1)
        content_type = "text/event-stream" if "lines" in exchange["response"] else "application/json"
        exchange["response"]["headers"] = {"content-type": content_type}
    rest = {k: v for k, v in document.items() if k not in ("version", "note")}
    return {"version": document["version"], "note": scenario.note, **rest}


def generate(scenario: Scenario) -> dict:
    """Record the scenario into a temporary file and return the tidied cassette."""
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder) / "recorded.cassette.json"
        loopback_url = record(scenario, raw)
        document = tidy(json.loads(raw.read_text(encoding="utf-8")), scenario, loopback_url)
    if FAKE_KEY in json.dumps(document, ensure_ascii=False):
        raise SystemExit("the fake key leaked into the cassette; refusing to write it")
    return document


def comparable(document: dict) -> dict:
    return {k: v for k, v in document.items() if k != "recorded_at"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed cassette is out of date")
    parser.add_argument("providers", nargs="*", metavar="PROVIDER", help=f"which cassettes: {', '.join(SCENARIOS)} (default: all)")
    options = parser.parse_args()
    stale = 0
    unknown = [name for name in options.providers if name not in SCENARIOS]
    if unknown:
        parser.error(f"unknown provider {unknown[0]!r}; choose from {', '.join(SCENARIOS)}")
    for name in options.providers or list(SCENARIOS):
        scenario = SCENARIOS[name]
        document = generate(scenario)
        path = scenario.cassette_path.relative_to(ROOT)
        if options.check:
            committed = json.loads(scenario.cassette_path.read_text(encoding="utf-8"))
            if comparable(committed) != comparable(document):
                print(f"{path} is out of date: run scripts/make_inventory_cassette.py {name}", file=sys.stderr)
                stale += 1
            else:
                print(f"{path} is up to date")
            continue
        scenario.cassette_path.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path} ({len(document['exchanges'])} exchanges)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
