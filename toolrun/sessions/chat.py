"""A conversation of several answers, each played like a recipe, that can be saved as one.

Each answer is one run of ``toolrun.sessions.play.run_recipe`` (``toolrun.arun``) on a recipe made in memory whose messages are
the conversation so far: every question and every final answer, as text. A saved chat is
that same recipe as a file, so replaying it sends exactly the requests the chat sent for
its last answer. Live answers are recorded as they are played (a ``RecordingTransport``
around the provider's transport, via ``RunOptions(record=...)``); ``save`` puts the last answer's
recording beside the recipe, where ``toolrun recipe`` finds it when there is no key.
A scripted model (``scripted:FILE``) is one object for the whole chat; its save is a script.

Earlier answers' tool calls are not re-sent: the model sees its own earlier answers, which
tell what the tools returned, and a saved chat stays a plain recipe. A chat keeps each request
under the model's context window (``settings.context``, drop-oldest) unless its recipe says otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import Catalog
from toolrun.core.errors import Problem, UserError
from toolrun.core.messages import StructuredOutput, Usage
from toolrun.core.private_files import write_private_text
from toolrun.core.tool import Tool
from toolrun.loop.approval import Approver
from toolrun.loop.context_settings import ContextSettings
from toolrun.loop.results import RunResult
from toolrun.loop.runner import RunObserver, RunSettings
from toolrun.loop.tool_offer import ToolSelection
from toolrun.providers import SCRIPTED_PROVIDER, split_model
from toolrun.providers.base import Provider
from toolrun.providers.scripted_file import load_scripted_model
from toolrun.replay.recording import cassette_beside
from toolrun.sessions.ask import adhoc_recipe, literal_template
from toolrun.sessions.expect import Expectations
from toolrun.sessions.play import run_recipe
from toolrun.sessions.recipe import DEFAULT_MAX_RETRIES, DEFAULT_REQUEST_TIMEOUT, Recipe, RecipeMessage, load_recipe, select_tools
from toolrun.sessions.run_options import RunOptions
from toolrun.sessions.tool_refresh import ServerToolWatch

RECORDED_HEADER = ("# Saved from toolrun chat: the conversation so far; its last answer replays offline from the\n"
                   "# recording beside this file (toolrun recipe FILE, with no API key set, or --replay).\n")
SCRIPTED_HEADER = ("# Saved from toolrun chat: the conversation so far; its last answer plays again offline from\n"
                   "# the script beside this file (toolrun recipe FILE).\n")


class ChatSession:
    """The conversation so far, the catalog it calls, and the recording of its last answer."""

    def __init__(self, base: Recipe, catalog: Catalog, *, environ: Mapping[str, str] | None = None):
        self.base = base
        self.catalog = catalog
        self._tool_watch = ServerToolWatch(catalog, base.tools)
        self.environ = environ
        self.history: list[tuple[str, str]] = []  # (role, text): questions and final answers
        self.usage = Usage()
        self.answers = 0
        self.last: RunResult | None = None  # the last answer that reached the history
        self._workdir: Path | None = None  # made for the first recording: a scripted chat records nothing
        self._last_recording: Path | None = None
        self._scripted: Provider | None = None
        provider, script = split_model(base.model_spec())
        if provider == SCRIPTED_PROVIDER:  # one script for the whole chat, not one per answer
            self._scripted = load_scripted_model(Path(script))

    @classmethod
    def open(cls, *, model: str | None = None, tools: Sequence[str] | None = None, tools_dir: Path | None = None,
             system: str | None = None, recipe: Path | None = None, environ: Mapping[str, str] | None = None,
             on_catalog: Callable[[Catalog], None] | None = None) -> ChatSession:
        """A new chat: from a recipe's model, tools, system prompt and settings (``recipe``), or
        from the options alone; an option given wins over the recipe. Loads the catalog once."""
        if recipe is not None:
            loaded = load_recipe(recipe)
            spec = loaded.model_spec(model)
            provider, script = split_model(spec)
            if provider == SCRIPTED_PROVIDER and not model:  # a recipe's own script is relative to the recipe
                spec = f"{SCRIPTED_PROVIDER}:{loaded.path.parent / script}"
            base = dataclasses.replace(
                loaded, name="chat", model=spec, tools=list(tools) if tools else loaded.tools,
                tools_dir=loaded.locate_tools_dir(tools_dir), expect=Expectations(), messages=[],
                system=literal_template(system) if system else loaded.system)
        else:
            if not model:
                raise UserError(Problem(None, None, "no model to chat with",
                                        "pass --model provider:model (e.g. openai:gpt-4o-mini), set TOOLRUN_MODEL, "
                                        "or start from a recipe with --recipe"))
            base = adhoc_recipe(name="chat", model=model, tools=tools, tools_dir=tools_dir, system=system)
        if base.settings.context is None:  # a chat grows without end: by default it keeps under the model's window
            base = dataclasses.replace(base, settings=dataclasses.replace(base.settings, context=ContextSettings()))
        catalog = load_checked_catalog(base.tools_dir, on_loaded=on_catalog, wanted=base.tool_test)
        base.select_tools(catalog)  # a typo in --tools is reported now, not at the first question
        return cls(base, catalog, environ=environ)

    @property
    def tools(self) -> list[Tool]:
        """What the model can call."""
        return select_tools(self.catalog, self.base.tools)

    @property
    def model(self) -> str:
        return self.base.model_spec()

    def recipe_for(self, question: str) -> Recipe:
        """The recipe one answer plays: the conversation so far, then ``question``."""
        messages = [*self.history, ("user", question)]
        return dataclasses.replace(self.base, messages=[RecipeMessage(role, literal_template(text), None)
                                                        for role, text in messages])

    async def answer(self, question: str, *, observer: RunObserver | None = None, approver: Approver | None = None,
                     stream: bool | None = None) -> RunResult:
        """Ask ``question`` in the conversation; an answer that reaches the model's final text joins it."""
        self.answers += 1
        self.catalog = self._tool_watch.reloaded() or self.catalog  # a server changed its tools between questions
        recording = None
        if self._scripted is None:
            if self._workdir is None:
                self._workdir = Path(tempfile.mkdtemp(prefix="toolrun-chat-"))
            recording = self._workdir / f"answer-{self.answers}.cassette.json"
        options = RunOptions(model=self._scripted, mode="live", catalog=self.catalog, observer=observer,
                             approver=approver, stream=stream, record=recording, environ=self.environ)
        result = await run_recipe(self.recipe_for(question), options)
        self.usage = self.usage + result.usage
        if not result.failed and result.final:
            self.history += [("user", question), ("assistant", result.final)]
            self.last = result
            self._last_recording = recording
        return result

    def save(self, path: Path) -> list[Path]:
        """The conversation so far as a recipe at ``path``, its last answer's recording (or script)
        beside it; returns the files written. UserError when there is nothing to save yet."""
        if self.last is None or not self.history:
            raise UserError(Problem(None, None, "nothing to save yet", "ask a question first"))
        path = Path(path)
        if path.suffix not in (".yaml", ".yml"):
            path = path.with_suffix(".yaml")
        if not path.parent.is_dir():
            raise UserError(Problem(path, None, f"the folder {path.parent} does not exist", "create it first"))
        document, written = self._document(path), [path]
        if self._scripted is not None:
            script = path.with_name(f"{path.stem}.script.yaml")
            write_private_text(script, yaml.safe_dump(script_of(self.last), allow_unicode=True, sort_keys=False))
            document["model"] = f"{SCRIPTED_PROVIDER}:{script.name}"
            written.append(script)
        elif self._last_recording is not None and self._last_recording.is_file():
            cassette = cassette_beside(path)
            recorded = json.loads(self._last_recording.read_text(encoding="utf-8"))
            recorded["recipe"] = document["name"]
            write_private_text(cassette, json.dumps(recorded, ensure_ascii=False, indent=2) + "\n")
            written.append(cassette)
        header = SCRIPTED_HEADER if self._scripted is not None else RECORDED_HEADER
        write_private_text(path, header + yaml.safe_dump(document, allow_unicode=True, sort_keys=False, width=100))
        return written

    def _document(self, path: Path) -> dict[str, Any]:
        base, last = self.base, self.last
        assert last is not None
        document: dict[str, Any] = {"name": path.stem, "model": self.model}
        if base.tools is not None:
            document["tools"] = list(base.tools)
        document["tools_dir"] = os.path.relpath(base.tools_dir.resolve(), path.parent.resolve())
        if base.system:
            document["system"] = base.system
        document["messages"] = [{role: literal_template(text)} for role, text in self.history[:-1]]
        if base.vars:
            document["vars"] = dict(base.vars)
        settings = _changed_settings(base.settings)
        if base.request_timeout != DEFAULT_REQUEST_TIMEOUT:
            settings["request_timeout"] = f"{base.request_timeout:g}s"
        if base.max_retries != DEFAULT_MAX_RETRIES:
            settings["max_retries"] = base.max_retries
        if settings:
            document["settings"] = settings
        if base.settings.output is not None:  # a recipe section of its own, not a setting
            document["output"] = _output_section(base.settings.output)
        provider = {key: value for key, value in dataclasses.asdict(base.provider).items() if value}
        if provider:
            document["provider"] = provider
        if base.allow_hosts is not None:
            document["allow_hosts"] = list(base.allow_hosts)
        called = list(dict.fromkeys(call.name for call in last.tool_calls if not call.is_error))
        if called:
            document["expect"] = {"tools_called": called}
        return document

    def close(self) -> None:
        """Forget the recordings kept for ``save``."""
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)


def script_of(result: RunResult) -> list[dict[str, Any]]:
    """A run's model turns as a ``scripted:FILE`` script (what the model said and called)."""
    items: list[dict[str, Any]] = []
    for turn in result.turns:
        item: dict[str, Any] = {}
        if turn.text:
            item["text"] = turn.text
        if turn.tool_calls:
            item["tool_calls"] = [{"name": call.name, "arguments": call.arguments} for call in turn.tool_calls]
        items.append(item or {"text": ""})
    return items


def _changed_settings(settings: RunSettings) -> dict[str, Any]:
    """The settings a recipe would write under ``settings:`` (``output`` is a section of its own)."""
    defaults = RunSettings()
    changed: dict[str, Any] = {}
    for key in (f.name for f in dataclasses.fields(settings) if f.name not in ("reset_tool_choice", "stream", "output")):
        value = getattr(settings, key)
        if value != getattr(defaults, key):
            changed[key] = value.to_mapping() if isinstance(value, ContextSettings | ToolSelection) else value
    return changed


def _output_section(output: StructuredOutput) -> dict[str, Any]:
    """A recipe's ``output:`` for ``output``."""
    section: dict[str, Any] = {"schema": output.schema} if output.schema is not None else {"json": True}
    if output.mode is not None:
        section["mode"] = output.mode
    if output.retries != StructuredOutput().retries:
        section["retries"] = output.retries
    return section
