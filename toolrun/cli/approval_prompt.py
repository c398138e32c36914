"""The approval prompt on a terminal: show the arguments, ask y/N, deny when nobody can answer."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

import click

from toolrun.daemon_threads import in_daemon_thread
from toolrun.secrets import redact
from toolrun.text import terminal_safe

if TYPE_CHECKING:
    from toolrun.tool import Tool

YES_ANSWERS = frozenset({"y", "yes"})


class TerminalApprover:
    """Approve with ``assume_yes``; else ask on a TTY showing the arguments; else deny."""

    def __init__(self, assume_yes: bool = False, *, stdin: TextIO | None = None,
                 asking: str = "The model wants to call"):
        self.assume_yes = assume_yes
        self.asking = asking  # who wants the call: the model in a run, the person at ``toolrun call``
        self._stdin = stdin
        self._lock: asyncio.Lock | None = None  # one question at a time when calls run concurrently

    async def __call__(self, tool: Tool, arguments: dict[str, Any]) -> bool:
        """True to run the call, False to deny it."""
        if self.assume_yes:
            return True
        stdin = self._stdin or sys.stdin
        if not (stdin and stdin.isatty()):
            click.echo(f"toolrun: denied {tool.name}: it needs approval and stdin is not a terminal "
                       "(use --yes to approve every call)", err=True)
            return False
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            shown = json.dumps(arguments, ensure_ascii=False, indent=2)
            click.echo(terminal_safe(redact(f"\n{self.asking} {tool.name} with:\n{shown}")), err=True)
            return await _ask_in_background(f"Allow this call to {tool.name}? [y/N]: ", stdin)


def _ask(question: str, stdin: TextIO) -> bool:
    click.echo(question, nl=False, err=True)
    answer = stdin.readline()
    if not answer:  # end of input: nobody is there to say yes
        click.echo("", err=True)
        return False
    return answer.strip().lower() in YES_ANSWERS


async def _ask_in_background(question: str, stdin: TextIO) -> bool:
    """Ask in a daemon thread: other calls keep running meanwhile (their timeouts stay fair), and
    Ctrl-C is not held up by a thread still blocked reading the terminal."""
    return await in_daemon_thread(lambda: _ask(question, stdin), name="toolrun-approval")
