"""The OpenTelemetry side of ``toolrun.core.tracing``: imported only by a process asked to trace.

``otlp_tracer`` builds the SDK's tracer provider from the standard environment (the exporter
reads ``OTEL_EXPORTER_OTLP_*``, the resource ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``)
and makes it the process's global one, so the MCP SDK's own ``tools/call`` spans and its
``_meta`` trace context join toolrun's. The provider flushes its batch at exit.

A receiver that cannot be reached costs a run one line on stderr and at most ``EXPORT_TIMEOUT`` at
exit: ``ReportedExporter`` keeps the exporter's own log records (a retry notice per attempt) off
stderr and says once that sending fails, and once that it works again.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

from toolrun.core.credentials import without_login
from toolrun.core.text import terminal_safe
from toolrun.core.tracing import ERROR_TYPE, SCHEMA_URL, Attributes, Span, Tracer
from toolrun.core.tracing import SpanKind as KindName
from toolrun.core.version import VERSION

# Seconds one batch may take, retries included, unless OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT says otherwise:
# the SDK's 10 s held every exit whose receiver did not answer. docs/tracing.md names it.
EXPORT_TIMEOUT = 2.0
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
# The loggers the OTLP/HTTP exporter writes its retries and failures to (1.38 and later).
_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.exporter.otlp.common.http")
# What a failed export's log records say, as a short reason: their wording is the library's, these parts are not.
_REASONS = ((re.compile(r"code: (\d{3})"), "the receiver answered HTTP {}"),
            (re.compile(r"\[Errno -?\d+\] ([A-Za-z][A-Za-z ]*[A-Za-z])"), "{}"),
            (re.compile(r"\[SSL: \w+\] ([A-Za-z][A-Za-z ]*[A-Za-z])"), "{}"))

log = logging.getLogger(__name__)

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


class OtelSpan(Span):
    """An SDK span behind the seam's ``Span``."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def set(self, attributes: Attributes) -> None:
        self._span.set_attributes({key: value for key, value in attributes.items() if value is not None})

    def fail(self, error_type: str) -> None:
        self._span.set_attribute(ERROR_TYPE, error_type)
        self._span.set_status(Status(StatusCode.ERROR))


class OtelTracer(Tracer):
    """Spans through an OpenTelemetry tracer provider (the OTLP one, or a test's in-memory one)."""

    enabled = True

    def __init__(self, provider: trace.TracerProvider, *, capture_content: bool = False) -> None:
        self.provider = provider
        self.capture_content = capture_content
        self._tracer = provider.get_tracer("toolrun", VERSION, schema_url=SCHEMA_URL)

    @contextmanager
    def start(self, name: str, kind: KindName, attributes: Attributes) -> Iterator[Span]:
        with self._tracer.start_as_current_span(name, kind=_KINDS[kind], attributes=attributes) as span:
            try:
                yield OtelSpan(span)
            except BaseException as exc:  # the SDK records it and sets the status; the conventions want error.type too
                span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
                raise

    def propagation_headers(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier


class _ExportRecords(logging.Filter):
    """Drops the exporter's log records written during an export of toolrun's (a retry notice per attempt, its
    own error line, on stderr when nothing is configured) and keeps their text for that export, which says what
    went wrong. Another exporter of the process (a program embedding toolrun) logs as it would without toolrun."""

    def __init__(self) -> None:
        super().__init__()
        self._export = threading.local()  # the batch processor exports on its own thread

    @contextmanager
    def kept(self) -> Iterator[list[str]]:
        """The texts the exporter logs on this thread until the block ends."""
        messages: list[str] = []
        self._export.messages = messages
        try:
            yield messages
        finally:
            self._export.messages = None

    def filter(self, record: logging.LogRecord) -> bool:
        messages = getattr(self._export, "messages", None)
        if messages is None:
            return True
        messages.append(record.getMessage())
        return False


_EXPORT_RECORDS = _ExportRecords()
for _name in _EXPORTER_LOGGERS:
    logging.getLogger(_name).addFilter(_EXPORT_RECORDS)


class ReportedExporter(SpanExporter):
    """An exporter whose failures are one warning when sending starts failing and one when it works again,
    not the library's lines for every attempt of every batch. At exit, once sending has failed, the last
    batches are dropped at once rather than waited for."""

    def __init__(self, exporter: SpanExporter, endpoint: str, timeout: float) -> None:
        self._exporter = exporter
        self.endpoint = shown_endpoint(endpoint)
        self.timeout = timeout
        self.failing = False
        self.exiting = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.exiting and self.failing:
            return SpanExportResult.FAILURE
        started = time.monotonic()
        with _EXPORT_RECORDS.kept() as messages:
            try:
                result = self._exporter.export(spans)
            except Exception as exc:  # the batch processor would log it with its traceback
                result = SpanExportResult.FAILURE
                messages.append(str(exc))
        if result is SpanExportResult.SUCCESS:
            if self.failing:
                self.failing = False
                log.warning("traces reach %s again", self.endpoint)
        elif not self.failing:
            self.failing = True
            log.warning("traces could not be sent to %s: %s", self.endpoint,
                        failure_reason(messages, time.monotonic() - started, self.timeout))
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._exporter.force_flush(timeout_millis)


def failure_reason(messages: Sequence[str], seconds: float, timeout: float) -> str:
    """Why an export failed, in a few words of a fixed vocabulary (no header, no text of the receiver's)."""
    for pattern, wording in _REASONS:
        for message in messages:
            if found := pattern.search(message):
                return wording.format(found.group(1).lower())
    if seconds >= timeout * 0.9 or any("timed out" in message for message in messages):
        return f"no answer within {timeout:g} s (a slower receiver needs OTEL_EXPORTER_OTLP_TIMEOUT, in seconds)"
    return "the export failed"


def shown_endpoint(url: str) -> str:
    """The endpoint as a line may show it: no user or password, no query (a backend's key may be in either)."""
    try:
        parts = urlsplit(without_login(url))
    except ValueError:  # "http://[oops": the exporter will fail on it, the line need not repeat it
        return "the OTLP endpoint (not a URL)"
    return terminal_safe(parts._replace(query="", fragment="").geturl())


def export_timeout(environ: Mapping[str, str]) -> float:
    """Seconds one batch may take, retries included: ``OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT`` (seconds, as the
    Python SDK reads it), else ``EXPORT_TIMEOUT``."""
    for name in TIMEOUT_VARIABLES:
        if value := environ.get(name, "").strip():
            try:
                return float(value)
            except ValueError:
                log.warning("%s is not a number of seconds (%r), so a batch of traces gets %g s", name, value,
                            EXPORT_TIMEOUT)
                return EXPORT_TIMEOUT
    return EXPORT_TIMEOUT


def _traces_endpoint(environ: Mapping[str, str]) -> str:
    """The URL the exporter posts to, resolved as the SDK resolves it."""
    if endpoint := environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip():
        return endpoint
    return environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip().removesuffix("/") + "/v1/traces"


def sdk_tracer_provider(processor: SpanProcessor, *, shutdown_on_exit: bool = True) -> TracerProvider:
    """A provider named ``toolrun`` unless ``OTEL_SERVICE_NAME`` says otherwise, exporting through ``processor``."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource.create({SERVICE_NAME: "toolrun"}))
    provider = TracerProvider(resource=resource, shutdown_on_exit=shutdown_on_exit)
    provider.add_span_processor(processor)
    return provider


def _flush_at_exit(provider: TracerProvider, exporter: ReportedExporter) -> None:
    exporter.exiting = True
    provider.shutdown()


def otlp_tracer(*, capture_content: bool) -> OtelTracer:
    """The OTLP/HTTP exporter as the environment configures it, installed as the global provider."""
    timeout = export_timeout(os.environ)
    exporter = ReportedExporter(OTLPSpanExporter(timeout=timeout), _traces_endpoint(os.environ), timeout)
    provider = sdk_tracer_provider(BatchSpanProcessor(exporter), shutdown_on_exit=False)
    atexit.register(_flush_at_exit, provider, exporter)
    trace.set_tracer_provider(provider)
    return OtelTracer(provider, capture_content=capture_content)
