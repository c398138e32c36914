"""Traces of runs, model requests and tool calls: one seam, a no-op unless OpenTelemetry is asked for.

The call sites (a recipe run, a provider's ``complete``, the loop and the MCP server for tool
calls) open spans with ``run_span``, ``chat_span`` and ``tool_span`` and name nothing of
OpenTelemetry. With ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
set and the ``otel`` extra installed, the first span imports ``toolrun.core.otel_tracing`` and
every span follows the OpenTelemetry GenAI semantic conventions of ``SEMCONV_VERSION``; without
them nothing is imported and every span is one shared no-op.

Arguments, results and messages go into spans only with the conventions' own switch,
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, and are redacted like a transcript.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Literal
from urllib.parse import urlsplit

from toolrun.core.messages import Message, ModelRequest, ModelResponse, OpaquePart, TextPart, ToolCall, ToolResult
from toolrun.core.secrets import redact

SEMCONV_VERSION = "1.44.0"  # the GenAI conventions are still "development": pinned, and named in docs/tracing.md
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
INSTALL_HINT = "pip install 'toolrun[otel]'"

# The conventions' attribute names (tests/core/test_tracing.py checks them against opentelemetry-semantic-conventions).
OPERATION = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
AGENT_NAME = "gen_ai.agent.name"
WORKFLOW_NAME = "gen_ai.workflow.name"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

Attributes = dict[str, str | bool | int | float | Sequence[str]]
SpanKind = Literal["internal", "client"]


class Span:
    """What a call site may say about its open span; this base says it to nobody."""

    def set(self, attributes: Attributes) -> None:
        """Add attributes (a value of None is left out)."""

    def fail(self, error_type: str) -> None:
        """Mark the span as failed, ``error_type`` a low-cardinality name of what went wrong."""


class Tracer:
    """Opens spans. This base is the no-op every process has until tracing is turned on."""

    enabled = False
    capture_content = False

    @contextmanager
    def start(self, name: str, kind: SpanKind, attributes: Attributes) -> Iterator[Span]:
        yield _NO_SPAN

    def propagation_headers(self) -> dict[str, str]:
        """W3C trace-context headers (``traceparent``) of the current span for an outgoing request."""
        return {}


_NO_SPAN = Span()
_NO_TRACER = Tracer()
_tracer: Tracer | None = None  # process-wide like the SDK's own provider: chosen from the environment on first use


def active_tracer() -> Tracer:
    """The process's tracer: OpenTelemetry's when the environment asks for it and the extra is installed."""
    global _tracer
    if _tracer is None:
        _tracer = tracer_from_environment(os.environ)
    return _tracer


def use_tracer(tracer: Tracer | None) -> None:
    """Make ``tracer`` the process's (tests, embedding programs); None: choose again from the environment."""
    global _tracer
    _tracer = tracer


def tracing_requested(environ: Mapping[str, str]) -> bool:
    """An OTLP endpoint is set and the SDK is not switched off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def capture_requested(environ: Mapping[str, str]) -> bool:
    return environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


def tracer_from_environment(environ: Mapping[str, str]) -> Tracer:
    """The OpenTelemetry tracer when asked for and installed; else the no-op (a missing extra is logged once)."""
    if not tracing_requested(environ):
        return _NO_TRACER
    try:
        from toolrun.core.otel_tracing import otlp_tracer  # only a process asked to trace loads the SDK
    except ImportError:
        logging.getLogger(__name__).warning(
            "an OTLP endpoint is set but the OpenTelemetry SDK is not installed, so nothing is traced: %s", INSTALL_HINT)
        return _NO_TRACER
    return otlp_tracer(capture_content=capture_requested(environ))


# ---------------------------------------------------------------- the spans toolrun opens


class ToolSpan:
    """An ``execute_tool`` span: ``finish`` records the outcome."""

    def __init__(self, span: Span, capture_content: bool) -> None:
        self.span, self.capture_content = span, capture_content

    def finish(self, result: str, is_error: bool) -> None:
        if is_error:
            self.span.fail("tool_error")
        if self.capture_content:
            self.span.set({TOOL_CALL_RESULT: redact(result)})


class ChatSpan:
    """A ``chat`` span: ``record`` takes the answer's model, usage and stop reason."""

    def __init__(self, span: Span, capture_content: bool) -> None:
        self.span, self.capture_content = span, capture_content

    def record(self, response: ModelResponse) -> None:
        attributes: Attributes = {INPUT_TOKENS: response.usage.input_tokens, OUTPUT_TOKENS: response.usage.output_tokens,
                                  FINISH_REASONS: [response.stop_reason]}
        if response.model:
            attributes[RESPONSE_MODEL] = response.model
        if self.capture_content:
            output = {**_message_json(response.message), "finish_reason": response.stop_reason}
            attributes[OUTPUT_MESSAGES] = _json([output])
        self.span.set(attributes)


class RunSpan:
    """An ``invoke_agent`` span around one run: ``set`` adds what the run learns on its way."""

    def __init__(self, span: Span, recording: bool) -> None:
        self.span = span
        self.recording = recording  # False: tracing is off, and what ``set`` would say need not be worked out

    def set(self, attributes: Attributes) -> None:
        self.span.set(attributes)

    def fail(self, error_type: str) -> None:
        self.span.fail(error_type)


_NO_TOOL_SPAN = nullcontext(ToolSpan(_NO_SPAN, False))  # reusable: it holds nothing of any call


def tool_span(name: str, call_id: str | None, arguments: Any, *,
              description: str | None = None) -> AbstractContextManager[ToolSpan]:
    """Around one tool call: ``execute_tool {name}`` with the tool's name, type and the call's id."""
    tracer = active_tracer()
    if not tracer.enabled:  # no generator made and run per call when nothing is traced
        return _NO_TOOL_SPAN
    return _traced_tool_span(tracer, name, call_id, arguments, description)


@contextmanager
def _traced_tool_span(tracer: Tracer, name: str, call_id: str | None, arguments: Any,
                      description: str | None) -> Iterator[ToolSpan]:
    attributes: Attributes = {OPERATION: "execute_tool", TOOL_NAME: name, TOOL_TYPE: "function"}
    if call_id:
        attributes[TOOL_CALL_ID] = call_id
    if description:
        attributes[TOOL_DESCRIPTION] = description
    if tracer.capture_content:
        attributes[TOOL_CALL_ARGUMENTS] = _json(redact(arguments))
    with tracer.start(f"execute_tool {name}", "internal", attributes) as span:
        yield ToolSpan(span, tracer.capture_content)


@contextmanager
def chat_span(provider_name: str, request: ModelRequest, *, base_url: str | None, stream: bool) -> Iterator[ChatSpan]:
    """Around one model request: ``chat {model}`` with the provider, the model and the request's settings."""
    tracer = active_tracer()
    if not tracer.enabled:
        yield ChatSpan(_NO_SPAN, False)
        return
    attributes: Attributes = {OPERATION: "chat", PROVIDER_NAME: provider_name, REQUEST_MODEL: request.model,
                              REQUEST_STREAM: stream}
    attributes.update(_server_attributes(base_url))
    if request.settings.temperature is not None:
        attributes[REQUEST_TEMPERATURE] = request.settings.temperature
    if request.settings.max_tokens is not None:
        attributes[REQUEST_MAX_TOKENS] = request.settings.max_tokens
    if tracer.capture_content:
        attributes.update(_request_content(request))
    with tracer.start(f"chat {request.model}", "client", attributes) as span:
        yield ChatSpan(span, tracer.capture_content)


@contextmanager
def run_span(agent_name: str, *, operation: Literal["invoke_agent", "invoke_workflow"] = "invoke_agent",
             attributes: Attributes | None = None) -> Iterator[RunSpan]:
    """Around one run (``invoke_agent {recipe}``) or a batch of runs (``invoke_workflow {recipe}``)."""
    tracer = active_tracer()
    if not tracer.enabled:
        yield RunSpan(_NO_SPAN, False)
        return
    name_key = AGENT_NAME if operation == "invoke_agent" else WORKFLOW_NAME
    with tracer.start(f"{operation} {agent_name}", "internal",
                      {OPERATION: operation, name_key: agent_name, **(attributes or {})}) as span:
        yield RunSpan(span, True)


def propagation_headers() -> dict[str, str]:
    """``traceparent`` (and ``tracestate``) of the current span for an outgoing HTTP request; {} when not tracing."""
    tracer = active_tracer()
    return tracer.propagation_headers() if tracer.enabled else {}


# ---------------------------------------------------------------- content, in the conventions' JSON shapes


def _server_attributes(base_url: str | None) -> Attributes:
    parts = urlsplit(base_url or "")
    if not parts.hostname:
        return {}
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return {SERVER_ADDRESS: parts.hostname, SERVER_PORT: port}


def _request_content(request: ModelRequest) -> Attributes:
    attributes: Attributes = {INPUT_MESSAGES: _json([_message_json(message) for message in request.messages])}
    if request.system:
        attributes[SYSTEM_INSTRUCTIONS] = _json([{"type": "text", "content": redact(request.system)}])
    if request.tools:
        attributes[TOOL_DEFINITIONS] = _json([{"type": "function", "name": tool.name, "description": tool.description,
                                               "parameters": tool.parameters} for tool in request.tools])
    return attributes


def _message_json(message: Message) -> dict[str, Any]:
    """One message as the conventions' ``{role, parts}``; a provider's opaque blocks are left out."""
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "content": redact(part.text)})
        elif isinstance(part, ToolCall):
            arguments = part.arguments if part.arguments is not None else part.raw_arguments
            parts.append({"type": "tool_call", "id": part.id, "name": part.name, "arguments": redact(arguments)})
        elif isinstance(part, ToolResult):
            parts.append({"type": "tool_call_response", "id": part.call_id, "response": redact(part.content)})
        elif not isinstance(part, OpaquePart):
            parts.append({"type": type(part).__name__})
    return {"role": message.role, "parts": parts}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
