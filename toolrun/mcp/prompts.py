"""Recipes as MCP prompts (``toolrun mcp --recipes DIR``): the slash-commands of every MCP client.

Each recipe file of the folder is one prompt named like the recipe. Its vars are the
prompt's arguments — required when the recipe gives no default, their ``var_choices``
offered by ``completion/complete`` — and ``prompts/get`` renders its system prompt (as
the first message) and its messages the way ``toolrun recipe`` does: argument values are
data in the templates, never templates themselves. Plain dicts in the protocol's shapes;
the server turns them into the SDK's models. The folder is read again on each request
(a recipe is parsed again only when its file changed), so edits need no restart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrun.core.errors import UserError
from toolrun.sessions.recipe import Recipe, load_recipe

RECIPE_SUFFIXES = (".yaml", ".yml")
SCRIPT_SUFFIXES = (".script.yaml", ".script.yml")  # a scripted model's turns, which chat's /save writes beside its recipe
MAX_COMPLETIONS = 100  # the protocol's most values in one completion answer


class PromptError(ValueError):
    """A ``prompts/get`` the client got wrong (unknown prompt, missing or unknown argument): -32602."""


@dataclass(frozen=True)
class PromptArgument:
    """One var of a recipe as a prompt argument: required when the recipe gives it no default."""

    name: str
    required: bool
    description: str | None


class RecipePrompts:
    """The recipes of ``directory`` as prompts; ``report`` gets each problem of a recipe file once."""

    def __init__(self, directory: Path, report: Callable[[str], None] = lambda line: None) -> None:
        self.directory = directory
        self.report = report
        self._reported: set[str] = set()
        self._recipes: dict[str, Recipe] = {}

    def refresh(self) -> dict[str, Recipe]:
        """Read the folder again: the recipes that load, by name; the others are reported and left out."""
        recipes: dict[str, Recipe] = {}
        for path in sorted(self.directory.iterdir()) if self.directory.is_dir() else []:
            if path.suffix not in RECIPE_SUFFIXES or path.name.endswith(SCRIPT_SUFFIXES) or not path.is_file():
                continue
            try:
                recipe = load_recipe(path)
            except UserError as exc:
                self._report_once(f"error: {exc} — this recipe is not served as a prompt")
                continue
            if recipe.name in recipes:
                self._report_once(f"error: {path}: a recipe named {recipe.name!r} is already served from "
                                  f"{recipes[recipe.name].path.name} — give one of them another name")
                continue
            recipes[recipe.name] = recipe
        self._recipes = recipes
        return recipes

    def _report_once(self, line: str) -> None:
        if line not in self._reported:
            self._reported.add(line)
            self.report(line)

    # ------------------------------------------------------------------ the three requests

    def list_prompts(self) -> list[dict[str, Any]]:
        """``prompts/list``: every recipe that loads, with its arguments."""
        return [_prompt(recipe) for recipe in self.refresh().values()]

    def get(self, name: str, arguments: Mapping[str, str] | None) -> dict[str, Any]:
        """``prompts/get``: the recipe's messages rendered with ``arguments``; PromptError for a wrong request."""
        recipe = self._find(name)
        given = dict(arguments or {})
        _check_arguments(recipe, given)
        try:
            system = recipe.render_system(given)
            messages = recipe.render_messages(given)
        except UserError as exc:  # a template that fails on these values; the operator's file, not the client's
            self.report(f"error: prompt {name}: {exc}")
            raise PromptError(f"the recipe {name} could not be rendered with these arguments: "
                              f"{exc.problems[0].message}") from None
        rendered = ([{"role": "user", "content": _text(system)}] if system is not None else [])
        rendered += [{"role": message.role, "content": _text(message.text or "")} for message in messages]
        result: dict[str, Any] = {"messages": rendered}
        if recipe.description:
            result["description"] = recipe.description
        return result

    def complete(self, name: str, argument: str, typed: str) -> list[str]:
        """``completion/complete`` of a prompt argument: its choices that start with what is typed."""
        recipe = self._recipes.get(name) or self.refresh().get(name)
        if recipe is None:
            return []
        choices = recipe.var_choices.get(argument, [])
        folded = typed.casefold()
        return [choice for choice in choices if choice.casefold().startswith(folded)][:MAX_COMPLETIONS]

    def _find(self, name: str) -> Recipe:
        recipes = self.refresh()
        if name not in recipes:
            raise PromptError(f"Unknown prompt: {name}")
        return recipes[name]


def prompt_arguments(recipe: Recipe) -> list[PromptArgument]:
    """The recipe's vars as prompt arguments: required without a default; the default and choices described."""
    found = []
    for name in recipe.arguments():
        notes = []
        if name in recipe.var_choices:
            notes.append("one of: " + ", ".join(recipe.var_choices[name]))
        if name in recipe.vars:
            notes.append(f"default: {_shown(recipe.vars[name])}")
        found.append(PromptArgument(name, name not in recipe.vars, "; ".join(notes) or None))
    return found


def _check_arguments(recipe: Recipe, given: dict[str, str]) -> None:
    arguments = {argument.name: argument for argument in prompt_arguments(recipe)}
    for key, value in given.items():
        if key not in arguments:
            known = ", ".join(arguments) or "none"
            raise PromptError(f"prompt {recipe.name} has no argument {key!r} (its arguments: {known})")
        choices = recipe.var_choices.get(key)
        if choices is not None and value not in choices:
            raise PromptError(f"argument {key} of prompt {recipe.name}: {value!r} is not one of {', '.join(choices)}")
    missing = [argument.name for argument in arguments.values() if argument.required and argument.name not in given]
    if missing:
        raise PromptError(f"prompt {recipe.name} needs the argument{'s' if len(missing) > 1 else ''} {', '.join(missing)}")


def _prompt(recipe: Recipe) -> dict[str, Any]:
    arguments = []
    for argument in prompt_arguments(recipe):
        shape: dict[str, Any] = {"name": argument.name, "required": argument.required}
        if argument.description:
            shape["description"] = argument.description
        arguments.append(shape)
    description = recipe.description or f"The recipe {recipe.path.name}."
    return {"name": recipe.name, "description": description, "arguments": arguments}


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _shown(value: Any) -> str:
    shown = value if isinstance(value, str) else repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."
