"""``import_openapi``: an OpenAPI 3.0/3.1 or Swagger 2.0 document -> one toolset of HTTP tools.

Reads the document (file or URL), picks the operations (globs over path and operationId,
tags), converts each (``operations``), settles unique names, the base URL and the
credentials, and writes the toolset's text (``toolset``). What cannot be imported is
skipped with one sentence naming the operation; the rest of the document still imports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

from toolrun.core.credentials import origin, without_login
from toolrun.core.secrets import ENV_REFERENCE
from toolrun.openapi.credential_options import CredentialOptions, looks_like_secret
from toolrun.openapi.credential_options import apply as apply_options
from toolrun.openapi.document import Documents, OpenAPIError, is_url, shown_location, too_deep, url_scheme
from toolrun.openapi.operations import METHODS, ImportedTool, Operation, Unsupported, convert_operation
from toolrun.openapi.overrides import Overrides, read_overrides
from toolrun.openapi.references import ReferenceRules
from toolrun.openapi.schemas import DanglingRef, Resolver
from toolrun.openapi.security import Credentials, credentials, required_schemes, schemes_of
from toolrun.openapi.text import clean_description, env_prefix, has_template_syntax, tool_name


@dataclass(frozen=True)
class Skipped:
    """An operation (or webhook) not imported, and why, in one sentence."""

    what: str
    reason: str

    def __str__(self) -> str:
        return f"{self.what}: {self.reason}"


@dataclass
class ImportResult:
    """The toolset's text and what the import found out on the way."""

    text: str
    title: str
    source: str
    spec_version: str
    tools: list[ImportedTool]
    skipped: list[Skipped]
    not_selected: int
    base_url: str | None
    variables: dict[str, str] = field(default_factory=dict)  # environment variable -> what to put in it
    notes: list[str] = field(default_factory=list)
    allow_hosts: list[str] = field(default_factory=list)  # the hosts the document's servers name
    other_origins: list[str] = field(default_factory=list)  # "GET /x (op): https://other.example", sent no credentials
    without_credentials: list[str] = field(default_factory=list)  # operations that need none (`security: []`)
    overrides_name: str | None = None  # the file of hand edits (billing.overrides), there or not
    overrides_applied: bool = False


@dataclass(frozen=True)
class Selection:
    """Which operations to import: globs over path and operationId, and tags (empty: all)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def wants(self, operation: Operation) -> bool:
        names = [operation.path, str(operation.spec.get("operationId") or "")]
        if self.include and not any(fnmatchcase(n, g) for g in self.include for n in names if n):
            return False
        if any(fnmatchcase(n, g) for g in self.exclude for n in names if n):
            return False
        if self.tags:
            tags = operation.spec.get("tags") or []
            return any(tag in tags for tag in self.tags)
        return True


def import_openapi(spec: str | Path, *, include: Iterable[str] = (), exclude: Iterable[str] = (),
                   tags: Iterable[str] = (), base_url: str | None = None, allow_external_refs: bool = False,
                   headers: Iterable[str] = (), auth_env: str | None = None, env_prefix: str | None = None,
                   overrides: str | Path | None = None) -> ImportResult:
    """Import the OpenAPI document at ``spec`` (a path or an http(s) URL) as a toolset.

    ``headers`` (``"Name: value"``, a secret only as ``${env:NAME}``) go to every tool; ``auth_env``
    names the token variable, ``env_prefix`` starts every variable's name (default: from the
    API's title); ``overrides`` is a file of hand edits applied to the result (see
    ``toolrun.openapi.overrides``; a file that does not exist holds none).

    Raises ``OpenAPIError`` (a ``UserError``) when the document cannot be read or is not
    OpenAPI, or a ``$ref`` names a place it may not make the import read (another origin, a
    file outside its folder: ``allow_external_refs`` allows those; a metadata address never);
    every other problem of a single operation is a ``Skipped`` entry instead.
    """
    shown = shown_location(str(spec))
    options = CredentialOptions.parse(headers, auth_env, env_prefix)  # a typed secret stops before any reading
    edits = read_overrides(Path(overrides)) if overrides is not None else None
    request = _Request(spec, shown, Selection(tuple(include), tuple(exclude), tuple(tags)), base_url,
                       allow_external_refs, options, edits, Path(overrides).name if overrides is not None else None)
    try:
        return _import(request)
    except RecursionError:  # a schema nested hundreds deep: converting or writing it out recurses per level
        raise too_deep(shown) from None


@dataclass(frozen=True)
class _Request:
    """What to import and how: the arguments of ``import_openapi``, checked."""

    spec: str | Path
    shown: str
    selection: Selection
    base_url: str | None
    allow_external_refs: bool
    options: CredentialOptions
    overrides: Overrides | None
    overrides_name: str | None


def _import(request: _Request) -> ImportResult:
    from toolrun.openapi.toolset import render_toolset  # the writer needs the result's parts first

    spec, shown, base_url = request.spec, request.shown, request.base_url
    _check_locations(spec, base_url)
    location = str(spec) if is_url(str(spec)) else str(Path(spec).resolve())
    documents = Documents()
    document = documents.load(location)
    swagger2, spec_version = _version(document, shown)
    resolver = Resolver(documents, location, ReferenceRules(location, request.allow_external_refs))
    title = _title(document, shown)
    found = _convert_selected(document, location, resolver, request.selection, swagger2)
    found.not_selected += _skip_webhooks(document, location, request.selection, found.skipped)
    if not found.tools:
        fix = ("check --include/--exclude/--tag" if found.not_selected else "see the reasons above" if found.skipped
               else "an OpenAPI document lists its operations under `paths:`")
        raise OpenAPIError(_nothing_imported(shown, found.skipped, found.not_selected), fix, shown)
    _name_tools(found.tools)

    prefix = request.options.env_prefix or env_prefix(title)
    notes = found.notes
    variables = {name: "the API's base URL (--base-url)" for name in ENV_REFERENCE.findall(base_url or "")}
    resolved_base = base_url or _without_login(_base_url(document, swagger2, location, prefix, variables, notes), notes)
    schemes = schemes_of(document, swagger2)
    everywhere = required_schemes(document, schemes)
    creds = _credentials(schemes, everywhere, prefix, resolver, location, notes)
    apply_options(request.options, creds)
    variables.update(creds.variables)
    if not schemes and not creds.variables:
        notes.append("the document declares no security schemes, so no tool sends credentials; if the API needs "
                     "them, import again with --auth-env NAME (a bearer token) or --header 'Name: ${env:NAME}'")
    for tool in found.tools:
        tool.base_url = None if base_url else _without_login(_operation_base(tool.operation, location), notes)
        variables.update(_tool_credentials(tool, creds, schemes, everywhere, prefix, resolver, location, notes))
    result = ImportResult("", title, shown, spec_version, found.tools, found.skipped, found.not_selected,
                          resolved_base, variables, notes + creds.notes,
                          overrides_name=request.overrides_name, overrides_applied=request.overrides is not None)
    _pin_origins(result)
    result.text = render_toolset(result, creds, request.overrides)
    return result


def _check_locations(spec: str | Path, base_url: str | None) -> None:
    """Refuse a --base-url that is no http(s) URL, and a document URL whose host does not parse."""
    if base_url is not None and not is_url(base_url) and not base_url.startswith("${env:"):
        raise OpenAPIError(f"the base URL {base_url!r} is not an http(s) URL",
                           "give its scheme and host, e.g. --base-url https://api.example.com/v1 (or ${env:NAME})")
    if base_url is not None and is_url(base_url):
        parts = urlsplit(base_url)
        secret = [name for name, value in parse_qsl(parts.query, keep_blank_values=True) if looks_like_secret(name, value)]
        if parts.username is not None or parts.password is not None or secret:
            what = f"the query parameter {secret[0]}" if secret else "a user name and password"
            raise OpenAPIError(f"the base URL holds {what}, and the toolset file would keep it",
                               "give the URL without it, and the credential from the environment: --auth-env NAME, "
                               "or --header 'Authorization: Basic ${env:NAME}'")
    if str(spec).lower().startswith(("http://", "https://")) and not is_url(str(spec)):
        raise OpenAPIError(f"{spec} is not a URL that can be read (its host does not parse)",
                           "check the URL, e.g. https://api.example.com/openapi.json", str(spec))


def _title(document: dict[str, Any], shown: str) -> str:
    """The API's title, markup out ("Legacy <b>Billing</b>"): it names the variables and heads the file."""
    info = document.get("info")
    info = info if isinstance(info, dict) else {}
    return " ".join(clean_description(str(info.get("title") or "")).split()) or Path(urlsplit(shown).path).stem or "API"


@dataclass
class _Converted:
    """The selected operations as tools, those skipped, the notes on the way, and how many were not selected."""

    tools: list[ImportedTool] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_selected: int = 0


def _convert_selected(document: dict[str, Any], location: str, resolver: Resolver, selection: Selection,
                      swagger2: bool) -> _Converted:
    found = _Converted()
    listed = document.get("consumes")
    consumes = listed if isinstance(listed, list) else []
    for operation in _operations(document, location, resolver, found.skipped):
        if not selection.wants(operation):
            found.not_selected += 1
            continue
        try:
            tool = convert_operation(operation, resolver, swagger2=swagger2, consumes=consumes)
        except Unsupported as exc:
            found.skipped.append(Skipped(operation.label, str(exc)))
            continue
        found.tools.append(tool)
        found.notes += [f"{operation.label}: {note}" for note in tool.notes]
    return found


def _skip_webhooks(document: dict[str, Any], location: str, selection: Selection, skipped: list[Skipped]) -> int:
    """Each selected webhook as a Skipped entry; returns how many were outside the selection."""
    not_selected = 0
    webhooks = document.get("webhooks")
    for name, item in webhooks.items() if isinstance(webhooks, dict) else ():
        hooks = [Operation(method, str(name), item, item[method], location)
                 for method in METHODS if isinstance(item, dict) and isinstance(item.get(method), dict)]
        if hooks and not any(selection.wants(hook) for hook in hooks):
            not_selected += 1  # outside --include/--tag: not worth a line in the summary
            continue
        skipped.append(Skipped(f"webhook {name!r}", "the API calls you with it: nothing for a tool to send"))
    return not_selected


def _tool_credentials(tool: ImportedTool, creds: Credentials, schemes: dict[str, Any], everywhere: list[str],
                      prefix: str, resolver: Resolver, location: str, notes: list[str]) -> dict[str, str]:
    """The variables of a tool's own scheme (set on the tool); an operation that needs none is marked so."""
    own = [name for name in _operation_schemes(tool.operation, schemes) if name not in everywhere]
    if own:  # an operation that needs another scheme than the whole API: its own header or query
        extra = _credentials(schemes, own, prefix, resolver, location, notes)
        tool.headers, tool.query = extra.merged_headers(), extra.query
        return extra.variables
    tool.needs_no_credentials = bool(creds.variables) and _needs_no_credentials(tool.operation)
    return {}


def _host_entry(url: str) -> str | None:
    """An ``allow_hosts`` entry for the URL's host: ``api.example.com``, with ``:8443`` when it names a port."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        return None
    return f"{host}:{port}" if port and ":" not in host else host


def _pin_origins(result: ImportResult) -> None:
    """Pin ``allow_hosts`` to the document's servers, and send no credentials to a tool on another origin.

    A tool's own server (``servers:`` of its operation or path, or a path that is a whole URL) is the
    document's choice: the toolset's credentials stay with the toolset's base URL (the http backend
    sends ``${env:…}`` defaults only there), and the tool's own are left out.
    """
    home = origin(result.base_url) if result.base_url else None  # the one credential rule's origin
    hosts = [_host_entry(result.base_url)] if home and result.base_url else []
    for tool in result.tools:
        own = tool.url if is_url(tool.url) else tool.base_url
        where = origin(own) if own else None
        if where is None or where == home:
            continue
        hosts.append(_host_entry(own or ""))
        shown = f"{where[0]}://{where[1]}:{where[2]}"
        dropped = ", ".join([*tool.headers, *tool.query])
        tool.headers, tool.query = {}, {}
        result.other_origins.append(f"{tool.operation.label} is on {shown}: the toolset's credentials are not sent "
                                    "to it" + (f" (nor its own: {dropped})" if dropped else "")
                                    + "; add them to the tool by hand if you trust that host")
    if home:
        result.allow_hosts = [host for host in dict.fromkeys(hosts) if host]
    elif result.other_origins:
        result.notes.append("allow_hosts is not set: the base URL is an environment variable; add it once you know "
                            "the host")


def _version(document: Any, shown: str) -> tuple[bool, str]:
    """(is Swagger 2.0, the version as written); OpenAPIError for anything else."""
    if not isinstance(document, dict):
        what = "it is empty" if document is None else "it is not a mapping"
        raise OpenAPIError(f"{shown} is not an OpenAPI document ({what})",
                           "pass an OpenAPI 3.x or Swagger 2.0 document", shown)
    if str(document.get("swagger", "")).startswith("2"):
        return True, f"Swagger {document['swagger']}"
    version = str(document.get("openapi", ""))
    if version.startswith("3"):
        return False, f"OpenAPI {version}"
    found = f"swagger: {document['swagger']}" if "swagger" in document else (
        f"openapi: {version}" if version else "no openapi or swagger version")
    fix = ("convert a Swagger 1.x document to 2.0 or 3.x first" if "swagger" in document
           else "toolrun reads OpenAPI 3.0 and 3.1 and Swagger 2.0" if version
           else "an OpenAPI document starts with `openapi: 3.x.y` (or `swagger: \"2.0\"`)")
    raise OpenAPIError(f"{shown} is not an OpenAPI 3.x or Swagger 2.0 document ({found})", fix, shown)


def _operations(document: dict[str, Any], location: str, resolver: Resolver,
                skipped: list[Skipped]) -> list[Operation]:
    paths = document.get("paths")
    if not isinstance(paths, dict):
        return []
    found = []
    for path, item in paths.items():
        base = location
        try:
            item, base = resolver.follow(item, location)  # a path item may be a $ref to another file
        except DanglingRef as exc:
            skipped.append(Skipped(f"path {path}", str(exc)))
            continue
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            spec = item.get(method)
            if isinstance(spec, dict):
                found.append(Operation(method, str(path), item, spec, base))
    return found


def _name_tools(tools: list[ImportedTool]) -> None:
    """Names from operationId (or method + path), made valid and unique in document order."""
    taken: set[str] = set()
    for tool in tools:
        operation_id = tool.operation.spec.get("operationId")
        if isinstance(operation_id, str) and operation_id.strip():
            name = tool_name(operation_id)
        else:
            words = re.sub(r"[^A-Za-z0-9]+", "_", tool.operation.path).strip("_")
            name = tool_name(f"{tool.operation.method}_{words}" if words else tool.operation.method)
        unique, number = name, 2
        while unique.lower() in taken:
            unique, number = f"{name[:60]}_{number}", number + 1
        taken.add(unique.lower())
        tool.name = unique


def _server_url(servers: Any, location: str) -> str | None:
    """The first server's URL, variables filled with their defaults (else their first value), resolved against
    the document's URL; a variable with neither stays ``{name}``."""
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
        return None
    server = servers[0]
    url = str(server.get("url") or "/")
    variables = server.get("variables")
    for name, variable in (variables if isinstance(variables, dict) else {}).items():
        default = variable.get("default") if isinstance(variable, dict) else None
        listed = variable.get("enum") if isinstance(variable, dict) else None
        if default is None and isinstance(listed, list) and listed:
            default = listed[0]  # 3.0 requires a default; a document without one still names the choices
        if default is not None:
            url = url.replace(f"{{{name}}}", str(default))
    if has_template_syntax(url):  # the http backend renders a base URL: the document's stays text
        return None
    if url_scheme(url):
        return url
    try:
        return urljoin(location, url) if is_url(location) else url
    except ValueError:  # a server URL that does not parse: as if there were none
        return None


def _base_url(document: dict[str, Any], swagger2: bool, location: str, prefix: str, variables: dict[str, str],
              notes: list[str]) -> str | None:
    if swagger2:
        listed = document.get("schemes")
        schemes: list[Any] = listed if isinstance(listed, list) else []
        source = urlsplit(location) if is_url(location) else None
        scheme = "https" if "https" in schemes else (schemes[0] if schemes else (source.scheme if source else "https"))
        host = document.get("host") or (source.netloc if source else None)
        base_path = str(document.get("basePath") or "")
        url = f"{scheme}://{host}{base_path}" if host else None
    else:
        url = _server_url(document.get("servers"), location) or (urljoin(location, "/") if is_url(location) else None)
    unfilled = re.findall(r"\{([^{}]*)\}", url or "")
    if url and url_scheme(url) in ("http", "https") and not unfilled:
        return url.rstrip("/") or url
    variable = f"{prefix}_BASE_URL"
    variables[variable] = "the API's base URL, e.g. https://api.example.com/v1"
    why = (f"its server URL {url} has a variable without a value ({', '.join(unfilled)})" if unfilled
           else f"the document names no absolute server URL ({url or 'none'})")
    notes.append(f"{why}: set {variable}, or import again with --base-url")
    return f"${{env:{variable}}}"


def _without_login(url: str | None, notes: list[str]) -> str | None:
    """``url`` without a user name and password (a document read from ``https://user:pw@host/...``, or a server
    URL that names them): the file is meant to be committed, so they are left out, and a note says so."""
    if url is None or without_login(url) == url:
        return url
    note = ("the user name and password in the API's URL were left out of the file: give the credentials from the "
            "environment (import again with --auth-env NAME, or --header 'Authorization: Basic ${env:NAME}')")
    if note not in notes:
        notes.append(note)
    return without_login(url)


def _operation_base(operation: Operation, location: str) -> str | None:
    """An operation's (or its path's) own server, when it has one."""
    for servers in (operation.spec.get("servers"), operation.item.get("servers")):
        url = _server_url(servers, location)
        if url and url_scheme(url) in ("http", "https") and "{" not in url:
            return url.rstrip("/")
    return None


def _nothing_imported(shown: str, skipped: list[Skipped], not_selected: int) -> str:
    if not_selected:
        return f"none of the {not_selected} operations of {shown} matches the selection"
    if skipped:
        return f"no operation of {shown} can be imported ({len(skipped)} skipped; the first: {skipped[0]})"
    return f"{shown} has no operations (its paths are empty)"


def _operation_schemes(operation: Operation, schemes: dict[str, Any]) -> list[str]:
    """The schemes of an operation's own first security requirement (none when it has none of its own)."""
    security = operation.spec.get("security")
    if not isinstance(security, list):
        return []
    for requirement in security:
        if isinstance(requirement, dict) and requirement:
            return [name for name in requirement if name in schemes]
    return []


def _needs_no_credentials(operation: Operation) -> bool:
    """``security: []`` (or only empty requirements): the operation is public, login and health checks."""
    security = operation.spec.get("security")
    return isinstance(security, list) and all(requirement == {} for requirement in security)


def _credentials(schemes: dict[str, Any], used: list[str], prefix: str, resolver: Resolver, location: str,
                 notes: list[str]) -> Credentials:
    if not schemes or not used:
        return Credentials()

    def resolve(node: Any) -> Any:
        try:
            return resolver.follow(node, location)[0]
        except DanglingRef as exc:
            notes.append(f"a security scheme is unusable: {exc}")
            return None

    return credentials(prefix, schemes, used, resolve)
