"""Record/replay: cassettes, secret redaction, replay by order, divergence findings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import Recorded, Reply
from toolrun.core.errors import ProviderError, UserError
from toolrun.core.secrets import register_secret
from toolrun.providers.transport import HttpxTransport, Transport, WireRequest, WireResponse
from toolrun.replay.divergence import compare_requests, first_difference, tool_names
from toolrun.replay.recording import (
    Cassette,
    Exchange,
    RecordingTransport,
    ReplayExhausted,
    ReplayTransport,
    cassette_beside,
    load_cassette,
    save_cassette,
)

FAKE_KEY = "sk-test-FAKEKEY-0123456789abcdef"


def run(coroutine):
    return asyncio.run(coroutine)


class CannedTransport(Transport):
    """Answers from a list, the network edge's stand-in."""

    def __init__(self, bodies: list[Any] | None = None, lines: list[str] | None = None, error: ProviderError | None = None):
        self.bodies = list(bodies or [])
        self.lines = lines
        self.error = error
        self.requests: list[WireRequest] = []

    async def send(self, request: WireRequest) -> WireResponse:
        self.requests.append(request)
        if self.error:
            raise self.error
        return WireResponse(200, {"content-type": "application/json"}, body=self.bodies.pop(0))

    async def stream(self, request: WireRequest) -> AsyncIterator[str]:
        self.requests.append(request)
        for line in self.lines or []:
            yield line
        if self.error:
            raise self.error


def chat_request(messages: list[dict], tools: list[str] = ("get_flower_inventory",), stream: bool = False) -> WireRequest:
    body = {
        "model": "gpt-4o-mini",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": n, "description": "d", "parameters": {"type": "object"}}} for n in tools],
    }
    return WireRequest("POST", "https://api.example.test/v1/chat/completions",
                       {"Authorization": f"Bearer {FAKE_KEY}", "Content-Type": "application/json"}, body, stream)


USER = {"role": "user", "content": "北京、上海和深圳的鲜花库存是多少?"}
ASSISTANT_CALLS = {
    "role": "assistant", "content": None,
    "tool_calls": [
        {"id": "call_A", "type": "function", "function": {"name": "get_flower_inventory", "arguments": "{\"city\": \"北京\"}"}},
        {"id": "call_B", "type": "function", "function": {"name": "get_flower_inventory", "arguments": "{\"city\": \"上海\"}"}},
    ],
}


def tool_message(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# ----------------------------------------------------------------- recording


def test_recording_keeps_each_exchange_with_secrets_redacted(tmp_path: Path):
    register_secret(FAKE_KEY)
    inner = CannedTransport(bodies=[{"id": "r1", "echo": f"key was {FAKE_KEY}"}])
    recorder = RecordingTransport(inner, recipe="inventory", model="openai:gpt-4o-mini")
    request = chat_request([USER, {"role": "user", "content": f"my key is {FAKE_KEY}"}])
    request.url += f"?key={FAKE_KEY}"

    response = run(recorder.send(request))
    assert response.body["id"] == "r1"
    assert inner.requests[0].headers["Authorization"] == f"Bearer {FAKE_KEY}"  # the real request keeps it

    path = tmp_path / "run.cassette.json"
    save_cassette(recorder.cassette, path)
    text = path.read_text(encoding="utf-8")
    assert FAKE_KEY not in text
    assert "北京" in text  # ensure_ascii=False
    document = json.loads(text)
    exchange = document["exchanges"][0]
    assert "Authorization" not in exchange["request"]["headers"]
    assert exchange["request"]["headers"]["Content-Type"] == "application/json"
    assert exchange["request"]["url"].endswith("?key=***")
    assert exchange["request"]["body"]["messages"][1]["content"] == "my key is ***"
    assert exchange["response"]["body"]["echo"] == "key was ***"
    assert document["recipe"] == "inventory" and document["version"] == 1


def test_recording_a_stream_passes_lines_through_and_stores_them():
    lines = ["data: {\"a\": 1}", "", "data: [DONE]", ""]
    recorder = RecordingTransport(CannedTransport(lines=lines))

    async def collect() -> list[str]:
        return [line async for line in recorder.stream(chat_request([USER], stream=True))]

    assert run(collect()) == lines
    assert recorder.cassette.exchanges[0].response["lines"] == lines
    assert recorder.cassette.streamed is True


def test_recording_keeps_a_provider_error_and_replay_repeats_it():
    recorder = RecordingTransport(CannedTransport(error=ProviderError("HTTP 400: bad tool schema", status=400)))
    with pytest.raises(ProviderError):
        run(recorder.send(chat_request([USER])))
    replay = ReplayTransport(recorder.cassette)
    with pytest.raises(ProviderError, match="bad tool schema"):
        run(replay.send(chat_request([USER])))


def test_on_exchange_is_called_after_every_exchange(tmp_path: Path):
    path = tmp_path / "partial.cassette.json"
    recorder = RecordingTransport(CannedTransport(bodies=[{"n": 1}, {"n": 2}]),
                                  on_exchange=lambda cassette: save_cassette(cassette, path))
    run(recorder.send(chat_request([USER])))
    assert len(load_cassette(path).exchanges) == 1  # already on disk before the run goes on
    run(recorder.send(chat_request([USER])))
    assert len(load_cassette(path).exchanges) == 2


def test_recording_through_the_real_http_transport(loopback, tmp_path: Path):
    register_secret(FAKE_KEY)

    def handler(request: Recorded) -> Reply:
        assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"
        return Reply(body={"object": "chat.completion", "choices": [{"message": {"content": "好"}}]})

    server = loopback(handler)

    async def go() -> RecordingTransport:
        recorder = RecordingTransport(HttpxTransport(max_retries=0))
        request = chat_request([USER])
        request.url = f"{server.url}/v1/chat/completions"
        await recorder.send(request)
        await recorder.aclose()
        return recorder

    recorder = run(go())
    path = tmp_path / "c.json"
    save_cassette(recorder.cassette, path)
    assert FAKE_KEY not in path.read_text(encoding="utf-8")
    assert load_cassette(path).exchanges[0].response["body"]["choices"][0]["message"]["content"] == "好"
    assert len(server.requests) == 1


# ----------------------------------------------------------------- cassette files


def test_load_cassette_reports_user_errors(tmp_path: Path):
    with pytest.raises(UserError, match="cassette not found"):
        load_cassette(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  \"version\": 1,\n  oops\n}", encoding="utf-8")
    with pytest.raises(UserError) as info:
        load_cassette(bad)
    assert info.value.problems[0].line == 3
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"version": 1}), encoding="utf-8")
    with pytest.raises(UserError, match="exchanges"):
        load_cassette(other)
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"version": 9, "exchanges": []}), encoding="utf-8")
    with pytest.raises(UserError, match="version 9"):
        load_cassette(future)


def test_cassette_round_trip_and_location(tmp_path: Path):
    cassette = Cassette(recipe="r", model="openai:m", recorded_at="2026-01-01T00:00:00Z",
                        exchanges=[Exchange({"method": "POST", "url": "u", "headers": {}, "body": {"a": "上海"}},
                                            {"status": 200, "headers": {}, "body": {"ok": True}})])
    path = tmp_path / "x.cassette.json"
    save_cassette(cassette, path)
    assert load_cassette(path) == cassette
    assert cassette_beside(Path("recipes/inventory.yaml")) == Path("recipes/inventory.cassette.json")


# ----------------------------------------------------------------- replay


def recorded_run() -> Cassette:
    first = chat_request([USER])
    second = chat_request([USER, ASSISTANT_CALLS, tool_message("call_A", "玫瑰: 100"), tool_message("call_B", "百合: 80")])
    recorder = RecordingTransport(CannedTransport(bodies=[{"n": 1}, {"n": 2}]))
    run(recorder.send(first))
    run(recorder.send(second))
    return recorder.cassette


def test_replay_serves_exchanges_in_order_without_divergence():
    replay = ReplayTransport(recorded_run())
    assert run(replay.send(chat_request([USER]))).body == {"n": 1}
    second = chat_request([USER, ASSISTANT_CALLS, tool_message("call_A", "玫瑰: 100"), tool_message("call_B", "百合: 80")])
    assert run(replay.send(second)).body == {"n": 2}
    assert replay.divergences == []
    assert replay.unused == 0


def test_replay_reports_a_different_tool_result_in_plain_words():
    seen = []
    replay = ReplayTransport(recorded_run(), on_divergence=seen.append)
    run(replay.send(chat_request([USER])))
    changed = chat_request([USER, ASSISTANT_CALLS, tool_message("call_A", "玫瑰: 100"), tool_message("call_B", "百合: 0")])
    run(replay.send(changed))
    assert seen == replay.divergences
    [finding] = replay.divergences
    assert finding.kind == "tool_result"
    assert finding.path == "messages[3].content"
    assert str(finding) == ("replay divergence at exchange 2: tool result for call_B (get_flower_inventory) "
                            "differs: recorded '百合: 80', now '百合: 0'")
    assert finding.to_json()["recorded"] == "百合: 80"


def test_replay_reports_a_different_tool_set():
    replay = ReplayTransport(recorded_run())
    run(replay.send(chat_request([USER], tools=["get_flower_inventory", "delete_everything"])))
    [finding] = replay.divergences
    assert finding.kind == "tool_set"
    assert "now also offers delete_everything" in finding.message
    assert finding.exchange == 1


def test_replay_beyond_the_recording_is_a_run_failure():
    replay = ReplayTransport(recorded_run())
    run(replay.send(chat_request([USER])))
    run(replay.send(chat_request([USER])))
    with pytest.raises(ReplayExhausted, match="only 2 exchanges"):
        run(replay.send(chat_request([USER])))


def test_replay_refuses_a_stream_mode_it_did_not_record():
    replay = ReplayTransport(recorded_run())

    async def collect():
        return [line async for line in replay.stream(chat_request([USER], stream=True))]

    with pytest.raises(ProviderError, match="--no-stream"):
        run(collect())


def test_replay_never_touches_the_network(loopback):
    server = loopback(lambda request: Reply(body={"n": "network"}))
    replay = ReplayTransport(recorded_run())
    request = chat_request([USER])
    request.url = f"{server.url}/v1/chat/completions"
    assert run(replay.send(request)).body == {"n": 1}
    assert server.requests == []


# ----------------------------------------------------------------- divergence per wire format


def test_anthropic_tool_result_and_arguments_are_named():
    def body(result: str, city: str) -> dict:
        return {"model": "claude", "tools": [{"name": "get_flower_inventory", "input_schema": {}}], "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant",
             "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_flower_inventory", "input": {"city": city}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]},
        ]}

    [finding] = compare_requests(2, body("a", "北京"), body("b", "北京"))
    assert finding.message == "tool result for toolu_1 (get_flower_inventory) differs: recorded 'a', now 'b'"
    [finding] = compare_requests(2, body("a", "北京"), body("a", "上海"))
    assert finding.kind == "arguments"
    assert "arguments of toolu_1 (get_flower_inventory)" in finding.message


def test_responses_and_gemini_results_are_named():
    def responses(output: str) -> dict:
        return {"tools": [{"type": "function", "name": "t"}], "input": [
            {"type": "function_call", "call_id": "call_9", "name": "t", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_9", "output": output}]}

    [finding] = compare_requests(1, responses("x"), responses("y"))
    assert finding.message.startswith("tool result for call_9 (t) differs")

    def gemini(output: str) -> dict:
        return {"tools": [{"functionDeclarations": [{"name": "t"}]}], "contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "t", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "t", "response": {"output": output}}}]}]}

    [finding] = compare_requests(1, gemini("x"), gemini("y"))
    assert finding.message == "tool result (t) differs: recorded 'x', now 'y'"
    assert tool_names(gemini("x")["tools"]) == ["t"]


def test_a_message_missing_from_the_run_is_one_finding_and_the_rest_line_up():
    # A recording made with a system prompt, replayed by a run without one: before, every later
    # message was compared with its neighbour ("tool result ... recorded 'assistant', now 'tool'").
    calls = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_flower_inventory", "arguments": '{"city": "北京"}'}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "玫瑰: 100"}
    system = {"role": "system", "content": "You answer questions about our flower shops."}
    user = {"role": "user", "content": "北京?"}
    recorded = {"model": "m", "messages": [system, user, calls, result]}
    [missing] = compare_requests(2, recorded, {"model": "m", "messages": [user, calls, result]})
    assert (missing.kind, missing.path, missing.recorded, missing.now) == ("conversation", "messages[0]", system, None)
    assert missing.message.endswith("now (absent)")

    changed = {**result, "content": "玫瑰: 90"}
    [gone, differs] = compare_requests(2, recorded, {"model": "m", "messages": [user, calls, changed]})
    assert gone.path == "messages[0]"
    assert differs.message == "tool result for call_1 (get_flower_inventory) differs: recorded '玫瑰: 100', now '玫瑰: 90'"
    assert differs.path == "messages[2].content"  # where it is in the request the run sends

    added = compare_requests(2, {"messages": [user]}, {"messages": [system, user]})
    assert [(d.path, d.recorded, d.now) for d in added] == [("messages[0]", None, system)]


def test_a_long_conversation_lines_up_by_its_common_start_and_end():
    turns = [{"role": "user" if i % 2 else "assistant", "content": f"turn {i}"} for i in range(1_600)]
    system = {"role": "system", "content": "be brief"}
    [missing] = compare_requests(3, {"messages": [system, *turns]}, {"messages": turns})
    assert (missing.path, missing.recorded) == ("messages[0]", system)
    changed = [*turns[:800], {"role": "assistant", "content": "other"}, *turns[801:]]
    [one] = compare_requests(3, {"messages": turns}, {"messages": changed})
    assert (one.path, one.now) == ("messages[800].content", "other")


def test_other_request_fields_and_first_difference():
    [finding] = compare_requests(1, {"model": "a", "messages": []}, {"model": "b", "messages": []})
    assert finding.kind == "request" and "model" in finding.message
    assert compare_requests(1, {"stream": True, "messages": []}, {"stream": False, "messages": []}) == []
    assert first_difference({"a": [1, 2]}, {"a": [1, 2, 3]}, "$")[0] == "$.a[2]"
    assert first_difference({"a": 1}, {"a": 1.0}) is not None  # 1 and 1.0 are different JSON


def test_a_stream_the_adapter_stops_reading_is_kept_in_request_order(tmp_path: Path):
    # An SSE reader returns at "data: [DONE]" and never exhausts the transport's generator.
    path = tmp_path / "order.cassette.json"
    inner = CannedTransport(bodies=[{"n": 2}], lines=["data: {\"n\": 1}", "", "data: [DONE]", "", ": trailing"])
    recorder = RecordingTransport(inner, on_exchange=lambda cassette: save_cassette(cassette, path))

    async def go() -> None:
        async for line in recorder.stream(chat_request([USER], stream=True)):
            if line == "data: [DONE]":
                break
        await recorder.send(chat_request([USER]))
        await recorder.aclose()

    run(go())
    first, second = load_cassette(path).exchanges
    assert first.response["lines"] == ["data: {\"n\": 1}", "", "data: [DONE]"]
    assert second.response["body"] == {"n": 2}


def test_every_provider_credential_header_is_dropped():
    from toolrun.replay.recording import redact_headers, redact_url

    headers = {"Authorization": "Bearer a", "x-api-key": "b", "X-Goog-Api-Key": "c", "api-key": "d",
               "anthropic-version": "2023-06-01", "Content-Type": "application/json"}
    assert redact_headers(headers) == {"anthropic-version": "2023-06-01", "Content-Type": "application/json"}
    assert redact_url("https://g.example/v1beta/m:generateContent?alt=sse&key=AIza-secret") == \
        "https://g.example/v1beta/m:generateContent?alt=sse&key=***"


def test_an_ollama_result_is_named_by_the_tool_it_names():
    # Ollama's calls carry no id; its results name their tool (tool_name). Every adapter reads
    # role:tool, and the one that can name the tool wins.
    def body(result: str) -> dict:
        return {"model": "qwen3", "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_flower_inventory", "arguments": {}}}]},
            {"role": "tool", "tool_name": "get_flower_inventory", "content": result}]}

    [finding] = compare_requests(1, body("a"), body("b"))
    assert finding.message == "tool result (get_flower_inventory) differs: recorded 'a', now 'b'"


def test_divergence_asks_the_adapter_whose_recording_it_is():
    from toolrun.providers.anthropic import AnthropicProvider
    from toolrun.providers.openai_chat import OpenAIChatProvider

    def chat(result: str) -> dict:
        return {"messages": [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": result}]}

    [named] = compare_requests(1, chat("x"), chat("y"), [OpenAIChatProvider])
    assert named.message == "tool result for call_1 (t) differs: recorded 'x', now 'y'"
    [unnamed] = compare_requests(1, chat("x"), chat("y"), [AnthropicProvider])  # not its wire format
    assert unnamed.kind == "conversation"


def test_the_credential_headers_dropped_are_every_adapters_own():
    from toolrun.providers import get_provider_class, provider_targets
    from toolrun.replay.recording import credential_headers, redact_headers

    for name in provider_targets():
        declared = get_provider_class(name).credential_headers
        assert declared, f"{name} declares no credential header"
        assert declared <= credential_headers()
        assert redact_headers({header: "secret" for header in declared}) == {}


def test_a_cassette_file_saved_by_its_tail_reads_as_a_whole_save_after_every_exchange(tmp_path: Path):
    # A stream left open while the next exchange is kept changes an earlier exchange: rewritten too.
    from toolrun.replay.recording import CassetteFile

    tail_saved, whole_saved = tmp_path / "tail.cassette.json", tmp_path / "whole.cassette.json"
    cassette_file = CassetteFile(tail_saved)
    snapshots: list[tuple[bytes, bytes]] = []

    def both(cassette) -> None:
        cassette_file.save(cassette)
        save_cassette(cassette, whole_saved)
        snapshots.append((tail_saved.read_bytes(), whole_saved.read_bytes()))

    inner = CannedTransport(bodies=[{"n": 2}, {"n": "三"}], lines=["data: {\"n\": 1}", "", "data: [DONE]", "", ": more"])
    recorder = RecordingTransport(inner, recipe="inventory", model="openai:gpt-4o-mini", on_exchange=both)
    both(recorder.cassette)  # no exchange yet

    async def go() -> None:
        async for line in recorder.stream(chat_request([USER], stream=True)):
            if line == "data: [DONE]":
                break
        await recorder.send(chat_request([USER]))
        await recorder.send(chat_request([USER]))
        await recorder.aclose()

    run(go())
    assert len(snapshots) >= 5
    for tail_bytes, whole_bytes in snapshots:
        assert tail_bytes == whole_bytes
        json.loads(tail_bytes)  # valid JSON after every save
    assert [len(e.response.get("lines", [])) for e in load_cassette(tail_saved).exchanges] == [3, 0, 0]


def test_a_cassette_file_replaced_behind_its_back_is_saved_whole(tmp_path: Path):
    from toolrun.replay.recording import CassetteFile

    path = tmp_path / "c.cassette.json"
    cassette_file = CassetteFile(path)
    recorder = RecordingTransport(CannedTransport(bodies=[{"n": 1}, {"n": 2}]), on_exchange=cassette_file.save)
    run(recorder.send(chat_request([USER])))
    path.write_text("not json, and longer than the cassette was: " + "x" * 5000, encoding="utf-8")
    run(recorder.send(chat_request([USER])))
    assert [e.response["body"] for e in load_cassette(path).exchanges] == [{"n": 1}, {"n": 2}]


def test_a_secret_learned_after_an_exchange_was_written_is_redacted_from_it_too(tmp_path: Path):
    from toolrun.core.secrets import Redactor, redacting
    from toolrun.replay.recording import CassetteFile

    path = tmp_path / "c.cassette.json"
    recorder = RecordingTransport(CannedTransport(bodies=[{"n": 1}, {"n": 2}]), on_exchange=CassetteFile(path).save)
    leaked = {"role": "user", "content": "the token is tok-8c1f5e2a9b"}
    with redacting(Redactor()) as redactor:
        run(recorder.send(chat_request([leaked])))
        assert "tok-8c1f5e2a9b" in path.read_text(encoding="utf-8")
        redactor.add("tok-8c1f5e2a9b")  # a tool read it as a secret only now
        run(recorder.send(chat_request([USER])))
    text = path.read_text(encoding="utf-8")
    assert "tok-8c1f5e2a9b" not in text and len(json.loads(text)["exchanges"]) == 2
