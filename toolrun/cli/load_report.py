"""The lines a command prints about the catalog it loaded: the summary, the files left out, the notices.

Apart from display.py: commands that only load a catalog (``tools list``, ``tools lint``, ``call``)
do without the run loop display.py imports.
"""

from __future__ import annotations

from pathlib import Path

from toolrun.catalog.model import Catalog
from toolrun.core.text import counted, terminal_safe


def load_summary(catalog: Catalog) -> str:
    """``toolrun: 7 tools from tools.d — 0 errors, 2 warnings (toolrun tools lint shows them)``."""
    errors = sum(1 for finding in catalog.findings if finding.severity == "error" and not finding.ignored)
    warnings = sum(1 for finding in catalog.findings if finding.severity == "warning" and not finding.ignored)
    left_out = ""  # what of the folder is not in the catalog, said beside it
    if catalog.unstarted:  # an MCP server this command needs none of: its tools are neither listed nor linted
        servers = len({tool.source.file for tool in catalog.unstarted.values()})
        which = "an MCP server" if servers == 1 else f"{servers} MCP servers"
        left_out = f" (+{counted(len(catalog.unstarted), 'tool')} of {which} not needed here, not started)"
    if catalog.problems:  # what kept a file or a tool out: the problems follow (errors for a command that needs them)
        left_out += f" ({counted(len(catalog.problems), 'problem')} loading it, below)"
    return counts_summary(catalog.directory, len(catalog), errors, warnings, left_out)


def counts_summary(directory: Path | None, tools: int, errors: int, warnings: int, left_out: str = "") -> str:
    """``load_summary``'s line from the counts alone (a command served from a cache of the catalog)."""
    line = f"toolrun: {counted(tools, 'tool')} from {directory}{left_out}"
    line += f" — {counted(errors, 'error')}, {counted(warnings, 'warning')}"
    if errors or warnings:
        line += " (toolrun tools lint shows them)"
    return line


def load_report(catalog: Catalog) -> list[str]:
    """The summary line, then each problem of a file left out of the catalog, then what loading noticed."""
    lines = [load_summary(catalog)]
    lines += [terminal_safe(f"warning: {problem}") for problem in catalog.problems]
    if catalog.problems:
        files = {str(problem.file) for problem in catalog.problems}
        lines.append(f"toolrun: the tools of {counted(len(files), 'file')} with a problem are left out; "
                     "this command needs none of them")
    lines += [terminal_safe(f"toolrun: {notice}") for notice in catalog.notices]
    return lines
