"""What a backend is: a named way to run a tool, registered like a third party's plugin."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from toolrun.core.errors import Problem
from toolrun.core.tool import Tool

if TYPE_CHECKING:
    from toolrun.backends.warning import BackendWarning


@dataclass
class BackendOutput:
    """What a backend produced: the text for the model, and whether it is an error."""

    text: str
    is_error: bool = False


@dataclass
class CallContext:
    """What a call may use besides its arguments.

    ``environ`` is where ``${env:NAME}`` secrets are read; ``allow_hosts`` (None: any
    host) limits where HTTP tools may send requests, as a recipe or toolset says.
    """

    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    allow_hosts: list[str] | None = None


class Backend(ABC):
    """A way to run tools. Subclasses are registered under ``kind`` (entry point ``toolrun.backends``)."""

    kind: ClassVar[str]

    def placeholders(self, tool: Tool) -> set[str]:
        """Names of the arguments the backend's templates use (for the loader's checks)."""
        return set()

    def check(self, tool: Tool) -> list[Problem]:
        """Problems the loader can see before anything runs (bad target, bad template...)."""
        return []

    def warnings(self, tool: Tool) -> list[BackendWarning]:
        """What makes some calls fail, for the lint (``check`` reports what makes every call fail)."""
        return []

    @abstractmethod
    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        """Run one call with validated arguments.

        Must clean up (kill processes, close connections) when cancelled: the caller
        enforces the tool's timeout by cancelling the task.
        """
