"""A run without a recipe file: ``toolrun ask`` and ``toolrun chat`` make their recipe here.

``adhoc_recipe`` builds the same ``Recipe`` a file would give (tools by glob, a tools
directory, a model, a system prompt, messages), so an ad-hoc question is played by
``toolrun.arun`` exactly like a recipe: same modes, approvals, recording, output.
Text typed by a person is never a template: ``literal_template`` keeps it as written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from toolrun.core.errors import Problem, UserError
from toolrun.loop.runner import RunSettings
from toolrun.providers.base import ProviderOverrides
from toolrun.replay.recording import load_cassette
from toolrun.sessions.expect import Expectations
from toolrun.sessions.recipe import DEFAULT_TOOLS_DIR, Recipe, RecipeMessage

MODEL_ENV = "TOOLRUN_MODEL"
_ENDRAW = re.compile(r"\{%-?\s*endraw\s*-?%\}")
_TEMPLATE_MARKS = ("{{", "{%", "{#")


def literal_template(text: str) -> str:
    """A Jinja2 template that renders to ``text`` exactly (``{{`` in a question stays ``{{``)."""
    if not any(mark in text for mark in _TEMPLATE_MARKS):
        return text
    # an endraw inside the text would close the raw block early: print it as an expression instead
    body = _ENDRAW.sub(lambda match: "{% endraw %}{{ '" + match.group(0) + "' }}{% raw %}", text)
    return "{% raw %}" + body + "{% endraw %}"


def choose_model(model: str | None, *, replay: Path | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``--model``, else ``$TOOLRUN_MODEL``, else the model a replayed recording was made with."""
    env = os.environ if environ is None else environ
    if model:
        return model
    if env.get(MODEL_ENV):
        return env[MODEL_ENV]
    if replay is not None:
        recorded = load_cassette(replay).model
        if recorded:
            return recorded
    raise UserError(Problem(None, None, "no model to ask",
                            f"pass --model provider:model (e.g. openai:gpt-4o-mini) or set {MODEL_ENV}"))


def adhoc_recipe(
    *,
    name: str,
    model: str,
    tools: Sequence[str] | None = None,
    tools_dir: str | Path | None = None,
    system: str | None = None,
    messages: Sequence[tuple[str, str]] = (),
    settings: RunSettings | None = None,
    provider: ProviderOverrides | None = None,
) -> Recipe:
    """A recipe made in memory: ``tools`` names or globs (None: the whole catalog), ``messages``
    ``(role, text)`` pairs taken literally. ``name`` is what the run log and ``--json`` call it."""
    directory = Path(tools_dir) if tools_dir is not None else Path(DEFAULT_TOOLS_DIR)
    if not directory.is_dir():
        raise UserError(Problem(directory, None, "the tools directory does not exist",
                                "pass --tools-dir, or run toolrun where ./tools.d is"))
    return Recipe(
        name=name,
        model=model,
        tools=list(tools) if tools else None,
        tools_dir=directory,
        system=literal_template(system) if system else None,
        messages=[RecipeMessage(role, literal_template(text), None) for role, text in messages],
        vars={},
        settings=settings or RunSettings(),
        expect=Expectations(),
        provider=provider or ProviderOverrides(),
        path=Path(f"toolrun {name}"),  # named in messages; there is no file (and no recording beside one)
    )
