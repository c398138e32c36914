"""Sandboxed Jinja2 templates over validated tool arguments.

Model-supplied values are data: they are passed to templates as variables and are never
parsed as templates themselves. ``${env:NAME}`` references in a template are turned into
variable look-ups before parsing, so a secret is inserted as data too, and a model value
that happens to contain ``${env:...}`` is never resolved.

A template that is only literal text, ``${env:NAME}`` and ``{{ name }}`` of plain values (a
recipe's ``"{{ question }}"``, an http tool's ``"Bearer ${env:TOKEN}"``) is filled in, checked
and searched for names without Jinja2, to exactly what Jinja2 would make;
Jinja2 (in ``template_sandbox``) is imported at the first template that needs more.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from toolrun.core.secrets import ENV_REFERENCE, read_secret

if TYPE_CHECKING:
    from jinja2 import Template

    from toolrun.core.template_sandbox import TemplateEnvironment, TracedTemplate

_ENV_VARIABLE = "__toolrun_env__"
MAX_REPEATED_LENGTH = 1_000_000  # what "text" * n may build in a template
MAX_EXPONENT = 1000


@functools.cache
def _environment() -> TemplateEnvironment:
    # jinja2 is imported here, at the first template that needs more than ``{{ name }}``.
    from toolrun.core.template_sandbox import make_environment

    return make_environment()


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


@functools.lru_cache(maxsize=4096)
def _compile(source: str) -> Template:
    from jinja2 import TemplateSyntaxError

    try:
        return _environment().from_string(_prepare(source))
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message} (line {exc.lineno} of the template)") from None


# ---------------------------------------------------------------- literal text and {{ name }}, without Jinja2

# What Jinja2 would read as a name in ``{{ name }}``, spelled plainly; other spellings go to Jinja2.
_PLAIN_VARIABLE = re.compile(r"\{\{[ \t\n]*([A-Za-z_][A-Za-z0-9_]*)[ \t\n]*\}\}")
_TAG_START = re.compile(r"\{[{%#]")  # where Jinja2's lexer leaves literal text
# A ${env:NAME} reference as _prepare writes it, and how _plain_parts names it (no identifier starts with "$").
_PREPARED_ENV_REFERENCE = re.compile(r"\{\{ " + _ENV_VARIABLE + r"\['([A-Za-z_][A-Za-z0-9_]*)'\] \}\}")
ENV_PART = "$env:"
# The globals of Jinja2's environment: its placeholders leave them out (a test checks the list).
JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace"})
# Names Jinja2 reads as something else (constants, operators, the template itself), and toolrun's own.
_NOT_PLAIN_NAMES = JINJA_GLOBALS | {
    "true", "false", "none", "True", "False", "None", "not", "and", "or", "in", "is", "if", "else",
    "self", "loop", "super", "caller", "varargs", "kwargs", _ENV_VARIABLE,
}
# Values whose text Jinja2 makes with str() when autoescape and finalize are off, as in template_sandbox.
_PLAIN_VALUE_TYPES = frozenset({str, int, float, bool, type(None)})


@functools.lru_cache(maxsize=4096)
def _plain_parts(source: str) -> tuple[str, ...] | None:
    """Literal text and names alternating (text, name, text, ..., text); None when ``source`` is more than that.

    Literal text is what Jinja2 copies as is: no "\\r" (its lexer turns line endings into
    "\\n") and no other tag. A tag is found where Jinja2's lexer finds it, at the leftmost
    ``{{``, ``{%`` or ``{#``, so ``{{{ x }}`` is not mistaken for ``{`` + ``{{ x }}``. A
    ``${env:NAME}`` reference is read as the tag ``_prepare`` makes of it, and stands in the
    parts as ``ENV_PART + NAME``: a name no argument can have.
    """
    if "\r" in source or _ENV_VARIABLE in source:  # the look-up _prepare writes, written by hand: Jinja2's
        return None
    if "${env:" in source:
        try:
            source = _prepare(source)
        except TemplateError:  # malformed: Jinja2's path words the error
            return None
    parts: list[str] = []
    position = 0
    while (tag := _TAG_START.search(source, position)) is not None:
        variable = _PLAIN_VARIABLE.match(source, tag.start())
        if variable is not None and variable.group(1) not in _NOT_PLAIN_NAMES:
            name = variable.group(1)
        elif (reference := _PREPARED_ENV_REFERENCE.match(source, tag.start())) is not None:
            name, variable = ENV_PART + reference.group(1), reference
        else:
            return None
        parts += [source[position:tag.start()], name]
        position = variable.end()
    parts.append(source[position:])
    return tuple(parts)


def _names(parts: tuple[str, ...]) -> frozenset[str]:
    """The argument names among ``_plain_parts``' parts (secrets are no arguments)."""
    return frozenset(name for name in parts[1::2] if not name.startswith(ENV_PART))


def _substituted(source: str, arguments: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    """``source`` rendered as Jinja2 would, when it is only literal text, ``${env:NAME}`` and ``{{ name }}`` of
    plain values; else None. Raises ``MissingSecret`` and ``TemplateError`` (an undefined name) as Jinja2's path does."""
    parts = _plain_parts(source)
    if parts is None:
        return None
    values = {**arguments}  # as Jinja2's context sees them
    pieces = list(parts)
    secrets = {index for index in range(1, len(pieces), 2) if pieces[index].startswith(ENV_PART)}
    for index in sorted(secrets):  # first, as Jinja2's path reads them: an unset one is reported before all else
        pieces[index] = read_secret(pieces[index][len(ENV_PART):], environ)
    for index in range(1, len(pieces), 2):
        name = pieces[index]
        if index in secrets:  # never an argument's value, whatever the arguments' names
            continue
        if name not in values:  # Jinja2 renders in order: the first undefined name stops it, in these words
            raise TemplateError(f"template uses an undefined value: {name!r} is undefined")
        if type(values[name]) not in _PLAIN_VALUE_TYPES:
            return None  # a value Jinja2 may show otherwise
        try:
            pieces[index] = str(values[name])
        except ValueError:  # an int too long for str(): Jinja2 raises the same
            return None
    return "".join(pieces)


# ---------------------------------------------------------------- the public functions


def check_template(source: str) -> str | None:
    """None when ``source`` parses, else the error message."""
    if _plain_parts(source) is not None:
        return None
    try:
        _compile(source)
    except TemplateError as exc:
        return str(exc)
    return None


def placeholders(source: str) -> set[str]:
    """Names of the variables a template uses (``${env:...}`` references excluded)."""
    return set(_placeholders(source))


@functools.lru_cache(maxsize=4096)
def _placeholders(source: str) -> frozenset[str]:
    # Cached: large catalogs repeat the same templates ("{{ city }}") many times.
    if not is_template(source):
        return frozenset()
    parts = _plain_parts(source)
    if parts is not None:
        return _names(parts)
    from jinja2 import TemplateSyntaxError, meta

    try:
        parsed = _environment().parse(_prepare(source))
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
    substituted = _substituted(source, arguments, environ)
    if substituted is not None:
        return substituted
    return _rendered_in_sandbox(source, arguments, environ)


def _rendered_in_sandbox(source: str, arguments: Mapping[str, Any], environ: Mapping[str, str] | None) -> str:
    from jinja2 import TemplateRuntimeError, UndefinedError

    template = _compile(source)
    env_values = {name: read_secret(name, environ) for name in ENV_REFERENCE.findall(source)}
    try:
        return template.render({**arguments, _ENV_VARIABLE: env_values})
    except TemplateError:  # the sandbox's own limits (a ValueError): already said
        raise
    except UndefinedError as exc:
        raise TemplateError(f"template uses an undefined value: {exc.message}") from None
    except TemplateRuntimeError as exc:  # the sandbox refused something: an unsafe attribute, a range too big
        raise TemplateError(f"template refused: {exc.message}") from None
    # {{ 1/0 }}, {{ "a" + 1 }}, {{ s.index("x") }}, {{ s.encode("nope") }}, a macro calling itself: the template's mistake
    except (ArithmeticError, LookupError, RecursionError, TypeError, ValueError) as exc:
        raise TemplateError(f"template failed: {type(exc).__name__}: {exc}") from None


def first_character_is_authored(source: str, arguments: Mapping[str, Any], authored: Collection[str],
                                rendered: str, environ: Mapping[str, str] | None = None) -> bool:
    """True when the first character of ``rendered`` (``source`` rendered) was written by the template's author.

    The author wrote the template's literal text (outside ``{{ }}``, ``{% %}`` and ``{# #}``,
    in a block body too) and what an expression makes of ``authored`` values and
    ``${env:...}`` alone. Anything a filter, slice or ``~`` makes of another value is not the
    author's, and neither is output that went through a set block, macro or filter block,
    whose pieces cannot be told apart: False for those, for a template that renders nothing,
    and for one that renders otherwise when traced (``random``).
    """
    from toolrun.core.template_sandbox import traced_output

    traced = _traced(source)
    env_values = {name: read_secret(name, environ) for name in ENV_REFERENCE.findall(source)}
    text, made = traced_output(traced, {**arguments, _ENV_VARIABLE: env_values})
    if not text == rendered == "".join(piece for _, piece in made):
        return False  # output captured and replayed (set block, macro, filter block), or chance: origin unknown
    trusted = ({*authored} | {_ENV_VARIABLE}) - traced.assigned  # a name the template rebinds may hold anything
    for index, piece in made:
        if piece:
            names = traced.pieces[index]
            return names is None or names <= trusted
    return False


@functools.lru_cache(maxsize=1024)
def _traced(source: str) -> TracedTemplate:
    from jinja2 import TemplateSyntaxError

    from toolrun.core.template_sandbox import traced_template

    try:
        return traced_template(_environment(), _prepare(source))
    except TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error: {exc.message} (line {exc.lineno} of the template)") from None


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
