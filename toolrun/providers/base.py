"""What a provider adapter is, and how it finds its endpoint and credentials.

An adapter has two halves: *mapping* (pure functions from the neutral model to a request
body and from a response body or stream events back), unit-tested against recorded
fixtures; and *transport* (``toolrun.providers.transport``), the only part that talks HTTP.

Every wire detail stays in its adapter; shared code asks the ``Provider`` class instead of
switching on names: the shape of a tool (``tool_definition``, ``tools_value``), the headers
that carry credentials (``credential_headers``), and how to read a recorded request body
(``conversation_key``, ``tool_names``, ``conversation_item``). Every stream assembler is a
``StreamAssembler``.
"""

from __future__ import annotations

import ipaddress
import json
import os
from abc import ABC
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol
from urllib.parse import urlsplit

from toolrun.core.errors import Problem, ProviderError, UnreadableAnswer, UserError
from toolrun.core.messages import ModelRequest, ModelResponse, OutputMode, StreamEvent, ToolDefinition
from toolrun.core.secrets import redact, register_secret
from toolrun.core.text import excerpt
from toolrun.providers.streaming import EventSink, NotAnEventStream, emit, sse_json, stream_lines
from toolrun.providers.transport import HttpxTransport, Transport, WireRequest

# What reading valid JSON of the wrong shape raises in an adapter ({"choices": "x"}: a str has no .get).
_SHAPE_ERRORS = (AttributeError, TypeError, KeyError, IndexError, ValueError)
_JSON_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean",
               type(None): "null"}


class StreamAssembler(Protocol):
    """Builds one answer out of a stream's parsed events, whatever the wire format.

    ``feed`` takes one event (a parsed JSON object, with its SSE event name when it had one)
    and returns what to show now; ``finish`` returns the answer once the stream has ended,
    or raises ``ProviderError`` when it ended before the answer was whole.
    """

    def feed(self, event: dict[str, Any], name: str | None = None) -> list[StreamEvent]: ...

    def finish(self) -> ModelResponse: ...


@dataclass
class WireTool:
    """One tool in a provider's wire shape, and what converting its schema changed to get there."""

    definition: dict[str, Any]
    changes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WireItem:
    """What one object in a request body's conversation is: a tool call or a tool result, and whose."""

    kind: Literal["tool_call", "tool_result"]
    call_id: Any
    name: str | None = None  # None: the item does not say; the call with ``call_id`` may
    content: Any = None  # a tool result's text as sent (``--replay-tools`` plays it back)
    is_error: bool | None = None  # None: the format does not carry the flag (OpenAI Chat, Responses)


@dataclass
class ProviderConfig:
    """Where and how to reach a provider. ``api_key`` is registered as a secret for redaction."""

    base_url: str
    api_key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ProviderOverrides:
    """A recipe's ``provider:`` section: an internal gateway, another key variable, headers."""

    base_url: str | None = None
    api_key_env: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def is_loopback_url(url: str) -> bool:
    """A server on this machine (localhost, 127.0.0.0/8, ::1): a local model server needs no key."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Provider(ABC):
    """One wire format. Subclasses set the class attributes and the hooks ``complete`` calls
    (``build_request``, ``parse_answer``, ``stream_assembler``), or ``complete`` itself."""

    name: ClassVar[str]
    default_base_url: ClassVar[str]
    base_url_env: ClassVar[tuple[str, ...]] = ()
    api_key_env: ClassVar[tuple[str, ...]] = ()
    requires_api_key: ClassVar[bool] = True
    # Request headers that carry a credential or name the account (lower case): never recorded.
    credential_headers: ClassVar[frozenset[str]] = frozenset()
    # Query parameters that carry a credential (lower case): never recorded.
    credential_query_keys: ClassVar[frozenset[str]] = frozenset()
    # The key of a request body that holds the conversation ("messages", "input", ...).
    conversation_key: ClassVar[str | None] = None
    # How this format can ask for a structured final answer (``output.mode``); the first is the default.
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("json",)
    # Context windows in tokens by model-name prefix (the longest prefix wins); overridden by
    # settings.context.max_input_tokens. A model not in the table has no known window.
    context_windows: ClassVar[dict[str, int]] = {}
    # Characters of non-CJK text per token in this format's models' tokenizers, for estimates.
    chars_per_token: ClassVar[float] = 4.0
    # The most tools one request may define (None: no documented limit).
    max_tools: ClassVar[int | None] = None

    def __init__(self, model: str, config: ProviderConfig, transport: Transport | None = None):
        self.model = model
        self.config = config
        self.transport = transport or HttpxTransport()
        register_secret(config.api_key)  # a key given directly (tests, plugins) is redacted too

    @classmethod
    def resolve_config(
        cls, overrides: ProviderOverrides | None = None, environ: Mapping[str, str] | None = None
    ) -> ProviderConfig:
        """Endpoint and key from the recipe's overrides, else the provider's usual variables.

        Raises ``UserError`` naming the variable to set when a required key is missing; a
        server on this machine (``base_url`` on loopback: a local vLLM, llama.cpp, Ollama) needs none.
        """
        env = os.environ if environ is None else environ
        overrides = overrides or ProviderOverrides()
        base_url = overrides.base_url or next(
            (env[name] for name in cls.base_url_env if env.get(name)), cls.default_base_url
        )
        key_names = (overrides.api_key_env,) if overrides.api_key_env else cls.api_key_env
        api_key = next((env[name] for name in key_names if env.get(name)), None)
        if api_key is None and cls.requires_api_key and not is_loopback_url(base_url):
            raise UserError(
                Problem(None, None, f"no credentials for provider {cls.name!r}",
                        f"set {' or '.join(key_names)} in the environment")
            )
        register_secret(api_key)
        return ProviderConfig(base_url=base_url.rstrip("/"), api_key=api_key, headers=dict(overrides.headers))

    @classmethod
    def context_window(cls, model: str) -> int | None:
        """The model's context window in tokens from the adapter's table, or None when unknown."""
        matches = [prefix for prefix in cls.context_windows if model.startswith(prefix)]
        return cls.context_windows[max(matches, key=len)] if matches else None

    @classmethod
    def has_credentials(cls, overrides: ProviderOverrides | None = None, environ: Mapping[str, str] | None = None) -> bool:
        try:
            cls.resolve_config(overrides, environ)
        except UserError:
            return False
        return True

    async def complete(
        self, request: ModelRequest, *, stream: bool, on_event: EventSink | None = None
    ) -> ModelResponse:
        """Send one request and return the assembled answer (streamed or not).

        The adapter's hooks build the request (``build_request``) and read the answer
        (``parse_answer``, ``stream_assembler``); an answer they cannot read is an
        ``UnreadableAnswer``, any other exception an adapter's bug.
        """
        wire = self.build_request(request, stream=stream)
        if not stream:
            body = (await self.transport.send(wire)).body
            with self.reading_answer():
                return self.final_answer(request, self.parse_answer(self.object_body(body)))
        try:
            response = await self._streamed(wire, on_event)
        except NotAnEventStream as exc:
            whole = self.answer_instead_of_stream(exc.text)
            if whole is None:
                raise
            with self.reading_answer():
                response = self.parse_answer(whole)
        return self.final_answer(request, response)

    async def _streamed(self, wire: WireRequest, on_event: EventSink | None) -> ModelResponse:
        assembler = self.stream_assembler()
        async with stream_lines(self.transport, wire) as lines:
            async for name, event in self.stream_events(lines):
                with self.reading_answer():
                    shown = assembler.feed(event, name)
                emit(shown, on_event)  # the caller's sink: its failure is no fault of the answer
        with self.reading_answer():
            return assembler.finish()

    @contextmanager
    def reading_answer(self) -> Iterator[None]:
        """Around parsing only: valid JSON of the wrong shape becomes an ``UnreadableAnswer``."""
        try:
            yield
        except ProviderError:
            raise
        except _SHAPE_ERRORS as exc:
            raise UnreadableAnswer(self.name, redact(f"{type(exc).__name__}: {exc}")) from exc

    def object_body(self, body: Any) -> dict[str, Any]:
        """A whole answer's body, which every format sends as a JSON object."""
        if not isinstance(body, dict):
            kind = _JSON_KINDS.get(type(body), type(body).__name__)
            shown = excerpt(json.dumps(body, ensure_ascii=False))
            raise UnreadableAnswer(self.name, redact(f"the body is {kind}, not a JSON object: {shown}"))
        return body

    # ------------------------------------------------ the adapter's hooks, for ``complete``

    def build_request(self, request: ModelRequest, *, stream: bool) -> WireRequest:
        """The HTTP request for ``request``: endpoint, headers and JSON body."""
        raise NotImplementedError(f"provider {self.name!r} does not say how it builds a request")

    def parse_answer(self, body: dict[str, Any]) -> ModelResponse:
        """A whole (non-streamed) answer's JSON object as the neutral answer."""
        raise NotImplementedError(f"provider {self.name!r} does not say how it reads an answer")

    def stream_assembler(self) -> StreamAssembler:
        """A new assembler for one streamed answer."""
        raise NotImplementedError(f"provider {self.name!r} does not say how it reads a stream")

    def final_answer(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        """The answer as the runner should see it (a forced final tool's call becomes the answer's text)."""
        return response

    @classmethod
    def output_mode_for(cls, model: str) -> OutputMode:
        """How this format asks ``model`` for a structured answer when the author does not say."""
        return cls.output_modes[0]

    def stream_events(self, lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, dict[str, Any]]]:
        """(event name, parsed JSON object) of a streamed answer: server-sent events unless the format differs."""
        return sse_json(lines)

    def answer_instead_of_stream(self, text: str) -> dict[str, Any] | None:
        """A whole answer to use when a streaming request got one plain body (``text``); None: report it."""
        return None

    async def aclose(self) -> None:
        await self.transport.aclose()

    # ------------------------------------------------ the wire format, for shared code to ask

    @classmethod
    def tool_definition(cls, definition: ToolDefinition, *, strict: bool = False) -> WireTool:
        """``definition`` as one entry of this format's ``tools`` (what ``complete`` sends).

        ``strict`` asks for strict-mode schemas where the format has them; the ``changes``
        say what a schema conversion changed. A format without tools raises NotImplementedError.
        """
        raise NotImplementedError(f"provider {cls.name!r} does not say how it sends a tool")

    @classmethod
    def tools_value(cls, entries: list[dict[str, Any]]) -> Any:
        """The whole ``tools`` value of a request made of ``tool_definition`` entries."""
        return entries

    @classmethod
    def tool_names(cls, entry: Any) -> list[str] | None:
        """The tool names one entry of a request's ``tools`` declares; None when it is not this format's."""
        return None

    @classmethod
    def conversation_item(cls, item: dict[str, Any]) -> WireItem | None:
        """What an object of a request's conversation is, when it is a tool call or a tool result."""
        return None
