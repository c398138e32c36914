"""The catalog as an MCP server over the official SDK (HTTP, and stdio clients the lean server hands over).

What is served is decided in ``toolrun.mcp.catalog_service``; this module adapts it to the SDK.
Calls take the path ``toolrun call`` takes (validation, approval, backend under the
tool's timeout, output cap, per-call secret redaction); a bad call or a failing tool is a
result with ``isError: true``, never a protocol error. Approval asks the client's user
through elicitation (a server-to-client request on 2025-11-25 sessions, an
``InputRequiredResult`` round on 2026-07-28 ones); a client that cannot ask is refused
unless the server runs with ``--yes``. Long calls report progress; a cancelled request
cancels its call (a shell tool's process group is killed by the backend).
"""

from __future__ import annotations

import warnings
import weakref
from contextvars import ContextVar
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
from toolrun.core.text import text_as_sent
from toolrun.core.tool import Tool
from toolrun.loop.approval import Approver
from toolrun.mcp import mapping
from toolrun.mcp.catalog_service import (
    INSTRUCTIONS,
    INVALID_CURSOR,
    Caller,
    CatalogService,
    completion_result,
    logs_at,
)
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.mapping import APPROVAL_SCHEMA, approval_given, approval_question
from toolrun.mcp.prompts import PromptError

CALLER_SCOPE_KEY = "toolrun.mcp.caller"  # where the HTTP gate leaves the authenticated client
# The same client while the gate's request is served: for what the SDK asks the server without a request at hand.
REQUEST_CALLER: ContextVar[Caller | None] = ContextVar("toolrun_mcp_request_caller", default=None)
APPROVAL_KEY = "toolrun_approval"  # the input request of a 2026-07-28 approval round


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


class CatalogServer(CatalogService):
    """A ``CatalogService`` served through the official SDK's low-level server (``self.server``)."""

    prepares_calls = True  # over HTTP, many clients' sessions share the event loop a first call would hold

    def __init__(self, live: LiveCatalog, **options: Any) -> None:
        super().__init__(live, **options)
        self._attach_sdk()

    @classmethod
    def adopting(cls, service: CatalogService) -> CatalogServer:
        """The SDK server of an already loaded ``service``: same catalog, audit log, metrics and hooks."""
        server = cls.__new__(cls)
        server.__dict__.update(service.__dict__)
        server._attach_sdk()
        return server

    def _attach_sdk(self) -> None:
        self._listeners: dict[str, tuple[ServerSession, Caller]] = {}  # 2025-11-25 sessions to notify, by session id
        # The level each 2025-11-25 session asked for; forgotten with the session.
        self._log_levels: weakref.WeakKeyDictionary[ServerSession, str] = weakref.WeakKeyDictionary()
        self._bus = InMemorySubscriptionBus()  # 2026-07-28 clients listen here
        prompt_handlers: dict[str, Any] = {}
        if self.prompts is not None:  # the prompts and completions capabilities only when there are recipes to serve
            prompt_handlers = {"on_list_prompts": self._list_prompts, "on_get_prompt": self._get_prompt,
                               "on_completion": self._complete}
        with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, still the 2025-11-25 way
            warnings.simplefilter("ignore")
            self.server = _ToolrunServer(
                "toolrun",
                version=__version__,
                instructions=INSTRUCTIONS,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_subscriptions_listen=ListenHandler(self._bus),
                on_set_logging_level=self._set_logging_level,
                get_tool_input_schema=self._input_schema,
                **prompt_handlers,
            )

    async def announce(self) -> None:
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
        await super().announce()

    # ------------------------------------------------------------------ requests

    def caller(self, ctx: Any) -> Caller:
        """The authenticated client of this request (the HTTP gate put it in the ASGI scope)."""
        request = getattr(ctx, "request", None)
        scope = getattr(request, "scope", None)
        found = scope.get(CALLER_SCOPE_KEY) if isinstance(scope, dict) else None
        return found if isinstance(found, Caller) else self.default_caller

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """The schema the SDK checks a 2026-07-28 call's ``Mcp-Param-*`` headers against before ``_call_tool``
        runs: none for a tool the caller cannot see, whose call then answers and is audited as an unknown one."""
        return self.input_schema(name, REQUEST_CALLER.get() or self.default_caller)

    def _remember(self, ctx: Any) -> None:
        if self.stateless or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-07-28 clients subscribe with subscriptions/listen instead
        key = _session_key(ctx)
        if key and (key in self._listeners or len(self._listeners) < 10_000):
            self._listeners[key] = (ctx.session, self.caller(ctx))

    def _logs_at(self, session: ServerSession, level: str) -> bool:
        """Whether a session gets a message of ``level``: all of them until it sets a level."""
        return logs_at(self._log_levels.get(session), level)

    async def _set_logging_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self._log_levels[ctx.session] = params.level
        self._remember(ctx)
        return types.EmptyResult()

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        _refuse_cursor(params)
        await self.refresh()
        self._remember(ctx)
        listed = [types.Tool.model_validate(tool) for tool in self.listed_tools(self.caller(ctx))]
        return types.ListToolsResult(tools=listed)

    # ------------------------------------------------------------------ recipes as prompts

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        _refuse_cursor(params)
        listed = await self.list_prompts()
        return types.ListPromptsResult(prompts=[types.Prompt.model_validate(prompt) for prompt in listed])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        try:
            result = await self.get_prompt(params.name, params.arguments)
        except PromptError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return types.GetPromptResult.model_validate(result)

    async def _complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        values: list[str] = []
        if isinstance(params.ref, types.PromptReference):
            values = self.complete_prompt(params.ref.name, params.argument.name, params.argument.value)
        return types.CompleteResult.model_validate(completion_result(values))

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> Any:
        caller = self.caller(ctx)
        arguments: Any = params.arguments if params.arguments is not None else {}
        tool = await self.find_tool(params.name, caller, arguments)
        if tool is None:  # the protocol's error for an unknown tool; a hidden tool is unknown to this client
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        approver, early = self._approval(ctx, params, tool, arguments)
        if isinstance(early, types.InputRequiredResult):
            return early  # a question for the client's user: the call comes back with the answer

        async def progress(elapsed: float, message: str) -> None:
            await ctx.session.report_progress(elapsed, None, message)

        result = await self.call(caller, tool, arguments, approver, early, _request_id(ctx), progress)
        return _typed(result)

    def _approval(self, ctx: Any, params: types.CallToolRequestParams, tool: Tool,
                  arguments: Any) -> tuple[Approver | None, Any]:
        """(the approver for this call, or a result to answer with at once)."""
        settled = self.settled_approval(tool, arguments)
        if settled is not None:
            return settled
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
        return None, self.refusal(tool)

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


__all__ = ["CALLER_SCOPE_KEY", "REQUEST_CALLER", "Caller", "CatalogServer"]


def _refuse_cursor(params: Any) -> None:
    # Every list is one page: a cursor can only be one this server never gave out.
    if params is not None and getattr(params, "cursor", None) is not None:
        raise MCPError(types.INVALID_PARAMS, INVALID_CURSOR)


def _typed(result: dict[str, Any]) -> types.CallToolResult:
    # The SDK checks results against the negotiated version's shapes; its models fill what 2026-07-28 adds.
    return types.CallToolResult.model_validate(_sendable(result))


def _sendable(value: Any) -> Any:
    """``value`` with each text as sent (``text_as_sent``): a lone surrogate in a tool's result (a file
    name that is not UTF-8) failed the SDK's JSON encoding, which ended the whole server."""
    if isinstance(value, str):
        return text_as_sent(value)
    if isinstance(value, dict):
        return {text_as_sent(key) if isinstance(key, str) else key: _sendable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_sendable(item) for item in value]
    return value


def _fixed_answer(approved: bool) -> Approver:
    async def answer(tool: Tool, arguments: dict[str, Any]) -> bool:
        return approved

    return answer


def _elicit_approval(ctx: Any) -> Approver:
    async def ask(tool: Tool, arguments: dict[str, Any]) -> bool:
        with anyio.move_on_after(mapping.APPROVAL_WAIT_SECONDS) as waited:  # bounded: see APPROVAL_WAIT_SECONDS
            result = await ctx.session.elicit_form(approval_question(tool, arguments), APPROVAL_SCHEMA,
                                                   related_request_id=ctx.request_id)
        if waited.cancelled_caught:  # the SDK withdrew the question (its notifications/cancelled)
            raise mapping.approval_unanswered()
        return approval_given(result.action, result.content)

    return ask
