"""The http backend's config, parsed once from ``backend.http`` into a frozen ``HttpConfig``.

``parse_http_config`` returns the typed config or every ``ConfigProblem`` it found (bad
method, unparseable url, template syntax errors, bad retries/timeout/extract/allow_hosts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolrun.backends.base import ConfigProblem
from toolrun.backends.extract import ExtractError, parse_path
from toolrun.backends.http_arguments import placement_problems, placements
from toolrun.backends.http_errors import DEFAULT_ERROR_EXCERPT
from toolrun.core.durations import parse_duration
from toolrun.core.templates import check_template, template_fix
from toolrun.core.url_template import PATH_PARAMETER, path_parameters

METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
DEFAULT_RETRIES = 2
_DURATION_FIX = "write it like 30s, 500ms or 2m"


@dataclass(frozen=True)
class HttpConfig:
    """One http tool's request: what to send where, how to read the answer, how hard to try."""

    url: str
    method: str = "GET"
    base_url: str | None = None
    query: Mapping[str, Any] | None = None
    headers: Mapping[str, Any] | None = None
    has_json: bool = False  # `json: null` is a body too
    json: Any = None
    has_form: bool = False
    form: Any = None
    arguments: Mapping[str, Any] | None = None  # where `arguments:` places each argument (http_arguments)
    extract: str | None = None
    result: str | None = None
    retries: int = DEFAULT_RETRIES
    timeout: float | None = None  # None: the tool's timeout
    idempotent: bool = False
    allow_hosts: tuple[str, ...] | None = None
    follow_redirects: bool = True
    error_excerpt: int = DEFAULT_ERROR_EXCERPT  # characters of an error response the model sees


def parse_http_config(config: Mapping[str, Any]) -> HttpConfig | list[ConfigProblem]:
    """The typed config, or every problem of ``config``."""
    problems = [*_body_problems(config), *_request_problems(config), *_template_problems(config),
                *_placement_problems(config), *_option_problems(config)]
    return problems or http_config(config)


def http_config(config: Mapping[str, Any]) -> HttpConfig:
    """``config`` as an ``HttpConfig``, unchecked: for a tool that never went through the loader."""
    allow_hosts = config.get("allow_hosts")
    return HttpConfig(
        url=str(config["url"]),
        method=str(config.get("method", "GET")).upper(),
        base_url=str(config["base_url"]) if config.get("base_url") else None,
        query=config.get("query"),
        headers=config.get("headers"),
        has_json="json" in config,
        json=config.get("json"),
        has_form="form" in config,
        form=config.get("form"),
        arguments=config.get("arguments") or None,
        extract=str(config["extract"]) if config.get("extract") else None,
        result=str(config["result"]) if config.get("result") else None,
        retries=DEFAULT_RETRIES if config.get("retries") is None else int(config["retries"]),
        timeout=parse_duration(config["timeout"]) if config.get("timeout") is not None else None,
        idempotent=bool(config.get("idempotent")),
        allow_hosts=tuple(allow_hosts) if allow_hosts is not None else None,
        follow_redirects=config.get("follow_redirects", True) is not False,
        error_excerpt=int(config.get("error_excerpt") or DEFAULT_ERROR_EXCERPT),
    )


def _body_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """Two bodies (the schema cannot say they exclude each other)."""
    if "json" in config and "form" in config:
        return [ConfigProblem("form", "'json' and 'form' are both set", "send one body: keep json or form")]
    return []


def _request_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """The method and the url."""
    problems: list[ConfigProblem] = []
    method = str(config.get("method", "GET")).upper()
    if method not in METHODS:
        problems.append(ConfigProblem("method", f"unknown HTTP method {config.get('method')!r}",
                                      "use one of " + ", ".join(sorted(METHODS))))
    url = config.get("url")
    if not isinstance(url, str) or not url.strip():
        problems.append(ConfigProblem("url", "http backend needs a url", "e.g. url: /items/{city}"))
    else:
        problems += _url_problems(url, config)
    return problems


def _placement_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """Where ``arguments:`` places each argument, and path placements the url has no {name} for."""
    problems: list[ConfigProblem] = []
    url = config.get("url")
    for argument, what, fix in placement_problems(config.get("arguments")):
        problems.append(ConfigProblem(f"arguments.{argument}" if argument else "arguments",
                                      f"arguments.{argument}: {what}" if argument else what, fix))
    if isinstance(url, str) and not placement_problems(config.get("arguments")):
        in_url = set(path_parameters(url))
        for argument, placement in placements(config.get("arguments")).items():
            if placement.location == "path" and argument not in in_url:
                problems.append(ConfigProblem(
                    f"arguments.{argument}", f"arguments.{argument}: in: path, but the url has no {{{argument}}}",
                    f"write {{{argument}}} in the url where the value goes"))
    return problems


def _url_problems(url: str, config: Mapping[str, Any]) -> list[ConfigProblem]:
    if error := check_template(PATH_PARAMETER.sub("x", url)):
        return [ConfigProblem("url", error, template_fix(error))]
    # Templates and secrets stand in as plain text so the URL's shape can be parsed.
    sample = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\$\{env:[^}]*\}", "x", PATH_PARAMETER.sub("x", url))
    try:
        scheme = scheme_httpx_reads(sample)
    except ValueError as exc:
        return [ConfigProblem("url", f"the url does not parse: {exc}",
                              "write a full URL (https://host/path) or a path under base_url")]
    if not scheme and not sample.startswith("x") and not config.get("base_url"):
        return [ConfigProblem("url", f"the url {url!r} is relative and there is no base_url",
                              "set defaults: {http: {base_url: ...}} in the toolset, or base_url in the tool")]
    if scheme and scheme not in ("http", "https"):
        return [ConfigProblem("url", f"only http and https URLs are supported, not {scheme}",
                              "use an http:// or https:// URL")]
    return []


# A URL of a shape httpx always reads, and reads the same way: ASCII with no space or control character,
# http(s)://, a host that is a valid IPv4 address or a name of letters, digits, "-" and "." that httpx
# cannot take for one, an optional port, then a path starting with one "/" and a query. Other URLs (an
# IPv6 host, a name beyond ASCII ...) are read by httpx itself.
_IPV4_PART = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_PLAIN_URL = re.compile(
    rf"(?:(?P<scheme>https?)://(?:(?:{_IPV4_PART}\.){{3}}{_IPV4_PART}|(?=[A-Za-z0-9.-]*[A-Za-z-])[A-Za-z0-9.-]+)"
    r"(?::[0-9]{1,5})?)?(?:/(?!/)[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?(?:\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]*)?"
)
_PLAIN_URL_MAX_LENGTH = 65536  # httpx refuses a longer URL


def scheme_httpx_reads(url: str) -> str:
    """The scheme httpx reads in ``url`` ("" when relative); ``ValueError`` with httpx's words when it does not parse.

    A plainly shaped URL (nearly every tool's) is read here: a catalog's load and lint do without httpx."""
    plain = _PLAIN_URL.fullmatch(url) if len(url) <= _PLAIN_URL_MAX_LENGTH else None
    if plain is not None:
        return plain.group("scheme") or ""
    import httpx  # tens of ms: only a URL of another shape, which httpx reads (and words the error of)

    try:
        return httpx.URL(url).scheme
    except httpx.InvalidURL as exc:
        raise ValueError(str(exc)) from None


def _template_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """extract with result, a bad extract path, and template syntax errors."""
    problems: list[ConfigProblem] = []
    if config.get("extract") and config.get("result"):
        problems.append(ConfigProblem("result", "use either extract or result, not both",
                                      "keep extract for a path, or result for a template"))
    if config.get("extract"):
        try:
            parse_path(str(config["extract"]))
        except ExtractError as exc:
            problems.append(ConfigProblem("extract", str(exc), "e.g. extract: data.items[0].name"))
    for key in ("base_url", "result"):
        if isinstance(config.get(key), str) and (error := check_template(config[key])):
            problems.append(ConfigProblem(key, error, template_fix(error)))
    for key in ("query", "headers", "json", "form"):
        problems += [ConfigProblem(key, error, template_fix(error)) for error in _template_errors(config.get(key))]
    return problems


def _option_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """retries, error_excerpt, timeout and allow_hosts."""
    problems: list[ConfigProblem] = []
    retries = config.get("retries")
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or retries < 0):
        problems.append(ConfigProblem("retries", f"retries must be a whole number ≥ 0, got {retries!r}",
                                      "e.g. retries: 2 (0 for none)"))
    cap = config.get("error_excerpt")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        problems.append(ConfigProblem("error_excerpt", f"error_excerpt must be a whole number ≥ 1, got {cap!r}",
                                      f"e.g. error_excerpt: 4000 (characters; default {DEFAULT_ERROR_EXCERPT})"))
    if config.get("timeout") is not None:
        try:
            parse_duration(config["timeout"])
        except ValueError as exc:
            problems.append(ConfigProblem("timeout", str(exc), _DURATION_FIX))
    allow_hosts = config.get("allow_hosts")
    if allow_hosts is not None and (not isinstance(allow_hosts, list)
                                    or not all(isinstance(h, str) for h in allow_hosts)):
        problems.append(ConfigProblem("allow_hosts", "allow_hosts must be a list of host names",
                                      "e.g. allow_hosts: [api.internal]"))
    return problems


def _template_errors(value: Any) -> list[str]:
    if isinstance(value, str):
        error = check_template(value)
        return [error] if error else []
    if isinstance(value, dict):
        return [e for v in value.values() for e in _template_errors(v)]
    if isinstance(value, list):
        return [e for v in value for e in _template_errors(v)]
    return []
