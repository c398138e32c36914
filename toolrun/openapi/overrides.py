"""Hand edits that survive a re-import: ``billing.overrides`` beside the imported ``billing.yaml``.

The imported file is rewritten by every import; the person's edits live in a file the loader
does not read as a tool file (not ``*.yaml``), applied to the import each time:

    defaults:                  # merged into the imported defaults
      http: {headers: {X-Team: ops}}
    tools:
      - name: getInvoice       # an imported tool: these keys replace the imported ones
        description: ...
      - name: deleteInvoice
        drop: true             # leave an imported tool out
      - name: ping             # a name the import does not have: added as written (an http tool)
        description: ...
        backend: {http: {url: /ping}}

Mappings merge key by key; any other value replaces; ``null`` removes an imported key (and,
where the import has none, stays ``null``: ``headers: {Authorization: null}`` drops a default).

The imported file ends with a fingerprint of its text, so an edit made in it instead of here
is noticed before the next import would lose it.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.catalog.tool_schema import tool_file_validator
from toolrun.core.errors import Problem, UserError
from toolrun.core.schema_errors import error_problems
from toolrun.core.yamlsource import YamlSyntaxError, line_of, load_yaml_file, plain

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

OVERRIDES_SUFFIX = ".overrides"
FINGERPRINT_START = "# toolrun import fingerprint: "
_EXAMPLE = "e.g. tools: [{name: getInvoice, description: ...}]"
# defaults an overrides file may give an imported toolset: every tool's keys and http's, no other backend's
HTTP_TOOLSET_DEFAULTS = frozenset({"http", "sequential", "max_concurrency", "timeout", "max_output", "confirm",
                                   "annotations", "lint", "check_formats"})


def overrides_path(output: Path) -> Path:
    """Where the edits of the imported ``output`` live: ``tools.d/billing.yaml`` -> ``tools.d/billing.overrides``."""
    return output.with_suffix(OVERRIDES_SUFFIX)


@dataclass
class Overrides:
    """The edits of one imported toolset, read from ``path``."""

    path: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)  # in the file's order, each with its name

    def apply_defaults(self, defaults: dict[str, Any]) -> None:
        merge(defaults, self.defaults)

    def apply_tools(self, imported: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        """(the imported tools edited, minus the dropped ones; the tools added; notes on edits that found no tool)."""
        by_name = {str(tool["name"]): tool for tool in imported}
        dropped: set[str] = set()
        added: list[dict[str, Any]] = []
        notes: list[str] = []
        for edit in self.tools:
            name = str(edit["name"])
            if edit.get("drop") is True:
                if name in by_name:
                    dropped.add(name)
                else:
                    notes.append(f"{self.path.name}: drop {name!r}: the import has no tool of that name")
            elif name in by_name:
                merge(by_name[name], edit)
            else:
                added.append(copy.deepcopy(edit))
        return [tool for tool in imported if str(tool["name"]) not in dropped], added, notes


def merge(base: dict[str, Any], edit: dict[str, Any]) -> None:
    """``edit`` into ``base``: mappings key by key, other values replaced, null removes a key ``base`` has."""
    for key, value in edit.items():
        if value is None and key in base:
            del base[key]
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def read_overrides(path: Path) -> Overrides | None:
    """The edits in ``path``; None when there is no such file. UserError naming the line of a mistake."""
    if not path.is_file():
        return None
    try:
        document = load_yaml_file(path)
    except YamlSyntaxError as exc:
        raise UserError(exc.problem) from None
    if document is None:
        return Overrides(path)
    if not isinstance(document, dict) or set(document) - {"defaults", "tools"}:
        extra = sorted(set(document) - {"defaults", "tools"}) if isinstance(document, dict) else []
        what = f"unknown key {', '.join(map(str, extra))}" if extra else "not a mapping"
        raise UserError(Problem(path, line_of(document, extra[:1]), f"the overrides file holds {what}",
                                f"write defaults: and tools: only, {_EXAMPLE}"))
    defaults, tools = document.get("defaults") or {}, document.get("tools") or []
    if not isinstance(defaults, dict):
        raise UserError(Problem(path, line_of(document, ["defaults"]), "defaults: is not a mapping",
                                "e.g. defaults: {http: {headers: {X-Team: ops}}}"))
    if not isinstance(tools, list):
        raise UserError(Problem(path, line_of(document, ["tools"]), "tools: is not a list", _EXAMPLE))
    for key in defaults:
        if key not in HTTP_TOOLSET_DEFAULTS:  # an import never starts anything: no mcp_server, no shell defaults
            raise UserError(Problem(path, line_of(document, ["defaults", key]),
                                    f"defaults.{key}: an imported toolset holds http tools only",
                                    f"write only {', '.join(sorted(HTTP_TOOLSET_DEFAULTS))} under defaults:"))
    for index, tool in enumerate(tools):
        _check_tool(path, document, index, tool)
    mistakes = _format_mistakes(path, document)
    if mistakes:
        raise UserError(mistakes)
    return Overrides(path, plain(defaults), [plain(tool) for tool in tools])


def _format_mistakes(path: Path, document: Any) -> list[Problem]:
    """What the tool-file format says is wrong here (``timeuot:``, ``retries: many``), at this file's lines:
    written into the imported file, it would not load, and be reported at lines that are not the edit's.
    An edit is partial (no key is required) and ``null`` removes a key, so neither is a mistake."""
    instance = plain(document)
    for tool in instance.get("tools") or []:
        tool.pop("drop", None)  # the overrides file's own key
    errors: list[ValidationError] = [error for error in tool_file_validator().iter_errors(instance)
                                     if error.validator != "required" and error.instance is not None]
    return [problem for error in errors for problem in error_problems(error, document, path)]


def _check_tool(path: Path, document: Any, index: int, tool: Any) -> None:
    where = line_of(document, ["tools", index])
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
        raise UserError(Problem(path, where, f"tools[{index}] names no tool",
                                "start each entry with the tool's name: - name: getInvoice"))
    backend = tool.get("backend")
    if backend is not None and (not isinstance(backend, dict) or set(backend) != {"http"}):
        # an import never starts anything: the file it writes holds http tools only
        raise UserError(Problem(path, where, f"tool {tool['name']!r}: an imported toolset holds http tools only",
                                "put a tool of another backend in a tool file of its own"))


def fingerprint(text: str) -> str:
    """The line that ends an imported file: a hash of everything before it."""
    return f"{FINGERPRINT_START}{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}\n"


def edited_since_import(text: str) -> bool:
    """True when an imported file's text no longer matches its fingerprint (an older import has none: False)."""
    body, start, _ = text.rpartition(FINGERPRINT_START)
    if not start:
        return False
    return body + fingerprint(body) != text
