"""What the OpenAI-family adapters cost per request: stream assembly and body building.

Prints, for Chat Completions (SSE chunks), Responses (SSE events) and Ollama (NDJSON):
- mapping only: chunks per second through each stream assembler (parsed JSON in);
- end to end: one streamed answer of many chunks over a loopback server through the real
  HttpxTransport, wall time and chunks per second;
- request building: ``build_request_body`` for a history of many tool rounds.

    .venv/bin/python benchmarks/provider_streams.py [--calls 8] [--pieces 200] [--rounds 100]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.loopback and benchmarks._common

from benchmarks._common import (  # noqa: E402
    TOOL,
    long_history,
    ndjson,
    sse,
    time_end_to_end,
    time_mapping,
    time_request_building,
)
from toolrun.providers import ollama, openai_chat, openai_responses  # noqa: E402

WIDTH = 18  # the label column


def chat_chunks(calls: int, pieces: int) -> list[dict[str, Any]]:
    """``calls`` parallel calls whose arguments arrive in ``pieces`` interleaved fragments each."""
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": TOOL.name, "arguments": '{"city": "'}}]}}]}
        for i in range(calls)]
    for _ in range(pieces):
        chunks += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": "北"}}]}}]}
                   for i in range(calls)]
    chunks += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": '"}'}}]}}]}
               for i in range(calls)]
    chunks += [{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
               {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 50}}]
    return chunks


def responses_events(calls: int, pieces: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": i,
         "item": {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": TOOL.name, "arguments": ""}}
        for i in range(calls)]
    for _ in range(pieces):
        events += [{"type": "response.function_call_arguments.delta", "item_id": f"fc_{i}", "output_index": i, "delta": "北"}
                   for i in range(calls)]
    events.append({"type": "response.completed", "response": {"status": "completed", "output": [],
                                                               "usage": {"input_tokens": 100, "output_tokens": 50}}})
    return events


def ollama_lines(calls: int, pieces: int) -> list[dict[str, Any]]:
    lines = [{"message": {"role": "assistant", "content": "北"}, "done": False} for _ in range(pieces)]
    lines.append({"message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": TOOL.name, "arguments": {"city": "北京"}}} for _ in range(calls)]}, "done": False})
    lines.append({"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
                  "prompt_eval_count": 100, "eval_count": 50})
    return lines


def chat_feed():
    assembler = openai_chat.ChatStreamAssembler()
    return assembler.feed, assembler.finish


def responses_feed():
    assembler = openai_responses.ResponsesStreamAssembler()
    return (lambda event: assembler.feed(event, event["type"])), assembler.finish


def ollama_feed():
    assembler = ollama.OllamaStreamAssembler()
    return assembler.feed, assembler.finish


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--pieces", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    options = parser.parse_args()

    chat, events, lines = (chat_chunks(options.calls, options.pieces), responses_events(options.calls, options.pieces),
                           ollama_lines(options.calls, options.pieces))
    print(f"mapping only ({options.calls} parallel calls, {options.pieces} argument fragments each):")
    time_mapping("openai chat", chat, chat_feed, width=WIDTH, unit="items")
    time_mapping("openai responses", events, responses_feed, width=WIDTH, unit="items")
    time_mapping("ollama", lines, ollama_feed, width=WIDTH, unit="items")

    print("end to end over loopback (HttpxTransport, one streamed answer per request):")
    over_v1 = {"width": WIDTH, "unit": "chunks", "base_path": "/v1", "api_key": "sk-bench"}
    asyncio.run(time_end_to_end("openai chat", openai_chat.OpenAIChatProvider, sse(chat, named=False, done_marker=True),
                                len(chat), **over_v1))
    asyncio.run(time_end_to_end("openai responses", openai_responses.OpenAIResponsesProvider, sse(events, named=True),
                                len(events), **over_v1))
    asyncio.run(time_end_to_end("ollama", ollama.OllamaProvider, ndjson(lines), len(lines), **over_v1))

    request = long_history(options.rounds)
    print(f"request building ({options.rounds} tool rounds of 3 calls, 20 tools):")
    time_request_building([("openai chat", openai_chat.build_request_body),
                           ("openai responses", openai_responses.build_request_body),
                           ("ollama", ollama.build_request_body)], request, width=WIDTH)


if __name__ == "__main__":
    main()
