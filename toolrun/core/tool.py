"""What a loaded tool is, independent of the YAML it came from.

The one model every layer shares: the catalog builds it, backends run it, the runner and
the providers read it. It lives below all of them so none has to import the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrun.core.messages import ToolDefinition

DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_OUTPUT = 20_000
FIND_TOOLS = "find_tools"  # the search tool of a run's tool selection: no catalog tool may take the name


@dataclass(frozen=True)
class SourceLocation:
    """Where a tool is defined: its file and the line of its ``name`` key.

    ``key_lines`` maps dotted key paths of the tool's own mapping (``"description"``,
    ``"parameters.properties.city"``, ``"backend.http.url"``) to lines, so lint findings
    can point at the exact line.
    """

    file: Path
    line: int
    key_lines: dict[str, int] = field(default_factory=dict, compare=False, hash=False)

    def line_of(self, dotted_path: str) -> int:
        """The line of ``dotted_path`` or of its nearest recorded parent."""
        path = dotted_path
        while path:
            if path in self.key_lines:
                return self.key_lines[path]
            path = path.rpartition(".")[0]
        return self.line


@dataclass(frozen=True)
class Annotations:
    """MCP-style behaviour hints; None means the author did not say."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None
    title: str | None = None


@dataclass(frozen=True)
class BackendSpec:
    """Which backend runs the tool and its configuration, with file defaults merged in.

    ``kind`` is a registered backend name (``python``, ``shell``, ``http`` or a plugin's).
    ``config`` is the mapping under ``backend.<kind>`` (for ``python: "mod:func"`` it is
    ``{"function": "mod:func"}``), plain dicts and lists only. ``parsed`` is the backend's
    typed config when the loader parsed it (None: the backend parses ``config`` when asked).
    ``withheld_credentials`` names the toolset's credentials the loader kept from this tool,
    as (``"headers"`` or ``"query"``, names): its request goes to another origin.
    """

    kind: str
    config: dict[str, Any]
    parsed: Any = field(default=None, compare=False, repr=False)
    withheld_credentials: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass
class Tool:
    """A loaded tool: what the model is told (name, description, parameters) and how it runs."""

    name: str
    description: str
    parameters: dict[str, Any]
    backend: BackendSpec
    source: SourceLocation
    sequential: bool = False
    max_concurrency: int | None = None  # calls of this tool at once; None: only the run's limit
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    max_output: int = DEFAULT_MAX_OUTPUT
    confirm: bool = False
    annotations: Annotations | None = None
    lint_ignore: tuple[str, ...] = ()  # lint rules the author accepts for this tool (listed as ignored)
    check_formats: bool = True  # refuse arguments whose date-time, uuid, email... does not match (core/formats.py)

    @property
    def base_dir(self) -> Path:
        """The folder of the tool's file: relative paths in its backend start here."""
        return self.source.file.parent

    @property
    def needs_confirmation(self) -> bool:
        return self.confirm or bool(self.annotations and self.annotations.destructive)

    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.parameters)
