"""The http backend: one HTTP request per call, built from templates over the arguments.

``url: "/items/{city}"``: single-brace names are path parameters, URL-encoded (``/``
included) and joined to ``base_url``; ``query``, ``headers``, ``json``/``form`` bodies and
``result`` are Jinja2 templates. ``${env:NAME}`` brings a secret in at call time. A
``json`` string that is exactly ``"{{ name }}"`` keeps the argument's JSON type, and a
query/form/header/json entry whose template needs an argument the call did not give is
left out, so optional parameters just work. ``arguments`` (see ``http_arguments``) sends
arguments to a query/header/cookie/path/body/form location by name, with OpenAPI's array
styles, without templates. In ``result``, read JSON keys with brackets
(``response.json['items']``): ``.items`` would find the dict method, not the key.

Safety: ``allow_hosts`` (the tool's and the call context's) limits where requests go;
link-local and cloud-metadata addresses are refused; redirects are followed by hand and
only to the same scheme, host and port. Every result and error passes through
``secrets.redact``, so a token echoed back by a server never reaches the model.

This module is what loading, linting and listing a catalog ask of the backend (its config,
placeholders and warnings), without httpx; ``http_request`` builds and sends the request,
imported at a tool's first call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from toolrun.backends.base import Backend, BackendOutput, CallContext, ConfigProblem
from toolrun.backends.http_config import HttpConfig, http_config, parse_http_config
from toolrun.backends.http_lint import http_warnings
from toolrun.backends.warning import BackendWarning
from toolrun.core.templates import placeholders, value_placeholders
from toolrun.core.tool import Tool
from toolrun.core.url_template import PATH_PARAMETER, path_parameters


class HttpBackend(Backend):
    kind = "http"
    arguments_through_templates = True

    def placeholders(self, tool: Tool) -> set[str]:
        """Path parameters plus every argument used by url/query/headers/body/result templates."""
        config = tool.backend.config
        url = str(config.get("url") or "")
        names = set(path_parameters(url)) | placeholders(PATH_PARAMETER.sub("", url))
        for key in ("base_url", "query", "headers", "json", "form"):
            names |= value_placeholders(config.get(key))
        if isinstance(config.get("arguments"), Mapping):
            names |= {str(name) for name in config["arguments"]}
        if isinstance(config.get("result"), str):
            names |= placeholders(config["result"]) - {"response"}
        return names

    def parse(self, config: Mapping[str, Any]) -> HttpConfig | list[ConfigProblem]:
        """The typed config (``HttpConfig``), or every problem of ``config``."""
        return parse_http_config(config)

    def config_of(self, tool: Tool) -> HttpConfig:
        """The config parsed at load; for a tool built by hand, taken as written (the request-time checks still refuse)."""
        parsed = tool.backend.parsed
        if not isinstance(parsed, HttpConfig):
            parsed = http_config(tool.backend.config)
            tool.backend = replace(tool.backend, parsed=parsed)  # once: a cached catalog's tool at its first call
        return parsed

    def warnings(self, tool: Tool) -> list[BackendWarning]:
        """Where the model picks the host or path, optional path parameters, unannotated writes (http_lint)."""
        return http_warnings(tool, self.config_of(tool))

    def prepare_to_serve(self) -> None:
        """httpx, httpcore and the request machinery imported, the CA certificates read: 50-150 ms a first call
        would spend on a server's event loop, every other client's requests waiting."""
        from toolrun.backends.http_request import send  # noqa: F401 - imported for the calls to come
        from toolrun.core.tls import shared_ssl_context

        shared_ssl_context()

    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        # httpx and the request machinery: only a call sends a request, not the load, lint or listing of a catalog
        from toolrun.backends.http_request import send

        return await send(tool, self.config_of(tool), arguments, context)
