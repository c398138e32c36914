"""Sandboxed Jinja2 templates over validated tool arguments.

Model-supplied values are data: they are passed to templates as variables and are never
parsed as templates themselves. ``${env:NAME}`` references in a template are turned into
variable look-ups before parsing, so a secret is inserted as data too, and a model value
that happens to contain ``${env:...}`` is never resolved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, UndefinedError, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolrun.secrets import ENV_REFERENCE, read_secret

_ENV_VARIABLE = "__toolrun_env__"
MAX_REPEATED_LENGTH = 1_000_000  # what "text" * n may build in a template
MAX_EXPONENT = 1000


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class _TemplateEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with ``a.b`` on a mapping meaning its key ``b`` before any method.

    Without this, ``response.json.items`` would find ``dict.items`` instead of the
    ``items`` key of the JSON body.
    """

    # "x" * n and 10 ** n with a model-chosen n: a gigabyte or minutes of CPU from one call.
    intercepted_binops = frozenset({"*", "**"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for sequence, count in ((left, right), (right, left)):
                if isinstance(sequence, (str, list, tuple)) and isinstance(count, int) \
                        and len(sequence) * count > MAX_REPEATED_LENGTH:
                    raise TemplateError(f"template value too large: {len(sequence)} × {count} is more than "
                                        f"{MAX_REPEATED_LENGTH} characters or items")
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT \
                and isinstance(left, (int, float)) and abs(left) > 1:
            raise TemplateError(f"template value too large: a power with exponent {right} (at most {MAX_EXPONENT})")
        return super().call_binop(context, operator, left, right)


def _make_environment() -> ImmutableSandboxedEnvironment:
    env = _TemplateEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["tojson"] = _to_json  # Jinja's own tojson HTML-escapes; we want plain JSON
    return env


_environment = _make_environment()


class TemplateError(ValueError):
    """A template that does not parse or names a value that is not there."""


_LEFT_OVER_ENV = re.compile(r"\$\{env:[^}\s]*\}?")
SYNTAX_FIX = "close every {{ with }} and every {% with %} (a literal {{ is written {{ '{{' }})"
ENV_FIX = "write ${env:NAME}: a variable name of letters, digits and _, in braces"


def template_fix(error: str) -> str:
    """What to do about an error message of ``check_template``."""
    return ENV_FIX if "${env:" in error else SYNTAX_FIX


def _prepare(source: str) -> str:
    prepared = ENV_REFERENCE.sub(lambda m: f"{{{{ {_ENV_VARIABLE}[{m.group(1)!r}] }}}}", source)
    malformed = _LEFT_OVER_ENV.search(prepared)
    if malformed:  # left as text it would send "${env:my-token}" itself instead of the secret
        raise TemplateError(f"malformed ${{env:...}} reference {malformed.group(0)!r}")
    return prepared


@lru_cache(maxsize=4096)
def _compile(source: str):
    try:
        return _environment.from_string(_prepare(source))
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message} (line {exc.lineno} of the template)") from None


def check_template(source: str) -> str | None:
    """None when ``source`` parses, else the error message."""
    try:
        _compile(source)
    except TemplateError as exc:
        return str(exc)
    return None


def placeholders(source: str) -> set[str]:
    """Names of the variables a template uses (``${env:...}`` references excluded)."""
    return set(_placeholders(source))


@lru_cache(maxsize=4096)
def _placeholders(source: str) -> frozenset[str]:
    # Cached: large catalogs repeat the same templates ("{{ city }}") many times.
    if not is_template(source):
        return frozenset()
    try:
        parsed = _environment.parse(_prepare(source))
    except (TemplateSyntaxError, TemplateError):
        return frozenset()
    return frozenset(meta.find_undeclared_variables(parsed)) - {_ENV_VARIABLE}


def is_template(source: str) -> bool:
    return "{{" in source or "{%" in source or "${env:" in source


def render(source: str, arguments: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    """Render ``source`` with ``arguments`` as variables; secrets resolved from ``environ``.

    Raises ``TemplateError`` for an undefined variable and ``MissingSecret`` for an unset
    environment variable.
    """
    if not is_template(source):
        return source
    template = _compile(source)
    env_values = {name: read_secret(name, environ) for name in ENV_REFERENCE.findall(source)}
    try:
        return template.render({**arguments, _ENV_VARIABLE: env_values})
    except UndefinedError as exc:
        raise TemplateError(f"template uses an undefined value: {exc.message}") from None


def render_value(value: Any, arguments: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Any:
    """Render every string inside a JSON-like value (dict keys stay as written)."""
    if isinstance(value, str):
        return render(value, arguments, environ)
    if isinstance(value, dict):
        return {k: render_value(v, arguments, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, arguments, environ) for v in value]
    return value


def value_placeholders(value: Any) -> set[str]:
    """Every placeholder used by any string inside a JSON-like value."""
    if isinstance(value, str):
        return placeholders(value)
    if isinstance(value, dict):
        return set().union(*(value_placeholders(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(value_placeholders(v) for v in value)) if value else set()
    return set()
