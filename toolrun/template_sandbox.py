"""The Jinja2 sandbox that renders toolrun's templates.

Imported by ``templates`` only when a template needs more than literal text and
``{{ name }}``: jinja2 costs ~25 ms to import, which a recipe's ``"{{ question }}"`` need not pay.
"""

from __future__ import annotations

import json
from typing import Any

from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolrun.templates import MAX_EXPONENT, MAX_REPEATED_LENGTH, TemplateError


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
