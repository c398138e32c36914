"""Security schemes -> headers and query parameters that read ``${env:NAME}``: never a literal secret.

Variable names start with a prefix, by default from the API's title (``Swagger Petstore`` ->
``SWAGGER_PETSTORE_TOKEN``);
with several schemes, each name carries its scheme's name too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from toolrun.openapi.text import identifier


@dataclass
class Credentials:
    """What the toolset sends for authentication, and which variables the user must set."""

    headers: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)  # NAME -> what to put in it
    notes: list[str] = field(default_factory=list)

    def merged_headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        return headers


def schemes_of(document: dict[str, Any], swagger2: bool) -> dict[str, Any]:
    """The document's security schemes by name."""
    if swagger2:
        schemes = document.get("securityDefinitions")
    else:
        components = document.get("components")
        schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    return {str(k): v for k, v in schemes.items() if isinstance(v, dict)} if isinstance(schemes, dict) else {}


def required_schemes(document: dict[str, Any], schemes: dict[str, Any]) -> list[str]:
    """The schemes of the document's first global security requirement; else every scheme the document has."""
    security = document.get("security")
    if isinstance(security, list):
        for requirement in security:
            if isinstance(requirement, dict) and requirement:
                return [name for name in requirement if name in schemes]
        return []
    return list(schemes)[:1]


def credentials(prefix: str, schemes: dict[str, Any], used: list[str], resolve: Any) -> Credentials:
    """Headers/query/cookies for the ``used`` schemes, each secret an ``${env:PREFIX_...}`` reference."""
    found = Credentials()
    suffixes = scheme_suffixes(list(schemes))  # from every scheme: the same name in every tool
    for scheme_name in used:
        scheme = resolve(schemes[scheme_name])
        if not isinstance(scheme, dict):
            continue
        suffix = suffixes[scheme_name]
        kind = str(scheme.get("type", "")).lower()
        http_scheme = str(scheme.get("scheme", "")).lower()
        where, name = str(scheme.get("in", "header")), str(scheme.get("name") or "X-API-Key")
        if kind == "apikey" and not TOKEN.fullmatch(name):
            found.notes.append(f"security scheme {scheme_name!r}: its {where} name "
                               f"{name!r} is not a plain name (letters, digits, -_.): add it by hand")
        elif kind == "apikey":
            variable = _variable(prefix, suffix, "_API_KEY")
            reference = f"${{env:{variable}}}"
            {"query": found.query, "cookie": found.cookies}.get(where, found.headers)[name] = reference
            found.variables[variable] = f"the API key ({name} in {where})"
        elif kind == "basic" or (kind == "http" and http_scheme == "basic"):
            variable = _variable(prefix, suffix, "_BASIC_AUTH")
            found.headers["Authorization"] = f"Basic ${{env:{variable}}}"
            found.variables[variable] = "base64 of user:password (e.g. `printf %s user:pass | base64`)"
        elif (kind == "http" and http_scheme == "bearer") or kind in ("oauth2", "openidconnect"):
            variable = _variable(prefix, suffix, "_TOKEN")
            found.headers["Authorization"] = f"Bearer ${{env:{variable}}}"
            how = "a bearer token" if kind == "http" else f"an access token obtained through {scheme.get('type')}"
            found.variables[variable] = how
        else:
            found.notes.append(f"security scheme {scheme_name!r} ({scheme.get('type')} {http_scheme}) "
                               "is not supported: add its header by hand")
    return found


# A header, cookie or query name as RFC 9110 spells a token: no `=`, `;`, braces or `${`, so a
# document's name cannot add a cookie, render a template or pick which variable is sent.
TOKEN = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


def _variable(prefix: str, scheme: str, kind: str) -> str:
    """PREFIX + _SCHEME + _KIND, without saying the kind twice (a scheme named api_key)."""
    name = f"{prefix}{scheme}"
    return name if name.endswith(kind) else f"{name}{kind}"


# Words a scheme's name shares with every other scheme's: "ApiKeyAuth", "bearerAuth" say nothing.
_GENERIC_WORDS = frozenset("api apikey key keys auth authentication authorization scheme security token tokens bearer basic "
                           "http https oauth oauth2 jwt header query cookie".split())


def scheme_suffixes(names: list[str]) -> dict[str, str]:
    """A variable-name part per scheme: ``AdminApiKeyAuth`` -> ``_ADMIN``, ``ApiKeyAuth`` -> nothing."""
    def words(name: str) -> str:
        split = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
        kept = [w for w in re.split(r"[^A-Za-z0-9]+", split) if w and w.lower() not in _GENERIC_WORDS]
        return "_".join(kept).upper()

    if len(names) < 2:  # one scheme: nothing to tell apart (`apikey` gives NYT_API_KEY, not NYT_APIKEY_API_KEY)
        return {name: "" for name in names}
    short = {name: words(name) for name in names}
    clashes = {value for value in short.values() if list(short.values()).count(value) > 1}
    return {name: f"_{identifier(name).upper()}" if short[name] in clashes and len(names) > 1
            else (f"_{short[name]}" if short[name] else "") for name in names}
