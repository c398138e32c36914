"""Who may use an HTTP server: the ``--auth`` file's clients, their tokens and their tools.

```yaml
clients:
  - name: oncall-bot
    token: "${env:ONCALL_BOT_TOKEN}"      # or token_sha256: <hex digest of the token>
    tools: ["get_*", "list_*"]            # globs; default every tool
    max_sessions: 20                      # its own limit of open sessions; default --max-client-sessions
```

A token is never written in the file: it comes from the environment or is given as its
SHA-256 digest. Tokens are compared by digest in constant time. Beside the clients (or
instead of them) an ``oidc:`` section admits the bearer JWTs of an OpenID provider
(``oidc_rules``, ``oidc``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrun.core.errors import LoadError, Problem
from toolrun.core.secrets import ENV_REFERENCE, MissingSecret, read_secret
from toolrun.core.text import did_you_mean
from toolrun.core.yamlsource import LineDict, YamlSyntaxError, load_yaml_file
from toolrun.mcp.oidc_rules import OidcSettings, parse_oidc

MIN_TOKEN_LENGTH = 16  # a static token read from the environment; its digest (token_sha256) cannot be measured
_CLIENT_KEYS = {"name", "token", "token_sha256", "tools", "max_sessions"}
_TOP_KEYS = ("clients", "oidc")
_HEX_DIGEST = re.compile(r"^[0-9a-fA-F]{64}$")
_EXAMPLE = 'clients: [{name: oncall-bot, token: "${env:ONCALL_BOT_TOKEN}", tools: ["get_*"]}]'


@dataclass(frozen=True)
class ClientAccess:
    """One client: its name (for the audit log), its token's digest, the globs of its tools, its session limit."""

    name: str
    token_digest: bytes
    tools: tuple[str, ...] | None  # None: every tool
    max_sessions: int | None = None  # None: the server's limit per client


@dataclass(frozen=True)
class InlineAuth:
    """The ``auth:`` mapping written inside a config file: its lines are that file's."""

    document: Any
    file: Path


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class AccessList:
    """The clients of an ``--auth`` file, looked up by the bearer token a request carries."""

    def __init__(self, clients: list[ClientAccess], secrets: list[str] | None = None,
                 oidc: OidcSettings | None = None) -> None:
        self.clients = clients
        self.secrets = list(secrets or [])  # the literal tokens read from the environment, to redact
        self.oidc = oidc  # the OpenID provider whose tokens are admitted too, if any

    def client_for(self, authorization: str | None) -> ClientAccess | None:
        """The client whose token the ``Authorization: Bearer`` header carries, else None."""
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = token_digest(token.strip())
        found = None
        for client in self.clients:  # no early exit: the time taken does not tell which client matched
            if hmac.compare_digest(client.token_digest, digest):
                found = client
        return found


def load_access_list(path: Path, resource_url: str | None = None) -> AccessList:
    """Read an ``--auth`` file; ``LoadError`` listing every problem (file, line, fix).

    ``resource_url`` is the audience an ``oidc`` section without its own ``audience`` expects."""
    if not path.is_file():
        raise LoadError(Problem(path, None, "cannot read the auth file: it does not exist",
                                f"pass --auth with a YAML file listing the clients, e.g. {_EXAMPLE}"))
    try:
        document = load_yaml_file(path)
    except YamlSyntaxError as exc:
        raise LoadError([exc.problem]) from None
    return access_list_from(document, path, resource_url)


def read_access_list(auth: Path | InlineAuth, resource_url: str | None = None) -> AccessList:
    """The access list of an ``--auth`` file or of a config file's ``auth:`` mapping."""
    if isinstance(auth, InlineAuth):
        return access_list_from(auth.document, auth.file, resource_url)
    return load_access_list(auth, resource_url)


def access_list_from(document: Any, path: Path, resource_url: str | None = None) -> AccessList:
    """The access list of a parsed auth mapping (a file's, or the ``auth:`` of a config file)."""
    problems: list[Problem] = []
    if isinstance(document, dict):
        for key in document:
            if key not in _TOP_KEYS:
                guess = did_you_mean(str(key), _TOP_KEYS)
                problems.append(Problem(path, _line(document, key), f"unknown key {key!r} in the auth file",
                                        f"did you mean {guess!r}?" if guess else "use clients: and oidc:"))
    clients_node = document.get("clients") if isinstance(document, dict) else None
    oidc_node = document.get("oidc") if isinstance(document, dict) else None
    oidc = None
    if oidc_node is not None:
        oidc, oidc_problems = parse_oidc(oidc_node, path, resource_url)
        problems += oidc_problems
    has_clients = isinstance(clients_node, list) and bool(clients_node)
    if (clients_node is not None and not has_clients) or (clients_node is None and oidc_node is None):
        raise LoadError([Problem(path, getattr(document, "line", None), "expected a list of clients under 'clients:'",
                                 f"write it like {_EXAMPLE}, or add an oidc: section"), *problems])
    clients, secrets = _clients(clients_node or [], path, problems)
    if problems:
        raise LoadError(problems)
    return AccessList(clients, secrets, oidc)


def _clients(clients_node: list[Any], path: Path, problems: list[Problem]) -> tuple[list[ClientAccess], list[str]]:
    """The static clients, their problems added to ``problems``."""
    clients: list[ClientAccess] = []
    secrets: list[str] = []
    names: set[str] = set()
    holders: dict[Any, tuple[int, str, int | None]] = {}  # each token's digest: the first client that has it, its line
    for index, entry in enumerate(clients_node):
        client, client_problems, secret = _client(entry, path)
        problems += client_problems
        if client is None:
            continue
        if client.name in names:
            problems.append(Problem(path, _line(entry, "name"), f"client {client.name!r} is listed twice", "give each client its own name"))
        names.add(client.name)
        token_line = _line(entry, "token" if isinstance(entry, dict) and "token" in entry else "token_sha256")
        first_index, first, first_line = holders.setdefault(client.token_digest, (index, client.name, token_line))
        if first_index != index:
            where = f" (line {first_line})" if first_line is not None else ""
            problems.append(Problem(path, token_line, f"client {client.name!r} has the same token as client {first!r}{where}: "
                                    "the audit log could not tell them apart", "give each client its own token"))
        clients.append(client)
        if secret:
            secrets.append(secret)
    return clients, secrets


def _line(entry: Any, key: str) -> int | None:
    if isinstance(entry, LineDict):
        return entry.key_lines.get(key, entry.line)
    return None


def _client(entry: Any, path: Path) -> tuple[ClientAccess | None, list[Problem], str | None]:
    if not isinstance(entry, dict):
        return None, [Problem(path, getattr(entry, "line", None), "a client must be a mapping", f"write it like {_EXAMPLE}")], None
    problems = [Problem(path, _line(entry, key), f"unknown key {key!r} in a client",
                        f"did you mean {guess!r}?" if (guess := did_you_mean(str(key), sorted(_CLIENT_KEYS)))
                        else f"use only {', '.join(sorted(_CLIENT_KEYS))}")
                for key in entry if key not in _CLIENT_KEYS]
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append(Problem(path, _line(entry, "name"), "a client needs a name", "add name: <who this client is>"))
        name = "?"
    label = f"client {name!r}"
    tools = entry.get("tools")
    globs: tuple[str, ...] | None = None
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(glob, str) and glob for glob in tools):
            problems.append(Problem(path, _line(entry, "tools"), f"{label}: tools must be a list of names or globs",
                                    'write it like tools: ["get_*", "list_*"]'))
        else:
            globs = tuple(tools)
    max_sessions = entry.get("max_sessions")
    if max_sessions is not None and (isinstance(max_sessions, bool) or not isinstance(max_sessions, int)
                                     or max_sessions < 1):
        problems.append(Problem(path, _line(entry, "max_sessions"), f"{label}: max_sessions must be a whole number of 1 or more",
                                "write it like max_sessions: 20"))
        max_sessions = None
    digest, secret, token_problems = _token(entry, path, label)
    problems += token_problems
    if problems or digest is None:
        return None, problems, None
    return ClientAccess(name, digest, globs, max_sessions), [], secret


def _token(entry: dict[str, Any], path: Path, label: str) -> tuple[bytes | None, str | None, list[Problem]]:
    token, hashed = entry.get("token"), entry.get("token_sha256")
    if (token is None) == (hashed is None):
        fix = 'add token: "${env:NAME}" or token_sha256: <hex digest>' if token is None else "keep one of token and token_sha256"
        return None, None, [Problem(path, _line(entry, "token"), f"{label}: needs exactly one of token and token_sha256", fix)]
    if hashed is not None:
        if not isinstance(hashed, str) or not _HEX_DIGEST.match(hashed):
            fix = "write the 64 hex digits of: printf %s \"$TOKEN\" | sha256sum"
            return None, None, [Problem(path, _line(entry, "token_sha256"), f"{label}: token_sha256 is not a SHA-256 hex digest", fix)]
        return bytes.fromhex(hashed), None, []
    match = ENV_REFERENCE.fullmatch(token) if isinstance(token, str) else None
    if match is None:
        fix = 'write token: "${env:NAME}" and set NAME in the environment, or give token_sha256 instead'
        return None, None, [Problem(path, _line(entry, "token"), f"{label}: a token must not be written in the file", fix)]
    try:
        value = read_secret(match.group(1))
    except MissingSecret as exc:
        return None, None, [Problem(path, _line(entry, "token"), f"{label}: {exc}", f"set {exc.name} before starting the server")]
    value = value.strip()  # a header cannot carry it: a secret file's final newline is not part of the token
    if len(value) < MIN_TOKEN_LENGTH:
        said = "is empty" if not value else f"has {len(value)} characters, fewer than {MIN_TOKEN_LENGTH}: it can be guessed"
        return None, None, [Problem(path, _line(entry, "token"), f"{label}: the token in {match.group(1)} {said}",
                                    f"set {match.group(1)} to a long random value, e.g. $(openssl rand -hex 32)")]
    return token_digest(value), value, []
