"""The Jinja2 sandbox that renders toolrun's templates.

Imported by ``templates`` only when a template needs more than literal text and
``{{ name }}``: jinja2 costs ~25 ms to import, which a recipe's ``"{{ question }}"`` need not pay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import StrictUndefined, Template, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolrun.core.templates import MAX_EXPONENT, MAX_REPEATED_LENGTH, TemplateError


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class TemplateEnvironment(ImmutableSandboxedEnvironment):
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


def make_environment() -> TemplateEnvironment:
    """The environment every template is parsed and rendered in (one per process, made by ``templates``)."""
    # keep_trailing_newline and no autoescape: a template renders to exactly its text (templates' fast path relies on it).
    env = TemplateEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["tojson"] = _to_json  # Jinja's own tojson HTML-escapes; we want plain JSON
    return env


# ---------------------------------------------------------------- who wrote the first character

_ORIGIN = "__toolrun_origin__"  # the callable a traced template reports each piece of its output to


@dataclass(frozen=True)
class TracedTemplate:
    """A template whose output pieces say where they come from.

    ``pieces[i]`` is None for the author's literal text, else the names the i-th ``{{ }}``
    expression reads; ``assigned`` are the names the template binds itself (for, set,
    macro arguments), whose values may come from anywhere.
    """

    template: Template
    pieces: tuple[frozenset[str] | None, ...]
    assigned: frozenset[str]


def traced_template(environment: TemplateEnvironment, source: str) -> TracedTemplate:
    """``source`` compiled so that every piece of literal text and every expression it outputs is reported."""
    tree = environment.parse(source)
    assigned = frozenset(name.name for name in tree.find_all(nodes.Name) if name.ctx != "load")
    pieces: list[frozenset[str] | None] = []
    for output in list(tree.find_all(nodes.Output)):
        reported: list[nodes.Expr] = []
        for child in output.nodes:
            if isinstance(child, nodes.TemplateData):
                pieces.append(None)
                value: nodes.Expr = nodes.Const(child.data, lineno=child.lineno)
            else:
                pieces.append(_names_read(child))
                value = child
            index = nodes.Const(len(pieces) - 1, lineno=child.lineno)
            reported.append(nodes.Call(nodes.Name(_ORIGIN, "load", lineno=child.lineno), [index, value], [],
                                       None, None, lineno=child.lineno))
        output.nodes = reported
    tree.set_environment(environment)
    return TracedTemplate(environment.from_string(tree), tuple(pieces), assigned)


def _names_read(expression: nodes.Node) -> frozenset[str]:
    names = [expression, *expression.find_all(nodes.Name)]
    return frozenset(name.name for name in names if isinstance(name, nodes.Name))


def traced_output(traced: TracedTemplate, variables: Mapping[str, Any]) -> tuple[str, list[tuple[int, str]]]:
    """The rendered text and, in the order they were made, (piece index, text) of every piece output."""
    made: list[tuple[int, str]] = []

    def report(index: int, value: Any) -> str:
        text = str(value)  # what Jinja2 outputs for a value with autoescape and finalize off
        made.append((index, text))
        return text

    return traced.template.render({**variables, _ORIGIN: report}), made
