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
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.loopback and benchmarks._common

from benchmarks._common import TOOL, long_history, sse, time_end_to_end, time_mapping, time_request_building  # noqa: E402
from toolrun.providers import anthropic, gemini  # noqa: E402

WIDTH = 10  # the label column


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


def anthropic_feed():
    assembler = anthropic.AnthropicStreamAssembler()
    return assembler.feed, assembler.finish


def gemini_feed():
    assembler = gemini.GeminiStreamAssembler()
    return assembler.feed, assembler.finish


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--pieces", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    options = parser.parse_args()

    events, chunks = anthropic_events(options.calls, options.pieces), gemini_chunks(options.calls, options.pieces)
    print(f"mapping only ({options.calls} parallel calls, {options.pieces} fragments each):")
    time_mapping("anthropic", events, anthropic_feed, width=WIDTH, unit="events")
    time_mapping("gemini", chunks, gemini_feed, width=WIDTH, unit="events")

    print("end to end over loopback (HttpxTransport, one streamed answer per request):")
    asyncio.run(time_end_to_end("anthropic", anthropic.AnthropicProvider, sse(events, named=True), len(events),
                                width=WIDTH, unit="events"))
    asyncio.run(time_end_to_end("gemini", gemini.GeminiProvider, sse(chunks, named=False), len(chunks),
                                width=WIDTH, unit="events"))

    request = long_history(options.rounds, with_thinking=True)
    print(f"request building ({options.rounds} tool rounds of 3 calls, 20 tools):")
    time_request_building([("anthropic", anthropic.build_request_body), ("gemini", gemini.build_request_body)],
                          request, width=WIDTH)


if __name__ == "__main__":
    main()
