"""Regenerate recipes/inventory.cassette.json from the published transcript of the example.

The published run of the classic three-city example gives the model's two answers: three
``get_flower_inventory`` calls in one turn (finish_reason ``tool_calls``, 95 in / 67 out
tokens), then the answer (finish_reason ``stop``, 235 in / 90 out). This script serves
exactly those two ``chat.completion`` bodies from a fake OpenAI server on 127.0.0.1 and
runs toolrun itself against it — the real console script, with ``--record`` — so the
requests in the cassette are byte for byte what toolrun sends, the tools ran for real, and
a replay shows no divergence.

Afterwards the cassette is tidied for publication, and says so in its ``note``: the
loopback URL becomes OpenAI's public endpoint (where a live run of the recipe goes), and
the fake server's own response headers (``Server``, ``Date``) are dropped.

Usage (from the repository root)::

    .venv/bin/python scripts/make_inventory_cassette.py [--check]

``--check`` regenerates into a temporary file and fails if the committed cassette's
exchanges differ (the ``recorded_at`` stamp aside).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.loopback import LoopbackServer, Recorded, Reply  # noqa: E402

RECIPE = ROOT / "recipes" / "inventory.yaml"
CASSETTE = ROOT / "recipes" / "inventory.cassette.json"
PUBLIC_BASE_URL = "https://api.openai.com/v1"
FAKE_KEY = "sk-fake-key-for-the-loopback-recording-only"
MODEL = "gpt-4o-mini"
CREATED = 1_732_000_000  # a fixed timestamp keeps the cassette reproducible

CALLS = [
    ("call_DhKVYSzAsqJ2DKkYLhmlhNYH", "北京"),
    ("call_EW6HrY9A0WUV40KsOifY7cfY", "上海"),
    ("call_g9yh7ebEzIU8vc1Cx0OkGYK8", "深圳"),
]
ANSWER = ("北京的鲜花库存为：玫瑰: 100, 郁金香: 150\n"
          "上海的鲜花库存为：百合: 80, 康乃馨: 120\n"
          "深圳的鲜花库存为：向日葵: 200, 玉兰: 90")


def completion(number: int, message: dict, finish_reason: str, prompt: int, completion_tokens: int) -> dict:
    """A chat.completion body as OpenAI sends it."""
    return {
        "id": f"chatcmpl-inventory-example-{number}",
        "object": "chat.completion",
        "created": CREATED + number,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                  "total_tokens": prompt + completion_tokens},
    }


TOOL_CALLS_RESPONSE = completion(1, {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": "get_flower_inventory", "arguments": json.dumps({"city": city}, ensure_ascii=False)}}
        for call_id, city in CALLS
    ],
    "refusal": None,
}, "tool_calls", 95, 67)

ANSWER_RESPONSE = completion(2, {"role": "assistant", "content": ANSWER, "refusal": None}, "stop", 235, 90)


def fake_openai(request: Recorded) -> Reply:
    """First request: the three calls. Second (which must carry three tool results): the answer."""
    if request.path != "/v1/chat/completions":
        return Reply(404, {"error": {"message": f"no route {request.path}"}})
    body = request.json()
    results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
    if not results:
        return Reply(body=TOOL_CALLS_RESPONSE)
    if sorted(m.get("tool_call_id") for m in results) != sorted(call_id for call_id, _ in CALLS):
        return Reply(400, {"error": {"message": f"unexpected tool results: {results}"}})
    return Reply(body=ANSWER_RESPONSE)


def record(destination: Path) -> None:
    """Run the recipe through the real console script against the fake server, recording."""
    server = LoopbackServer(fake_openai).start()
    try:
        toolrun = shutil.which("toolrun", path=str(Path(sys.executable).parent)) or "toolrun"
        env = {**os.environ, "OPENAI_API_KEY": FAKE_KEY, "OPENAI_BASE_URL": f"{server.url}/v1"}
        completed = subprocess.run(
            [toolrun, "recipe", str(RECIPE), "--live", "--no-stream", "--record", str(destination)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
        )
        sys.stderr.write(completed.stderr)
        if completed.returncode != 0:
            raise SystemExit(f"toolrun exited with {completed.returncode}; no cassette written")
        if len(server.requests) != 2:
            raise SystemExit(f"expected 2 model requests, the fake server got {len(server.requests)}")
    finally:
        server.stop()


def tidy(document: dict, loopback_base: str | None = None) -> dict:
    """Public endpoint instead of the loopback one; no fake-server headers; a note saying so."""
    for exchange in document["exchanges"]:
        url = exchange["request"]["url"]
        exchange["request"]["url"] = PUBLIC_BASE_URL + url[url.index("/v1") + len("/v1"):]
        exchange["response"]["headers"] = {"content-type": "application/json"}
    note = ("Reconstructed from the published transcript of the three-city example: recorded by "
            "scripts/make_inventory_cassette.py, which runs toolrun --record against a loopback "
            "server answering with the published responses; URL and response headers normalised.")
    return {"version": document["version"], "note": note,
            **{k: v for k, v in document.items() if k not in ("version", "note")}}


def comparable(document: dict) -> dict:
    return {k: v for k, v in document.items() if k != "recorded_at"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed cassette is out of date")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        raw = Path(folder) / "inventory.cassette.json"
        record(raw)
        document = tidy(json.loads(raw.read_text(encoding="utf-8")))
    if FAKE_KEY in json.dumps(document, ensure_ascii=False):
        raise SystemExit("the fake key leaked into the cassette; refusing to write it")
    if options.check:
        committed = json.loads(CASSETTE.read_text(encoding="utf-8"))
        if comparable(committed) != comparable(document):
            print(f"{CASSETTE} is out of date: run scripts/make_inventory_cassette.py", file=sys.stderr)
            return 1
        print(f"{CASSETTE} is up to date")
        return 0
    CASSETTE.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {CASSETTE} ({len(document['exchanges'])} exchanges)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
