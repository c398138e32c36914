"""Reading OpenAPI documents: from a file or an http(s) URL, YAML or JSON, and the files their ``$ref``s name.

A document is parsed once per import (``Documents`` caches by location), with the C YAML
loader when it is there: OpenAI's document is 3 MB. A trailing ``---`` (an empty second
YAML document) is tolerated; a document that is not a mapping, or cannot be read, is an
``OpenAPIError`` in one sentence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import httpx
import yaml

from toolrun.backends.http_safety import RefusedRequest
from toolrun.core.content_decoding import RefusedBody
from toolrun.core.errors import Problem, UserError
from toolrun.core.yamlsource import INT_TAG, AliasLimit, construct_bounded_int
from toolrun.openapi.references import EXTERNAL_FLAG, fetch, shown_location

FETCH_TIMEOUT_SECONDS = 30.0
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # decoded; OpenAI's document, among the largest, is 3 MB


class _Loader(AliasLimit, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML 1.1 with YAML 1.2's booleans and numbers, as the OpenAPI specification recommends: ``no``,
    ``NO`` (Norway in a list of countries), ``on`` and ``yes`` are text, not booleans; ``12:30`` is text,
    not the base-60 number 750; ``1e-05`` is a number, as in JSON, not a string.

    Aliases are limited by what they expand to, as in tool files: a document fetched from a
    server may be a "billion laughs", which the import would otherwise copy out for minutes.
    """


_BOOL_TAG, _FLOAT_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:float"
_Loader.yaml_implicit_resolvers = {  # YAML 1.1's booleans and base-60 numbers are left out, then 1.2's added
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL_TAG, INT_TAG, _FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_implicit_resolver(INT_TAG, re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"), list("-+0123456789"))
_Loader.add_implicit_resolver(_FLOAT_TAG, re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))
_Loader.add_implicit_resolver(
    _FLOAT_TAG, re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))
_Loader.add_constructor(INT_TAG, construct_bounded_int)


class OpenAPIError(UserError):
    """The document cannot be imported at all (unreadable, not OpenAPI): one sentence and a fix."""

    def __init__(self, message: str, fix: str | None = None, where: str | None = None, line: int | None = None):
        super().__init__(Problem(where and shown_location(where), line, message, fix))  # no URL's login


class RefusedFetch(OpenAPIError):
    """A fetch the rules do not allow (a metadata address, a redirect off a $ref's origin)."""


def is_url(location: str) -> bool:
    """True for an http(s) URL."""
    return url_scheme(location) in ("http", "https")


def url_scheme(text: str) -> str:
    """The scheme of ``text`` as a URL; "" for one that does not parse (``http://[x``, a host in brackets)."""
    try:
        return urlsplit(text).scheme
    except ValueError:
        return ""


def parse_text(text: str, where: str) -> Any:
    """The first non-empty YAML (or JSON) document of ``text``."""
    try:
        return _parsed(text, where)
    except RecursionError:  # [[[[...]]]] thousands deep: the parsers recurse once per level
        raise too_deep(where) from None


# OpenAPI's fields that take only a boolean (``required`` of a schema is a list, left alone): there a YAML 1.1
# boolean word (``required: no``, ``nullable: yes``, as Swagger's own YAML 1.1 reader reads them) is the boolean.
_BOOLEAN_FIELDS = frozenset({"required", "deprecated", "allowEmptyValue", "explode", "allowReserved", "nullable",
                             "readOnly", "writeOnly", "uniqueItems", "exclusiveMinimum", "exclusiveMaximum",
                             "additionalProperties"})
_YAML_1_1_BOOLEANS = {word: value for value, words in ((True, ("yes", "on")), (False, ("no", "off")))
                      for spelled in words for word in (spelled, spelled.capitalize(), spelled.upper())}


def _yaml_1_1_booleans(document: Any) -> Any:
    """``document`` with a YAML 1.1 boolean word as the boolean where OpenAPI takes only a boolean."""
    stack, seen = [document], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: the same node again, or one holding itself (&a [*a])
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _BOOLEAN_FIELDS and isinstance(value, str) and value in _YAML_1_1_BOOLEANS:
                    node[key] = _YAML_1_1_BOOLEANS[value]
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(item for item in node if isinstance(item, (dict, list)))
    return document


def too_deep(where: str) -> OpenAPIError:
    """The error for a document nested deeper than it can be read or written out."""
    return OpenAPIError("the document is nested too deeply to import",
                        "check that the file is an OpenAPI document: a real one nests a few dozen levels", where)


def _parsed(text: str, where: str) -> Any:
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)  # JSON's numbers as JSON means them, and faster than YAML
        except ValueError:
            pass  # YAML flow style, or broken JSON: the YAML parser says where
    try:
        for document in yaml.load_all(text, Loader=_Loader):
            if document is not None:
                return _yaml_1_1_booleans(document)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        if problem.startswith("aliases expand"):
            raise OpenAPIError(problem, "write the values out, or use fewer nested aliases (*name)", where, line) from None
        raise OpenAPIError(f"the document is neither YAML nor JSON: {problem}",
                           "check that the file is an OpenAPI document", where, line) from None
    return None


def read_location(location: str, refusal: Callable[[str], str | None] | None = None) -> str:
    """The text at a file path or http(s) URL (``refusal``: why a redirect may not go somewhere, see ``fetch``)."""
    if is_url(location):
        return fetch_document(location, refusal)
    path = Path(location)
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise OpenAPIError("no such file", "pass the path of an OpenAPI document or an http(s) URL",
                           location) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OpenAPIError(f"cannot read it: {exc}", "pass a UTF-8 YAML or JSON file", location) from None


def fetch_document(url: str, refusal: Callable[[str], str | None] | None = None) -> str:
    """The text at an http(s) URL, decoded by toolrun within MAX_DOCUMENT_BYTES (a server is not
    trusted); every redirect checked (``refusal``: why a hop may not go somewhere, see ``fetch``)."""
    fix = "check the URL, or download the document and pass the file"
    shown = shown_location(url)
    try:
        status, text = fetch(url, FETCH_TIMEOUT_SECONDS, MAX_DOCUMENT_BYTES, refusal)
    except RefusedRequest as exc:
        raise RefusedFetch(f"refused: {str(exc).removeprefix('refused: ')}", "nothing reads link-local or cloud-metadata addresses, "
                           f"and a $ref's redirect stays on its origin unless {EXTERNAL_FLAG} is given", shown) from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL is no HTTPError
        raise OpenAPIError(f"cannot fetch {shown}: {exc or type(exc).__name__}", fix, shown) from None
    except RefusedBody as exc:
        raise OpenAPIError(f"cannot fetch {shown}: {exc}", fix, shown) from None
    if status >= 400:
        raise OpenAPIError(f"cannot fetch {shown}: HTTP {status}", fix, shown)
    return text


def join_location(base: str, reference: str) -> str:
    """The location of ``reference`` (a relative file or URL) seen from the document at ``base``."""
    if is_url(reference):
        return reference
    if is_url(base):
        return urljoin(base, reference)
    return str((Path(base).parent / unquote(reference)).resolve())


@dataclass
class Documents:
    """Every document of one import, parsed once: the main one and those its ``$ref``s name."""

    cache: dict[str, Any] = field(default_factory=dict)

    def load(self, location: str, refusal: Callable[[str], str | None] | None = None) -> Any:
        """The parsed document at ``location`` (cached)."""
        if location in self.cache:  # every $ref asks again: no path resolution (a system call or more) each time
            return self.cache[location]
        key = self.key(location)
        if key not in self.cache:
            self.cache[key] = parse_text(read_location(location, refusal), location)
        self.cache[location] = self.cache[key]
        return self.cache[key]

    def key(self, location: str) -> str:
        return location if is_url(location) else str(Path(location).resolve())
