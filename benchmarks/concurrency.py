"""How much one turn's concurrent tool calls save: N calls of a 0.2 s tool, parallel vs serial.

Runs the real loop (ScriptedModel, real YAML tools loaded from a temp dir, the python
backend) and prints wall times and the speed-up for sync tools (run in worker threads)
and async tools (awaited on the loop).

    .venv/bin/python benchmarks/concurrency.py [--calls 4,8,16] [--seconds 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from toolrun.backends.base import CallContext
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.core.messages import Message, TextPart
from toolrun.loop.runner import RunSettings, run_conversation
from toolrun.providers.scripted import ScriptedModel

TOOLS_PY = """
import asyncio, time

def nap(seconds):
    time.sleep(seconds)
    return "ok"

async def async_nap(seconds):
    await asyncio.sleep(seconds)
    return "ok"
"""

TOOLS_YAML = """
tools:
  - name: nap
    description: Sleeps in a worker thread. Use it to measure concurrency; never in production.
    parameters: {type: object, properties: {seconds: {type: number, description: Seconds}}, required: [seconds]}
    backend: {python: "naps.py:nap"}
  - name: async_nap
    description: Sleeps on the event loop. Use it to measure concurrency; never in production.
    parameters: {type: object, properties: {seconds: {type: number, description: Seconds}}, required: [seconds]}
    backend: {python: "naps.py:async_nap"}
"""


async def one_turn(tool, calls: int, seconds: float, parallel: bool) -> float:
    """Wall time of a run whose single turn makes ``calls`` calls of ``tool``."""
    model = ScriptedModel([ScriptedModel.calls([(tool.name, {"seconds": seconds})] * calls), "done"])
    started = time.perf_counter()
    result = await run_conversation(
        model, [tool], system=None, messages=[Message("user", [TextPart("go")])],
        settings=RunSettings(parallel=parallel, stream=False), context=CallContext(environ={}),
    )
    elapsed = time.perf_counter() - started
    assert not any(call.is_error for call in result.tool_calls), result.tool_calls
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="4,8,16", help="comma-separated numbers of calls per turn")
    parser.add_argument("--seconds", type=float, default=0.2, help="how long each call takes")
    options = parser.parse_args()
    counts = [int(n) for n in options.calls.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        (directory / "naps.py").write_text(TOOLS_PY, encoding="utf-8")
        (directory / "naps.yaml").write_text(TOOLS_YAML, encoding="utf-8")
        catalog = load_catalog_or_raise(directory)
        print(f"{'tool':<10} {'calls':>5} {'parallel s':>11} {'serial s':>9} {'speed-up':>9} {'ideal':>6}")
        for name in ("nap", "async_nap"):
            tool = catalog.tools[name]
            asyncio.run(one_turn(tool, 1, 0.01, True))  # warm-up: import the tool module once
            for calls in counts:
                parallel = asyncio.run(one_turn(tool, calls, options.seconds, True))
                serial = asyncio.run(one_turn(tool, calls, options.seconds, False))
                print(f"{name:<10} {calls:>5} {parallel:>11.3f} {serial:>9.3f} {serial / parallel:>8.1f}x {calls:>5}x")


if __name__ == "__main__":
    main()
