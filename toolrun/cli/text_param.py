"""``TYPED_TEXT``: the click type of an argument that is text for a model, a tool or a search (a
prompt, a ``K=V``, a query), not a path: a C locale's stand-ins for its bytes become the text typed."""

from __future__ import annotations

from typing import Any

import click

from toolrun.core.text import text_as_sent


class _TypedText(click.ParamType):
    name = "text"  # as click.STRING: the same TEXT in --help

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return text_as_sent(value) if isinstance(value, str) else value


TYPED_TEXT = _TypedText()
