"""What the Anthropic and Gemini adapters cost per request: stream assembly and body building.

Prints, for Anthropic Messages (SSE with event names) and Gemini (SSE data lines):
- mapping only: events per second through each stream assembler (parsed JSON in);
- end to end: one streamed answer of many events over a loopback server through the real
  HttpxTransport, wall time and events per second;
- request building: ``build_request_body`` for a history of many tool rounds.

    .venv/bin/python benchmarks/anthropic_gemini_streams.py [--calls 8] [--pieces 200] [--rounds 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.loopback

from tests.loopback import LoopbackServer, Reply  # noqa: E402
from toolrun.messages import (  # noqa: E402
    Message,
    ModelRequest,
    OpaquePart,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
)
from toolrun.providers import anthropic, gemini  # noqa: E402
from toolrun.providers.base import ProviderConfig  # noqa: E402
from toolrun.providers.transport import HttpxTransport  # noqa: E402

TOOL = ToolDefinition("get_flower_inventory", "Returns the flower stock of one city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


def anthropic_events(calls: int, pieces: int) -> list[dict[str, Any]]:
    """A thinking block, then ``calls`` tool_use blocks whose input arrives in ``pieces`` deltas each."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 100, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    ]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "想"}}
               for _ in range(pieces)]
    events += [{"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "SIG"}},
               {"type": "content_block_stop", "index": 0}]
    for i in range(1, calls + 1):
        events.append({"type": "content_block_start", "index": i,
                       "content_block": {"type": "tool_use", "id": f"toolu_{i}", "name": TOOL.name, "input": {}}})
        events.append({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": '{"city": "'}})
        events += [{"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": "北"}}
                   for _ in range(pieces)]
        events += [{"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": '"}'}},
                   {"type": "ping"}, {"type": "content_block_stop", "index": i}]
    events += [{"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 50}},
               {"type": "message_stop"}]
    return events


def gemini_chunks(calls: int, pieces: int) -> list[dict[str, Any]]:
    """``pieces`` text chunks, then ``calls`` calls whole (Gemini does not stream arguments by default)."""
    chunks = [{"candidates": [{"content": {"role": "model", "parts": [{"text": "北"}]}}]} for _ in range(pieces)]
    parts = [{"functionCall": {"name": TOOL.name, "args": {"city": "北京"}}} for _ in range(calls)]
    parts[0]["thoughtSignature"] = "SIG"
    chunks.append({"candidates": [{"content": {"role": "model", "parts": parts}}]})
    chunks.append({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}],
                   "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 50}})
    return chunks


def per_second(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "inf"


def time_mapping(name: str, items: list[dict[str, Any]], feed: Callable[[], tuple[Callable[[dict[str, Any]], Any], Callable[[], Any]]],
                 repeat: int = 20) -> None:
    started = time.perf_counter()
    for _ in range(repeat):
        add, finish = feed()
        for item in items:
            add(item)
        finish()
    elapsed = time.perf_counter() - started
    print(f"  {name:<10} {len(items):>6} events x{repeat}: {elapsed * 1000 / repeat:8.2f} ms/stream  "
          f"{per_second(len(items) * repeat, elapsed)}")


def anthropic_feed():
    assembler = anthropic.AnthropicStreamAssembler()
    return assembler.feed, assembler.finish


def gemini_feed():
    assembler = gemini.GeminiStreamAssembler()
    return assembler.feed, assembler.finish


def sse(items: list[dict[str, Any]], named: bool) -> Reply:
    frames = [(f"event: {item['type']}\n" if named else "") + f"data: {json.dumps(item, ensure_ascii=False)}\n\n" for item in items]
    return Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=frames)


async def time_end_to_end(name: str, provider_class: type, reply: Reply, count: int, repeat: int = 5) -> None:
    server = LoopbackServer(lambda request: reply).start()
    try:
        provider = provider_class("m", ProviderConfig(server.url, "bench-key"), HttpxTransport(max_retries=0))
        request = ModelRequest("m", None, [Message("user", [TextPart("北京?")])], [TOOL])
        await provider.complete(request, stream=True)  # warm the connection
        started = time.perf_counter()
        for _ in range(repeat):
            await provider.complete(request, stream=True)
        elapsed = time.perf_counter() - started
        await provider.aclose()
    finally:
        server.stop()
    print(f"  {name:<10} {count:>6} events x{repeat}: {elapsed * 1000 / repeat:8.2f} ms/request  "
          f"{per_second(count * repeat, elapsed)}")


def long_history(rounds: int) -> ModelRequest:
    messages: list[Message] = [Message("user", [TextPart("北京、上海和深圳的鲜花库存是多少?")])]
    for n in range(rounds):
        calls = [ToolCall(f"call_{n}_{i}", TOOL.name, {"city": "北京"}, '{"city": "北京"}', f"call_{n}_{i}",
                          {"gemini": {"thoughtSignature": "SIG"}} if i == 0 else {}) for i in range(3)]
        thinking = OpaquePart("anthropic", {"type": "thinking", "thinking": "三个城市", "signature": "SIG"})
        messages.append(Message("assistant", [thinking, *calls]))
        messages.append(Message("tool", [ToolResult(call.id, call.name, "玫瑰: 100, 郁金香: 150") for call in calls]))
    return ModelRequest("m", "You answer questions about our flower shops.", messages, [TOOL] * 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--pieces", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    options = parser.parse_args()

    events, chunks = anthropic_events(options.calls, options.pieces), gemini_chunks(options.calls, options.pieces)
    print(f"mapping only ({options.calls} parallel calls, {options.pieces} fragments each):")
    time_mapping("anthropic", events, anthropic_feed)
    time_mapping("gemini", chunks, gemini_feed)

    print("end to end over loopback (HttpxTransport, one streamed answer per request):")
    asyncio.run(time_end_to_end("anthropic", anthropic.AnthropicProvider, sse(events, named=True), len(events)))
    asyncio.run(time_end_to_end("gemini", gemini.GeminiProvider, sse(chunks, named=False), len(chunks)))

    request = long_history(options.rounds)
    print(f"request building ({options.rounds} tool rounds of 3 calls, 20 tools):")
    for name, build in (("anthropic", anthropic.build_request_body), ("gemini", gemini.build_request_body)):
        started = time.perf_counter()
        for _ in range(20):
            body = build(request, stream=True)
        elapsed = (time.perf_counter() - started) / 20
        size = len(json.dumps(body, ensure_ascii=False).encode("utf-8"))
        print(f"  {name:<10} {elapsed * 1000:8.2f} ms/body  {size / 1024:8.1f} KiB")


if __name__ == "__main__":
    main()
