"""Blocking work in a daemon thread, awaited as a future.

Used for sync tool functions and for the approval prompt. Not a ThreadPoolExecutor:
Python's exit joins executor threads, so a tool stuck past its timeout (or a prompt nobody
answers) would keep toolrun alive; a daemon thread is abandoned at exit instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def in_daemon_thread(function: Callable[[], T], *, name: str) -> asyncio.Future[T]:
    """Start ``function`` in a new daemon thread; a future of its result on the running loop.

    An exception that is not an ``Exception`` (``sys.exit()`` in a tool, say) reaches the
    awaiting task as a RuntimeError, never as the caller's own SystemExit. When the awaiting
    task was cancelled, or its loop is gone, the outcome is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], Any]) -> None:
        if not future.done():  # cancelled (a timeout, Ctrl-C): nobody waits for the outcome
            outcome()

    def work() -> None:
        try:
            value = function()
            outcome: Callable[[], Any] = lambda: future.set_result(value)  # noqa: E731
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            failure = exc if isinstance(exc, Exception) else RuntimeError(f"raised {type(exc).__name__}")
            outcome = lambda: future.set_exception(failure)  # noqa: E731
        try:
            loop.call_soon_threadsafe(settle, outcome)
        except RuntimeError:
            pass  # the loop is closed: the run is over

    # The thread runs in a copy of the caller's context: the run's redactor goes with it.
    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(work,), name=name, daemon=True).start()
    return future
