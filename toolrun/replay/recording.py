"""Record a run's model exchanges to a cassette, and play them back offline.

A *cassette* is one JSON file (``ensure_ascii=False``, indented by two down to each message of
a request body, which is one line)::

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
recorded one (``toolrun.replay.divergence``): a different tool set, different call arguments or a
different tool result becomes a ``Divergence`` finding in plain words.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from toolrun.core.errors import Problem, ProviderError, UserError
from toolrun.core.json_limits import compact_json
from toolrun.core.private_files import make_private_folders, replace_file
from toolrun.core.secrets import REDACTED, active_redactor, redact
from toolrun.core.text import surrogates_escaped
from toolrun.providers.transport import Transport, WireRequest, WireResponse
from toolrun.replay.adapters import every_provider, providers_for
from toolrun.replay.divergence import Divergence, compare_requests

CASSETTE_VERSION = 1

# Headers HTTP itself uses for credentials; each adapter names its own (``credential_headers``).
HTTP_CREDENTIAL_HEADERS = frozenset({"proxy-authorization", "cookie", "set-cookie"})
# The usual query parameters for credentials; each adapter names its own (``credential_query_keys``).
COMMON_CREDENTIAL_QUERY_KEYS = frozenset({"api_key", "api-key", "access_token"})


@cache
def credential_headers() -> frozenset[str]:
    """Headers never written to a cassette, whatever they hold: every adapter's, and HTTP's own."""
    return HTTP_CREDENTIAL_HEADERS.union(*(provider.credential_headers for provider in every_provider()))


@cache
def credential_query_keys() -> frozenset[str]:
    """Query parameters whose value is never written to a cassette."""
    return COMMON_CREDENTIAL_QUERY_KEYS.union(*(provider.credential_query_keys for provider in every_provider()))


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
        return {**self.to_json_without_exchanges(), "exchanges": [exchange.to_json() for exchange in self.exchanges]}

    def to_json_without_exchanges(self) -> dict[str, Any]:
        """The cassette's metadata, in the order the file has it."""
        return {"version": self.version, "recipe": self.recipe, "model": self.model, "recorded_at": self.recorded_at}


def save_cassette(cassette: Cassette, path: Path) -> None:
    """Write the cassette atomically (a crash never leaves half a file), secrets redacted."""
    path = Path(path)
    make_private_folders(path.parent)
    replace_file(path, (cassette_text(redact(cassette.to_json())) + "\n").encode("utf-8"))


class CassetteFile:
    """A cassette file saved after every exchange by rewriting only what changed: its tail.

    The bytes are exactly ``save_cassette``'s, and the file is valid JSON after every save:
    exchanges that did not change since the last save keep their bytes on disk, the first one
    that changed (a stream still filling in, a new exchange, any exchange once the run has
    learned a new secret) and everything after it is written over, then the closing brackets. Recording a long conversation therefore costs
    one exchange per exchange instead of the whole cassette. Another process replacing the
    file, or new metadata, means one whole atomic save.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._head = b""
        self._written: list[tuple[tuple[Any, ...], int]] = []  # per exchange: fingerprint, offset of its separator
        self._end = 0  # offset just past the last exchange
        self._stat: tuple[int, int] | None = None  # (size, mtime_ns) after our last write

    def save(self, cassette: Cassette) -> None:
        """Bring the file up to date with ``cassette``."""
        head = _cassette_head(cassette)
        # A secret learned since an exchange was written is redacted from it too: written again.
        secrets = _secrets_known()
        fingerprints = [_fingerprint(exchange, secrets) for exchange in cassette.exchanges]
        if head != self._head or not self._unchanged_on_disk():
            save_cassette(cassette, self.path)
            self._remember(head, cassette, fingerprints)
            return
        first = next((index for index, (old, new) in enumerate(zip(self._written, fingerprints, strict=False))
                      if old[0] != new), min(len(self._written), len(fingerprints)))
        offset = self._written[first][1] if first < len(self._written) else self._end
        del self._written[first:]
        pieces: list[bytes] = []
        position = offset
        for index in range(first, len(cassette.exchanges)):
            piece = _exchange_bytes(cassette.exchanges[index], first=index == 0)
            self._written.append((fingerprints[index], position))
            pieces.append(piece)
            position += len(piece)
        self._end = position
        tail = b"".join(pieces) + (_CLOSE if cassette.exchanges else _CLOSE_EMPTY)
        with open(self.path, "r+b") as stream:
            stream.seek(offset)
            stream.write(tail)
            stream.truncate()
        self._stat = self._disk_stat()

    def _remember(self, head: bytes, cassette: Cassette, fingerprints: list[tuple[Any, ...]]) -> None:
        self._head, self._written = head, []
        position = len(head) + 1  # past the "[" that opens the list
        for index, exchange in enumerate(cassette.exchanges):
            self._written.append((fingerprints[index], position))
            position += len(_exchange_bytes(exchange, first=index == 0))
        self._end = position
        self._stat = self._disk_stat()

    def _disk_stat(self) -> tuple[int, int] | None:
        try:
            status = self.path.stat()
        except OSError:
            return None
        return status.st_size, status.st_mtime_ns

    def _unchanged_on_disk(self) -> bool:
        return self._stat is not None and self._disk_stat() == self._stat


_CLOSE = b"\n  ]\n}\n"
_CLOSE_EMPTY = b"]\n}\n"


# Levels below this are written on one line each: a message of a request body, an item of a
# response. Indenting every level with json's pure-Python encoder made a long conversation's
# request body cost ~20 ms per exchange; this way each message is one C-encoded line.
_ONE_LINE_FROM_LEVEL = 6  # document, exchanges, exchange, request, body, messages -> a message


def cassette_text(document: Any) -> str:
    """A cassette's JSON text: indented by two down to each message, one message or item a line; a lone
    surrogate (half of a pair a model escaped) as its ``\\u`` escape, the same JSON string, which UTF-8 can hold."""
    return surrogates_escaped(_layout(document, 0))


def _layout(value: Any, level: int) -> str:
    if level >= _ONE_LINE_FROM_LEVEL or not isinstance(value, dict | list) or not value:
        return compact_json(value)
    inner = "  " * (level + 1)
    if isinstance(value, dict):
        items = [f"{inner}{compact_json(str(key))}: {_layout(item, level + 1)}" for key, item in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    if level + 1 >= _ONE_LINE_FROM_LEVEL:  # the long lists: one C-encoded line per item
        return "[\n" + ",\n".join([inner + compact_json(item) for item in value]) + "\n" + "  " * level + "]"
    return "[\n" + ",\n".join([inner + _layout(item, level + 1) for item in value]) + "\n" + "  " * level + "]"


def _cassette_head(cassette: Cassette) -> bytes:
    """The file's bytes up to the exchanges' opening bracket (``"exchanges": `` is the last key)."""
    document = redact({**cassette.to_json_without_exchanges(), "exchanges": []})
    return cassette_text(document).removesuffix("[]\n}").encode("utf-8")


def _exchange_bytes(exchange: Exchange, *, first: bool) -> bytes:
    """One exchange as it reads inside the cassette's list, with the separator before it."""
    return (("\n    " if first else ",\n    ") + surrogates_escaped(_layout(redact(exchange.to_json()), 2))).encode("utf-8")


def _secrets_known() -> int:
    redactor = active_redactor()
    return 0 if redactor is None else len(redactor.secrets)


def _fingerprint(exchange: Exchange, secrets: int) -> tuple[Any, ...]:
    # A request never changes once kept; a streamed answer grows line by line, or ends in an error.
    response = exchange.response
    lines = response.get("lines")
    return (id(exchange), secrets, None if lines is None else len(lines), response.get("status"), response.get("error"))


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
    dropped = credential_headers()
    return {name: redact(value) for name, value in headers.items() if name.lower() not in dropped}


def redact_url(url: str) -> str:
    """The URL with credential query parameters replaced by ``***`` and secrets redacted."""
    parts = urlsplit(url)
    if parts.query:
        secret_keys = credential_query_keys()
        pairs = [(k, REDACTED if k.lower() in secret_keys else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
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
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------- replay


class ReplayExhausted(ProviderError):
    """The run asked the model more often than the recording answered."""


class ReplayTransport(Transport):
    """Plays a cassette back: exchange *i* answers request *i*; no network, ever.

    Each request body is compared with the recorded one, read by the adapter that made the
    recording, and every difference found is kept in ``divergences`` (and passed to
    ``on_divergence`` as it is found).
    """

    def __init__(self, cassette: Cassette, *, on_divergence: Callable[[Divergence], None] | None = None):
        self.cassette = cassette
        self._providers = providers_for(cassette.model)
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
        for divergence in compare_requests(self.served, exchange.request.get("body"), redact(request.body),
                                           self._providers):
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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


__all__ = [
    "Cassette", "Divergence", "Exchange", "RecordingTransport", "ReplayExhausted", "ReplayTransport",
    "cassette_beside", "credential_headers", "load_cassette", "redact_headers", "redact_url", "save_cassette",
]
