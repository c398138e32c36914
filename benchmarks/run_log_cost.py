"""What the run log adds to a run: a turn of 1,000 fast tool calls from the command line,
with the log and with ``--no-log``, and the writer's own cost per event in process.

``benchmarks/run.py`` shows these as rows (``--only runlog``); alone:

    python benchmarks/run_log_cost.py [--repeat 7]

The two commands run interleaved, round by round, and the cost per call is the median of
each round's difference divided by 1,000, so a busy machine slows both sides alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CALLS = 1000

TOOLS_YAML = """\
tools:
  - name: get_stock
    description: >-
      Returns the flower stock of one city's shop as "flower: count" pairs. Use it when asked
      what a shop has; call it once per city. Do not use it for prices.
    parameters:
      type: object
      properties:
        city: {type: string, description: City of the shop}
      required: [city]
    annotations: {read_only: true}
    backend: {python: "fast.py:get_stock"}
"""


def write_recipe(folder: Path, calls: int = CALLS, name: str = "many") -> Path:
    """A recipe whose scripted model asks for ``calls`` calls of a python tool in one turn."""
    (folder / "tools.d").mkdir(parents=True, exist_ok=True)
    (folder / "tools.d" / "fast.yaml").write_text(TOOLS_YAML, encoding="utf-8")
    (folder / "tools.d" / "fast.py").write_text('def get_stock(city):\n    return "玫瑰: 100, 郁金香: 150"\n',
                                                encoding="utf-8")
    lines = "".join(f"    - {{name: get_stock, arguments: {{city: 城{i}}}}}\n" for i in range(calls))
    (folder / f"{name}.script.yaml").write_text(f"- tool_calls:\n{lines}- text: 都查完了。\n", encoding="utf-8")
    recipe = folder / f"{name}.yaml"
    recipe.write_text(f"name: {name}\nmodel: scripted:{name}.script.yaml\nmessages: [{{user: 北京和上海有什么花?}}]\n",
                      encoding="utf-8")
    return recipe


def command_samples(repeat: int, toolrun: list[str], env: dict[str, str], cwd: Path, folder: Path) -> dict[str, list[float]]:
    """Seconds of ``toolrun recipe`` over the 1,000-call recipe, logged and with ``--no-log``, interleaved."""
    recipe, one_call = write_recipe(folder), write_recipe(folder, 1, "one")
    logged = [*toolrun, "recipe", str(recipe), "--logs", str(folder / "cost.db")]
    commands = {"logged": logged, "no-log": [*toolrun, "recipe", str(recipe), "--no-log"],
                "no-log, one call": [*toolrun, "recipe", str(one_call), "--no-log"]}
    samples: dict[str, list[float]] = {f"{name}{kind}": [] for name in commands for kind in ("", " cpu")}
    for argv in commands.values():  # warm-up: the tool module compiled, the catalog cached
        subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=True)
    for _ in range(repeat):
        for name, argv in commands.items():
            wall, cpu = _run(argv, env, cwd)
            samples[name].append(wall)
            samples[f"{name} cpu"].append(cpu)
    for kind in ("", " cpu"):
        samples[f"per call{kind}"] = [(a - b) / CALLS for a, b in
                                      zip(samples[f"logged{kind}"], samples[f"no-log{kind}"], strict=True)]
        # the command's own cost per call: the 1,000-call run less the same run with one call (start-up,
        # catalog and recipe loading, the final answer), per round, over the 999 calls between them
        samples[f"no-log per call{kind}"] = [(a - b) / (CALLS - 1) for a, b in
                                             zip(samples[f"no-log{kind}"], samples[f"no-log, one call{kind}"], strict=True)]
    return samples


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one command."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def writer_samples(repeat: int, folder: Path) -> list[float]:
    """CPU seconds per event of ``RunLogWriter`` writing a run of one 1,000-call turn, on an event loop
    (CPU time, not wall time: on a shared machine the wall clock measures the neighbours)."""
    from toolrun.core.messages import Message, ModelResponse, TextPart, ToolCall, Usage
    from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
    from toolrun.runlog import RunLog, RunLogWriter

    log = RunLog.open(folder / "writer.db")

    async def one_run(number: int) -> tuple[float, int]:
        question = Message("user", [TextPart("北京和上海有什么花?")])
        calls = [ToolCall(f"call_{i}", "get_stock", {"city": f"城{i}"}, "{}") for i in range(CALLS)]
        answer = Message("assistant", list(calls))
        records = [ToolCallRecord(c.id, c.name, c.arguments, "玫瑰: 100, 郁金香: 150", False, 1) for c in calls]
        turn = TurnRecord("tool_calls", None, Usage(95, 67, 1), records)
        final = Message("assistant", [TextPart("都查完了。")])
        started = time.process_time()
        writer = RunLogWriter(log, command="recipe", prompt=f"run {number}")
        writer.on_run_start(recipe="many", model="scripted:many", mode="live")
        writer.on_message(question)
        writer.on_message(answer)
        writer.on_model_response(0, ModelResponse(answer, "tool_calls", Usage(95, 67, 1)))
        for call, record in zip(calls, records, strict=True):
            writer.on_tool_call_start(call)
            writer.on_tool_call_end(record)
        writer.on_turn_end(turn)
        writer.on_message(final)
        writer.on_run_end(RunResult(final.text, "stop", Usage(95, 67, 1), [turn], [question, answer, final],
                                    recipe="many", model="scripted:many", mode="live"))
        events = 6 + 2 * CALLS + 1  # start, 3 messages, answer, the calls' starts and ends, turn end, run end
        return time.process_time() - started, events

    samples = []
    asyncio.run(one_run(0))  # warm-up
    for number in range(1, repeat + 1):
        seconds, events = asyncio.run(one_run(number))
        samples.append(seconds / events)
    log.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    root = HERE.parent
    sys.path.insert(0, str(root))
    toolrun = [sys.executable, "-m", "toolrun"]
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-") as temporary:
        folder = Path(temporary)
        commands = command_samples(options.repeat, toolrun, env, root, folder)
        per_event = writer_samples(options.repeat, folder)
    for name in ("no-log, one call", "no-log", "logged"):
        print(f"toolrun recipe, {CALLS:,} calls in a turn, {name}: median {statistics.median(commands[name]) * 1e3:.0f} ms")
    for kind in ("", " cpu"):
        print(f"the command's cost per call{kind}, --no-log (1,000 calls - one call, per round, / 999): "
              f"median {statistics.median(commands['no-log per call' + kind]) * 1e6:.1f} µs")
    for kind in ("", " cpu"):
        print(f"the log's cost per call{kind} (logged - no-log, per round): "
              f"median {statistics.median(commands['per call' + kind]) * 1e6:.1f} µs")
    print(f"RunLogWriter per written event: median {statistics.median(per_event) * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
