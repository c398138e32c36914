"""What record/replay costs: divergence checks on long histories, recording, and a whole replay.

1. ``compare_requests`` on an OpenAI Chat body with N messages (each tool result ~2 KB),
   identical and with one changed result (the replay's per-request check).
2. ``RecordingTransport`` + ``save_cassette`` per exchange (the cassette is rewritten after
   every exchange so a crash keeps it) for cassettes of growing size.
3. ``toolrun recipe recipes/inventory.yaml`` replayed offline through the console script:
   wall time of the whole command (start-up included), and in-process ``play_recipe``.

    .venv/bin/python benchmarks/replay.py [--messages 50,200,800] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

from toolrun.providers.transport import Transport, WireRequest, WireResponse
from toolrun.replay.divergence import compare_requests
from toolrun.replay.recording import RecordingTransport, save_cassette

ROOT = Path(__file__).resolve().parent.parent


def conversation(messages: int, changed: int | None = None) -> dict[str, Any]:
    """A chat body: a user question, then assistant calls and ~2 KB tool results."""
    body: list[dict[str, Any]] = [{"role": "user", "content": "北京、上海和深圳的鲜花库存是多少?"}]
    for index in range(messages):
        call_id = f"call_{index}"
        body.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "get_flower_inventory", "arguments": '{"city": "北京"}'}}]})
        result = ("玫瑰: 100, 郁金香: 150; " * 100) + ("changed" if index == changed else "")
        body.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return {"model": "gpt-4o-mini", "messages": body,
            "tools": [{"type": "function", "function": {"name": "get_flower_inventory", "parameters": {"type": "object"}}}]}


def best_of(repeat: int, action: Callable[[], Any]) -> float:
    """Median seconds of ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def bench_compare(sizes: list[int], repeat: int) -> None:
    print("compare_requests (per model request of a replay)")
    for size in sizes:
        recorded, same, changed = conversation(size), conversation(size), conversation(size, changed=size // 2)
        identical = best_of(repeat, partial(compare_requests, 1, recorded, same))
        one_change = best_of(repeat, partial(compare_requests, 1, recorded, changed))
        kib = len(str(recorded)) // 1024
        print(f"  {2 * size + 1:5d} messages (~{kib} KiB): identical {identical * 1000:7.2f} ms, "
              f"one changed result {one_change * 1000:7.2f} ms")


class Echo(Transport):
    async def send(self, request: WireRequest) -> WireResponse:
        return WireResponse(200, {}, body={"choices": [{"message": {"content": "好"}}]})

    async def stream(self, request: WireRequest) -> AsyncIterator[str]:
        yield 'data: {"choices": [{"delta": {"content": "好"}, "finish_reason": "stop"}]}'


def bench_recording(sizes: list[int], repeat: int) -> None:
    print("recording (save after every exchange)")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.cassette.json"
        for size in sizes:
            def record_run(size: int = size) -> None:  # bound now: run within this iteration only
                recorder = RecordingTransport(Echo(), on_exchange=lambda cassette: save_cassette(cassette, path))
                body = conversation(size)

                async def go() -> None:
                    for _ in range(4):  # a four-request run over the same long history
                        await recorder.send(WireRequest("POST", "http://x/v1/chat/completions", {}, body))

                asyncio.run(go())

            seconds = best_of(repeat, record_run)
            print(f"  4 exchanges of {2 * size + 1:5d} messages: {seconds * 1000:8.1f} ms total, "
                  f"{seconds * 250:7.1f} ms per exchange, cassette {path.stat().st_size // 1024} KiB")


def bench_replay_command(repeat: int) -> None:
    print("replaying recipes/inventory.yaml offline")
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    toolrun = Path(sys.executable).parent / "toolrun"

    def command() -> None:
        subprocess.run([str(toolrun), "recipe", "recipes/inventory.yaml", "--json"], cwd=ROOT, env=env,
                       capture_output=True, check=True)

    print(f"  console script, whole command: {best_of(repeat, command) * 1000:7.1f} ms (median of {repeat})")

    from toolrun.cli.recipe_play import play_recipe

    def in_process() -> None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            previous = os.getcwd()
            os.chdir(ROOT)
            try:
                for name in [k for k in os.environ if k.endswith(("_API_KEY", "_BASE_URL"))]:
                    os.environ.pop(name)
                assert play_recipe(Path("recipes/inventory.yaml"), as_json=True) == 0
            finally:
                os.chdir(previous)

    in_process()  # warm imports
    print(f"  in process (play_recipe):      {best_of(repeat, in_process) * 1000:7.1f} ms (median of {repeat})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", default="50,200,800", help="tool rounds in the history (comma-separated)")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    sizes = [int(n) for n in options.messages.split(",")]
    bench_compare(sizes, options.repeat)
    bench_recording(sizes, options.repeat)
    bench_replay_command(options.repeat)


if __name__ == "__main__":
    main()
