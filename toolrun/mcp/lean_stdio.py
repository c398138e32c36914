"""``toolrun mcp`` over stdio without the MCP SDK: newline-delimited JSON-RPC 2.0 with asyncio and ``json``.

It serves the protocol revisions that open with ``initialize`` (2024-11-05 to 2025-11-25)
exactly what the SDK-based server offers them, from the same ``CatalogService``; a client
that opens any other way (a 2026-07-28 client, a request before ``initialize``, a line the
lean server cannot read) is handed to the SDK's server with that first line replayed, so
every client served before is served the same. Skipping the SDK's import (1-3 CPU seconds
of pydantic models) and its per-message validation and stream hops is the whole point.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from toolrun import __version__
from toolrun.core.tool import Tool
from toolrun.mcp import mapping
from toolrun.mcp.catalog_service import (
    INSTRUCTIONS,
    INVALID_CURSOR,
    LOG_LEVELS,
    CatalogService,
    completion_result,
    logs_at,
)
from toolrun.mcp.jsonrpc_lines import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Message,
    encode,
    error_reply,
    read_line,
)
from toolrun.mcp.mapping import APPROVAL_SCHEMA, approval_given, approval_question
from toolrun.mcp.prompts import PromptError
from toolrun.mcp.stdio_wire import (
    EOF_GRACE_SECONDS,
    LineWriter,
    ReplayedLines,
    WireText,
    claimed_stdio,
    line_reader,
    next_line,
)

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = "2025-11-25"  # the answer to a version this server does not know, as the SDK answers
MODERN_ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"  # only 2026-07-28 requests carry it in _meta
ENVELOPE_REFUSED = ("this connection serves the handshake protocol era; requests carrying the 2026-07-28 "
                    "envelope are not accepted on it")

CONNECTION_CLOSED = -32000  # the SDK's code for a request still running when the client closed stdin

Handler = Callable[[dict[str, Any], Any], Awaitable[dict[str, Any]]]


class RequestError(Exception):
    """A request answered with a JSON-RPC error instead of a result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def invalid_params() -> RequestError:
    return RequestError(INVALID_PARAMS, "Invalid request parameters", "")  # the SDK's words for a malformed request


class ClientError(Exception):
    """The client answered a question of the server with an error."""


async def serve_lean_stdio(service: CatalogService) -> None:
    """Serve one client over stdin/stdout until it closes stdin."""
    with claimed_stdio() as (wire_in, wire_out):
        reader = await line_reader(wire_in)
        writer = await LineWriter(wire_out).open()
        try:
            first = await _opening_line(reader)
            opening = _legacy_initialize(first) if first is not None else None
            if opening is not None:
                await StdioSession(service, writer).serve(opening, reader)
            elif first is not None:
                await _hand_over(service, first, reader, writer)
            await writer.drain()
        finally:
            writer.close()


async def _opening_line(reader: asyncio.StreamReader) -> str | None:
    """The first line that is not blank; None when the client leaves without one."""
    while line := await next_line(reader):
        if line.strip():
            return line.decode("utf-8", "replace")
    return None


def _legacy_initialize(line: str) -> Message | None:
    """The message of ``line`` when it is an ``initialize`` request the lean server serves, else None."""
    message, _ = read_line(line)
    if message is None or not message.is_request or message.method != "initialize":
        return None
    return message if _initialize_params_valid(message.params) else None


async def _hand_over(service: CatalogService, first: str, reader: asyncio.StreamReader, writer: LineWriter) -> None:
    from toolrun.mcp.server import CatalogServer
    from toolrun.mcp.stdio import serve_stdio

    await serve_stdio(CatalogServer.adopting(service), ReplayedLines(first, reader), WireText(writer))


def _initialize_params_valid(params: dict[str, Any] | None) -> bool:
    if params is None or not isinstance(params.get("protocolVersion"), str):
        return False
    info = params.get("clientInfo")
    return (isinstance(params.get("capabilities"), dict) and isinstance(info, dict)
            and isinstance(info.get("name"), str) and isinstance(info.get("version"), str))


class StdioSession:
    """One client's session, opened by its ``initialize``: requests run as tasks, answered as they finish."""

    def __init__(self, service: CatalogService, writer: LineWriter) -> None:
        self.service = service
        self.writer = writer
        self.protocol_version = LATEST_HANDSHAKE_VERSION
        self.can_elicit = False
        self.log_level: str | None = None  # None: every level, until the client sets one
        self.listening = False  # told of catalog changes once it listed the tools or set a log level
        self._running: dict[str | int, asyncio.Task[None]] = {}
        self._asked: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next_question_id = 0
        self._handlers: dict[str, Handler] = {
            "ping": self._ping, "tools/list": self._list_tools, "tools/call": self._call_tool,
            "logging/setLevel": self._set_logging_level,
        }
        if service.prompts is not None:  # the prompts and completions capabilities only when there are recipes
            self._handlers.update({"prompts/list": self._list_prompts, "prompts/get": self._get_prompt,
                                   "completion/complete": self._complete})

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(encode(message))

    async def serve(self, opening: Message, reader: asyncio.StreamReader) -> None:
        self._receive(opening)
        self.service.change_hooks.append(self._announce)
        watch = asyncio.create_task(self.service.watch())
        try:
            while line := await next_line(reader):
                message, error = read_line(line.decode("utf-8", "replace"))
                if error is not None:
                    self.send(error)
                elif message is not None:
                    self._receive(message)
        finally:  # the client left: what it asked for is cancelled (a tool's processes are killed)
            self.service.change_hooks.remove(self._announce)
            if self._running:  # requests read with the end (a piped script): a moment to be answered first
                await asyncio.wait(list(self._running.values()), timeout=EOF_GRACE_SECONDS)
            unanswered = list(self._running)
            running = [watch, *self._running.values()]
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            for request_id in unanswered:  # as the SDK answers them, for a client still reading
                self.send(error_reply(request_id, CONNECTION_CLOSED, "Connection closed"))

    # ------------------------------------------------------------------ messages

    def _receive(self, message: Message) -> None:
        if message.method is None:
            self._answered(message)
        elif message.request_id is None:
            self._notified(message)
        elif message.method == "initialize":  # answered before the next line is read, as the SDK does
            self._reply(message.request_id, partial(self._initialize, message.params))
        else:
            self._running[message.request_id] = asyncio.create_task(self._answer(message))

    def _reply(self, request_id: str | int | None, answer: Callable[[], dict[str, Any]]) -> None:
        try:
            self.send({"jsonrpc": "2.0", "id": request_id, "result": answer()})
        except RequestError as exc:
            self.send(error_reply(request_id, exc.code, exc.message, exc.data))

    async def _answer(self, message: Message) -> None:
        request_id, method, params = message.request_id, message.method or "", message.params or {}
        try:
            meta = params.get("_meta")
            if isinstance(meta, dict) and MODERN_ENVELOPE_KEY in meta:
                raise RequestError(INVALID_REQUEST, ENVELOPE_REFUSED)
            handler = self._handlers.get(method)
            if handler is None:
                raise RequestError(METHOD_NOT_FOUND, "Method not found", method)
            result = await handler(params, request_id)
        except RequestError as exc:
            self.send(error_reply(request_id, exc.code, exc.message, exc.data))
        except asyncio.CancelledError:
            return  # a cancelled request is not answered
        except Exception as exc:  # a bug of ours: the client gets an error, the operator the reason
            self.service.report(f"error: {method} failed: {exc}")
            self.send(error_reply(request_id, INTERNAL_ERROR, str(exc)))
        else:
            self.send({"jsonrpc": "2.0", "id": request_id, "result": result})
        finally:
            if request_id is not None and self._running.get(request_id) is asyncio.current_task():
                del self._running[request_id]

    def _notified(self, message: Message) -> None:
        if message.method == "notifications/cancelled":
            request_id = _known_id(self._running, (message.params or {}).get("requestId"))
            task = self._running.pop(request_id, None) if request_id is not None else None
            if task is not None:  # forgotten now: a task cancelled before it started never reaches its finally
                task.cancel()

    def _answered(self, message: Message) -> None:
        asked_id = _known_id(self._asked, message.request_id)
        question = self._asked.get(asked_id) if isinstance(asked_id, int) else None
        if question is None or question.done():
            return
        if message.error is not None:
            question.set_exception(ClientError(str(message.error.get("message", "the client refused"))))
        else:
            question.set_result(message.result or {})

    async def _ask(self, method: str, params: dict[str, Any], wait: float | None = None) -> dict[str, Any]:
        """A request to the client; its result. ``TimeoutError`` when it is not answered within ``wait`` seconds."""
        question_id = self._next_question_id
        self._next_question_id += 1
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._asked[question_id] = answer
        self.send({"jsonrpc": "2.0", "id": question_id, "method": method, "params": params})
        try:
            return await asyncio.wait_for(answer, wait)
        except asyncio.CancelledError:
            if not answer.done() or answer.cancelled():  # unanswered (cancelling the task cancels the future it
                # awaited): the request that asked was cancelled, so its question is withdrawn, not left up
                self._withdraw(question_id, "the request that asked it was cancelled")
            raise
        except TimeoutError:
            self._withdraw(question_id, "nobody answered it in time")
            raise
        finally:
            self._asked.pop(question_id, None)

    def _withdraw(self, question_id: int, reason: str) -> None:
        self.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": question_id, "reason": reason}})

    # ------------------------------------------------------------------ requests

    def _initialize(self, params: dict[str, Any] | None) -> dict[str, Any]:
        if not _initialize_params_valid(params):
            raise invalid_params()
        assert params is not None
        requested = params["protocolVersion"]
        self.protocol_version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION
        self.can_elicit = params["capabilities"].get("elicitation") is not None
        capabilities: dict[str, Any] = {"logging": {}, "tools": {"listChanged": True}}
        if self.service.prompts is not None:
            capabilities.update({"prompts": {"listChanged": False}, "completions": {}})
        return {"protocolVersion": self.protocol_version, "capabilities": capabilities,
                "serverInfo": {"name": "toolrun", "version": __version__}, "instructions": INSTRUCTIONS}

    async def _ping(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        return {}

    async def _set_logging_level(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise invalid_params()
        self.log_level = level
        self.listening = True
        return {}

    async def _list_tools(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        _refuse_cursor(params)
        await self.service.refresh()
        self.listening = True
        return {"tools": self.service.listed_tools(self.service.default_caller)}

    async def _call_tool(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, (dict, type(None))):
            raise invalid_params()
        arguments = arguments if arguments is not None else {}
        caller = self.service.default_caller
        tool = await self.service.find_tool(name, caller, arguments)
        if tool is None:  # the protocol's error for an unknown tool
            raise RequestError(INVALID_PARAMS, f"Unknown tool: {name}")
        settled = self.service.settled_approval(tool, arguments)
        if settled is None:
            settled = (self._ask_approval, None) if self.can_elicit else (None, self.service.refusal(tool))
        approver, early = settled
        token = _progress_token(params)
        progress = partial(self._progress, token) if token is not None else None
        return await self.service.call(caller, tool, arguments, approver, early, str(request_id), progress)

    async def _ask_approval(self, tool: Tool, arguments: dict[str, Any]) -> bool:
        question: dict[str, Any] = {"message": approval_question(tool, arguments), "requestedSchema": APPROVAL_SCHEMA}
        if self.protocol_version >= "2025-11-25":  # elicitation modes came with 2025-11-25
            question = {"mode": "form", **question}
        try:  # bounded (see APPROVAL_WAIT_SECONDS), as over the SDK: the question is withdrawn when the wait ends
            answer = await self._ask("elicitation/create", question, mapping.APPROVAL_WAIT_SECONDS)
        except TimeoutError:
            raise mapping.approval_unanswered() from None
        content = answer.get("content")
        return approval_given(str(answer.get("action")), content if isinstance(content, dict) else None)

    async def _progress(self, token: str | int, elapsed: float, message: str) -> None:
        self.send({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": elapsed, "message": message}})

    async def _announce(self) -> None:
        if not self.listening:
            return
        self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        if logs_at(self.log_level, "error"):
            for problem in self.service.live.problems_for(self.service.default_caller.tools):
                self.send({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "error", "logger": "toolrun", "data": str(problem)}})

    # ------------------------------------------------------------------ recipes as prompts

    async def _list_prompts(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        _refuse_cursor(params)
        return {"prompts": await self.service.list_prompts()}

    async def _get_prompt(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or _strings(arguments)):
            raise invalid_params()
        try:
            return await self.service.get_prompt(name, arguments)
        except PromptError as exc:
            raise RequestError(INVALID_PARAMS, str(exc)) from None

    async def _complete(self, params: dict[str, Any], request_id: Any) -> dict[str, Any]:
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict) or not _strings(argument) \
                or not {"name", "value"} <= set(argument):
            raise invalid_params()
        kind = ref.get("type")
        if not (kind == "ref/prompt" and isinstance(ref.get("name"), str)
                or kind == "ref/resource" and isinstance(ref.get("uri"), str)):
            raise invalid_params()
        values = self.service.complete_prompt(ref["name"], argument["name"], argument["value"]) \
            if kind == "ref/prompt" else []
        return completion_result(values)


def _refuse_cursor(params: dict[str, Any]) -> None:
    # Every list is one page: a cursor can only be one this server never gave out.
    cursor = params.get("cursor")
    if cursor is not None:
        raise RequestError(INVALID_PARAMS, INVALID_CURSOR) if isinstance(cursor, str) else invalid_params()


def _progress_token(params: dict[str, Any]) -> str | int | None:
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


def _strings(value: Any) -> bool:
    """Whether ``value`` maps strings to strings (prompt arguments, a completion's argument)."""
    return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())


def _known_id(known: Mapping[Any, Any], given: Any) -> str | int | None:
    """The key of ``known`` (requests running, questions asked) that the id ``given`` names: 7 and "7" are
    one id, as the SDKs treat them; None when it names none."""
    if isinstance(given, bool) or not isinstance(given, (str, int)):
        return None
    if given in known:
        return given
    if isinstance(given, int):
        return str(given) if str(given) in known else None
    return int(given) if given.isdecimal() and int(given) in known else None
