"""The ``oidc`` section of an ``--auth`` file: the issuer, the audience, and the rules from claims to tools.

```yaml
oidc:
  issuer: https://sso.internal.example.com/realms/ops   # keys by OIDC discovery
  audience: https://tools.internal.example.com/mcp      # default: the server's resource_url
  rules:                                                # first match wins; no match = no tools
    - {claim: realm_access.roles, contains: sre, tools: ["*"]}
    - {claim: sub, equals: nightly-bot, tools: ["get_*"]}
```

``contains`` is membership in an array or in a space-separated string (``scope``);
``equals`` is string equality; a dotted claim reaches into nested objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from toolrun.core.errors import Problem
from toolrun.core.text import did_you_mean
from toolrun.core.yamlsource import LineDict
from toolrun.mcp.addresses import is_loopback

OIDC_KEYS = ("issuer", "audience", "rules")
RULE_KEYS = ("claim", "contains", "equals", "tools")
_RULE_EXAMPLE = '{claim: groups, contains: sre, tools: ["*"]}'


@dataclass(frozen=True)
class ClaimRule:
    """One rule: the tools a token gets when its ``claim`` contains (or equals) ``value``."""

    claim: str
    value: str
    membership: bool  # True: contains; False: equals
    tools: tuple[str, ...]

    def matches(self, claims: dict[str, Any]) -> bool:
        found = claim_at(claims, self.claim)
        if self.membership:
            if isinstance(found, str):
                return self.value in found.split()
            return isinstance(found, list) and self.value in found
        return isinstance(found, str) and found == self.value


@dataclass(frozen=True)
class OidcSettings:
    """Whose tokens are accepted (issuer, audience) and the rules that give them tools."""

    issuer: str
    audience: str
    rules: tuple[ClaimRule, ...]

    def tools_for(self, claims: dict[str, Any]) -> tuple[str, ...]:
        """The globs of the first rule that matches; none matching: no tools."""
        return next((rule.tools for rule in self.rules if rule.matches(claims)), ())


def claim_at(claims: dict[str, Any], path: str) -> Any:
    """``realm_access.roles`` -> ``claims["realm_access"]["roles"]``; None where a step is missing.

    A claim whose own name has a dot (``https://example.com/groups``) is found whole first."""
    if path in claims:
        return claims[path]
    node: Any = claims
    for step in path.split("."):
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return node


def fetchable_url(url: str) -> bool:
    """Whether toolrun may fetch ``url`` for keys: https, or http on this machine only (tests, a local provider)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if not parts.hostname:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and is_loopback(parts.hostname))


def _line(node: Any, key: str | None = None) -> int | None:
    if isinstance(node, LineDict):
        return node.key_lines.get(key, node.line) if key else node.line
    return getattr(node, "line", None)


def _unknown_keys(node: dict[str, Any], allowed: tuple[str, ...], where: str, file: Any) -> list[Problem]:
    problems = []
    for key in node:
        if key in allowed:
            continue
        guess = did_you_mean(str(key), allowed)
        fix = f"did you mean {guess!r}?" if guess else f"use only {', '.join(allowed)}"
        problems.append(Problem(file, _line(node, key), f"unknown key {key!r} in {where}", fix))
    return problems


def parse_oidc(node: Any, file: Any, resource_url: str | None) -> tuple[OidcSettings | None, list[Problem]]:
    """The ``oidc:`` mapping as settings, or every problem in it (file, line, fix)."""
    if not isinstance(node, dict):
        return None, [Problem(file, _line(node), "oidc must be a mapping with issuer and rules",
                              "write it like oidc: {issuer: https://sso.example.com/realms/ops, rules: [...]}")]
    problems = _unknown_keys(node, OIDC_KEYS, "oidc", file)
    issuer = node.get("issuer")
    if not isinstance(issuer, str) or not fetchable_url(issuer):
        problems.append(Problem(file, _line(node, "issuer"), f"oidc.issuer must be the issuer's https URL, not {issuer!r}",
                                "write the issuer as its tokens name it (iss), e.g. "
                                "issuer: https://sso.internal.example.com/realms/ops"))
    audience = node.get("audience", resource_url)
    if not isinstance(audience, str) or not audience.strip():
        problems.append(Problem(file, _line(node, "audience"), "oidc needs an audience: the value tokens carry in aud",
                                "set resource_url in the config file (or --resource-url URL), or oidc.audience"))
    rules_node = node.get("rules")
    rules: list[ClaimRule] = []
    if not isinstance(rules_node, list) or not rules_node:
        problems.append(Problem(file, _line(node, "rules"), "oidc needs a list of rules: without one no token gets a tool",
                                f"write it like rules: [{_RULE_EXAMPLE}]"))
    else:
        for entry in rules_node:
            rule, rule_problems = _rule(entry, file)
            problems += rule_problems
            if rule is not None:
                rules.append(rule)
    if problems:
        return None, problems
    assert isinstance(issuer, str) and isinstance(audience, str)
    return OidcSettings(issuer, audience, tuple(rules)), []


def _rule(entry: Any, file: Any) -> tuple[ClaimRule | None, list[Problem]]:
    if not isinstance(entry, dict):
        return None, [Problem(file, _line(entry), "a rule must be a mapping", f"write it like {_RULE_EXAMPLE}")]
    problems = _unknown_keys(entry, RULE_KEYS, "a rule", file)
    claim = entry.get("claim")
    if not isinstance(claim, str) or not claim.strip():
        problems.append(Problem(file, _line(entry, "claim"), "a rule needs the claim it reads",
                                "add claim: groups (a dotted path reaches nested claims: realm_access.roles)"))
    tests = [key for key in ("contains", "equals") if key in entry]
    if len(tests) != 1:
        problems.append(Problem(file, _line(entry), "a rule needs exactly one of contains and equals",
                                "write contains: VALUE (a member of a list or a space-separated string) "
                                "or equals: VALUE (the whole string)"))
    elif not isinstance(entry[tests[0]], str):
        problems.append(Problem(file, _line(entry, tests[0]), f"{tests[0]} must be a string",
                                f'quote it: {tests[0]}: "{entry[tests[0]]}"'))
    tools = entry.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(glob, str) and glob for glob in tools):
        problems.append(Problem(file, _line(entry, "tools"), "a rule needs the tools it gives, as a list of names or globs",
                                'add tools: ["get_*", "list_*"] (tools: ["*"] for every tool)'))
    if problems:
        return None, problems
    assert isinstance(claim, str) and isinstance(tools, list)
    test = tests[0]
    return ClaimRule(claim, entry[test], test == "contains", tuple(tools)), []
