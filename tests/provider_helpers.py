"""What the provider adapter tests share: playing requests through a provider (its client closed
afterwards), one tool round as the runner plays it, a whole run through the real runner, a tool
catalog written to tmp_path, and the recorded vercel-ai traffic in tests/fixtures/recorded/."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from toolrun.backends.base import CallContext
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.catalog.model import Catalog
from toolrun.core.messages import Message, ModelRequest, ModelResponse, TextPart
from toolrun.core.tool import Tool
from toolrun.loop.runner import RunResult, RunSettings, run_conversation
from toolrun.providers.base import Provider

T = TypeVar("T")

# one flower-stock tool as one YAML file, for the adapters' whole runs through the real runner
STOCK_TOOL_PY = "def stock(city):\n    return {'北京': '玫瑰: 100', '上海': '玫瑰: 80'}[city]\n"
STOCK_TOOL_YAML = (
    "name: get_flower_inventory\n"
    "description: Returns the current flower stock of one city. Use it for stock questions only.\n"
    "parameters: {type: object, properties: {city: {type: string, description: City name}}, required: [city]}\n"
    "backend: {python: 'tools.py:stock'}\n")


def with_provider(provider: Provider, use: Callable[[Provider], Awaitable[T]]) -> T:
    """Run ``use(provider)`` in a fresh event loop and close the provider's HTTP client afterwards."""

    async def go() -> T:
        try:
            return await use(provider)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def complete(provider: Provider, request: ModelRequest, *, stream: bool, events: list[Any] | None = None) -> ModelResponse:
    """One request through ``provider``; stream events go to ``events`` when given."""
    on_event = events.append if events is not None else None
    return with_provider(provider, lambda p: p.complete(request, stream=stream, on_event=on_event))


def tool_round(provider: Provider, request: ModelRequest,
               follow_up: Callable[[ModelRequest, ModelResponse], ModelRequest], *,
               stream: bool) -> tuple[ModelResponse, ModelResponse, list[Any]]:
    """Play one tool round as the runner would: ask, let ``follow_up`` add the answers, ask again.
    Returns both responses and the stream events of both requests."""
    events: list[Any] = []

    async def play(p: Provider) -> tuple[ModelResponse, ModelResponse]:
        first = await p.complete(request, stream=stream, on_event=events.append)
        final = await p.complete(follow_up(request, first), stream=stream, on_event=events.append)
        return first, final

    first, final = with_provider(provider, play)
    return first, final, events


def run_through_runner(provider: Provider, tools: list[Tool], messages: list[Message], *,
                       system: str | None = None, stream: bool = True) -> RunResult:
    """A whole conversation through the real runner (tools really run), no environment for them."""
    return with_provider(provider, lambda p: run_conversation(
        p, tools, system=system, messages=messages, settings=RunSettings(stream=stream), context=CallContext(environ={})))


def user(text: str) -> list[Message]:
    """A history of one user message."""
    return [Message("user", [TextPart(text)])]


def write_catalog(tmp_path: Path, tools_py: str, tools_yaml: str) -> Catalog:
    """Write ``tools.py`` and ``tools.yaml`` to ``tmp_path/tools.d`` and load them as a real catalog."""
    directory = tmp_path / "tools.d"
    directory.mkdir()
    (directory / "tools.py").write_text(tools_py, encoding="utf-8")
    (directory / "tools.yaml").write_text(tools_yaml, encoding="utf-8")
    return load_catalog_or_raise(directory)


def load_tools(tmp_path: Path, tools_py: str, tools_yaml: str) -> list[Tool]:
    """Every tool of the catalog ``write_catalog`` writes."""
    return list(write_catalog(tmp_path, tools_py, tools_yaml).tools.values())


def recorded_body(fixtures_dir: Path, name: str) -> dict[str, Any]:
    """A recorded whole answer: ``recorded/vercel-ai--<name>.json``."""
    return json.loads((fixtures_dir / "recorded" / f"vercel-ai--{name}.json").read_text())


def recorded_stream(fixtures_dir: Path, name: str) -> list[dict[str, Any]]:
    """A recorded stream, one parsed event a line: ``recorded/vercel-ai--<name>.chunks.txt``."""
    text = (fixtures_dir / "recorded" / f"vercel-ai--{name}.chunks.txt").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]
