"""One process of the many-writers check: opens the run log named in argv and writes whole runs to it.

    python -m tests.run_log_writer_process LOG RUNS CALLS

Each run is written through ``RunLogWriter`` as the loop reports one (a turn of CALLS calls
and an answer), so every row it leaves can be checked for wholeness afterwards.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from toolrun.core.messages import Message, ModelResponse, TextPart, ToolCall, Usage
from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
from toolrun.runlog import RunLog, RunLogWriter


def write_run(log: RunLog, number: int, calls: int) -> str | None:
    """One run of one turn of ``calls`` calls; returns the writer's problem, if any."""
    tag = f"{os.getpid()}-{number}"
    writer = RunLogWriter(log, command="recipe", prompt=f"run {tag}: 北京有什么花?")
    writer.on_run_start(recipe=f"writer-{tag}", model="scripted:x", mode="live")
    tool_calls = [ToolCall(f"call_{i}", "get_stock", {"city": f"城{i}"}, "{}") for i in range(calls)]
    writer.on_model_response(0, ModelResponse(Message("assistant", list(tool_calls)), "tool_calls", Usage(10, 5, 1)))
    records = []
    for call in tool_calls:
        writer.on_tool_call_start(call)
        records.append(ToolCallRecord(call.id, call.name, call.arguments, f"玫瑰: {tag}", False, 1))
        writer.on_tool_call_end(records[-1])
    turn = TurnRecord("tool_calls", None, Usage(10, 5, 1), records)
    writer.on_turn_end(turn)
    answer = Message("assistant", [TextPart(f"done {tag}")])
    writer.on_run_end(RunResult(answer.text, "stop", Usage(10, 5, 1), [turn], [answer], recipe=f"writer-{tag}",
                                model="scripted:x", mode="live"))
    return writer.problem


async def main(path: Path, runs: int, calls: int) -> int:
    log = RunLog.open(path)  # the race under test: many processes create and migrate one file at once
    try:
        for number in range(runs):
            problem = write_run(log, number, calls)
            if problem:
                print(problem, file=sys.stderr)
                return 1
    finally:
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
