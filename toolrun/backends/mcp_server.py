"""The mcp_server backend: tools that live in an existing MCP server, reached over stdio or HTTP.

A toolset file names the server (``mcp_server: {command | url, env, headers, cwd, timeout}``);
the catalog asks ``list_server_tools`` for its tools once at load, and each call goes to
the same connection. Connections are kept by a ``ServerHub`` — one event loop in a daemon
thread that owns every client session — so one connection serves every call of a run (and
of every run of the process), whatever event loop the caller runs in. A server that dies
mid-run turns the calls in flight into error results; the next call starts it again, once.

``${env:NAME}`` in ``env`` and ``headers`` is read from the process environment when the
connection opens — a server is shared by every run of the process, so no run's own
``environ`` ever reaches it — and every run that calls the server redacts those values.
``python`` as the command is the interpreter running toolrun, so a server written with the
SDK toolrun depends on runs wherever toolrun runs.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrun.backends.argument_text import lone_surrogate_problem
from toolrun.backends.base import Backend, BackendOutput, CallContext, ConfigProblem
from toolrun.backends.http_errors import status_line
from toolrun.backends.mcp_errors import describe, innermost, validation_summary
from toolrun.backends.mcp_server_config import (
    DEFAULT_CONNECT_TIMEOUT_SECONDS,
    McpServerConfig,
    mcp_server_config,
    parse_mcp_server_config,
)
from toolrun.backends.mcp_tool_list import RejectedTool, list_every_tool
from toolrun.backends.mcp_transport_log import (
    CURRENT_CONNECTION,
    TransportEnded,
    first_line,
    transport_ended_text,
    unless_transport_ends,
)
from toolrun.backends.tool_list_changes import note_tools_changed
from toolrun.core.content import BLOCK_TYPES, capped_blocks
from toolrun.core.errors import Problem
from toolrun.core.secrets import ENV_REFERENCE, Redactor, read_secret, register_secret
from toolrun.core.tool import Tool

STDERR_TAIL_LINES = 15
MAX_RESTARTS = 1


class McpServerUnavailable(Exception):
    """The server could not be started or did not answer; ``stderr_tail`` is what it printed last."""

    def __init__(self, message: str, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.stderr_tail = stderr_tail

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message}; its stderr ends with:\n{self.stderr_tail}" if self.stderr_tail else message


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one MCP server; equal specs share one connection."""

    command: tuple[str, ...] = ()
    url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS

    @property
    def label(self) -> str:
        return self.url if self.url else " ".join(self.command)


def server_spec(config: Mapping[str, Any] | McpServerConfig, base_dir: Path) -> ServerSpec:
    """The server of an ``mcp_server`` config as a ``ServerSpec``; relative paths start at ``base_dir``."""
    typed = config if isinstance(config, McpServerConfig) else mcp_server_config(config)
    folder = (base_dir / typed.cwd) if typed.cwd is not None else base_dir
    return ServerSpec(command=typed.command, url=typed.url, env=typed.env, headers=typed.headers,
                      cwd=str(folder.resolve()) if not typed.url else None, timeout=typed.timeout)


@dataclass(frozen=True)
class RemoteTool:
    """One tool as the server lists it (the protocol's fields, our names)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    annotations: dict[str, Any] = field(default_factory=dict)  # the protocol's hint names
    problem: str = ""  # why the protocol's types reject the server's entry of it (one line); "" when usable


def _kept(value: str, resolved: list[str]) -> str:
    resolved.append(value)
    return value


def _tail(path: Path, secrets: tuple[str, ...] = ()) -> str:
    """The last lines the server wrote to stderr, without the secrets it was given (it may print them)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return Redactor(secrets).redact("\n".join(lines[-STDERR_TAIL_LINES:]))


def is_legacy_sse_url(url: str) -> bool:
    """A url of the HTTP+SSE transport of protocol 2024-11-05 (``…/sse``), not streamable HTTP."""
    return url.split("?", 1)[0].rstrip("/").endswith("/sse")


def _refusal_hint(refusal: str) -> str:
    if refusal.startswith("HTTP 401"):
        return " — check the token in headers"
    if refusal.startswith(("HTTP 404", "HTTP 405")):
        return _NOT_AN_ENDPOINT
    return ""


_NOT_AN_ENDPOINT = " — is the url the server's MCP endpoint? a legacy HTTP+SSE server's url ends in /sse"
_PARSE_ERROR = -32700  # JSON-RPC's code, which the SDK's HTTP client gives an answer that is no JSON-RPC message


def _restart(connection: _Connection) -> str:
    return "the next call starts it again" if connection.starts <= MAX_RESTARTS else "it is not restarted again"


class _Connection:
    """One client session to one server, held open by a task of the hub's loop."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.client: Any = None
        self.ready = asyncio.Event()
        self.closing = asyncio.Event()
        self.failure: BaseException | None = None
        self.finished = False
        self.starts = 0
        descriptor, name = tempfile.mkstemp(prefix="toolrun-mcp-", suffix=".stderr")
        self.stderr_file = os.fdopen(descriptor, "w+", encoding="utf-8")  # the server's stderr, for its tail
        self.stderr_path = Path(name)
        self.secrets: tuple[str, ...] = ()  # the ${env:...} values the server was given: every caller redacts them
        self.http_refusal: str | None = None  # "HTTP 401 Unauthorized": the SDK's error does not say (url servers)
        self.unreadable: str | None = None  # the last message of the server that could not be read, in one line
        self.transport_error: str | None = None  # the first failure the SDK's transport logged (a refused POST), in one line
        self.transport_ending: str | None = None  # the record that ended a legacy SSE session's sending or reading
        self.legacy_sse = bool(spec.url and is_legacy_sse_url(spec.url))  # protocol 2024-11-05: GET /sse, POST messages
        self.listed = False  # whether this session listed the tools (it knows each one's output schema)
        self.transport_ended = asyncio.Event()  # the SDK's legacy SSE client stopped sending or reading
        self.learning: asyncio.Future[None] | None = None  # the listing the first calls of a session wait for together

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.finished

    def transport(self) -> Any:
        """The SDK transport, its secrets read from the process environment (the server outlives any run)."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        spec = self.spec
        resolved: list[str] = []

        def expand(text: str) -> str:
            return ENV_REFERENCE.sub(lambda match: _kept(read_secret(match.group(1)), resolved), text)

        try:
            return self._transport(spec, expand, stdio_client, StdioServerParameters)
        finally:
            self.secrets = tuple(resolved)

    def _transport(self, spec: ServerSpec, expand: Any, stdio_client: Any, parameters_class: Any) -> Any:
        if spec.url:
            from toolrun.backends.mcp_http import http_transport

            headers = {name: expand(value) for name, value in spec.headers}
            return http_transport(spec.url, headers, spec.timeout, [self._note_refusal], legacy_sse=self.legacy_sse)
        command = [sys.executable if spec.command[0] in ("python", "python3") else spec.command[0], *spec.command[1:]]
        env = {name: expand(value) for name, value in spec.env}
        parameters = parameters_class(command=command[0], args=command[1:], env=env, cwd=spec.cwd)
        return stdio_client(parameters, errlog=self.stderr_file)

    async def hold(self) -> None:
        """Open the session, serve calls until ``closing`` is set or the server goes away."""
        self.starts += 1
        self.finished = False
        self.http_refusal = None
        self.transport_error = self.transport_ending = None
        CURRENT_CONNECTION.set(self)  # this task's context, and so the SDK's tasks it starts: their log records are ours
        self.listed, self.learning, self.transport_ended = False, None, asyncio.Event()
        try:
            try:
                await self._serve()
            except Exception:
                if not self._answered_like_legacy_sse():
                    raise
                self.legacy_sse, refusal = True, self.http_refusal  # the spec's fallback: try the 2024-11-05 transport
                try:
                    await self._serve()
                except Exception:
                    self.legacy_sse, self.http_refusal = False, refusal
                    raise
        except BaseException as exc:  # noqa: BLE001 - kept for the callers; this task just ends
            self.failure = exc
        finally:
            self.finished = True
            self.client = None
            self.ready.set()

    async def _serve(self) -> None:
        """One session: ``initialize`` first (never ``server/discover``), toolrun named as the client."""
        from importlib.metadata import PackageNotFoundError, version

        from mcp import Client
        from mcp_types import Implementation

        try:
            identity = Implementation(name="toolrun", version=version("toolrun"))
        except PackageNotFoundError:  # run from a source tree that was never installed
            identity = Implementation(name="toolrun", version="unknown")
        async with Client(self.transport(), mode="legacy", client_info=identity, read_timeout_seconds=None,
                                message_handler=self._on_message, cache=None) as client:
            self.client = client
            self.ready.set()
            await self.closing.wait()

    def _answered_like_legacy_sse(self) -> bool:
        # A streamable-HTTP POST that a 2024-11-05 server does not route: 404 or 405 (400 from some).
        return (not self.legacy_sse and self.client is None and self.http_refusal is not None
                and self.http_refusal.split()[1] in ("400", "404", "405"))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a line the SDK could not read as a message: the request it answers waits
            self.unreadable = first_line(Redactor(self.secrets).redact(validation_summary(message) or describe(message)))
        elif getattr(message, "method", None) == "notifications/tools/list_changed":
            _tools_changed(self.spec)

    def failure_note(self) -> str:
        """After a timeout, why nothing came when the SDK said: ``; a message from it could not be read (...)``,
        or the transport's failure (``; Error in post_writer: ConnectError: ...``); else ""."""
        if self.unreadable:
            return f"; a message from it could not be read ({self.unreadable})"
        return f"; {self.transport_error}" if self.transport_error else ""

    async def closed(self, timeout: float = 5.0) -> None:
        """Let the holding task notice the end of the session and finish."""
        self.closing.set()
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.finished and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        self.closing = asyncio.Event()

    def stderr_tail(self) -> str:
        """The end of the server's stderr, its secrets redacted: a load problem is shown with no run to redact it."""
        return _tail(self.stderr_path, self.secrets)

    async def _note_refusal(self, response: Any) -> None:
        if response.status_code >= 400:
            self.http_refusal = status_line(response)

    def unavailable(self, doing: str) -> McpServerUnavailable:
        failure = innermost(self.failure) if self.failure is not None else None
        reason = describe(failure) if failure is not None else "the connection closed"
        if self.http_refusal is not None:
            reason += f" ({self.http_refusal}{_refusal_hint(self.http_refusal)})"
        elif self.spec.url and getattr(failure, "code", None) == _PARSE_ERROR:  # it answered, but not in JSON-RPC
            reason += _NOT_AN_ENDPOINT
        reason = Redactor(self.secrets).redact(reason)
        return McpServerUnavailable(f"the MCP server {self.spec.label} {doing}: {reason}", self.stderr_tail())


class ServerHub:
    """Every MCP client connection of this process, on one event loop in a daemon thread."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._connections: dict[ServerSpec, _Connection] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="toolrun-mcp-clients", daemon=True).start()
                self._loop = loop
                atexit.register(self.close)
            return self._loop

    def submit(self, coroutine: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._running_loop())

    async def _connected(self, spec: ServerSpec) -> _Connection:
        """The live connection for ``spec``: started if new, restarted once if it died."""
        connection = self._connections.get(spec)
        if connection is not None and connection.alive:
            return connection
        if connection is None:
            connection = self._connections[spec] = _Connection(spec)
        elif connection.starts > MAX_RESTARTS:
            raise connection.unavailable("stopped and was already restarted once")
        elif not connection.finished:  # another call is starting it right now
            await connection.ready.wait()
            if connection.alive:
                return connection
            raise connection.unavailable("did not start")
        connection.ready.clear()
        connection.failure = None
        await asyncio.to_thread(_import_sdk)  # seconds of CPU on a loaded machine: not the server's to answer for
        task = asyncio.get_running_loop().create_task(connection.hold())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            async with asyncio.timeout(spec.timeout):
                await connection.ready.wait()
        except TimeoutError:
            connection.closing.set()
            raise McpServerUnavailable(f"the MCP server {spec.label} did not answer within {spec.timeout:g}s"
                                       + connection.failure_note(), connection.stderr_tail()) from None
        if not connection.alive:
            raise connection.unavailable("did not start")
        return connection

    async def _list(self, spec: ServerSpec) -> list[RemoteTool]:
        connection = await self._connected(spec)
        CURRENT_CONNECTION.set(connection)  # the SDK's HTTP client reads a request's answer in the context of its sender
        _changed_since_listed.discard(spec)  # a change announced from now on is seen by the next listing
        try:
            async with asyncio.timeout(spec.timeout):
                listed = await list_every_tool(connection.client.session)
        except TimeoutError:
            raise McpServerUnavailable(f"the MCP server {spec.label} did not list its tools within {spec.timeout:g}s"
                                       + connection.failure_note(), connection.stderr_tail()) from None
        except Exception as exc:
            connection.failure = exc
            raise connection.unavailable("failed to list its tools") from None
        connection.listed = True
        redact = Redactor(connection.secrets).redact
        return [RemoteTool(entry.name, "", {}, problem=redact(entry.reason)) if isinstance(entry, RejectedTool)
                else _remote_tool(entry) for entry in listed.entries]

    async def _learn_tools(self, connection: _Connection) -> None:
        """The tools listed once on a session before its first call (its tools may come from the cache): the SDK
        checks a result against its tool's output schema, and a session that does not know the tool lists the
        server whole with the SDK's ``list_tools``, which one tool the protocol's types reject fails."""
        try:
            async with asyncio.timeout(connection.spec.timeout):
                await list_every_tool(connection.client.session)
            connection.listed = True
        except Exception:  # noqa: BLE001 - the call says what is wrong, if it is wrong for the call too
            pass

    async def _call(self, spec: ServerSpec, name: str, arguments: dict[str, Any]) -> BackendOutput:
        from mcp_types import CONNECTION_CLOSED  # the SDK's code for a session whose transport went away

        try:
            connection = await self._connected(spec)
        except McpServerUnavailable as exc:
            return BackendOutput(str(exc), True)
        CURRENT_CONNECTION.set(connection)  # the SDK's HTTP client reads a request's answer in the context of its sender
        try:
            if not connection.listed:
                # Calls that come together on a new session wait for one listing, not one each; a listing
                # that failed is tried again by the next call.
                if connection.learning is None or connection.learning.done():
                    connection.learning = asyncio.ensure_future(self._learn_tools(connection))
                await asyncio.shield(connection.learning)  # a cancelled call leaves the others' listing running
            result = await unless_transport_ends(connection, connection.client.call_tool(name, arguments))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, TransportEnded):
                await connection.closed()  # the next call starts a new session (once)
                return BackendOutput(f"the MCP server {spec.label} {transport_ended_text(connection.transport_ending)}"
                                     f" ({_restart(connection)}); {connection.transport_ending}", True)
            if getattr(exc, "code", None) == CONNECTION_CLOSED or connection.finished:
                await connection.closed()  # the next call starts a new one (once)
                tail = connection.stderr_tail()
                return BackendOutput(f"the MCP server {spec.label} stopped during the call ({_restart(connection)})"
                                     + (f"; its stderr ends with:\n{tail}" if tail else ""), True)
            unreadable = validation_summary(exc)
            what = (f"answered the call with a result toolrun cannot read: {unreadable}" if unreadable is not None
                    else f"refused the call: {describe(exc)}")
            return BackendOutput(Redactor(connection.secrets).redact(f"the MCP server {spec.label} {what}"), True)
        return result_output(result)

    def list_tools(self, spec: ServerSpec) -> list[RemoteTool]:
        """The server's tools (blocking; any thread, any loop). ``McpServerUnavailable`` when it cannot answer."""
        return self.submit(self._list(spec)).result()

    async def call(self, spec: ServerSpec, name: str, arguments: dict[str, Any]) -> BackendOutput:
        """Call ``name`` on the server from any event loop; cancelling the caller cancels the request."""
        return await asyncio.wrap_future(self.submit(self._call(spec, name, arguments)))

    def secrets_of(self, spec: ServerSpec) -> tuple[str, ...]:
        """The secret values the server of ``spec`` was started with (none before it starts)."""
        connection = self._connections.get(spec)
        return connection.secrets if connection is not None else ()

    def forget_stopped(self) -> None:
        """Forget the servers that stopped (or never started): the next use starts each afresh, with a new
        restart allowance. For a long-running ``toolrun mcp`` whose tools directory changed — the user may
        have fixed what made a server fail."""
        if self._loop is None:
            return

        async def forget() -> None:
            for spec, connection in list(self._connections.items()):
                if connection.finished:  # neither serving nor being started by a call right now
                    self._forget(spec)

        self.submit(forget()).result()

    def close_where(self, matches: Callable[[ServerSpec], bool], timeout: float = 5.0) -> None:
        """Close and forget the connections whose spec ``matches`` — for a server about to go away: its
        session ends now, cleanly, rather than holding the server's shutdown open and failing at exit.
        The next use of one starts it afresh."""
        if self._loop is None:
            return

        async def close_matching() -> None:
            for spec, connection in list(self._connections.items()):
                if matches(spec):
                    await connection.closed(timeout)
                    self._forget(spec)

        self.submit(close_matching()).result(timeout + 1)

    def close(self, timeout: float = 5.0) -> None:
        """Close every connection (servers started over stdio are stopped)."""
        loop = self._loop
        if loop is None or not loop.is_running():
            return

        async def close_all() -> None:
            for connection in self._connections.values():
                connection.closing.set()
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=timeout)

        try:
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(timeout + 1)
        except Exception:  # at exit, a server that will not stop is left to the OS
            pass
        for spec in list(self._connections):
            self._forget(spec)

    def _forget(self, spec: ServerSpec) -> None:
        """Drop the connection of ``spec`` and its stderr file: the next use starts the server afresh."""
        connection = self._connections.pop(spec)
        connection.stderr_file.close()
        connection.stderr_path.unlink(missing_ok=True)


def _import_sdk() -> None:
    """The MCP SDK's client, imported before a server's connect timeout starts (a process that has not
    imported it yet, such as ``toolrun mcp`` over stdio, would otherwise spend the timeout on it)."""
    import mcp.client.stdio  # noqa: F401 - imported for its side effect: it stays in sys.modules


def _remote_tool(tool: Any) -> RemoteTool:
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    return RemoteTool(tool.name, tool.description or "", dict(tool.input_schema or {"type": "object"}),
                      tool.title or annotations.get("title"), annotations)


def result_output(result: Any) -> BackendOutput:
    """A ``CallToolResult`` as a backend's output: its text blocks (else its structured content as JSON) as the
    text, its images, audio and resources as blocks, up to ``MAX_CONTENT_BYTES`` (a note names what is over)."""
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    others = [block.model_dump(by_alias=True, mode="json", exclude_none=True)
              for block in result.content if getattr(block, "type", None) in BLOCK_TYPES]
    if texts:
        text = "\n".join(texts)
    elif result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    else:
        text = ""
    blocks, notes = capped_blocks(others)
    if notes:
        text = "\n".join([text, *notes] if text else notes)
    return BackendOutput(text, bool(result.is_error), blocks)


_hub: ServerHub | None = None
_hub_lock = threading.Lock()
_changed_since_listed: set[ServerSpec] = set()  # servers whose list_changed came after their last tools/list


def _tools_changed(spec: ServerSpec) -> None:
    _changed_since_listed.add(spec)
    note_tools_changed()  # only the hub's loop thread counts


def tools_changed_since_listed(config: Mapping[str, Any], base_dir: Path) -> bool:
    """Whether this server said its tools changed after it last listed them: a cached listing of it is out of date."""
    return bool(_changed_since_listed) and server_spec(config, base_dir) in _changed_since_listed


def server_hub() -> ServerHub:
    """The process's one hub (created on first use)."""
    global _hub
    with _hub_lock:
        if _hub is None:
            _hub = ServerHub()
        return _hub


def forget_stopped_servers() -> None:
    """``ServerHub.forget_stopped`` on the process's hub, if it has one."""
    if _hub is not None:
        _hub.forget_stopped()


def list_server_tools(config: Mapping[str, Any], base_dir: Path) -> list[RemoteTool]:
    """The tools the server of an ``mcp_server`` mapping offers; ``McpServerUnavailable`` when it cannot."""
    return server_hub().list_tools(server_spec(config, base_dir))


class McpServerBackend(Backend):
    """Runs a tool by calling it on its MCP server (``McpServerConfig.tool`` is its name there)."""

    kind = "mcp_server"

    def parse(self, config: Mapping[str, Any]) -> McpServerConfig | list[ConfigProblem]:
        """The typed config (``McpServerConfig``), or what is wrong with ``config``."""
        return parse_mcp_server_config(config)

    def check(self, tool: Tool) -> list[Problem]:
        """``parse``'s problems, at the tool's line (its settings are the toolset's, not the tool's)."""
        parsed = tool.backend.parsed if tool.backend.parsed is not None else self.parse(tool.backend.config)
        if not isinstance(parsed, list):
            return []
        return [Problem(tool.source.file, tool.source.line, p.message, p.fix) for p in parsed]

    def override_hint(self, tool: Tool) -> str | None:
        """The server writes the tool's text: its fix is an override under ``tools:`` of the toolset file."""
        remote = tool.backend.config.get("tool", tool.name)
        return (f"the MCP server writes this tool's text: fix it with an override in this file, under `tools:` — "
                f"`- name: {remote}` and `description: ...`")

    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        if problem := lone_surrogate_problem(arguments, "the MCP server"):  # the SDK's stdio writer would fail on it
            return BackendOutput(problem, is_error=True)
        config: McpServerConfig = self.config_of(tool)
        spec = server_spec(config, tool.base_dir)
        hub = server_hub()
        try:
            return await hub.call(spec, config.tool, arguments)
        finally:
            # The server was given these (from the process environment, once): whatever it answers, this
            # call's run redacts them — and no run's own environ ever reaches a server other runs share.
            for value in hub.secrets_of(spec):
                register_secret(value)
