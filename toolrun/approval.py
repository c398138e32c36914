"""Human approval of tool calls (DESIGN §6): ``confirm: true`` or a destructive annotation.

An ``Approver`` is any async callable ``(tool, arguments) -> bool``. ``TerminalApprover``
asks on a terminal, approves everything with ``--yes``, and denies when nobody can answer
(stdin is not a terminal): the model then gets the error result "the user denied this call".
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TextIO

import click

if TYPE_CHECKING:
    from toolrun.catalog.model import Tool

Approver = Callable[["Tool", dict[str, Any]], Awaitable[bool]]


class TerminalApprover:
    """Approve with ``assume_yes``; else ask on a TTY showing the arguments; else deny."""

    def __init__(self, assume_yes: bool = False, *, stdin: TextIO | None = None):
        self.assume_yes = assume_yes
        self._stdin = stdin
        self._lock: asyncio.Lock | None = None  # one question at a time when calls run concurrently

    async def __call__(self, tool: Tool, arguments: dict[str, Any]) -> bool:
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
            click.echo(f"\nThe model wants to call {tool.name} with:\n{shown}", err=True)
            return await asyncio.to_thread(click.confirm, f"Allow this call to {tool.name}?",
                                           default=False, err=True)
