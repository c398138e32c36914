"""Description-quality lint: does each tool tell a model enough to choose and call it well?

``lint_catalog`` runs every lint rule that is not a load error (the loader owns
names, duplicates and undeclared placeholders). Rules, ids and thresholds are documented in
docs/lint.md; the per-tool rules live in ``lint_rules``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from toolrun.backends import get_backend
from toolrun.catalog.model import Catalog
from toolrun.core.text import counted, did_you_mean
from toolrun.core.tool import Tool

if TYPE_CHECKING:
    from toolrun.catalog.lint_rules import RawFinding
    from toolrun.catalog.similarity import SimilarGroups

Severity = Literal["error", "warning", "info"]

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}

NEAR_DUPLICATE_THRESHOLD = 0.7  # calibrated on the OpenAI API's operations, see docs/lint.md
TOO_MANY_TOOLS = 20  # more than this many tools in one request: the model's choice degrades


@dataclass(frozen=True)
class LintFinding:
    """One finding: which tool, where (file and line), which rule, how bad, what to change.

    ``tool`` is None for findings about the whole catalog (tool count, total token cost).
    """

    tool: str | None
    file: str | None
    line: int | None
    rule: str
    severity: Severity
    message: str
    ignored: bool = False  # the tool's ``lint: {ignore: [rule]}`` accepts it: listed, never counted

    def to_json(self) -> dict[str, Any]:
        """The finding as in ``toolrun tools lint --json`` (``"ignored": true`` only when it is)."""
        document: dict[str, Any] = {
            "tool": self.tool,
            "file": self.file,
            "line": self.line,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
        }
        if self.ignored:
            document["ignored"] = True
        return document

    def where(self) -> str:
        """``FILE:LINE: `` (or ``FILE: ``, or nothing): how the finding's line begins."""
        return f"{self.file}:{self.line}: " if self.file and self.line else (f"{self.file}: " if self.file else "")

    def __str__(self) -> str:
        where = self.where()
        subject = f"{self.tool}: " if self.tool else ""
        accepted = " (ignored: lint.ignore)" if self.ignored else ""
        return f"{where}{self.severity}: {subject}{self.message} [{self.rule}]{accepted}"


def _finding(tool: Tool, raw: RawFinding, override_hint: str | None = None) -> LintFinding:
    return _placed(tool, raw.key_path, raw.rule, raw.severity, f"{raw.message} — {override_hint}" if override_hint else raw.message)


def _placed(tool: Tool, key_path: str, rule: str, severity: Severity, message: str) -> LintFinding:
    """A finding about ``tool``, at the line of its YAML key ``key_path``."""
    return LintFinding(tool=tool.name, file=str(tool.source.file), line=tool.source.line_of(key_path), rule=rule,
                       severity=severity, message=message)


def _and_more(look_alikes: int) -> str:
    """`` and N more tools`` after the one named, when there are more look-alikes than it."""
    return f" and {counted(look_alikes - 1, 'more tool')}" if look_alikes > 1 else ""


def _override_hint(tool: Tool) -> str | None:
    """How to fix a tool whose text its file does not hold (an MCP server's), as its backend says."""
    try:
        return get_backend(tool.backend.kind).override_hint(tool)
    except Exception:  # a missing or broken backend is a load error, reported there
        return None


def lint_tool(tool: Tool) -> list[LintFinding]:
    """The findings of the rules that look at one tool alone."""
    from toolrun.catalog.lint_rules import tool_findings  # ~10 ms of imports, for a tool whose findings are not cached

    raws = tool_findings(tool)
    hint = _override_hint(tool) if raws else None
    return [_finding(tool, raw, hint) for raw in raws]


# Action verbs by meaning: two tools whose names carry verbs of different meanings
# (get_x / delete_x) are told apart by the verb, however alike the rest of their text is.
ACTION_VERBS: dict[str, str] = {
    verb: meaning
    for meaning, verbs in {
        "read": "get retrieve read fetch show describe download view lookup inspect",
        "list": "list search find query browse enumerate",
        "create": "create add new insert upload post make register generate",
        "update": "update modify edit set patch put change rename replace",
        "delete": "delete remove destroy drop purge erase",
        "cancel": "cancel abort stop",
        "assign": "assign grant attach link",
        "unassign": "unassign revoke detach unlink",
        "activate": "activate enable start resume",
        "deactivate": "deactivate disable pause suspend",
        "run": "run execute invoke trigger",
    }.items()
    for verb in verbs.split()
}


def _action_meaning(name: str) -> str | None:
    # The first verb anywhere in the name: "admin-api-keys-create", "beta_getResponse".
    from toolrun.catalog.similarity import tokenize

    return next((ACTION_VERBS[word] for word in tokenize(name) if word in ACTION_VERBS), None)


def near_duplicate_findings(tools: list[Tool], threshold: float = NEAR_DUPLICATE_THRESHOLD) -> list[LintFinding]:
    """One warning per tool that has look-alikes (cosine >= threshold), naming the closest.

    One finding per tool, not per pair: a catalog of many similar tools would otherwise
    bury every other finding under n² near-duplicate lines. Tools whose texts have the same
    terms are scored as one group (``similar_groups``), so a catalog of thousands of tools
    made from one template costs about as much as its templates.
    """
    if len(tools) < 2:  # one tool has no look-alike: similarity is not even imported
        return []
    from toolrun.catalog.similarity import similar_groups

    documents = [f"{tool.name} {tool.description}" for tool in tools]
    actions = [_action_meaning(tool.name) for tool in tools]
    groups = similar_groups(documents, threshold, labels=actions)
    neighbours = _look_alike_groups(groups, [actions[members[0]] for members in groups.members])

    def by_name(index: int) -> tuple[str, int]:
        return tools[index].name, index

    # Per group, its two first tools by name: the closest in a group is its first other than oneself.
    firsts = [sorted(members, key=by_name)[:2] for members in groups.members]
    findings: list[tuple[int, LintFinding]] = []
    for group, members in enumerate(groups.members):
        outside = neighbours.get(group, [])
        # The closest outside the group: highest score, then first name; and how many tools that is.
        best_outside = min(((-score, by_name(firsts[other][0])) for score, other in outside), default=None)
        count_outside = sum(len(groups.members[other]) for _, other in outside)
        inside = len(members) > 1 and groups.self_score[group] >= threshold
        for index in members:
            candidates = [] if best_outside is None else [best_outside]
            if inside:
                closest_inside = next(i for i in firsts[group] if i != index)
                candidates.append((-groups.self_score[group], by_name(closest_inside)))
            if not candidates:
                continue
            negative_score, (_, closest) = min(candidates)
            count = count_outside + (len(members) - 1 if inside else 0)
            findings.append((index, _near_duplicate(tools[index], tools[closest], -negative_score, count)))
    return [finding for _, finding in sorted(findings, key=lambda item: item[0])]


def _look_alike_groups(groups: SimilarGroups, action_of: list[str | None]) -> dict[int, list[tuple[float, int]]]:
    """Each group -> the (score, group) of its similar groups, but for those whose verbs tell them apart."""
    neighbours: dict[int, list[tuple[float, int]]] = {}
    for pair in groups.pairs:
        first_action, second_action = action_of[pair.first], action_of[pair.second]
        if first_action and second_action and first_action != second_action:
            continue  # get_x vs delete_x: the verb tells them apart
        neighbours.setdefault(pair.first, []).append((pair.score, pair.second))
        neighbours.setdefault(pair.second, []).append((pair.score, pair.first))
    return neighbours


def _near_duplicate(tool: Tool, other: Tool, score: float, look_alikes: int) -> LintFinding:
    return _placed(tool, "description", "near-duplicate", "warning",
                   f"description is {score:.2f} similar to {other.name!r} ({other.source.file}:{other.source.line})"
                   f"{_and_more(look_alikes)}; say what sets them apart (when to use this one instead of the other), "
                   "or merge them")


def look_alike_name_findings(tools: list[Tool]) -> list[LintFinding]:
    """One warning per tool whose name differs from another's only in case or in ``-`` against ``_``.

    ``get_user`` and ``Get-User`` are two tools to the loader and to the wire, one to a reader:
    a model that writes either name calls a tool its author may not have meant.
    """
    alike: dict[str, list[Tool]] = {}
    for tool in tools:
        alike.setdefault(_folded_name(tool.name), []).append(tool)
    findings: list[LintFinding] = []
    for group in alike.values():
        if len({tool.name for tool in group}) < 2:
            continue  # one name defined twice is the loader's duplicate-name error, not a look-alike
        for tool in group:
            others = sorted((other for other in group if other.name != tool.name), key=lambda other: other.name)
            findings.append(_placed(
                tool, "name", "look-alike-name", "warning",
                f"name differs from {others[0].name!r} ({others[0].source.file}:{others[0].source.line})"
                f"{_and_more(len(others))} only in case or in - against _: a model that writes one may mean the "
                "other; rename one so that the names say what sets the tools apart"))
    return findings


def _folded_name(name: str) -> str:
    return name.lower().replace("-", "_")


def catalog_findings(tools: list[Tool], directory: str | None) -> list[LintFinding]:
    """Findings about the catalog as a whole: no tools, too many tools, total token cost."""
    findings: list[LintFinding] = []
    if not tools:
        where = directory or "the catalog"
        findings.append(
            LintFinding(
                None,
                directory,
                None,
                "empty-catalog",
                "warning",
                f"no tools in {where}: a model gets nothing to call — add one YAML file per tool "
                "(subfolders are read too), or point --tools-dir at the folder that holds them",
            )
        )
    if len(tools) > TOO_MANY_TOOLS:
        findings.append(
            LintFinding(
                None,
                directory,
                None,
                "too-many-tools",
                "warning",
                f"too many tools for one request: {len(tools)} (more than {TOO_MANY_TOOLS}); "
                "models choose worse among many tools — offer each request only the most relevant ones "
                "(`settings.tool_selection: {max_tools: 20}` in the recipe), give each recipe only the tools "
                "it needs (`tools:`) or split the catalog",
            )
        )
    from toolrun.catalog.tokens import token_estimate  # start-up: a catalog served by its cache has these findings

    total = sum(token_estimate(tool) for tool in tools)
    findings.append(
        LintFinding(
            None,
            directory,
            None,
            "token-cost",
            "info",
            f"{_the_definitions(len(tools))} about {total} tokens in every request "
            "(estimate: ~4 characters per token of the exported JSON)",
        )
    )
    return findings


def _the_definitions(count: int) -> str:
    return "the 1 tool definition costs" if count == 1 else f"the {count} tool definitions cost"


def _sort_key(finding: LintFinding) -> tuple:
    # Per-tool findings in file/line order; catalog-wide ones last.
    return (
        finding.tool is None,
        finding.file or "",
        finding.line or 0,
        finding.tool or "",
        SEVERITY_ORDER[finding.severity],
        finding.rule,
        finding.message,
    )


def sort_findings(findings: Iterable[LintFinding]) -> list[LintFinding]:
    """Findings in the lint's order: file, line, tool, severity, rule; catalog-wide ones last."""
    return sorted(findings, key=_sort_key)


def lint_catalog(
    catalog: Catalog | Iterable[Tool], *, near_duplicate_threshold: float = NEAR_DUPLICATE_THRESHOLD
) -> list[LintFinding]:
    """Every finding for ``catalog``, in a deterministic order (file, line, tool, severity, rule)."""
    tools = list(catalog)
    directory = str(catalog.directory) if isinstance(catalog, Catalog) and catalog.directory else None
    findings: list[LintFinding] = []
    for tool in tools:
        findings.extend(lint_tool(tool))
    findings.extend(near_duplicate_findings(tools, near_duplicate_threshold))
    findings.extend(look_alike_name_findings(tools))
    findings.extend(catalog_findings(tools, directory))
    findings = apply_ignores(findings, tools)
    return sorted(findings, key=_sort_key)


# Every rule the lint reports; ``lint: {ignore: [...]}`` may name these.
RULES = frozenset({
    "description-too-short", "no-usage-guidance", "parameter-missing-description", "missing-parameter-type",
    "parameter-name", "openapi-nullable", "enum-in-prose", "enum-type-mismatch", "near-duplicate", "look-alike-name",
    "strict-mode-incompatible", "gemini-schema-incompatible", "gemini-tool-name", "token-cost", "too-many-tools",
    "empty-catalog", "state-changing-without-annotations", "prompt-injection", "unused-parameter", "secret-in-argv",
    "optional-path-parameter", "argv-option-injection", "model-chosen-host", "model-chosen-path",
    "credentials-withheld", "shell-exit-code", "python-signature", "unknown-lint-rule",
    "env-reference-without-env", "dollar-variable",
})
# A poisoned description must never reach a model, however its file is annotated.
NEVER_IGNORED = frozenset({"prompt-injection"})


def apply_ignores(findings: list[LintFinding], tools: list[Tool]) -> list[LintFinding]:
    """Mark the findings a tool's ``lint.ignore`` accepts; report names that are not rules."""
    ignores = {tool.name: set(tool.lint_ignore) for tool in tools if tool.lint_ignore}
    if not ignores:
        return findings
    marked = [dataclasses.replace(finding, ignored=True)
              if finding.tool in ignores and finding.rule in ignores[finding.tool] and finding.rule not in NEVER_IGNORED
              else finding for finding in findings]
    for tool in tools:
        for name in tool.lint_ignore:
            if name in NEVER_IGNORED:
                message = f"lint.ignore names {name}, which cannot be ignored: a poisoned description must not load"
            elif name not in RULES:
                guess = did_you_mean(name, RULES)
                message = f"lint.ignore names {name!r}, which is not a lint rule" + (f"; did you mean {guess!r}?" if guess else "")
            else:
                continue
            marked.append(LintFinding(tool.name, str(tool.source.file), tool.source.line_of("lint.ignore"),
                                      "unknown-lint-rule", "warning", message))
    return marked


def count_by_severity(findings: Iterable[LintFinding]) -> Counter[str]:
    """How many findings of each severity; ignored ones count apart, under ``"ignored"``."""
    return Counter("ignored" if finding.ignored else finding.severity for finding in findings)
