"""The OpenTelemetry side of ``toolrun.core.tracing``: imported only by a process asked to trace.

``otlp_tracer`` builds the SDK's tracer provider from the standard environment (the exporter
reads ``OTEL_EXPORTER_OTLP_*``, the resource ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``)
and makes it the process's global one, so the MCP SDK's own ``tools/call`` spans and its
``_meta`` trace context join toolrun's. The provider flushes its batch at exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from toolrun.core.tracing import ERROR_TYPE, SCHEMA_URL, Attributes, Span, Tracer
from toolrun.core.tracing import SpanKind as KindName
from toolrun.core.version import VERSION

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


def sdk_tracer_provider(processor: SpanProcessor) -> TracerProvider:
    """A provider named ``toolrun`` unless ``OTEL_SERVICE_NAME`` says otherwise, exporting through ``processor``."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource.create({SERVICE_NAME: "toolrun"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(processor)
    return provider


def otlp_tracer(*, capture_content: bool) -> OtelTracer:
    """The OTLP/HTTP exporter as the environment configures it, installed as the global provider."""
    provider = sdk_tracer_provider(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return OtelTracer(provider, capture_content=capture_content)
