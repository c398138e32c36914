"""The catalog as an MCP server: ``tools/list`` and ``tools/call`` over the official SDK.

Calls take the path ``toolrun call`` takes (validation, approval, backend under the
tool's timeout, output cap, per-call secret redaction); a bad call or a failing tool is a
result with ``isError: true``, never a protocol error. Approval asks the client's user
through elicitation (a server-to-client request on 2025-11-25 sessions, an
``InputRequiredResult`` round on 2026-07-28 ones); a client that cannot ask is refused
unless the server runs with ``--yes``. Long calls report progress; a cancelled request
cancels its call (a shell tool's process group is killed by the backend).
"""

from __future__ import annotations

import asyncio
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolrun import __version__
from toolrun.backends.base import CallContext
from toolrun.core.secrets import Redactor, redacting, run_redactor
from toolrun.core.tool import Tool
from toolrun.core.tracing import active_tracer, tool_span
from toolrun.export import mcp_tool
from toolrun.loop.approval import Approver, approve_all
from toolrun.loop.execution import ToolOutcome, execute_call, validate_arguments
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.mapping import APPROVAL_SCHEMA, approval_given, approval_question, call_result_to_mcp
from toolrun.mcp.metrics import GatewayMetrics
from toolrun.mcp.prompts import PromptError, RecipePrompts

CALLER_SCOPE_KEY = "toolrun.mcp.caller"  # where the HTTP gate leaves the authenticated client
APPROVAL_KEY = "toolrun_approval"  # the input request of a 2026-07-28 approval round
PROGRESS_INTERVAL_SECONDS = 1.0
WATCH_INTERVAL_SECONDS = 0.25
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # least severe first


@dataclass(frozen=True)
class Caller:
    """Who sends a request: a name for the audit log, the globs of the tools it may use, and the identity
    its sessions belong to (a string key: ``token:NAME`` for a static ``--auth`` client; None without auth)."""

    name: str | None = None
    tools: tuple[str, ...] | None = None  # None: every served tool
    identity: str | None = None
    max_sessions: int | None = None  # this client's own session limit; None: the server's per-client one

    def sees_every_tool(self) -> bool:
        return self.tools is None or "*" in self.tools


def refusal_message(tool: Tool, stateless: bool = False) -> str:
    if stateless:
        return (f"{tool.name} needs a human's approval for each call, and this server runs --stateless, where no "
                "request can reach the client's user; the server's operator can allow every call by starting "
                "`toolrun mcp` with --yes, or serve with sessions (without --stateless)")
    return (f"{tool.name} needs a human's approval for each call, and this MCP client cannot ask its user "
            "(it does not support elicitation); the server's operator can allow every call by starting "
            "`toolrun mcp` with --yes")


class _ToolrunServer(Server[Any]):
    """The SDK's low-level server, advertising ``tools.listChanged`` on every transport, and ``logging`` only to
    the revisions that have ``logging/setLevel`` (2026-07-28 asks for logs per request, and gets none from us)."""

    def create_initialization_options(self, notification_options: NotificationOptions | None = None,
                                      experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                                      extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     experimental_capabilities, extensions)

    def get_capabilities(self, notification_options: NotificationOptions | None = None,
                         experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                         extensions: dict[str, dict[str, Any]] | None = None, *,
                         protocol_version: str | None = None) -> types.ServerCapabilities:
        found = super().get_capabilities(notification_options, experimental_capabilities, extensions,
                                         protocol_version=protocol_version)
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            found.logging = None
        return found


class CatalogServer:
    """Serves a ``LiveCatalog``; ``report`` receives each problem line meant for the operator (stderr).

    ``stateless``: every request stands alone (``--stateless``), so nothing can be sent to a client
    later — no approval question, no ``list_changed`` — and tools that need approval are refused
    unless ``assume_yes``. ``metrics`` counts calls, reloads and load problems."""

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
        # Every secret a tool file may read, for the audit log only: a call refused before its tool ran
        # still has its arguments logged. Call results keep the redaction of what the call read.
        self._catalog_secrets = Redactor()
        self._reload_lock = asyncio.Lock()
        self._listeners: dict[str, tuple[ServerSession, Caller]] = {}  # 2025-11-25 sessions to notify, by session id
        # The level each 2025-11-25 session asked for; forgotten with the session.
        self._log_levels: weakref.WeakKeyDictionary[ServerSession, str] = weakref.WeakKeyDictionary()
        self._bus = InMemorySubscriptionBus()  # 2026-07-28 clients listen here
        prompt_handlers: dict[str, Any] = {}
        if prompts is not None:  # the prompts and completions capabilities only when there are recipes to serve
            prompt_handlers = {"on_list_prompts": self._list_prompts, "on_get_prompt": self._get_prompt,
                               "on_completion": self._complete}
        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, still the 2025-11-25 way
            warnings.simplefilter("ignore")
            self.server = _ToolrunServer(
                "toolrun",
                version=__version__,
                instructions="Tools of a toolrun catalog (YAML tool files).",
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_subscriptions_listen=ListenHandler(self._bus),
                on_set_logging_level=self._set_logging_level,
                get_tool_input_schema=self._input_schema,
                **prompt_handlers,
            )

    # ------------------------------------------------------------------ catalog changes

    def load(self) -> None:
        """The first load, before serving; its problems go to ``report``."""
        self.live.refresh()
        self._catalog_secrets = Redactor(self.live.snapshot.secrets)
        self._report_problems()
        self.metrics.catalog_loaded(len(self.live.snapshot.problems), reload=False)
        if self.prompts is not None:
            served = len(self.prompts.refresh())
            self.report(f"serving {served} recipe{'s' if served != 1 else ''} as prompts from {self.prompts.directory}")

    async def refresh(self) -> bool:
        """Reload if the tools directory changed; announce the change to every client."""
        async with self._reload_lock:
            changed = await anyio.to_thread.run_sync(self.live.refresh)
        if changed:
            self._catalog_secrets = Redactor(self.live.snapshot.secrets)
            self._report_problems()
            self.metrics.catalog_loaded(len(self.live.snapshot.problems), reload=True)
            await self._announce()
        return changed

    async def watch(self) -> None:
        """Poll the tools directory until cancelled."""
        last_failure = None
        while True:
            await anyio.sleep(self.watch_interval)
            try:
                await self.refresh()
                last_failure = None
            except Exception as exc:  # a directory removed under us: say so once, keep serving what loaded
                if str(exc) != last_failure:
                    self.report(f"error: reloading {self.live.directory} failed: {exc}")
                last_failure = str(exc)

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
        self.report(summary + (f"; {count} above: the tools they concern are not served" if problems else ""))

    async def _announce(self) -> None:
        for key, (session, caller) in list(self._listeners.items()):
            try:
                await session.send_tool_list_changed()
                with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, still the 2025-11-25 way
                    warnings.simplefilter("ignore")
                    for problem in self.live.problems_for(caller.tools):  # a hidden tool's file stays hidden
                        if self._logs_at(session, "error"):
                            await session.send_log_message("error", str(problem), logger="toolrun")
            except Exception:  # the client went away: forget it
                self._listeners.pop(key, None)
        await self._bus.publish(ToolsListChanged())

    # ------------------------------------------------------------------ requests

    def caller(self, ctx: Any) -> Caller:
        """The authenticated client of this request (the HTTP gate put it in the ASGI scope)."""
        request = getattr(ctx, "request", None)
        scope = getattr(request, "scope", None)
        found = scope.get(CALLER_SCOPE_KEY) if isinstance(scope, dict) else None
        return found if isinstance(found, Caller) else self.default_caller

    def _remember(self, ctx: Any) -> None:
        if self.stateless or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28 clients subscribe with subscriptions/listen instead
        key = _session_key(ctx)
        if key and (key in self._listeners or len(self._listeners) < 10_000):
            self._listeners[key] = (ctx.session, self.caller(ctx))

    def _logs_at(self, session: ServerSession, level: str) -> bool:
        """Whether a session gets a message of ``level``: all of them until it sets a level."""
        asked = self._log_levels.get(session)
        return asked is None or LOG_LEVELS.index(level) >= LOG_LEVELS.index(asked)

    async def _set_logging_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self._log_levels[ctx.session] = params.level
        self._remember(ctx)
        return types.EmptyResult()

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        tool = self.live.get(name)
        return tool.parameters if tool is not None else None

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        _refuse_cursor(params)
        await self.refresh()
        self._remember(ctx)
        listed = [types.Tool.model_validate(mcp_tool(tool)) for tool in self.live.tools(self.caller(ctx).tools)]
        return types.ListToolsResult(tools=listed)

    # ------------------------------------------------------------------ recipes as prompts

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        _refuse_cursor(params)
        assert self.prompts is not None
        listed = await anyio.to_thread.run_sync(self.prompts.list_prompts)
        return types.ListPromptsResult(prompts=[types.Prompt.model_validate(prompt) for prompt in listed])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        assert self.prompts is not None
        prompts = self.prompts
        try:
            result = await anyio.to_thread.run_sync(lambda: prompts.get(params.name, params.arguments))
        except PromptError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return types.GetPromptResult.model_validate(result)

    async def _complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        values: list[str] = []
        if self.prompts is not None and isinstance(params.ref, types.PromptReference):
            values = self.prompts.complete(params.ref.name, params.argument.name, params.argument.value)
        return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        caller = self.caller(ctx)
        tool = self.live.get(params.name, caller.tools)
        if tool is None and await self.refresh():
            tool = self.live.get(params.name, caller.tools)
        arguments: Any = params.arguments if params.arguments is not None else {}
        if tool is None:  # the protocol's error for an unknown tool; a hidden tool is unknown to this client
            if self.audit is not None:  # a client trying names outside its scope is what an audit is for
                with redacting(run_redactor()) as redactor:
                    shown = self._catalog_secrets.redact(redactor.redact(arguments))
                self.audit.record(client=caller.name, tool=params.name, arguments=shown, is_error=True, duration_ms=0,
                                  unknown=True)
            self.metrics.call_finished(None, "unknown_tool", 0.0)
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        started = time.perf_counter()
        approver, early = self._approval(ctx, params, tool, arguments)
        if isinstance(early, types.InputRequiredResult):
            return early  # a question for the client's user: the call comes back with the answer
        is_error = True  # until the call finishes: a refused or cancelled call is audited as an error
        self._begin_call()
        with redacting(run_redactor()) as redactor:
            try:
                if early is not None:
                    return early
                with tool_span(tool.name, _request_id(ctx), arguments, description=tool.description) as span:
                    outcome = await self._run(ctx, tool, arguments, approver)
                    span.finish(outcome.result, outcome.is_error)
                is_error = outcome.is_error
                return _typed(call_result_to_mcp(outcome.result, outcome.is_error, outcome.blocks))
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

    def _approval(self, ctx: Any, params: types.CallToolRequestParams, tool: Tool,
                  arguments: Any) -> tuple[Approver | None, Any]:
        """(the approver for this call, or a result to answer with at once)."""
        if not tool.needs_confirmation or self.assume_yes:
            return (approve_all if tool.needs_confirmation else None), None
        if validate_arguments(tool, arguments):
            return None, None  # the call fails on its arguments before anyone is asked
        if self.stateless:
            return None, _typed(call_result_to_mcp(refusal_message(tool, stateless=True), True))
        capabilities = ctx.session.client_capabilities
        can_ask = capabilities is not None and capabilities.elicitation is not None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            answer = (params.input_responses or {}).get(APPROVAL_KEY)
            if isinstance(answer, types.ElicitResult):
                approved = approval_given(answer.action, answer.content)
                return _fixed_answer(approved), None
            if can_ask:
                question = types.ElicitRequest(params=types.ElicitRequestFormParams(
                    message=approval_question(tool, arguments), requested_schema=APPROVAL_SCHEMA))
                return None, types.InputRequiredResult(input_requests={APPROVAL_KEY: question})
        elif can_ask:
            return _elicit_approval(ctx), None
        return None, _typed(call_result_to_mcp(refusal_message(tool), True))

    async def _run(self, ctx: Any, tool: Tool, arguments: Any, approver: Approver | None) -> ToolOutcome:
        """The call, with a progress notification every second while it runs (when the client asked for them)."""
        task = asyncio.ensure_future(execute_call(tool, arguments, CallContext(), approver))
        started = time.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=PROGRESS_INTERVAL_SECONDS)
                if done:
                    return task.result()
                elapsed = time.monotonic() - started
                try:
                    await ctx.session.report_progress(round(elapsed, 1), None, f"{tool.name} is running ({elapsed:.0f}s)")
                except Exception:  # progress is a courtesy: a client that cannot take it still gets the result
                    pass
        finally:
            if not task.done():  # the request was cancelled: the backend kills what it started
                task.cancel()

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options()


def _request_id(ctx: Any) -> str | None:
    """The JSON-RPC id of a tools/call: the call's id in its trace (an MCP call has no other)."""
    request_id = getattr(ctx, "request_id", None)
    return None if request_id is None else str(request_id)


def _session_key(ctx: Any) -> str:
    """The HTTP session id of a request ("stdio" on stdio); empty when an HTTP request has none."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    return headers.get("mcp-session-id", "") if headers is not None else "stdio"


def _refuse_cursor(params: Any) -> None:
    # Every list is one page: a cursor can only be one this server never gave out.
    if params is not None and getattr(params, "cursor", None) is not None:
        raise MCPError(types.INVALID_PARAMS, "Invalid cursor: this server lists everything on one page")


def _typed(result: dict[str, Any]) -> types.CallToolResult:
    # The SDK checks results against the negotiated version's shapes; its models fill what 2026-07-28 adds.
    return types.CallToolResult.model_validate(result)


def _fixed_answer(approved: bool) -> Approver:
    async def answer(tool: Tool, arguments: dict[str, Any]) -> bool:
        return approved

    return answer


def _elicit_approval(ctx: Any) -> Approver:
    async def ask(tool: Tool, arguments: dict[str, Any]) -> bool:
        result = await ctx.session.elicit_form(approval_question(tool, arguments), APPROVAL_SCHEMA,
                                               related_request_id=ctx.request_id)
        return approval_given(result.action, result.content)

    return ask
