"""Every row of benchmarks/README.md's table in one run: toolrun beside its floor and, when installed, its peers.

Whole-process rows run each command as a fresh ``python`` process (the console script's
own two lines, ``from toolrun.cli import main; main()``), interleaved round by round so a
busy machine slows every command alike. In-process rows time the library. Each figure is
the median over ``--repeat`` rounds, with min-max; "ratio" is to the row's floor or peer.

Catalogs are generated (benchmarks/load_large_catalog.py: http, shell and 5-tool toolset
files, made from templates, so their tools are near-identical) and dated an hour back, as
a catalog is in use (a file changed within the last 2 s is never cached). The catalog
cache lives in a temporary folder: the first command fills it (shown as "cold"); the
others find it warm.

Peers (the optional ``bench`` extra): pydantic-ai (``FunctionModel``) and ``llm``. A peer
that is not installed is shown as such.

BFCL rows (benchmarks/bfcl_catalog.py): one tool file per tool from the Berkeley Function
Calling Leaderboard's real definitions. MCP row (benchmarks/mcp_peer.py): FastMCP, in its
own virtual environment, serving the same tool.

    python benchmarks/run.py [--repeat 7] [--quick] [--json FILE] [--toolrun-root DIR]

``--toolrun-root`` measures another checkout (e.g. an older commit exported with
``git archive``) with the same script, for a before/after table.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import gc
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass
class Row:
    """One line of the table: a figure's samples (seconds), and what it is compared with."""

    name: str
    unit: str  # "ms", "s" or "us" (per call)
    samples: list[float] = field(default_factory=list)
    compare: str | None = None  # the name of the floor or peer row
    goal: str = ""
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples) if self.samples else float("nan")

    def shown(self, value: float) -> str:
        scale = {"s": 1, "ms": 1e3, "us": 1e6}[self.unit]
        digits = 0 if self.unit == "ms" and value * scale >= 10 else (2 if self.unit == "s" else 1)
        return f"{value * scale:.{digits}f}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "median_s": self.median,
                "min_s": min(self.samples, default=None), "max_s": max(self.samples, default=None),
                "samples_s": self.samples, "compare": self.compare, "goal": self.goal, "note": self.note}


# --------------------------------------------------------------------------- whole processes


def command_env(toolrun_root: Path, cache: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
    env.update(PYTHONPATH=str(toolrun_root), TOOLRUN_CACHE_DIR=str(cache), TOOLRUN_LOGS=str(cache / "logs.db"),
               PYTHONDONTWRITEBYTECODE="")
    return env


TOOLRUN = [sys.executable, "-c", "import sys; sys.argv[0] = 'toolrun'; from toolrun.cli import main; main()"]


def wall(argv: list[str], env: dict[str, str], cwd: Path, *, ok: tuple[int, ...] = (0,)) -> float:
    """Seconds ``argv`` takes; run in the measured checkout (``python -c`` puts the current folder first on sys.path)."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv[-6:])} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return elapsed


def write_catalog(directory: Path, tools: int) -> None:
    sys.path.insert(0, str(HERE))
    from load_large_catalog import write_catalog as generate

    directory.mkdir(parents=True)
    generate(directory, tools)
    settled = time.time() - 3600
    for file in directory.iterdir():
        os.utime(file, (settled, settled))


def first_tool_name(directory: Path, prefix: str) -> str:
    for file in sorted(directory.iterdir()):
        line = file.read_text(encoding="utf-8").splitlines()[0]
        if line.startswith(f"name: {prefix}"):
            return line.removeprefix("name: ").strip()
    raise SystemExit(f"no {prefix} tool in {directory}")


def process_rows(repeat: int, toolrun_root: Path, work: Path, quick: bool) -> list[Row]:
    cache = work / "cache"
    cache.mkdir()
    env = command_env(toolrun_root, cache)
    big_count, small_count = (1000, 200) if quick else (4850, 1000)
    big, small = work / "catalog-big", work / "catalog-small"
    write_catalog(big, big_count)
    write_catalog(small, small_count)
    big_n, small_n = f"{big_count:,}", f"{small_count:,}"
    call_big = [*TOOLRUN, "call", first_tool_name(big, "grep_"), "--arg", "city=北京", "--tools-dir", str(big)]
    call_small = [*TOOLRUN, "call", first_tool_name(small, "grep_"), "--arg", "city=北京", "--tools-dir", str(small)]
    recipe = [*TOOLRUN, "recipe", str(toolrun_root / "recipes" / "inventory.yaml")]
    list_big, list_small = f"toolrun tools list, {big_n} tools", f"toolrun tools list, {small_n} tools"
    call_big_name, call_small_name = f"toolrun call, one tool of {big_n}", f"toolrun call, one tool of {small_n}"
    lint_big, lint_small = f"toolrun tools lint, {big_n} tools", f"toolrun tools lint, {small_n} tools"
    commands: list[tuple[Row, list[str], tuple[int, ...]]] = [
        (Row("python -c pass", "ms", note="floor"), [sys.executable, "-c", "pass"], (0,)),
        (Row("toolrun --version", "ms", compare="python -c pass", goal="<= 2x python -c pass"),
         [*TOOLRUN, "--version"], (0,)),
        (recipe_row := Row("toolrun recipe recipes/inventory.yaml (offline replay)", "ms", goal="<= 100 ms"), recipe, (0,)),
        (Row(call_big_name, "s", goal="<= 0.3 s"), call_big, (0, 1)),
        (Row(list_big, "s", goal="<= 1.5 s"), [*TOOLRUN, "tools", "list", "--tools-dir", str(big)], (0,)),
        (Row(lint_big, "s", goal="<= 4 s, linear"),
         [*TOOLRUN, "tools", "lint", "--tools-dir", str(big)], (0, 1)),
        (Row(list_small, "s"), [*TOOLRUN, "tools", "list", "--tools-dir", str(small)], (0,)),
        (Row(call_small_name, "s"), call_small, (0, 1)),
        (Row(lint_small, "s"), [*TOOLRUN, "tools", "lint", "--tools-dir", str(small)], (0, 1)),
    ]
    if _accepts_no_log(toolrun_root):
        commands.insert(3, (Row("toolrun recipe recipes/inventory.yaml --no-log", "ms", goal="<= 120 ms"),
                            [*recipe, "--no-log"], (0,)))
    beside = Path(sys.executable).parent / "llm"  # installed with the bench extra, maybe not on PATH
    llm = str(beside) if beside.exists() else shutil.which("llm")
    if llm:
        commands.append((Row("llm --version (peer)", "ms", note="peer"), [llm, "--version"], (0,)))
    # The daily loop: a tool file edited, then the recipe again (the edited file is read and checked afresh).
    edited_tools = work / "tools.d-edited"
    shutil.copytree(toolrun_root / "tools.d", edited_tools)
    edited_row = Row("toolrun recipe recipes/inventory.yaml, after an edit of tools.d/ops_api.yaml", "ms")
    commands.insert(3, (edited_row, [*recipe, "--tools-dir", str(edited_tools)], (0,)))
    edits = iter(range(1, 1_000_000))

    def edit_the_http_tools() -> None:
        with (edited_tools / "ops_api.yaml").open("a", encoding="utf-8") as tools_file:
            tools_file.write(f"# edit {next(edits)}\n")

    before = {edited_row.name: edit_the_http_tools}
    argv_of = {row.name: argv for row, argv, _ in commands}
    # Cold: the first list of each catalog fills the cache.
    cold_big = Row(f"{list_big}, cold cache (first run)", "s", samples=[wall(argv_of[list_big], env, toolrun_root)])
    cold_small = Row(f"{list_small}, cold cache (first run)", "s", samples=[wall(argv_of[list_small], env, toolrun_root)])
    for row, argv, ok in commands:  # warm-up: files in the OS cache, the recipe's tool module compiled
        before.get(row.name, _nothing)()
        wall(argv, env, toolrun_root, ok=ok)
    for _ in range(repeat):
        for row, argv, ok in commands:
            before.get(row.name, _nothing)()
            row.samples.append(wall(argv, env, toolrun_root, ok=ok))
    rows = [row for row, _, _ in commands]
    by_name = {row.name: row for row in rows}
    growth = big_count / small_count
    edited_row.note = f"x{_ratio(edited_row, recipe_row):.2f} the recipe's warm run"
    by_name[list_small].note = f"x{_ratio(by_name[list_big], by_name[list_small]):.1f} to {big_n} (x{growth:.1f} tools)"
    by_name[call_small_name].note = f"x{_ratio(by_name[call_big_name], by_name[call_small_name]):.1f} to {big_n}"
    by_name[lint_small].note = f"x{_ratio(by_name[lint_big], by_name[lint_small]):.1f} to {big_n} (x{growth:.1f} tools)"
    if llm:
        by_name["toolrun --version"].note = (
            f"llm --version takes x{_ratio(by_name['llm --version (peer)'], by_name['toolrun --version']):.1f} as long")
    return rows + [cold_big, cold_small]


def _nothing() -> None:
    return None


def _accepts_no_log(toolrun_root: Path) -> bool:
    """Whether the measured checkout's recipe command has --no-log (its options have moved between modules)."""
    return any("no_log" in path.read_text(encoding="utf-8") for path in (toolrun_root / "toolrun" / "cli").glob("*.py"))


def _ratio(numerator: Row, denominator: Row) -> float:
    return numerator.median / denominator.median


# --------------------------------------------------------------------------- in process

TOOLS_PY = """
async def async_stock(city):
    return "玫瑰: 100"

def sync_stock(city):
    return "玫瑰: 100"
"""

TOOLS_YAML = """
tools:
  - name: async_stock
    description: Returns the rose stock of one city. Use it in benchmarks only; never for real stock.
    parameters: {type: object, properties: {city: {type: string, description: City}}, required: [city]}
    backend: {python: "stock.py:async_stock"}
  - name: sync_stock
    description: Returns the rose stock of one city. Use it in benchmarks only; never for real stock.
    parameters: {type: object, properties: {city: {type: string, description: City}}, required: [city]}
    backend: {python: "stock.py:sync_stock"}
"""

CALLS = 1000


def timed(function: Callable[[], Any]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def call_rows(repeat: int, folder: Path) -> list[Row]:
    from toolrun.backends.base import CallContext
    from toolrun.catalog.loader import load_catalog_or_raise
    from toolrun.core.messages import Message, TextPart
    from toolrun.loop.runner import RunSettings, run_conversation
    from toolrun.providers.scripted import ScriptedModel

    (folder / "stock.py").write_text(TOOLS_PY, encoding="utf-8")
    (folder / "stock.yaml").write_text(TOOLS_YAML, encoding="utf-8")
    catalog = load_catalog_or_raise(folder)
    sys.path.insert(0, str(folder))
    import stock  # the tools' own functions, for the floors

    def one_turn(name: str) -> float:
        """Seconds of the turn's tool calls alone: the run minus the same run with no call."""
        calls = ScriptedModel.calls([(name, {"city": "北京"})] * CALLS)

        async def run(script: list[Any]) -> float:
            started = time.perf_counter()
            result = await run_conversation(ScriptedModel(script), [catalog.tools[name]], system=None,
                                            messages=[Message("user", [TextPart("go")])],
                                            settings=RunSettings(stream=False), context=CallContext(environ={}))
            assert not any(call.is_error for call in result.tool_calls)
            return time.perf_counter() - started

        return asyncio.run(run([calls, "done"]))

    def async_floor() -> float:
        async def run() -> float:
            started = time.perf_counter()
            await asyncio.gather(*(stock.async_stock(**json.loads('{"city": "北京"}')) for _ in range(CALLS)))
            return time.perf_counter() - started
        return asyncio.run(run())

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)

    def sync_floor() -> float:
        async def run() -> float:
            loop = asyncio.get_running_loop()
            started = time.perf_counter()
            await asyncio.gather(*(loop.run_in_executor(pool, lambda: stock.sync_stock(**json.loads('{"city": "北京"}')))
                                   for _ in range(CALLS)))
            return time.perf_counter() - started
        return asyncio.run(run())

    rows = [
        Row("per call, async tool: floor (asyncio.gather)", "us", note="floor"),
        Row("per call, async tool, 1,000 in one turn (whole run)", "us", compare="per call, async tool: floor (asyncio.gather)",
            goal="<= 30 us whole run"),
        Row("per call, sync tool: floor (thread pool)", "us", note="floor"),
        Row("per call, sync tool, 1,000 in one turn (whole run)", "us", compare="per call, sync tool: floor (thread pool)",
            goal="<= 80 us"),
    ]
    peer = pydantic_ai_turn()
    if peer is not None:
        rows += [Row("per call, async tool: pydantic-ai FunctionModel", "us", note="peer"),
                 Row("per call, sync tool: pydantic-ai FunctionModel", "us", note="peer")]
    measures: list[Callable[[], float]] = [async_floor, lambda: one_turn("async_stock"), sync_floor, lambda: one_turn("sync_stock")]
    if peer is not None:
        measures += [lambda: peer("async"), lambda: peer("sync")]
    for measure in measures:  # warm-up
        measure()
    for _ in range(repeat):
        for row, measure in zip(rows, measures, strict=True):
            settle_heap()
            row.samples.append(measure() / CALLS)
    pool.shutdown()
    return rows


def settle_heap() -> None:
    """Collect, then freeze what is left, before a timed run.

    This process has imported toolrun, the floors' modules and the peers (pydantic-ai brings
    a large heap): a full collection that happens to fall inside one run walks all of it and
    triples that run's time. The toolrun command freezes what its imports made in the same
    way; here every row, floors and peers included, gets the same treatment.
    """
    gc.collect()
    gc.freeze()


def pydantic_ai_turn() -> Callable[[str], float] | None:
    """Seconds of a pydantic-ai run whose FunctionModel makes 1,000 calls in one turn, then answers."""
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel
    except ImportError:
        return None

    def respond(messages: list[Any], info: Any) -> Any:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("stock", {"city": "北京"}, tool_call_id=f"c{i}") for i in range(CALLS)])
        return ModelResponse(parts=[TextPart("done")])

    agents = {}
    for kind in ("async", "sync"):
        agent = Agent(FunctionModel(respond))
        if kind == "async":
            async def stock(city: str) -> str:
                return "玫瑰: 100"
        else:
            def stock(city: str) -> str:  # type: ignore[misc]
                return "玫瑰: 100"
        agent.tool_plain(stock)
        agents[kind] = agent

    def run(kind: str) -> float:
        started = time.perf_counter()
        agents[kind].run_sync("go")
        return time.perf_counter() - started

    return run


class MinimalProvider:
    """The floor of a scripted model: hands out the next answer, keeps nothing."""


def scripted_rows(repeat: int, folder: Path, turns: int) -> list[Row]:
    from toolrun.backends.base import CallContext
    from toolrun.catalog.loader import load_catalog_or_raise
    from toolrun.core.messages import Message, ModelRequest, ModelResponse, TextPart
    from toolrun.loop.runner import RunSettings, run_conversation
    from toolrun.providers.scripted import ScriptedModel

    catalog = load_catalog_or_raise(folder)
    tool = catalog.tools["async_stock"]

    class Minimal(ScriptedModel):
        async def complete(self, request: ModelRequest, *, stream: bool, on_event: Any = None) -> ModelResponse:
            item = self.script.pop()
            return item if isinstance(item, ModelResponse) else ScriptedModel.text(str(item))

    def script() -> list[Any]:
        return [ScriptedModel.calls([("async_stock", {"city": "北京"})]) for _ in range(turns)] + ["done"]

    def request_times(model_class: type[ScriptedModel]) -> list[float]:
        """Seconds of each model request of a ``turns``-turn run."""
        model = model_class(list(reversed(script())) if model_class is Minimal else script())
        times: list[float] = []
        complete = model.complete

        async def timed_complete(request: ModelRequest, **options: Any) -> ModelResponse:
            started = time.perf_counter()
            response = await complete(request, **options)
            times.append(time.perf_counter() - started)
            return response

        model.complete = timed_complete  # type: ignore[method-assign]
        asyncio.run(run_conversation(model, [tool], system=None, messages=[Message("user", [TextPart("go")])],
                                     settings=RunSettings(stream=False, max_turns=turns + 1),
                                     context=CallContext(environ={})))
        return times

    tenth = max(1, turns // 10)
    rows = [Row("minimal provider, per request", "us", note="floor"),
            Row(f"ScriptedModel, per request over turns 1-{tenth}", "us"),
            Row(f"ScriptedModel, per request at turn {turns}", "us", compare="minimal provider, per request",
                goal="<= 500 us, flat")]
    for _ in range(max(1, repeat // 2)):
        rows[0].samples.append(statistics.mean(request_times(Minimal)[-tenth:]))
        scripted = request_times(ScriptedModel)
        rows[1].samples.append(statistics.mean(scripted[:tenth]))
        rows[2].samples.append(statistics.mean(scripted[-tenth:]))  # the mean over the last tenth of the run
    rows[2].note = f"x{_ratio(rows[2], rows[1]):.1f} to the first tenth (flat: about x1)"
    return rows


def record_rows(repeat: int, folder: Path, messages: int) -> list[Row]:
    from toolrun.providers.transport import Transport, WireRequest, WireResponse
    from toolrun.replay import recording

    class Echo(Transport):
        async def send(self, request: WireRequest) -> WireResponse:
            return WireResponse(200, {}, {"choices": [{"message": {"role": "assistant", "content": "ok"}}]})

        def stream(self, request: WireRequest) -> Any:
            raise NotImplementedError

    def save_for(path: Path) -> Callable[[Any], None]:
        if hasattr(recording, "CassetteFile"):
            return recording.CassetteFile(path).save
        return lambda cassette: recording.save_cassette(cassette, path)

    def per_exchange_at(size: int) -> float:
        """Seconds of the exchanges recorded once the conversation has ``size`` messages."""
        path = folder / "bench.cassette.json"
        path.unlink(missing_ok=True)
        recorder = recording.RecordingTransport(Echo(), on_exchange=save_for(path))
        body: list[dict[str, Any]] = [{"role": "user", "content": "北京、上海和深圳的鲜花库存是多少?"}]
        times = []

        async def go() -> None:
            while len(body) < size:
                body.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{len(body)}", "type": "function",
                             "function": {"name": "get_flower_inventory", "arguments": '{"city": "北京"}'}}]})
                body.append({"role": "tool", "tool_call_id": f"c{len(body)}", "content": "玫瑰: 100, 郁金香: 150"})
                request = WireRequest("POST", "https://api.example/v1/chat/completions", {}, {"messages": list(body)})
                started = time.perf_counter()
                await recorder.send(request)
                if len(body) >= size - 20:
                    times.append(time.perf_counter() - started)

        asyncio.run(go())
        return statistics.median(times)

    rows = [Row(f"--record, per exchange at {messages // 4} messages", "ms"),
            Row(f"--record, per exchange at {messages} messages", "ms", goal="<= 5 ms, flat")]
    sizes = [messages // 4, messages]
    for _ in range(max(1, repeat // 3)):
        for row, size in zip(rows, sizes, strict=True):
            row.samples.append(per_exchange_at(size))
    rows[1].note = f"x{_ratio(rows[1], rows[0]):.1f} for x4 messages (the request body itself grows x4)"
    return rows


def run_log_rows(repeat: int, toolrun_root: Path, work: Path) -> list[Row]:
    """The run log's cost: a 1,000-call turn from the command line with and without it, and per written event."""
    from run_log_cost import CALLS as LOGGED_CALLS
    from run_log_cost import command_samples, writer_samples

    env = command_env(toolrun_root, work / "cache-runlog")
    (work / "cache-runlog").mkdir()
    samples = command_samples(repeat, TOOLRUN, env, toolrun_root, work / "runlog")
    turn = f"toolrun recipe, {LOGGED_CALLS:,} calls in one turn"
    rows = [Row(f"{turn}, --no-log", "ms", samples["no-log"], note="floor"),
            Row(f"{turn}, --no-log, whole command / {LOGGED_CALLS:,}", "us",
                [seconds / LOGGED_CALLS for seconds in samples["no-log"]],
                note="start-up, catalog and recipe included: the per-call row below takes them out"),
            Row(f"{turn}, --no-log, per call (the same command with one call taken away, / {LOGGED_CALLS - 1:,})", "us",
                samples["no-log per call"], goal="<= 60 us"),
            Row(f"{turn}, --no-log, per call (CPU, the same difference)", "us", samples["no-log per call cpu"],
                goal="<= 60 us", note="user + system time of the commands"),
            Row(f"{turn}, run log on", "ms", samples["logged"], compare=f"{turn}, --no-log"),
            Row("run log, per call over --no-log (wall, per round)", "us", samples["per call"], goal="<= 60 us"),
            Row("run log, per call over --no-log (CPU, per round)", "us", samples["per call cpu"], goal="<= 60 us",
                note="user + system time of the command: what a busy machine does not inflate"),
            Row("RunLogWriter, per written event (in process, CPU)", "us", writer_samples(repeat, work / "runlog"),
                goal="<= 20 us")]
    return rows


def bfcl_rows(repeat: int, toolrun_root: Path, work: Path, quick: bool) -> list[Row]:
    """One tool file per tool, real BFCL definitions (benchmarks/bfcl_catalog.py): call on a cold cache, on one
    filled only by calls of other tools, on one filled by ``tools list``; lint of a smaller catalog, warm."""
    from bfcl_catalog import bfcl_wheel, write_bfcl_catalog

    wheel = bfcl_wheel()
    if wheel is None:
        return []
    big_count, small_count = (1000, 300) if quick else (4852, 1213)
    big, small = work / "bfcl-big", work / "bfcl-small"
    names = write_bfcl_catalog(big, big_count, wheel)
    write_bfcl_catalog(small, small_count, wheel)
    settled = time.time() - 3600
    for file in [*big.iterdir(), *small.iterdir()]:
        os.utime(file, (settled, settled))
    target, other = names[1], names[2]  # math_sum and another: no required argument needs inventing
    call = [*TOOLRUN, "call", target, "--arg", "numbers=[1, 2]", "--tools-dir", str(big)]
    caches = {kind: work / f"cache-bfcl-{kind}" for kind in ("called", "listed", "lint")}
    for cache in caches.values():
        cache.mkdir()
    wall([*TOOLRUN, "call", other, "--tools-dir", str(big)], command_env(toolrun_root, caches["called"]), toolrun_root,
         ok=(0, 1, 2))  # its arguments may be missing: the call still scans the catalog
    wall([*TOOLRUN, "tools", "list", "--tools-dir", str(big)], command_env(toolrun_root, caches["listed"]), toolrun_root)
    lint = [*TOOLRUN, "tools", "lint", "--tools-dir", str(small)]
    wall(lint, command_env(toolrun_root, caches["lint"]), toolrun_root, ok=(0, 1))
    n, m = f"{big_count:,}", f"{small_count:,}"
    rows = [Row(f"toolrun call, one tool of {n} one per file (BFCL), cold cache", "s"),
            Row(f"toolrun call, one tool of {n} one per file (BFCL), cache of other calls only", "s", goal="<= 0.2 s"),
            Row(f"toolrun call, one tool of {n} one per file (BFCL), listed cache", "s", goal="<= 0.2 s"),
            Row(f"toolrun tools lint, {m} BFCL tools one per file, warm", "s", goal="<= 1.0 s")]
    for round_number in range(repeat):
        cold = work / f"cache-bfcl-cold-{round_number}"
        cold.mkdir()
        runs = [(call, cold), (call, caches["called"]), (call, caches["listed"]), (lint, caches["lint"])]
        for row, (argv, cache) in zip(rows, runs, strict=True):
            row.samples.append(wall(argv, command_env(toolrun_root, cache), toolrun_root, ok=(0, 1)))
    return rows


def mcp_peer_rows(repeat: int, toolrun_root: Path, work: Path, quick: bool) -> list[Row]:
    """``toolrun mcp`` over stdio beside FastMCP serving the same tool (benchmarks/mcp_peer.py), per call."""
    from mcp_peer import samples

    (work / "cache-mcp").mkdir()
    found = samples(repeat, 100 if quick else 500, toolrun_root, work, command_env(toolrun_root, work / "cache-mcp"))
    rows = [Row("MCP stdio, sequential tools/call: FastMCP (peer, own venv)", "ms", found.get("FastMCP", []), note="peer"),
            Row("MCP stdio, sequential tools/call: toolrun mcp", "ms", found["toolrun mcp"],
                compare="MCP stdio, sequential tools/call: FastMCP (peer, own venv)", goal="<= 0.5x FastMCP")]
    return rows


# --------------------------------------------------------------------------- report


def versions(toolrun_root: Path) -> dict[str, str]:
    found = {"python": platform.python_version(), "platform": platform.platform(), "cpus": str(os.cpu_count()),
             "load average at start": " ".join(f"{x:.1f}" for x in os.getloadavg())}
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found["toolrun commit"] = subprocess.run(["git", "-C", str(toolrun_root), "rev-parse", "--short", "HEAD"],
                                                 capture_output=True, text=True, check=True).stdout.strip()
    for package in ("toolrun", "pydantic-ai-slim", "llm", "pyyaml", "jsonschema", "httpx", "click"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    return found


def table(rows: list[Row]) -> str:
    by_name = {row.name: row for row in rows}
    lines = ["| figure | median | min-max | ratio | goal | note |", "|---|---|---|---|---|---|"]
    for row in rows:
        ratio = ""
        if row.compare and row.compare in by_name:
            ratio = f"{_ratio(row, by_name[row.compare]):.1f}x {row.compare}"
        spread = f"{row.shown(min(row.samples))}-{row.shown(max(row.samples))}" if row.samples else ""
        lines.append(f"| {row.name} | {row.shown(row.median)} {row.unit} | {spread} | {ratio} | {row.goal} | {row.note} |")
    return "\n".join(lines)


def main() -> None:
    sys.path.insert(0, str(HERE))  # the generators beside this script
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds per figure (median and min-max over them)")
    parser.add_argument("--quick", action="store_true", help="small catalogs and conversations: a smoke run")
    parser.add_argument("--json", type=Path, help="also write the figures and versions to this file")
    parser.add_argument("--toolrun-root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--only", choices=["process", "bfcl", "mcp", "calls", "scripted", "record", "runlog"], action="append",
                        help="measure only these groups of rows (repeatable)")
    options = parser.parse_args()
    root = options.toolrun_root.resolve()
    sys.path.insert(0, str(root))
    groups = options.only or ["process", "bfcl", "mcp", "calls", "scripted", "record", "runlog"]
    found = versions(root)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="toolrun-bench-") as temporary:
        work = Path(temporary)
        (work / "tools").mkdir()
        os.environ["TOOLRUN_CACHE_DIR"] = str(work / "cache-in-process")
        if "process" in groups:
            rows += process_rows(options.repeat, root, work, options.quick)
        if "bfcl" in groups:
            rows += bfcl_rows(options.repeat, root, work, options.quick)
        if "mcp" in groups:
            rows += mcp_peer_rows(options.repeat, root, work, options.quick)
        if "calls" in groups or "scripted" in groups:
            calls = call_rows(options.repeat if "calls" in groups else 0, work / "tools")
            rows += calls if "calls" in groups else []
        if "scripted" in groups:
            rows += scripted_rows(options.repeat, work / "tools", 100 if options.quick else 1000)
        if "record" in groups:
            rows += record_rows(options.repeat, work, 400 if options.quick else 1600)
        if "runlog" in groups:
            rows += run_log_rows(options.repeat, root, work)
    print("versions: " + ", ".join(f"{key} {value}" for key, value in found.items()))
    print(table([row for row in rows if row.samples]))
    if options.json:
        options.json.write_text(json.dumps({"versions": found, "rows": [row.to_json() for row in rows]},
                                           ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
