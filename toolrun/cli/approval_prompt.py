"""The approval prompt on a terminal: show the arguments, ask y/N, deny when nobody can answer."""

from __future__ import annotations

import asyncio
import json
import os
import select
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TextIO

from toolrun.cli.echo import echo
from toolrun.core.daemon_threads import in_daemon_thread
from toolrun.core.secrets import redact
from toolrun.core.text import terminal_safe

if TYPE_CHECKING:
    from toolrun.core.tool import Tool

YES_ANSWERS = frozenset({"y", "yes"})
POLL_SECONDS = 0.1  # how soon a prompt given up (Ctrl-C in a chat) stops reading the terminal


class TerminalApprover:
    """Approve with ``assume_yes``; else ask on a TTY showing the arguments; else deny."""

    def __init__(self, assume_yes: bool = False, *, stdin: TextIO | None = None,
                 asking: str = "The model wants to call",
                 quiet: Callable[[], AbstractContextManager[None]] = nullcontext):
        self.assume_yes = assume_yes
        self.quiet = quiet  # what else writes to the terminal keeps still while the question is up (the live line)
        self.asking = asking  # who wants the call: the model in a run, the person at ``toolrun call``
        self._stdin = stdin
        self._lock: asyncio.Lock | None = None  # one question at a time when calls run concurrently
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, tool: Tool, arguments: dict[str, Any]) -> bool:
        """True to run the call, False to deny it."""
        if self.assume_yes:
            return True
        stdin = self._stdin or sys.stdin
        if not (stdin and stdin.isatty()):
            with self.quiet():  # after the call's own line, and never drawn over by the live line
                echo(f"toolrun: denied {tool.name}: it needs approval and stdin is not a terminal "
                           "(use --yes to approve every call)", err=True)
            return False
        async with self._one_at_a_time():
            with self.quiet():
                return await self._ask(tool, arguments, stdin)

    async def _ask(self, tool: Tool, arguments: dict[str, Any], stdin: TextIO) -> bool:
        shown = json.dumps(arguments, ensure_ascii=False, indent=2)
        echo(terminal_safe(redact(f"\n{self.asking} {tool.name} with:\n{shown}")), err=True)
        return await _ask_in_background(f"Allow this call to {tool.name}? [y/N]: ", stdin)

    def _one_at_a_time(self) -> asyncio.Lock:
        """The lock of the running loop: a chat plays each answer in a loop of its own, and a lock serves one loop."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock


def _ask(question: str, stdin: TextIO, given_up: threading.Event) -> bool:
    echo(question, nl=False, err=True)
    answer = _read_line(stdin, given_up)
    if given_up.is_set():
        return False  # nobody waits for this answer any more
    if not answer:  # end of input: nobody is there to say yes
        echo("", err=True)
        return False
    return answer.strip().lower() in YES_ANSWERS


async def _ask_in_background(question: str, stdin: TextIO) -> bool:
    """Ask in a daemon thread: other calls keep running meanwhile (their timeouts stay fair), and
    Ctrl-C is not held up by a thread still blocked reading the terminal."""
    given_up = threading.Event()
    try:
        return await in_daemon_thread(lambda: _ask(question, stdin, given_up), name="toolrun-approval")
    except asyncio.CancelledError:
        echo("", err=True)  # end the question's line: what is printed next starts a line of its own
        raise
    finally:
        given_up.set()  # the answer was cancelled (Ctrl-C in a chat): the line typed next is the chat's


def _read_line(stdin: TextIO, given_up: threading.Event) -> str:
    """One line of ``stdin`` ('' at its end), read only while ``given_up`` is not set.

    A terminal is polled rather than read blindly: a thread left blocked in a read after its
    prompt was given up would take the next line the person types, meant for the chat.
    """
    try:
        fd = stdin.fileno()
        select.select([fd], [], [], 0)
    except (AttributeError, OSError, ValueError):  # not a file select can watch (a test's StringIO, Windows)
        return stdin.readline()
    line = bytearray()
    while not given_up.is_set():
        ready, _, _ = select.select([fd], [], [], POLL_SECONDS)
        if not ready or given_up.is_set():
            continue
        byte = os.read(fd, 1)  # one byte at a time: what follows the line stays for the next reader
        if not byte:
            break
        line += byte
        if byte == b"\n":
            break
    return line.decode(getattr(stdin, "encoding", None) or "utf-8", "replace")
