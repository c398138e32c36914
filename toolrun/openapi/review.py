"""The import's second half: load the written toolset as toolrun would, lint it, group the findings.

Grouped by rule with counts, because an imported API repeats the same weakness across
many operations: one line per rule says what to improve and where, instead of hundreds.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolrun.catalog.lint import SEVERITY_ORDER, LintFinding, lint_catalog
from toolrun.catalog.loader import load_tool_file
from toolrun.catalog.model import Catalog
from toolrun.core.errors import Problem
from toolrun.core.tool import Tool
from toolrun.core.yamlsource import YamlSyntaxError, load_yaml_file
from toolrun.openapi.overrides import HTTP_TOOLSET_DEFAULTS

EXAMPLE_TOOLS = 3
STDOUT = "<stdout>"  # where a toolset printed rather than written is said to be


@dataclass
class ToolsetReview:
    """What loading and linting the imported toolset found."""

    tools: int
    problems: list[Problem] = field(default_factory=list)  # load problems: the import wrote something wrong
    findings: list[LintFinding] = field(default_factory=list)


@dataclass(frozen=True)
class FindingGroup:
    """Every finding of one rule and severity: how many, on which tools, and one message as an example."""

    rule: str
    severity: str
    count: int
    tools: tuple[str, ...]
    example: str

    def __str__(self) -> str:
        named = ", ".join(self.tools[:EXAMPLE_TOOLS]) + (", …" if len(self.tools) > EXAMPLE_TOOLS else "")
        spread = f" in {len(self.tools)} tools" if len(self.tools) > 1 and self.count > len(self.tools) else ""
        where = f" ({named})" if named else ""
        return f"{self.severity:<7} {self.rule} ×{self.count}{spread}{where}: {self.example}"


def lint_toolset(text: str, file: str | Path | None = None) -> ToolsetReview:
    """Load ``text`` (written to ``file`` already, or to a temporary file) and lint its tools."""
    if file is not None:
        return _review(Path(file))
    with tempfile.TemporaryDirectory(prefix="toolrun-import-") as folder:
        path = Path(folder) / "openapi.yaml"
        path.write_text(text, encoding="utf-8")
        return _shown_as(_review(path), (str(path), folder), STDOUT)


def _shown_as(review: ToolsetReview, temporary: tuple[str, str], shown: str) -> ToolsetReview:
    """The review with the temporary file's and folder's names (gone once it returns) said as ``shown``:
    a finding about the whole catalog (too many tools, say) names the folder."""
    def said(text: str) -> str:
        for name in temporary:  # the file first: its name starts with the folder's
            text = text.replace(name, shown)
        return text

    problems = [replace(p, file=shown, message=said(p.message)) for p in review.problems]
    findings = [replace(f, file=shown if f.file in temporary else f.file, message=said(f.message))
                for f in review.findings]
    return ToolsetReview(review.tools, problems, findings)


def _review(path: Path) -> ToolsetReview:
    try:
        document = load_yaml_file(path)
    except YamlSyntaxError as exc:
        return ToolsetReview(0, [exc.problem])
    foreign = _not_http(document)
    if foreign:  # loading an mcp_server toolset starts its command: an import never does
        return ToolsetReview(0, [Problem(path, None, f"the imported toolset holds {foreign}, not only http tools: "
                                         "not loaded, nothing was started",
                                         "this is a bug in the importer: please report it with the document")])
    loaded, found = load_tool_file(path, document=document)  # read once: a large import's YAML takes a while
    problems = list({str(problem): problem for problem in found}.values())  # checks may word one mistake alike
    tools = [tool for _, _, tool in loaded if isinstance(tool, Tool)]
    catalog = Catalog(directory=path.parent)
    for tool in tools:
        catalog.tools[tool.name] = tool
    return ToolsetReview(len(tools), problems, lint_catalog(catalog))


def _not_http(document: Any) -> str | None:
    """What in an imported toolset is not an http tool (an ``mcp_server``, another backend), or None."""
    if not isinstance(document, dict):
        return "no toolset mapping"
    extra = sorted(str(key) for key in document if key not in ("defaults", "tools"))
    defaults = document.get("defaults")
    if isinstance(defaults, dict):
        extra += [f"defaults.{key}" for key in defaults if key not in HTTP_TOOLSET_DEFAULTS]
    tools = document.get("tools")
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        backend = tool.get("backend") if isinstance(tool, dict) else None
        if not isinstance(backend, dict) or set(backend) != {"http"}:
            extra.append(f"tools[{index}].backend {sorted(backend) if isinstance(backend, dict) else backend!r}")
    return ", ".join(extra[:3]) or None


def group_findings(findings: Iterable[LintFinding]) -> list[FindingGroup]:
    """Findings grouped by (rule, severity): errors first, then the most frequent."""
    groups: dict[tuple[str, str, bool], list[LintFinding]] = {}
    for finding in findings:  # a finding about the whole catalog is its own group: its message is the news
        groups.setdefault((finding.rule, finding.severity, finding.tool is None), []).append(finding)
    found = [FindingGroup(rule, severity, len(items), tuple(dict.fromkeys(f.tool for f in items if f.tool)),
                          items[0].message)
             for (rule, severity, _), items in groups.items()]
    return sorted(found, key=lambda g: (SEVERITY_ORDER[g.severity], -g.count, g.rule))
