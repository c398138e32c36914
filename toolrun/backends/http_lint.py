"""The http backend's lint warnings: what makes some calls of an http tool fail or go astray.

The lint asks every backend for its ``warnings``; these are the http backend's, with the
rules named in docs/lint.md (optional-path-parameter, model-chosen-host, model-chosen-path,
state-changing-without-annotations).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from toolrun.backends.env_reference_lint import config_strings, env_reference_warnings
from toolrun.backends.warning import BackendWarning
from toolrun.core.templates import placeholders
from toolrun.core.tool import Tool
from toolrun.core.url_template import PATH_PARAMETER, path_parameters

if TYPE_CHECKING:
    from toolrun.backends.http_config import HttpConfig

STATE_CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@functools.cache
def _url_origin() -> re.Pattern[str]:
    return re.compile(r"^\s*([^/]*//)?[^/?#]*")  # scheme and host, up to the path


def http_warnings(tool: Tool, config: HttpConfig) -> list[BackendWarning]:
    """Every http lint warning for ``tool`` (its typed ``config``)."""
    return [*optional_path_parameter_findings(tool, config), *model_host_findings(config),
            *model_path_findings(tool, config), *annotation_findings(tool, config),
            *env_reference_warnings(config_strings(tool.backend.config, "backend.http"), ("backend.http.headers.",))]


def optional_path_parameter_findings(tool: Tool, config: HttpConfig) -> Iterator[BackendWarning]:
    """optional-path-parameter: a url {name} whose parameter the model may leave out."""
    url = config.url
    required = set(tool.parameters.get("required") or [])
    declared = tool.parameters.get("properties") or {}
    for name in dict.fromkeys(path_parameters(url)):
        if name in declared and name not in required:
            yield BackendWarning("optional-path-parameter", f"parameters.properties.{name}",
                f"the url needs {{{name}}}, but {name!r} is not in parameters.required: calls without it fail; "
                "add it to required",
            )


def model_host_findings(config: HttpConfig) -> Iterator[BackendWarning]:
    """model-chosen-host: a template in an http url's scheme or host lets the model pick the server."""
    for key, url in (("url", config.url), ("base_url", config.base_url)):
        if url is None:
            continue
        origin = _url_origin().match(url)
        text = origin.group(0) if origin else ""
        if key == "url" and "//" not in text:
            continue  # a path under base_url: the host is base_url's
        if "{{" in text or "{%" in text or PATH_PARAMETER.search(text):
            yield BackendWarning("model-chosen-host", f"backend.http.{key}",
                f"the {key}'s host comes from a model value ({text.strip()!r}): the model picks where the "
                "request — with its headers and credentials — goes; write the host yourself (or "
                "${env:NAME}) and pass the value in the path or query, or limit it with allow_hosts",
            )


# Values that leave a path segment once put in a URL as written; a parameter that allows none stays in it.
_SEGMENT_ESCAPES = ("..", "a/b", "a?b", "a#b")


def _value_stays_in_segment(schema: Any) -> bool:
    """True when the schema allows no value that climbs out of a path segment or starts a query."""
    if not isinstance(schema, dict):
        return False
    if isinstance(schema.get("enum"), list):
        return all(not any(escape in str(value) for escape in ("..", "/", "?", "#")) for value in schema["enum"])
    if "const" in schema:
        return not any(escape in str(schema["const"]) for escape in ("..", "/", "?", "#"))
    if schema.get("type") in ("integer", "number", "boolean"):
        return True
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            return not any(re.search(pattern, probe) for probe in _SEGMENT_ESCAPES)
        except re.error:
            return False
    return False


def model_path_findings(tool: Tool, config: HttpConfig) -> Iterator[BackendWarning]:
    """model-chosen-path: a {{ }} template in an http url's path puts a model value in it unencoded."""
    url = config.url
    origin = _url_origin().match(url)
    path = url[origin.end():] if origin and "//" in origin.group(0) else url
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    if "{{" not in path and "{%" not in path:
        return
    try:
        names = placeholders(path)
    except Exception:  # a template syntax error is the loader's to report
        return
    properties = tool.parameters.get("properties", {}) or {}
    risky = sorted(name for name in names if name in properties and not _value_stays_in_segment(properties[name]))
    if risky:
        shown = ", ".join(risky)
        yield BackendWarning("model-chosen-path", "backend.http.url",
            f"the url's path takes {shown} as written: a value like \"../admin\" or \"x?y=1\" leaves its place, "
            f"and the request goes there with the tool's headers; write {{{risky[0]}}} (a path parameter, encoded as "
            "one segment) instead of the {{ }} template, or constrain the parameter (enum, or a pattern such as "
            "^[A-Za-z0-9_-]+$)",
        )


def annotation_findings(tool: Tool, config: HttpConfig) -> Iterator[BackendWarning]:
    """state-changing-without-annotations: a POST/PUT/PATCH/DELETE tool with no hints."""
    if tool.annotations is not None:
        return
    method = config.method
    if method in STATE_CHANGING_METHODS:
        yield BackendWarning(
            "state-changing-without-annotations",
            "backend",
            f"{method} tool without `annotations`: say whether it is destructive and idempotent, e.g. "
            "`annotations: {read_only: false, destructive: false, idempotent: true}` "
            "(destructive: true also asks for approval before each call)",
        )
