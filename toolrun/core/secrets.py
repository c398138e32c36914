"""Secrets from the environment, and the redaction that keeps them out of every output.

Every value toolrun reads through ``${env:NAME}`` or a provider's API-key variable is
registered with the ``Redactor`` of the run (or call) that read it; ``redact`` replaces each
registered value in any text before it reaches a model, a transcript, a recording or a log.

A redactor belongs to one run, never to the process: a server runs many runs at once, and
one run's secrets must neither leak into another's output nor outlive it. The run makes
its redactor the *active* one for everything it does (a ``ContextVar``: asyncio tasks and
the threads toolrun starts inherit it), so code deep below — a template reading
``${env:NAME}``, an adapter formatting an error — reaches it without a module global.
"""

from __future__ import annotations

import json
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
REDACTED = "***"
_MIN_SECRET_LENGTH = 4  # shorter values would redact ordinary text


class Redactor:
    """The secrets of one run, and their removal from any text or JSON-like value."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()  # a sync tool's thread may register while the loop redacts
        self._secrets: set[str] = set()
        self._ordered: list[str] = []  # longest first: a secret that contains another goes whole
        for secret in secrets:
            self.add(secret)

    def __copy__(self) -> Redactor:
        return self  # a copy of a run's result belongs to the same run: one set of secrets, shared

    def __deepcopy__(self, memo: dict[int, Any]) -> Redactor:
        return self

    def __reduce__(self) -> tuple[type[Redactor], tuple[()]]:
        return Redactor, ()  # pickled empty: the secrets never go into bytes that may be written or sent

    @property
    def secrets(self) -> frozenset[str]:
        """Every registered value, in each encoding it is redacted in."""
        with self._lock:
            return frozenset(self._secrets)

    def add(self, value: str | None) -> None:
        """Redact ``value`` from now on, as written and in the encodings it travels in."""
        if not value or len(value) < _MIN_SECRET_LENGTH:
            return
        with self._lock:
            new = _encodings(value) - self._secrets
            if new:
                self._secrets |= new
                self._ordered = sorted(self._secrets, key=len, reverse=True)

    def redact(self, value: Any) -> Any:
        """``value`` with every registered secret replaced by ``***``, deep in dicts and lists."""
        secrets = self._ordered  # replaced whole on add(), never mutated: safe to read unlocked
        if not secrets:
            return value
        return _redact_with(value, secrets)


def _redact_with(value: Any, secrets: list[str]) -> Any:
    # Walked with a stack, not recursion: a model's arguments may nest thousands deep.
    if not isinstance(value, (dict, list)):
        return _redact_text(value, secrets)
    root: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    stack: list[tuple[dict[Any, Any] | list[Any], dict[Any, Any] | list[Any]]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            if isinstance(item, (dict, list)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
            else:
                copy = _redact_text(item, secrets)
            if isinstance(target, dict):
                target[_redact_text(key, secrets)] = copy
            else:
                target.append(copy)
    return root


def _redact_text(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
    return value


_active: ContextVar[Redactor | None] = ContextVar("toolrun_redactor", default=None)


def active_redactor() -> Redactor | None:
    """The redactor of the run (or call) this code runs in; None outside any."""
    return _active.get()


@contextmanager
def redacting(redactor: Redactor) -> Iterator[Redactor]:
    """Make ``redactor`` the active one inside the ``with`` block (and the tasks it starts)."""
    token = _active.set(redactor)
    try:
        yield redactor
    finally:
        _active.reset(token)


def run_redactor() -> Redactor:
    """A fresh redactor for a new run: it starts with the secrets of the enclosing scope, if
    any (a caller's own), and what the run registers stays in the run."""
    outer = _active.get()
    return Redactor(outer.secrets if outer is not None else ())


class MissingSecret(LookupError):
    """A ``${env:NAME}`` reference whose variable is not set."""

    def __init__(self, name: str):
        super().__init__(f"environment variable {name} is not set")
        self.name = name


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on in the active run; outside any run there is nothing to keep it from."""
    redactor = _active.get()
    if redactor is not None:
        redactor.add(value)


def _encodings(value: str) -> set[str]:
    # A server may echo a query-string token URL-encoded, or a JSON body with it escaped.
    import base64  # only a run that reads a secret needs it

    return {
        value,
        urllib.parse.quote(value, safe=""),
        urllib.parse.quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        base64.b64encode(value.encode("utf-8")).decode("ascii"),
    }


def read_secret(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of environment variable ``name``, registered for redaction."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    if value is None:
        raise MissingSecret(name)
    register_secret(value)
    return value


def env_references(text: str) -> list[str]:
    return ENV_REFERENCE.findall(text)


def redact(value: Any) -> Any:
    """Replace every secret of the active run in a string, or deep in a JSON-like value."""
    redactor = _active.get()
    return value if redactor is None else redactor.redact(value)


def holds_secrets() -> bool:
    """Whether the active run has a secret to redact; while it has none, ``redact`` returns every value as
    it is, and code that redacts many pieces of one line may skip them all."""
    redactor = _active.get()
    return redactor is not None and bool(redactor._ordered)
