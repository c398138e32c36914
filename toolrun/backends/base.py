"""What a backend is: a named way to run a tool, registered like a third party's plugin."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from toolrun.core.content import ContentBlock
from toolrun.core.errors import Problem
from toolrun.core.tool import Tool

if TYPE_CHECKING:
    from toolrun.backends.warning import BackendWarning


@dataclass
class BackendOutput:
    """What a backend produced: the text for the model, whether it is an error, and any images, audio or
    resources beside the text (an MCP server's; see ``toolrun.core.content``)."""

    text: str
    is_error: bool = False
    blocks: list[ContentBlock] = field(default_factory=list)


@dataclass
class CallContext:
    """What a call may use besides its arguments.

    ``environ`` is where ``${env:NAME}`` secrets are read; ``allow_hosts`` (None: any
    host) limits where HTTP tools may send requests, as a recipe or toolset says.
    """

    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    allow_hosts: list[str] | None = None


@dataclass(frozen=True)
class ConfigProblem:
    """What is wrong with one key of a backend's config: the key under ``backend.<kind>``, why, and the fix."""

    key: str
    message: str
    fix: str | None = None


class InvalidConfig(ValueError):
    """A tool's backend config did not parse (the loader reports why before anything runs)."""


class Backend(ABC):
    """A way to run tools. Subclasses are registered under ``kind`` (entry point ``toolrun.backends``).

    ``parse`` turns the raw ``backend.<kind>`` mapping into the backend's own typed config
    (or the list of what is wrong with it); ``check`` reports those problems with their lines.
    A backend that does not override ``parse`` keeps the raw mapping as its config.
    """

    kind: ClassVar[str]
    # True when arguments reach the tool only through the config's templates: a parameter none uses is a lint warning.
    arguments_through_templates: ClassVar[bool] = False

    def parse(self, config: Mapping[str, Any]) -> Any:
        """The typed config, or a ``list[ConfigProblem]``; the default keeps the mapping as it is."""
        return config

    def config_of(self, tool: Tool) -> Any:
        """The tool's typed config: the one parsed at load, else parsed now (once); ``InvalidConfig`` when it does not parse."""
        parsed = tool.backend.parsed
        if parsed is None:
            parsed = self.parse(tool.backend.config)
            if not isinstance(parsed, list):  # kept: a cached catalog's tool parses at its first call only
                tool.backend = replace(tool.backend, parsed=parsed)
        if isinstance(parsed, list):
            raise InvalidConfig(f"the {self.kind} config of tool {tool.name!r} is invalid: "
                                + "; ".join(f"{p.key}: {p.message}" for p in parsed))
        return parsed

    def config_problems(self, tool: Tool) -> list[Problem]:
        """What ``parse`` finds wrong (or found at load), each at the line of its key."""
        parsed = tool.backend.parsed if tool.backend.parsed is not None else self.parse(tool.backend.config)
        if not isinstance(parsed, list):
            return []
        return [Problem(tool.source.file, tool.source.line_of(f"backend.{self.kind}.{p.key}"), p.message, p.fix)
                for p in parsed if isinstance(p, ConfigProblem)]

    def placeholders(self, tool: Tool) -> set[str]:
        """Names of the arguments the backend's templates use (for the loader's checks)."""
        return set()

    def check(self, tool: Tool) -> list[Problem]:
        """Problems the loader can see before anything runs (bad target, bad template...): by default, ``parse``'s."""
        return self.config_problems(tool)

    def warnings(self, tool: Tool) -> list[BackendWarning]:
        """What makes some calls fail, for the lint (``check`` reports what makes every call fail)."""
        return []

    def prepare_to_serve(self) -> None:
        """Do now what this backend's first call would do once (import a client library, read CA certificates):
        a server shared by many clients calls it before it takes requests, so that no request waits for it on
        the event loop. By default nothing."""
        return  # python and shell backends have nothing to prepare: their first call imports nothing new

    def override_hint(self, tool: Tool) -> str | None:
        """Where a lint finding is fixed when the tool's text is not written in its file; None: in the file."""
        return None

    @abstractmethod
    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        """Run one call with validated arguments.

        Must clean up (kill processes, close connections) when cancelled: the caller
        enforces the tool's timeout by cancelling the task.
        """
