"""The exception hierarchy: every user mistake becomes a message with a place and a fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_EXPECT_FAILED = 3
EXIT_INTERRUPTED = 130  # the shell's convention for a run stopped by Ctrl-C

# Of one file's problems, this many are listed and the rest counted: a file of a million rows with a
# typo in each is one screen of problems, not a million lines.
PROBLEMS_LISTED = 20

# The logger a failing tool's traceback goes to, at DEBUG level; `toolrun --debug` prints it.
TOOL_LOGGER = "toolrun.tools"


@dataclass(frozen=True)
class Problem:
    """One mistake in a user's file: where it is, what is wrong, how to fix it."""

    file: Path | str | None
    line: int | None
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"file", "line", "message", "fix"}``, as the ``problems`` of a ``--json`` document."""
        return {"file": None if self.file is None else str(self.file), "line": self.line,
                "message": self.message, "fix": self.fix}

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return f"{where}{self.message}" + (f" — {self.fix}" if self.fix else "")


class ToolrunError(Exception):
    """Base of every error toolrun raises on purpose."""

    exit_code = EXIT_RUN_FAILED


class UserError(ToolrunError):
    """Bad input: a file, an option, a missing credential. Exit code 2.

    ``problems`` lists the mistakes; ``unlisted`` counts those found beyond them (``bounded``).
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, problems: list[Problem] | Problem | str, *, unlisted: int = 0):
        if isinstance(problems, str):
            problems = [Problem(None, None, problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        self.unlisted = unlisted
        more = [f"and {unlisted} more problem{'' if unlisted == 1 else 's'}"] if unlisted else []
        super().__init__("\n".join([*(str(p) for p in self.problems), *more]))

    @classmethod
    def bounded(cls, problems: list[Problem], *, listed: int = PROBLEMS_LISTED) -> Self:
        """The error of every problem found, the first ``listed`` of them listed and the rest counted."""
        return cls(problems[:listed], unlisted=max(0, len(problems) - listed))


class LoadError(UserError):
    """A catalog or recipe that does not load: ``problems`` lists every mistake (file, line, fix).

    For a catalog stopped by lint errors, ``catalog`` is the loaded catalog with its findings.
    """

    def __init__(self, problems: list[Problem] | Problem | str, *, catalog: Any = None, unlisted: int = 0):
        super().__init__(problems, unlisted=unlisted)
        self.catalog = catalog


class ToolError(Exception):
    """Raise from a tool function for a deliberate error result: the message goes to the model as is."""


class RunFailed(ToolrunError):
    """The run could not complete: provider error after retries, turn limit. Exit code 1."""

    exit_code = EXIT_RUN_FAILED


class ProviderError(RunFailed):
    """A provider answered with an error, or could not be reached."""

    reason = "the provider failed"  # how a run that ends on this error says why

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class UnreadableAnswer(ProviderError):
    """A provider's answer arrived whole but is not of the shape its adapter reads (a list for an object ...).

    Raised around parsing only: an adapter's bug elsewhere stays a bug. ``provider`` names the
    adapter; ``problem`` says what was wrong with the answer.
    """

    def __init__(self, provider: str, problem: str):
        super().__init__(f"its answer has a shape toolrun cannot read ({problem}); "
                         f"is the server really {provider}-compatible?")
        self.provider = provider
        self.problem = problem
