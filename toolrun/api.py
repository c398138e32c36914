"""The library entry points behind ``toolrun.*``: load, call one tool, play a recipe.

Everything the command line does is one of these calls first; the CLI only parses
options and prints. The async functions are the core; ``run`` and ``call`` are their
blocking twins for scripts (they start an event loop, so call them outside one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.backends.base import CallContext
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import DEFAULT_TOOLS_DIR, Catalog
from toolrun.core.content import ContentBlock
from toolrun.core.errors import Problem, UserError
from toolrun.core.event_loop import run_until_done
from toolrun.core.secrets import redacting, run_redactor
from toolrun.core.text import close_matches
from toolrun.core.tool import Tool
from toolrun.loop.approval import Approver
from toolrun.loop.execution import execute_call
from toolrun.sessions.run_options import Mode, RunOptions

if TYPE_CHECKING:  # playing a recipe (providers, replay, the runner) is imported by run/load_recipe only
    from toolrun.loop.results import RunResult
    from toolrun.loop.runner import RunObserver
    from toolrun.providers.base import Provider
    from toolrun.sessions.recipe import Recipe


def load_catalog(tools_dir: str | Path = DEFAULT_TOOLS_DIR, *, lint: bool = True, partial: bool = False) -> Catalog:
    """Load every tool file of ``tools_dir`` (``*.yaml``, ``*.yml``) into a ``Catalog``.

    With ``lint`` (the default) the description lint runs: its findings are in
    ``catalog.findings``, and a finding of severity error stops loading like a broken
    file does. Raises ``toolrun.LoadError`` whose ``problems`` name file, line and fix.
    With ``partial``, a file that does not load (an MCP server that does not start) is left
    out instead: the catalog holds the tools of the other files, ``catalog.problems`` the
    problems (lint errors still raise).
    """
    return load_checked_catalog(Path(tools_dir), lint=lint, partial=partial)


def load_recipe(path: str | Path) -> Recipe:
    """Read and check a recipe file; raises ``toolrun.LoadError`` listing every problem."""
    from toolrun.sessions.recipe import load_recipe as load_recipe_file

    return load_recipe_file(Path(path))


@dataclass
class CallResult:
    """What one tool call gave: the text a model would get, and whether it is an error."""

    tool: str
    arguments: Any
    result: str
    is_error: bool
    duration_ms: int
    blocks: list[ContentBlock] = field(default_factory=list)  # images, audio, resources an MCP server returned

    def to_json(self) -> dict[str, Any]:
        """``{"tool", "arguments", "result", "is_error", "duration_ms"}``, as ``toolrun call --json`` prints it;
        ``content`` (the MCP blocks beside the text, unchanged) when there are any."""
        shown = {"tool": self.tool, "arguments": self.arguments, "result": self.result,
                 "is_error": self.is_error, "duration_ms": self.duration_ms}
        if self.blocks:
            shown["content"] = [block.wire for block in self.blocks]
        return shown


def find_tool(catalog: Catalog, name: str) -> Tool:
    """The tool called ``name``; ``UserError`` with a did-you-mean otherwise."""
    if not isinstance(catalog, Catalog):  # a folder's name, most likely: say what to pass instead
        raise TypeError(f"expected a Catalog (catalog = toolrun.load_catalog({catalog!r})), not {type(catalog).__name__}")
    tool = catalog.get(name)
    if tool is not None:
        return tool
    guesses = close_matches(name, catalog.tools, n=3, cutoff=0.5)
    fix = f"did you mean {' or '.join(guesses)}?" if guesses else "run `toolrun tools list` to see the tools"
    where = catalog.directory if catalog.directory is not None else "the tools directory"
    raise UserError(Problem(None, None, f"no tool named {name!r} in {where}", fix))


async def acall(catalog: Catalog, name: str, arguments: Any = None, *, approver: Approver | None = None,
                environ: Mapping[str, str] | None = None, allow_hosts: list[str] | None = None) -> CallResult:
    """Run the tool ``name`` once, exactly as the runner runs a model's call.

    The arguments are validated against the tool's schema; invalid arguments, a failing
    tool, a timeout or a denied approval give ``is_error=True`` with the message a model
    would get — never an exception. A tool that needs approval is refused unless an
    ``approver`` says yes. Raises ``UserError`` only for a name not in the catalog.
    Secrets the call reads are redacted from its result and forgotten afterwards.
    """
    tool = find_tool(catalog, name)
    given = {} if arguments is None else arguments
    context = CallContext(allow_hosts=allow_hosts) if environ is None else CallContext(environ, allow_hosts)
    with redacting(run_redactor()):
        outcome = await execute_call(tool, given, context, approver)
    return CallResult(tool.name, given, outcome.result, outcome.is_error, outcome.duration_ms, outcome.blocks)


def call(catalog: Catalog, name: str, arguments: Any = None, *, approver: Approver | None = None,
         environ: Mapping[str, str] | None = None, allow_hosts: list[str] | None = None) -> CallResult:
    """Blocking twin of ``acall`` (in async code, ``await toolrun.acall(...)``)."""
    _not_in_a_running_loop("call", "acall")
    return run_until_done(acall(catalog, name, arguments, approver=approver, environ=environ, allow_hosts=allow_hosts))


def run(
    recipe: str | Path | Recipe,
    *,
    vars: Mapping[str, Any] | None = None,
    model: str | Provider | None = None,
    mode: Mode = "auto",
    prompt: str | None = None,
    tools_dir: str | Path | None = None,
    catalog: Catalog | None = None,
    observer: RunObserver | None = None,
    approver: Approver | None = None,
    stream: bool | None = None,
    max_turns: int | None = None,
    record: str | Path | None = None,
    replay: str | Path | None = None,
    strict: bool = False,
    replay_tools: bool = False,
    environ: Mapping[str, str] | None = None,
) -> RunResult:
    """Blocking twin of ``arun`` (see there): play a recipe until the model answers."""
    _not_in_a_running_loop("run", "arun")
    from toolrun.sessions.play import run_recipe  # start-up: `toolrun call` imports this module, not the providers

    return run_until_done(run_recipe(recipe, RunOptions(
        vars=vars, model=model, mode=mode, prompt=prompt, tools_dir=tools_dir, catalog=catalog, observer=observer,
        approver=approver, stream=stream, max_turns=max_turns, record=record, replay=replay, strict=strict,
        replay_tools=replay_tools, environ=environ)))


def _not_in_a_running_loop(blocking: str, twin: str) -> None:
    """The blocking twins start an event loop: inside one (an async tool, a notebook) say what to use."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError(Problem(None, None, f"toolrun.{blocking}() cannot run inside a running event loop",
                            f"use await toolrun.{twin}(...) there"))
