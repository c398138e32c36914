"""Which values are credentials, and which origin a toolset's credentials are for.

One rule, used when a toolset's ``defaults`` are merged into a tool, by its lint rule and by
the OpenAPI importer: a credential is a header, query or cookie value that holds
``${env:NAME}``; the credentials of ``defaults.http`` go only to the origin (scheme, host,
port) of ``defaults.http.base_url``. A tool whose request goes elsewhere (its own absolute
``url`` or ``base_url``), or whose origin cannot be told from the file (a template in the
host), does not receive them. Standard library only: the catalog checks this at load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

CREDENTIAL_KEYS = ("headers", "query")  # the mappings of defaults.http whose values may be credentials (a cookie: a header)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_credential(value: Any) -> bool:
    """True for a value that brings a secret in: text holding ``${env:``."""
    return isinstance(value, str) and "${env:" in value


def credential_names(defaults: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{"headers": [...], "query": [...]}``: the names of the credential entries of an http ``defaults`` section."""
    found: dict[str, list[str]] = {}
    for key in CREDENTIAL_KEYS:
        mapping = defaults.get(key)
        if isinstance(mapping, Mapping):
            names = [str(name) for name, value in mapping.items() if is_credential(value)]
            if names:
                found[key] = names
    return found


def without_login(url: str) -> str:
    """``url`` without the user name and password it may carry (``https://user:pw@host/``); text that is no
    URL as it is. What a file, a message or a log line may show of a URL someone typed."""
    try:
        parts = urlsplit(url)
    except ValueError:  # "http://[x": no URL to take apart
        return url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an absolute http(s) URL as written in a file; None when it has none, or when
    a template or ``${env:...}`` decides its scheme, host or port."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or any(mark in parts.netloc for mark in "{}$%"):
        return None
    return parts.scheme, parts.hostname.rstrip(".").lower(), port or _DEFAULT_PORTS[parts.scheme]


def same_origin(a: str, b: str) -> bool:
    """True when two URLs as written share scheme, host and port — or are written alike up to their path
    (``${env:API_URL}`` and ``${env:API_URL}``); False when either origin cannot be told."""
    known = origin(a)
    if known is not None:
        return known == origin(b)
    written = _origin_text(a)
    # alike text names one origin only when the environment fills it in, not a template the model fills
    return bool(written) and written == _origin_text(b) and not re.search(r"(?<!\$)\{", written)


def _origin_text(url: str) -> str:
    """The part of a URL before its path, as written (``${env:API_URL}`` for ``${env:API_URL}/items``)."""
    text = url.strip()
    start = text.find("://") + 3 if "://" in text else 0
    end = text.find("/", start)
    return (text if end < 0 else text[:end]).rstrip("/")


def credentials_withheld(defaults: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, list[str]]:
    """The credential entries of http ``defaults`` that a tool with backend ``config`` (its own keys, before
    merging) must not receive: its request does not provably go to the origin of ``defaults["base_url"]``."""
    names = credential_names(defaults)
    base_url = defaults.get("base_url")
    if not names or not isinstance(base_url, str):
        return names  # no base_url: the toolset names no origin for its credentials
    url = str(config.get("url") or "")
    if _relative(url):  # a path under the tool's own base_url, else the toolset's
        target = str(config["base_url"]) if "base_url" in config else base_url
    else:
        target = url
    # same_origin of base_url with itself is False where a template decides its host: nothing is sent there
    return {} if same_origin(base_url, target) else names


def _relative(url: str) -> bool:
    """A path joined to a base_url; a url starting with a template may be absolute once rendered."""
    text = url.strip()
    return not text.startswith(("{{", "{%", "${")) and "://" not in text
