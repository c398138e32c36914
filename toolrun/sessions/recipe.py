"""Recipes: a chat session in YAML — tools, messages, settings, checks.

``load_recipe`` reads and validates a recipe against ``schemas/recipe.schema.json`` plus
the checks a schema cannot make (template syntax, secrets in prompts), and reports every
problem with file, line and fix, like tool files. Templates in ``system`` and
``messages`` are Jinja2 over ``vars`` (trusted recipe data) and ``--var`` overrides.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolrun.backends.base import CallContext
from toolrun.catalog.model import Catalog
from toolrun.core.errors import LoadError, Problem, UserError
from toolrun.core.json_limits import non_finite
from toolrun.core.messages import Message, TextPart
from toolrun.core.secrets import MissingSecret, env_references
from toolrun.core.templates import TemplateError, check_template, placeholders, render
from toolrun.core.text import did_you_mean, is_glob, matches_any
from toolrun.core.tool import Tool
from toolrun.core.yamlsource import LineDict, YamlSyntaxError, line_of, load_yaml_file, plain
from toolrun.loop.context_settings import DEFAULT_STRATEGY, ContextSettings
from toolrun.loop.runner import RunSettings
from toolrun.loop.tool_offer import ToolSelection, check_selection
from toolrun.providers.base import ProviderOverrides
from toolrun.sessions.expect import Expectations, check_expectations
from toolrun.sessions.recipe_cache import cached_document, keep_document
from toolrun.sessions.recipe_output import output_problems, structured_output

DEFAULT_TOOLS_DIR = "tools.d"
DEFAULT_REQUEST_TIMEOUT = 600.0  # seconds: long answers of slow models take minutes
DEFAULT_MAX_RETRIES = 2


@lru_cache(maxsize=1)
def recipe_schema() -> dict[str, Any]:
    """The published recipe schema (``toolrun schema recipe`` prints it)."""
    from toolrun.core.packaged_schemas import packaged_schema  # a cached recipe is not checked again

    return packaged_schema("recipe")


@dataclass
class RecipeMessage:
    """One message of the conversation, still a template."""

    role: str  # "user" or "assistant"
    template: str
    line: int | None


@dataclass
class Recipe:
    """A loaded, validated recipe. Templates are rendered by ``render_messages``."""

    name: str
    model: str | None
    tools: list[str] | None  # names or globs; None: the whole catalog
    tools_dir: Path
    system: str | None
    messages: list[RecipeMessage]
    vars: dict[str, Any]
    settings: RunSettings
    expect: Expectations
    provider: ProviderOverrides
    path: Path
    description: str | None = None
    allow_hosts: list[str] | None = None
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT  # seconds per model request
    max_retries: int = DEFAULT_MAX_RETRIES  # of one model request
    rate_limit: float | None = None  # most model requests per minute across a batch's runs
    var_choices: dict[str, list[str]] = field(default_factory=dict)  # the values a var may take
    document: Any = field(default=None, repr=False, compare=False)  # the YAML, for lines

    def line_of(self, *path: Any) -> int | None:
        """The line of a key path in the recipe file (``"settings", "tool_choice"``)."""
        return line_of(self.document, path) if self.document is not None else None

    def model_spec(self, override: str | None = None) -> str:
        """``--model`` if given, else the recipe's ``model``; UserError when neither says."""
        spec = override or self.model
        if not spec:
            raise UserError(Problem(self.path, None, "the recipe names no model",
                                    "add  model: provider:model  (e.g. openai:gpt-4o-mini) or pass --model"))
        return spec

    def locate_tools_dir(self, override: Path | None = None) -> Path:
        """``--tools-dir`` if given, else the recipe's ``tools_dir``, which must exist."""
        if override is not None:
            return override
        if not self.tools_dir.is_dir():
            stated = self.document is not None and "tools_dir" in self.document
            raise UserError(Problem(
                self.path, self.line_of("tools_dir") if stated else None,
                f"the tools directory {self.tools_dir} does not exist",
                "set tools_dir: relative to the recipe file (e.g. tools_dir: ../tools.d) or pass --tools-dir",
            ))
        return self.tools_dir

    def variables(self, var_overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
        """``vars`` with overrides applied (``--var``, the library's ``vars=``, an MCP prompt's arguments);
        UserError for an override nobody uses or a value its ``var_choices`` leave out."""
        overrides = dict(var_overrides or {})
        known = set(self.vars) | self.placeholders()
        for key in overrides:
            if key not in known:
                guess = did_you_mean(key, known)
                hint = f"did you mean {guess!r}?" if guess else (
                    f"this recipe's vars are: {', '.join(sorted(known))}" if known else "this recipe uses no vars")
                raise UserError(Problem(self.path, self.line_of("vars"),
                                        f"a value is given for {key!r}, which is not a var of the recipe", hint))
            choices = self.var_choices.get(key)
            if choices is not None and overrides[key] not in choices:
                raise UserError(Problem(self.path, self.line_of("var_choices", key),
                                        f"var {key}: {overrides[key]!r} is not one of {', '.join(choices)}",
                                        f"give one of them, e.g. {key}={choices[0]}"))
        return {**self.vars, **overrides}

    def arguments(self) -> list[str]:
        """The names of the recipe's vars and of the vars its templates use, declared ones first."""
        return [*self.vars, *sorted(self.placeholders() - set(self.vars))]

    def placeholders(self) -> set[str]:
        """Every var the system prompt and messages use."""
        sources = [m.template for m in self.messages] + ([self.system] if self.system else [])
        return set().union(*(placeholders(s) for s in sources))

    def render_system(self, var_overrides: Mapping[str, str] | None = None) -> str | None:
        """The system prompt with vars filled in."""
        if self.system is None:
            return None
        return self._render(self.system, self.variables(var_overrides), "system", self.line_of("system"))

    def render_messages(self, var_overrides: Mapping[str, str] | None = None) -> list[Message]:
        """The conversation with vars filled in, as neutral messages."""
        values = self.variables(var_overrides)
        return [
            Message(m.role, [TextPart(self._render(m.template, values, f"messages[{i}]", m.line))])  # type: ignore[arg-type]
            for i, m in enumerate(self.messages)
        ]

    def run_settings(self, *, max_turns: int | None = None, stream: bool | None = None,
                     parallel: bool | None = None) -> RunSettings:
        """The recipe's settings with command-line overrides (None: keep the recipe's)."""
        changes: dict[str, Any] = {k: v for k, v in {"max_turns": max_turns, "stream": stream, "parallel": parallel}.items()
                                   if v is not None}
        return dataclasses.replace(self.settings, **changes)

    @property
    def tool_test(self) -> Callable[[str], bool] | None:
        """``wants_tool`` when the recipe names its tools; None when it takes the whole catalog (then every
        file must load)."""
        return self.wants_tool if self.tools is not None else None

    @property
    def named_tools(self) -> list[str] | None:
        """The tools the recipe names (``tools`` and ``expect.tools_not_called``), when none is a glob."""
        if self.tools is None:
            return None
        named = [*self.tools, *self.expect.tools_not_called]
        return None if any(is_glob(name) for name in named) else named

    def wants_tool(self, name: str) -> bool:
        """Whether the recipe may use (or name in ``expect``) the catalog tool ``name``."""
        if self.tools is None:
            return True
        return matches_any(name, [*self.tools, *self.expect.tools_not_called])

    def select_tools(self, catalog: Catalog) -> list[Tool]:
        """The recipe's tools from ``catalog``, checked against ``tool_choice`` and ``expect``."""
        lines = self.document.get("tools") if isinstance(self.document, LineDict) else None
        item_lines = getattr(lines, "item_lines", None)
        selected = select_tools(catalog, self.tools, file=self.path, item_lines=item_lines)
        names = [tool.name for tool in selected]
        choice = self.settings.tool_choice
        if choice not in ("auto", "none", "required") and choice not in names:
            guess = did_you_mean(choice, names)
            raise UserError(Problem(self.path, self.line_of("settings", "tool_choice"),
                                    f"tool_choice {choice!r} is not one of the recipe's tools",
                                    f"did you mean {guess!r}?" if guess else
                                    f"use auto, none, required or one of: {', '.join(names) or '(no tools)'}"))
        if choice == "required" and not names:  # no request would carry it: every format sends it beside tools only
            raise UserError(Problem(self.path, self.line_of("settings", "tool_choice"),
                                    "tool_choice required makes the model call a tool, but the recipe offers none",
                                    "name the tools it may call in tools:, or set tool_choice: auto"))
        # tools_called must be offered to be callable; tools_not_called may name any catalog
        # tool (stating that an unoffered tool stays unused is fine), but not a typo
        problems = []
        for key, pool, label in (("tools_called", names, "the recipe's tools"),
                                 ("tools_not_called", list(catalog.tools), "the catalog")):
            for pattern in getattr(self.expect, key):
                if not any(fnmatchcase(name, pattern) for name in pool):
                    guess = did_you_mean(pattern, pool)
                    problems.append(Problem(self.path, self.line_of("expect", key),
                                            f"expect.{key} names {pattern!r}, which is not one of {label}",
                                            f"did you mean {guess!r}?" if guess else
                                            f"{label} has: {', '.join(pool) or '(nothing)'}"))
        if self.settings.tool_selection is not None:
            problems.extend(self._selection_problems(selected))
        if problems:
            raise UserError(problems)
        return selected

    def _selection_problems(self, selected: list[Tool]) -> list[Problem]:
        """What in ``settings.tool_selection`` cannot work with the selected tools, with its line."""
        assert self.settings.tool_selection is not None
        try:
            check_selection(self.settings.tool_selection, selected)
        except UserError as exc:
            line = self.line_of("settings", "tool_selection")
            return [dataclasses.replace(problem, file=self.path, line=line) for problem in exc.problems]
        return []

    def call_context(self, environ: Mapping[str, str] | None = None) -> CallContext:
        """What the tools of this recipe's run may use: environment and allowed hosts."""
        return CallContext(environ=os.environ if environ is None else environ, allow_hosts=self.allow_hosts)

    def provider_overrides(self, environ: Mapping[str, str] | None = None) -> ProviderOverrides:
        """``provider:`` with ``${env:NAME}`` in header values resolved (and registered as secrets)."""
        headers = {}
        for name, value in self.provider.headers.items():
            try:
                headers[name] = render(value, {}, environ)
            except MissingSecret as exc:
                raise UserError(Problem(self.path, self.line_of("provider", "headers", name),
                                        f"provider header {name} needs {exc}", f"set {exc.name} in the environment")) from None
        return dataclasses.replace(self.provider, headers=headers)

    def check(self, result: Any) -> list[str]:
        """The failing ``expect`` checks of a finished run."""
        return check_expectations(self.expect, result)

    def _render(self, template: str, values: dict[str, Any], where: str, line: int | None) -> str:
        missing = sorted(placeholders(template) - set(values))
        if missing:
            name = missing[0]
            guess = did_you_mean(name, values)
            raise UserError(Problem(self.path, line, f"{where} uses {{{{ {name} }}}} but the recipe has no var {name!r}",
                                    f"did you mean {{{{ {guess} }}}}?" if guess else
                                    f"add {name} to vars: or pass --var {name}=VALUE"))
        try:
            return render(template, values, environ={})
        except TemplateError as exc:
            raise UserError(Problem(self.path, line, f"{where}: {exc}", "fix the template")) from None


def load_recipe(path: Path) -> Recipe:
    """Read and validate a recipe file; LoadError listing every problem (file, line, fix)."""
    path = Path(path)
    if not path.is_file():
        raise LoadError(Problem(path, None, "recipe file not found", "check the path of the recipe"))
    status = path.stat()
    document = cached_document(path, status)
    if document is None:
        document = _read_and_check(path)
        keep_document(path, status, document)
    return _build(document, path)


def _read_and_check(path: Path) -> LineDict:
    """The recipe's document, held to the recipe schema and the template checks."""
    from toolrun.core.schema_errors import schema_problems  # a cached recipe is not checked again

    try:
        document = load_yaml_file(path)
    except YamlSyntaxError as exc:
        raise LoadError(exc.problem) from None
    if not isinstance(document, LineDict):
        raise LoadError(Problem(path, getattr(document, "line", 1) or 1, "a recipe must be a mapping of keys",
                                "start with  name: ...  model: ...  messages: [...]  (see toolrun schema recipe)"))
    problems = schema_problems(document, recipe_schema(), path) + _nan_problems(document, path)
    if not problems:
        templates = _template_problems(document, path)  # a broken template's vars cannot be told
        problems = templates + output_problems(document, path) + ([] if templates else _choice_problems(document, path))
    if problems:
        raise LoadError(problems)
    return document


def select_tools(catalog: Catalog, patterns: list[str] | None, *, file: Path | None = None,
                 item_lines: list[int] | None = None) -> list[Tool]:
    """Tools by name or fnmatch glob, in the order given; None: the whole catalog.

    A name or glob that matches nothing is a UserError with a did-you-mean.
    """
    if patterns is None:
        return list(catalog)
    names = list(catalog.tools)
    chosen: dict[str, Tool] = {}
    problems = []
    for index, pattern in enumerate(patterns):
        line = item_lines[index] if item_lines and index < len(item_lines) else None
        if is_glob(pattern):
            matches = [name for name in names if fnmatchcase(name, pattern)]
        else:
            matches = [pattern] if pattern in catalog else []
        if not matches:
            guess = did_you_mean(pattern, [*names, *catalog.unstarted])
            problems.append(Problem(file, line, f"no tool in the catalog matches {pattern!r}",
                                    f"did you mean {guess!r}?" if guess else
                                    f"tools in the catalog: {', '.join(names) or '(none)'}"))
        for name in matches:
            chosen.setdefault(name, catalog.tools[name])
    if problems:
        raise UserError(problems)
    return list(chosen.values())


def _template_problems(document: LineDict, path: Path) -> list[Problem]:
    sources: list[tuple[str, str, int | None]] = []
    if isinstance(document.get("system"), str):
        sources.append(("system", document["system"], line_of(document, ["system"])))
    for index, item in enumerate(document.get("messages") or []):
        for role, text in item.items():
            sources.append((f"messages[{index}].{role}", text, line_of(document, ["messages", index])))
    problems = []
    for where, source, line in sources:
        if env_references(source):
            problems.append(Problem(path, line, f"{where} reads an environment variable with ${{env:...}}; "
                                                "the model would see its value",
                                    "pass the value as a var (vars: or --var); secrets belong in tool files"))
            continue
        error = check_template(source)
        if error:
            problems.append(Problem(path, line, f"{where}: {error}", "fix the Jinja2 template"))
    return problems


def _nan_problems(document: LineDict, path: Path) -> list[Problem]:
    """``.nan`` passes every bound of the schema (no comparison holds), and JSON has neither it nor ``.inf``: a
    request carrying one (temperature: .nan) could not be sent, nor --json print a var holding one."""
    from toolrun.core.schema_errors import describe_path

    problems = [Problem(path, line_of(document, list(steps)), f"{describe_path(steps)} is "
                        f"{'.nan' if value != value else '.inf'}, which is not a number JSON can carry", "write a number")
                for steps, value in non_finite(document)]
    return sorted(problems, key=lambda problem: problem.line or 0)


def _choice_problems(document: LineDict, path: Path) -> list[Problem]:
    """``var_choices`` that can never hold: a var's own value outside them, or choices of a var nobody uses."""
    values = document.get("vars") or {}
    used = set(values)
    if isinstance(document.get("system"), str):
        used |= placeholders(document["system"])
    for item in document.get("messages") or []:
        used |= set().union(*(placeholders(text) for text in item.values()))
    problems = []
    for name, choices in (document.get("var_choices") or {}).items():
        line = line_of(document, ["var_choices", name])
        if name not in used:
            guess = did_you_mean(name, used)
            problems.append(Problem(path, line, f"var_choices names {name!r}, which is neither in vars nor used by "
                                    "a template", f"did you mean {guess!r}?" if guess else "remove it, or add the var"))
        elif isinstance(values.get(name), str) and values[name] not in choices:
            problems.append(Problem(path, line, f"var_choices of {name!r} leave out its own value "
                                    f"{values[name]!r} (vars: {name})", f"add it to the choices, or change vars: {name}"))
    return problems


def _request_timeout(settings_map: dict, path: Path) -> float:
    if "request_timeout" not in settings_map:
        return DEFAULT_REQUEST_TIMEOUT
    from toolrun.core.durations import parse_duration  # only a recipe that sets the timeout

    try:
        return parse_duration(settings_map["request_timeout"])
    except ValueError as exc:
        raise UserError(Problem(path, line_of(settings_map, ["request_timeout"]), f"settings.request_timeout: {exc}",
                                "write a duration such as 90s or 10m")) from None


def _context_settings(context_map: Mapping[str, Any] | None) -> ContextSettings | None:
    if context_map is None:
        return None
    return ContextSettings(max_input_tokens=context_map.get("max_input_tokens"),
                           strategy=context_map.get("strategy", DEFAULT_STRATEGY))


def _build(document: LineDict, path: Path) -> Recipe:
    settings_map = document.get("settings") or {}
    defaults = RunSettings()
    settings = RunSettings(
        max_turns=settings_map.get("max_turns", defaults.max_turns),
        parallel=settings_map.get("parallel", defaults.parallel),
        tool_choice=settings_map.get("tool_choice", defaults.tool_choice),
        temperature=settings_map.get("temperature", defaults.temperature),
        max_tokens=settings_map.get("max_tokens", defaults.max_tokens),
        stream=settings_map.get("stream", defaults.stream),
        max_consecutive_failures=settings_map.get("max_consecutive_failures", defaults.max_consecutive_failures),
        max_concurrency=settings_map.get("max_concurrency", defaults.max_concurrency),
        output=structured_output(document),
        context=_context_settings(settings_map.get("context")),
        tool_selection=(ToolSelection.from_mapping(plain(settings_map["tool_selection"]))
                        if settings_map.get("tool_selection") is not None else None),
    )
    provider_map = document.get("provider") or {}
    provider = ProviderOverrides(
        base_url=provider_map.get("base_url"),
        api_key_env=provider_map.get("api_key_env"),
        headers=dict(plain(provider_map.get("headers") or {})),
    )
    messages = []
    for index, item in enumerate(document["messages"]):
        (role, text), = item.items()
        messages.append(RecipeMessage(role, text, line_of(document, ["messages", index])))
    tools = document.get("tools")
    allow_hosts = document.get("allow_hosts")
    return Recipe(
        request_timeout=_request_timeout(settings_map, path),
        max_retries=settings_map.get("max_retries", DEFAULT_MAX_RETRIES),
        rate_limit=settings_map.get("rate_limit"),
        var_choices={name: list(values) for name, values in plain(document.get("var_choices") or {}).items()},
        name=document.get("name") or path.stem,
        model=document.get("model"),
        tools=list(tools) if tools is not None else None,
        tools_dir=Path(os.path.normpath(path.parent / document.get("tools_dir", DEFAULT_TOOLS_DIR))),
        system=document.get("system"),
        messages=messages,
        vars=plain(document.get("vars") or {}),
        settings=settings,
        expect=Expectations.from_mapping(plain(document.get("expect"))),
        provider=provider,
        path=path,
        description=document.get("description"),
        allow_hosts=list(allow_hosts) if allow_hosts is not None else None,
        document=document,
    )


__all__ = ["Recipe", "RecipeMessage", "check_expectations", "load_recipe", "recipe_schema", "select_tools"]
