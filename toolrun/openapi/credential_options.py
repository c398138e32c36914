"""What the person importing says about credentials: ``--header``, ``--auth-env``, ``--env-prefix``.

A header given on the command line is written into the toolset file, so a value that looks
like a secret is refused unless it reads an environment variable (``${env:NAME}``): a token
typed on the command line would end up in a file meant to be committed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from toolrun.core.secrets import ENV_REFERENCE
from toolrun.openapi.document import OpenAPIError
from toolrun.openapi.security import TOKEN, Credentials

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Header names whose value is a credential whatever it looks like.
_SECRET_NAMES = re.compile(r"auth|token|key|secret|passw|session|cookie|credential|signature", re.IGNORECASE)
# Prefixes of well-known token formats (GitHub, OpenAI/Stripe, Slack, GitLab, AWS, a JWT).
_SECRET_PREFIXES = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "sk-", "sk_", "rk_", "xox", "glpat-",
                    "AKIA", "ASIA", "eyJ", "nfp_")
_RANDOM_LOOKING = re.compile(r"[A-Za-z0-9+/=_.~-]{20,}")
_TEMPLATE = re.compile(r"\{\{|\{%|\{#")


@dataclass(frozen=True)
class CredentialOptions:
    """Extra headers for every tool, the token variable's name, the prefix of every variable's name."""

    headers: tuple[tuple[str, str], ...] = ()
    auth_env: str | None = None
    env_prefix: str | None = None

    @classmethod
    def parse(cls, headers: Iterable[str] = (), auth_env: str | None = None,
              env_prefix: str | None = None) -> CredentialOptions:
        """Options as typed (``'X-Team: ops'``); OpenAPIError naming the option for a bad one."""
        if auth_env is not None and not _ENV_NAME.fullmatch(auth_env):
            raise OpenAPIError(f"--auth-env {auth_env!r} is not an environment variable name",
                               "use letters, digits and _, e.g. --auth-env GITHUB_TOKEN")
        prefix = None
        if env_prefix is not None:
            prefix = env_prefix.rstrip("_")
            if not _ENV_NAME.fullmatch(prefix):
                raise OpenAPIError(f"--env-prefix {env_prefix!r} cannot start an environment variable name",
                                   "use letters, digits and _, e.g. --env-prefix NETLIFY")
        return cls(tuple(parse_header(text) for text in headers), auth_env, prefix)


def parse_header(text: str) -> tuple[str, str]:
    """``'K: V'`` -> (K, V); OpenAPIError for a malformed header or a literal secret."""
    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not TOKEN.fullmatch(name):
        raise OpenAPIError(f"--header {text!r} is not 'Name: value'", "e.g. --header 'X-GitHub-Api-Version: 2022-11-28'")
    if any(ord(c) < 32 or ord(c) == 127 for c in value) or _TEMPLATE.search(value):
        raise OpenAPIError(f"--header {name}: the value holds a line break, a control character or a template",
                           "write the value as it is sent; a secret as ${env:NAME}")
    if looks_like_secret(name, value):
        raise OpenAPIError(f"--header {name}: the value looks like a secret, and the toolset file would keep it",
                           f"put it in an environment variable and write --header '{name}: ${{env:NAME}}' "
                           f"(e.g. '{name}: Bearer ${{env:API_TOKEN}}')")
    return name, value


def looks_like_secret(name: str, value: str) -> bool:
    """True for a literal credential: any value of an Authorization/…-Key/…-Token header, a known token
    format, or a long run of letters and digits; False once the value reads ``${env:NAME}``."""
    if ENV_REFERENCE.search(value):
        return False
    if _SECRET_NAMES.search(name):
        return True
    for word in value.split():
        if word.startswith(_SECRET_PREFIXES):
            return True
        if _RANDOM_LOOKING.fullmatch(word) and re.search(r"\d", word) and re.search(r"[A-Za-z]", word):
            return True
    return False


def apply(options: CredentialOptions, creds: Credentials) -> None:
    """Rename the token variable (``--auth-env``; a bearer token when the document names no scheme), then add
    the ``--header`` entries (replacing the document's header of the same name)."""
    if options.auth_env:
        _rename_token(creds, options.auth_env)
    for name, value in options.headers:
        for existing in [key for key in creds.headers if key.lower() == name.lower()]:
            del creds.headers[existing]
        if name.lower() == "cookie":
            creds.cookies.clear()  # the Cookie given replaces the document's cookies
        creds.headers[name] = value
        for variable in ENV_REFERENCE.findall(value):
            creds.variables.setdefault(variable, f"the {name} header (--header)")


def _rename_token(creds: Credentials, new: str) -> None:
    if not creds.variables:
        creds.headers["Authorization"] = f"Bearer ${{env:{new}}}"
        creds.variables[new] = "a bearer token (--auth-env; the document names no security scheme)"
        return
    old = next(iter(creds.variables))
    reference, replacement = f"${{env:{old}}}", f"${{env:{new}}}"
    for mapping in (creds.headers, creds.query, creds.cookies):
        for key, value in mapping.items():
            mapping[key] = value.replace(reference, replacement)
    creds.variables = {new if name == old else name: what for name, what in creds.variables.items()}
