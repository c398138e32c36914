"""Record a run's model exchanges to a cassette, and play them back offline.

A *cassette* is one JSON file (``ensure_ascii=False``, indent 2)::

    {"version": 1, "recipe": "inventory", "model": "openai:gpt-4o-mini",
     "recorded_at": "2026-11-29T20:30:00Z",
     "exchanges": [
       {"request":  {"method", "url", "headers", "body", "stream"},
        "response": {"status", "headers", "body"}          # a whole answer
                 or {"status", "headers", "lines": [...]}  # a streamed one, line by line
                 or {"status", "error": "..."}}]}          # the provider refused

``RecordingTransport`` wraps any ``Transport`` and keeps every exchange, with secrets
redacted and credential headers dropped. ``ReplayTransport`` serves exchange *i* for the
*i*-th request, never touching the network, and compares each new request body with the
recorded one: a different tool set, different call arguments or a different tool result
becomes a ``Divergence`` finding in plain words.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from toolrun.errors import Problem, ProviderError, UserError
from toolrun.providers.transport import Transport, WireRequest, WireResponse
from toolrun.secrets import REDACTED, redact

CASSETTE_VERSION = 1

# Headers that carry credentials: their values never reach a cassette, whatever they hold.
CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "set-cookie"}
)
# Query parameters that carry credentials (Gemini accepts ``?key=``).
CREDENTIAL_QUERY_KEYS = frozenset({"key", "api_key", "api-key", "access_token"})


# --------------------------------------------------------------------------- cassette


@dataclass
class Exchange:
    """One model request and the provider's answer, both as plain JSON."""

    request: dict[str, Any]
    response: dict[str, Any]

    @property
    def streamed(self) -> bool:
        return "lines" in self.response

    def to_json(self) -> dict[str, Any]:
        return {"request": self.request, "response": self.response}


@dataclass
class Cassette:
    """The recorded model side of one run."""

    recipe: str | None = None
    model: str | None = None
    recorded_at: str | None = None
    exchanges: list[Exchange] = field(default_factory=list)
    version: int = CASSETTE_VERSION

    @property
    def streamed(self) -> bool | None:
        """Whether the run was recorded with the streaming API (None: no exchange, or mixed)."""
        modes = {exchange.streamed for exchange in self.exchanges}
        return modes.pop() if len(modes) == 1 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "recipe": self.recipe,
            "model": self.model,
            "recorded_at": self.recorded_at,
            "exchanges": [exchange.to_json() for exchange in self.exchanges],
        }


def save_cassette(cassette: Cassette, path: Path) -> None:
    """Write the cassette atomically (a crash never leaves half a file), secrets redacted."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(redact(cassette.to_json()), ensure_ascii=False, indent=2) + "\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_cassette(path: Path) -> Cassette:
    """Read a cassette; a missing, unreadable or malformed file is a UserError naming the fix."""
    path = Path(path)
    fix = "record one with: toolrun recipe RECIPE --record FILE"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(Problem(path, None, "cassette not found", fix)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(Problem(path, None, f"cannot read cassette: {exc}", fix)) from None
    except json.JSONDecodeError as exc:
        raise UserError(Problem(path, exc.lineno, f"cassette is not valid JSON: {exc.msg}", fix)) from None
    if not isinstance(document, dict) or not isinstance(document.get("exchanges"), list):
        raise UserError(Problem(path, None, "not a toolrun cassette (no \"exchanges\" list)", fix))
    if document.get("version") != CASSETTE_VERSION:
        raise UserError(Problem(path, None, f"cassette version {document.get('version')!r} is not supported",
                                f"this toolrun reads version {CASSETTE_VERSION}; record it again"))
    exchanges = []
    for index, item in enumerate(document["exchanges"], start=1):
        if not (isinstance(item, dict) and isinstance(item.get("request"), dict)
                and isinstance(item.get("response"), dict)):
            raise UserError(Problem(path, None, f"exchange {index} needs a \"request\" and a \"response\" object", fix))
        exchanges.append(Exchange(item["request"], item["response"]))
    return Cassette(
        recipe=document.get("recipe"),
        model=document.get("model"),
        recorded_at=document.get("recorded_at"),
        exchanges=exchanges,
    )


def cassette_beside(recipe_path: Path) -> Path:
    """Where a recipe's own recording lives: ``NAME.cassette.json`` next to ``NAME.yaml``."""
    return recipe_path.with_name(f"{recipe_path.stem}.cassette.json")


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """Headers fit for a cassette: credential headers dropped, other values redacted."""
    return {name: redact(value) for name, value in headers.items() if name.lower() not in CREDENTIAL_HEADERS}


def redact_url(url: str) -> str:
    """The URL with credential query parameters replaced by ``***`` and secrets redacted."""
    parts = urlsplit(url)
    if parts.query:
        pairs = [(k, REDACTED if k.lower() in CREDENTIAL_QUERY_KEYS else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        parts = parts._replace(query=urlencode(pairs, safe="*"))
    return redact(urlunsplit(parts))


def request_record(request: WireRequest) -> dict[str, Any]:
    """The cassette form of a request, secrets removed."""
    return {
        "method": request.method,
        "url": redact_url(request.url),
        "headers": redact_headers(request.headers),
        "body": redact(request.body),
        "stream": request.stream,
    }


# --------------------------------------------------------------------------- recording


class RecordingTransport(Transport):
    """Wraps a real transport and keeps every exchange it carries, in order.

    Streamed answers are passed through line by line as they arrive (the terminal still
    sees text as it comes) and stored once the stream ends. A provider error is stored too,
    so a replay fails the same way.
    """

    def __init__(self, inner: Transport, *, recipe: str | None = None, model: str | None = None,
                 on_exchange: Callable[[Cassette], None] | None = None):
        self.inner = inner
        self.cassette = Cassette(recipe=recipe, model=model, recorded_at=_now())
        self._on_exchange = on_exchange  # e.g. save after every exchange, so a crash loses nothing

    def _keep(self, request: WireRequest, response: dict[str, Any]) -> None:
        """Add an exchange in request order; ``response`` may still be filled in (streams)."""
        self.cassette.exchanges.append(Exchange(request_record(request), response))
        self.flush()

    def flush(self) -> None:
        """Hand the cassette as it is now to ``on_exchange`` (e.g. to save it)."""
        if self._on_exchange is not None:
            self._on_exchange(self.cassette)

    async def send(self, request: WireRequest) -> WireResponse:
        try:
            response = await self.inner.send(request)
        except ProviderError as exc:
            self._keep(request, {"status": exc.status, "error": redact(str(exc))})
            raise
        self._keep(request, {"status": response.status, "headers": redact_headers(response.headers),
                             "body": redact(response.body)})
        return response

    async def stream(self, request: WireRequest) -> AsyncIterator[str]:
        # Kept before the first line: an adapter stops reading at its end marker ("[DONE]")
        # and may never exhaust this generator, yet the next request must come after this one.
        response: dict[str, Any] = {"status": 200, "headers": {}, "lines": []}
        self._keep(request, response)
        try:
            async for line in self.inner.stream(request):
                response["lines"].append(redact(line))
                yield line
        except ProviderError as exc:
            response["status"], response["error"] = exc.status, redact(str(exc))
            raise
        finally:
            self.flush()

    async def aclose(self) -> None:
        self.flush()
        await self.inner.aclose()


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- replay


class ReplayExhausted(ProviderError):
    """The run asked the model more often than the recording answered."""


@dataclass
class Divergence:
    """One place where a replayed run asked something other than what was recorded."""

    exchange: int  # 1-based
    kind: str  # tool_set | tool_definition | tool_result | arguments | conversation | request
    path: str  # JSON path in the request body, e.g. "messages[3].content"
    recorded: Any
    now: Any
    message: str

    def __str__(self) -> str:
        return f"replay divergence at exchange {self.exchange}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"exchange": self.exchange, "kind": self.kind, "path": self.path,
                "recorded": self.recorded, "now": self.now, "message": self.message}


class ReplayTransport(Transport):
    """Plays a cassette back: exchange *i* answers request *i*; no network, ever.

    Each request body is compared with the recorded one and every difference found is
    kept in ``divergences`` (and passed to ``on_divergence`` as it is found).
    """

    def __init__(self, cassette: Cassette, *, on_divergence: Callable[[Divergence], None] | None = None):
        self.cassette = cassette
        self.divergences: list[Divergence] = []
        self.served = 0
        self._on_divergence = on_divergence
        self._reported: set[tuple[str, str, str, str]] = set()

    def _next(self, request: WireRequest) -> Exchange:
        if self.served >= len(self.cassette.exchanges):
            recorded = len(self.cassette.exchanges)
            raise ReplayExhausted(
                f"replay: the run sent model request {self.served + 1} but the recording has only "
                f"{recorded} exchange{'s' if recorded != 1 else ''}; the conversation went further than "
                "when it was recorded — record it again (--record) or run live"
            )
        exchange = self.cassette.exchanges[self.served]
        self.served += 1
        for divergence in compare_requests(self.served, exchange.request.get("body"), redact(request.body)):
            # Each request re-sends the history: a difference already reported is not news.
            key = (divergence.kind, divergence.path, _dumps(divergence.recorded), _dumps(divergence.now))
            if key in self._reported:
                continue
            self._reported.add(key)
            self.divergences.append(divergence)
            if self._on_divergence is not None:
                self._on_divergence(divergence)
        return exchange

    @staticmethod
    def _raise_recorded_error(exchange: Exchange) -> None:
        if "error" in exchange.response:
            raise ProviderError(str(exchange.response["error"]), status=exchange.response.get("status"))

    async def send(self, request: WireRequest) -> WireResponse:
        exchange = self._next(request)
        self._raise_recorded_error(exchange)
        if exchange.streamed:
            raise ProviderError(f"replay: exchange {self.served} was recorded as a stream; replay it with --stream")
        response = exchange.response
        return WireResponse(int(response.get("status") or 200), dict(response.get("headers") or {}), body=response.get("body"))

    async def stream(self, request: WireRequest) -> AsyncIterator[str]:
        exchange = self._next(request)
        if not exchange.streamed:
            self._raise_recorded_error(exchange)
            raise ProviderError(f"replay: exchange {self.served} was recorded without streaming; replay it with --no-stream")
        for line in exchange.response["lines"]:
            yield line
        self._raise_recorded_error(exchange)

    @property
    def unused(self) -> int:
        """Recorded exchanges the run did not ask for (it finished earlier than recorded)."""
        return len(self.cassette.exchanges) - self.served


# --------------------------------------------------------------------------- divergence

# Where each wire format keeps the conversation in its request body.
_CONVERSATION_KEYS = ("messages", "input", "contents")
# Keys whose difference is the replay's own doing or irrelevant to the conversation.
_IGNORED_KEYS = frozenset({"stream", "stream_options"})


def compare_requests(exchange: int, recorded: Any, now: Any) -> list[Divergence]:
    """Differences between a recorded request body and the one a replayed run sends.

    The tool set (names, else the first differing definition); each message or item of the
    conversation that differs (its first differing path, named in plain words when it is a
    tool result or a call's arguments); each other request field that differs.
    """
    if not isinstance(recorded, dict) or not isinstance(now, dict):
        if recorded != now:
            return [Divergence(exchange, "request", "$", recorded, now, "the request body differs")]
        return []
    findings: list[Divergence] = []
    findings.extend(_compare_tools(exchange, recorded.get("tools"), now.get("tools")))
    for key in _CONVERSATION_KEYS:
        if key in recorded or key in now:
            findings.extend(_compare_conversation(exchange, key, recorded.get(key), now.get(key)))
    for key in sorted(set(recorded) | set(now)):
        if key in _CONVERSATION_KEYS or key in _IGNORED_KEYS or key == "tools":
            continue
        difference = first_difference(recorded.get(key, _MISSING), now.get(key, _MISSING), key)
        if difference is not None:
            path, old, new = difference
            findings.append(Divergence(exchange, "request", path, _plain(old), _plain(new),
                                       f"request field {path} differs: recorded {_show(old)}, now {_show(new)}"))
    return findings


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


_MISSING = _Missing()


def _plain(value: Any) -> Any:
    return None if value is _MISSING else value


def first_difference(recorded: Any, now: Any, path: str = "$") -> tuple[str, Any, Any] | None:
    """The first JSON path (depth first, in order) where two values differ, with both values."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        for key in list(recorded) + [k for k in now if k not in recorded]:
            found = first_difference(recorded.get(key, _MISSING), now.get(key, _MISSING), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(now, list):
        for index in range(max(len(recorded), len(now))):
            old = recorded[index] if index < len(recorded) else _MISSING
            new = now[index] if index < len(now) else _MISSING
            found = first_difference(old, new, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if type(recorded) is not type(now) or recorded != now:
        return path, recorded, now
    return None


def tool_names(tools: Any) -> list[str]:
    """Names of the tools a request offers, in any of the five wire formats."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("function"), dict):  # OpenAI Chat, Ollama
            names.append(str(tool["function"].get("name")))
        elif isinstance(tool.get("functionDeclarations"), list):  # Gemini
            names.extend(str(d.get("name")) for d in tool["functionDeclarations"] if isinstance(d, dict))
        elif "name" in tool:  # Anthropic, Responses
            names.append(str(tool["name"]))
    return names


def _compare_tools(exchange: int, recorded: Any, now: Any) -> list[Divergence]:
    old_names, new_names = tool_names(recorded), tool_names(now)
    if sorted(old_names) != sorted(new_names):
        missing = [n for n in old_names if n not in new_names]
        added = [n for n in new_names if n not in old_names]
        words = []
        if missing:
            words.append(f"no longer offers {', '.join(missing)}")
        if added:
            words.append(f"now also offers {', '.join(added)}")
        detail = "; ".join(words) or "the same names in other numbers"
        return [Divergence(exchange, "tool_set", "tools", old_names, new_names,
                           f"a different tool set: recorded [{', '.join(old_names)}], now [{', '.join(new_names)}] ({detail})")]
    difference = first_difference(recorded, now, "tools")
    if difference is None:
        return []
    path, old, new = difference
    name = _tool_at(now if isinstance(now, list) else [], path)
    return [Divergence(exchange, "tool_definition", path, _plain(old), _plain(new),
                       f"the definition of tool {name} differs at {path}: recorded {_show(old)}, now {_show(new)}")]


def _tool_at(tools: list[Any], path: str) -> str:
    """The name of the tool a ``tools[i]...`` path points into."""
    try:
        index = int(path.split("[", 1)[1].split("]", 1)[0])
        names = tool_names([tools[index]])
        return names[0] if names else f"#{index + 1}"
    except (IndexError, ValueError):
        return "?"


def _compare_conversation(exchange: int, key: str, recorded: Any, now: Any) -> list[Divergence]:
    """One finding per differing item of the conversation, at its first differing path."""
    if not isinstance(recorded, list) or not isinstance(now, list):
        difference = first_difference(recorded, now, key)
        return [] if difference is None else [_conversation_finding(exchange, difference, [], [])]
    findings = []
    for index in range(max(len(recorded), len(now))):
        old = recorded[index] if index < len(recorded) else _MISSING
        new = now[index] if index < len(now) else _MISSING
        difference = first_difference(old, new, f"{key}[{index}]")
        if difference is not None:
            findings.append(_conversation_finding(exchange, difference, recorded, now))
    return findings


def _conversation_finding(exchange: int, difference: tuple[str, Any, Any], recorded: list[Any], now: list[Any]) -> Divergence:
    path, old, new = difference
    described = _describe_in_conversation(path, recorded, now)
    if described is None:
        kind, message = "conversation", f"the conversation differs at {path}: recorded {_show(old)}, now {_show(new)}"
    else:
        kind, what = described
        message = f"{what} differs: recorded {_show(old)}, now {_show(new)}"
    return Divergence(exchange, kind, path, _plain(old), _plain(new), message)


def _path_steps(path: str) -> list[str | int]:
    """``"messages[3].content[0].text"`` -> ["messages", 3, "content", 0, "text"]."""
    steps: list[str | int] = []
    for piece in path.replace("[", ".[").split("."):
        if not piece:
            continue
        steps.append(int(piece[1:-1]) if piece.startswith("[") else piece)
    return steps


def _describe_in_conversation(path: str, recorded: list[Any], now: list[Any]) -> tuple[str, str] | None:
    """Name the tool result or call that ``path`` falls in, in whichever wire format it is."""
    steps = _path_steps(path)[1:]
    for conversation in (now, recorded):
        node: Any = conversation
        chain: list[Any] = []
        for step in steps:
            try:
                node = node[step]
            except (KeyError, IndexError, TypeError):
                break
            chain.append(node)
        for item in reversed(chain):  # innermost object that is a call or a result wins
            found = _describe_item(item, conversation)
            if found is not None:
                return found
    return None


def _describe_item(item: Any, conversation: list[Any]) -> tuple[str, str] | None:
    if not isinstance(item, dict):
        return None
    names = _call_names(conversation)
    # OpenAI Chat: {"role": "tool", "tool_call_id", "content"}; Ollama: {"role": "tool", "tool_name"}
    if item.get("role") == "tool":
        call_id = item.get("tool_call_id")
        name = item.get("tool_name") or names.get(call_id)
        return "tool_result", _result_words(call_id, name)
    item_type = item.get("type")
    if item_type == "tool_result":  # Anthropic
        call_id = item.get("tool_use_id")
        return "tool_result", _result_words(call_id, names.get(call_id))
    if item_type == "function_call_output":  # Responses
        call_id = item.get("call_id")
        return "tool_result", _result_words(call_id, names.get(call_id))
    if isinstance(item.get("functionResponse"), dict):  # Gemini
        response = item["functionResponse"]
        return "tool_result", _result_words(response.get("id"), response.get("name"))
    if isinstance(item.get("function"), dict) and "arguments" in item["function"]:  # OpenAI Chat, Ollama
        return "arguments", _arguments_words(item.get("id"), item["function"].get("name"))
    if item_type == "tool_use":  # Anthropic
        return "arguments", _arguments_words(item.get("id"), item.get("name"))
    if item_type == "function_call":  # Responses
        return "arguments", _arguments_words(item.get("call_id"), item.get("name"))
    if isinstance(item.get("functionCall"), dict):  # Gemini
        call = item["functionCall"]
        return "arguments", _arguments_words(call.get("id"), call.get("name"))
    return None


def _call_names(conversation: list[Any]) -> dict[Any, str]:
    """Call id -> tool name, from every tool call in the conversation."""
    names: dict[Any, str] = {}

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("function"), dict) and node.get("id"):
                names[node["id"]] = node["function"].get("name")
            elif node.get("type") == "tool_use" and node.get("id"):
                names[node["id"]] = node.get("name")
            elif node.get("type") == "function_call" and node.get("call_id"):
                names[node["call_id"]] = node.get("name")
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(conversation)
    return names


def _result_words(call_id: Any, name: Any) -> str:
    label = f" for {call_id}" if call_id else ""
    return f"tool result{label}" + (f" ({name})" if name else "")


def _arguments_words(call_id: Any, name: Any) -> str:
    label = f" of {call_id}" if call_id else ""
    return f"arguments{label}" + (f" ({name})" if name else "")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _show(value: Any, limit: int = 120) -> str:
    """A short quoted rendering of a value for a one-line finding."""
    if value is _MISSING:
        return "(absent)"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"'{text}'"
