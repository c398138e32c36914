"""What the provider benchmarks share: the tool, wire framing, timing and printing.

Used by benchmarks/provider_streams.py (OpenAI Chat, Responses, Ollama) and
benchmarks/anthropic_gemini_streams.py; each script puts the repository root on sys.path first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.loopback import LoopbackServer, Reply
from toolrun.core.messages import Message, ModelRequest, OpaquePart, TextPart, ToolCall, ToolDefinition, ToolResult
from toolrun.providers.base import ProviderConfig
from toolrun.providers.transport import HttpxTransport

TOOL = ToolDefinition("get_flower_inventory", "Returns the flower stock of one city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

Feed = Callable[[], tuple[Callable[[dict[str, Any]], Any], Callable[[], Any]]]  # a fresh assembler's (add, finish)


def per_second(count: int, seconds: float) -> str:
    """``count`` over ``seconds`` as a rate, ``inf`` when too fast to measure."""
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "inf"


def time_mapping(name: str, items: list[dict[str, Any]], feed: Feed, *, width: int, unit: str,
                 repeat: int = 20) -> None:
    """Print the time one stream assembler takes to map ``items`` (parsed JSON in)."""
    started = time.perf_counter()
    for _ in range(repeat):
        add, finish = feed()
        for item in items:
            add(item)
        finish()
    elapsed = time.perf_counter() - started
    print(f"  {name:<{width}} {len(items):>6} {unit} x{repeat}: {elapsed * 1000 / repeat:8.2f} ms/stream  "
          f"{per_second(len(items) * repeat, elapsed)}")


def sse(items: list[dict[str, Any]], *, named: bool, done_marker: bool = False) -> Reply:
    """An event stream of ``items``: ``event:`` lines when ``named``, a final ``[DONE]`` when ``done_marker``."""
    frames = [(f"event: {item['type']}\n" if named else "") + f"data: {json.dumps(item, ensure_ascii=False)}\n\n" for item in items]
    return Reply(200, headers={"Content-Type": "text/event-stream"}, chunks=frames + (["data: [DONE]\n\n"] if done_marker else []))


def ndjson(items: list[dict[str, Any]]) -> Reply:
    """One JSON object a line, as Ollama streams."""
    return Reply(200, headers={"Content-Type": "application/x-ndjson"},
                 chunks=[json.dumps(item, ensure_ascii=False) + "\n" for item in items])


async def time_end_to_end(name: str, provider_class: type, reply: Reply, count: int, *, width: int, unit: str,
                          base_path: str = "", api_key: str = "bench-key", repeat: int = 5) -> None:
    """Print the wall time of one streamed request answered by ``reply`` from a loopback server."""
    server = LoopbackServer(lambda request: reply).start()
    try:
        provider = provider_class("m", ProviderConfig(server.url + base_path, api_key), HttpxTransport(max_retries=0))
        request = ModelRequest("m", None, [Message("user", [TextPart("北京?")])], [TOOL])
        await provider.complete(request, stream=True)  # warm the connection
        started = time.perf_counter()
        for _ in range(repeat):
            await provider.complete(request, stream=True)
        elapsed = time.perf_counter() - started
        await provider.aclose()
    finally:
        server.stop()
    print(f"  {name:<{width}} {count:>6} {unit} x{repeat}: {elapsed * 1000 / repeat:8.2f} ms/request  "
          f"{per_second(count * repeat, elapsed)}")


def long_history(rounds: int, *, with_thinking: bool = False) -> ModelRequest:
    """``rounds`` tool rounds of three calls over 20 tools; ``with_thinking`` adds a thinking block
    and a Gemini signature to each round (what the Anthropic and Gemini adapters echo)."""
    messages: list[Message] = [Message("user", [TextPart("北京、上海和深圳的鲜花库存是多少?")])]
    for n in range(rounds):
        calls = [ToolCall(f"call_{n}_{i}", TOOL.name, {"city": "北京"}, '{"city": "北京"}', f"call_{n}_{i}",
                          {"gemini": {"thoughtSignature": "SIG"}} if with_thinking and i == 0 else {}) for i in range(3)]
        thinking = [OpaquePart("anthropic", {"type": "thinking", "thinking": "三个城市", "signature": "SIG"})] if with_thinking else []
        messages.append(Message("assistant", [*thinking, *calls]))
        messages.append(Message("tool", [ToolResult(call.id, call.name, "玫瑰: 100, 郁金香: 150") for call in calls]))
    return ModelRequest("m", "You answer questions about our flower shops.", messages, [TOOL] * 20)


def time_request_building(builders: list[tuple[str, Callable[..., dict[str, Any]]]], request: ModelRequest, *,
                          width: int, repeat: int = 20) -> None:
    """Print the time each ``build_request_body`` takes for ``request`` and the body's size."""
    for name, build in builders:
        started = time.perf_counter()
        for _ in range(repeat):
            body = build(request, stream=True)
        elapsed = (time.perf_counter() - started) / repeat
        size = len(json.dumps(body, ensure_ascii=False).encode("utf-8"))
        print(f"  {name:<{width}} {elapsed * 1000:8.2f} ms/body  {size / 1024:8.1f} KiB")
