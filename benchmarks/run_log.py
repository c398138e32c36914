"""What the run log costs: writing a run event by event, searching many runs, drawing a page.

1. A run of T turns with C calls each written through ``RunLogWriter`` (one transaction per
   event, WAL): time per event and per run.
2. ``logs search`` over R runs (FTS5, CJK a character a token) and ``list_runs``.
3. ``render_page`` of a run with many calls.
4. ``toolrun recipe recipes/inventory.yaml`` offline with the log and with ``--no-log``.

    python benchmarks/run_log.py [--runs 1000] [--calls 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolrun.core.messages import Message, ModelResponse, TextPart, ToolCall, Usage
from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
from toolrun.runlog import RunLog, RunLogWriter
from toolrun.view import render_page, timeline_from_log

ROOT = Path(__file__).resolve().parent.parent
CITIES = ["北京", "上海", "深圳", "广州", "杭州"]


def write_run(log: RunLog, number: int, turns: int, calls: int) -> int:
    """One run as the loop reports it; returns the number of events written."""
    writer = RunLogWriter(log, command="recipe", prompt=f"第 {number} 次: 北京、上海和深圳的鲜花库存是多少?")
    writer.on_run_start(recipe="inventory", model="openai:gpt-4o-mini", mode="replay")
    events, records = 1, []
    for turn in range(turns):
        tool_calls = [ToolCall(f"call_{number}_{turn}_{i}", "get_flower_inventory", {"city": CITIES[i % 5]}, "{}")
                      for i in range(calls)]
        writer.on_model_response(turn, ModelResponse(Message("assistant", list(tool_calls)), "tool_calls", Usage(95, 67, 1)))
        for call in tool_calls:
            writer.on_tool_call_start(call)
        turn_records = [ToolCallRecord(call.id, call.name, call.arguments, f"玫瑰: {number}, 郁金香: 150", False, 3)
                        for call in tool_calls]
        for record in turn_records:
            writer.on_tool_call_end(record)
        writer.on_turn_end(TurnRecord("tool_calls", None, Usage(95, 67, 1), turn_records))
        records.append(TurnRecord("tool_calls", None, Usage(95, 67, 1), turn_records))
        events += 2 + 2 * calls
    answer = Message("assistant", [TextPart(f"北京的鲜花库存为：玫瑰: {number}")])
    writer.on_run_end(RunResult(answer.text, "stop", Usage(330, 157, 2), records, [answer], recipe="inventory",
                                model="openai:gpt-4o-mini", mode="replay"))
    return events + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=40)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log = RunLog.open(Path(folder) / "logs.db")
        started = time.perf_counter()
        events = write_run(log, 0, 3, options.calls)
        seconds = time.perf_counter() - started
        print(f"write  one run, 3 turns x {options.calls} calls: {events} events in {seconds * 1000:.0f} ms "
              f"({seconds / events * 1e6:.0f} µs per event, one transaction each)")
        started = time.perf_counter()
        for number in range(1, options.runs):
            write_run(log, number, 2, 3)
        seconds = time.perf_counter() - started
        print(f"write  {options.runs - 1} inventory-sized runs: {seconds:.2f} s ({seconds / (options.runs - 1) * 1000:.1f} ms per run)")
        for query in ("玫瑰", "玫瑰 北京", "nothing-here"):
            times = []
            for _ in range(5):
                started = time.perf_counter()
                hits = log.search(query)
                times.append(time.perf_counter() - started)
            print(f"search {query!r} over {options.runs} runs: {len(hits)} hits (of 20 at most), "
                  f"median {statistics.median(times) * 1000:.1f} ms")
        started = time.perf_counter()
        log.list_runs(limit=20, errors=True)
        print(f"list   --errors over {options.runs} runs: {(time.perf_counter() - started) * 1000:.1f} ms")
        started = time.perf_counter()
        page = render_page(timeline_from_log(log, 1))
        print(f"view   run with {3 * options.calls} calls: {len(page) // 1024} KiB in "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")
        print(f"size   {sum(p.stat().st_size for p in Path(folder).glob('logs.db*')) // 1024} KiB for {options.runs} runs")
        log.close()
        env = {**os.environ, "TOOLRUN_LOGS": str(Path(folder) / "cli.db")}
        env.pop("OPENAI_API_KEY", None)
        for flags in ([], ["--no-log"]):
            times = []
            for _ in range(5):
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "toolrun", "recipe", "recipes/inventory.yaml", *flags], cwd=ROOT,
                               env=env, capture_output=True, check=True)
                times.append(time.perf_counter() - started)
            print(f"recipe inventory offline {' '.join(flags) or '(logged)'}: median {statistics.median(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
