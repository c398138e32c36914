"""Secrets from the environment, and the redaction that keeps them out of every output.

Every value toolrun reads through ``${env:NAME}`` or a provider's API-key variable is
registered here; ``redact`` replaces each registered value in any text before it reaches a
model, a transcript, a recording or a log.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
REDACTED = "***"
_MIN_SECRET_LENGTH = 4  # shorter values would redact ordinary text

_lock = threading.Lock()
_secrets: set[str] = set()


class MissingSecret(LookupError):
    """A ``${env:NAME}`` reference whose variable is not set."""

    def __init__(self, name: str):
        super().__init__(f"environment variable {name} is not set")
        self.name = name


def register_secret(value: str | None) -> None:
    """Redact ``value`` from now on, as written and in the encodings it travels in."""
    if value and len(value) >= _MIN_SECRET_LENGTH:
        with _lock:
            _secrets.update(_encodings(value))


def _encodings(value: str) -> set[str]:
    # A server may echo a query-string token URL-encoded, or a JSON body with it escaped.
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
    """Replace every registered secret in a string, or deep in a JSON-like value."""
    if isinstance(value, str):
        with _lock:
            secrets = sorted(_secrets, key=len, reverse=True)
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
