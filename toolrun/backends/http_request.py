"""One call of an http tool: the request built from the tool's typed config and the call's
arguments, sent through a client that connects only to checked addresses (retries, redirects
followed by hand, a size cap on the body read), and the response turned into the model's view.

Imported at an http tool's first call (``HttpBackend.run``): httpx and what it brings cost
tens of milliseconds, which loading, linting and listing a catalog do without.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import httpx

from toolrun.backends.argument_text import lone_surrogate_problem
from toolrun.backends.base import BackendOutput, CallContext
from toolrun.backends.extract import ExtractError, extract
from toolrun.backends.http_arguments import header_problem, path_text, place, placements, query_text
from toolrun.backends.http_config import HttpConfig
from toolrun.backends.http_errors import error_text, status_line
from toolrun.backends.http_safety import RefusedRequest, check_destination, checked_transport, same_origin
from toolrun.core.content_decoding import ACCEPT_ENCODING, BodyTooLarge, RefusedBody, decoded
from toolrun.core.json_limits import MAX_BODY_DEPTH, loads_bounded
from toolrun.core.retry_policy import RetryPolicy
from toolrun.core.secrets import redact
from toolrun.core.templates import TemplateError, placeholders, render
from toolrun.core.text import excerpt
from toolrun.core.tls import shared_ssl_context
from toolrun.core.tool import Tool
from toolrun.core.tracing import propagation_headers
from toolrun.core.url_template import PATH_PARAMETER
from toolrun.core.version import USER_AGENT

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
# Methods whose request carries content by meaning (RFC 9110): an empty JSON object is still a body for them; a
# GET, HEAD, DELETE or OPTIONS whose optional body members were all left out sends none.
METHODS_WITH_CONTENT = frozenset({"POST", "PUT", "PATCH"})
RETRY_STATUSES = frozenset({429, 502, 503, 504})
MAX_REDIRECTS = 5
MAX_BODY_BYTES = 16 * 1024 * 1024  # memory guard; the tool's max_output cuts the text far earlier
ERROR_EXCERPT_CHARS = 300  # a body that is no error's: what a failed extract or result template saw

_WHOLE_PLACEHOLDER = re.compile(r"^\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")
_PATH_VARIABLE_PREFIX = "__toolrun_path_"
_OMIT = object()


class Unreachable(Exception):
    """Every attempt failed before a response arrived; the message says why."""


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _render_optional(template: Any, arguments: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
    """A rendered string, or _OMIT when the template needs an argument the call did not give."""
    if not isinstance(template, str):
        return _as_text(template)
    try:
        return render(template, arguments, environ)
    except TemplateError:
        if placeholders(template) - set(arguments):
            return _OMIT
        raise


def _render_mapping(mapping: Mapping[str, Any] | None, arguments: Mapping[str, Any],
                    environ: Mapping[str, str]) -> dict[str, Any]:
    rendered: dict[str, Any] = {}
    for key, template in (mapping or {}).items():
        if isinstance(template, list):
            values = [_render_optional(t, arguments, environ) for t in template]
            values = [v for v in values if v is not _OMIT]
            if values:
                rendered[str(key)] = values
            continue
        value = _render_optional(template, arguments, environ)
        if value is not _OMIT:
            rendered[str(key)] = value
    return rendered


def _render_json(value: Any, arguments: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
    """Render a JSON body; ``"{{ name }}"`` alone keeps the argument's type; missing ones are left out."""
    if isinstance(value, str):
        whole = _WHOLE_PLACEHOLDER.match(value.strip())
        if whole:
            return arguments.get(whole.group(1), _OMIT)
        return _render_optional(value, arguments, environ)
    if isinstance(value, dict):
        members = {k: _render_json(v, arguments, environ) for k, v in value.items()}
        return {k: v for k, v in members.items() if v is not _OMIT}
    if isinstance(value, list):
        elements = [_render_json(v, arguments, environ) for v in value]
        return [v for v in elements if v is not _OMIT]
    return value


def build_url(config: HttpConfig, arguments: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """The request URL: path parameters encoded, templates rendered, joined to base_url."""
    path_values: dict[str, str] = {}
    styled = place(config.arguments, arguments).path  # arguments declared `in: path`

    def to_variable(match: re.Match[str]) -> str:
        name = match.group(1)
        if arguments.get(name) is None:
            raise ValueError(f"path parameter {{{name}}} has no value: the argument {name!r} is required")
        # a plain {{ name }} of its own, set after the arguments: filled in without Jinja2 in a plain url
        variable = _PATH_VARIABLE_PREFIX + name
        encoded = styled[name] if name in styled else path_text(_as_text(arguments[name]))  # placed: encoded
        path_values[variable] = _segment(encoded)
        return f"{{{{ {variable} }}}}"

    url = render(PATH_PARAMETER.sub(to_variable, config.url), {**arguments, **path_values}, environ)
    if httpx.URL(url).scheme:  # absolute (file:// too: check_destination refuses it)
        return url
    if not config.base_url:
        raise ValueError(f"the url {config.url!r} is relative and the tool has no base_url")
    return joined_to_base(render(config.base_url, arguments, environ), url)


def joined_to_base(base: str, url: str) -> str:
    """``url`` (relative) under ``base``: its path after the base's path, and a query the base carries (an API
    version, ``?api-version=2024-06-01``) kept before the url's own, not followed by the url's path."""
    parts = urlsplit(base)
    if not parts.query and not parts.fragment:
        return base.rstrip("/") + "/" + url.lstrip("/")
    relative = urlsplit(url)
    path = parts.path.rstrip("/") + "/" + relative.path.lstrip("/")
    query = "&".join(part for part in (parts.query, relative.query) if part)
    return urlunsplit((parts.scheme, parts.netloc, path, query, relative.fragment))


def _segment(encoded: str) -> str:
    """An encoded path value; "." and ".." encoded too, or URL normalisation would climb out of the segment."""
    return encoded.replace(".", "%2E") if encoded.strip(".") == "" else encoded


def _client(timeout: float) -> httpx.AsyncClient:
    """A client that connects only to checked addresses; through a proxy from the environment, the
    proxy resolves names, so only the name checks apply there (docs/security.md)."""
    # only what content_decoding bounds, whatever httpx could do; a tool's own User-Agent header wins
    headers = {"Accept-Encoding": ACCEPT_ENCODING, "User-Agent": USER_AGENT}
    if _proxied():
        return httpx.AsyncClient(timeout=timeout, verify=shared_ssl_context(), follow_redirects=False, headers=headers)
    context = shared_ssl_context()
    return httpx.AsyncClient(timeout=timeout, verify=context, follow_redirects=False, headers=headers,
                             transport=checked_transport(context))


def _proxied() -> bool:
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))


def _body_excerpt(text: str) -> str:
    return excerpt(text, ERROR_EXCERPT_CHARS, flatten=True, empty="(empty body)")


def _response_json(response: httpx.Response) -> Any:
    """The body as JSON, or None: not JSON, or nested deeper than any real answer (the parser and everything
    that walks the value after it would recurse past Python's limit)."""
    if not response.content:
        return None
    try:
        return loads_bounded(response.content, MAX_BODY_DEPTH)
    except ValueError:
        return None


def result_of(config: HttpConfig, arguments: Mapping[str, Any], response: httpx.Response,
              environ: Mapping[str, str]) -> BackendOutput:
    """The model's view of a response: an error for 4xx/5xx, else extract / result template / body."""
    status = status_line(response)
    if response.status_code >= 400:
        return BackendOutput(error_text(status, response.text, config.error_excerpt), is_error=True)
    if response.is_redirect:
        location = response.headers.get("location", "?")
        return BackendOutput(f"{status}: redirect to {location} not followed (follow_redirects is false)",
                             is_error=True)
    body = _response_json(response)
    if config.extract:
        if body is None:
            return BackendOutput(f"{status}: the response is not JSON, so extract "
                                 f"{config.extract!r} cannot apply: {_body_excerpt(response.text)}", is_error=True)
        try:
            value = extract(body, config.extract)
        except ExtractError as exc:
            return BackendOutput(str(exc), is_error=True)
        return BackendOutput(_as_text(value))
    if config.result:
        view = {"status": response.status_code, "headers": {k.lower(): v for k, v in response.headers.items()},
                "json": body, "text": response.text}
        try:
            return BackendOutput(render(config.result, {**arguments, "response": view}, environ))
        except Exception as exc:  # e.g. the API changed shape: show what came back instead
            return BackendOutput(f"{status}: the tool's result template failed ({exc}); "
                                 f"the response was: {_body_excerpt(response.text)}", is_error=True)
    if body is not None:
        return BackendOutput(json.dumps(body, ensure_ascii=False))  # also turns \uXXXX escapes back into text
    if not response.text.strip():
        return BackendOutput(f"{status} (empty body)")
    return BackendOutput(response.text)


async def send(tool: Tool, config: HttpConfig, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
    """One call of ``tool``: the request built from ``config`` and ``arguments``, sent, and its response read."""
    method = config.method
    if problem := lone_surrogate_problem(arguments, "the server"):
        return BackendOutput(problem, is_error=True)
    try:
        url = build_url(config, arguments, context.environ)
        parts = request_parts(config, arguments, context.environ)
    except ValueError as exc:  # a missing path value or base_url, an item holding its delimiter: say it plainly
        return BackendOutput(redact(str(exc)), is_error=True)
    scheme = httpx.URL(url).scheme  # before build_request, which drops a file: URL's scheme
    if scheme not in ("http", "https"):
        return BackendOutput(redact(f"refused: only http and https URLs are allowed, not "
                                    f"{scheme + ':' if scheme else 'a relative URL'}"), is_error=True)
    timeout = config.timeout if config.timeout is not None else tool.timeout
    attempts = 1 + config.retries if (method in IDEMPOTENT_METHODS or config.idempotent) else 1
    allow_lists = [list(h) for h in (config.allow_hosts, context.allow_hosts) if h is not None]
    async with _client(timeout) as client:
        if problem := next(filter(None, (header_problem(k, v) for k, v in parts["headers"].items())), None):
            return BackendOutput(redact(problem), is_error=True)
        _add_trace_context(parts["headers"])
        # Bytes: httpx would encode ASCII only. Outer spaces are no part of a field value (RFC 9110): dropped.
        parts["headers"] = {k: v.strip(" \t").encode("latin-1") for k, v in parts["headers"].items()}
        # the URL is sent as written when there are no query entries, else merged with them (theirs winning)
        params = parts.pop("params")
        target = _with_query(url, params) if params else url
        request = client.build_request(method, target, **parts)
        try:
            response = await _send_with_retries(client, request, attempts, timeout, allow_lists,
                                                follow=config.follow_redirects)
        except (RefusedRequest, Unreachable) as exc:
            return BackendOutput(redact(str(exc)), is_error=True)
    output = result_of(config, arguments, response, context.environ)
    return BackendOutput(redact(output.text), output.is_error)


def _add_trace_context(headers: dict[str, str]) -> None:
    """``traceparent`` of the tool call's span, when tracing, unless the tool sends its own."""
    given = {name.lower() for name in headers}
    headers.update({name: value for name, value in propagation_headers().items() if name.lower() not in given})


def request_parts(config: HttpConfig, arguments: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Rendered ``params`` (percent-encoded pairs), ``headers`` and ``json``/``data`` for httpx's build_request;
    ``UnsendableArgument`` when an argument cannot be sent as its style says."""
    query = _render_mapping(config.query, arguments, environ)
    parts: dict[str, Any] = {
        "params": [(query_text(name), query_text(value)) for name, value in _pairs_of(query)],
        "headers": {k: str(v) for k, v in _render_mapping(config.headers, arguments, environ).items()},
    }
    if config.has_json:
        parts["json"] = _render_json(config.json, arguments, environ)
    elif config.has_form:
        parts["data"] = _render_mapping(config.form, arguments, environ)
    if config.arguments:
        _add_placed(parts, config.arguments, arguments, empty_body=config.method in METHODS_WITH_CONTENT)
    return parts


def _add_placed(parts: dict[str, Any], arguments_config: Mapping[str, Any], arguments: Mapping[str, Any], *,
                empty_body: bool) -> None:
    """Add the arguments that ``arguments:`` places to the rendered templates' parts. ``empty_body``: a call that
    gives no body member still sends ``{}`` (a POST, PUT or PATCH), else no body at all (a GET, HEAD, DELETE)."""
    placed = place(arguments_config, arguments)
    parts["params"] += placed.query  # a list of pairs keeps repeated names (?id=1&id=2)
    parts["headers"].update(placed.headers)
    if placed.cookies:
        cookie = "; ".join(f"{name}={value}" for name, value in placed.cookies)
        own = next((k for k in parts["headers"] if k.lower() == "cookie"), None)
        parts["headers"]["Cookie"] = f"{parts['headers'].pop(own)}; {cookie}" if own else cookie
    if placed.has_json_body:
        parts.pop("data", None)
        parts["json"] = placed.json_body
    elif placed.body or (empty_body and any(p.location == "body" for p in placements(arguments_config).values())):
        base = parts.get("json")
        parts["json"] = {**(base if isinstance(base, dict) else {}), **placed.body}
    if placed.form:  # httpx takes repeated form fields as a list per name
        fields: dict[str, list[Any]] = {}
        for name, value in [*_pairs_of(parts.get("data") or {}), *placed.form]:
            fields.setdefault(name, []).append(value)
        parts["data"] = fields


def _with_query(url: str, pairs: list[tuple[str, str]]) -> httpx.URL:
    """``url`` with the percent-encoded ``pairs`` in its query: a name they give replaces the URL's own entries
    of that name (where the first of them stood), the others go on as written (``fields=id,name``, ``%FC``, a
    bare ``verbose``). Written by hand: httpx would encode the commas that separate an array's items (?ids=a,b)."""
    base = httpx.URL(url)
    given: dict[str, list[str]] = {}
    for name, value in pairs:
        given.setdefault(name, []).append(value)
    entries: list[str] = []
    replaced: set[str] = set()
    for entry in base.query.decode("ascii").split("&"):
        name = query_text(unquote_plus(entry.partition("=")[0]))  # compared as the pairs' names are written
        if name not in given:
            entries += [entry] if entry else []
        elif name not in replaced:
            replaced.add(name)
            entries += [f"{name}={value}" for value in given[name]]
    entries += [f"{name}={value}" for name, values in given.items() if name not in replaced for value in values]
    return base.copy_with(query="&".join(entries).encode("ascii"))


def _pairs_of(mapping: Any) -> list[tuple[str, Any]]:
    if isinstance(mapping, list):
        return list(mapping)
    return [(k, item) for k, v in mapping.items() for item in (v if isinstance(v, list) else [v])]


async def _send_with_retries(client: httpx.AsyncClient, request: httpx.Request, attempts: int, timeout: float,
                             allow_lists: list[list[str]], *, follow: bool) -> httpx.Response:
    """Retry connection failures and 429/502/503/504, waiting as Retry-After says (never past the timeout)."""
    policy = RetryPolicy(attempts - 1, RETRY_STATUSES, max_wait=timeout)
    for attempt in range(attempts):
        try:
            response = await _send(client, request, allow_lists, follow)
        except httpx.LocalProtocolError as exc:  # ours, not the network's: an illegal header value
            raise RefusedRequest(f"the request was not sent: it is malformed ({exc}); "
                                 "header values cannot hold line breaks or control characters") from None
        except httpx.TransportError as exc:  # connect/read failures and timeouts
            if not policy.may_retry(attempt):
                raise Unreachable(f"cannot reach {request.url.host}: {str(exc) or type(exc).__name__}") from None
            await asyncio.sleep(policy.wait_after_failure(attempt))
            continue
        if not policy.retries_status(response.status_code, response.headers, attempt):
            return response
        delay = policy.wait_for_status(response.headers, attempt)
        if policy.too_long(delay):  # waiting would outlive the call: report what the server said now
            return response
        await asyncio.sleep(delay)
    raise AssertionError("unreachable: the last attempt always returns or raises")


async def _send(client: httpx.AsyncClient, request: httpx.Request, allow_lists: list[list[str]],
                follow: bool) -> httpx.Response:
    """Send, following redirects by hand: same scheme, host and port only, re-checking each hop."""
    for _ in range(MAX_REDIRECTS + 1):
        await check_destination(request.url, allow_lists)
        response = await _send_capped(client, request)
        if not (follow and response.is_redirect):
            return response
        target = request.url.join(response.headers["location"])
        if not same_origin(request.url, target):
            raise RefusedRequest(f"refused to follow a redirect from {request.url.host} to another origin "
                                 f"({target.scheme}://{target.host}): the request may carry credentials")
        request = _redirected(client, request, response.status_code, target)
    raise RefusedRequest(f"stopped after {MAX_REDIRECTS} redirects")


async def _send_capped(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """Send and read the body, decoding it ourselves: a plain body is kept up to MAX_BODY_BYTES, a compressed
    one that decodes past it is refused (a decompression bomb is stopped at the cap, not inflated first)."""
    response = await client.send(request, stream=True)
    kept = bytearray()
    try:
        async for piece in decoded(response.aiter_raw(), response.headers.get("content-encoding"), MAX_BODY_BYTES):
            kept += piece
    except BodyTooLarge as exc:
        if exc.encoding != "identity":
            raise RefusedRequest(str(exc)) from None
    except RefusedBody as exc:
        raise RefusedRequest(str(exc)) from None
    finally:
        await response.aclose()
    headers = [(k, v) for k, v in response.headers.multi_items()
               if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
    return httpx.Response(response.status_code, headers=headers, content=bytes(kept), request=request,
                          extensions=response.extensions)


def _redirected(client: httpx.AsyncClient, request: httpx.Request, status: int, target: httpx.URL) -> httpx.Request:
    keep_body = status in (307, 308) or request.method in ("GET", "HEAD")
    method = request.method if keep_body or status not in (301, 302, 303) else "GET"
    dropped = () if keep_body else (b"content-type", b"content-length", b"transfer-encoding")
    headers = [(name, value) for name, value in request.headers.raw if name.lower() not in dropped]  # bytes: Latin-1 kept
    return client.build_request(method, target, headers=headers, content=request.content if keep_body else None)

