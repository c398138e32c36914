"""Per-call timeouts that share one timer per event loop.

``asyncio.timeout`` schedules a timer for every block it guards and cancels it on the way out;
with a timer per tool call, a turn of 1,000 fast calls spent about an eighth of its CPU time
on the loop's timer heap (made, pushed, cancelled and popped again per call). Here the
deadlines of every call running on a loop wait in one set, and one timer — set for the
earliest of them — wakes the loop when one is due. A call whose deadline passes behaves as
under ``asyncio.timeout``: its task is cancelled and the block raises ``TimeoutError``; a
cancellation from outside (Ctrl-C, a client's cancel) still comes out as ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType


class CallTimeout:
    """``with call_timeout(seconds):`` in a task: past the deadline, the task is cancelled and
    the block raises ``TimeoutError`` (``asyncio.timeout``'s rules, without a timer of its own)."""

    __slots__ = ("when", "_task", "_cancelling", "_watch", "expired")

    def __init__(self, when: float, task: asyncio.Task[object], watch: _DeadlineWatch) -> None:
        self.when = when  # on the loop's clock
        self._task = task
        self._cancelling = 0
        self._watch = watch
        self.expired = False

    def __enter__(self) -> CallTimeout:
        self._cancelling = self._task.cancelling()
        self._watch.add(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._watch.waiting.discard(self)
        # the cancellation was ours and no other came since: the block timed out
        if self.expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def expire(self) -> None:
        self.expired = True
        self._task.cancel()


class _DeadlineWatch:
    """The deadlines of one loop's running calls, and the one timer that wakes the loop for the earliest.

    Holds no reference to the loop: the timer's callback finds it running. A timer set for a deadline whose
    call ended stays and finds nothing due: cancelling it would cost more than the one wake-up; a later
    call's deadline waits for it or for an earlier timer.
    """

    def __init__(self) -> None:
        self.waiting: set[CallTimeout] = set()
        self._next: float | None = None  # when the timer set last (and not yet fired) goes off

    def add(self, deadline: CallTimeout) -> None:
        self.waiting.add(deadline)
        if self._next is None or deadline.when < self._next:
            self._next = deadline.when
            asyncio.get_running_loop().call_at(deadline.when, self._fire, deadline.when)

    def _fire(self, when: float) -> None:
        if when == self._next:
            self._next = None
        loop = asyncio.get_running_loop()
        now = max(when, loop.time())  # the loop runs a timer a clock tick early: it counts as its time
        due = [deadline for deadline in self.waiting if deadline.when <= now]
        for deadline in due:
            self.waiting.discard(deadline)
            deadline.expire()
        if self.waiting and self._next is None:
            self._next = min(deadline.when for deadline in self.waiting)
            loop.call_at(self._next, self._fire, self._next)


# By the loop's id, holding neither: a watch lives while a call is inside a timeout or its timer waits on the
# loop, and either way the loop is alive, so no other loop can have that id meanwhile. Keyed by the loop itself,
# the watch's calls (their tasks hold their loop) would keep a loop closed with one still inside alive for good.
_watches: weakref.WeakValueDictionary[int, _DeadlineWatch] = weakref.WeakValueDictionary()


def call_timeout(seconds: float) -> CallTimeout:
    """A timeout of ``seconds`` from now for the running task, entered with ``with``."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task(loop)
    if task is None:
        raise RuntimeError("call_timeout is used inside a task")
    watch = _watches.get(id(loop))
    if watch is None:
        watch = _watches[id(loop)] = _DeadlineWatch()
    return CallTimeout(loop.time() + seconds, task, watch)
