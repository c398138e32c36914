"""``asyncio.run`` for the blocking entry points, without writing out the result it returns.

Python's ``asyncio.run`` (3.11 to 3.13 at least) puts Ctrl-C's handler back at the end, and on the
way ``signal.getsignal`` formats an error message holding ``repr()`` of the finished main task, whose
repr holds ``repr()`` of its result — twice a run. For a run of 1,000 calls that is its whole
RunResult written out twice, about a tenth of the run's time. Here the result crosses in a box
with a short repr.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Boxed(Generic[T]):
    """A coroutine's result with a repr that does not depend on it."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(coroutine: Coroutine[Any, Any, T]) -> _Boxed[T]:
    return _Boxed(await coroutine)


def run_until_done(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coroutine)``: a new event loop runs it to the end and its result comes back."""
    boxed = _boxed(coroutine)
    try:
        return asyncio.run(boxed).value
    finally:
        if inspect.getcoroutinestate(boxed) == inspect.CORO_CREATED:  # never started: a loop was running already
            boxed.close()  # closed, so neither warns that it was never awaited
            coroutine.close()
