"""Where an import may read: the rules for ``$ref``s to other files and URLs, and a checked fetch.

A document is not trusted (it may come from a server), so what its ``$ref``s make the
importer read is limited: references inside the document always; relative references on
the document's own origin — its folder tree for a file (no ``../`` out of it), its scheme,
host and port for a URL; any other origin or an absolute file path only with
``--allow-external-refs``; link-local and cloud-metadata addresses never, by name, by
address and by what a name resolves to (resolved once, when connecting, as the http
backend does). Redirects are checked hop by hop by the same rules.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit, urlunsplit

import httpx

from toolrun.backends.http_safety import BLOCKED_HOSTNAMES, RefusedRequest, checked_sync_transport, is_forbidden_address
from toolrun.core.content_decoding import ACCEPT_ENCODING, decoded_sync
from toolrun.core.credentials import without_login
from toolrun.core.tls import shared_ssl_context

MAX_REDIRECTS = 5
EXTERNAL_FLAG = "--allow-external-refs"


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower().rstrip("."), port


def forbidden_host(url: str) -> str | None:
    """The host of ``url`` when it is a link-local or cloud-metadata address (by name or address), else None."""
    try:
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return None
    return host if host in BLOCKED_HOSTNAMES or is_forbidden_address(host) else None


@dataclass(frozen=True)
class ReferenceRules:
    """What the ``$ref``s of the document at ``root`` may make the import read."""

    root: str  # the main document: a resolved file path or an http(s) URL
    allow_external: bool = False

    def refusal(self, target: str, *, is_url: bool) -> str | None:
        """Why the document at ``target`` may not be read, or None when it may."""
        if is_url:
            host = forbidden_host(target)
            if host is not None:
                return f"{host} is a link-local or cloud-metadata address, never read"
            if self.allow_external or (urlsplit(self.root).scheme and _same_origin(target, self.root)):
                return None
            return "it is on another origin than the document"
        if self.allow_external or urlsplit(self.root).scheme in ("http", "https"):
            return None if self.allow_external else "it is a local file, and the document is a URL"
        folder = Path(self.root).parent
        if Path(target).resolve().is_relative_to(folder):
            return None
        return f"it is outside the document's folder ({folder})"


def _same_origin(a: str, b: str) -> bool:
    try:
        return _origin(a) == _origin(b)
    except ValueError:
        return False


def _text(content: bytes, charset: str | None) -> str:
    """The body as text in its declared charset; a charset that is no text encoding (base64) is read as UTF-8."""
    try:
        return content.decode(charset or "utf-8", "replace")
    except LookupError:
        return content.decode("utf-8", "replace")


def _client(timeout: float) -> httpx.Client:
    """Through a proxy from the environment the proxy resolves names: only the name checks apply there."""
    if any(urllib.request.getproxies().get(scheme) for scheme in ("http", "https", "all")):
        return httpx.Client(timeout=timeout, follow_redirects=False, verify=shared_ssl_context())
    return httpx.Client(timeout=timeout, follow_redirects=False, transport=checked_sync_transport())


def _within(raw: Iterable[bytes], deadline: float, timeout: float) -> Iterator[bytes]:
    """The body's pieces until ``deadline``: a server that sends a byte now and then holds no read past it."""
    for chunk in raw:
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout(f"the server took more than {timeout:g}s to send the whole document")
        yield chunk


def shown_location(location: str) -> str:
    """A document's file or URL as messages and the imported file's header say it: a URL without its user name
    and password, and *** for each query value (``?token=...``); a file as it is."""
    try:
        parts = urlsplit(without_login(location))
    except ValueError:  # "http://[x": no URL to take apart
        return location
    if parts.scheme.lower() not in ("http", "https"):
        return location
    query = "&".join(f"{name}=***" if value else name for name, value in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query=query))


def fetch(url: str, timeout: float, max_bytes: int, refusal: Any = None) -> tuple[int, str]:
    """GET ``url``: its status and its text, decoded by toolrun within ``max_bytes`` (RefusedBody past
    it) and ``timeout`` seconds, redirects included (each read waits at most what is left of them).
    Redirects (at most 5) are followed each checked: never to a metadata address, and where
    ``refusal(url)`` says why not, not at all (RefusedRequest)."""
    deadline = time.monotonic() + timeout
    with _client(timeout) as client:
        for _ in range(MAX_REDIRECTS + 1):
            why = forbidden_host(url) and f"{forbidden_host(url)} is a link-local or cloud-metadata address"
            why = why or (refusal(url) if refusal is not None else None)
            if why:
                raise RefusedRequest(f"{shown_location(url)}: {why}")
            left = max(deadline - time.monotonic(), 0.001)
            request = client.build_request("GET", url, headers={"Accept-Encoding": ACCEPT_ENCODING}, timeout=left)
            response = client.send(request, stream=True)
            try:
                if not response.is_redirect or "location" not in response.headers:
                    coding = response.headers.get("content-encoding")
                    content = b"".join(decoded_sync(_within(response.iter_raw(), deadline, timeout), coding, max_bytes))
                    return response.status_code, _text(content, response.encoding)
            finally:
                response.close()
            try:
                url = urljoin(url, response.headers["location"])
            except ValueError:  # "http://[x/": the server's redirect names no place
                raise httpx.InvalidURL(f"the redirect from {shown_location(url)} names no URL: "
                                       f"{response.headers['location']!r}") from None
    raise RefusedRequest(f"{shown_location(url)}: more than {MAX_REDIRECTS} redirects")
