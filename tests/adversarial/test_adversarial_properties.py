"""Property-based tests of the parts untrusted input reaches first: argument parsing, redaction,
excerpts, URL building, the shell option guard, stream line splitting and the stream
assemblers. No input makes them raise anything but the project's own errors.

Example counts stay modest so the suite stays fast; EXAMPLES says how many each runs.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.property_budget import property_examples
from toolrun.backends.base import CallContext
from toolrun.backends.http_config import HttpConfig
from toolrun.backends.http_request import build_url
from toolrun.backends.shell import OptionInjection, ShellBackend
from toolrun.backends.shell_config import ShellConfig
from toolrun.core.errors import ProviderError, UnreadableAnswer
from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, nesting_depth
from toolrun.core.messages import Message, ModelRequest, TextPart
from toolrun.core.secrets import Redactor, redacting
from toolrun.core.templates import render
from toolrun.core.text import excerpt
from toolrun.loop.refusals import invalid_json_message
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig
from toolrun.providers.openai_family import parse_arguments
from toolrun.providers.transport import Transport, WireRequest, WireResponse, capped_lines

EXAMPLES = property_examples(60)
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


def _deep_text(depth: int, opener: str) -> str:
    closer = {"[": "]", "{": "}"}[opener]
    inner = '"x"' if opener == "[" else ""
    if opener == "{":
        return '{"a": ' * depth + "1" + "}" * depth
    return "[" * depth + inner + closer * depth


argument_texts = st.one_of(
    st.text(max_size=200),
    json_values.map(lambda value: json.dumps(value, ensure_ascii=False)),
    st.builds(_deep_text, st.integers(1, 5_000), st.sampled_from(["[", "{"])),
    st.builds(lambda depth: '{"a": ' + "[" * depth, st.integers(1, 5_000)),  # cut off deep
)


@given(argument_texts)
@FAST
def test_argument_parsing_never_raises_and_keeps_what_it_was_given(raw: str):
    parsed, kept = parse_arguments(raw)
    if parsed is not None:
        assert isinstance(parsed, dict) and nesting_depth(parsed) <= MAX_ARGUMENT_DEPTH
        assert not raw.strip() or parsed == json.loads(raw)
    else:
        assert kept == raw
        message = invalid_json_message(raw, cut_off=False)
        assert message.startswith("the arguments are not valid JSON") or "nested deeper" in message


SECRET_ALPHABET = st.characters(whitelist_categories=["Lu"], max_codepoint=0x7F)  # no digits: a number is no secret
secrets_ = st.text(SECRET_ALPHABET, min_size=8, max_size=30)
surrounding = st.text(st.characters(whitelist_categories=["Ll", "Zs"], max_codepoint=0x7F), max_size=40)


def _plant(value: Any, secret: str, prefix: str) -> Any:
    """``value`` with every text made to hold the secret."""
    if isinstance(value, str):
        return prefix + secret + value
    if isinstance(value, list):
        return [_plant(item, secret, prefix) for item in value]
    if isinstance(value, dict):
        return {key + secret: _plant(item, secret, prefix) for key, item in value.items()}
    return value


@given(json_values, secrets_, surrounding)
@FAST
def test_redaction_leaves_no_secret_anywhere(value: Any, secret: str, prefix: str):
    planted = _plant(value, secret, prefix)
    redacted = Redactor([secret]).redact(planted)
    assert secret not in json.dumps(redacted, ensure_ascii=False)


@given(surrounding, secrets_, surrounding, st.integers(1, 120), st.booleans())
@FAST
def test_no_excerpt_shows_a_secrets_first_characters(before: str, secret: str, after: str, limit: int, flatten: bool):
    with redacting(Redactor([secret])):
        shown = excerpt(before + secret + after, limit, flatten=flatten)
    assert secret[:4] not in shown


path_values = st.one_of(st.text(max_size=30), st.sampled_from([".", "..", "...", "./", "../..", "%2e%2e", "/", "?#"]))


@given(path_values)
@FAST
def test_a_path_parameter_never_leaves_its_segment(value: str):
    url = build_url(HttpConfig(url="http://api.example/items/{id}/detail"), {"id": value}, {})
    path = url.split("://", 1)[1].split("/", 1)[1]
    assert path.startswith("items/") and path.endswith("/detail") and path.count("/") == 2, url
    segment = path[len("items/"):-len("/detail")]
    assert segment not in (".", "..") and not re.search(r"[/?#]", segment)


option_values = st.one_of(
    st.text(max_size=20),
    st.text(st.sampled_from([" ", "\t", "\n", "-", "x", "V"]), max_size=8),
    st.integers(-1_000, 1_000),
    st.floats(-100, 100, allow_nan=False),
    st.lists(st.text(max_size=5), max_size=3),
)
templates = st.sampled_from(["{{ p }}", "{{ p | trim }}", "{{ p | lower }}", "{{ p | string | trim }}",
                             "{{ p[0] if p is sequence and p is not string and p else p }}", "{{ p }}x",
                             "{# a comment #}{{ p }}", "{{ '' }}{{ p }}"])


@given(templates, option_values)
@FAST
def test_the_option_guard_lets_no_model_dash_through(template: str, value: Any):
    config = ShellConfig(argv=("echo", template))
    try:
        argv = ShellBackend()._argv(config, {"p": value}, CallContext(environ={}), {"p": {}})
    except OptionInjection:
        return
    assert not argv[1].startswith("-"), (template, value, argv)


# Pieces of an argv element: ("text", literal) the author wrote, or ("p"/"e", expression) over the model's
# value p or the enumerated value e. The oracle renders each piece alone: the first that shows anything
# says who wrote the element's first character.
EXPRESSIONS = ["{}", "{} | replace('refs/heads/', '')", "{}[11:]", "{}[1:]", "{} | trim", "{} | lower",
               "{} | join('')", "{} | first", "{} | last", "{} | string", "'%s' | format({})", "'-' ~ {}",
               "{} | default('')", "({} | string)[2:]", "{} ~ ''", "{} | replace('x', '-')"]
pieces = st.one_of(
    st.tuples(st.just("text"), st.sampled_from(["", "-", "--", "x", " ", "-v", "{# c #}",
                                                 "{% if p %}-v{% endif %}", "{% if not p %}x{% endif %}"])),
    st.tuples(st.sampled_from(["p", "e"]), st.sampled_from(EXPRESSIONS)),
)
option_like = st.one_of(
    st.text(st.sampled_from([" ", "-", "x", "/", "r"]), max_size=14),
    st.sampled_from(["refs/heads/--output=f", "x-output", " -x", "\u3000--x"]),
    st.lists(st.sampled_from(["-a", "b", "", " -c"]), max_size=3),
    st.integers(-20, 20),
)


def _piece_template(kind: str, text: str) -> str:
    return "{{ '' }}" + text if kind == "text" else "{{ " + text.format(kind) + " }}"  # Jinja2 even for {# c #}


@given(st.lists(pieces, min_size=1, max_size=4), option_like, st.sampled_from(["-l", "", "x"]))
@FAST
def test_a_dash_starts_an_element_only_where_the_author_wrote_it(parts: list[tuple[str, str]], value: Any,
                                                                 enumerated: str):
    arguments = {"p": value, "e": enumerated}
    properties = {"p": {}, "e": {"enum": ["-l", "", "x"]}}
    element = "".join(_piece_template(kind, text) for kind, text in parts)
    try:
        shown = [(kind, render(_piece_template(kind, text), arguments)) for kind, text in parts]
        rendered = render(element, arguments)
    except Exception:  # noqa: BLE001 - a filter that does not take this value (first of an integer)
        return
    first_kind = next((kind for kind, text in shown if text), None)
    try:
        argv = ShellBackend()._argv(ShellConfig(argv=("echo", element)), arguments, CallContext(environ={}), properties)
    except OptionInjection:
        assert rendered.startswith("-") and first_kind == "p", (element, arguments)  # refused only a model dash
        return
    assert argv[1:] == [rendered] or ("{%" in element and not rendered.strip())  # or an optional flag dropped
    assert not rendered.startswith("-") or first_kind in ("text", "e"), (element, arguments, rendered)


chunks = st.lists(st.text(st.sampled_from(["a", "b", "\r", "\n", " ", "é"]), max_size=12), max_size=12)


async def _collect(pieces: list[str]) -> list[str]:
    async def texts():
        for piece in pieces:
            yield piece

    return [line async for line in capped_lines(texts(), 10_000, 100_000)]


@given(chunks)
@FAST
def test_stream_lines_are_split_as_the_whole_text_splits(pieces: list[str]):
    expected = re.split(r"\r\n|\r|\n", "".join(pieces))
    if expected and expected[-1] == "":
        expected.pop()
    assert asyncio.run(_collect(pieces)) == expected


PROVIDERS = ["openai", "openai-responses", "anthropic", "gemini", "ollama"]
EVENT_KEYS = ["type", "choices", "delta", "index", "content", "tool_calls", "function", "arguments", "name", "id",
              "finish_reason", "message", "content_block", "partial_json", "text", "candidates", "parts",
              "functionCall", "args", "done", "item", "output_index", "response", "usage", "error", "stop_reason"]
events = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "text", "tool_use", "function_call",
                                                                      "message_start", "content_block_delta",
                                                                      "response.output_text.delta", "{\"a\":"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(EVENT_KEYS), children,
                                                                         max_size=4),
    max_leaves=20,
)


class _Canned(Transport):
    """What a hostile server answers, handed over without a network: hypothesis sends hundreds."""

    def __init__(self, body: Any = None, lines: list[str] | None = None):
        self.body, self.lines = body, lines or []

    async def send(self, request: WireRequest) -> WireResponse:
        return WireResponse(200, body=self.body)

    async def stream(self, request: WireRequest):
        for line in self.lines:
            yield line


def _wire_lines(provider: str, stream: list[dict[str, Any]], name: str | None) -> list[str]:
    if provider == "ollama":  # NDJSON: one object a line
        return [json.dumps(event) for event in stream]
    named = [f"event: {name}"] if name else []
    return [line for event in stream for line in (*named, f"data: {json.dumps(event)}", "")]


def _complete_against(provider: str, transport: Transport, *, stream: bool) -> None:
    """The adapter's whole path (build, send, read) as the runner calls it; only ``ProviderError`` may leave it."""
    model = get_provider_class(provider)("m", ProviderConfig("http://127.0.0.1:9", "sk-property"), transport)
    request = ModelRequest("m", "system", [Message("user", [TextPart("hi")])], [])
    try:
        asyncio.run(model.complete(request, stream=stream))
    except UnreadableAnswer as exc:
        assert exc.provider == model.name  # it says whose answer it could not read
    except ProviderError:
        pass  # anything else (TypeError, KeyError ...) is an adapter's bug: it fails the test


answer_objects = st.dictionaries(st.sampled_from(EVENT_KEYS), events, max_size=5)


@pytest.mark.parametrize("provider", PROVIDERS)
@given(st.lists(answer_objects, max_size=6),
       st.sampled_from([None, "message_start", "content_block_start", "content_block_delta", "message_delta"]))
@settings(max_examples=EXAMPLES // 4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_stream_of_anything_raises_only_what_the_runner_reports(provider: str, stream, name):
    _complete_against(provider, _Canned(lines=_wire_lines(provider, stream, name)), stream=True)


@pytest.mark.parametrize("provider", PROVIDERS)
@given(answer_objects | events)
@settings(max_examples=EXAMPLES // 4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_whole_answer_of_anything_raises_only_what_the_runner_reports(provider: str, body):
    _complete_against(provider, _Canned(body=body), stream=False)


@pytest.mark.parametrize("value", ["\x1f-x", "\u3000--x", "\x85-x", "\xa0-x"])
def test_the_option_guard_knows_every_whitespace_trim_removes(value: str):
    with pytest.raises(OptionInjection):
        ShellBackend()._argv(ShellConfig(argv=("echo", "{{ p | trim }}")), {"p": value}, CallContext(environ={}), {"p": {}})
