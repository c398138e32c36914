"""What the MCP server decides, in plain dicts, for every transport: no MCP SDK here.

Which tool a call names, whether it may run (approval, refusal), the call itself under the
path ``toolrun call`` takes (validation, backend under the tool's timeout, output cap,
per-call secret redaction), its audit line, metrics and trace span; the tool list and the
recipes as prompts. ``toolrun.mcp.server`` adapts this to the official SDK (HTTP, and the
stdio clients the lean server hands over); ``toolrun.mcp.lean_stdio`` speaks it over stdio
with the standard library only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from toolrun.backends import prepare_to_serve
from toolrun.backends.base import CallContext
from toolrun.core.secrets import Redactor, redacting, run_redactor
from toolrun.core.tool import Tool
from toolrun.core.tracing import active_tracer, tool_span
from toolrun.export import mcp_tool
from toolrun.loop.approval import Approver, approve_all
from toolrun.loop.execution import ToolOutcome, execute_call, validate_arguments
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.mapping import call_result_to_mcp
from toolrun.mcp.metrics import GatewayMetrics
from toolrun.mcp.prompts import RecipePrompts

PROGRESS_INTERVAL_SECONDS = 1.0
WATCH_INTERVAL_SECONDS = 0.25
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # least severe first
INSTRUCTIONS = "Tools of a toolrun catalog (YAML tool files)."
INVALID_CURSOR = "Invalid cursor: this server lists everything on one page"

Progress = Callable[[float, str], Awaitable[None]]  # (seconds elapsed, message): one progress notification


@dataclass(frozen=True)
class Caller:
    """Who sends a request: a name for the audit log, the globs of the tools it may use, and the identity
    its sessions belong to (a string key: ``token:NAME`` for a static ``--auth`` client; None without auth)."""

    name: str | None = None
    tools: tuple[str, ...] | None = None  # None: every served tool
    identity: str | None = None
    max_sessions: int | None = None  # this client's own session limit; None: the server's per-client one
    # The bearer token the request presented: a secret of its calls (redacted from their audit lines and results)
    # whether or not the server knows it otherwise (a token_sha256 client's, an OpenID token).
    credential: str | None = field(default=None, repr=False, compare=False)

    def sees_every_tool(self) -> bool:
        return self.tools is None or "*" in self.tools


def unaudited_refusal(why: str) -> str:
    """The result of a call refused because the audit log cannot be written: no call runs unaudited."""
    return (f"refused: the server's audit log cannot be written ({why}), and no call runs without its line there; "
            "try again later (the server's operator is told)")


def refusal_message(tool: Tool, stateless: bool = False) -> str:
    if stateless:
        return (f"{tool.name} needs a human's approval for each call, and this server runs --stateless, where no "
                "request can reach the client's user; the server's operator can allow every call by starting "
                "`toolrun mcp` with --yes, or serve with sessions (without --stateless)")
    return (f"{tool.name} needs a human's approval for each call, and this MCP client cannot ask its user "
            "(it does not support elicitation); the server's operator can allow every call by starting "
            "`toolrun mcp` with --yes")


def logs_at(asked: str | None, level: str) -> bool:
    """Whether a client that asked for ``asked`` (None: it never set a level) gets a message of ``level``."""
    return asked is None or LOG_LEVELS.index(level) >= LOG_LEVELS.index(asked)


def completion_result(values: list[str]) -> dict[str, Any]:
    return {"completion": {"values": values, "total": len(values), "hasMore": False}}


class CatalogService:
    """Serves a ``LiveCatalog``; ``report`` receives each problem line meant for the operator (stderr).

    ``stateless``: every request stands alone (``--stateless``), so nothing can be sent to a client
    later — no approval question, no ``list_changed`` — and tools that need approval are refused
    unless ``assume_yes``. ``metrics`` counts calls, reloads and load problems. ``change_hooks`` are
    awaited after each reload that changed the catalog (a transport tells its clients)."""

    # Whether the backends do before serving what a first call would do once (``Backend.prepare_to_serve``): the
    # HTTP server's sessions share one event loop; the lean stdio server's one client starts sooner without it.
    prepares_calls = False

    def __init__(self, live: LiveCatalog, *, assume_yes: bool = False, audit: AuditLog | None = None,
                 report: Callable[[str], None] = lambda line: None,
                 watch_interval: float = WATCH_INTERVAL_SECONDS, prompts: RecipePrompts | None = None,
                 metrics: GatewayMetrics | None = None, stateless: bool = False) -> None:
        active_tracer()  # tracing set up before the first request, so the MCP SDK's spans are kept from the first
        self.live = live
        self.metrics = metrics or GatewayMetrics()
        self.stateless = stateless
        self.calls_in_flight = 0  # what a drain waits for
        self.prompts = prompts
        self.assume_yes = assume_yes
        self.audit = audit
        self.report = report
        self.watch_interval = watch_interval
        self.default_caller = Caller()
        self.change_hooks: list[Callable[[], Awaitable[None]]] = []
        # Every secret a tool file may read, for the audit log only: a call refused before its tool ran
        # still has its arguments logged. Call results keep the redaction of what the call read.
        self._catalog_secrets = Redactor()
        self._reload_lock = asyncio.Lock()

    # ------------------------------------------------------------------ catalog changes

    def load(self) -> None:
        """The first load, before serving; its problems go to ``report``."""
        self.live.refresh()
        self._prepare_calls()
        self._catalog_secrets = Redactor(self.live.snapshot.secrets)
        self._report_problems()
        self.metrics.catalog_loaded(len(self.live.snapshot.problems), reload=False)
        if self.prompts is not None:
            served = len(self.prompts.refresh())
            self.report(f"serving {served} recipe{'s' if served != 1 else ''} as prompts from {self.prompts.directory}")

    async def refresh(self) -> bool:
        """Reload if the tools directory changed; announce the change to every client."""
        async with self._reload_lock:
            changed = await asyncio.to_thread(self._reload)
        if changed:
            self._catalog_secrets = Redactor(self.live.snapshot.secrets)
            self._report_problems()
            self.metrics.catalog_loaded(len(self.live.snapshot.problems), reload=True)
            await self.announce()
        return changed

    def _reload(self) -> bool:
        """In a worker thread: reload the catalog, and prepare the backends of what changed there, off the event loop."""
        changed = self.live.refresh()
        if changed:
            self._prepare_calls()
        return changed

    def _prepare_calls(self) -> None:
        """When ``prepares_calls``, each backend of the catalog does now what its first call would do once on the
        event loop (``Backend.prepare_to_serve``): over HTTP every client's requests would wait for it."""
        if not self.prepares_calls:
            return
        try:
            prepare_to_serve(self.live.tools())
        except Exception as exc:  # a plugin's: its first call meets it again, where the client sees it
            self.report(f"warning: preparing the tools' backends failed: {exc}")

    async def watch(self) -> None:
        """Poll the tools directory until cancelled."""
        last_failure = None
        while True:
            await asyncio.sleep(self.watch_interval)
            try:
                await self.refresh()
                last_failure = None
            except Exception as exc:  # a directory removed under us: say so once, keep serving what loaded
                if str(exc) != last_failure:
                    self.report(f"error: reloading {self.live.directory} failed: {exc}")
                last_failure = str(exc)

    async def announce(self) -> None:
        """Tell the transports the catalog changed."""
        for hook in list(self.change_hooks):
            await hook()

    def _report_problems(self) -> None:
        problems = self.live.snapshot.problems
        for problem in problems:
            self.report(f"error: {problem}")
        for glob, guess in self.live.snapshot.unmatched:
            self.report(f"warning: --tools {glob!r} matches no tool of the catalog"
                        + (f" — did you mean {guess!r}?" if guess else " — `toolrun tools list` shows their names"))
        served = len(self.live.snapshot.catalog)
        summary = f"serving {served} tool{'s' if served != 1 else ''} from {self.live.directory}"
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        self.report(summary + (f"; {count} above: a tool with a problem is not served (a name defined twice: "
                               "its first definition is)" if problems else ""))

    # ------------------------------------------------------------------ tools

    def listed_tools(self, caller: Caller) -> list[dict[str, Any]]:
        """``tools/list``: the tools ``caller`` may see, in the protocol's shape."""
        return [mcp_tool(tool) for tool in self.live.tools(caller.tools)]

    def input_schema(self, name: str, caller: Caller) -> dict[str, Any] | None:
        """The input schema of the tool ``name`` when ``caller`` may see it, else None (as for no such tool)."""
        tool = self.live.get(name, caller.tools)
        return tool.parameters if tool is not None else None

    async def find_tool(self, name: str, caller: Caller, arguments: Any) -> Tool | None:
        """The tool a call names (the catalog reloaded once when it is not found); None when ``caller``
        cannot see it — audited and counted, and the transport answers "Unknown tool"."""
        tool = self.live.get(name, caller.tools)
        if tool is None and await self.refresh():
            tool = self.live.get(name, caller.tools)
        if tool is None:
            if self.audit is not None:  # a client trying names outside its scope is what an audit is for
                with redacting(run_redactor()) as redactor:
                    redactor.add(caller.credential)
                    shown = self._catalog_secrets.redact(redactor.redact(arguments))
                self.audit.record(client=caller.name, tool=name, arguments=shown, is_error=True, duration_ms=0,
                                  unknown=True)
            self.metrics.call_finished(None, "unknown_tool", 0.0)
        return tool

    def settled_approval(self, tool: Tool, arguments: Any) -> tuple[Approver | None, dict[str, Any] | None] | None:
        """(the approver, or a result to answer with at once) when no one needs asking; None when the
        client's user must approve this call (the transport asks, or refuses with ``refusal``)."""
        if not tool.needs_confirmation or self.assume_yes:
            return (approve_all if tool.needs_confirmation else None), None
        if validate_arguments(tool, arguments):
            return None, None  # the call fails on its arguments before anyone is asked
        if self.stateless:
            return None, call_result_to_mcp(refusal_message(tool, stateless=True), True)
        return None

    @staticmethod
    def refusal(tool: Tool) -> dict[str, Any]:
        """The result of a call that needs approval from a client that cannot ask its user."""
        return call_result_to_mcp(refusal_message(tool), True)

    async def call(self, caller: Caller, tool: Tool, arguments: Any, approver: Approver | None,
                   early: dict[str, Any] | None, request_id: str | None, progress: Progress | None) -> dict[str, Any]:
        """``tools/call`` of a found tool: ``early`` (a refusal) or the call's result, audited and counted."""
        started = time.perf_counter()
        is_error = True  # until the call finishes: a refused or cancelled call is audited as an error
        if early is None and self.audit is not None and self.audit.unwritable is not None:
            early = call_result_to_mcp(unaudited_refusal(self.audit.unwritable), True)  # its own line tries the log
        self._begin_call()
        with redacting(run_redactor()) as redactor:
            redactor.add(caller.credential)
            try:
                if early is not None:
                    return early
                with tool_span(tool.name, request_id, arguments, description=tool.description) as span:
                    outcome = await self._run(tool, arguments, approver, progress)
                    span.finish(outcome.result, outcome.is_error)
                is_error = outcome.is_error
                return call_result_to_mcp(outcome.result, outcome.is_error, outcome.blocks)
            finally:
                elapsed = time.perf_counter() - started
                self._end_call(tool.name, is_error, elapsed)
                if self.audit is not None:
                    shown = self._catalog_secrets.redact(redactor.redact(arguments))
                    self.audit.record(client=caller.name, tool=tool.name, arguments=shown,
                                      is_error=is_error, duration_ms=round(elapsed * 1000))

    def _begin_call(self) -> None:
        self.calls_in_flight += 1
        self.metrics.calls_in_flight.inc()

    def _end_call(self, name: str, is_error: bool, seconds: float) -> None:
        self.calls_in_flight -= 1
        self.metrics.calls_in_flight.dec()
        self.metrics.call_finished(name, "error" if is_error else "ok", seconds)

    async def _run(self, tool: Tool, arguments: Any, approver: Approver | None,
                   progress: Progress | None) -> ToolOutcome:
        """The call, with a progress notification every second while it runs (when the client asked for them)."""
        task = asyncio.ensure_future(execute_call(tool, arguments, CallContext(), approver))
        started = time.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_SECONDS)
                if done:
                    return task.result()
                elapsed = time.monotonic() - started
                if progress is None:
                    continue
                try:
                    await progress(round(elapsed, 1), f"{tool.name} is running ({elapsed:.0f}s)")
                except Exception:  # progress is a courtesy: a client that cannot take it still gets the result
                    pass
        finally:
            if not task.done():  # the request was cancelled: the backend kills what it started
                task.cancel()

    # ------------------------------------------------------------------ recipes as prompts

    async def list_prompts(self) -> list[dict[str, Any]]:
        assert self.prompts is not None
        return await asyncio.to_thread(self.prompts.list_prompts)

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
        """``prompts/get``; PromptError (-32602) for a request the client got wrong."""
        assert self.prompts is not None
        prompts = self.prompts
        return await asyncio.to_thread(lambda: prompts.get(name, arguments))

    def complete_prompt(self, name: str, argument: str, typed: str) -> list[str]:
        return self.prompts.complete(name, argument, typed) if self.prompts is not None else []
