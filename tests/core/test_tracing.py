"""Traces (toolrun.core.tracing and its OpenTelemetry side): spans of runs, model requests and tool calls.

The spans go to the SDK's in-memory exporter; the replayed recipe is the real
recipes/inventory.yaml through the real OpenAI adapter, its tool the real python function.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import SpanKind, StatusCode

import toolrun
from tests.backend_helpers import make_tool
from tests.cli.test_cli_recipe import INVENTORY
from tests.loopback import Reply
from toolrun.backends.base import CallContext
from toolrun.core import tracing
from toolrun.core.otel_tracing import OtelTracer, sdk_tracer_provider
from toolrun.core.secrets import Redactor, redacting
from toolrun.loop.execution import execute_call
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.server import CatalogServer

OWN_TRACEPARENT = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


class Spans:
    """The finished spans of one test, and the tracer that made them."""

    def __init__(self, capture_content: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer = OtelTracer(sdk_tracer_provider(SimpleSpanProcessor(self.exporter)), capture_content=capture_content)

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.all() if span.name.startswith(prefix)]


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorded = Spans()
    tracing.use_tracer(recorded.tracer)
    yield recorded
    tracing.use_tracer(None)


@pytest.fixture
def spans_with_content() -> Iterator[Spans]:
    recorded = Spans(capture_content=True)
    tracing.use_tracer(recorded.tracer)
    yield recorded
    tracing.use_tracer(None)


def test_a_replayed_recipe_is_one_invoke_agent_span_around_its_chat_and_execute_tool_spans(spans: Spans) -> None:
    result = toolrun.run(INVENTORY, mode="replay")
    assert not result.failed and "玫瑰" in (result.final or "")

    [run] = spans.named("invoke_agent")
    chats, tools = spans.named("chat "), spans.named("execute_tool ")
    assert run.name == "invoke_agent inventory" and run.parent is None
    assert run.attributes is not None and run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "inventory" and run.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert run.attributes["gen_ai.provider.name"] == "openai" and run.attributes["toolrun.run.mode"] == "replay"
    assert run.attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens > 0

    assert [chat.name for chat in chats] == ["chat gpt-4o-mini"] * 2
    first = chats[0]
    assert first.kind == SpanKind.CLIENT and first.parent is not None and first.parent.span_id == run.context.span_id
    assert first.attributes is not None and first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "openai" and first.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert first.attributes["gen_ai.usage.input_tokens"] == result.turns[0].usage.input_tokens > 0
    assert first.attributes["gen_ai.usage.output_tokens"] == result.turns[0].usage.output_tokens > 0
    assert first.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)

    assert sorted(span.name for span in tools) == ["execute_tool get_flower_inventory"] * 3
    assert {span.attributes["gen_ai.tool.call.id"] for span in tools if span.attributes} == \
        {call.id for call in result.tool_calls}
    assert all(span.parent is not None and span.parent.span_id == run.context.span_id for span in tools)
    assert all(span.attributes and span.attributes["gen_ai.tool.name"] == "get_flower_inventory" for span in tools)
    # without the conventions' switch, no arguments, results or messages leave the process
    assert not [key for span in spans.all() for key in (span.attributes or {})
                if key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.input.messages",
                           "gen_ai.output.messages", "gen_ai.system_instructions")]


def test_content_is_captured_only_when_asked_and_redacted_as_the_transcript_is(spans_with_content: Spans,
                                                                               tmp_path: Path) -> None:
    tool = make_tool("shell", {"argv": ["echo", "token={{ token }}"]}, folder=tmp_path, name="echo_token",
                     properties={"token": {"type": "string"}})

    async def call() -> None:
        with redacting(Redactor(["tok-SECRET-123"])):
            with tracing.tool_span("echo_token", "call_1", {"token": "tok-SECRET-123"}) as span:
                outcome = await execute_call(tool, {"token": "tok-SECRET-123"}, CallContext())
                span.finish(outcome.result, outcome.is_error)

    asyncio.run(call())
    [span] = spans_with_content.named("execute_tool")
    assert span.attributes is not None
    assert json.loads(str(span.attributes["gen_ai.tool.call.arguments"])) == {"token": "***"}
    assert "tok-SECRET-123" not in str(span.attributes["gen_ai.tool.call.result"])
    assert "***" in str(span.attributes["gen_ai.tool.call.result"])


def test_a_captured_chat_span_holds_the_messages_in_the_conventions_shape(spans_with_content: Spans) -> None:
    toolrun.run(INVENTORY, mode="replay")
    first = spans_with_content.named("chat ")[0].attributes
    assert first is not None
    assert json.loads(str(first["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "北京、上海和深圳的鲜花库存是多少?"}]}]
    assert json.loads(str(first["gen_ai.system_instructions"]))[0]["content"].startswith("You answer questions")
    assert [tool["name"] for tool in json.loads(str(first["gen_ai.tool.definitions"]))] == ["get_flower_inventory"]
    [output] = json.loads(str(first["gen_ai.output.messages"]))
    assert output["role"] == "assistant" and output["finish_reason"] == "tool_calls"
    assert [part["type"] for part in output["parts"]] == ["tool_call"] * 3
    assert {part["arguments"]["city"] for part in output["parts"]} == {"北京", "上海", "深圳"}


def test_a_failing_tool_call_marks_its_span_as_an_error(spans: Spans) -> None:
    with tracing.tool_span("broken", "call_9", {}) as span:
        span.finish("boom", True)
    [finished] = spans.named("execute_tool")
    assert finished.status.status_code == StatusCode.ERROR
    assert finished.attributes is not None and finished.attributes["error.type"] == "tool_error"


def test_an_exception_through_a_span_names_its_type(spans: Spans) -> None:
    with pytest.raises(ValueError), tracing.run_span("crashing"):
        raise ValueError("no")
    [finished] = spans.all()
    assert finished.attributes is not None and finished.attributes["error.type"] == "ValueError"
    assert finished.status.status_code == StatusCode.ERROR


def test_an_http_tool_carries_the_trace_context_of_its_call(spans: Spans, loopback: Any, tmp_path: Path) -> None:
    server = loopback(lambda request: Reply(body={"ok": True}))
    tool = make_tool("http", {"url": server.url + "/ping"}, folder=tmp_path, name="ping")
    own = make_tool("http", {"url": server.url + "/ping", "headers": {"Traceparent": OWN_TRACEPARENT}}, folder=tmp_path,
                    name="ping_own")

    async def call() -> None:
        for each in (tool, own):
            with tracing.tool_span(each.name, "call_1", {}):
                await execute_call(each, {}, CallContext())

    asyncio.run(call())
    first, second = server.requests
    span = spans.named("execute_tool ping")[0]
    version, trace_id, parent_id, _ = first.headers["traceparent"].split("-")
    assert (version, int(trace_id, 16), int(parent_id, 16)) == ("00", span.context.trace_id, span.context.span_id)
    assert second.headers["traceparent"] == OWN_TRACEPARENT  # a tool's own header wins


def test_an_mcp_tool_call_is_an_execute_tool_span(spans: Spans, tmp_path: Path) -> None:
    (tmp_path / "echo.py").write_text("def echo(text):\n    return text\n", encoding="utf-8")
    (tmp_path / "echo.yaml").write_text(textwrap.dedent("""
        name: echo
        description: >-
          Echoes its text argument back unchanged. Use it to check that the server answers; do not
          use it for anything else, it changes nothing.
        parameters:
          type: object
          properties:
            text: {type: string, description: The text to echo back.}
          required: [text]
        backend:
          python: echo.py:echo
    """), encoding="utf-8")
    server = CatalogServer(LiveCatalog(tmp_path), audit=AuditLog(io.StringIO()))
    sys.path.insert(0, str(tmp_path))

    async def main() -> None:
        with redacting(Redactor()):
            server.load()
            async with Client(server.server, mode="legacy") as client:
                answer = await client.call_tool("echo", {"text": "hi"})
                assert not answer.is_error

    try:
        anyio.run(main)
    finally:
        sys.path.remove(str(tmp_path))
    [span] = spans.named("execute_tool")
    assert span.name == "execute_tool echo" and span.attributes is not None
    assert span.attributes["gen_ai.tool.name"] == "echo" and span.attributes["gen_ai.tool.call.id"]
    # under `toolrun mcp` its parent is the MCP SDK's own "tools/call echo" span: tests/integration/test_traces.py


def test_the_attribute_names_are_the_conventions_own() -> None:
    for constant in ("OPERATION_NAME", "PROVIDER_NAME", "REQUEST_MODEL", "REQUEST_TEMPERATURE", "REQUEST_MAX_TOKENS",
                     "REQUEST_STREAM", "RESPONSE_MODEL", "RESPONSE_FINISH_REASONS", "USAGE_INPUT_TOKENS",
                     "USAGE_OUTPUT_TOKENS", "INPUT_MESSAGES", "OUTPUT_MESSAGES", "SYSTEM_INSTRUCTIONS", "TOOL_DEFINITIONS",
                     "TOOL_NAME", "TOOL_CALL_ID", "TOOL_TYPE", "TOOL_DESCRIPTION", "TOOL_CALL_ARGUMENTS",
                     "TOOL_CALL_RESULT", "AGENT_NAME", "WORKFLOW_NAME"):
        ours = {"OPERATION_NAME": "OPERATION", "RESPONSE_FINISH_REASONS": "FINISH_REASONS",
                "USAGE_INPUT_TOKENS": "INPUT_TOKENS", "USAGE_OUTPUT_TOKENS": "OUTPUT_TOKENS"}.get(constant, constant)
        assert getattr(tracing, ours) == getattr(gen_ai_attributes, f"GEN_AI_{constant}")
    operations = {value.value for value in gen_ai_attributes.GenAiOperationNameValues}
    assert {"chat", "execute_tool", "invoke_agent", "invoke_workflow"} <= operations


@pytest.mark.parametrize(("environ", "traced"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
])
def test_the_standard_environment_turns_tracing_on(environ: dict[str, str], traced: bool) -> None:
    assert tracing.tracing_requested(environ) is traced


def test_without_the_extra_an_endpoint_is_a_one_line_warning_and_no_tracing(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "toolrun.core.otel_tracing", None)  # as when the SDK is not installed
    with caplog.at_level(logging.WARNING):
        tracer = tracing.tracer_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracer.enabled is False
    assert [record.getMessage() for record in caplog.records] == [
        "an OTLP endpoint is set but the OpenTelemetry SDK is not installed, so nothing is traced: "
        "pip install 'toolrun[otel]'"]


def test_content_capture_follows_the_conventions_switch() -> None:
    assert tracing.capture_requested({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
    assert not tracing.capture_requested({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"})
    assert not tracing.capture_requested({})
