"""An offline model for tests: it answers from a script instead of a network.

Like pydantic-ai's ``FunctionModel``: the loop, the tools and the transcript are real,
only the model is played by your script. Kept in the package so users can test their own
tools and recipes with it. From the command line, ``--model scripted:FILE`` plays a YAML
list of turns with it (scripted_file.py).

Example, with the real tools of a recipe (run from this repository's root)::

    import toolrun

    model = toolrun.ScriptedModel([
        toolrun.ScriptedModel.calls([("get_flower_inventory", {"city": "北京"}),
                                     ("get_flower_inventory", {"city": "上海"})]),
        toolrun.ScriptedModel.text("北京: 玫瑰 100; 上海: 百合 80"),
    ])
    result = toolrun.run("recipes/inventory.yaml", model=model)
    assert result.final.startswith("北京")
    assert result.tool_calls[1].result == "百合: 80, 康乃馨: 120"
    assert model.requests[1].messages[-1].role == "tool"   # what the model was sent

A script item is a ``ModelResponse``, a ``str`` (a plain text answer), an exception
instance (raised, e.g. a ``ProviderError`` to test a failing provider), or a function
``(ModelRequest) -> ModelResponse | str`` that looks at what it was sent. A whole model
can also be one function: ``ScriptedModel.from_function(fn)``.

A run under ``settings.context`` with the ``summarize`` strategy asks for summaries of what it
leaves out (``purpose="summary"``): the model answers those itself, with an excerpt of what it
was asked to condense, and keeps them in ``summary_requests`` — the script is for the run's turns.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, ClassVar

from toolrun.core.errors import ProviderError
from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, compact_json, loads_bounded
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    OutputMode,
    StopReason,
    TextDelta,
    TextPart,
    ToolCall,
    Usage,
)
from toolrun.core.text import excerpt
from toolrun.providers.base import EventSink, Provider, ProviderConfig
from toolrun.providers.transport import Transport, WireRequest, WireResponse

ModelFunction = Callable[[ModelRequest], ModelResponse | str]
ScriptItem = ModelResponse | str | BaseException | ModelFunction
# (name, arguments) or (name, arguments, provider id); arguments as a dict or a raw JSON string
CallSpec = tuple[str, Any] | tuple[str, Any, str | None]
_SUMMARY_CHARS = 300  # of a scripted summary


class ScriptExhausted(ProviderError):
    """The model was asked once more than the script has answers for."""


class _OfflineTransport(Transport):
    """A transport that refuses to send: the scripted model never touches a network."""

    async def send(self, request: WireRequest) -> WireResponse:
        raise ProviderError("ScriptedModel is offline: it never sends HTTP requests")

    def stream(self, request: WireRequest) -> AsyncIterator[str]:
        raise ProviderError("ScriptedModel is offline: it never sends HTTP requests")


class ScriptedModel(Provider):
    """A Provider that plays a script; ``requests`` holds a copy of every request of a turn it got."""

    name = "scripted"
    default_base_url = "scripted:"
    requires_api_key = False
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("native", "tool", "json")  # a script answers any way

    def __init__(self, responses: Iterable[ScriptItem] = (), *, model: str = "scripted") -> None:
        super().__init__(model, ProviderConfig(base_url=self.default_base_url), transport=_OfflineTransport())
        self.script: list[ScriptItem] = list(responses)
        self.requests: list[ModelRequest] = []
        self.summary_requests: list[ModelRequest] = []  # the context window's, answered without the script
        self._function: ModelFunction | None = None

    @classmethod
    def from_function(cls, function: ModelFunction, *, model: str = "scripted") -> ScriptedModel:
        """A model that answers every request with ``function(request)``."""
        scripted = cls(model=model)
        scripted._function = function
        return scripted

    @staticmethod
    def text(text: str, *, stop_reason: StopReason = "stop", usage: Usage | None = None) -> ModelResponse:
        """A plain text answer."""
        return ModelResponse(Message("assistant", [TextPart(text)]), stop_reason, usage or Usage(requests=1))

    @staticmethod
    def output(value: Any, *, stop_reason: StopReason = "stop", usage: Usage | None = None) -> ModelResponse:
        """A structured final answer: ``value`` as the JSON text a provider's structured output sends."""
        return ScriptedModel.text(json.dumps(value, ensure_ascii=False), stop_reason=stop_reason, usage=usage)

    @staticmethod
    def calls(
        calls: Sequence[CallSpec],
        *,
        text: str | None = None,
        stop_reason: StopReason = "tool_calls",
        usage: Usage | None = None,
    ) -> ModelResponse:
        """An answer with tool calls: ``[(name, arguments), (name, arguments, provider_id), ...]``.

        ``arguments`` as a dict, or as a raw string (which may be broken JSON, to test
        that path). Without a provider id the call has none, as with Gemini.
        """
        parts: list[Any] = [TextPart(text)] if text else []
        for spec in calls:
            name, arguments = spec[0], spec[1]
            provider_id = spec[2] if len(spec) > 2 else None
            parts.append(tool_call(name, arguments, provider_id))
        return ModelResponse(Message("assistant", parts), stop_reason, usage or Usage(requests=1))

    @property
    def remaining(self) -> int:
        """How many scripted answers are left (0 for a function model)."""
        return len(self.script)

    async def complete(self, request: ModelRequest, *, stream: bool, on_event: EventSink | None = None) -> ModelResponse:
        """Answer ``request`` from the script; streams its text word by word when asked to."""
        if request.purpose == "summary":  # the run's own housekeeping: no scripted turn is used
            self.summary_requests.append(request)
            return ScriptedModel.text(scripted_summary(request))
        # A snapshot, not a deep copy: the runner keeps appending to its history but never changes
        # a message once sent, so copying the list keeps each request as it was (a deep copy of the
        # whole history per request made a long conversation quadratic).
        self.requests.append(dataclasses.replace(request, messages=list(request.messages), tools=list(request.tools)))
        response = self._next_answer(request)
        if stream and on_event is not None:
            _emit_events(response, on_event)
        return response

    def _next_answer(self, request: ModelRequest) -> ModelResponse:
        if self._function is not None:
            item: ScriptItem = self._function
        elif self.script:
            item = self.script.pop(0)
        else:
            raise ScriptExhausted(
                f"ScriptedModel has no answer left for request {len(self.requests)} "
                f"(the script held {len(self.requests) - 1}); add an answer to the script "
                "or find out why the model was asked again"
            )
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, ModelResponse):
            item = item(request)
        if isinstance(item, str):
            return ScriptedModel.text(item)
        if not isinstance(item, ModelResponse):
            raise TypeError(f"a script item must give a ModelResponse or a str, not {type(item).__name__}")
        # The runner rewrites call ids in place; a reused item must stay pristine. Copying the
        # parts is enough (a deep copy of a 1,000-call answer cost 37 µs a call).
        return dataclasses.replace(item, message=dataclasses.replace(
            item.message, parts=[_copied(part) for part in item.message.parts]))


def scripted_summary(request: ModelRequest) -> str:
    """A scripted model's answer to a summary request: the start of what it was asked to condense."""
    text = "\n".join(message.text or "" for message in request.messages)
    return f"(scripted summary) {excerpt(text, _SUMMARY_CHARS, flatten=True)}"


def _copied(part: Any) -> Any:
    """A shallow copy of a message part: ``copy.copy``'s result, without its generic machinery."""
    if not hasattr(part, "__dict__") or hasattr(type(part), "__slots__"):
        return copy.copy(part)
    clone = object.__new__(type(part))
    clone.__dict__.update(part.__dict__)
    return clone


def tool_call(name: str, arguments: Any, provider_id: str | None = None) -> ToolCall:
    """A ToolCall as an adapter would parse it: dict arguments, or a raw string that may not parse."""
    if isinstance(arguments, str):
        raw = arguments
        try:
            parsed = loads_bounded(raw, MAX_ARGUMENT_DEPTH, finite=True, unique_keys=True)
        except ValueError:
            parsed = None
    else:
        raw = compact_json(arguments)
        parsed = arguments
    return ToolCall(id=provider_id or "", name=name, arguments=parsed, raw_arguments=raw, provider_id=provider_id)


def _emit_events(response: ModelResponse, on_event: EventSink) -> None:
    for part in response.message.parts:
        if isinstance(part, TextPart):
            for piece in re.findall(r"\S+\s*|\s+", part.text):  # word by word, like a real stream
                on_event(TextDelta(piece))


__all__ = ["ScriptedModel", "ScriptExhausted", "tool_call"]
