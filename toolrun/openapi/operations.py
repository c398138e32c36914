"""One OpenAPI operation -> one imported tool: name, description, merged arguments and where each goes.

Path, query, header and cookie parameters and the members of a JSON object body become
one object schema; each argument keeps a placement (``arguments:`` of the http backend)
that sends it back where the document says, under its wire name, with its array style.
Names that are not valid argument names are made valid; a clash between locations is
renamed with the location as prefix (``body_id``), none is lost. What cannot be expressed
raises ``Unsupported`` with one sentence, and the operation is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from toolrun.backends.http_arguments import STYLES
from toolrun.openapi.schemas import DanglingRef, FileUpload, OversizedSchema, Resolver, object_members, typed
from toolrun.openapi.text import MAX_DESCRIPTION_CHARS, MAX_PARAMETER_DESCRIPTION_CHARS, clean_description, has_template_syntax, identifier

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
SENDABLE_METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch"})
# Swagger 2.0 collectionFormat -> (style, explode) of OpenAPI 3
COLLECTION_FORMATS = {"csv": ("form", False), "ssv": ("spaceDelimited", False), "tsv": ("tabDelimited", False),
                      "pipes": ("pipeDelimited", False), "multi": ("form", True)}
_SWAGGER_PARAMETER_KEYS = frozenset({"name", "in", "description", "required", "collectionFormat", "allowEmptyValue",
                                     "schema"})
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})  # OpenAPI 3: described elsewhere
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_OTHER_THAN_HEADER_TEXT = re.compile(r"[^\x20-\x7e]")
_LOCATION_ORDER = ("path", "query", "header", "cookie", "body", "form", "json")


class Unsupported(Exception):
    """The operation cannot be a tool; the message says why in one sentence."""


@dataclass
class Operation:
    """An operation as found in the document."""

    method: str
    path: str
    item: dict[str, Any]  # the path item (shared parameters)
    spec: dict[str, Any]  # the operation object
    base: str  # location of the document holding it

    @property
    def label(self) -> str:
        operation_id = self.spec.get("operationId")
        return f"{self.method.upper()} {self.path}" + (f" ({operation_id})" if operation_id else "")


@dataclass
class ImportedTool:
    """What one operation becomes: everything the toolset writer needs."""

    name: str
    operation: Operation
    description: str
    url: str
    parameters: dict[str, Any]
    arguments: dict[str, Any]
    fixed_query: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    base_url: str | None = None  # the operation's own server, when it differs from the toolset's
    headers: dict[str, str] = field(default_factory=dict)  # credentials of its own security requirement
    query: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None  # a JSON body's media type other than application/json (merge-patch+json)
    needs_no_credentials: bool = False  # `security: []`: the toolset's credentials are set to null in the tool

    @property
    def method(self) -> str:
        return self.operation.method.upper()


@dataclass
class _Argument:
    """One parameter of an operation: its name on the wire, where it goes, its schema."""

    name: str  # on the wire
    location: str
    schema: dict[str, Any]
    required: bool
    style: str | None = None
    explode: bool | None = None


def convert_operation(operation: Operation, resolver: Resolver, *, swagger2: bool,
                      consumes: list[str]) -> ImportedTool:
    """The tool for ``operation`` (its name is settled by the caller); ``Unsupported`` when it cannot be one."""
    method = operation.method
    if method not in SENDABLE_METHODS:
        raise Unsupported(f"the method {method.upper()} cannot be sent by the http backend")
    if _CONTROL.search(operation.path):
        raise Unsupported("its path holds a line break or control character, which no URL can hold")
    if has_template_syntax(operation.path):
        raise Unsupported("its path holds template syntax ({{, {%, {# or ${), which the http backend would "
                          "render: a document's path stays text")
    notes: list[str] = []
    resolver.dangling.clear()
    try:
        path, fixed_query = _split_path(operation.path)
        found = _parameters(operation, resolver, swagger2, notes)
        body, content_type = _body(operation, resolver, swagger2, consumes, notes)
        found += body
    except DanglingRef as exc:
        raise Unsupported(str(exc)) from None
    except FileUpload as exc:
        raise Unsupported(f"{exc}: a file upload cannot be sent by the http backend") from None
    except OversizedSchema as exc:
        raise Unsupported(str(exc)) from None
    url, properties, required, arguments = _merge(path, found)
    in_url = set(re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", url))
    for name in [n for n, where in arguments.items() if _location(where) == "path" and n not in in_url]:
        notes.append(f"path parameter {name!r} is not in the path {path!r}: left out")
        del properties[name], arguments[name]
        required = [r for r in required if r != name]
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    broken = list(dict.fromkeys(resolver.dangling))
    if broken:
        shown = "; ".join(broken[:2]) + (f"; and {len(broken) - 2} more" if len(broken) > 2 else "")
        parts = "that part of its arguments accepts" if len(broken) == 1 else "those parts of its arguments accept"
        notes.append(f"{shown}: {parts} any value")
    if operation.spec.get("callbacks"):
        notes.append("its callbacks are not imported (the API calls you: nothing for a tool to send)")
    return ImportedTool("", operation, _description(operation), url, parameters, arguments, fixed_query, notes,
                        content_type=content_type)


def _split_path(path: str) -> tuple[str, dict[str, str]]:
    """A path with a query string in it ("/search?type=user") -> the path and the fixed query."""
    bare, _, query = path.partition("?")
    fixed = {}
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        fixed[key] = value
    return bare, fixed


def _description(operation: Operation) -> str:
    spec = operation.spec
    parts = [clean_description(str(spec[key]), MAX_DESCRIPTION_CHARS) for key in ("summary", "description")
             if isinstance(spec.get(key), str) and spec[key].strip()]
    if len(parts) == 2 and parts[1].startswith(parts[0].rstrip(".")):
        parts = parts[1:]  # the summary is the description's first sentence
    text = "\n\n".join(parts) or f"{operation.method.upper()} {operation.path}"
    if spec.get("deprecated") is True:
        text = "Deprecated: " + text  # not a sentence of its own: `tools list` shows the first sentence
    return clean_description(text, MAX_DESCRIPTION_CHARS)


def _parameters(operation: Operation, resolver: Resolver, swagger2: bool, notes: list[str]) -> list[_Argument]:
    """Path-level and operation-level parameters (the operation's win), in document order."""
    merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for source in (operation.item.get("parameters") or [], operation.spec.get("parameters") or []):
        for raw in source if isinstance(source, list) else []:
            parameter, base = resolver.follow(raw, operation.base)
            if not isinstance(parameter, dict) or not isinstance(parameter.get("name"), str) \
                    or not parameter["name"].strip():
                raise Unsupported("a parameter has no name")
            merged[(parameter["name"], str(parameter.get("in")))] = (parameter, base)
    found = []
    for (name, location), (parameter, base) in merged.items():
        if location in ("body", "formData"):
            continue  # Swagger 2.0: handled with the body
        if location not in ("path", "query", "header", "cookie"):
            raise Unsupported(f"parameter {name!r} is in {location!r}, which is not a parameter location")
        if location == "header" and name.lower() in _IGNORED_HEADERS:
            why = ("a credential belongs in defaults.http.headers as ${env:NAME}, not in the model's arguments"
                   if name.lower() == "authorization" else "the http backend sets it")
            notes.append(f"header parameter {name!r} left out: {why}")
            continue
        argument = _parameter_argument(parameter, base, location, resolver, swagger2)
        if argument is None:
            if parameter.get("required") or location == "path":
                raise Unsupported(f"the required parameter {name!r} has a content encoding toolrun cannot send")
            notes.append(f"optional parameter {name!r} left out: its content encoding cannot be sent")
            continue
        _usable_style(argument, notes)
        found.append(argument)
    return found


def _parameter_argument(parameter: dict[str, Any], base: str, location: str, resolver: Resolver,
                        swagger2: bool) -> _Argument | None:
    style: str | None
    explode: bool | None
    if swagger2:
        raw_schema = {k: v for k, v in parameter.items() if k not in _SWAGGER_PARAMETER_KEYS and k != "in"}
        style, explode = COLLECTION_FORMATS.get(str(parameter.get("collectionFormat", "csv")), ("form", False))
        if raw_schema.get("type") != "array":
            style, explode = None, None
        elif location in ("header", "path"):  # no `multi` there: one value, joined as the format says
            style = "simple" if style == "form" else style
            explode = False
    else:
        if "schema" not in parameter:
            return None  # `content:` instead of a schema
        raw_schema = parameter["schema"]
        style, explode = parameter.get("style"), parameter.get("explode")
        style = style if isinstance(style, str) else None  # `explode: "false"` as text: the default, not a broken file
        explode = explode if isinstance(explode, bool) else None
    schema = typed(resolver.schema(raw_schema, base))
    description = parameter.get("description")
    if isinstance(description, str) and description.strip():
        schema = {**schema, "description": clean_description(description, MAX_PARAMETER_DESCRIPTION_CHARS)}
    if style == "matrix" or style == "label":
        raise Unsupported(f"parameter {parameter['name']!r} uses the {style} style, which toolrun cannot send")
    return _Argument(parameter["name"], location, schema, bool(parameter.get("required")) or location == "path",
                     style, explode)


def _usable_style(argument: _Argument, notes: list[str]) -> None:
    """A style OpenAPI does not allow where the argument goes (``simple`` in a query) falls back to the default."""
    if argument.style is None or argument.style in STYLES[argument.location]:
        return
    where = "form field" if argument.location == "form" else f"{argument.location} parameter"
    default = STYLES[argument.location][0]
    notes.append(f"{where} {argument.name!r} says style {argument.style}, which does not apply there: "
                 f"sent in the {default} style")
    argument.style = None


def _media_type(kinds: list[str]) -> str | None:
    """The JSON (or form) media type among a body's, preferring JSON."""
    for kind in kinds:
        if _is_json(kind) or kind in ("*/*", "application/*"):
            return kind
    for kind in kinds:
        if kind.startswith("application/x-www-form-urlencoded"):
            return kind
    return None


def _is_json(kind: str) -> bool:
    return re.match(r"^application/([\w.+-]*\+)?json\b", kind) is not None


def _own_content_type(kind: str) -> str | None:
    """The Content-Type a JSON body must say when it is not plain JSON (``application/merge-patch+json``)."""
    if has_template_syntax(kind) or _OTHER_THAN_HEADER_TEXT.search(kind):  # a header value is a template
        return None
    return kind if _is_json(kind) and kind.partition(";")[0].strip() != "application/json" else None


def _body(operation: Operation, resolver: Resolver, swagger2: bool, consumes: list[str],
          notes: list[str]) -> tuple[list[_Argument], str | None]:
    """The body's arguments, and the Content-Type the tool must send when plain JSON is not what the body is."""
    if swagger2:
        return _swagger2_body(operation, resolver, consumes)
    if "requestBody" not in operation.spec:
        return [], None
    body, base = resolver.follow(operation.spec["requestBody"], operation.base)
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, dict) or not content:
        return [], None
    chosen = _media_type([str(kind) for kind in content])
    if chosen is None:
        kinds = ", ".join(content)
        if any(k.startswith("multipart/") for k in content):
            raise Unsupported(f"its body is {kinds}: a file upload or multipart body cannot be sent by the http backend")
        raise Unsupported(f"its body is {kinds}, not JSON: the http backend sends JSON or form bodies")
    media = content[chosen]
    schema = resolver.schema((media if isinstance(media, dict) else {}).get("schema") or {}, base)
    location = "form" if chosen.startswith("application/x-www-form-urlencoded") else "body"
    found = _body_arguments(schema, location, bool(body.get("required")), body.get("description"), "body")
    encoding = media.get("encoding") if isinstance(media, dict) and location == "form" else None
    for argument in found:  # a form field's own style/explode (`encoding:`), as a query parameter's
        field_encoding = encoding.get(argument.name) if isinstance(encoding, dict) else None
        if isinstance(field_encoding, dict):
            style, explode = field_encoding.get("style"), field_encoding.get("explode")
            argument.style = style if isinstance(style, str) else None
            argument.explode = explode if isinstance(explode, bool) else None
            _usable_style(argument, notes)
    return found, _own_content_type(chosen)


def _swagger2_body(operation: Operation, resolver: Resolver,
                   consumes: list[str]) -> tuple[list[_Argument], str | None]:
    parameters = _swagger2_body_parameters(operation, resolver)
    listed = operation.spec.get("consumes") or consumes
    kinds = [str(kind) for kind in listed] if isinstance(listed, list) else []
    body = [(p, b) for p, b in parameters if p.get("in") == "body"]
    if body:
        return _swagger2_json_body(body[-1], kinds, resolver)
    if not parameters:
        return [], None
    return _swagger2_form(parameters, kinds, resolver), None


def _swagger2_body_parameters(operation: Operation, resolver: Resolver) -> list[tuple[dict[str, Any], str]]:
    """The path's and the operation's parameters ``in: body`` or ``in: formData``, each with its base."""
    parameters = []
    for source in (operation.item.get("parameters") or [], operation.spec.get("parameters") or []):
        for raw in source if isinstance(source, list) else []:
            parameter, base = resolver.follow(raw, operation.base)
            if isinstance(parameter, dict) and parameter.get("in") in ("body", "formData"):
                parameters.append((parameter, base))
    return parameters


def _swagger2_json_body(body: tuple[dict[str, Any], str], kinds: list[str],
                        resolver: Resolver) -> tuple[list[_Argument], str | None]:
    """A body parameter's arguments and content type, unless the operation consumes no JSON."""
    chosen = next((kind for kind in kinds if _is_json(kind) or kind in ("*/*", "application/*")), None)
    if kinds and chosen is None:  # the API takes XML or text only: a JSON body would be refused
        raise Unsupported(f"its body is {', '.join(kinds)}, not JSON: the http backend sends JSON or form bodies")
    parameter, base = body
    schema = resolver.schema(parameter.get("schema") or {}, base)
    return (_body_arguments(schema, "body", bool(parameter.get("required")), parameter.get("description"),
                            identifier(str(parameter.get("name") or "body"))),
            _own_content_type(chosen) if chosen else None)


def _swagger2_form(parameters: list[tuple[dict[str, Any], str]], kinds: list[str],
                   resolver: Resolver) -> list[_Argument]:
    """formData parameters as form arguments, unless they need a multipart body (a file among them)."""
    if any(p.get("type") == "file" for p, _ in parameters):
        raise Unsupported("its formData includes a file (multipart/form-data): a file upload cannot be sent "
                          "by the http backend")
    if "multipart/form-data" in kinds and "application/x-www-form-urlencoded" not in kinds:
        raise Unsupported("its formData is sent as multipart/form-data: a multipart body cannot be sent "
                          "by the http backend")
    found = []
    for parameter, base in parameters:
        argument = _parameter_argument(parameter, base, "form", resolver, swagger2=True)
        if argument is not None:
            found.append(argument)
    return found


def _body_arguments(schema: Any, location: str, required: bool, description: Any, whole_name: str) -> list[_Argument]:
    """The members of an object body as arguments, or the whole body as one argument."""
    members = object_members(schema)
    if members is not None and schema.get("additionalProperties") in (None, False):
        properties, member_required = members
        return [_Argument(name, location, typed(sub), required and name in member_required)
                for name, sub in properties.items()]
    if location == "form":
        raise Unsupported("its form body is not an object with properties")
    whole = typed(dict(schema) if isinstance(schema, dict) else {})
    if isinstance(description, str) and description.strip() and "description" not in whole:
        whole["description"] = clean_description(description, MAX_PARAMETER_DESCRIPTION_CHARS)
    return [_Argument(whole_name, "json", whole, required)]


def _merge(path: str, found: list[_Argument]) -> tuple[str, dict[str, Any], list[str], dict[str, Any]]:
    """One argument namespace: (url with argument names, properties, required, arguments placements)."""
    taken: set[str] = set()
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: dict[str, Any] = {}
    renamed_path: dict[str, str] = {}
    for argument in sorted(found, key=lambda a: _LOCATION_ORDER.index(a.location)):
        name = identifier(argument.name)
        if name in taken:
            name = identifier(f"{argument.location}_{argument.name}")
        base_name, number = name, 2
        while name in taken:
            name, number = f"{base_name[:60]}_{number}", number + 1
        taken.add(name)
        properties[name] = argument.schema
        if argument.required:
            required.append(name)
        if argument.location == "path":
            renamed_path[argument.name] = name
        placement = _placement(argument, name)
        if placement is not None:
            arguments[name] = placement
    url = re.sub(r"\{([^{}]+)\}", lambda m: "{" + renamed_path.get(m.group(1), identifier(m.group(1))) + "}", path)
    for missing in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", url):
        if missing not in properties:  # a path template the document declares no parameter for
            properties[missing] = {"type": "string", "description": f"The {missing} part of the path."}
            required.append(missing)
    order = {name: index for index, name in enumerate(properties)}
    return url, properties, sorted(required, key=order.__getitem__), arguments


def _location(placement: Any) -> Any:
    return placement.get("in") if isinstance(placement, dict) else placement


def _placement(argument: _Argument, name: str) -> Any:
    """The ``arguments:`` entry for one argument: the location alone when nothing else differs."""
    if argument.location == "path" and argument.style in (None, "simple") and argument.schema.get("type") not in (
            "array", "object"):
        return "path"
    options: dict[str, Any] = {"in": argument.location}
    if argument.name != name and argument.location not in ("path", "json"):
        options["name"] = argument.name
    if argument.style is not None and argument.location in ("query", "form", "header", "cookie", "path"):
        default_style = "form" if argument.location in ("query", "form", "cookie") else "simple"
        if argument.style != default_style:
            options["style"] = argument.style
    if argument.explode is not None and argument.location in ("query", "form", "header", "path"):
        style = argument.style or ("form" if argument.location in ("query", "form") else "simple")
        if argument.explode != (style in ("form", "deepObject")):  # header/path objects: key=value when exploded
            options["explode"] = argument.explode
    return options["in"] if len(options) == 1 else options
