"""The terminal approval prompt in a chat: each answer runs in an event loop of its own, and
Ctrl-C may cancel an answer while its prompt waits — on a real pseudo-terminal."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from toolrun.cli.approval_prompt import TerminalApprover

TOOL: Any = SimpleNamespace(name="delete_shop")  # the prompt reads only the tool's name


class Terminal:
    """The chat's side of a pseudo-terminal; ``reading`` is set once the prompt starts reading it."""

    def __init__(self, fd: int) -> None:
        self.file = open(fd, encoding="utf-8", closefd=False)  # closed by the fixture
        self.reading = threading.Event()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        self.reading.set()
        return self.file.fileno()

    def readline(self) -> str:
        self.reading.set()
        return self.file.readline()

    @property
    def encoding(self) -> str:
        return self.file.encoding


@pytest.fixture
def terminal() -> Iterator[tuple[Terminal, int]]:
    """A pseudo-terminal: the prompt reads its replica; the test types on its controller."""
    controller, replica = pty.openpty()
    terminal = Terminal(replica)
    try:
        yield terminal, controller
    finally:
        terminal.file.close()
        os.close(replica)
        os.close(controller)


def test_a_cancelled_prompt_leaves_the_next_line_to_the_chat(terminal: tuple[Terminal, int]) -> None:
    stdin, keyboard = terminal
    approver = TerminalApprover(stdin=stdin)  # type: ignore[arg-type]

    async def cancelled_while_asking() -> None:
        asking = asyncio.create_task(approver(TOOL, {"city": "北京"}))
        while not stdin.reading.is_set():  # the prompt is reading the terminal now
            await asyncio.sleep(0.01)
        asking.cancel()  # Ctrl-C in a chat cancels the answer, and its prompt with it
        with pytest.raises(asyncio.CancelledError):
            await asking

    asyncio.run(cancelled_while_asking())
    os.write(keyboard, b"next question\n")
    ready, _, _ = select.select([stdin.file.fileno()], [], [], 10)
    assert ready, "the cancelled prompt's thread took the line typed after it"
    assert os.read(stdin.file.fileno(), 100) == b"next question\n"


def test_concurrent_prompts_in_a_second_event_loop(terminal: tuple[Terminal, int]) -> None:
    """A chat plays each answer with asyncio.run: the one-question-at-a-time lock must serve every loop."""
    stdin, keyboard = terminal
    approver = TerminalApprover(stdin=stdin)  # type: ignore[arg-type]

    async def two_at_once() -> list[bool]:
        os.write(keyboard, b"y\nn\n")  # typed ahead: one answer a prompt, in order
        return list(await asyncio.gather(approver(TOOL, {"city": "北京"}), approver(TOOL, {"city": "上海"})))

    assert asyncio.run(two_at_once()) == [True, False]
    assert asyncio.run(two_at_once()) == [True, False]
