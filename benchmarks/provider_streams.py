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
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
)
from toolrun.providers import ollama, openai_chat, openai_responses  # noqa: E402
from toolrun.providers.base import ProviderConfig  # noqa: E402
from toolrun.providers.transport import HttpxTransport  # noqa: E402

TOOL = ToolDefinition("get_flower_inventory", "Returns the flower stock of one city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


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


def per_second(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "inf"


def time_mapping(name: str, items: list[dict[str, Any]], feed: Callable[[], Callable[[dict[str, Any]], Any]],
                 repeat: int = 20) -> None:
    started = time.perf_counter()
    for _ in range(repeat):
        add, finish = feed()
        for item in items:
            add(item)
        finish()
    elapsed = time.perf_counter() - started
    print(f"  {name:<18} {len(items):>6} items x{repeat}: {elapsed * 1000 / repeat:8.2f} ms/stream  "
          f"{per_second(len(items) * repeat, elapsed)}")


def chat_feed():
    assembler = openai_chat.ChatStreamAssembler()
    return assembler.feed, assembler.result


def responses_feed():
    assembler = openai_responses.ResponsesStreamAssembler()
    return (lambda event: assembler.feed(event["type"], event)), assembler.result


def ollama_feed():
    assembler = ollama.OllamaStreamAssembler()
    return assembler.feed, assembler.result


def sse(items: list[dict[str, Any]], named: bool) -> Reply:
    frames = [(f"event: {item['type']}\n" if named else "") + f"data: {json.dumps(item, ensure_ascii=False)}\n\n" for item in items]
    return Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=frames + ([] if named else ["data: [DONE]\n\n"]))


def ndjson(items: list[dict[str, Any]]) -> Reply:
    return Reply(200, headers={"Content-Type": "application/x-ndjson"},
                 chunks=[json.dumps(item, ensure_ascii=False) + "\n" for item in items])


async def time_end_to_end(name: str, provider_class: type, reply: Reply, count: int, repeat: int = 5) -> None:
    server = LoopbackServer(lambda request: reply).start()
    try:
        provider = provider_class("m", ProviderConfig(server.url + "/v1", "sk-bench"), HttpxTransport(max_retries=0))
        request = ModelRequest("m", None, [Message("user", [TextPart("北京?")])], [TOOL])
        await provider.complete(request, stream=True)  # warm the connection
        started = time.perf_counter()
        for _ in range(repeat):
            await provider.complete(request, stream=True)
        elapsed = time.perf_counter() - started
        await provider.aclose()
    finally:
        server.stop()
    print(f"  {name:<18} {count:>6} chunks x{repeat}: {elapsed * 1000 / repeat:8.2f} ms/request  "
          f"{per_second(count * repeat, elapsed)}")


def long_history(rounds: int) -> ModelRequest:
    messages: list[Message] = [Message("user", [TextPart("北京、上海和深圳的鲜花库存是多少?")])]
    for n in range(rounds):
        calls = [ToolCall(f"call_{n}_{i}", TOOL.name, {"city": "北京"}, '{"city": "北京"}', f"call_{n}_{i}") for i in range(3)]
        messages.append(Message("assistant", list(calls)))
        messages.append(Message("tool", [ToolResult(call.id, call.name, "玫瑰: 100, 郁金香: 150") for call in calls]))
    return ModelRequest("m", "You answer questions about our flower shops.", messages, [TOOL] * 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--pieces", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    options = parser.parse_args()

    chat, events, lines = (chat_chunks(options.calls, options.pieces), responses_events(options.calls, options.pieces),
                           ollama_lines(options.calls, options.pieces))
    print(f"mapping only ({options.calls} parallel calls, {options.pieces} argument fragments each):")
    time_mapping("openai chat", chat, chat_feed)
    time_mapping("openai responses", events, responses_feed)
    time_mapping("ollama", lines, ollama_feed)

    print("end to end over loopback (HttpxTransport, one streamed answer per request):")
    asyncio.run(time_end_to_end("openai chat", openai_chat.OpenAIChatProvider, sse(chat, named=False), len(chat)))
    asyncio.run(time_end_to_end("openai responses", openai_responses.OpenAIResponsesProvider, sse(events, named=True), len(events)))
    asyncio.run(time_end_to_end("ollama", ollama.OllamaProvider, ndjson(lines), len(lines)))

    request = long_history(options.rounds)
    print(f"request building ({options.rounds} tool rounds of 3 calls, 20 tools):")
    for name, build in (("openai chat", openai_chat.build_request_body), ("openai responses", openai_responses.build_request_body),
                        ("ollama", ollama.build_request_body)):
        started = time.perf_counter()
        for _ in range(20):
            body = build(request, stream=True)
        elapsed = (time.perf_counter() - started) / 20
        size = len(json.dumps(body, ensure_ascii=False).encode("utf-8"))
        print(f"  {name:<18} {elapsed * 1000:8.2f} ms/body  {size / 1024:8.1f} KiB")


if __name__ == "__main__":
    main()
