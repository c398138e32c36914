"""Which lint findings ``tools lint`` shows: a rule, a minimum severity, tools by glob; info on every tool in one line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from toolrun.catalog.lint import RULES, SEVERITY_ORDER, LintFinding
from toolrun.core.text import counted, did_you_mean


@dataclass(frozen=True)
class FindingFilter:
    """``--rule`` (any of), ``--severity`` (a minimum), ``--tool`` (globs, any of); empty means no limit."""

    rules: tuple[str, ...] = ()
    severity: str = "info"
    tools: tuple[str, ...] = ()

    def unknown_rule(self) -> str | None:
        """A one-line error for a --rule that names no lint rule, or None."""
        for rule in self.rules:
            if rule not in RULES:
                guess = did_you_mean(rule, RULES)
                return f"--rule {rule!r} is not a lint rule" + (f"; did you mean {guess!r}?" if guess else "") + \
                    " (docs/lint.md lists them)"
        return None

    def keeps(self, finding: LintFinding) -> bool:
        if self.rules and finding.rule not in self.rules:
            return False
        if SEVERITY_ORDER[finding.severity] > SEVERITY_ORDER[self.severity]:
            return False
        if self.tools:  # findings about the whole catalog name no tool: a tool filter leaves them out
            return finding.tool is not None and any(fnmatchcase(finding.tool, glob) for glob in self.tools)
        return True

    def apply(self, findings: Iterable[LintFinding]) -> list[LintFinding]:
        return [finding for finding in findings if self.keeps(finding)]


def summarised_info(findings: list[LintFinding]) -> tuple[list[LintFinding], list[str]]:
    """The findings to print one by one, and one line per info rule that fired on tools (token-cost on each).

    An imported API gives one token-cost line per tool; a line per rule says the same in one.
    """
    per_tool_info = Counter(f.rule for f in findings if f.severity == "info" and f.tool is not None and not f.ignored)
    shown = [f for f in findings if not (f.severity == "info" and f.tool is not None and not f.ignored)]
    lines = [f"info: {rule} on {counted(count, 'tool')} (--verbose lists each, --rule {rule} only these)"
             for rule, count in sorted(per_tool_info.items())]
    return shown, lines
