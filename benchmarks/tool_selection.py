"""How well does `tool_selection` pick the right tools out of a thousand? A public benchmark.

Pools every function of the Berkeley Function Calling Leaderboard's simple (python),
multiple, live-simple and live-multiple sets into one catalog (one tool per name, the first
definition seen), and ranks that catalog for each of the sets' questions (their user
messages). A question is answered when every function of its ground truth is among the
top k. Prints recall@5/10/20 for toolrun's ranking (BM25F, ``toolrun.catalog.tool_ranking``)
and a plain BM25 baseline (one field, no stemming), on the tuning half (even positions)
and the held-out half (odd positions); the tokens of the tool definitions sent per request
with all tools and with the top 20; and the time to build the index and to rank one text.

The data comes from the ``bfcl-eval`` wheel on PyPI, fetched on first run with
``pip download --no-deps`` into a cache folder (never installed: it pulls vendor SDKs).

Run: python benchmarks/tool_selection.py [--data DIR] [--misses N]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolrun.catalog.similarity import tokenize  # noqa: E402
from toolrun.catalog.tokens import estimate_definition_tokens  # noqa: E402
from toolrun.catalog.tool_ranking import ToolIndex, ToolText  # noqa: E402

BFCL_VERSION = "2026.3.23"
SETS = ("BFCL_v4_simple_python", "BFCL_v4_multiple", "BFCL_v4_live_simple", "BFCL_v4_live_multiple")
CUTOFFS = (5, 10, 20)

Question = tuple[str, str, frozenset[str]]  # id, text, the functions it needs
Ranker = Callable[[str], list[str]]


def data_folder(given: str | None) -> Path:
    """The folder holding the sets' JSON lines, fetched from PyPI when missing."""
    if given:
        return Path(given)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolrun-benchmarks"
    folder = cache / f"bfcl-eval-{BFCL_VERSION}"
    if not (folder / "possible_answer").is_dir():
        wheels = cache / "wheels"
        subprocess.run([sys.executable, "-m", "pip", "download", f"bfcl-eval=={BFCL_VERSION}", "--no-deps",
                        "--quiet", "-d", str(wheels)], check=True)
        wheel = next(wheels.glob(f"bfcl_eval-{BFCL_VERSION}-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                for name in SETS:
                    if member in (f"bfcl_eval/data/{name}.json", f"bfcl_eval/data/possible_answer/{name}.json"):
                        target = folder / member.removeprefix("bfcl_eval/data/")
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(archive.read(member))
    return folder


def load(folder: Path) -> tuple[list[ToolText], list[Question]]:
    tools: dict[str, ToolText] = {}
    questions: list[Question] = []
    for name in SETS:
        answers = {}
        for line in (folder / "possible_answer" / f"{name}.json").read_text().splitlines():
            entry = json.loads(line)
            answers[entry["id"]] = frozenset(function for call in entry["ground_truth"] for function in call)
        for line in (folder / f"{name}.json").read_text().splitlines():
            entry = json.loads(line)
            for function in entry["function"]:
                tools.setdefault(function["name"], ToolText(function["name"], function.get("description", ""),
                                                            function.get("parameters") or {}))
            text = "\n".join(message["content"] for turn in entry["question"] for message in turn
                             if message["role"] == "user")
            questions.append((entry["id"], text, answers[entry["id"]]))
    return list(tools.values()), questions


def plain_bm25(tools: list[ToolText]) -> Ranker:
    """The baseline: BM25 (k1 1.2, b 0.75) over name, description and parameters as one text."""
    documents = [Counter(tokenize(f"{tool.name} {tool.description} {json.dumps(tool.parameters)}")) for tool in tools]
    lengths = [sum(document.values()) for document in documents]
    average = sum(lengths) / len(lengths)
    frequency = Counter(term for document in documents for term in document)
    idf = {term: math.log(1 + (len(tools) - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def rank(text: str) -> list[str]:
        query = set(tokenize(text))
        scores = []
        for tool, document, length in zip(tools, documents, lengths, strict=True):
            score = sum(idf[term] * document[term] * 2.2 / (document[term] + 1.2 * (0.25 + 0.75 * length / average))
                        for term in query if term in document)
            scores.append((-score, tool.name))
        return [name for _, name in sorted(scores)]

    return rank


def recall(rank: Ranker, questions: list[Question]) -> tuple[dict[int, float], list[Question]]:
    hits = Counter[int]()
    misses = []
    for question in questions:
        ranked = rank(question[1])[: max(CUTOFFS)]
        for cutoff in CUTOFFS:
            hits[cutoff] += question[2] <= set(ranked[:cutoff])
        if not question[2] <= set(ranked):
            misses.append(question)
    return {cutoff: hits[cutoff] / len(questions) for cutoff in CUTOFFS}, misses


_JSON_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def _json_schema(schema: Any) -> Any:
    """BFCL's Python-flavoured parameter schemas ("dict", "float", "tuple") as JSON Schema."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _json_schema(value) for key, value in schema.items() if key not in ("type", "properties")}
    if isinstance(schema.get("properties"), dict):
        converted["properties"] = {name: _json_schema(value) for name, value in schema["properties"].items()}
    kind = schema.get("type")
    kind = _JSON_SCHEMA_TYPES.get(kind, kind) if isinstance(kind, str) else None
    return {**converted, "type": kind} if kind else converted


def time_the_command(tools: list[ToolText], folder: Path, rounds: int = 7) -> None:
    """Write the catalog as one toolset file and time `toolrun tools select` on it, whole process."""
    folder.mkdir(parents=True, exist_ok=True)
    by_name = {tool.name.replace(".", "_"): tool for tool in reversed(tools)}  # dots are not allowed in names
    entries = [{"name": name, "description": tool.description or tool.name,
                "parameters": _json_schema(tool.parameters) or {"type": "object"},
                "backend": {"shell": {"argv": ["true"]}}} for name, tool in reversed(by_name.items())]
    (folder / "bfcl.yaml").write_text(json.dumps({"tools": entries}))  # JSON is YAML
    command = [sys.executable, "-m", "toolrun", "tools", "select", "weather today in Boston in fahrenheit?",
               "--tools-dir", str(folder), "--json"]
    subprocess.run(command, check=True, capture_output=True)  # fills the catalog cache and the kept ranking index
    # Python's own start-up, interleaved, for scale: on a loaded machine it is most of the command.
    commands = {"toolrun tools select": command, "python -c pass": [sys.executable, "-c", "pass"]}
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            before = os.times()
            started = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            walls[name].append(time.perf_counter() - started)
            after = os.times()
            cpus[name].append(after.children_user - before.children_user + after.children_system - before.children_system)
    python = statistics.median(cpus["python -c pass"])
    print(f"toolrun tools select, {len(entries)} tools, whole process, warm (catalog cache and ranking index kept): "
          f"median {statistics.median(walls['toolrun tools select']):.3f} s wall, "
          f"{statistics.median(cpus['toolrun tools select']):.3f} s CPU (python -c pass: {python:.3f} s CPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="a folder holding the sets (default: fetched into a cache folder)")
    parser.add_argument("--misses", type=int, default=0, help="print this many held-out questions missed at 20")
    parser.add_argument("--command-in", metavar="DIR", help="also time `toolrun tools select` on the catalog written here")
    options = parser.parse_args()
    tools, questions = load(data_folder(options.data))
    halves = {"tuning": questions[0::2], "held-out": questions[1::2]}
    print(f"catalog: {len(tools)} tools; questions: {len(questions)} "
          f"({len(halves['tuning'])} tuning, {len(halves['held-out'])} held out)")
    started = time.perf_counter()
    index = ToolIndex(tools)
    built = time.perf_counter() - started
    rankers = {"toolrun BM25F": lambda text: [tool.name for tool in index.rank(text, max(CUTOFFS))],
               "plain BM25": plain_bm25(tools)}
    print(f"{'ranking':<15} {'half':<9} " + " ".join(f"{'recall@' + str(c):>10}" for c in CUTOFFS))
    held_out_misses: list[Question] = []
    for label, rank in rankers.items():
        for half, subset in halves.items():
            figures, misses = recall(rank, subset)
            print(f"{label:<15} {half:<9} " + " ".join(f"{figures[c]:>10.1%}" for c in CUTOFFS))
            if label.startswith("toolrun") and half == "held-out":
                held_out_misses = misses
    cost = {tool.name: estimate_definition_tokens({"type": "function", "function": {
        "name": tool.name, "description": tool.description, "parameters": tool.parameters}}) for tool in tools}
    everything = sum(cost.values())
    chosen = [sum(cost[tool.name] for tool in index.rank(text, 20)) for _, text, _ in questions]
    print(f"tokens of tool definitions per request: all {len(tools)} tools {everything:,}; "
          f"top 20 {statistics.mean(chosen):,.0f} on average (saves {1 - statistics.mean(chosen) / everything:.1%})")
    timings = []
    for _, text, _ in questions[:200]:
        started = time.perf_counter()
        index.rank(text, 20)
        timings.append(time.perf_counter() - started)
    print(f"index build: {built * 1000:.0f} ms; rank one question: median {statistics.median(timings) * 1000:.2f} ms, "
          f"max {max(timings) * 1000:.2f} ms")
    if options.command_in:
        time_the_command(tools, Path(options.command_in))
    for question_id, text, needed in held_out_misses[: options.misses]:
        print(f"  missed {question_id}: {sorted(needed)} <- {text[:160]!r}")


if __name__ == "__main__":
    main()
